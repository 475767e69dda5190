"""The container image's recipe and the systemd units, checked without docker or a running systemd.

The Dockerfile is parsed (instructions, continuation lines joined): it installs from uv.lock with uv's pinned version,
runs as a numeric non-root user, has a HEALTHCHECK on /livez, and its version labels, filled from the build argument
`make image` passes, equal what `devplace --version` prints for this tree. The units go through
`systemd-analyze verify` (Debian's systemd 252 here), whose warnings (an unknown key, say) fail the test too.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "kubernetes" / "Dockerfile"
SYSTEMD = ROOT / "deploy" / "systemd"
UNITS = ("devplace-server.service", "devplace-agent.service")
INSTALLED = "/opt/devplace/bin/devplace"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile: comments dropped, backslash-continued lines joined."""
    joined: list[str] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    assert not pending, "a continuation line ends the file"
    return [
        (parts[0].upper(), parts[1].strip() if len(parts) > 1 else "") for parts in (j.split(None, 1) for j in joined)
    ]


def final_stage(text: str) -> list[tuple[str, str]]:
    found = instructions(text)
    last_from = max(i for i, (name, _) in enumerate(found) if name == "FROM")
    return found[last_from:]


def labels(stage: list[tuple[str, str]], args: dict[str, str]) -> dict[str, str]:
    """The LABELs of a stage, `${ARG}` replaced by the build arguments given."""
    found: dict[str, str] = {}
    for name, rest in stage:
        if name == "LABEL":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                found[key] = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], value)
    return found


def cli(*args: str) -> str:
    """What `devplace ARGS` prints for this checked-out tree."""
    done = subprocess.run([sys.executable, "-m", "devplace.cli", *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def make_image_build_arg() -> str:
    """The DEVPLACE_VERSION the Makefile's `image` target passes: the command it runs, run here."""
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r'--build-arg DEVPLACE_VERSION="\$\$\(\$\(PY\) -m devplace\.cli (\w+)\)"', makefile)
    assert match is not None, "the image target passes no DEVPLACE_VERSION"
    return cli(match.group(1))


def test_the_image_labels_carry_what_devplace_version_answers_for_this_tree() -> None:
    stage = final_stage(DOCKERFILE.read_text())
    assert ("ARG", "DEVPLACE_VERSION") in stage
    version = make_image_build_arg()
    found = labels(stage, {"DEVPLACE_VERSION": version})
    assert found["io.devplace.version"] == cli("--version")
    assert found["org.opencontainers.image.version"] == cli("version")
    # and the build checks the installed CLI agrees, so a stale build argument fails the build
    runs = " ".join(rest for name, rest in stage if name == "RUN")
    assert f'test "$({INSTALLED} --version)" = "devplace ${{DEVPLACE_VERSION}}"' in runs
    assert 'test -n "${DEVPLACE_VERSION}"' in runs


def test_the_image_installs_exactly_the_lock_with_uv_s_pinned_version() -> None:
    found = instructions(DOCKERFILE.read_text())
    runs = [rest for name, rest in found if name == "RUN"]
    assert "uv sync --locked --no-dev --no-install-project" in runs
    assert "uv sync --locked --no-dev --no-editable" in runs
    assert not [run for run in runs if re.search(r"pip install (?!--no-cache-dir \"uv==)", run)]  # pip installs uv only
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]["dev"]
    [pin] = [req for req in dev if req.startswith("uv==")]
    assert ("ARG", f"UV_VERSION={pin.removeprefix('uv==')}") in found


def test_the_image_runs_as_a_numeric_non_root_user_with_a_liveness_healthcheck() -> None:
    stage = final_stage(DOCKERFILE.read_text())
    [user] = [rest for name, rest in stage if name == "USER"]
    assert re.fullmatch(r"[1-9][0-9]*:[1-9][0-9]*", user), user  # numeric, neither root's uid nor gid
    names = [name for name, _ in stage]
    assert names.index("USER") < names.index("ENTRYPOINT")
    [health] = [rest for name, rest in stage if name == "HEALTHCHECK"]
    assert "CMD [" in health
    assert "DEVPLACE_HEALTH_URL" in health
    env = " ".join(rest for name, rest in stage if name == "ENV")
    assert "DEVPLACE_HEALTH_URL=http://127.0.0.1:8080/livez" in env
    assert ("ENTRYPOINT", '["devplace"]') in stage


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("unit", UNITS)
def test_the_systemd_unit_verifies_without_a_warning(unit: str, tmp_path: Path) -> None:
    text = (SYSTEMD / unit).read_text()
    assert INSTALLED in text
    # verify checks that ExecStart's program exists: point it at this tree's devplace
    (tmp_path / unit).write_text(text.replace(INSTALLED, str(Path(sys.executable).with_name("devplace"))))
    done = subprocess.run(["systemd-analyze", "verify", str(tmp_path / unit)], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def unit_settings(unit: str) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in (SYSTEMD / unit).read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


HARDENING = {
    "NoNewPrivileges": ["yes"],
    "ProtectSystem": ["strict"],
    "ProtectHome": ["yes"],
    "PrivateTmp": ["yes"],
    "ProtectKernelModules": ["yes"],
    "RestrictSUIDSGID": ["yes"],
    "CapabilityBoundingSet": [""],
    "SystemCallArchitectures": ["native"],
}


@pytest.mark.parametrize("unit", UNITS)
def test_the_units_carry_the_hardening_options(unit: str) -> None:
    settings = unit_settings(unit)
    assert {key: settings.get(key) for key in HARDENING} == HARDENING
    assert settings["ExecStart"][0].startswith(INSTALLED + " ")


def test_the_server_runs_as_a_dynamic_user_with_its_store_in_its_state_directory() -> None:
    settings = unit_settings("devplace-server.service")
    assert (settings["DynamicUser"], settings["StateDirectory"], settings["PrivateDevices"]) == (
        ["yes"],
        ["devplace"],
        ["yes"],
    )
    assert settings["Environment"] == ["DEVPLACE_STORE=sqlite:////var/lib/devplace/devplace.db"]


def test_the_agent_reaches_the_devices_and_the_kubelet_directory_and_nothing_else_writable() -> None:
    settings = unit_settings("devplace-agent.service")
    assert settings["PrivateDevices"] == ["no"]
    assert settings["ReadWritePaths"] == ["/var/lib/kubelet", "-/var/run/cdi"]
    assert "--kubelet-dir /var/lib/kubelet" in settings["ExecStart"][0]
    assert "AF_NETLINK" in settings["RestrictAddressFamilies"][0]  # libudev's monitor
