"""Big reads never hold the event loop for the whole read: a list and a watch start are sent a slice at a time.

The proof is deterministic, not a timing: the resource routes are called as an ASGI app in this event loop while a
probe task counts the loop's turns (it yields at every turn). A `send` that saw the probe's count move since the
previous one knows the route let the loop run other tasks in between. Objects of 100 kB are larger than a slice
(`representations.SLICE_BYTES`), so each goes out in a slice of its own, with a turn of the loop before the next.
Timings are bench/hostile.py's (`big_list`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import pytest
from fastapi import FastAPI

from devplace import errors
from devplace.clocks import FakeClock
from devplace.server import _lists as lists
from devplace.server import _representations as representations
from devplace.server import _resources as resources
from devplace.store import EncodedPage, MemoryStore

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"
BIG = 100_000  # bytes of data per object: more than a slice
BOUND = 10.0  # seconds a request may take before the test fails (a bound, not an expectation)


class PagedStore(MemoryStore):
    """A memory store that counts its reads, and fails the list page numbered `fail_at` (from 1) when set."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.pages = 0
        self.whole_lists = 0
        self.fail_at: int | None = None

    async def list_page(self, *args: Any, **kwargs: Any) -> EncodedPage:
        self.pages += 1
        if self.pages == self.fail_at:
            raise errors.Unavailable("the store went away between two pages")
        return await super().list_page(*args, **kwargs)

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        self.whole_lists += 1
        return await super().list(*args, **kwargs)


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[PagedStore]:
    backing = PagedStore(clock)
    for i in range(5):
        meta = {"name": f"big-{i}", "namespace": "default"}
        await backing.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"blob": str(i) * BIG}}
        )
    backing.pages = backing.whole_lists = 0
    yield backing
    await backing.close()


@pytest.fixture
def app(store: PagedStore, clock: FakeClock) -> FastAPI:
    """The resource routes alone: what is measured is theirs, not a middleware's."""
    served = FastAPI()
    served.include_router(resources.router(store, clock=clock))
    return served


class Turns:
    """Counts the event loop's turns while it runs (module docstring)."""

    def __init__(self) -> None:
        self.count = 0

    async def run(self) -> None:
        while True:
            self.count += 1
            await asyncio.sleep(0)


async def get(
    app: FastAPI, path: str, query: str, accept: str, *, enough: Callable[[bytes], bool] | None = None
) -> list[tuple[int, bytes]]:
    """GET `path` from `app` in this loop: each body message with the loop's turn count when it was sent. A watch
    is left (the client disconnects) once `enough` says the body so far is enough."""
    turns = Turns()
    sent: list[tuple[int, bytes]] = []
    left = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200
        elif message["body"]:
            sent.append((turns.count, message["body"]))
            if enough is not None and enough(b"".join(body for _, body in sent)):
                left.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"test"), (b"accept", accept.encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("test", 80),
    }
    probe = asyncio.create_task(turns.run())
    try:
        await asyncio.wait_for(app(scope, receive, send), BOUND)
    finally:
        probe.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await probe
    return sent


def objects_in(body: bytes) -> int:
    """How many of the big objects `body` holds (each has one 100 kB run of its digit)."""
    return sum(body.count(str(i).encode() * BIG) for i in range(5))


def assert_each_object_in_a_slice_of_its_own_with_the_loop_run_before_the_next(sent: list[tuple[int, bytes]]) -> None:
    carrying = [(turn, body) for turn, body in sent if objects_in(body)]
    assert [objects_in(body) for _, body in carrying] == [1] * 5
    turns = [turn for turn, _ in carrying]
    assert all(later > earlier for earlier, later in itertools.pairwise(turns)), turns


async def test_a_list_of_big_objects_goes_out_an_object_at_a_time_letting_the_loop_run_between(
    app: FastAPI, store: PagedStore
) -> None:
    sent = await get(app, CONFIGMAPS, "", "application/json")
    assert_each_object_in_a_slice_of_its_own_with_the_loop_run_before_the_next(sent)
    body = json.loads(b"".join(body for _, body in sent))
    assert body["items"] == (await store.list("ConfigMap", "default")).items
    assert body["metadata"] == {"resourceVersion": "5"}


async def test_a_table_list_decodes_its_objects_one_slice_at_a_time(app: FastAPI, store: PagedStore) -> None:
    sent = await get(app, CONFIGMAPS, "includeObject=Object", TABLE)
    assert_each_object_in_a_slice_of_its_own_with_the_loop_run_before_the_next(sent)
    table = json.loads(b"".join(body for _, body in sent))
    assert [row["object"] for row in table["rows"]] == (await store.list("ConfigMap", "default")).items
    assert table["columnDefinitions"]


def added(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in body.splitlines() if line]


async def test_a_watch_start_sends_every_object_as_added_reading_the_store_a_page_at_a_time(
    app: FastAPI, store: PagedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lists, "MAX_LIST_BYTES", 2 * BIG + 1000)  # two objects a page: pages of 2, 2 and 1
    sent = await get(app, CONFIGMAPS, "watch=1", "application/json", enough=lambda body: body.count(b"\n") == 5)
    assert_each_object_in_a_slice_of_its_own_with_the_loop_run_before_the_next(sent)
    assert (store.pages, store.whole_lists) == (3, 0)  # pages of 2, 2 and 1 objects, never the whole list at once
    events = added(b"".join(body for _, body in sent))
    assert [event["type"] for event in events] == ["ADDED"] * 5
    assert [event["object"] for event in events] == (await store.list("ConfigMap", "default")).items


async def test_a_table_watch_start_sends_a_row_per_object_the_first_with_the_columns(
    app: FastAPI, store: PagedStore
) -> None:
    sent = await get(app, CONFIGMAPS, "watch=1", TABLE, enough=lambda body: body.count(b"\n") == 5)
    events = added(b"".join(body for _, body in sent))
    assert [[row["cells"][0] for row in event["object"]["rows"]] for event in events] == [
        [f"big-{i}"] for i in range(5)
    ]
    assert [bool(event["object"]["columnDefinitions"]) for event in events] == [True, False, False, False, False]


async def test_a_store_failure_between_the_pages_of_a_watch_start_is_an_error_event(
    app: FastAPI, store: PagedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lists, "MAX_LIST_BYTES", 2 * BIG + 1000)
    store.fail_at = 2
    sent = await get(app, CONFIGMAPS, "watch=1", "application/json", enough=lambda body: body.count(b"\n") == 3)
    events = added(b"".join(body for _, body in sent))
    assert [event["type"] for event in events] == ["ADDED", "ADDED", "ERROR"]
    assert (events[2]["object"]["code"], events[2]["object"]["reason"]) == (503, "ServiceUnavailable")


async def test_paced_joins_small_pieces_into_slices_and_lets_the_loop_run_between_them() -> None:
    async def pieces() -> AsyncGenerator[bytes, None]:
        for _ in range(300):
            yield b"x" * 1000

    turns = Turns()
    probe = asyncio.create_task(turns.run())
    try:
        chunks = [(turns.count, chunk) async for chunk in representations.paced(pieces())]
    finally:
        probe.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await probe
    slice_pieces = -(-representations.SLICE_BYTES // 1000)  # pieces of 1000 bytes it takes to fill a slice
    assert [len(chunk) for _, chunk in chunks] == [slice_pieces * 1000] * (300 // slice_pieces) + [
        300 % slice_pieces * 1000
    ]
    counts = [turn for turn, _ in chunks]
    assert all(later > earlier for earlier, later in itertools.pairwise(counts))
