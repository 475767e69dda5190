"""/version's answer: every field of Kubernetes' version.Info, at the API level devplace serves."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from devplace.kubeapi import API_LEVEL, git_version, version_info

VERSION_INFO = (
    "major",
    "minor",
    "gitVersion",
    "gitCommit",
    "gitTreeState",
    "buildDate",
    "goVersion",
    "compiler",
    "platform",
)


def test_version_info_has_every_field_at_the_served_level() -> None:
    info = version_info("0.1.0")
    assert set(VERSION_INFO) <= set(info)
    assert (info["major"], info["minor"], info["gitVersion"], info["devplace"]) == (
        "1",
        "32",
        "v1.32.0+devplace.0.1.0",
        "0.1.0",
    )
    assert API_LEVEL == (1, 32)
    assert all(isinstance(info[field], str) for field in VERSION_INFO)


@given(st.text(max_size=40))
def test_git_version_is_always_semver_with_build_metadata(release: str) -> None:
    text = git_version(release)
    core, plus, meta = text.partition("+")
    assert (core, plus) == ("v1.32.0", "+")
    assert meta.startswith("devplace.")
    assert all(part and all(c.isascii() and (c.isalnum() or c == "-") for c in part) for part in meta.split("."))
