"""Watch streams on the wire, as Kubernetes serves them to kubectl and client libraries.

A watch is one HTTP response of JSON lines, `{"type": "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR", "object":
{...}}`. A client that asks for JSON (kubectl, client-go, the Python client) gets `application/json;stream=watch`,
which client-go decodes with its JSON stream serializer; a client that asks for NDJSON (`application/x-ndjson`),
or says nothing more precise, gets the same lines under that name.

Entry: the store's watch is entered (registered) before any byte is sent, so a watch misses nothing written after
the response began. The caller may pass `initial` objects to send first as ADDED events, their JSON as the store keeps
it (the resource API sends a Kubernetes client the current objects when it watches without a resourceVersion, as
Kubernetes does, reading them a page at a time: `server.lists.every_object`); they go out a slice at a time, the
event loop running its other tasks between two slices (`server.representations.paced`), so a watch start over big
objects never holds the loop for longer than a slice. A store failure while they are read is an `ERROR` event.
A refusal at entry (a bad selector, a closed store) is an HTTP error `Status`. A `resourceVersion` the store has
compacted (or one beyond its revision) is answered as Kubernetes answers it to a JSON watch: 200, then one `ERROR`
event whose object is a `Status` (410, reason `Expired`), then the end of the stream; informers and `kubectl get -w`
relist on it. NDJSON clients get that refusal as a 410 `Status` response instead, before streaming: devplace's
remote store backend asks for NDJSON and so raises `Gone` when it enters the watch, as the store contract requires.
A failure after entry (history compacted under a slow reader, the store closing) is an `ERROR` event in both forms.

Bookmarks: with `allowWatchBookmarks=true` the stream carries a `BOOKMARK` event every `interval` seconds of the
app's clock (Kubernetes sends about one a minute), `{"type": "BOOKMARK", "object": {"kind": K, "apiVersion": V,
"metadata": {"resourceVersion": "N"}}}`, promising that every matching event up to N has been sent, so a client may
resume from N. N is the revision this stream is known to be complete through: its last event's, or the revision
it started from. (The store's revision would be the more useful promise for a quiet watch, but the `Store`
protocol has no way to tell when a stream has caught up with it, and an event of another process's write may still be
on its way to the stream: promising the store's revision could make a resuming client skip that event.)

Tables: a watch that asked for a Table (`kubectl get -w`) gets each event's object as a Table with one row
(`server.representations`); ERROR objects stay `Status`es.

Ending: the stream ends after `timeoutSeconds`, and when the client goes away the store watch is exited at once,
even if no event ever came (the response listens for the disconnect itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import orjson
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from devplace import errors
from devplace.clocks import Clock
from devplace.server import _statuses as http_errors
from devplace.server._representations import paced
from devplace.store import Event, WatchStream

NDJSON = "application/x-ndjson"
WATCH_JSON = "application/json;stream=watch"

Render = Callable[[dict[str, Any], bool], dict[str, Any]]
"""An event's object as sent (e.g. as a one-row Table); the flag says whether it is the stream's first."""


@dataclass(frozen=True)
class Bookmarks:
    """BOOKMARK events every `interval` seconds of `clock`, their objects of this kind and apiVersion (a Table's
    when the watch asked for Tables)."""

    kind: str
    api_version: str
    interval: float
    clock: Clock


def watch_media_type(accept: str | None, *, store_protocol: bool = False) -> str:
    """The media type of a watch response: Kubernetes' `stream=watch` form (and its semantics: current objects first
    without a resourceVersion, an expired one as an ERROR event) for every client, as Kubernetes serves any client
    that accepts JSON or anything; NDJSON (a 410 before the stream) only for a client that asks for it, as devplace's
    remote store does. `/store/watch` (`store_protocol`), devplace's own path, keeps NDJSON unless JSON is asked
    for."""
    wanted = (accept or "").lower()
    if NDJSON in wanted or (store_protocol and "application/json" not in wanted):
        return NDJSON
    return WATCH_JSON


async def watch_response(
    stream: WatchStream,
    *,
    timeout: float | None,
    media_type: str = NDJSON,
    render: Render | None = None,
    bookmarks: Bookmarks | None = None,
    initial: AsyncGenerator[bytes, None] | None = None,
) -> Response:
    """Enter `stream` (so refusals raise here, before any byte is sent) and stream `initial` (objects' JSON, as ADDED
    events) then its events (module docstring).

    The response owns the entered stream from then on: it exits it when the stream ends, fails, times out or the
    client goes away."""
    try:
        await stream.__aenter__()
    except errors.Gone as e:
        if media_type != WATCH_JSON:
            raise
        return StreamingResponse(_error_only(e), media_type=media_type)
    return WatchResponse(stream, _lines(stream, timeout, render, bookmarks, initial), media_type)


class WatchResponse(StreamingResponse):
    """Watch events as lines; exits the store watch when done. It listens for the client's disconnect itself, so a
    watch that never has an event to send is still unregistered when its client leaves."""

    def __init__(self, stream: WatchStream, lines: AsyncGenerator[bytes, None], media_type: str) -> None:
        super().__init__(lines, media_type=media_type)
        self._stream = stream
        self._lines = lines

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def stream_then_stop() -> None:
                    await self.stream_response(send)
                    group.cancel_scope.cancel()

                group.start_soon(stream_then_stop)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._lines.aclose()  # its pending reads of the stream end before the stream does
                await self._stream.__aexit__(None, None, None)


async def _error_only(error: errors.DevplaceError) -> AsyncIterator[bytes]:
    yield _line({"type": "ERROR", "object": http_errors.status_body(error)})


def _event_line(event: Event, render: Render | None, first: bool) -> bytes:
    """An event's line: around the object's JSON as the store keeps it when the store has it and nothing is
    rendered (a dozen watchers of one write then encode nothing), else encoded."""
    if render is None:
        if event.body is not None:
            body = event.body if isinstance(event.body, bytes) else event.body.encode()
            return b'{"type":"' + event.type.encode() + b'","object":' + body + b"}\n"
        return _line(event.to_wire())
    return _line({"type": event.type, "object": render(event.object, first)})


async def _lines(
    stream: WatchStream,
    timeout: float | None,
    render: Render | None,
    bookmarks: Bookmarks | None,
    initial: AsyncGenerator[bytes, None] | None,
) -> AsyncGenerator[bytes, None]:
    """JSON lines of `initial`'s ADDED events, then of an entered stream's events until `timeout` seconds have
    passed; a failure is an ERROR line. The deadline bounds each wait for an event, never a line being sent."""
    deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
    first = True
    if initial is not None:
        async with contextlib.aclosing(paced(_added(initial, render))) as lines:
            try:
                async for chunk in lines:
                    yield chunk
                    first = False
            except errors.DevplaceError as e:
                yield _line({"type": "ERROR", "object": http_errors.status_body(e)})
                return
    events = _events(stream, deadline) if bookmarks is None else _events_and_bookmarks(stream, deadline, bookmarks)
    async with contextlib.aclosing(events):
        try:
            async for item in events:
                if isinstance(item, Event):
                    yield _event_line(item, render, first)
                    first = False
                else:
                    yield _line(_bookmark(bookmarks, item, render, first))
        except errors.DevplaceError as e:
            yield _line({"type": "ERROR", "object": http_errors.status_body(e)})


async def _added(bodies: AsyncGenerator[bytes, None], render: Render | None) -> AsyncGenerator[bytes, None]:
    """An ADDED line per object's JSON: the JSON as it is, or decoded for `render` (a Table row)."""
    first = True
    async with contextlib.aclosing(bodies):
        async for body in bodies:
            if render is None:
                yield b'{"type":"ADDED","object":' + body + b"}\n"
            else:
                yield _line({"type": "ADDED", "object": render(orjson.loads(body), first)})
            first = False


async def _events(stream: WatchStream, deadline: float | None) -> AsyncGenerator[Event | int, None]:
    while True:
        try:
            if deadline is None:
                event = await anext(stream)
            else:
                async with asyncio.timeout_at(deadline):
                    event = await anext(stream)
        except (StopAsyncIteration, TimeoutError):
            return
        yield event


async def _events_and_bookmarks(
    stream: WatchStream, deadline: float | None, bookmarks: Bookmarks
) -> AsyncGenerator[Event | int, None]:
    """The stream's events, and every `bookmarks.interval` the revision a BOOKMARK may promise (module docstring)."""
    loop = asyncio.get_running_loop()
    complete = stream.revision  # every matching event up to here has been yielded
    next_event: asyncio.Future[Any] | None = None  # an Event
    timer: asyncio.Future[Any] | None = None
    try:
        while True:
            if next_event is None:
                next_event = asyncio.ensure_future(anext(stream))
            if timer is None:
                timer = asyncio.ensure_future(bookmarks.clock.sleep(bookmarks.interval))
            wait = None if deadline is None else max(0.0, deadline - loop.time())
            done, _ = await asyncio.wait({next_event, timer}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                return
            if next_event in done:
                finished, next_event = next_event, None
                try:
                    event: Event = finished.result()
                except StopAsyncIteration:
                    return
                complete = max(complete, event.revision)
                yield event
            if timer in done:
                timer = None
                yield complete
    finally:
        for task in (next_event, timer):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


def _bookmark(bookmarks: Bookmarks | None, revision: int, render: Render | None, first: bool) -> dict[str, Any]:
    assert bookmarks is not None
    meta = {"resourceVersion": str(revision)}
    obj: dict[str, Any] = {"kind": bookmarks.kind, "apiVersion": bookmarks.api_version, "metadata": meta}
    if render is not None:
        table = render(obj, first)
        if table.get("kind") == "Table":
            obj = {**table, "metadata": meta, "rows": []}
    return {"type": "BOOKMARK", "object": obj}


def _line(payload: Mapping[str, Any]) -> bytes:
    """Compact JSON and a newline; what orjson refuses (a lone surrogate an error message quotes) is written by the
    stdlib encoder, escaped."""
    try:
        return orjson.dumps(payload) + b"\n"
    except orjson.JSONEncodeError:
        return json.dumps(payload, separators=(",", ":")).encode() + b"\n"
