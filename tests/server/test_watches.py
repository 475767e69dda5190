"""Watch on the wire as Kubernetes serves it: stream=watch, 410 as an ERROR event, bookmarks, Table events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace.clocks import FakeClock
from devplace.server import _watches as watches
from devplace.server._app import create_app
from devplace.server._representations import ObjectResponse
from devplace.store import Event, MemoryStore
from tests.servers import serve_app

NODES = "/api/v1/nodes"
JSON = {"Accept": "application/json"}
NDJSON = {"Accept": "application/x-ndjson"}
TABLE = {
    "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
}
BOUND = 10  # seconds any single read may take before the test fails (a bound, not an expectation)


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[MemoryStore]:
    backing = MemoryStore(clock=clock)
    yield backing
    await backing.close()


@pytest.fixture
async def api(store: MemoryStore, clock: FakeClock) -> AsyncIterator[httpx2.AsyncClient]:
    app = create_app(store, fleet_api=False, clock=clock, watch_bookmark_interval=60)
    async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=BOUND) as client:
        yield client


async def next_event(lines: AsyncIterator[str]) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(await asyncio.wait_for(anext(lines), BOUND))
    return event


async def test_a_json_watch_from_a_compacted_revision_is_200_then_an_expired_error_event(
    api: httpx2.AsyncClient, store: MemoryStore
) -> None:
    for name in ("a", "b", "c"):
        await store.create(node(name))
    await store.compact(2)
    params = {"watch": "true", "resourceVersion": "1"}
    async with api.stream("GET", NODES, params=params, headers=JSON) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json;stream=watch"
        body = (await asyncio.wait_for(response.aread(), BOUND)).decode()
    (line,) = body.splitlines()  # the stream ends after the error
    event = json.loads(line)
    assert event["type"] == "ERROR"
    assert (event["object"]["kind"], event["object"]["code"], event["object"]["reason"]) == ("Status", 410, "Expired")
    assert len(store._watchers) == 0


async def test_an_ndjson_watch_from_a_compacted_revision_is_refused_with_410_before_streaming(
    api: httpx2.AsyncClient, store: MemoryStore
) -> None:
    for name in ("a", "b", "c"):
        await store.create(node(name))
    await store.compact(2)
    response = await api.get(NODES, params={"watch": "true", "resourceVersion": "1"}, headers=NDJSON)
    assert response.status_code == 410
    assert response.json()["reason"] == "Expired"


async def test_a_json_watch_without_a_resource_version_starts_with_the_current_objects_as_added(
    api: httpx2.AsyncClient, store: MemoryStore
) -> None:
    await store.create(node("old"))
    gone = await store.create(node("gone"))
    await store.delete("Node", "gone", resource_version=gone["metadata"]["resourceVersion"])
    async with api.stream("GET", NODES, params={"watch": "1"}, headers=JSON) as response:
        lines = response.aiter_lines()
        first = await next_event(lines)
        await store.create(node("new"))
        second = await next_event(lines)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in (first, second)] == [
        ("ADDED", "old"),
        ("ADDED", "new"),
    ]


async def test_bookmarks_come_every_interval_with_the_revision_the_stream_is_complete_through(
    api: httpx2.AsyncClient, store: MemoryStore, clock: FakeClock
) -> None:
    await store.create(node("a"))  # revision 1
    params = {"watch": "1", "resourceVersion": "1", "allowWatchBookmarks": "true"}
    async with api.stream("GET", NODES, params=params, headers=JSON) as response:
        lines = response.aiter_lines()
        await clock.advance(60)
        quiet = await next_event(lines)
        await store.create(node("b"))  # revision 2
        added = await next_event(lines)
        await clock.advance(60)
        after = await next_event(lines)
    assert quiet == {
        "type": "BOOKMARK",
        "object": {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}},
    }
    assert (added["type"], added["object"]["metadata"]["resourceVersion"]) == ("ADDED", "2")
    assert after["type"] == "BOOKMARK"
    assert after["object"]["metadata"] == {"resourceVersion": "2"}


async def test_a_watch_that_does_not_allow_bookmarks_gets_none(
    api: httpx2.AsyncClient, store: MemoryStore, clock: FakeClock
) -> None:
    async with api.stream("GET", NODES, params={"watch": "1", "resourceVersion": "0"}, headers=JSON) as response:
        lines = response.aiter_lines()
        await clock.advance(600)
        await store.create(node("a"))
        event = await next_event(lines)
    assert event["type"] == "ADDED"


async def test_a_table_watch_sends_one_row_tables_with_the_definitions_only_first(
    api: httpx2.AsyncClient, store: MemoryStore
) -> None:
    await store.create(node("a"))
    async with api.stream("GET", NODES, params={"watch": "1", "resourceVersion": "1"}, headers=TABLE) as response:
        lines = response.aiter_lines()
        await store.create(node("b"))
        first = await next_event(lines)
        await store.delete("Node", "b")
        second = await next_event(lines)
    assert [e["type"] for e in (first, second)] == ["ADDED", "DELETED"]
    for event in (first, second):
        assert (event["object"]["kind"], event["object"]["apiVersion"]) == ("Table", "meta.k8s.io/v1")
        (row,) = event["object"]["rows"]
        assert row["cells"][0] == "b"
        assert row["object"]["kind"] == "PartialObjectMetadata"
    assert [d["name"] for d in first["object"]["columnDefinitions"]][:3] == ["Name", "Status", "Roles"]
    assert second["object"]["columnDefinitions"] == []


async def test_a_watch_asking_for_initial_events_is_refused_so_clients_fall_back_to_list_and_watch(
    api: httpx2.AsyncClient,
) -> None:
    response = await api.get(NODES, params={"watch": "1", "sendInitialEvents": "true"}, headers=JSON)
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0]["field"] == "sendInitialEvents"


def test_an_event_with_its_stored_json_is_sent_as_those_bytes_around_its_type() -> None:
    body = '{"kind":"Instance","metadata":{"name":"x","resourceVersion":"7"},"spec":{"a":"\u00e9"}}'
    line = watches._event_line(Event("MODIFIED", json.loads(body), 7, body), None, True)
    assert line == b'{"type":"MODIFIED","object":' + body.encode() + b"}\n"
    assert json.loads(line) == {"type": "MODIFIED", "object": json.loads(body)}


def test_an_event_without_stored_json_is_encoded_and_a_rendered_one_never_takes_the_stored_json() -> None:
    assert watches._event_line(Event("ADDED", {"metadata": {"name": "x"}}, 3), None, True) == (
        b'{"type":"ADDED","object":{"metadata":{"name":"x"}}}\n'
    )
    rendered = watches._event_line(Event("ADDED", {"a": 1}, 3, '{"a":1}'), lambda obj, first: {"row": first}, True)
    assert rendered == b'{"type":"ADDED","object":{"row":true}}\n'


def test_a_line_quoting_a_lone_surrogate_is_written_escaped() -> None:
    assert watches._line({"message": "bad \ud800"}) == b'{"message":"bad \\ud800"}\n'


def test_an_object_answer_is_compact_json_and_what_orjson_refuses_is_encoded_as_before() -> None:
    assert ObjectResponse({"kind": "Pod", "n": "\u00e9"}).body == '{"kind":"Pod","n":"\u00e9"}'.encode()
    assert ObjectResponse({1: "a"}).body == b'{"1":"a"}'  # a key that is not text: the stdlib encoder's answer
