"""`devplace agent` as a real process: a sqlite store shared with the test, a mini kubelet, SIGTERM to stop.

Refusing bad options is checked in-process (the exit code and message need no fresh interpreter)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from devplace.cli.app import app
from devplace.store import open_store
from tests.processes import stop_child

from .conftest import PREFIX, MiniKubelet, configuration, eventually


async def test_devplace_agent_serves_plugins_until_sigterm(sock_dir: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    kubelet = MiniKubelet(sock_dir / "k")
    await kubelet.start()
    store = open_store(url)
    await store.create(configuration(handler="debugEcho", details="descriptions: [foo0, foo1]"))
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
        "--log-level",
        "warning",
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await eventually(lambda: kubelet.registered(f"{PREFIX}/cams"), "the CL plugin registered", timeout=30)
        items = (await store.list("Instance")).items
        assert sorted(len(i["spec"]["deviceUsage"]) for i in items) == [2, 2]
        assert {i["spec"]["brokerProperties"]["DEBUG_ECHO_DESCRIPTION"] for i in items} == {"foo0", "foo1"}
        assert len(list(kubelet.plugin_dir.glob("dp-*.sock"))) == 3
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert list(kubelet.plugin_dir.glob("dp-*.sock")) == []
        assert len((await store.list("Instance")).items) == 2  # the store is left as it is
    finally:
        await stop_child(proc, sig=signal.SIGKILL)
        await store.close()
        await kubelet.stop()


def test_devplace_agent_refuses_a_bad_node_name(sock_dir: Path) -> None:
    result = CliRunner().invoke(app, ["agent", "--node", "Node_A", "--store", "memory", "--kubelet-dir", str(sock_dir)])
    assert result.exit_code == 1
    assert "--node: 'Node_A' must consist of lower case" in result.stderr


pytestmark = pytest.mark.slow
