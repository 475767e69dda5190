"""Discovery streams: a restart closes the old stream before the new one starts; a crashed handlers loop restarts."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devplace.agent import _instances as instances
from devplace.discovery import HandlerRegistry
from devplace.discovery._echoserver import EchoServer
from devplace.discovery.v0 import discovery_pb2 as v0

from .conftest import Nodes, configuration, eventually


class _Streams(EchoServer):
    """The echo handler, in process, saying when each Discover stream opens and ends (by its TAG property)."""

    events: list[str]

    async def Discover(self, request: v0.DiscoverRequest, context: Any) -> AsyncIterator[v0.DiscoverResponse]:
        tag = request.discovery_properties["TAG"].vec.decode()
        self.events.append(f"open {tag}")
        try:
            async for response in super().Discover(request, context):
                yield response
        finally:
            self.events.append(f"end {tag}")


def tagged(tag: str) -> dict[str, Any]:
    return configuration(handler="echo", discovery_properties=[{"name": "TAG", "value": tag}])


async def test_a_restart_ends_the_external_handlers_old_stream_before_the_new_one_opens(nodes: Nodes) -> None:
    registration = nodes.root / "reg.sock"
    await nodes.add("node-a", registration_socket=registration)
    server = _Streams("echo", nodes.root, registration, ["ext-1"], shared=True)
    server.events = []
    stop = asyncio.Event()
    running = asyncio.create_task(server.run(stop))
    try:
        await nodes.store.create(tagged("v1"))
        await eventually(lambda: server.events == ["open v1"], "the first stream", timeout=30)
        await nodes.settle()
        cfg = await nodes.store.get("Configuration", "cams", "default")
        cfg["spec"] = tagged("v2")["spec"]
        await nodes.store.update(cfg)
        await eventually(lambda: "open v2" in server.events, "the second stream", timeout=30)
        await nodes.settle()
        assert server.events == ["open v1", "end v1", "open v2"]
    finally:
        stop.set()
        await running


async def test_a_crashed_handlers_loop_is_logged_and_restarted(
    nodes: Nodes, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    current = HandlerRegistry.current
    crashes: list[int] = []

    def crashing_once(self: HandlerRegistry) -> asyncio.Event:
        if not crashes:
            crashes.append(1)
            raise RuntimeError("a bug in the handlers loop")
        return current(self)

    monkeypatch.setattr(HandlerRegistry, "current", crashing_once)
    with caplog.at_level(logging.ERROR, logger="devplace.supervisors"):
        agent = await nodes.add("node-a")
        await eventually(lambda: agent.supervisor.restarts.get("handlers") == 1, "the handlers loop restarted")
    assert any(r.exc_info and "a bug in the handlers loop" in str(r.exc_info[1]) for r in caplog.records)
    await nodes.store.create(configuration(handler="late"))
    await nodes.settle()
    agent.handlers.add(_Late())  # the restarted loop still hears the registry
    await eventually(lambda: len(agent.cache.instances) == 1, "the late handler's Instance")
    await nodes.settle()
    assert [r.name for r in agent.cache.instances.values()] == [
        instances.instance_name("cams", "late-1", "node-a", True)
    ]
    assert agent.supervisor.failure is None


class _Late:
    name = "late"

    async def discover(self, details: str, properties: Any = None) -> AsyncIterator[list[Any]]:
        from devplace.discovery import Device

        yield [Device("late-1", {})]
        await asyncio.Event().wait()


async def test_handlers_registering_one_name_at_two_endpoints_are_merged_and_one_leaving_takes_only_its_devices(
    nodes: Nodes,
) -> None:
    """Akri's `name@endpoint`: a Configuration gets the devices of every handler of its name; a device both report
    is one Instance; when one handler goes, only the devices no other handler reports go with it."""
    registration = nodes.root / "reg.sock"
    await nodes.add("node-a", registration_socket=registration)
    await nodes.store.create(configuration(handler="echo"))
    first = EchoServer("echo", nodes.root / "a", registration, ["a-1", "both"], shared=True)
    second = EchoServer("echo", nodes.root / "b", registration, ["b-1", "both"], shared=True)
    stops = [asyncio.Event(), asyncio.Event()]
    runs = [asyncio.create_task(s.run(stop)) for s, stop in zip((first, second), stops, strict=True)]
    agent = nodes.agents["node-a"]

    def seen() -> dict[str, list[str]]:
        return {r.broker_properties["ECHO_DEVICE"]: list(r.nodes) for r in agent.cache.instances.values()}

    try:
        await eventually(lambda: len(seen()) == 3, "Instances from both handlers", timeout=30)
        await nodes.settle()
        assert sorted(agent.handlers.endpoints("echo")) == [f"echo@{first.socket_path}", f"echo@{second.socket_path}"]
        assert seen() == {"a-1": ["node-a"], "b-1": ["node-a"], "both": ["node-a"]}
        stops[1].set()
        await runs[1]
        await eventually(lambda: seen()["b-1"] == [], "the second handler's own device leaving", timeout=30)
        await nodes.settle()
        assert seen() == {"a-1": ["node-a"], "b-1": [], "both": ["node-a"]}  # b-1 only waits its offline grace
        cfg = await nodes.store.get("Configuration", "cams", "default")
        assert "conditions" not in (cfg.get("status") or {})  # one handler still streams: nothing failed
    finally:
        for stop in stops:
            stop.set()
        await asyncio.gather(*runs)
