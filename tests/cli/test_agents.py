"""`devplace agent` in Akri's DaemonSet: Akri's environment read as Akri's agent reads it (the process itself runs
in tests/agent/test_daemon.py and tests/e2e/test_akri_handler.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from devplace.cli._agents import debug_echo_shared, registration_socket_path, usable_socket_dir
from devplace.cli._app import app
from devplace.store import open_store
from tests.agent.conftest import MiniKubelet, configuration
from tests.discovery.opcuas import peers, url_of
from tests.discovery.test_nvml import REAL_ABSENT
from tests.processes import poll_until, stop_child


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


def test_a_malformed_xid_list_stops_the_agent_at_once_naming_the_variable(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["agent", "--store", "memory", "--kubelet-dir", str(tmp_path)],
        env={"AGENT_NODE_NAME": "node-a", "DP_ENABLE_HEALTHCHECKS": "79,sometimes"},
    )
    assert result.exit_code == 1
    assert result.stderr == "error: DP_ENABLE_HEALTHCHECKS: 'sometimes' is neither an XID (a number) nor 'all'\n"


async def _agent_log_for_an_nvml_configuration(sock_dir: Path, tmp_path: Path, *flags: str) -> tuple[str, list[Any]]:
    """Run `devplace agent FLAGS` with a Configuration naming `nvml` until it has looked (the log line or the
    node's DiscoveryFailed condition), then SIGTERM it; its log and the Configuration's conditions."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    kubelet = MiniKubelet(sock_dir / "k")
    await kubelet.start()
    store = open_store(url)
    await store.create(configuration(name="gpus", handler="nvml"))
    log = tmp_path / "agent.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "devplace.cli",
            "agent",
            "--node",
            "node-a",
            "--store",
            url,
            "--kubelet-dir",
            str(sock_dir / "k"),
            *flags,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env={**os.environ, "DISCOVERY_HANDLERS_DIRECTORY": str(sock_dir / "akri")},
        )
    try:

        async def looked() -> tuple[list[Any]] | None:
            cfg = await store.get("Configuration", "gpus", "default")
            conditions = list((cfg.get("status") or {}).get("conditions") or [])
            return (conditions,) if conditions or "nvml: " in log.read_text() else None

        [conditions] = await poll_until(looked, "the agent looked for GPUs", timeout=60)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert (await store.list("Instance")).items == []
        return log.read_text(), conditions
    finally:
        await stop_child(proc, sig=signal.SIGKILL)
        await store.close()
        await kubelet.stop()


@pytest.mark.skipif(REAL_ABSENT is None, reason="this machine has a GPU")
async def test_the_agents_nvml_handler_on_a_node_without_the_driver_reports_no_gpu_in_one_log_line(
    sock_dir: Path, tmp_path: Path
) -> None:
    log, conditions = await _agent_log_for_an_nvml_configuration(sock_dir, tmp_path)
    lines = [line for line in log.splitlines() if "nvml: " in line and "agent:" not in line]
    assert len(lines) == 1
    assert lines[0].endswith(
        "nvml: reporting no GPUs: libnvidia-ml.so.1 not found: no NVIDIA driver on this node "
        "(or its libraries are not mounted here)"
    )
    assert conditions == []
    assert "nvml on" in log


async def test_an_agent_with_no_nvml_has_no_nvml_handler(sock_dir: Path, tmp_path: Path) -> None:
    log, conditions = await _agent_log_for_an_nvml_configuration(sock_dir, tmp_path, "--no-nvml")
    assert [(c["type"], c["status"]) for c in conditions] == [("DiscoveryFailed", "True")]
    assert "no discovery handler 'nvml' registered on node-a" in conditions[0]["message"]
    assert "nvml off" in log


async def _agent_outcome_for_an_opcua_configuration(
    sock_dir: Path, tmp_path: Path, discovery_url: str, *flags: str
) -> tuple[list[str], list[str], str]:
    """Run `devplace agent` (with `flags`) on a store holding one opcua Configuration asking `discovery_url` until its
    Configuration has a condition or an Instance, then SIGTERM it: the conditions' reasons, the Instances' URLs, the
    log."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    kubelet = MiniKubelet(sock_dir / "k")
    await kubelet.start()
    store = open_store(url)
    details = f"opcuaDiscoveryMethod: {{standard: {{discoveryUrls: ['{discovery_url}']}}}}"
    await store.create(configuration(name="thermos", handler="opcua", details=details))
    log = tmp_path / "agent.log"
    agent = ["agent", "--node", "node-a", "--store", url, "--kubelet-dir", str(sock_dir / "k"), *flags]
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "devplace.cli", *agent],
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env={**os.environ, "DISCOVERY_HANDLERS_DIRECTORY": str(sock_dir / "akri")},
        )
    try:

        async def outcome() -> tuple[list[str], list[str]] | None:
            cfg = await store.get("Configuration", "thermos", "default")
            reasons = [c["reason"] for c in (cfg.get("status") or {}).get("conditions") or []]
            items = (await store.list("Instance")).items
            urls = [i["spec"]["brokerProperties"]["OPCUA_DISCOVERY_URL"] for i in items]
            return (reasons, urls) if reasons or urls else None

        reasons, urls = await poll_until(outcome, "the agent's opcua outcome", timeout=60)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        return reasons, urls, log.read_text()
    finally:
        await stop_child(proc, sig=signal.SIGKILL)
        await store.close()
        await kubelet.stop()


async def test_the_agents_opcua_handler_turns_the_servers_a_discovery_server_lists_into_instances(
    sock_dir: Path, tmp_path: Path
) -> None:
    with peers() as opcua:
        lds = url_of(opcua.discovery_server())
        thermo = url_of(opcua.server("Thermo-A", register_at=lds))
        reasons, urls, log = await _agent_outcome_for_an_opcua_configuration(sock_dir, tmp_path, lds)
    assert (reasons, urls) == ([], [thermo])
    assert "opcua on" in log


async def test_an_agent_with_no_opcua_has_no_opcua_handler(sock_dir: Path, tmp_path: Path) -> None:
    nobody = "opc.tcp://127.0.0.1:1/"
    reasons, urls, log = await _agent_outcome_for_an_opcua_configuration(sock_dir, tmp_path, nobody, "--no-opcua")
    assert (reasons, urls) == (["DiscoveryHandlerNotFound"], [])
    assert "opcua off" in log


@pytest.mark.parametrize(
    ("flags", "expected"), [([], "both"), (["--device-paths", "device-plugins"], "device-plugins")]
)
def test_the_agents_device_paths_default_to_both_and_the_flag_chooses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], expected: str
) -> None:
    from devplace.agent import Agent

    seen: list[str] = []

    async def start(self: Agent) -> None:  # what the agent was configured with, then a clean stop
        seen.append(self.config.device_paths)
        raise typer.Exit(0)

    monkeypatch.setattr(Agent, "start", start)
    args = ["agent", "--node", "node-a", "--store", f"sqlite:///{tmp_path}/x.db", "--kubelet-dir", str(tmp_path)]
    CliRunner().invoke(app, [*args, *flags])
    assert seen == [expected]


def test_a_device_paths_flag_that_names_no_path_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    args = ["agent", "--node", "node-a", "--store", f"sqlite:///{tmp_path}/x.db", "--kubelet-dir", str(tmp_path)]
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, [*args, "--device-paths", "classic"])
    assert result.exit_code == 2
    assert "Invalid value for '--device-paths'" in result.stderr
    assert "'classic' is not one of 'device-plugins', 'dra', 'both'" in result.stderr
