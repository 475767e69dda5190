"""HTTP/1.1 exchanges on pooled keep-alive connections: the wire under the REST client core (`restclients`).

Why not a general HTTP client: an agent's cost is its store round trips and its watch events. Measured on the 2-core
machine (`bench/httpclients.py`, 2026-11-26), a PUT of a small ConfigMap through httpx2 cost 0.93 ms of the client's
CPU, the same exchange here 0.19 ms (JSON included); a watch event 31 against 22 us. The difference is layers this
client does not need (redirects, cookies, proxies from the environment, HTTP/2, a generic auth-flow machine,
per-request pool scheduling). This module is the subset the Kubernetes REST protocol uses, written once: a request
with a body and a response read whole (`request`) or as a stream of lines (`stream`, for watches). It reads no proxy
settings from the environment: the store talks to its API server directly.

What it speaks: HTTP/1.1 to one origin (`http://` or `https://`, a TLS context given), `Host`, `Content-Length`
requests; responses with `Content-Length`, `Transfer-Encoding: chunked`, or read to the connection's close; `1xx`
interim answers skipped; `HEAD`, 204 and 304 without a body. Headers are kept lower-cased. Nothing is followed or
rewritten: a redirect is an answer like any other.

Connections: an exchange takes an idle connection (or opens one), and gives it back once its response is read whole
and neither side said `Connection: close`; at most `max_idle` wait. A watch holds its connection for as long as its
stream is open. A connection the server closed while idle (uvicorn closes keep-alive connections after 5 s) is
noticed before reuse (its reader saw the end); if a reused connection ends before a single byte of the answer, the
request is sent once more on a fresh connection: the server closed it before reading the request, so nothing was done.

Failures: anything the network or the peer does wrong (refused, reset, end of stream mid-answer, a malformed answer,
TLS errors, the timeout) is `ExchangeError`; the REST core maps it to `errors.Unavailable`. A timeout bounds the whole
exchange (connect, send, answer); a stream's timeout bounds only its opening.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from devplace.store import _base as base

_MAX_HEAD = 64 * 1024
_MAX_LINE = 64 * 1024 * 1024  # one watch event (an object of up to the store's size limit, and then some)
_MAX_BODY = 256 * 1024 * 1024  # one answer read whole (a list page); beyond, the peer is not an API server we trust
_NO_BODY_CODES = frozenset({204, 304})


class ExchangeError(Exception):
    """The exchange failed on the wire: no answer, or not an HTTP answer (module docstring)."""


_WIRE_ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ssl.SSLError)


@contextlib.contextmanager
def _wire_errors(timeout: float | None = None) -> Iterator[None]:
    """The network's and the peer's failures, and the timeout, as `ExchangeError`."""
    try:
        yield
    except TimeoutError as e:
        raise ExchangeError(f"no answer within {timeout}s") from e
    except _WIRE_ERRORS as e:
        raise ExchangeError(f"{type(e).__name__}: {e}") from e


@dataclass
class Reply:
    """An answer read whole."""

    status_code: int
    headers: dict[str, str]
    content: bytes = b""

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; `ValueError` when it is not."""
        return base.decode_json(self.content)


@dataclass(eq=False)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reused: bool = False

    @property
    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.is_closing() and not self.reader.exception()

    def close(self) -> None:
        self.writer.close()


@dataclass
class _Head:
    status: int
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def keep_alive(self) -> bool:
        return "close" not in self.headers.get("connection", "").lower()


class Exchanges:
    """A pool of HTTP/1.1 connections to one origin, and the two ways to use them (module docstring)."""

    def __init__(
        self,
        base_url: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        max_idle: int = 32,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        default_port = self.port == (443 if self.https else 80)
        self._host_header = host if default_port else f"{host}:{self.port}"
        self._ssl = (ssl_context or ssl.create_default_context()) if self.https else None
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.timeout = timeout
        self._max_idle = max_idle
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._closed = False

    # -- the two uses ------------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """Send one request and read its answer whole (`ExchangeError` on the wire's failures)."""
        message = self._message(method, path, params, content, headers)
        with _wire_errors(self.timeout):
            async with asyncio.timeout(self.timeout):
                conn, head = await self._send(message)
                try:
                    body = await _read_body(conn.reader, head, method)
                except BaseException:
                    self._discard(conn)
                    raise
                self._release(conn, head.keep_alive and _framed(head, method))
                return Reply(head.status, head.headers, body)

    async def stream(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Stream:
        """Send one request and return its answer as an open stream (the connection is the stream's until closed).
        The timeout bounds the opening only."""
        message = self._message(method, path, params, None, headers)
        with _wire_errors(self.timeout):
            async with asyncio.timeout(self.timeout):
                conn, head = await self._send(message)
                return Stream(self, conn, head, method)

    async def _send(self, message: bytes) -> tuple[_Connection, _Head]:
        """Send `message` and read the answer's head; once more on a fresh connection when a reused one ended
        before answering (module docstring)."""
        for attempt in (0, 1):
            conn = await self._connection(fresh=attempt > 0)
            try:
                conn.writer.write(message)
                return conn, await _read_head(conn.reader)
            except _EndedEarly:
                self._discard(conn)
                if conn.reused and attempt == 0:
                    continue  # the server closed it before reading: nothing was done, send again
                raise ExchangeError("the server closed the connection before answering") from None
            except BaseException:
                self._discard(conn)
                raise
        raise ExchangeError("the server closed two connections before answering")

    async def aclose(self) -> None:
        self._closed = True
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._idle.clear()

    # -- connections -------------------------------------------------------------------------------------------

    async def _connection(self, *, fresh: bool) -> _Connection:
        if self._closed:
            raise ExchangeError("the client is closed")
        while self._idle and not fresh:
            conn = self._idle.pop()
            if conn.usable:
                conn.reused = True
                return conn
            self._discard(conn)
        reader, writer = await asyncio.open_connection(
            self.host,
            self.port,
            ssl=self._ssl,
            server_hostname=self.host if self._ssl is not None else None,
            limit=_MAX_LINE,
        )
        conn = _Connection(reader, writer)
        self._open.add(conn)
        return conn

    def _release(self, conn: _Connection, reusable: bool) -> None:
        if reusable and not self._closed and conn.usable and len(self._idle) < self._max_idle:
            self._idle.append(conn)
        else:
            self._discard(conn)

    def _discard(self, conn: _Connection) -> None:
        self._open.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)
        conn.close()

    # -- requests ----------------------------------------------------------------------------------------------

    def _message(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        content: bytes | None,
        headers: Mapping[str, str] | None,
    ) -> bytes:
        target = self.prefix + path
        if params:
            target += ("&" if "?" in target else "?") + urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
        merged = dict(self.headers)
        for key, value in (headers or {}).items():
            merged[key.lower()] = value
        lines = [f"{method} {target} HTTP/1.1", f"host: {self._host_header}"]
        lines += [f"{key}: {value}" for key, value in merged.items()]
        if content is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"content-length: {len(content or b'')}")
        for line in lines:
            if "\r" in line or "\n" in line:
                raise ValueError(f"a request line or header holds a line break: {line[:80]!r}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (content or b"")


class Stream:
    """An answer being read: its status and headers, then its body as lines (`aiter_lines`) or whole (`aread`)."""

    def __init__(self, owner: Exchanges, conn: _Connection, head: _Head, method: str) -> None:
        self._owner = owner
        self._conn: _Connection | None = conn
        self._head = head
        self._method = method
        self.status_code = head.status
        self.headers = head.headers

    async def aread(self) -> Reply:
        conn = self._require()
        try:
            with _wire_errors():
                body = await _read_body(conn.reader, self._head, self._method)
        except ExchangeError:
            await self.aclose()
            raise
        self._conn = None
        self._owner._release(conn, self._head.keep_alive and _framed(self._head, self._method))
        return Reply(self.status_code, self.headers, body)

    async def aiter_lines(self) -> AsyncIterator[str]:
        """The body's lines (without their line breaks), as they arrive; ends with the body."""
        conn = self._require()
        lines = _Lines()
        try:
            with _wire_errors():
                async for chunk in _body_chunks(conn.reader, self._head, self._method, limit=None):
                    for line in lines.feed(chunk):
                        yield line
                last = lines.rest()
                if last is not None:
                    yield last
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the stream: its connection is not reused (its body may not have been read whole)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._owner._discard(conn)

    def _require(self) -> _Connection:
        if self._conn is None:
            raise ExchangeError("the stream is closed")
        return self._conn


class _EndedEarly(Exception):
    """The connection ended before the first byte of an answer."""


async def _read_head(reader: asyncio.StreamReader) -> _Head:
    """The status line and headers, skipping 1xx interim answers."""
    while True:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if not e.partial:
                raise _EndedEarly from e
            raise
        if len(raw) > _MAX_HEAD:
            raise ExchangeError(f"the answer's head is over {_MAX_HEAD} bytes")
        lines = raw.decode("latin-1").split("\r\n")
        status_line = lines[0].split(" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit():
            raise ExchangeError(f"not an HTTP/1.1 answer: {lines[0][:80]!r}")
        status = int(status_line[1])
        if 100 <= status < 200:
            continue
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise ExchangeError(f"a malformed header line: {line[:80]!r}")
            key = name.strip().lower()
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
        return _Head(status, headers)


def _framed(head: _Head, method: str) -> bool:
    """Whether the body's end is known without the connection's close (so the connection can be reused)."""
    if method == "HEAD" or head.status in _NO_BODY_CODES:
        return True
    return "content-length" in head.headers or "chunked" in head.headers.get("transfer-encoding", "").lower()


def _chunk_size(size_line: bytes) -> int:
    """The size a chunk's first line declares (0: the last chunk); a malformed one is `ExchangeError`."""
    try:
        size = int(size_line.split(b";", 1)[0].strip(), 16)
    except ValueError as e:
        raise ExchangeError(f"a malformed chunk size: {size_line[:40]!r}") from e
    if size < 0:
        raise ExchangeError(f"a malformed chunk size: {size_line[:40]!r}")
    return size


async def _trailers(reader: asyncio.StreamReader) -> None:
    """Read what follows the last chunk: trailers, then the empty line that ends the body."""
    while (await reader.readuntil(b"\r\n")) != b"\r\n":
        pass


class _Lines:
    """Splits a body arriving in pieces into its lines (without their line breaks)."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []  # the line being read, in pieces: joined once, when it ends
        self._size = 0

    def feed(self, chunk: bytes) -> list[str]:
        """The lines `chunk` completes."""
        if b"\n" not in chunk:
            self._parts.append(chunk)
            self._size += len(chunk)
            if self._size > _MAX_LINE:
                raise ExchangeError(f"a line of the answer is over {_MAX_LINE} bytes")
            return []
        first, *lines, rest = chunk.split(b"\n")
        parts = self._parts
        head = b"".join([*parts, first]) if parts else first
        self._parts, self._size = ([rest], len(rest)) if rest else ([], 0)
        return [line.rstrip(b"\r").decode("utf-8", errors="replace") for line in (head, *lines)]

    def rest(self) -> str | None:
        """The last line, when the body did not end with a line break."""
        if not self._parts:
            return None
        return b"".join(self._parts).rstrip(b"\r").decode("utf-8", errors="replace")


async def _read_body(reader: asyncio.StreamReader, head: _Head, method: str) -> bytes:
    return b"".join([chunk async for chunk in _body_chunks(reader, head, method, limit=_MAX_BODY)])


async def _body_chunks(
    reader: asyncio.StreamReader, head: _Head, method: str, *, limit: int | None
) -> AsyncIterator[bytes]:
    """The body as it arrives, by the framing its head declares; more than `limit` bytes in all is an error (a
    stream's lines are bounded one by one instead)."""
    total = 0

    def counted(size: int) -> int:
        nonlocal total
        total += size
        if limit is None:  # a stream: its lines are bounded one by one, and each piece by `_MAX_BODY`
            if size > _MAX_BODY:
                raise ExchangeError(f"the answer's body is over {_MAX_BODY} bytes")
        elif total > limit:
            raise ExchangeError(f"the answer's body is over {limit} bytes")
        return size

    if method == "HEAD" or head.status in _NO_BODY_CODES:
        return
    if "chunked" in head.headers.get("transfer-encoding", "").lower():
        while size := _chunk_size(await reader.readuntil(b"\r\n")):
            data = await reader.readexactly(counted(size) + 2)
            yield data[:-2]
        await _trailers(reader)
    elif "content-length" in head.headers:
        try:
            length = int(head.headers["content-length"])
        except ValueError as e:
            raise ExchangeError(f"a malformed Content-Length: {head.headers['content-length']!r}") from e
        if length < 0:
            raise ExchangeError(f"a malformed Content-Length: {head.headers['content-length']!r}")
        if length:
            yield await reader.readexactly(counted(length))
    else:
        while chunk := await reader.read(65536):
            counted(len(chunk))
            yield chunk
