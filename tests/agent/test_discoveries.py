"""Discovery streams: a restart closes the old stream before the new one starts; a crashed handlers loop restarts."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devplace.agent import instances
from devplace.discovery import HandlerRegistry
from devplace.discovery.echoserver import EchoServer
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
    changed = HandlerRegistry.changed
    crashes: list[int] = []

    async def crashing_once(self: HandlerRegistry) -> None:
        if not crashes:
            crashes.append(1)
            raise RuntimeError("a bug in the handlers loop")
        await changed(self)

    monkeypatch.setattr(HandlerRegistry, "changed", crashing_once)
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
