"""`devplace scheduler`, `devplace controller` and `devplace agent` as daemons: each does its work against a SQLite
store until SIGTERM (exit 0), and exits 1 when its supervisor reports a fatal failure. The agent waits for a store
that does not answer at start (retrying, SIGTERM still a clean stop) and fails at once on a misconfigured one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from devplace.cli import app
from devplace.store import open_store
from devplace.supervisors import Supervisor

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-a"},
    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"containers": [{"name": "main", "image": "app", "resources": {"requests": {"cpu": "1"}}}]},
}
CONFIGURATION = {
    "apiVersion": "akri.sh/v0",
    "kind": "Configuration",
    "metadata": {"name": "cam", "namespace": "default"},
    "spec": {
        "discoveryHandler": {"name": "debugEcho"},
        "capacity": 1,
        "brokerSpec": {
            "brokerPodSpec": {
                "containers": [{"name": "broker", "image": "nginx", "resources": {"limits": {"{{PLACEHOLDER}}": "1"}}}]
            }
        },
    },
}
INSTANCE = {
    "apiVersion": "akri.sh/v0",
    "kind": "Instance",
    "metadata": {"name": "cam-a1b2c3", "namespace": "default"},
    "spec": {"configurationName": "cam", "capacity": 1, "nodes": ["node-a"], "deviceUsage": {"cam-a1b2c3-0": ""}},
}


def seed(url: str, *objects: dict[str, Any]) -> None:
    async def write() -> None:
        store = open_store(url)
        try:
            for obj in objects:
                await store.create(obj)
        finally:
            await store.close()

    asyncio.run(write())


def read(url: str, kind: str) -> list[dict[str, Any]]:
    async def list_() -> list[dict[str, Any]]:
        store = open_store(url)
        try:
            return (await store.list(kind, None)).items
        finally:
            await store.close()

    return asyncio.run(list_())


def wait_for(what: Callable[[], bool], proc: subprocess.Popen[bytes], log: Any) -> None:
    """Poll until `what()` holds; a safety net of 60 s against a hang, not a timing assertion."""
    deadline = time.monotonic() + 60
    while not what():
        if proc.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            pytest.fail(f"the daemon did not do its work (exit {proc.poll()}):\n{log.read().decode()}")
        time.sleep(0.1)


@pytest.fixture
def daemon() -> Iterator[Callable[..., tuple[subprocess.Popen[bytes], Any]]]:
    """Start `python -m devplace.cli ARGS` with its output in a file; killed (by its PID) if a test leaves it."""
    started: list[subprocess.Popen[bytes]] = []
    with contextlib.ExitStack() as files:

        def start(*args: str) -> tuple[subprocess.Popen[bytes], Any]:
            log = files.enter_context(tempfile.TemporaryFile())
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            proc = subprocess.Popen([sys.executable, "-m", "devplace.cli", *args], stdout=log, stderr=log, env=env)
            started.append(proc)
            return proc, log

        yield start
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def stop(proc: subprocess.Popen[bytes], log: Any) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    log.seek(0)
    return code, log.read().decode()


def test_the_scheduler_binds_a_pending_pod_and_exits_0_on_sigterm(daemon: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/devplace.db"
    seed(url, NODE, POD)
    proc, log = daemon("scheduler", "--store", url, "--strategy", "binpack")
    wait_for(lambda: read(url, "Pod")[0]["spec"].get("nodeName") == "node-a", proc, log)
    code, output = stop(proc, log)
    assert code == 0, output
    assert f"devplace scheduler: name devplace-scheduler, strategy binpack, store {url}\n" in output
    assert output.endswith("devplace scheduler: stopped\n")


def test_the_controller_creates_a_broker_for_an_instance_and_exits_0_on_sigterm(daemon: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/devplace.db"
    seed(url, NODE, CONFIGURATION, INSTANCE)
    proc, log = daemon("controller", "--store", url, "--resource-prefix", "akri.sh")
    wait_for(lambda: [p["metadata"]["name"] for p in read(url, "Pod")] == ["cam-a1b2c3-pod"], proc, log)
    code, output = stop(proc, log)
    assert code == 0, output
    broker = read(url, "Pod")[0]
    assert broker["spec"]["containers"][0]["resources"]["limits"] == {"akri.sh/cam-a1b2c3": "1"}
    assert output.endswith("devplace controller: stopped\n")


def test_the_controller_with_leader_election_leads_does_its_work_and_releases_the_lease_on_sigterm(
    daemon: Any, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/devplace.db"
    seed(url, NODE, CONFIGURATION, INSTANCE)
    proc, log = daemon("controller", "--store", url, "--resource-prefix", "akri.sh", "--leader-elect")
    wait_for(lambda: [p["metadata"]["name"] for p in read(url, "Pod")] == ["cam-a1b2c3-pod"], proc, log)
    code, output = stop(proc, log)
    assert code == 0, output
    identity = f"{socket.gethostname()}_{proc.pid}"
    assert f"devplace controller: {identity} leads\n" in output
    [lease] = read(url, "Lease")
    assert lease["metadata"]["namespace"] == "devplace"
    assert lease["metadata"]["name"] == "devplace-controller"
    assert lease["spec"]["holderIdentity"] == ""  # released: another copy takes over at once


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--leader-elect-renew-deadline", "20"],
            "Invalid value for --leader-elect-renew-deadline: needs 0 < retry period (2.0) < renew deadline (20.0) "
            "< lease duration (15.0)",
        ),
        (
            ["--leader-elect-namespace", "Kube_System"],
            "Invalid value for --leader-elect-namespace: 'Kube_System' is not a namespace name (a DNS-1123 label)",
        ),
    ],
)
def test_a_daemon_refuses_leader_election_options_out_of_order_before_starting(
    tmp_path: Path, options: list[str], message: str
) -> None:
    args = ["controller", "--store", f"sqlite:///{tmp_path}/x.db", "--leader-elect", *options]
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert not (tmp_path / "x.db").exists()


def test_a_daemon_refuses_an_unknown_strategy_before_starting(tmp_path: Path) -> None:
    args = ["scheduler", "--store", f"sqlite:///{tmp_path}/x.db", "--strategy", "random"]
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, args)
    assert result.exit_code == 2
    assert "Invalid value for --strategy: 'random' is not one of firstFit, binpack, spread, optimal" in result.stderr


# -- fatal failures, in process --------------------------------------------------------------------------------------


async def _boom() -> None:
    raise RuntimeError("the store is gone for good")


def fail_after_start(supervisor: Callable[[Any], Supervisor]) -> Callable[[Any], None]:
    """What a part's start does in these tests: one loop that fails and may not be restarted (a fatal failure)."""

    def start(part: Any) -> None:
        supervisor(part).loop("doomed", _boom, restart=False)

    return start


def test_the_scheduler_exits_1_when_its_supervisor_reports_a_fatal_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from devplace.scheduler._schedulers import Scheduler

    original = Scheduler.start

    async def start(self: Scheduler) -> None:
        await original(self)
        fail_after_start(lambda p: p.supervisor)(self)

    monkeypatch.setattr(Scheduler, "start", start)
    result = CliRunner().invoke(app, ["scheduler", "--store", f"sqlite:///{tmp_path}/x.db"])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: devplace scheduler: a loop failed for good: RuntimeError: the store is gone for good"
    )


def test_the_controller_exits_1_when_its_supervisor_reports_a_fatal_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from devplace.controller import Controller

    original = Controller.start

    def start(self: Controller) -> None:
        original(self)
        fail_after_start(lambda p: p.supervisor)(self)

    monkeypatch.setattr(Controller, "start", start)
    result = CliRunner().invoke(app, ["controller", "--store", f"sqlite:///{tmp_path}/x.db"])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: devplace controller: a loop failed for good: RuntimeError: the store is gone for good"
    )


def test_the_agent_exits_1_when_it_reports_a_fatal_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from devplace.agent import Agent

    async def start(self: Agent) -> None:  # no kubelet here: only the failing loop runs
        fail_after_start(lambda p: p.supervisor)(self)

    monkeypatch.setattr(Agent, "start", start)
    args = ["agent", "--node", "node-a", "--store", f"sqlite:///{tmp_path}/x.db", "--kubelet-dir", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: devplace agent: a loop failed for good: RuntimeError: the store is gone for good"
    )


# -- the agent and a store that does not answer at start ---------------------------------------------------------------

ECHO = {
    "apiVersion": "akri.sh/v0",
    "kind": "Configuration",
    "metadata": {"name": "echo", "namespace": "default"},
    "spec": {"discoveryHandler": {"name": "debugEcho", "discoveryDetails": "descriptions: [foo0]"}, "capacity": 1},
}


def closed_port() -> int:
    """A loopback port nobody listens on (bound once to find it, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def output_so_far(log: Any) -> str:
    """What a running daemon wrote so far (pread: the file offset it shares with the daemon is left alone)."""
    return os.pread(log.fileno(), 1 << 22, 0).decode(errors="replace")


def test_the_agent_waits_for_an_unreachable_store_and_comes_up_when_the_server_does(
    daemon: Any, tmp_path: Path, sock_dir: Path
) -> None:
    db = f"sqlite:///{tmp_path}/devplace.db"
    seed(db, ECHO)
    port = closed_port()
    # the kubelet directory in a short one: the DRA plugin's socket (plugins_registry/devplace.io-reg.sock) must fit
    # gRPC's limit on a unix socket's path (105 bytes), which pytest's directory for this test's name leaves no room for
    args = ["--node", "node-a", "--kubelet-dir", str(sock_dir / "kubelet")]
    agent, agent_log = daemon("agent", "--store", f"http://127.0.0.1:{port}", *args)
    wait_for(lambda: output_so_far(agent_log).count("the store is unavailable") >= 2, agent, agent_log)
    server, server_log = daemon("server", "--store", db, "--port", str(port))
    wait_for(lambda: len(read(db, "Instance")) == 1, agent, agent_log)
    instance = read(db, "Instance")[0]
    assert instance["spec"]["nodes"] == ["node-a"]
    code, output = stop(agent, agent_log)
    assert code == 0, output
    assert "trying again in" in output
    assert f"devplace agent: node node-a, store http://127.0.0.1:{port}" in output
    assert output.endswith("devplace agent: stopped\n")
    assert stop(server, server_log)[0] == 0


def test_sigterm_while_the_agent_waits_for_its_store_exits_0(daemon: Any, tmp_path: Path) -> None:
    args = ["--node", "node-a", "--kubelet-dir", str(tmp_path / "kubelet")]
    agent, log = daemon("agent", "--store", f"http://127.0.0.1:{closed_port()}", *args)
    wait_for(lambda: "the store is unavailable" in output_so_far(log), agent, log)
    code, output = stop(agent, log)
    assert code == 0, output
    assert output.endswith("devplace agent: stopped before it started\n")


@pytest.mark.parametrize(
    ("store", "message"),
    [
        ("ftp://127.0.0.1:1", "error: store: unsupported store URL 'ftp://127.0.0.1:1'"),
        ("sqlite:///{tmp}/missing/dir/x.db", "error: cannot open sqlite store {tmp}/missing/dir/x.db"),
    ],
)
def test_the_agent_fails_at_once_on_a_misconfigured_store(tmp_path: Path, store: str, message: str) -> None:
    args = ["agent", "--node", "node-a", "--store", store.format(tmp=tmp_path), "--kubelet-dir", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith(message.format(tmp=tmp_path)), result.stderr


@pytest.mark.parametrize(
    ("flags", "expected"), [([], "both"), (["--device-paths", "device-plugins"], "device-plugins")]
)
def test_the_controllers_device_paths_default_to_both_and_the_flag_chooses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], expected: str
) -> None:
    from devplace.controller import Controller

    seen: list[str] = []

    def start(self: Controller) -> None:  # the shared slices' default paths, then a fatal failure ends the daemon
        seen.append(self.slices.paths)
        fail_after_start(lambda p: p.supervisor)(self)

    monkeypatch.setattr(Controller, "start", start)
    result = CliRunner().invoke(app, ["controller", "--store", f"sqlite:///{tmp_path}/x.db", *flags])
    assert result.exit_code == 1
    assert seen == [expected]
