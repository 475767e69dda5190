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
and neither side said `Connection: close`; at most `max_idle` wait. A stream (a watch) opens a connection of its own,
holds it for as long as it is open, and reads it without a StreamReader: its answer is framed in the transport's
callback as the bytes arrive (`_StreamedAnswer`), since a watch's events are most of an agent's reading. A
connection the server closed while idle (uvicorn closes keep-alive connections after 5 s) is noticed before reuse
(its reader saw the end); if a reused connection ends before a single byte of the answer, the request is sent once
more on a fresh connection: the server closed it before reading the request, so nothing was done.

Failures: anything the network or the peer does wrong (refused, reset, end of stream mid-answer, a malformed answer,
TLS errors, the timeout) is `ExchangeError`; the REST core maps it to `errors.Unavailable`. A timeout bounds the whole
exchange (connect, send, answer); a stream's timeout bounds only its opening.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

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
        self._open: set[_Connection | _StreamedAnswer] = set()
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
        """Send one request on a connection of its own and return its answer as an open stream, read as it
        arrives (`_StreamedAnswer`). The timeout bounds the opening only."""
        message = self._message(method, path, params, None, headers)
        if self._closed:
            raise ExchangeError("the client is closed")
        loop = asyncio.get_running_loop()
        with _wire_errors(self.timeout):
            async with asyncio.timeout(self.timeout):
                _, answer = await loop.create_connection(
                    lambda: _StreamedAnswer(method, loop),
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=self.host if self._ssl is not None else None,
                )
                self._open.add(answer)
                try:
                    answer.send(message)
                    head = await answer.head
                except BaseException:
                    self._discard(answer)
                    raise
                return Stream(self, answer, head)

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

    def _discard(self, conn: _Connection | _StreamedAnswer) -> None:
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
    """An answer being read on a connection of its own: its status and headers, then its body as lines
    (`aiter_lines`) or whole (`aread`). Either ends the stream; its connection is never reused."""

    def __init__(self, owner: Exchanges, answer: _StreamedAnswer, head: _Head) -> None:
        self._owner = owner
        self._answer: _StreamedAnswer | None = answer
        self.status_code = head.status
        self.headers = head.headers

    async def aread(self) -> Reply:
        """The body whole (over `_MAX_BODY` bytes is an error)."""
        answer = self._require()
        parts: list[bytes] = []
        total = 0
        try:
            while True:
                while answer.pieces:
                    piece = answer.take()
                    total += len(piece)
                    if total > _MAX_BODY:
                        raise _over_limit(_MAX_BODY)
                    parts.append(piece)
                if answer.error is not None:
                    raise answer.error
                if answer.done:
                    return Reply(self.status_code, self.headers, b"".join(parts))
                await answer.wait()
        finally:
            await self.aclose()

    async def aiter_lines(self) -> AsyncIterator[str]:
        """The body's lines (without their line breaks), as they arrive; ends with the body."""
        answer = self._require()
        pieces = answer.pieces
        lines = _Lines()
        try:
            while True:
                if pieces:
                    for line in lines.feed(answer.take()):
                        yield line
                elif answer.error is not None:
                    raise answer.error
                elif answer.done:
                    break
                else:
                    await answer.wait()
            last = lines.rest()
            if last is not None:
                yield last
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the stream and its connection."""
        answer, self._answer = self._answer, None
        if answer is not None:
            self._owner._discard(answer)

    def _require(self) -> _StreamedAnswer:
        if self._answer is None:
            raise ExchangeError("the stream is closed")
        return self._answer


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
        head = _parse_head(raw)
        if head is not None:
            return head


def _parse_head(raw: bytes) -> _Head | None:
    """The status line and headers of `raw` (a head with its closing empty line); None for a 1xx interim answer."""
    lines = raw.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit():
        raise ExchangeError(f"not an HTTP/1.1 answer: {lines[0][:80]!r}")
    status = int(status_line[1])
    if 100 <= status < 200:
        return None
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
    """Whether the body's end is known without the connection's close (so the connection can be reused); asked of a
    head whose body was read, so its framing is well formed."""
    return _framing(head, method)[0] != "close"


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


def _framing(head: _Head, method: str) -> tuple[str, int]:
    """How the body's end is found: ("none", 0), ("chunked", 0), ("length", bytes) or ("close", 0)."""
    if method == "HEAD" or head.status in _NO_BODY_CODES:
        return "none", 0
    if "chunked" in head.headers.get("transfer-encoding", "").lower():
        return "chunked", 0
    if "content-length" not in head.headers:
        return "close", 0
    try:
        length = int(head.headers["content-length"])
    except ValueError as e:
        raise ExchangeError(f"a malformed Content-Length: {head.headers['content-length']!r}") from e
    if length < 0:
        raise ExchangeError(f"a malformed Content-Length: {head.headers['content-length']!r}")
    return "length", length


def _over_limit(limit: int) -> ExchangeError:
    return ExchangeError(f"the answer's body is over {limit} bytes")


async def _read_body(reader: asyncio.StreamReader, head: _Head, method: str) -> bytes:
    """The body read whole, by the framing its head declares; over `_MAX_BODY` bytes in all is an error."""
    limit = _MAX_BODY
    framing, length = _framing(head, method)
    if framing == "length":
        if length > limit:
            raise _over_limit(limit)
        return await reader.readexactly(length) if length else b""
    parts: list[bytes] = []
    total = 0
    if framing == "chunked":
        while size := _chunk_size(await reader.readuntil(b"\r\n")):
            total += size
            if total > limit:
                raise _over_limit(limit)
            parts.append((await reader.readexactly(size + 2))[:-2])
        await _trailers(reader)
    elif framing == "close":
        while chunk := await reader.read(65536):
            total += len(chunk)
            if total > limit:
                raise _over_limit(limit)
            parts.append(chunk)
    return b"".join(parts)


_HEAD, _SIZE, _DATA, _CRLF, _TRAILER, _LENGTH, _CLOSE, _DONE = range(8)
"""The states of a `_StreamedAnswer`: what the next bytes are."""
_PAUSE_AT = 4 * 1024 * 1024
"""A stream's body bytes received and not yet taken by its reader, past which the socket is not read."""


class _StreamedAnswer(asyncio.Protocol):
    """One answer on a connection of its own, framed in the transport's callback as its bytes arrive.

    Why not a StreamReader, as `request` uses: a watch's cost is its events, and each one read through a reader was
    a `readuntil` for the chunk's size line and a `readexactly` for its data, each a coroutine with its own wait,
    buffer search and copy, under two generators. Here the head, the chunk framing and the trailers are parsed once
    per arrival, body pieces are sliced out of it (a chunk that arrived whole is one slice) and queued, and the
    reader (`Stream`) is woken once per arrival, only when it waits on an empty queue. A chunk's data is passed on
    as it comes, so no chunk is ever buffered here whole; what is buffered is at most an unfinished head or framing
    line, and a head or a framing line over `_MAX_HEAD` is refused whether it arrives whole or in pieces. Reading
    pauses while the reader is `_PAUSE_AT` bytes behind.

    Failures (a malformed answer, the connection's end mid-answer, a reset) are kept as `error`, an
    `ExchangeError`, for the reader to raise; the callback itself never raises (the loop would take that for a bug
    of the transport)."""

    def __init__(self, method: str, loop: asyncio.AbstractEventLoop) -> None:
        self._method = method
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._state = _HEAD
        self._buffer = b""  # an unfinished head or framing line, or the first byte of a chunk's CRLF
        self._need = 0  # _DATA, _LENGTH: body bytes still to come
        self._started = False  # a byte of the answer arrived
        self.head: asyncio.Future[_Head] = loop.create_future()
        self.pieces: deque[bytes] = deque()
        self._queued = 0
        self._paused = False
        self.done = False
        self.error: ExchangeError | None = None
        self._waiter: asyncio.Future[None] | None = None

    # -- the transport's side --------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.done or self.error is not None:
            return
        self._started = True
        if self._buffer:
            data, self._buffer = self._buffer + data, b""
        try:
            used = self._parse(data)
        except ExchangeError as e:
            self._fail(e)
            return
        if used < len(data) and not self.done:
            self._buffer = data[used:]
            if len(self._buffer) > _MAX_HEAD:
                self._fail(self._too_long())
                return
        if self._queued > _PAUSE_AT and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool | None:
        if self._state == _CLOSE:
            self._finish()
        return None  # the transport closes itself; `connection_lost` follows

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done or self.error is not None:
            return
        if self._state == _CLOSE and exc is None:
            self._finish()
        elif not self._started:
            self._fail(ExchangeError("the server closed the connection before answering"))
        elif exc is not None:
            self._fail(ExchangeError(f"{type(exc).__name__}: {exc}"))
        else:
            self._fail(ExchangeError("the connection ended in the middle of the answer"))

    def _parse(self, data: bytes) -> int:
        """Consume what `data` completes; returns how many bytes were used (the rest waits for more)."""
        pos = 0
        end = len(data)
        pieces = self.pieces
        while pos < end:
            state = self._state
            if state in (_DATA, _LENGTH):
                take = min(self._need, end - pos)
                piece = data if take == end else data[pos : pos + take]
                pieces.append(piece)
                self._queued += take
                pos += take
                self._need -= take
                if not self._need:
                    if state == _LENGTH:
                        self._finish()
                        return pos
                    self._state = _CRLF
            elif state == _CRLF:
                if end - pos < 2:
                    return pos
                if data[pos : pos + 2] != b"\r\n":
                    raise ExchangeError(f"a chunk's data is not followed by a line break: {data[pos : pos + 20]!r}")
                pos += 2
                self._state = _SIZE
            elif state == _CLOSE:
                piece = data if pos == 0 else data[pos:]
                pieces.append(piece)
                self._queued += len(piece)
                return end
            elif state == _HEAD:
                stop = data.find(b"\r\n\r\n", pos)
                if stop < 0:
                    return pos
                if stop + 4 - pos > _MAX_HEAD:
                    raise self._too_long()
                head = _parse_head(data[pos : stop + 4])
                pos = stop + 4
                if head is not None:
                    self._begin(head)
            else:  # _SIZE, _TRAILER: a line
                stop = data.find(b"\r\n", pos)
                if stop < 0:
                    return pos
                if stop - pos > _MAX_HEAD:
                    raise self._too_long()
                line = data[pos:stop]
                pos = stop + 2
                if state == _TRAILER:
                    if not line:
                        self._finish()
                        return pos
                elif size := _chunk_size(line):
                    if size > _MAX_BODY:
                        raise _over_limit(_MAX_BODY)
                    self._need = size
                    self._state = _DATA
                else:
                    self._state = _TRAILER
            if self.done:
                return pos
        return pos

    def _too_long(self) -> ExchangeError:
        """A head or a framing line over `_MAX_HEAD`, whole or still unfinished (as `_read_head` bounds a head)."""
        what = "head" if self._state == _HEAD else "framing line"
        return ExchangeError(f"the answer's {what} is over {_MAX_HEAD} bytes")

    def _begin(self, head: _Head) -> None:
        """The head arrived: hand it out and read the body as it declares."""
        framing, length = _framing(head, self._method)
        if framing == "length" and length > _MAX_BODY:
            raise _over_limit(_MAX_BODY)
        if not self.head.done():
            self.head.set_result(head)
        if framing == "none" or (framing == "length" and not length):
            self._finish()
        elif framing == "length":
            self._state, self._need = _LENGTH, length
        else:
            self._state = _SIZE if framing == "chunked" else _CLOSE

    def _finish(self) -> None:
        self._state = _DONE
        self.done = True
        self._wake()

    def _fail(self, error: ExchangeError) -> None:
        self.error = error
        if not self.head.done():
            self.head.set_exception(error)
            self.head.exception()  # marked as seen: a caller gone (timed out) leaves no "never retrieved" noise
        self._wake()
        self.close()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the reader's side -----------------------------------------------------------------------------------

    def send(self, message: bytes) -> None:
        if self._transport is None:
            raise ExchangeError("the connection is not open")
        self._transport.write(message)

    def take(self) -> bytes:
        """The next queued body piece (there must be one); reading resumes once the reader has caught up."""
        piece = self.pieces.popleft()
        self._queued -= len(piece)
        if self._paused and self._queued <= _PAUSE_AT // 2 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return piece

    async def wait(self) -> None:
        """Return once a piece is queued, the body has ended, or the answer failed."""
        waiter = self._waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
