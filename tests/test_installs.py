"""A fresh machine installs what the tests last passed with: `make venv` installs uv.lock, and nothing else.

`pyproject.toml` keeps ranges (for people who install devplace as a library); uv.lock pins every version, with
hashes, and changes only on purpose (`make lock`, `make lock-upgrade`). These tests check that the environment they
run in came from the lock, and that the check `make test` runs (`uv lock --check`) fails when pyproject.toml and
the lock disagree. They run uv offline, on copies of the two files: nothing here reaches a network.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UV = Path(sys.executable).with_name("uv")


def lock() -> dict[str, set[str]]:
    """Every version the lock holds, by package name (one per resolution fork: some pins differ by Python)."""
    versions: dict[str, set[str]] = {}
    for package in tomllib.loads((ROOT / "uv.lock").read_text())["package"]:
        versions.setdefault(package["name"], set()).add(package["version"])
    return versions


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def uv_lock_check(project: Path) -> subprocess.CompletedProcess[str]:
    assert UV.exists(), f"{UV} is missing: `make venv` installs uv (the dev group pins it)"
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1"}
    return subprocess.run(
        [str(UV), "lock", "--check", "--offline", "--python", sys.executable, "--project", str(project)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_every_package_of_this_environment_that_the_lock_names_is_at_a_version_the_lock_holds() -> None:
    pinned = lock()
    installed = {normalized(d.metadata["Name"]): d.version for d in metadata.distributions()}
    off_the_lock = {
        name: (version, sorted(pinned[name]))
        for name, version in installed.items()
        if name in pinned and version not in pinned[name]
    }
    assert off_the_lock == {}
    # what the tests stand on is there, from the lock
    assert {"devplace", "pyyaml", "pytest", "uv"} <= installed.keys() & pinned.keys()


def test_the_dev_group_pins_the_uv_that_make_installs_and_the_lock_holds_it() -> None:
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]["dev"]
    (pin,) = [requirement for requirement in dev if requirement.startswith("uv==")]
    version = pin.removeprefix("uv==")
    assert lock()["uv"] == {version}
    assert metadata.version("uv") == version
    # the Makefile reads the pin from the line as written: `"uv==X",` alone on its line
    assert f'    "uv=={version}",\n' in (ROOT / "pyproject.toml").read_text()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_the_lock_check_passes_on_the_project_as_committed(project: Path) -> None:
    result = uv_lock_check(project)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("edit", "old", "new"),
    [
        ("a range the locked version falls outside", '"pyyaml>=6.0.3"', '"pyyaml>=6.0.5"'),
        ("a dependency added", '"orjson>=3.13",', '"orjson>=3.13", "six>=1.16",'),
        ("a dependency dropped", '    "orjson>=3.13",\n', ""),
        ("a dev tool pinned to another version", '"pytest==9.2.0"', '"pytest==9.1.0"'),
    ],
)
def test_the_lock_check_fails_when_pyproject_and_the_lock_disagree(
    project: Path, edit: str, old: str, new: str
) -> None:
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    assert old in text, f"the test's edit ({edit}) no longer applies to pyproject.toml"
    pyproject.write_text(text.replace(old, new, 1))
    result = uv_lock_check(project)
    assert result.returncode == 1, result.stderr
    # uv says the lock needs updating, or (offline, without the new release's metadata in its cache) that it tried
    # to resolve again and could not: either way the lock does not satisfy pyproject.toml
    assert "needs to be updated" in result.stderr or "No solution found" in result.stderr, result.stderr
    assert (project / "uv.lock").read_text() == (ROOT / "uv.lock").read_text()
