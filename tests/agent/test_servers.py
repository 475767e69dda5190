"""Plugin socket names and identities."""

from __future__ import annotations

import os
from pathlib import Path

from devplace.agent import _servers as servers


def test_endpoint_names_carry_kind_namespace_and_name() -> None:
    assert servers.endpoint_name("il", "default", "cams-8120fe", Path("/var/lib/kubelet/device-plugins")) == (
        "dp-il-default_cams-8120fe.sock"
    )


def test_endpoint_names_too_long_for_af_unix_fall_back_to_a_hash() -> None:
    directory = Path("/var/lib/kubelet/device-plugins")
    long_name = "c" * 120
    name = servers.endpoint_name("cl", "default", long_name, directory)
    assert name.startswith("dp-cl-")
    assert len(os.fsencode(directory / name)) <= servers.MAX_SOCKET_PATH
    assert name == servers.endpoint_name("cl", "default", long_name, directory)
    assert name != servers.endpoint_name("il", "default", long_name, directory)


def test_socket_identity_changes_when_the_file_is_recreated(tmp_path: Path) -> None:
    path = tmp_path / "kubelet.sock"
    assert servers.socket_identity(path) is None
    path.write_text("a")
    first = servers.socket_identity(path)
    fresh = tmp_path / "fresh"
    fresh.write_text("a")  # created while the old file still exists: a different inode for sure
    fresh.replace(path)
    assert servers.socket_identity(path) not in (None, first)
