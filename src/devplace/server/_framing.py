"""Requests refused for their framing, before authentication, the body reader or any route sees them.

`RequestFraming` is the outermost ASGI middleware but one (`_HeadAsGet`). It reads only the request line and the
headers (the ASGI scope), never the body, and refuses:

- both `Content-Length` and `Transfer-Encoding` (400 `BadRequest`, the cause naming `Transfer-Encoding`). uvicorn's
  h11 lets chunked encoding win, as RFC 9112 section 6.1 allows, but the RFC also says such a message "ought to be
  handled as an error": it is how a request is smuggled past a proxy that frames it by the other header. The answer
  carries `Connection: close` and the connection is closed, since where the next request would start is unknown.
- more than `MAX_QUERY_PARAMETERS` query parameters (400 `BadRequest`, the cause naming `query`): no route takes more
  than a dozen, and parsing an unbounded number costs every middleware that reads the query.
- a request line and headers over `MAX_HEADER_BYTES` together (431 `RequestHeaderFieldsTooLarge`). uvicorn's h11
  bounds only a head that is still arriving (`h11_max_incomplete_event_size`, set to `H11_MAX_INCOMPLETE_EVENT_SIZE`
  by `server.authn.uvicorn_options`); a head that arrives in one read passed at any size. The h11 bound is twice
  this one, so a head between the two is always answered here, with a `Status`, however the network split it;
  beyond the h11 bound, a head still arriving is cut by uvicorn with its own plain-text 400.

These answers are the same on every path, the /v2 fleet API's included: they are about HTTP, not about either API's
dialect. uvicorn's own refusals of what does not parse as HTTP at all (a bad Content-Length, a NUL in a header) stay
plain-text 400s from uvicorn: they happen before any application runs.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from devplace import errors
from devplace.server import _statuses as http_errors

MAX_QUERY_PARAMETERS = 1000
"""Query parameters one request may carry (`&`-separated fields of the query string, empty ones included)."""

MAX_HEADER_BYTES = 64 * 1024
"""The request line and headers of one request, as sent, in bytes (Kubernetes allows 1 MiB; tokens are a few KiB)."""

H11_MAX_INCOMPLETE_EVENT_SIZE = 2 * MAX_HEADER_BYTES
"""uvicorn's `h11_max_incomplete_event_size`: the most of an unfinished request head a connection buffers."""

Problem = tuple[int, dict[str, object]]
"""An HTTP status code and the `Status` body that answers it."""


def framing_problem(
    headers: Iterable[tuple[bytes, bytes]], query: bytes, method: bytes, raw_path: bytes
) -> Problem | None:
    """What is wrong with a request's framing (module docstring), or None."""
    size = len(method) + len(raw_path) + (len(query) + 1 if query else 0) + len(b"  HTTP/1.1\r\n\r\n")
    framings = set()
    for name, value in headers:
        size += len(name) + len(value) + 4
        if name in (b"content-length", b"transfer-encoding"):
            framings.add(name)
    if size > MAX_HEADER_BYTES:
        message = (
            f"the request line and headers are {size} bytes, more than the server's limit of {MAX_HEADER_BYTES} bytes"
        )
        return 431, http_errors.protocol_status_body(431, "RequestHeaderFieldsTooLarge", message)
    if len(framings) == 2:
        reason = (
            "a request may not carry both Content-Length and Transfer-Encoding: its length would be ambiguous "
            "(RFC 9112 section 6.1); send one of them"
        )
        return 400, http_errors.status_body(errors.Malformed.field("Transfer-Encoding", reason))
    if query:
        count = query.count(b"&") + 1
        if count > MAX_QUERY_PARAMETERS:
            reason = f"{count} query parameters; the server takes at most {MAX_QUERY_PARAMETERS}"
            return 400, http_errors.status_body(errors.Malformed.field("query", reason))
    return None


class RequestFraming:
    """ASGI middleware: refuse requests whose framing is wrong (module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = framing_problem(
            scope.get("headers") or [],
            scope.get("query_string") or b"",
            str(scope.get("method", "")).encode("latin-1"),
            scope.get("raw_path") or str(scope.get("path", "")).encode("utf-8"),
        )
        if problem is None:
            await self.app(scope, receive, send)
            return
        code, body = problem
        # The rest of the connection cannot be trusted after a framing error (nor be read cheaply): close it.
        await JSONResponse(body, status_code=code, headers={"connection": "close"})(scope, receive, send)
