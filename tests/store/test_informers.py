"""Informers: list -> watch -> relist on Gone, typed parses, indexes, handlers, own writes, server-side filters."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devplace import errors
from devplace.store import Change, Informer, MemoryStore, Store
from devplace.supervisors import Supervisor


def _pod(name: str, node: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
    }


async def _until(predicate: Any, rounds: int = 2000) -> None:
    for _ in range(rounds):
        if predicate():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition not reached")


@pytest.fixture
async def running() -> AsyncIterator[Supervisor]:
    sup = Supervisor("test")
    yield sup
    await sup.stop()


async def test_an_informer_lists_then_follows_the_watch_with_typed_values_and_indexes(
    store: Store, running: Supervisor
) -> None:
    await store.create(_pod("a", "node-1"))
    informer: Informer[tuple[str, str]] = Informer(
        store,
        "Pod",
        lambda obj, previous: (obj["metadata"]["name"], obj["spec"]["nodeName"]),
        indexes={"node": lambda value: [value[1]]},
    )
    changes: list[Change[tuple[str, str]]] = []
    informer.subscribe(changes.append)
    running.loop("informer", informer.run)
    await asyncio.wait_for(informer.wait_synced(), 10)
    assert informer.get("default", "a") == ("a", "node-1")
    await store.create(_pod("b", "node-2"))
    moved = await store.get("Pod", "a", "default")
    moved["spec"]["nodeName"] = "node-2"
    await store.update(moved)
    await _until(lambda: informer.get("default", "a") == ("a", "node-2") and informer.get("default", "b"))
    assert informer.by("node", "node-2") == [("a", "node-2"), ("b", "node-2")]
    assert informer.by("node", "node-1") == []
    await store.delete("Pod", "b", "default")
    await _until(lambda: informer.get("default", "b") is None)
    assert [(c.key, c.old is None, c.new is None) for c in changes] == [
        (("default", "a"), True, False),
        (("default", "b"), True, False),
        (("default", "a"), False, False),
        (("default", "b"), False, True),
    ]


async def test_a_field_selected_informer_receives_only_its_nodes_objects(store: Store, running: Supervisor) -> None:
    informer: Informer[dict[str, Any]] = Informer(store, "Pod", fields="spec.nodeName=node-1")
    seen: list[str] = []
    informer.subscribe(lambda c: seen.append(c.key[1]))
    await store.create(_pod("mine-1", "node-1"))
    await store.create(_pod("theirs-1", "node-2"))
    running.loop("informer", informer.run)
    await asyncio.wait_for(informer.wait_synced(), 10)
    await store.create(_pod("theirs-2", "node-2"))
    await store.create(_pod("mine-2", "node-1"))
    await _until(lambda: len(informer) == 2)
    assert sorted(seen) == ["mine-1", "mine-2"]


async def test_an_own_write_result_is_cached_at_once_and_an_older_event_does_not_undo_it() -> None:
    store = MemoryStore()
    informer: Informer[dict[str, Any]] = Informer(store, "Pod")
    created = await store.create(_pod("a", "node-1"))
    informer.apply_event("ADDED", created)
    updated = await store.update({**created, "metadata": {**created["metadata"], "labels": {"v": "2"}}})
    assert informer.record(updated)
    informer.apply_event("MODIFIED", created)  # a late event of the older revision
    cached = informer.get("default", "a")
    assert cached is not None
    assert cached["metadata"]["labels"] == {"v": "2"}


async def test_a_deletion_leaves_a_tombstone_that_a_late_write_result_cannot_pass() -> None:
    store = MemoryStore()
    informer: Informer[dict[str, Any]] = Informer(store, "Pod")
    created = await store.create(_pod("a", "node-1"))
    gone = await store.delete("Pod", "a", "default")
    informer.record(gone, deleted=True)
    assert not informer.record(created)
    assert informer.get("default", "a") is None


async def test_an_object_that_does_not_parse_is_absent_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    def parse(obj: dict[str, Any], previous: Any) -> str:
        if obj["metadata"].get("labels", {}).get("bad"):
            raise errors.Invalid.field("metadata.labels.bad", "refused")
        return str(obj["metadata"]["name"])

    store = MemoryStore()
    informer: Informer[str] = Informer(store, "Pod", parse)
    good = await store.create(_pod("a", "node-1"))
    informer.apply_event("ADDED", good)
    bad = await store.update({**good, "metadata": {**good["metadata"], "labels": {"bad": "1"}}})
    worse = await store.update({**bad, "spec": {**bad["spec"], "nodeName": "x"}})
    with caplog.at_level(logging.WARNING):
        informer.apply_event("MODIFIED", bad)
        informer.apply_event("MODIFIED", worse)
    assert informer.get("default", "a") is None
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1


async def test_a_failing_handler_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    informer: Informer[dict[str, Any]] = Informer(store, "Pod")
    seen: list[str] = []

    def broken(change: Change[dict[str, Any]]) -> None:
        raise RuntimeError("handler bug")

    informer.subscribe(broken)
    informer.subscribe(lambda c: seen.append(c.key[1]))
    with caplog.at_level(logging.ERROR):
        informer.apply_event("ADDED", await store.create(_pod("a", "node-1")))
    assert seen == ["a"]
    assert any("change handler failed" in r.getMessage() for r in caplog.records)


async def test_a_compacted_watch_relists_and_reports_exactly_what_changed_meanwhile(running: Supervisor) -> None:
    store = MemoryStore(history_limit=5)
    await store.create(_pod("stays", "n"))
    await store.create(_pod("goes", "n"))
    informer: Informer[dict[str, Any]] = Informer(store, "Pod")
    await informer.list_once()
    changes: list[tuple[str, bool, bool]] = []
    informer.subscribe(lambda c: changes.append((c.key[1], c.old is None, c.new is None)))
    # while nobody watches, more than the history limit happens: the watch from the listing's revision is Gone
    await store.delete("Pod", "goes", "default")
    for i in range(8):
        await store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "d"}})
    await store.create(_pod("new", "n"))
    revision = informer.revision

    async def run_from_listing() -> None:
        async with store.watch("Pod", since=revision):
            pass

    with pytest.raises(errors.Gone):
        await run_from_listing()
    informer_task_changes_before = list(changes)
    assert informer_task_changes_before == []
    running.loop("informer", informer.run)  # lists again (its first run), then watches
    await _until(lambda: informer.get("default", "new") is not None and informer.get("default", "goes") is None)
    assert sorted(changes) == [("goes", False, True), ("new", True, False)]
    assert informer.get("default", "stays") is not None


async def test_relist_keeps_an_own_write_newer_than_the_listing() -> None:
    store = MemoryStore()
    informer: Informer[dict[str, Any]] = Informer(store, "Pod")
    created = await store.create(_pod("a", "node-1"))
    listing = await store.list("Pod")
    updated = await store.update({**created, "metadata": {**created["metadata"], "labels": {"v": "2"}}})
    informer.record(updated)
    fresh = await store.create(_pod("b", "node-1"))
    informer.record(fresh)
    informer.replace(listing.items, listing.revision)
    a = informer.get("default", "a")
    assert a is not None
    assert a["metadata"]["labels"] == {"v": "2"}
    assert informer.get("default", "b") is not None  # created after the listing: not dropped by it


async def test_forget_drops_an_object_a_read_showed_gone_and_notifies() -> None:
    store = MemoryStore()
    informer: Informer[dict[str, Any]] = Informer(store, "Pod")
    informer.apply_event("ADDED", await store.create(_pod("a", "node-1")))
    seen: list[bool] = []
    informer.subscribe(lambda c: seen.append(c.new is None))
    informer.forget("default", "a")
    assert informer.get("default", "a") is None
    assert seen == [True]


async def test_a_store_error_is_retried_by_relisting(running: Supervisor, caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    await store.create(_pod("a", "node-1"))
    real_list = store.list
    failures = 2

    async def flaky_list(*args: Any, **kwargs: Any) -> Any:
        nonlocal failures
        if failures:
            failures -= 1
            raise errors.Unavailable("backend restarting")
        return await real_list(*args, **kwargs)

    store.list = flaky_list  # type: ignore[method-assign]
    informer: Informer[dict[str, Any]] = Informer(store, "Pod", retry_pause=(0.001, 0.002))
    with caplog.at_level(logging.WARNING):
        running.loop("informer", informer.run)
        await asyncio.wait_for(informer.wait_synced(), 10)
    assert informer.get("default", "a") is not None
    assert len([r for r in caplog.records if "backend restarting" in r.getMessage()]) == 2


async def test_index_reads_stay_sorted_and_current_across_additions_moves_and_deletions() -> None:
    store = MemoryStore()
    informer: Informer[dict[str, Any]] = Informer(store, "Pod", indexes={"node": lambda obj: [obj["spec"]["nodeName"]]})
    for name in ("c", "a"):
        informer.apply_event("ADDED", await store.create(_pod(name, "n1")))
    assert informer.keys_by("node", "n1") == [("default", "a"), ("default", "c")]
    informer.apply_event("ADDED", await store.create(_pod("b", "n1")))
    assert informer.keys_by("node", "n1") == [("default", "a"), ("default", "b"), ("default", "c")]
    moved = await store.get("Pod", "a", "default")
    moved["spec"]["nodeName"] = "n2"
    informer.apply_event("MODIFIED", await store.update(moved))
    assert informer.keys_by("node", "n1") == [("default", "b"), ("default", "c")]
    assert [p["metadata"]["name"] for p in informer.by("node", "n2")] == ["a"]
    informer.apply_event("DELETED", await store.delete("Pod", "c", "default"))
    assert informer.keys_by("node", "n1") == [("default", "b")]
    informer.keys_by("node", "n1").clear()  # a caller's copy: the cache is not changed through it
    assert informer.keys_by("node", "n1") == [("default", "b")]


async def test_a_listing_below_the_revision_seen_replaces_the_cache_outright() -> None:
    old_store, fresh = MemoryStore(), MemoryStore()
    informer: Informer[dict[str, Any]] = Informer(old_store, "Pod")
    for name in ("a", "b", "c"):
        await old_store.create(_pod(name, "n"))
    await old_store.delete("Pod", "c", "default")  # a tombstone at revision 4
    await informer.list_once()
    assert informer.revision == 4
    changes: list[tuple[str, bool, bool]] = []
    informer.subscribe(lambda c: changes.append((c.key[1], c.old is None, c.new is None)))
    informer.store = fresh  # the same server, restarted on a fresh memory store
    await fresh.create(_pod("c", "n"))  # revision 1: older than the tombstone, but a new store's object
    await informer.list_once()
    assert [name for (_, name), _ in informer.items()] == ["c"]
    assert informer.revision == 1
    assert sorted(changes) == [("a", False, True), ("b", False, True), ("c", True, False)]
