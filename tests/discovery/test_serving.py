"""An in-process handler served over Akri's discovery protocol: what an agent's `ExternalHandler` gets is what the
handler yields in-process, bad details come back Invalid, discoveryProperties go through, and the server registers
again when a stream ends (the agent may have restarted)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import pytest

from devplace import errors
from devplace.discovery import Device, FakeNvml, GpuHandler, HandlerRegistry, HandlerServer, RegistrationServer
from devplace.discovery._handlers import ResolvedProperties

from .streams import next_of, registry_until
from .test_nvml import capture


class Recording:
    """A handler that reports one device per discoveryProperty it was sent, then waits."""

    name = "recording"

    async def discover(
        self, details: str, properties: ResolvedProperties | None = None
    ) -> AsyncGenerator[list[Device], None]:
        if details:
            raise errors.Invalid.field("discoveryDetails", "takes none")
        yield [Device(k, {"value": repr(v)}) for k, v in sorted((properties or {}).items())]
        await asyncio.Event().wait()


@pytest.fixture
async def served(sock_dir: Path) -> AsyncIterator[tuple[HandlerRegistry, HandlerServer, asyncio.Event]]:
    registry = HandlerRegistry("node-a")
    registration = RegistrationServer(sock_dir / "reg.sock", registry)
    await registration.start()
    server = HandlerServer(Recording(), sock_dir, registration.socket_path, shared=True)
    stop = asyncio.Event()
    task = asyncio.create_task(server.run(stop))
    try:
        await registry_until(registry, lambda: "recording" in registry.names(), 10)
        await asyncio.wait_for(server.registered(), 10)
        yield registry, server, stop
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await registration.stop()


async def test_discovery_properties_reach_the_served_handler_as_bytes_or_none(
    served: tuple[HandlerRegistry, HandlerServer, asyncio.Event],
) -> None:
    registry, _, _ = served
    external = registry.get("recording")
    stream = external.discover("", {"user": b"admin", "unset": None})
    assert await next_of(stream) == [Device("unset", {"value": "None"}), Device("user", {"value": "b'admin'"})]
    await stream.aclose()


async def test_bad_details_come_back_invalid_naming_the_field(
    served: tuple[HandlerRegistry, HandlerServer, asyncio.Event],
) -> None:
    registry, _, _ = served
    with pytest.raises(errors.Invalid) as info:
        await next_of(registry.get("recording").discover("x: 1"))
    assert info.value.message == "discoveryDetails: takes none"


async def test_the_server_registers_again_when_a_stream_ends(
    served: tuple[HandlerRegistry, HandlerServer, asyncio.Event],
) -> None:
    registry, server, _ = served
    assert server.registrations == 1
    first = registry.get("recording")
    stream = first.discover("")
    await next_of(stream)
    await stream.aclose()  # the agent stopped asking: perhaps it restarted
    await registry_until(registry, lambda: registry.get("recording") is not first, 10)
    assert server.socket_path.is_socket()


async def test_the_gpu_handler_served_gives_the_agent_exactly_its_in_process_devices(sock_dir: Path) -> None:
    registry = HandlerRegistry("node-a")
    registration = RegistrationServer(sock_dir / "reg.sock", registry)
    await registration.start()
    gpus = GpuHandler(FakeNvml(capture()), root=sock_dir, wait_timeout=0.05)
    server = HandlerServer(gpus, sock_dir, registration.socket_path, shared=False)
    stop = asyncio.Event()
    task = asyncio.create_task(server.run(stop))
    try:
        await registry_until(registry, lambda: "nvml" in registry.names(), 10)
        stream = registry.get("nvml").discover("")
        over_the_wire = await next_of(stream)
        await stream.aclose()
        assert over_the_wire == gpus.devices()
        assert [d.shared for d in over_the_wire] == [False]
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await gpus.close()
        await registration.stop()
    assert not server.socket_path.exists()  # the socket goes with the server
