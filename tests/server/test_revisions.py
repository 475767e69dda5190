"""resourceVersions from hostile clients (issue #10, items 3, 4, 8, 9), against a real uvicorn on 127.0.0.1 serving a
memory store and an sqlite store: a loose or huge revision is 422 naming its field, never a 500 (SQLite's integers
overflow past 2**63-1) and never read loosely; a watch from a revision the store has not reached is 410 (relist),
never a silent stream; compaction beyond the head is 422 and compacts nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from devplace.server._app import create_app
from devplace.store import MemoryStore, Store
from devplace.store._sqlite import SqliteStore
from tests.servers import serve_app

NODES = "/api/v1/nodes"
HUGE = "9223372036854775808"  # 2**63
LOOSE = [" 1", "1 ", "+1", "01", "1_0", "\u0661", "-1", "1.0"]  # int() reads most of these as 1 (or 10)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "store.db")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def api(store: Store) -> AsyncIterator[httpx2.AsyncClient]:
    async with serve_app(create_app(store, fleet_api=False)) as url, httpx2.AsyncClient(base_url=url, timeout=10) as c:
        yield c


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def refused(response: httpx2.Response, code: int, reason: str, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    assert (body["kind"], body["code"], body["reason"]) == ("Status", code, reason)
    if field is not None:
        assert [c["field"] for c in body["details"]["causes"]] == [field]
    return body


# -- watches ------------------------------------------------------------------------------------------------------


async def test_a_watch_from_a_huge_or_loose_revision_is_422_naming_resource_version(api: httpx2.AsyncClient) -> None:
    await api.post(NODES, json=node("a"))
    for path in (NODES, "/store/watch"):
        for rv in (HUGE, "99999999999999999999999", *LOOSE):
            response = await api.get(path, params={"watch": "1", "resourceVersion": rv})
            refused(response, 422, "Invalid", "resourceVersion")


NDJSON_ACCEPT = {"Accept": "application/x-ndjson"}  # Kubernetes' JSON form answers 200, then an ERROR event


@pytest.mark.parametrize("path", [NODES, "/store/watch"])
async def test_a_watch_from_a_revision_the_store_has_not_reached_is_410_saying_relist(
    api: httpx2.AsyncClient, store: Store, path: str
) -> None:
    await api.post(NODES, json=node("a"))
    await api.post(NODES, json=node("b"))
    for rv in ("3", "100000", "9223372036854775807"):
        response = await api.get(path, params={"watch": "1", "resourceVersion": rv}, headers=NDJSON_ACCEPT)
        body = refused(response, 410, "Expired")
        assert f"too large resource version: {rv}, current: 2" in body["message"]
        assert "relist" in body["message"]
    assert await store.revision() == 2


# -- writes -------------------------------------------------------------------------------------------------------


async def test_an_update_with_a_huge_or_loose_resource_version_is_422_and_changes_nothing(
    api: httpx2.AsyncClient,
) -> None:
    created = (await api.post(NODES, json=node("a"))).json()
    for rv in (HUGE, *LOOSE):
        changed = {**created, "metadata": {**created["metadata"], "resourceVersion": rv, "labels": {"x": "y"}}}
        refused(await api.put(f"{NODES}/a", json=changed), 422, "Invalid", "metadata.resourceVersion")
    assert (await api.get(f"{NODES}/a")).json() == created


async def test_a_delete_precondition_that_is_huge_or_loose_is_422_and_keeps_the_object(
    api: httpx2.AsyncClient,
) -> None:
    created = (await api.post(NODES, json=node("a"))).json()
    for rv in (HUGE, 2**64, "01", "+1", "\u0661"):
        options = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": rv}}
        response = await api.request("DELETE", f"{NODES}/a", json=options)
        refused(response, 422, "Invalid", "preconditions.resourceVersion")
        if isinstance(rv, str):
            refused(await api.delete(f"{NODES}/a", params={"resourceVersion": rv}), 422, "Invalid")
    assert (await api.get(f"{NODES}/a")).json() == created


# -- compaction ---------------------------------------------------------------------------------------------------


async def test_compaction_beyond_the_head_is_422_naming_revision_and_compacts_nothing(
    api: httpx2.AsyncClient, store: Store
) -> None:
    await api.post(NODES, json=node("a"))
    await api.post(NODES, json=node("b"))
    for revision in (3, 999_999_999, 2**63 - 1, 2**63, 10**30):
        body = refused(await api.post("/store/compact", json={"revision": revision}), 422, "Invalid", "revision")
        if revision == 3:
            assert "3 is beyond the current revision 2" in body["message"]
    async with store.watch(since=0) as stream:  # history from the start is still there
        assert stream.revision == 0
    assert (await api.post("/store/compact", json={"revision": 2})).json() == {"revision": 2}
