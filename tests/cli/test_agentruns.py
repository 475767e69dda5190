"""`devplace agent` as a program re-executes itself as `python -m devplace.cli._agentruns` (same PID) once its options
are checked, handing them over in `$DEVPLACE_AGENT_RUN`; what it hands over is parsed strictly."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from devplace import errors
from devplace.cli._agentruns import RUN_VARIABLE, AgentRun
from tests.agent.conftest import MiniKubelet
from tests.processes import poll_until, stop_child

RUN = AgentRun(
    store="http://127.0.0.1:8080",
    node="node-a",
    kubelet_dir="/var/lib/kubelet",
    resource_prefix=None,
    release_grace=300.0,
    offline_grace=300.0,
    podresources_poll=10.0,
    registration_socket=None,
    dra=None,
    cdi_dir="/var/run/cdi",
    device_paths="both",
    nvml=True,
    udev=False,
    opcua=True,
    opcua_interval=10.0,
    onvif=False,
    debug_echo_availability_file="/tmp/debug-echo-availability.txt",
    debug_echo_shared=True,
    log_level="info",
    log_format="json",
    metrics_port=None,
    metrics_address="127.0.0.1",
    event_loop="uvloop",
)


def test_a_run_survives_its_json_unchanged() -> None:
    assert AgentRun.from_json(RUN.to_json()) == RUN


def test_an_integer_where_seconds_are_asked_is_taken_as_seconds() -> None:
    raw = json.loads(RUN.to_json()) | {"release_grace": 5}
    run = AgentRun.from_json(json.dumps(raw))
    assert run.release_grace == 5.0
    assert isinstance(run.release_grace, float)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"node": None}, "DEVPLACE_AGENT_RUN.node: None is not a str"),
        ({"nvml": "yes"}, "DEVPLACE_AGENT_RUN.nvml: 'yes' is not a bool"),
        ({"metrics_port": True}, "DEVPLACE_AGENT_RUN.metrics_port: True is not a int | None"),
        ({"release_grace": "5"}, "DEVPLACE_AGENT_RUN.release_grace: '5' is not a float"),
        ({"device_paths": "all"}, "DEVPLACE_AGENT_RUN.device_paths: 'all' is not a DevicePaths"),
        ({"event_loop": "trio"}, "DEVPLACE_AGENT_RUN.event_loop: 'trio' is not a EventLoop"),
        ({"colour": "blue"}, "DEVPLACE_AGENT_RUN.colour: unknown field"),
    ],
)
def test_a_run_with_a_field_of_the_wrong_type_is_refused_naming_it(change: dict[str, object], message: str) -> None:
    raw = json.loads(RUN.to_json()) | change
    with pytest.raises(errors.Invalid) as caught:
        AgentRun.from_json(json.dumps(raw))
    assert caught.value.message == message


def test_a_run_missing_a_field_or_not_json_is_refused_naming_it() -> None:
    raw = dataclasses.asdict(RUN)
    del raw["cdi_dir"]
    with pytest.raises(errors.Invalid) as caught:
        AgentRun.from_json(json.dumps(raw))
    assert caught.value.message == "DEVPLACE_AGENT_RUN.cdi_dir: required"
    with pytest.raises(errors.Invalid) as caught:
        AgentRun.from_json("[1, 2]")
    assert caught.value.message == "DEVPLACE_AGENT_RUN: not a JSON object"
    with pytest.raises(errors.Invalid) as caught:
        AgentRun.from_json("{")
    assert caught.value.message.startswith("DEVPLACE_AGENT_RUN: not JSON: ")


def test_the_runner_started_by_hand_without_a_run_says_so_and_starts_nothing() -> None:
    environ = {k: v for k, v in os.environ.items() if k != RUN_VARIABLE}
    done = subprocess.run(
        [sys.executable, "-m", "devplace.cli._agentruns"], capture_output=True, text=True, env=environ, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "error: DEVPLACE_AGENT_RUN: required (this module is what `devplace agent` becomes)"
    )


def test_the_agents_process_loads_neither_typer_nor_pydantic_nor_the_other_commands() -> None:
    code = (
        "import json, sys, devplace.cli._agentruns, devplace.agent, devplace.discovery, devplace.store\n"
        "tops = ('typer', 'click', 'pydantic', 'pydantic_core')\n"
        "cli = [m for m in sys.modules if m.split('.')[0] in tops or m.startswith('devplace.cli.')]\n"
        "print(json.dumps(sorted(cli)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded = json.loads(done.stdout)
    assert loaded == [
        "devplace.cli._agentruns",
        "devplace.cli._logs",
        "devplace.cli._probes",
        "devplace.cli._serves",
    ]


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def _uvloop_mapped(pid: int) -> bool:
    """Whether uvloop's extension module is mapped into the process (it is imported only to run on its loop)."""
    return any("/uvloop/loop." in line for line in Path(f"/proc/{pid}/maps").read_text().splitlines())


@pytest.mark.parametrize(("flags", "uvloop"), [([], True), (["--event-loop", "asyncio"], False)])
async def test_devplace_agent_becomes_the_runner_in_its_own_process_and_serves_until_sigterm(
    sock_dir: Path, tmp_path: Path, flags: list[str], uvloop: bool
) -> None:
    """By default on uvloop's event loop; `--event-loop asyncio` keeps the standard library's."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    kubelet = MiniKubelet(sock_dir / "k")
    await kubelet.start()
    log = tmp_path / "agent.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "devplace.cli", "agent", "--node", "node-a", "--store", url, *flags],
            *["--kubelet-dir", str(sock_dir / "k"), "--registration-socket", str(sock_dir / "reg.sock")],
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    try:

        async def serving() -> bool:
            return "devplace agent: node node-a" in log.read_text()

        await poll_until(serving, "the agent's banner", timeout=60)
        assert _cmdline(proc.pid) == [sys.executable, "-m", "devplace.cli._agentruns"]
        assert (sock_dir / "reg.sock").is_socket()  # the checked options arrived: handlers register here
        assert _uvloop_mapped(proc.pid) == uvloop
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert "devplace agent: stopped" in log.read_text()
    finally:
        await stop_child(proc, sig=signal.SIGKILL)
        await kubelet.stop()
