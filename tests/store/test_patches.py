"""`JsonPatchStore`: the stores that talk to an API server apply a JSON patch there, all or nothing, a failed `test`
refused as `Invalid` with nothing written; the stores without a round trip to save, and the wrappers, do not offer it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.store import DelegatingStore, JsonPatchStore, MemoryStore, SqliteStore, Store
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
    finally:
        await memory.close()
        await sqlite.close()
