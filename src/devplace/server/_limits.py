"""Watch limits: how many watches a client may hold open, and how long a watch may wait for a client that stopped
reading.

Count: a client holds at most `per_client` open watches (a GET with `watch=1`, or /store/watch). A client is its
authenticated user (`scope["devplace.user"]`, set by `server.guards.AccessGuard`), or, on a server without
authentication, its address (every process on one machine counts together). One more is answered 429
`TooManyRequests`, a `Status` with `details.retryAfterSeconds` and a `Retry-After` header, saying how many are open;
devplace's remote store raises it as `Unavailable` and its informers retry later.

A slow client: a watch response's outgoing buffer is bounded. Uvicorn stops a response's `send` while the
connection's write buffer is over its high-water mark (64 KiB), so the response's lines wait, not pile up; behind
them the store's watcher queues at most a bounded number of events and bytes and then drops them, to read them again
from history, or to end with `Gone` when history has been compacted past them (the stores' module docstrings). So
memory stays bounded whatever a client does. What this module adds: a `send` that has waited `stall_timeout` seconds
for the client to read ends the watch: the stream is told the client went away (it exits the store watch at once)
and the connection is reset at once (`server.connections.drop_connection`): the bytes queued for the client, in
uvicorn's buffer and the kernel's, are freed then, not kept until a client that reads nothing reads them. The client
sees its stream end and watches again from the last revision it read: it resumes, or relists on `Gone` (410) when
history has moved on. Kubernetes' API server likewise closes watchers that cannot keep up.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import parse_qs

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from devplace import errors
from devplace.server import _statuses as http_errors
from devplace.server._connections import drop_connection
from devplace.server._guards import USER_KEY

DEFAULT_MAX_WATCHES = 512
"""Open watches per client (agents use about five each; every process of one machine counts together without
authentication)."""

DEFAULT_STALL_TIMEOUT = 60.0
"""Seconds a watch waits for a client to read before it is dropped."""

log = logging.getLogger(__name__)


def _is_watch(scope: Scope) -> bool:
    if scope["method"] != "GET":
        return False
    if scope["path"] == "/store/watch":
        return True
    query = scope.get("query_string", b"")
    if b"watch" not in query:
        return False
    values = parse_qs(query.decode("latin-1")).get("watch")
    return values is not None and values[-1].strip().lower() in ("1", "true", "yes")


def client_key(scope: Scope) -> str:
    """Whom a watch counts against: the authenticated user, else the peer's address."""
    user = scope.get(USER_KEY)
    if user:
        return f"user {user}"
    client = scope.get("client")
    return f"address {client[0]}" if client else "address unknown"


class WatchLimits:
    """ASGI middleware: the per-client watch count and the stall bound (module docstring)."""

    def __init__(self, app: ASGIApp, per_client: int, stall_timeout: float | None) -> None:
        self.app = app
        self.per_client = per_client
        self.stall_timeout = stall_timeout
        self.open: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _is_watch(scope):
            await self.app(scope, receive, send)
            return
        key = client_key(scope)
        held = self.open.get(key, 0)
        if held >= self.per_client:
            await _too_many(key, held)(scope, receive, send)
            return
        self.open[key] = held + 1
        try:
            if self.stall_timeout is None:
                await self.app(scope, receive, send)
            else:
                await _Bounded(self.app, self.stall_timeout, key).run(scope, receive, send)
        finally:
            left = self.open[key] - 1
            if left:
                self.open[key] = left
            else:
                del self.open[key]


def _too_many(key: str, held: int) -> ASGIApp:
    err = errors.TooManyRequests(f"too many open watches for {key}: {held} is the limit; close one and retry")
    return JSONResponse(http_errors.status_body(err), status_code=429, headers={"Retry-After": str(err.retry_after)})


class _Bounded:
    """One watch response whose sends may wait at most `stall` seconds each (module docstring).

    On a stall the connection is reset and the request's task is cancelled (the watch response then exits the store
    watch, as when its client goes away); the cancellation is taken back here, so the request ends without an error
    of its own. Under a server without `server.connections`' protocol uvicorn closes the connection instead, once
    its buffer drains."""

    def __init__(self, app: ASGIApp, stall: float, key: str) -> None:
        self.app = app
        self.stall = stall
        self.key = key
        self.stalled = False

    async def run(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = asyncio.current_task()

        async def bounded_send(message: Message) -> None:
            if self.stalled:
                return  # the connection is being dropped: nothing more goes out
            if message["type"] != "http.response.body":
                await send(message)
                return
            try:
                async with asyncio.timeout(self.stall):
                    await send(message)
            except TimeoutError:
                log.warning(
                    "dropping a watch of %s (%s): its client has read nothing for %g s",
                    self.key,
                    scope["path"],
                    self.stall,
                )
                self.stalled = True
                drop_connection(scope)
                if request is not None:
                    request.cancel()

        try:
            await self.app(scope, receive, bounded_send)
        except asyncio.CancelledError:
            if not self.stalled or request is None or request.cancelling() > 1:
                raise  # not (only) ours: the server is stopping
            request.uncancel()
