"""Any in-process discovery handler served as an external one, over Akri's discovery-handler protocol.

`HandlerServer` serves `v0.DiscoveryHandler` on `<socket_dir>/<name>.sock` and registers that endpoint with an agent's
Registration socket, so one handler's code runs both in `devplace agent` and as its own process (`devplace handler
nvml`), and an Akri agent can use it too. Each `Discover` call streams the handler's `discover(details, properties)`:
every device list it yields goes out as one `DiscoverResponse` (full lists, as the protocol wants); bad details
(`errors.Invalid` before the first list) become INVALID_ARGUMENT, which the agent puts on the Configuration.

Registration, as Akri's handlers do it: retried with backoff (up to 2 s apart) until the agent answers, and done again
whenever a Discover stream ends (the agent went away and may have restarted, and then knows nothing of us). A
`Discover` request's `discovery_properties` reach the handler as bytes, an absent `vec` as None.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from devplace import errors
from devplace.deviceplugin import abort
from devplace.discovery._bridge import device_to_proto
from devplace.discovery._handlers import DiscoveryHandler, ResolvedProperties
from devplace.discovery.v0 import discovery_pb2 as v0
from devplace.discovery.v0 import discovery_pb2_grpc as v0_grpc

log = logging.getLogger(__name__)

REGISTER_TIMEOUT = 5.0
MAX_BACKOFF = 2.0


def request_properties(request: v0.DiscoverRequest) -> ResolvedProperties:
    """The request's discoveryProperties as the handler takes them (`vec` unset: None)."""
    return {k: (v.vec if v.HasField("vec") else None) for k, v in request.discovery_properties.items()}


class HandlerServer(v0_grpc.DiscoveryHandlerServicer):
    """Serve `handler` at `<socket_dir>/<handler.name>.sock` and keep it registered at `registration`."""

    def __init__(self, handler: DiscoveryHandler, socket_dir: Path, registration: Path, *, shared: bool) -> None:
        self.handler = handler
        self.socket_path = socket_dir / f"{handler.name}.sock"
        self.registration = registration
        self.shared = shared
        self.registrations = 0
        self._register_again = asyncio.Event()
        self._registered = asyncio.Event()

    async def Discover(
        self, request: v0.DiscoverRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[v0.DiscoverResponse]:
        stream = self.handler.discover(request.discovery_details, request_properties(request))
        try:
            while True:
                try:
                    devices = await anext(stream)
                except StopAsyncIteration:
                    return
                except errors.Invalid as e:
                    await abort(context, e)
                yield v0.DiscoverResponse(devices=[device_to_proto(x) for x in devices])
        finally:
            await stream.aclose()
            self._register_again.set()  # the agent stopped asking: it may have restarted

    async def registered(self) -> None:
        """Return once the agent has accepted a registration."""
        await self._registered.wait()

    async def register(self) -> None:
        """Register with the agent, retrying with backoff until it answers."""
        request = v0.RegisterDiscoveryHandlerRequest(
            name=self.handler.name,
            endpoint=str(self.socket_path),
            endpoint_type=v0.RegisterDiscoveryHandlerRequest.UDS,
            shared=self.shared,
        )
        delay = 0.05
        while True:
            async with grpc.aio.insecure_channel(f"unix://{self.registration}") as channel:
                try:
                    await v0_grpc.RegistrationStub(channel).RegisterDiscoveryHandler(request, timeout=REGISTER_TIMEOUT)
                except grpc.aio.AioRpcError as e:
                    log.info("registering at %s failed (%s); again in %.2fs", self.registration, e.code(), delay)
                else:
                    self.registrations += 1
                    self._registered.set()
                    log.info("registered %r at %s with %s", self.handler.name, self.socket_path, self.registration)
                    return
            await asyncio.sleep(delay)  # real time: waiting for another process
            delay = min(delay * 2, MAX_BACKOFF)

    async def _keep_registered(self) -> None:
        while True:
            await self._register_again.wait()
            self._register_again.clear()
            await self.register()

    async def run(self, stop: asyncio.Event) -> None:
        """Serve and stay registered until `stop` is set; the socket file goes with the server."""
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        server = grpc.aio.server()
        v0_grpc.add_DiscoveryHandlerServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket_path}")
        await server.start()
        keeper = asyncio.create_task(self._keep_registered(), name="keep-registered")
        try:
            registering = asyncio.create_task(self.register(), name="register")
            stopping = asyncio.create_task(stop.wait(), name="stop")
            await asyncio.wait({registering, stopping}, return_when=asyncio.FIRST_COMPLETED)
            registering.cancel()
            await stop.wait()
            stopping.cancel()
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
            await server.stop(None)
            self.socket_path.unlink(missing_ok=True)
