"""devplace errors cross gRPC and come back as the same kind, with the same message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from devplace import errors
from devplace.deviceplugin import abort, from_rpc_error
from devplace.deviceplugin._errors import grpc_code
from devplace.deviceplugin.v1beta1 import api_pb2 as dp
from devplace.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc

TABLE = [
    (errors.Invalid("spec.capacity: must be positive"), grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFound("instance cam-a1b2c3 not found"), grpc.StatusCode.NOT_FOUND),
    (errors.AlreadyExists("cam exists"), grpc.StatusCode.ALREADY_EXISTS),
    (errors.Conflict("stale resourceVersion 7"), grpc.StatusCode.ABORTED),
    (errors.Gone("revision 3 compacted"), grpc.StatusCode.OUT_OF_RANGE),
    (errors.Refused("cam-a1b2c3-0 is held by node-b"), grpc.StatusCode.FAILED_PRECONDITION),
    (errors.Forbidden("node-a may not write node-b's slot"), grpc.StatusCode.PERMISSION_DENIED),
    (errors.Unauthenticated("invalid bearer token"), grpc.StatusCode.UNAUTHENTICATED),
    (errors.TooManyRequests("too many open watches"), grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.Unavailable("store did not answer"), grpc.StatusCode.UNAVAILABLE),
]


@pytest.mark.parametrize(("err", "code"), TABLE)
def test_each_error_maps_to_its_status_code(err: errors.DevplaceError, code: grpc.StatusCode) -> None:
    assert grpc_code(err) == code


def test_subclass_maps_like_its_base_and_root_maps_to_unknown() -> None:
    class SlotTaken(errors.Refused):
        pass

    assert grpc_code(SlotTaken("x")) == grpc.StatusCode.FAILED_PRECONDITION
    assert grpc_code(errors.Invalid.field("spec.nodes[0]", "empty")) == grpc.StatusCode.INVALID_ARGUMENT
    assert grpc_code(errors.DevplaceError("boom")) == grpc.StatusCode.UNKNOWN


class _Raising(dp_grpc.DevicePluginServicer):
    def __init__(self) -> None:
        self.err: errors.DevplaceError = errors.DevplaceError("unset")

    async def Allocate(self, request: dp.AllocateRequest, context: Any) -> dp.AllocateResponse:
        await abort(context, self.err)


@pytest.fixture
async def raising(sock_dir: Path) -> Any:
    servicer = _Raising()
    server = grpc.aio.server()
    dp_grpc.add_DevicePluginServicer_to_server(servicer, server)
    server.add_insecure_port(f"unix://{sock_dir / 'e.sock'}")
    await server.start()
    channel = grpc.aio.insecure_channel(f"unix://{sock_dir / 'e.sock'}")
    try:
        yield servicer, dp_grpc.DevicePluginStub(channel)
    finally:
        await channel.close()
        await server.stop(None)


async def test_abort_and_from_rpc_error_round_trip_every_kind(raising: Any) -> None:
    servicer, stub = raising
    for err, code in TABLE:
        servicer.err = err
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Allocate(dp.AllocateRequest())
        assert info.value.code() == code
        back = from_rpc_error(info.value)
        assert type(back) is type(err)
        assert back.message == err.message


async def test_status_with_no_devplace_meaning_reads_back_as_root_error_naming_the_code(raising: Any) -> None:
    servicer, stub = raising
    servicer.err = errors.DevplaceError("plugin exploded")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Allocate(dp.AllocateRequest())
    back = from_rpc_error(info.value)
    assert type(back) is errors.DevplaceError
    assert back.message == "UNKNOWN: plugin exploded"


async def test_unimplemented_method_reads_back_as_root_error(raising: Any) -> None:
    _, stub = raising
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.GetDevicePluginOptions(dp.Empty())
    back = from_rpc_error(info.value)
    assert type(back) is errors.DevplaceError
    assert back.message.startswith("UNIMPLEMENTED: ")


async def test_a_dead_peer_reads_back_as_unavailable(sock_dir: Path) -> None:
    async with grpc.aio.insecure_channel(f"unix://{sock_dir / 'nobody.sock'}") as channel:
        stub = dp_grpc.DevicePluginStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Allocate(dp.AllocateRequest(), timeout=5)
    assert isinstance(from_rpc_error(info.value), errors.Unavailable)
