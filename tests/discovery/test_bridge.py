"""External discovery handlers over Akri's protocol: conversions, registration rules, and a real handler process."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.discovery import Device, HandlerRegistry, RegistrationServer
from devplace.discovery._bridge import (
    ExternalHandler,
    Registration,
    device_from_proto,
    device_to_proto,
    parse_registration,
)
from devplace.discovery._devices import DeviceSpec, Mount
from devplace.discovery._echoserver import ECHO_DEVICE, echoed_properties
from devplace.discovery.v0 import discovery_pb2 as v0
from devplace.discovery.v0 import discovery_pb2_grpc as v0_grpc
from tests.processes import stop_child

from .streams import next_of, registry_until

UDS = v0.RegisterDiscoveryHandlerRequest.UDS
NETWORK = v0.RegisterDiscoveryHandlerRequest.NETWORK

texts = st.text(max_size=20)
devices = st.builds(
    Device,
    id=texts,
    properties=st.dictionaries(texts, texts, max_size=4),
    shared=st.booleans(),
    mounts=st.lists(st.builds(Mount, texts, texts, st.booleans()), max_size=3).map(tuple),
    device_specs=st.lists(st.builds(DeviceSpec, texts, texts, st.sampled_from(["r", "rw", "rwm"])), max_size=3).map(
        tuple
    ),
)


@given(devices)
def test_devices_survive_the_wire_with_shared_taken_from_the_registration(device: Device) -> None:
    wire = v0.Device.FromString(device_to_proto(device).SerializeToString())
    assert device_from_proto(wire, device.shared) == device


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (
            v0.RegisterDiscoveryHandlerRequest(name="udev", endpoint="/var/lib/akri/udev.sock", endpoint_type=UDS),
            Registration("udev", "/var/lib/akri/udev.sock", network=False, shared=False),
        ),
        (
            v0.RegisterDiscoveryHandlerRequest(
                name="onvif", endpoint="http://10.0.0.7:10000", endpoint_type=NETWORK, shared=True
            ),
            Registration("onvif", "http://10.0.0.7:10000", network=True, shared=True),
        ),
    ],
)
def test_valid_registrations_parse(request_: v0.RegisterDiscoveryHandlerRequest, expected: Registration) -> None:
    assert parse_registration(request_) == expected


def test_registration_targets_dial_the_socket_or_the_host_port() -> None:
    assert Registration("u", "/run/u.sock", network=False, shared=False).target == "unix:///run/u.sock"
    assert Registration("o", "http://10.0.0.7:10000", network=True, shared=True).target == "10.0.0.7:10000"


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (v0.RegisterDiscoveryHandlerRequest(endpoint="/x.sock"), "name: must not be empty"),
        (v0.RegisterDiscoveryHandlerRequest(name="u", endpoint="u.sock"), "endpoint: must be an absolute unix socket"),
        (
            v0.RegisterDiscoveryHandlerRequest(name="o", endpoint="10.0.0.7:10000", endpoint_type=NETWORK),
            "endpoint: must be http://<host>:<port> for NETWORK",
        ),
        (v0.RegisterDiscoveryHandlerRequest(name="o", endpoint="/x", endpoint_type=7), "endpointType: unknown"),  # type: ignore[arg-type]
    ],
)
def test_bad_registrations_are_invalid_naming_the_field(
    request_: v0.RegisterDiscoveryHandlerRequest, message: str
) -> None:
    with pytest.raises(errors.Invalid) as info:
        parse_registration(request_)
    assert info.value.message.startswith(message)


# --- a real Registration server, with tiny in-test handlers and the echoserver process ---


@pytest.fixture
async def registry() -> HandlerRegistry:
    return HandlerRegistry("node-a")


@pytest.fixture
async def registration(sock_dir: Path, registry: HandlerRegistry) -> AsyncIterator[RegistrationServer]:
    server = RegistrationServer(sock_dir / "reg.sock", registry)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def _register(socket: Path, request: v0.RegisterDiscoveryHandlerRequest) -> None:
    async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
        await v0_grpc.RegistrationStub(channel).RegisterDiscoveryHandler(request, timeout=10)


async def test_registrations_of_one_name_at_two_endpoints_are_both_kept_and_one_endpoint_replaces_itself(
    registration: RegistrationServer, registry: HandlerRegistry
) -> None:
    """Akri keys a registration by `name@endpoint`: two udev handlers on different sockets are both used, and a
    handler that restarts and registers at its endpoint again replaces only its old registration."""
    await _register(registration.socket_path, v0.RegisterDiscoveryHandlerRequest(name="u", endpoint="/a.sock"))
    await _register(
        registration.socket_path, v0.RegisterDiscoveryHandlerRequest(name="u", endpoint="/b.sock", shared=True)
    )
    endpoints = registry.endpoints("u")
    assert list(endpoints) == ["u@/a.sock", "u@/b.sock"]
    first = endpoints["u@/a.sock"]
    assert isinstance(first, ExternalHandler)
    assert (first.endpoint, first.shared) == ("/a.sock", False)
    second = endpoints["u@/b.sock"]
    assert isinstance(second, ExternalHandler)
    assert (second.endpoint, second.shared) == ("/b.sock", True)
    await _register(registration.socket_path, v0.RegisterDiscoveryHandlerRequest(name="u", endpoint="/a.sock"))
    again = registry.endpoints("u")
    assert set(again) == {"u@/a.sock", "u@/b.sock"}
    assert again["u@/a.sock"] is not first
    assert again["u@/b.sock"] is second
    assert registry.names() == ["u"]


class _Recorder(v0_grpc.DiscoveryHandlerServicer):
    """Keeps each DiscoverRequest as it came off the wire, answers with no devices."""

    def __init__(self) -> None:
        self.requests: list[v0.DiscoverRequest] = []

    async def Discover(self, request: v0.DiscoverRequest, context: Any) -> AsyncIterator[v0.DiscoverResponse]:
        self.requests.append(request)
        yield v0.DiscoverResponse()


async def test_a_property_without_value_or_value_from_goes_out_as_bytedata_without_bytes(
    sock_dir: Path, registry: HandlerRegistry
) -> None:
    """Akri sends `ByteData { vec: None }` for such a property: `vec` absent on the wire, which a handler tells apart
    from empty bytes (`vec: Some([])`)."""
    recorder = _Recorder()
    server = grpc.aio.server()
    v0_grpc.add_DiscoveryHandlerServicer_to_server(recorder, server)
    server.add_insecure_port(f"unix://{sock_dir / 'rec.sock'}")
    await server.start()
    try:
        handler = ExternalHandler(Registration("rec", str(sock_dir / "rec.sock"), False, False), registry)
        stream = handler.discover("", {"unset": None, "empty": b"", "set": b"\x00x"})
        assert await next_of(stream) == []
        await stream.aclose()
        [request] = recorder.requests
        props = request.discovery_properties
        assert not props["unset"].HasField("vec")
        assert props["unset"].SerializeToString() == b""  # no field 1 at all
        assert props["empty"].HasField("vec")
        assert props["empty"].SerializeToString() == b"\n\x00"  # field 1, length 0
        assert props["set"].vec == b"\x00x"
    finally:
        await server.stop(None)


async def test_bad_registration_is_refused_with_invalid_argument_and_changes_nothing(
    registration: RegistrationServer, registry: HandlerRegistry
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await _register(registration.socket_path, v0.RegisterDiscoveryHandlerRequest(name="", endpoint="/a.sock"))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == "name: must not be empty"
    assert registry.names() == []


async def test_registration_server_replaces_a_stale_socket_file_and_removes_it_on_stop(
    sock_dir: Path, registry: HandlerRegistry
) -> None:
    path = sock_dir / "stale.sock"
    path.write_text("left over from a crash")
    server = RegistrationServer(path, registry)
    await server.start()
    await _register(path, v0.RegisterDiscoveryHandlerRequest(name="u", endpoint="/a.sock"))
    await server.stop()
    assert registry.names() == ["u"]
    assert not path.exists()


class _OneShot(v0_grpc.DiscoveryHandlerServicer):
    """Sends one list then ends the stream, or refuses details that are not empty."""

    async def Discover(self, request: v0.DiscoverRequest, context: Any) -> AsyncIterator[v0.DiscoverResponse]:
        if request.discovery_details:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "discoveryDetails: must be empty")
        props = {k: v.vec.decode() for k, v in request.discovery_properties.items()}
        yield v0.DiscoverResponse(devices=[v0.Device(id="x", properties=props)])


async def test_discover_round_trip_carries_properties_and_a_closed_stream_unregisters_the_handler(
    sock_dir: Path, registry: HandlerRegistry
) -> None:
    server = grpc.aio.server()
    v0_grpc.add_DiscoveryHandlerServicer_to_server(_OneShot(), server)
    server.add_insecure_port(f"unix://{sock_dir / 'one.sock'}")
    await server.start()
    try:
        handler = ExternalHandler(Registration("one", str(sock_dir / "one.sock"), False, True), registry)
        registry.add(handler)
        stream = handler.discover("", {"secret": b"s3"})
        assert await next_of(stream) == [Device("x", {"secret": "s3"}, shared=True)]
        with pytest.raises(errors.Unavailable, match=r"discovery handler 'one' at .* ended its stream"):
            await next_of(stream)
        assert registry.names() == []

        registry.add(handler)
        with pytest.raises(errors.Invalid, match="discoveryDetails: must be empty"):
            await next_of(handler.discover("x: 1"))
        assert registry.names() == ["one"]  # bad details do not unregister
    finally:
        await server.stop(None)


async def test_a_handler_that_cannot_be_reached_is_unavailable_and_unregistered(
    sock_dir: Path, registry: HandlerRegistry
) -> None:
    handler = ExternalHandler(Registration("gone", str(sock_dir / "gone.sock"), False, False), registry)
    registry.add(handler)
    with pytest.raises(errors.Unavailable, match=r"discovery handler 'gone'.*stream broke"):
        await next_of(handler.discover(""))
    assert registry.names() == []


async def test_a_broken_stream_does_not_unregister_a_newer_registration_of_the_same_name(
    sock_dir: Path, registry: HandlerRegistry
) -> None:
    old = ExternalHandler(Registration("h", str(sock_dir / "old.sock"), False, False), registry)
    new = ExternalHandler(Registration("h", str(sock_dir / "new.sock"), False, False), registry)
    registry.add(old)
    stream = old.discover("")
    registry.add(new)
    with pytest.raises(errors.Unavailable):
        await next_of(stream)
    assert registry.get("h") is new


Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]


@pytest.fixture
async def spawn(sock_dir: Path, registration: RegistrationServer) -> AsyncIterator[Spawn]:
    """Start echoserver processes registering with `registration`; stop exactly those, by PID."""
    started: list[asyncio.subprocess.Process] = []

    async def start(name: str, *args: str) -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "devplace.discovery._echoserver",
            "--name",
            name,
            "--socket-dir",
            str(sock_dir),
            "--registration",
            str(registration.socket_path),
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            await stop_child(proc)


def _echo(*ids: str, shared: bool = False) -> list[Device]:
    return [Device(i, {ECHO_DEVICE: i}, shared=shared) for i in ids]


async def test_echo_process_registers_and_streams_its_devices_then_changes(
    spawn: Spawn, registry: HandlerRegistry, sock_dir: Path
) -> None:
    devices_file = sock_dir / "devices"
    await spawn("echo", "--devices", "a,b", "--shared", "--devices-file", str(devices_file), "--poll", "0.05")
    await registry_until(registry, lambda: "echo" in registry.names())
    handler = registry.get("echo")
    assert isinstance(handler, ExternalHandler)
    assert (handler.endpoint, handler.shared) == (str(sock_dir / "echo.sock"), True)

    stream = handler.discover("")
    assert await next_of(stream) == _echo("a", "b", shared=True)
    devices_file.write_text("b\nc\n")
    assert await next_of(stream) == _echo("b", "c", shared=True)
    await stream.aclose()


async def test_echo_process_filters_by_details_and_refuses_bad_ones(spawn: Spawn, registry: HandlerRegistry) -> None:
    await spawn("echo", "--devices", "a,b,c")
    await registry_until(registry, lambda: "echo" in registry.names())
    handler = registry.get("echo")

    stream = handler.discover("only: [c, a]")
    assert await next_of(stream) == _echo("a", "c")
    await stream.aclose()

    with pytest.raises(errors.Invalid) as info:
        await next_of(handler.discover("only: c"))
    assert info.value.message == "discoveryDetails.only: must be a list of device ids"
    assert registry.names() == ["echo"]  # bad details do not unregister the handler


async def test_echo_process_receives_the_discovery_properties_over_the_wire(
    spawn: Spawn, registry: HandlerRegistry
) -> None:
    await spawn("echo", "--devices", "a", "--echo-properties")
    await registry_until(registry, lambda: "echo" in registry.names())
    handler = registry.get("echo")

    stream = handler.discover("", {"username": b"admin", "token": b"\x00\xff", "empty": b""})
    [device] = await next_of(stream)
    assert device.properties == {
        ECHO_DEVICE: "a",
        "ECHO_PROPERTY_username": "admin",
        "ECHO_PROPERTY_token": "\x00\\xff",  # undecodable bytes arrive intact, shown backslash-escaped
        "ECHO_PROPERTY_empty": "",
    }
    await stream.aclose()

    stream = registry.get("echo").discover("", {"username": b"root"})  # each Discover call carries its own
    assert (await next_of(stream))[0].properties == {ECHO_DEVICE: "a", "ECHO_PROPERTY_username": "root"}
    await stream.aclose()

    stream = registry.get("echo").discover("")
    assert await next_of(stream) == _echo("a")  # no properties, nothing echoed
    await stream.aclose()


def test_echoed_properties_name_each_received_property_and_decode_it() -> None:
    request = v0.DiscoverRequest(
        discovery_properties={"b": v0.ByteData(vec="ü".encode()), "a": v0.ByteData(vec=b"\xff"), "unset": v0.ByteData()}
    )
    assert echoed_properties(request) == {
        "ECHO_PROPERTY_a": "\\xff",
        "ECHO_PROPERTY_b": "ü",
        "ECHO_PROPERTY_unset": "",
    }


async def test_killed_handler_process_unregisters_and_comes_back_when_restarted(
    spawn: Spawn, registry: HandlerRegistry
) -> None:
    proc = await spawn("echo", "--devices", "a")
    await registry_until(registry, lambda: "echo" in registry.names())
    stream = registry.get("echo").discover("")
    assert await next_of(stream) == _echo("a")

    proc.kill()
    await proc.wait()
    with pytest.raises(errors.Unavailable, match="discovery handler 'echo'"):
        await next_of(stream)
    assert "echo" not in registry.names()

    await spawn("echo", "--devices", "z")
    await registry_until(registry, lambda: "echo" in registry.names())
    stream = registry.get("echo").discover("")
    assert await next_of(stream) == _echo("z")
    await stream.aclose()


async def test_handler_registers_again_with_a_restarted_agent(
    spawn: Spawn, registry: HandlerRegistry, registration: RegistrationServer
) -> None:
    await spawn("echo", "--devices", "a")
    await registry_until(registry, lambda: "echo" in registry.names())
    stream = registry.get("echo").discover("")
    assert await next_of(stream) == _echo("a")

    await registration.stop()  # the agent restarts with an empty registry on the same socket
    fresh = HandlerRegistry("node-a")
    restarted = RegistrationServer(registration.socket_path, fresh)
    await restarted.start()
    try:
        await stream.aclose()  # its streams went away with it
        await registry_until(fresh, lambda: "echo" in fresh.names())
        stream = fresh.get("echo").discover("")
        assert await next_of(stream) == _echo("a")
        await stream.aclose()
    finally:
        await restarted.stop()
