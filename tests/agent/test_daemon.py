"""`devplace agent` as a real process: a sqlite store shared with the test, a mini kubelet, SIGTERM to stop.

Refusing bad options is checked in-process (the exit code and message need no fresh interpreter)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from devplace.agent import _instances as instances
from devplace.cli._app import app
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
        env={**os.environ, "DISCOVERY_HANDLERS_DIRECTORY": str(sock_dir / "akri")},  # not the host's /var/lib/akri
    )
    try:
        await eventually(lambda: kubelet.registered(f"{PREFIX}/cams"), "the CL plugin registered", timeout=30)
        items = (await store.list("Instance")).items
        assert sorted(len(i["spec"]["deviceUsage"]) for i in items) == [2, 2]
        assert {i["spec"]["brokerProperties"]["DEBUG_ECHO_DESCRIPTION"] for i in items} == {"foo0", "foo1"}
        assert len(list(kubelet.plugin_dir.glob("dp-*.sock"))) == 3
        assert (sock_dir / "akri" / "agent-registration.sock").is_socket()  # served without being asked for
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert list(kubelet.plugin_dir.glob("dp-*.sock")) == []
        assert not (sock_dir / "akri" / "agent-registration.sock").exists()
        assert len((await store.list("Instance")).items) == 2  # the store is left as it is
    finally:
        await stop_child(proc, sig=signal.SIGKILL)
        await store.close()
        await kubelet.stop()


def test_devplace_agent_refuses_a_bad_node_name(sock_dir: Path) -> None:
    result = CliRunner().invoke(app, ["agent", "--node", "Node_A", "--store", "memory", "--kubelet-dir", str(sock_dir)])
    assert result.exit_code == 1
    assert "--node: 'Node_A' must consist of lower case" in result.stderr


async def test_devplace_agent_honours_akris_debug_echo_environment_and_availability_file(
    sock_dir: Path, tmp_path: Path
) -> None:
    """DEBUG_ECHO_INSTANCES_SHARED=false makes debugEcho's devices local (an Instance per node); writing OFFLINE to
    the availability file takes every device away at the next poll (Akri's 10 s), anything else brings them back."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    availability = tmp_path / "availability.txt"
    kubelet = MiniKubelet(sock_dir / "k")
    await kubelet.start()
    store = open_store(url)
    await store.create(configuration(handler="debugEcho", details="descriptions: [foo0, foo1]"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "devplace.cli",
        "agent",
        "--store",
        url,
        "--kubelet-dir",
        str(sock_dir / "k"),
        "--debug-echo-availability-file",
        str(availability),
        "--log-level",
        "warning",
        env={
            **os.environ,
            "AGENT_NODE_NAME": "node-a",
            "DISCOVERY_HANDLERS_DIRECTORY": str(sock_dir / "akri"),
            "DEBUG_ECHO_INSTANCES_SHARED": "false",
        },
    )

    async def names() -> list[str]:
        return sorted(i["metadata"]["name"] for i in (await store.list("Instance")).items)

    local = sorted(instances.instance_name("cams", d, "node-a", shared=False) for d in ("foo0", "foo1"))
    try:
        await eventually_async(lambda: names_are(names, local), "the local Instances", timeout=30)
        availability.write_text("OFFLINE\n")
        await eventually_async(lambda: names_are(names, []), "every device gone", timeout=30)
        availability.write_text("back\n")
        await eventually_async(lambda: names_are(names, local), "the devices back", timeout=30)
    finally:
        await stop_child(proc)
        await store.close()
        await kubelet.stop()


async def names_are(names: Callable[[], Awaitable[list[str]]], expected: list[str]) -> bool:
    return await names() == expected


async def eventually_async(check: Callable[[], Awaitable[bool]], what: str, timeout: float) -> None:
    """Poll another process's work in small real steps, bounded (never a timed assertion)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


pytestmark = pytest.mark.slow
