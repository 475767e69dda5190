"""The bridge to external discovery handlers speaking Akri's discovery-handler protocol (package v0).

`RegistrationServer` serves `v0.Registration` on a unix socket (Akri: /var/lib/akri/agent-registration.sock). Each
`RegisterDiscoveryHandler` puts an `ExternalHandler` into the node's `HandlerRegistry` as the endpoint
`name@endpoint` (Akri's uid): handlers registering one name at different endpoints are kept side by side and merged
by the agent, and one registering again at the same endpoint (it restarted) replaces its old entry.
`ExternalHandler.discover` opens one `Discover` stream per call, sending the discoveryDetails and the resolved
discoveryProperties (`discovery_properties`, name -> ByteData; a property with neither value nor valueFrom is a
ByteData whose `vec` is not set at all, as Akri sends it), and converts every `DiscoverResponse` into a full
`list[Device]`, stamping `shared` from the registration.

Failure semantics (Akri's): `INVALID_ARGUMENT` from the handler means the discoveryDetails are bad and becomes
`errors.Invalid` (the handler stays registered). Any other end of the stream (the process died, the socket is gone,
the handler closed the stream) means the handler is broken: the `ExternalHandler` removes itself (only this
endpoint) from the registry, unless a newer registration already replaced it, and the iteration ends with
`errors.Unavailable`. The handler is
expected to register again; `HandlerRegistry.changed` tells the agent when it has.

Status codes are translated only by `devplace.deviceplugin._errors`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from devplace import errors
from devplace.deviceplugin import abort, from_rpc_error
from devplace.discovery._devices import Device, DeviceSpec, Mount
from devplace.discovery._handlers import HandlerRegistry, ResolvedProperties
from devplace.discovery.v0 import discovery_pb2 as v0
from devplace.discovery.v0 import discovery_pb2_grpc as v0_grpc

log = logging.getLogger(__name__)

UDS = v0.RegisterDiscoveryHandlerRequest.UDS
NETWORK = v0.RegisterDiscoveryHandlerRequest.NETWORK


def device_from_proto(msg: v0.Device, shared: bool) -> Device:
    return Device(
        id=msg.id,
        properties=dict(msg.properties),
        shared=shared,
        mounts=tuple(Mount(m.container_path, m.host_path, m.read_only) for m in msg.mounts),
        device_specs=tuple(DeviceSpec(s.container_path, s.host_path, s.permissions) for s in msg.device_specs),
    )


def device_to_proto(device: Device) -> v0.Device:
    return v0.Device(
        id=device.id,
        properties=dict(device.properties),
        mounts=[
            v0.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in device.mounts
        ],
        device_specs=[
            v0.DeviceSpec(container_path=s.container_path, host_path=s.host_path, permissions=s.permissions)
            for s in device.device_specs
        ],
    )


def request_properties(properties: ResolvedProperties | None) -> dict[str, v0.ByteData]:
    """`DiscoverRequest.discovery_properties`: bytes as they are, None as a ByteData without `vec` (not b"")."""
    return {k: v0.ByteData() if v is None else v0.ByteData(vec=v) for k, v in (properties or {}).items()}


@dataclass(frozen=True)
class Registration:
    """A validated RegisterDiscoveryHandlerRequest; `target` is the gRPC address to dial."""

    name: str
    endpoint: str
    network: bool
    shared: bool

    @property
    def target(self) -> str:
        if self.network:
            return self.endpoint.removeprefix("http://")
        return f"unix://{self.endpoint}"


def parse_registration(request: v0.RegisterDiscoveryHandlerRequest) -> Registration:
    """Validate a registration: a name, and a unix socket path (UDS) or an http://host:port address (NETWORK)."""
    if not request.name:
        raise errors.Invalid.field("name", "must not be empty")
    endpoint = request.endpoint
    if request.endpoint_type == UDS:
        if not endpoint.startswith("/"):
            raise errors.Invalid.field("endpoint", f"must be an absolute unix socket path for UDS, got {endpoint!r}")
        return Registration(request.name, endpoint, network=False, shared=request.shared)
    if request.endpoint_type == NETWORK:
        host = endpoint.removeprefix("http://")
        if host == endpoint or not host or "/" in host:
            raise errors.Invalid.field("endpoint", f"must be http://<host>:<port> for NETWORK, got {endpoint!r}")
        return Registration(request.name, endpoint, network=True, shared=request.shared)
    raise errors.Invalid.field("endpointType", f"unknown endpoint type {request.endpoint_type}")


class ExternalHandler:
    """A registered out-of-process handler; `discover` streams from its `Discover` RPC."""

    def __init__(self, registration: Registration, registry: HandlerRegistry) -> None:
        self.registration = registration
        self.name = registration.name
        self.endpoint = registration.endpoint
        self.uid = f"{registration.name}@{registration.endpoint}"
        self.shared = registration.shared
        self._registry = registry

    def __repr__(self) -> str:
        return f"ExternalHandler(name={self.name!r}, endpoint={self.endpoint!r}, shared={self.shared})"

    async def discover(
        self, details: str, properties: ResolvedProperties | None = None
    ) -> AsyncGenerator[list[Device], None]:
        request = v0.DiscoverRequest(discovery_details=details, discovery_properties=request_properties(properties))
        async with grpc.aio.insecure_channel(self.registration.target) as channel:
            call = v0_grpc.DiscoveryHandlerStub(channel).Discover(request)
            try:
                try:
                    async for response in call:
                        yield [device_from_proto(x, self.shared) for x in response.devices]
                except grpc.aio.AioRpcError as e:
                    err = from_rpc_error(e)
                    if isinstance(err, errors.Invalid):
                        raise err from e
                    self._forget()
                    raise errors.Unavailable(
                        f"discovery handler {self.name!r} at {self.endpoint}: stream broke: {err.message}"
                    ) from e
                self._forget()
                raise errors.Unavailable(f"discovery handler {self.name!r} at {self.endpoint} ended its stream")
            finally:
                call.cancel()

    def _forget(self) -> None:
        if self._registry.discard(self):
            log.info("discovery handler %r at %s is gone; waiting for it to register again", self.name, self.endpoint)


class _RegistrationServicer(v0_grpc.RegistrationServicer):
    def __init__(self, registry: HandlerRegistry) -> None:
        self.registry = registry

    async def RegisterDiscoveryHandler(
        self, request: v0.RegisterDiscoveryHandlerRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> v0.Empty:
        try:
            registration = parse_registration(request)
        except errors.Invalid as e:
            await abort(context, e)
        self.registry.add(ExternalHandler(registration, self.registry))
        log.info(
            "discovery handler %r registered at %s (shared=%s)",
            registration.name,
            registration.endpoint,
            registration.shared,
        )
        return v0.Empty()


class RegistrationServer:
    """Serves v0.Registration on `socket_path` for one node's registry. A stale socket file is replaced on start."""

    def __init__(self, socket_path: Path, registry: HandlerRegistry) -> None:
        self.socket_path = socket_path
        self.registry = registry
        self._server: grpc.aio.Server | None = None
        self._identity: tuple[int, int] | None = None

    async def start(self) -> None:
        if self._server is not None:
            return
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        server = grpc.aio.server()
        v0_grpc.add_RegistrationServicer_to_server(_RegistrationServicer(self.registry), server)
        server.add_insecure_port(f"unix://{self.socket_path}")
        await server.start()
        self._server = server
        self._identity = _identity(self.socket_path)

    async def stop(self) -> None:
        """Stop serving; the socket file goes too, unless another agent has bound that path since (it is theirs)."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(None)
            if self._identity is not None and _identity(self.socket_path) == self._identity:
                self.socket_path.unlink(missing_ok=True)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)
