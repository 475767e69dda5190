"""The two transports behave alike: every test runs over real gRPC on a unix socket and over the in-process transport.

What the parts can observe must not depend on the transport: answers, status codes and details, a missing server, a
deadline, a stream ended by its server stopping, and the socket file's life (created by the server, refused when the
path is taken, removed when the server stops).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from devplace.deviceplugin import UNIX, InProcessTransport, Transport, transport_named
from devplace.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc


class Plugin(api_pb2_grpc.DevicePluginServicer):
    def __init__(self) -> None:
        self.lists: asyncio.Queue[list[str]] = asyncio.Queue()
        self.streams_closed = asyncio.Event()
        self.done_callbacks = 0

    async def GetDevicePluginOptions(self, request: api_pb2.Empty, context: Any) -> api_pb2.DevicePluginOptions:
        return api_pb2.DevicePluginOptions(get_preferred_allocation_available=True)

    async def Allocate(self, request: api_pb2.AllocateRequest, context: Any) -> api_pb2.AllocateResponse:
        ids = list(request.container_requests[0].devices_ids)
        if "held" in ids:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "slot held by node-b")
        if "slow" in ids:
            await asyncio.sleep(3600)
        context.add_done_callback(lambda _context: setattr(self, "done_callbacks", self.done_callbacks + 1))
        return api_pb2.AllocateResponse(
            container_responses=[api_pb2.ContainerAllocateResponse(envs={"SLOT": ",".join(ids)})]
        )

    async def ListAndWatch(self, request: api_pb2.Empty, context: Any) -> AsyncIterator[api_pb2.ListAndWatchResponse]:  # type: ignore[override]
        try:
            while True:
                ids = await self.lists.get()
                yield api_pb2.ListAndWatchResponse(devices=[api_pb2.Device(ID=i, health="Healthy") for i in ids])
        finally:
            self.streams_closed.set()


@pytest.fixture
def directory() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dptr-", dir="/tmp"))  # short: AF_UNIX paths end at 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["unix", "inprocess"])
def transport(request: pytest.FixtureRequest) -> Transport:
    return transport_named(request.param)


async def serve(transport: Transport, path: Path, plugin: Plugin) -> Any:
    server = transport.server()
    api_pb2_grpc.add_DevicePluginServicer_to_server(plugin, server)
    server.add_insecure_port(f"unix://{path}")
    await server.start()
    return server


def test_transport_named_gives_the_shared_unix_transport_and_a_fresh_in_process_one() -> None:
    assert transport_named("unix") is UNIX
    first, second = transport_named("inprocess"), transport_named("inprocess")
    assert isinstance(first, InProcessTransport)
    assert first is not second  # one "network" per fleet


async def test_a_call_carries_the_request_and_the_answer_through_their_serializers(
    transport: Transport, directory: Path
) -> None:
    plugin = Plugin()
    server = await serve(transport, directory / "p.sock", plugin)
    try:
        async with transport.channel(f"unix://{directory / 'p.sock'}") as channel:
            stub = api_pb2_grpc.DevicePluginStub(channel)
            options = await stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=5)
            answer = await stub.Allocate(
                api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["a", "b"])]),
                timeout=5,
            )
    finally:
        await server.stop(None)
    assert options == api_pb2.DevicePluginOptions(get_preferred_allocation_available=True)
    assert type(answer) is api_pb2.AllocateResponse
    assert dict(answer.container_responses[0].envs) == {"SLOT": "a,b"}
    assert plugin.done_callbacks == 1


async def test_an_abort_reaches_the_caller_with_its_code_and_details(transport: Transport, directory: Path) -> None:
    server = await serve(transport, directory / "p.sock", Plugin())
    try:
        async with transport.channel(f"unix://{directory / 'p.sock'}") as channel:
            stub = api_pb2_grpc.DevicePluginStub(channel)
            request = api_pb2.AllocateRequest(
                container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["held"])]
            )
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Allocate(request, timeout=5)
    finally:
        await server.stop(None)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert caught.value.details() == "slot held by node-b"


async def test_a_call_past_its_deadline_fails_with_deadline_exceeded(transport: Transport, directory: Path) -> None:
    server = await serve(transport, directory / "p.sock", Plugin())
    try:
        async with transport.channel(f"unix://{directory / 'p.sock'}") as channel:
            stub = api_pb2_grpc.DevicePluginStub(channel)
            request = api_pb2.AllocateRequest(
                container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["slow"])]
            )
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Allocate(request, timeout=0.05)
    finally:
        await server.stop(None)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_a_call_to_a_path_nobody_serves_is_unavailable(transport: Transport, directory: Path) -> None:
    async with transport.channel(f"unix://{directory / 'nobody.sock'}") as channel:
        stub = api_pb2_grpc.DevicePluginStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=5)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_wait_for_ready_waits_until_a_server_starts_at_the_path(transport: Transport, directory: Path) -> None:
    async with transport.channel(f"unix://{directory / 'p.sock'}") as channel:
        stub = api_pb2_grpc.DevicePluginStub(channel)
        call = asyncio.ensure_future(stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=10, wait_for_ready=True))
        await asyncio.sleep(0.05)
        assert not call.done()
        server = await serve(transport, directory / "p.sock", Plugin())
        try:
            options = await call
        finally:
            await server.stop(None)
    assert options.get_preferred_allocation_available is True


async def test_a_stream_delivers_each_list_and_ends_unavailable_when_its_server_stops(
    transport: Transport, directory: Path
) -> None:
    plugin = Plugin()
    server = await serve(transport, directory / "p.sock", plugin)
    received: asyncio.Queue[list[str]] = asyncio.Queue()
    async with transport.channel(f"unix://{directory / 'p.sock'}") as channel:
        stub = api_pb2_grpc.DevicePluginStub(channel)

        async def consume() -> None:
            async for response in stub.ListAndWatch(api_pb2.Empty()):
                received.put_nowait([d.ID for d in response.devices])

        consumer = asyncio.ensure_future(consume())
        for ids in (["a"], ["a", "b"]):
            plugin.lists.put_nowait(ids)
        async with asyncio.timeout(5):
            lists = [await received.get(), await received.get()]
        await server.stop(None)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async with asyncio.timeout(5):
                await consumer
    assert lists == [["a"], ["a", "b"]]
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert caught.value.details() == "Cancelling all calls"
    async with asyncio.timeout(5):
        await plugin.streams_closed.wait()  # the servicer's generator was closed: its `finally` ran


async def test_the_socket_file_lives_with_its_server_and_a_server_is_reached_through_its_file(
    transport: Transport, directory: Path
) -> None:
    path = directory / "p.sock"
    first = await serve(transport, path, Plugin())
    assert path.exists()
    second = await serve(transport, path, Plugin())  # grpc replaces a socket file left at the path
    async with transport.channel(f"unix://{path}") as channel:
        options = await api_pb2_grpc.DevicePluginStub(channel).GetDevicePluginOptions(api_pb2.Empty(), timeout=5)
        assert options.get_preferred_allocation_available is True
    await first.stop(None)
    assert not path.exists()  # a stopping server removes the file at its path, even the newer server's
    async with transport.channel(f"unix://{path}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:  # so a new caller cannot reach the second server
            await api_pb2_grpc.DevicePluginStub(channel).GetDevicePluginOptions(api_pb2.Empty(), timeout=5)
    await second.stop(None)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_a_path_taken_by_a_file_that_is_no_socket_is_refused(transport: Transport, directory: Path) -> None:
    path = directory / "p.sock"
    path.write_text("not a socket")
    with pytest.raises(RuntimeError, match="Failed to bind"):
        transport.server().add_insecure_port(f"unix://{path}")
    assert path.read_text() == "not a socket"
