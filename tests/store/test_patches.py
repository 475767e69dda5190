"""`JsonPatchStore`: the stores that talk to an API server apply a JSON patch there, all or nothing, a failed `test`
refused as `Invalid` with nothing written; the stores without a round trip to save, and the wrappers, do not offer it.
`cas` sends a decision's patch where the store offers one, and the whole object where it fails or is not offered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.store import (
    Decided,
    DelegatingStore,
    JsonPatchStore,
    MemoryStore,
    SqliteStore,
    Store,
    cas,
    takes_patches,
)
from tests.servers import remote_backend

from .conftest import kube_store


@pytest.fixture(params=["remote", "kube"])
async def api_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    factory = {"remote": remote_backend, "kube": kube_store}[request.param]
    async with factory(tmp_path, FakeClock()) as store:
        yield store


def config_map(data: dict[str, str]) -> dict[str, Any]:
    meta = {"name": "slots", "namespace": "default"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


async def test_a_patch_whose_tests_hold_is_written_by_the_server(api_store: Store) -> None:
    assert isinstance(api_store, JsonPatchStore)
    assert takes_patches(api_store)
    created = await api_store.create(config_map({"a": "", "b": "node-b"}))
    ops = [
        {"op": "test", "path": "/metadata/uid", "value": created["metadata"]["uid"]},
        {"op": "test", "path": "/data/a", "value": ""},
        {"op": "replace", "path": "/data/a", "value": "node-a"},
    ]
    written = await api_store.json_patch("ConfigMap", "slots", "default", ops)
    assert written["data"] == {"a": "node-a", "b": "node-b"}
    assert int(written["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert await api_store.get("ConfigMap", "slots", "default") == written


async def test_a_failed_test_is_invalid_and_writes_nothing(api_store: Store) -> None:
    assert isinstance(api_store, JsonPatchStore)
    created = await api_store.create(config_map({"a": "node-b"}))
    ops = [{"op": "test", "path": "/data/a", "value": ""}, {"op": "replace", "path": "/data/a", "value": "node-a"}]
    with pytest.raises(errors.Invalid) as caught:
        await api_store.json_patch("ConfigMap", "slots", "default", ops)
    assert "test failed" in caught.value.message
    assert await api_store.get("ConfigMap", "slots", "default") == created


async def test_a_patch_of_a_missing_object_is_not_found(api_store: Store) -> None:
    assert isinstance(api_store, JsonPatchStore)
    with pytest.raises(errors.NotFound):
        await api_store.json_patch("ConfigMap", "nothing", "default", [{"op": "test", "path": "/data", "value": {}}])


async def test_stores_without_a_round_trip_to_save_and_wrappers_do_not_offer_patches(tmp_path: Path) -> None:
    memory = MemoryStore()
    sqlite = SqliteStore(str(tmp_path / "store.db"))
    try:
        assert not isinstance(memory, JsonPatchStore)
        assert not isinstance(sqlite, JsonPatchStore)
        assert not isinstance(DelegatingStore(memory), JsonPatchStore)
        assert [takes_patches(s) for s in (memory, sqlite, DelegatingStore(memory), memory)] == [False] * 4
    finally:
        await memory.close()
        await sqlite.close()


async def test_cas_sends_a_decisions_patch_and_writes_the_whole_object_when_its_test_fails(api_store: Store) -> None:
    created = await api_store.create(config_map({"a": "", "b": ""}))

    def claim(slot: str, expected: str) -> Callable[[dict[str, Any]], Decided[None]]:
        def decide(current: dict[str, Any]) -> Decided[None]:
            patch = [
                {"op": "test", "path": f"/data/{slot}", "value": expected},
                {"op": "replace", "path": f"/data/{slot}", "value": "node-a"},
            ]
            return Decided({**current, "data": {**current["data"], slot: "node-a"}}, None, patch)

        return decide

    patched = await cas(api_store, "ConfigMap", "slots", "default", claim("a", ""), first=created)
    assert patched.action == "patched"
    assert patched.object["data"] == {"a": "node-a", "b": ""}
    # decided on the stale first copy, with a test that no longer holds: written whole, which conflicts, then
    # decided again on a fresh read
    updated = await cas(api_store, "ConfigMap", "slots", "default", claim("b", "someone"), first=created)
    assert updated.action == "updated"
    assert updated.object["data"] == {"a": "node-a", "b": "node-a"}
    assert await api_store.get("ConfigMap", "slots", "default") == updated.object


async def test_cas_writes_a_decisions_patch_whole_where_the_store_offers_none() -> None:
    store = MemoryStore()
    try:
        await store.create(config_map({"a": ""}))
        patch = [{"op": "replace", "path": "/data/a", "value": "node-a"}]
        written = await cas(
            store, "ConfigMap", "slots", "default", lambda o: Decided({**o, "data": {"a": "node-a"}}, None, patch)
        )
        assert written.action == "updated"
        assert written.object["data"] == {"a": "node-a"}
    finally:
        await store.close()
