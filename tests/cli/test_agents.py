"""`devplace agent` in Akri's DaemonSet: Akri's environment read as Akri's agent reads it (the process itself runs
in tests/agent/test_daemon.py and tests/e2e/test_akri_handler.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from devplace.cli._agents import debug_echo_shared, registration_socket_path, usable_socket_dir
from devplace.cli._app import app


@pytest.mark.parametrize(
    ("flag", "environ", "expected"),
    [
        (None, {}, (Path("/var/lib/akri/agent-registration.sock"), False)),  # Akri's default, served always
        (None, {"DISCOVERY_HANDLERS_DIRECTORY": "/srv/akri"}, (Path("/srv/akri/agent-registration.sock"), True)),
        (Path("/run/reg.sock"), {"DISCOVERY_HANDLERS_DIRECTORY": "/srv/akri"}, (Path("/run/reg.sock"), True)),
    ],
)
def test_the_registration_socket_is_in_the_discovery_handlers_directory_unless_the_flag_says(
    flag: Path | None, environ: dict[str, str], expected: tuple[Path, bool]
) -> None:
    assert registration_socket_path(flag, environ) == expected


@pytest.mark.parametrize(
    ("value", "shared"), [(None, True), ("true", True), ("True", True), ("false", False), ("0", False)]
)
def test_debug_echo_instances_shared_is_read_as_akris_helm_chart_writes_it(value: str | None, shared: bool) -> None:
    assert debug_echo_shared({} if value is None else {"DEBUG_ECHO_INSTANCES_SHARED": value}) is shared


def test_a_debug_echo_instances_shared_that_is_no_boolean_is_a_usage_error_naming_it() -> None:
    with pytest.raises(typer.BadParameter, match="DEBUG_ECHO_INSTANCES_SHARED='maybe'"):
        debug_echo_shared({"DEBUG_ECHO_INSTANCES_SHARED": "maybe"})


def test_a_directory_that_cannot_be_made_is_reported(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert usable_socket_dir(tmp_path / "akri" / "agent-registration.sock") is None
    assert (tmp_path / "akri").is_dir()
    problem = usable_socket_dir(blocker / "agent-registration.sock")
    assert problem is not None
    assert problem.startswith(f"cannot create {blocker}")


def test_a_registration_socket_asked_for_that_cannot_be_served_fails_at_once(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = CliRunner().invoke(
        app,
        ["agent", "--store", "memory", "--kubelet-dir", str(tmp_path)],
        env={"AGENT_NODE_NAME": "node-a", "DISCOVERY_HANDLERS_DIRECTORY": str(blocker)},
    )
    assert result.exit_code == 1
    assert f"error: the discovery-handler registration socket {blocker}/agent-registration.sock: cannot create" in (
        result.stderr
    )


def test_the_node_name_comes_from_akris_agent_node_name(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["agent", "--store", "memory", "--kubelet-dir", str(tmp_path)], env={"AGENT_NODE_NAME": "Node_A"}
    )
    assert result.exit_code == 1
    assert "--node: 'Node_A' must consist of lower case" in result.stderr  # AGENT_NODE_NAME was read (and checked)
