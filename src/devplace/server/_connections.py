"""Connection limits: how long a client may take to send a request, how many connections one address may hold, and
how a connection is cut at once.

Uvicorn bounds none of this (its issue #157): its keep-alive timer runs only between requests and stops at a
request's first byte, so a client that connects and sends nothing, sends its headers a byte at a time, or trickles a
body holds a connection (a file descriptor, a protocol object, buffers) for as long as it likes; a flood of them
(slowloris) exhausts the server's descriptors. `connection_protocol(limits)` is uvicorn's h11 protocol class
(`H11Protocol`, the one uvicorn picks when httptools is not installed, as here) with these bounds added:

- Headers: a request's headers must be complete within `header_timeout` seconds, counted from the connection's
  accept for its first request, and from the first byte of each later request on a kept-alive connection (between
  requests uvicorn's keep-alive timeout applies: `KEEP_ALIVE_TIMEOUT`). A connection past it is closed without an
  answer: no request was read to answer.
- Bodies: once the headers are in, the body must make progress at least every `body_idle_timeout` seconds and be
  complete within `body_timeout` seconds. A late body is answered 408 with a `Status` (reason `Timeout`) when the app
  has not begun its response, and the connection is closed; when it has (a response that did not wait for the body),
  the connection is cut. Time the server itself holds the body back is not the client's: while uvicorn has paused
  reading because the app has not taken what arrived, or while the client waits for `100 Continue` the app has not
  asked for, the client is owed a fresh idle period once reading resumes.
- Per address: at most `per_client` connections from one client address at a time; one more is reset as soon as it
  is accepted, before anything is read or allocated for it. Not a 429: answering means reading a request from a
  client that may be trickling it (the very thing to bound), and a response written to a connection whose request
  is still unread is lost to the reset the kernel sends when such a connection closes. The count is by address, not
  by user: it is taken before any request names one. Clients see a connection error and retry (the remote store
  raises it as `Unavailable`).
- Cutting: `drop()` resets a connection now (SO_LINGER 0, then abort): the kernel frees its send buffer at once
  instead of keeping it, and the connection, until a client that reads nothing reads it or TCP gives up, minutes
  later. The request in flight is marked disconnected, so the app's later sends are discarded and uvicorn does not
  complain of an incomplete response. `server.limits` drops a watch whose client stopped reading this way; it finds
  the connection under `scope[CONNECTION_KEY]` (`drop_connection`).

Invariants: every accepted connection's `connection_lost` releases its place in the per-address count exactly once
(a refused connection never takes one), so the count of an address returns to zero when its connections are gone;
a connection has at most one timer handle armed, for the deadline of the phase it is in (headers, body, or none
while the app works or streams its response), and none once it is lost; a connection whose client has sent
nothing yet is always in the headers phase. With every limit None (`ConnectionLimits.unlimited()`) the protocol is
uvicorn's own, plus `drop()` and the hooks. WebSocket upgrades are off (`uvicorn_options`): an upgraded connection
would leave this protocol, and its count, behind.

TLS: the protocol sees a connection once its handshake is done; asyncio bounds the handshake itself (60 s).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
from dataclasses import dataclass
from typing import Any, Protocol

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from devplace import errors
from devplace.server import _statuses as http_errors

CONNECTION_KEY = "devplace.connection"
"""The ASGI scope key under which a request finds its connection (`Connection`)."""

DEFAULT_HEADER_TIMEOUT = 10.0
"""Seconds for a request's headers: a devplace or kubectl request's headers are one small write (a few hundred
bytes), so 10 s is a round trip plus several TCP retransmissions on a bad link; kube-apiserver allows 32 s."""

DEFAULT_BODY_IDLE_TIMEOUT = 30.0
"""Seconds a request body may make no progress at all (a stopped client is let go well before the total bound)."""

DEFAULT_BODY_TIMEOUT = 60.0
"""Seconds for a whole request body: the largest accepted (3 MiB) at 50 KiB/s; kube-apiserver likewise gives a
request 60 s (its --request-timeout)."""

DEFAULT_MAX_CONNECTIONS = 1024
"""Connections per client address: twice the open watches a client may hold (`server.limits`, 512; each watch holds
a connection of its own), so that limit, which answers a clear 429, is the one a client meets first, with room for
the requests beside its watches."""

KEEP_ALIVE_TIMEOUT = 90.0
"""Seconds a kept-alive connection may sit idle between requests (uvicorn's `timeout_keep_alive`; its default is 5):
kube-apiserver keeps one 90 s, as long as Go's clients keep theirs. A server that closes first races the client's
next request, which meets a reset it cannot tell from a failure (a POST is not sent again); clients without an idle
bound of their own, the official Python client's pool among them, met it after 5 s."""

log = logging.getLogger(__name__)

_IDLE, _HEADERS, _BODY = 0, 1, 2  # the phases a connection's deadline follows (module docstring)
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST and discards what is queued


@dataclass(frozen=True)
class ConnectionLimits:
    """The bounds of the module docstring; None turns one off. Invalid values raise `errors.Invalid` naming the
    field."""

    header_timeout: float | None = DEFAULT_HEADER_TIMEOUT
    body_idle_timeout: float | None = DEFAULT_BODY_IDLE_TIMEOUT
    body_timeout: float | None = DEFAULT_BODY_TIMEOUT
    per_client: int | None = DEFAULT_MAX_CONNECTIONS

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_idle_timeout", "body_timeout"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
                raise errors.Invalid.field(name, f"must be a positive number of seconds or None, not {value!r}")
        per_client = self.per_client
        if per_client is not None and (isinstance(per_client, bool) or not isinstance(per_client, int)):
            raise errors.Invalid.field("per_client", f"must be a whole number or None, not {per_client!r}")
        if per_client is not None and per_client < 1:
            raise errors.Invalid.field("per_client", f"must be at least 1, not {per_client}")

    @classmethod
    def unlimited(cls) -> ConnectionLimits:
        return cls(None, None, None, None)


class Connection(Protocol):
    """What a request may do to its own connection."""

    def drop(self) -> None: ...


class ConnectionObserver(Protocol):
    """Told of each accepted connection and of its end (`server.authn.PeerCertificates` records client
    certificates so); `connected` returns the key `disconnected` is given."""

    def connected(self, transport: asyncio.BaseTransport) -> tuple[str, int] | None: ...

    def disconnected(self, peer: tuple[str, int] | None) -> None: ...


def drop_connection(scope: Any) -> bool:
    """Reset the connection `scope`'s request came on (module docstring); False when the server is not one of
    `connection_protocol`'s (the connection then closes as uvicorn closes it)."""
    connection: Connection | None = scope.get(CONNECTION_KEY)
    if connection is None:
        return False
    connection.drop()
    return True


def connection_protocol(limits: ConnectionLimits, observer: ConnectionObserver | None = None) -> type[asyncio.Protocol]:
    """Uvicorn's h11 protocol class with `limits` (module docstring), telling `observer` of each connection.

    One class per server: the per-address count is shared by the connections of that server only."""
    counts: dict[str, int] = {}
    warned: set[str] = set()  # addresses already logged as over the limit, until their count falls back to zero
    base: Any = H11Protocol

    class GuardedProtocol(base):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._inner_app = self.config.loaded_app  # what uvicorn's protocol calls, wrapped below
            self.app = self._with_connection
            self._address: str | None = None
            self._refused = False
            self._observed: tuple[str, int] | None = None
            self._phase = _IDLE
            self._timer: asyncio.TimerHandle | None = None
            self._timer_at = 0.0
            self._headers_by = 0.0
            self._body_by = 0.0
            self._progress_at = 0.0

        async def _with_connection(self, scope: Any, receive: Any, send: Any) -> None:
            scope[CONNECTION_KEY] = self
            await self._inner_app(scope, receive, send)

        # -- the connection's life -----------------------------------------------------------------------------------

        def connection_made(self, transport: asyncio.Transport) -> None:
            peer = transport.get_extra_info("peername")
            address = str(peer[0]) if isinstance(peer, tuple) and peer else "unknown"
            if limits.per_client is not None:
                held = counts.get(address, 0)
                if held >= limits.per_client:
                    self._refuse(transport, address, held)
                    return
            counts[address] = counts.get(address, 0) + 1
            self._address = address
            if observer is not None:
                self._observed = observer.connected(transport)
            super().connection_made(transport)
            self._enter(_HEADERS)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            self._disarm()
            self._phase = _IDLE
            address = self._address
            if address is not None:
                self._address = None
                left = counts[address] - 1
                if left:
                    counts[address] = left
                else:
                    del counts[address]
                    warned.discard(address)
            if observer is not None:
                observer.disconnected(self._observed)
            super().connection_lost(exc)

        def _refuse(self, transport: asyncio.Transport, address: str, held: int) -> None:
            self._refused = True
            if address not in warned:
                warned.add(address)
                log.warning("refusing connections from %s: it holds %d, the limit", address, held)
            _reset(transport)

        def drop(self) -> None:
            """Reset this connection now (module docstring)."""
            cycle = self.cycle
            if cycle is not None:
                cycle.disconnected = True
                cycle.message_event.set()
            self._disarm()
            self._phase = _IDLE
            if self.transport is not None:
                _reset(self.transport)

        # -- following the request's phase ---------------------------------------------------------------------------

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._follow(arrived=True)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # A pipelined request already buffered has been taken up; one still incomplete is in its headers phase.
            self._follow(arrived=bool(self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]))

        def _follow(self, arrived: bool) -> None:
            if self.transport.is_closing():
                self._disarm()
                self._phase = _IDLE
                return
            state = self.conn.their_state
            if state is h11.IDLE:
                if self._phase != _HEADERS and arrived:
                    self._enter(_HEADERS)  # the first bytes of a request on a kept-alive connection
                elif self._phase == _BODY:
                    self._enter(_IDLE)
            elif state is h11.SEND_BODY:
                if self._phase != _BODY:
                    self._enter(_BODY)
                elif arrived:
                    self._progress_at = self.loop.time()
            elif self._phase != _IDLE:
                self._enter(_IDLE)  # the request is in: the app works, then answers at its own pace

        def _enter(self, phase: int) -> None:
            now = self.loop.time()
            self._phase = phase
            if phase == _HEADERS and limits.header_timeout is not None:
                self._headers_by = now + limits.header_timeout
                self._arm(self._headers_by)
            elif phase == _BODY and (limits.body_timeout is not None or limits.body_idle_timeout is not None):
                self._progress_at = now
                self._body_by = now + limits.body_timeout if limits.body_timeout is not None else float("inf")
                self._arm(self._body_deadline())
            else:
                self._disarm()

        def _body_deadline(self) -> float:
            idle = limits.body_idle_timeout
            return min(self._body_by, self._progress_at + idle if idle is not None else float("inf"))

        def _arm(self, at: float) -> None:
            if self._timer is not None:
                if self._timer_at <= at:
                    return  # it fires first, and checks again then
                self._timer.cancel()
            self._timer_at = at
            self._timer = self.loop.call_at(at, self._check)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _check(self) -> None:
            self._timer = None
            now = self.loop.time()
            if self._phase == _HEADERS:
                if now < self._headers_by:
                    self._arm(self._headers_by)
                    return
                log.debug("closing a connection from %s: no complete request headers in time", self._address)
                self._phase = _IDLE
                self._close()
            elif self._phase == _BODY:
                cycle = self.cycle
                if self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue):
                    # The server holds the body back, not the client: a fresh idle period once it reads again.
                    self._progress_at = now
                    self._body_by = max(self._body_by, now + (limits.body_idle_timeout or limits.body_timeout or 0))
                    self._arm(self._body_deadline())
                    return
                deadline = self._body_deadline()
                if now < deadline:
                    self._arm(deadline)
                    return
                log.debug("ending a request from %s: its body did not arrive in time", self._address)
                self._phase = _IDLE
                self._late_body()

        def _close(self) -> None:
            try:
                self.conn.send(h11.ConnectionClosed())
            except h11.LocalProtocolError:
                pass  # nothing was being answered
            self.transport.close()

        def _late_body(self) -> None:
            cycle = self.cycle
            if cycle is None or cycle.response_started or cycle.disconnected:
                self.drop()
                return
            body = http_errors.protocol_status_body(
                408, "Timeout", "the request body was not received in time; the connection is closed"
            )
            content = json.dumps(body, separators=(",", ":")).encode("ascii")
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(content)).encode("ascii")),
                (b"connection", b"close"),
            ]
            # The app's request is told its client went away; what it sends from now on is discarded.
            cycle.response_started = cycle.response_complete = cycle.disconnected = True
            cycle.message_event.set()
            try:
                output = self.conn.send(h11.Response(status_code=408, headers=headers, reason=b"Request Timeout"))
                output += self.conn.send(h11.Data(data=content))
                output += self.conn.send(h11.EndOfMessage())
            except h11.LocalProtocolError:
                self.drop()
                return
            self.transport.write(output)
            self._close()

    return GuardedProtocol


def _reset(transport: asyncio.BaseTransport) -> None:
    """Close `transport` with a reset: nothing queued is sent, the kernel keeps nothing for it."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
        except OSError:
            pass  # already gone
    transport.abort()  # type: ignore[attr-defined]
