"""Real OPC UA peers for tests: asyncua servers on 127.0.0.1, free ports, run on their own event loop in a thread.

Starting an asyncua server takes about a second (it builds its whole address space), so test modules share one
`Peers` (a module-scoped fixture) and start extra servers only for tests that stop them. The servers live on their
own loop so that any test's loop can talk to them over TCP, as a handler on a node would.

`DiscoveryServer` is an asyncua server of type DiscoveryServer that keeps the registrations servers send it, as a
local discovery server does, and forgets one when the server unregisters (RegisterServer with IsOnline false): a
real LDS does that, asyncua's keeps every registration forever. Servers are of type Server unless told otherwise
(asyncua's default is ClientAndServer, which Akri's handler drops).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar

from asyncua import ua
from asyncua.server.server import Server

from tests.servers import free_port

T = TypeVar("T")

BOUND = 60.0  # seconds a peer may take to start or stop; guards against a hung test, not a timing assertion

logging.getLogger("asyncua").setLevel(logging.ERROR)  # its servers warn about unencrypted endpoints at every start


async def start_server(
    name: str,
    *,
    kind: ua.ApplicationType = ua.ApplicationType.Server,
    path: str = "/",
    register_at: str | None = None,
) -> Server:
    """An asyncua server named `name` of type `kind` at opc.tcp://127.0.0.1:<free port><path>, registered with the
    discovery server at `register_at` when given (once: no renewal task)."""
    server = Server()
    await server.init()
    server.set_endpoint(f"opc.tcp://127.0.0.1:{free_port()}{path}")
    server.set_server_name(name)
    server.application_type = kind
    await server.set_application_uri(f"urn:devplace-tests:{name}")  # registrations are keyed by it
    await server.start()
    if register_at is not None:
        await server.register_to_discovery(register_at, period=0)
    return server


async def unregister(server: Server, discovery_url: str) -> None:
    """Tell the discovery server that `server` is going (RegisterServer with IsOnline false)."""
    await server.unregister_from_discovery(discovery_url)


async def start_discovery_server(name: str = "LDS") -> Server:
    server = await start_server(name, kind=ua.ApplicationType.DiscoveryServer)
    internal = server.iserver
    keep = internal.register_server

    def register(registered: ua.RegisteredServer, conf: Any = None) -> None:
        if registered.IsOnline:
            keep(registered, conf)
        else:
            internal._known_servers.pop(registered.ServerUri, None)

    internal.register_server = register  # type: ignore[method-assign]
    return server


def url_of(server: Server) -> str:
    return str(server.endpoint.geturl())


class Peers:
    """An event loop in a thread that runs OPC UA servers; `run` a coroutine on it from any thread or loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="opcua-peers", daemon=True)
        self._thread.start()
        self.servers: list[Server] = []

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the peers' loop and wait for it (blocking: for fixtures and setup)."""
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(BOUND)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the peers' loop and await it from the test's loop."""
        return await asyncio.wait_for(asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop)), BOUND)

    def server(self, name: str, **kwargs: Any) -> Server:
        server = self.run(start_server(name, **kwargs))
        self.servers.append(server)
        return server

    def discovery_server(self, name: str = "LDS") -> Server:
        server = self.run(start_discovery_server(name))
        self.servers.append(server)
        return server

    async def stop(self, server: Server) -> None:
        await self.arun(server.stop())
        self.servers.remove(server)

    def close(self) -> None:
        for server in reversed(self.servers):
            self.run(server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(BOUND)
        self.loop.close()


@contextmanager
def peers() -> Iterator[Peers]:
    opened = Peers()
    try:
        yield opened
    finally:
        opened.close()
