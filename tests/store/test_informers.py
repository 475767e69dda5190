"""Informers: list -> watch -> relist on Gone, typed parses, indexes, handlers, own writes, server-side filters."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devplace import errors
from devplace.store import Change, Informer, InformerSet, MemoryStore, Route, Store
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
    await fresh.create(_pod("c", "n"))  # revision 1: older than the tombstone, but a new store's object
    listing = await fresh.list("Pod")  # the same server, restarted on a fresh memory store
    informer.replace(listing.items, listing.revision)
    assert [name for (_, name), _ in informer.items()] == ["c"]
    assert informer.revision == 1
    assert sorted(changes) == [("a", False, True), ("b", False, True), ("c", True, False)]


# -- sharing ---------------------------------------------------------------------------------------------------------


async def test_views_of_one_kind_share_one_list_and_one_watch_each_with_its_own_parse_and_handlers(
    running: Supervisor,
) -> None:
    store = MemoryStore()
    await store.create(_pod("a", "node-1"))
    names: Informer[str] = Informer(store, "Pod", lambda obj, _: obj["metadata"]["name"].upper())
    nodes: Informer[str] = Informer(store, "Pod", lambda obj, _: obj["spec"]["nodeName"])
    seen: list[tuple[str, str | None]] = []
    names.subscribe(lambda c: seen.append(("names", c.new)))
    nodes.subscribe(lambda c: seen.append(("nodes", c.new)))
    running.loop("names", names.run)
    running.loop("nodes", nodes.run)
    await asyncio.wait_for(asyncio.gather(names.wait_synced(), nodes.wait_synced()), 10)
    await store.create(_pod("b", "node-2"))
    await _until(lambda: len(nodes) == 2)
    assert (names.get("default", "b"), nodes.get("default", "b")) == ("B", "node-2")
    assert seen == [("names", "A"), ("nodes", "node-1"), ("names", "B"), ("nodes", "node-2")]
    informers = InformerSet.of(store)
    assert (informers.lists, informers.watches, len(informers.feeds)) == ({"Pod": 1}, {"Pod": 1}, 1)


async def test_a_view_made_after_its_feed_synced_starts_synced_with_every_object() -> None:
    store = MemoryStore()
    await store.create(_pod("a", "node-1"))
    first: Informer[dict[str, Any]] = Informer(store, "Pod")
    await first.list_once()
    late: Informer[str] = Informer(store, "Pod", lambda obj, _: obj["metadata"]["name"])
    assert late.synced.is_set()
    assert late.items() == [(("default", "a"), "a")]
    assert InformerSet.of(store).lists == {"Pod": 1}


async def test_one_views_own_write_reaches_every_view_and_its_parse_is_kept_only_in_its_own() -> None:
    store = MemoryStore()
    writer: Informer[str] = Informer(store, "Pod", lambda obj, _: "parsed")
    reader: Informer[str] = Informer(store, "Pod", lambda obj, _: "read")
    created = await store.create(_pod("a", "node-1"))
    assert writer.record(created, parsed="built by the writer")
    assert (writer.get("default", "a"), reader.get("default", "a")) == ("built by the writer", "read")
    assert not reader.record(created)  # the feed has it: not newer
    assert reader.resource_version("default", "a") == writer.resource_version("default", "a")


async def test_in_a_wide_set_selected_views_share_the_kinds_feed_and_filter_for_themselves() -> None:
    store = MemoryStore()
    InformerSet.of(store, wide=True)
    mine: Informer[dict[str, Any]] = Informer(store, "Pod", fields="spec.nodeName=node-1")
    labelled: Informer[dict[str, Any]] = Informer(store, "Pod", namespace="lab", selector="app=x")
    everything: Informer[dict[str, Any]] = Informer(store, "Pod")
    changes: list[tuple[str, bool, bool]] = []
    mine.subscribe(lambda c: changes.append((c.key[1], c.old is None, c.new is None)))
    a = await store.create(_pod("a", "node-1"))
    await store.create(_pod("b", "node-2"))
    await store.create(_pod("c", "node-2", "lab", app="x"))
    await everything.list_once()
    assert [key for key, _ in mine.items()] == [("default", "a")]
    assert [key for key, _ in labelled.items()] == [("lab", "c")]
    assert len(everything) == 3
    moved = await store.update({**a, "spec": {**a["spec"], "nodeName": "node-3"}})
    everything.apply_event("MODIFIED", moved)  # a Pod that leaves a view's filter leaves the view
    assert len(mine) == 0
    assert changes == [("a", True, False), ("a", False, True)]
    assert list(InformerSet.of(store).feeds) == [("Pod", None, None, None)]


async def test_the_last_view_to_stop_ends_the_feeds_watch_and_a_view_that_runs_again_relists(
    running: Supervisor,
) -> None:
    store = MemoryStore()
    one: Informer[dict[str, Any]] = Informer(store, "Pod")
    two: Informer[dict[str, Any]] = Informer(store, "Pod")
    first = running.loop("one", one.run)
    second = running.loop("two", two.run)
    await asyncio.wait_for(asyncio.gather(one.wait_synced(), two.wait_synced()), 10)
    feed = one._feed
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    assert feed.running  # the other view still runs it
    second.cancel()
    await asyncio.gather(second, return_exceptions=True)
    await asyncio.sleep(0)
    assert not feed.running
    await store.create(_pod("late", "node-1"))
    again = running.loop("again", two.run)
    await _until(lambda: len(two) == 1)
    again.cancel()
    assert InformerSet.of(store).lists == {"Pod": 2}


async def test_an_unshared_set_gives_every_view_its_own_feed() -> None:
    store = MemoryStore()
    InformerSet.of(store, shared=False)
    one: Informer[dict[str, Any]] = Informer(store, "Pod")
    two: Informer[dict[str, Any]] = Informer(store, "Pod")
    await one.list_once()
    await two.list_once()
    assert one._feed is not two._feed
    assert InformerSet.of(store).lists == {"Pod": 2}


async def test_a_closed_view_hears_no_more_of_its_feed() -> None:
    store = MemoryStore()
    kept: Informer[dict[str, Any]] = Informer(store, "Pod")
    closed: Informer[dict[str, Any]] = Informer(store, "Pod")
    closed.close()
    kept.apply_event("ADDED", await store.create(_pod("a", "node-1")))
    assert (len(kept), len(closed)) == (1, 0)


async def test_a_view_whose_run_ends_leaves_the_feed_and_catches_up_when_it_runs_again(running: Supervisor) -> None:
    store = MemoryStore()
    stays: Informer[dict[str, Any]] = Informer(store, "Pod")
    stops: Informer[dict[str, Any]] = Informer(store, "Pod")
    heard: list[str] = []
    stops.subscribe(lambda c: heard.append(c.key[1]))
    running.loop("stays", stays.run)
    stopping = running.loop("stops", stops.run)
    await asyncio.wait_for(asyncio.gather(stays.wait_synced(), stops.wait_synced()), 10)
    await store.create(_pod("a", "node-1"))
    await _until(lambda: len(stops) == 1)
    stopping.cancel()
    await asyncio.gather(stopping, return_exceptions=True)
    await store.create(_pod("b", "node-1"))
    await store.delete("Pod", "a", "default")
    await _until(lambda: [k for k, _ in stays.items()] == [("default", "b")])
    assert (heard, [k for k, _ in stops.items()]) == (["a"], [("default", "a")])  # a stopped part hears nothing
    again = running.loop("again", stops.run)
    await _until(lambda: [k for k, _ in stops.items()] == [("default", "b")])
    assert heard == ["a", "a", "b"]  # what changed meanwhile, told on joining again
    again.cancel()


def _by_node(obj: Any) -> list[str]:
    return [obj["spec"]["nodeName"]]


async def test_a_routed_view_takes_only_the_objects_its_route_names_and_hears_only_of_them() -> None:
    store = MemoryStore()
    views = {node: Informer(store, "Pod", route=Route(_by_node, frozenset({node}))) for node in ("n1", "n2", "n3")}
    heard: dict[str, list[tuple[str, bool, bool]]] = {node: [] for node in views}
    for node, view in views.items():
        view.subscribe(lambda c, node=node: heard[node].append((c.key[1], c.old is not None, c.new is not None)))
    a = await store.create(_pod("a", "n1"))
    views["n1"].apply_event("ADDED", a)
    views["n1"].apply_event("ADDED", await store.create(_pod("b", "n2")))
    moved = await store.update({**a, "spec": {**a["spec"], "nodeName": "n2"}})
    views["n1"].apply_event("MODIFIED", moved)  # a moves n1 -> n2: a deletion for n1, an addition for n2
    views["n1"].apply_event("DELETED", {**moved, "metadata": {**moved["metadata"], "resourceVersion": "99"}})
    assert heard == {
        "n1": [("a", False, True), ("a", True, False)],
        "n2": [("b", False, True), ("a", False, True), ("a", True, False)],
        "n3": [],
    }
    assert [k for k, _ in views["n2"].items()] == [("default", "b")]


async def test_views_with_one_parse_function_share_one_parse_per_change() -> None:
    store = MemoryStore()
    parsed: list[str] = []

    def parse(obj: dict[str, Any], previous: Any) -> str:
        parsed.append(obj["metadata"]["name"])
        return str(obj["metadata"]["name"])

    one: Informer[str] = Informer(store, "Pod", parse)
    two: Informer[str] = Informer(store, "Pod", parse)
    routed: Informer[str] = Informer(store, "Pod", parse, route=Route(_by_node, frozenset({"n1"})))
    one.apply_event("ADDED", await store.create(_pod("a", "n1")))
    assert parsed == ["a"]
    assert one.get("default", "a") is two.get("default", "a") is routed.get("default", "a")


async def test_a_routed_view_peeks_at_an_object_its_route_leaves_out_without_keeping_it() -> None:
    store = MemoryStore()
    view: Informer[str] = Informer(
        store, "Pod", lambda obj, _: obj["spec"]["nodeName"], route=Route(_by_node, frozenset({"n1"}))
    )
    view.apply_event("ADDED", await store.create(_pod("a", "n2")))
    assert (view.get("default", "a"), view.peek("default", "a"), len(view)) == (None, "n2", 0)
    assert view.peek("default", "absent") is None


async def test_a_routed_view_that_joins_again_drops_what_was_routed_away_meanwhile(running: Supervisor) -> None:
    store = MemoryStore()
    stays: Informer[dict[str, Any]] = Informer(store, "Pod")
    routed: Informer[dict[str, Any]] = Informer(store, "Pod", route=Route(_by_node, frozenset({"n1"})))
    running.loop("stays", stays.run)
    stopping = running.loop("routed", routed.run)
    await asyncio.wait_for(asyncio.gather(stays.wait_synced(), routed.wait_synced()), 10)
    a = await store.create(_pod("a", "n1"))
    await _until(lambda: len(routed) == 1)
    stopping.cancel()
    await asyncio.gather(stopping, return_exceptions=True)
    await store.update({**a, "spec": {**a["spec"], "nodeName": "n2"}})
    await store.create(_pod("b", "n1"))
    await _until(lambda: len(stays) == 2)
    assert [k for k, _ in routed.items()] == [("default", "a")]
    again = running.loop("again", routed.run)
    await _until(lambda: [k for k, _ in routed.items()] == [("default", "b")])
    again.cancel()


async def test_a_route_function_that_raises_routes_the_object_nowhere(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    view: Informer[dict[str, Any]] = Informer(
        store, "Pod", route=Route(lambda obj: [obj["spec"]["missing"]], frozenset({"n1"}))
    )
    with caplog.at_level(logging.ERROR):
        view.apply_event("ADDED", await store.create(_pod("a", "n1")))
    assert len(view) == 0
    assert "a route function failed on default/a" in caplog.text


async def test_a_routed_view_made_after_its_routes_were_looked_up_hears_the_next_change_on_them() -> None:
    """A router remembers which views a set of routes reaches: a view that joins (or leaves) makes it look again."""
    store = MemoryStore()
    first: Informer[dict[str, Any]] = Informer(store, "Pod", route=Route(_by_node, frozenset({"n1"})))
    a = await store.create(_pod("a", "n1"))
    first.apply_event("ADDED", a)
    late: Informer[dict[str, Any]] = Informer(store, "Pod", route=Route(_by_node, frozenset({"n1"})))
    heard: list[tuple[str, str]] = []
    first.subscribe(lambda c: heard.append(("first", c.key[1])))
    late.subscribe(lambda c: heard.append(("late", c.key[1])))
    labelled = await store.update({**a, "metadata": {**a["metadata"], "labels": {"x": "y"}}})
    first.apply_event("MODIFIED", labelled)
    assert sorted(heard) == [("first", "a"), ("late", "a")]
    assert late.get("default", "a") == labelled
