"""What only the memory backend promises: Python values kept as given, even those JSON would change; watchers that
queue only what they select, bounded.

Wire objects are copied through their JSON encoding, anything else by deep copy; either way nothing the store
keeps is shared with a caller. The contract suite (test_contract.py) covers the rest.
"""

from __future__ import annotations

import copy
import datetime
import enum
import gc
import math
import tracemalloc
from typing import Any

import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.store import MemoryStore
from devplace.store import _memory as memory_backend
from tests.store.samples import configmap, node, pod, take


class Colour(enum.StrEnum):
    RED = "red"


@pytest.fixture
def store(clock: FakeClock) -> MemoryStore:
    return MemoryStore(clock=clock)


@pytest.mark.parametrize(
    "value",
    [
        ("a", "b"),
        {"a", "b"},
        datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        {1: "int key"},
        2**70,
        [1, ("nested", "tuple")],
    ],
    ids=["tuple", "set", "datetime", "int-key", "big-int", "nested-tuple"],
)
async def test_values_json_would_change_are_kept_as_given_and_never_shared(store: MemoryStore, value: Any) -> None:
    given = node("n", spec={"v": value})
    created = await store.create(given)
    assert created["spec"]["v"] == value
    assert type(created["spec"]["v"]) is type(value)
    if isinstance(value, list | set | dict):
        assert created["spec"]["v"] is not value
        assert (await store.get("Node", "n"))["spec"]["v"] is not created["spec"]["v"]
    created["status"] = {"w": copy.deepcopy(value)}
    updated = await store.update(created)
    assert updated["status"]["w"] == value
    assert type(updated["status"]["w"]) is type(value)
    async with store.watch("Node", since=0) as stream:
        events = await take(stream, 2)
    assert [type(e.object["spec"]["v"]) for e in events] == [type(value)] * 2


async def test_a_str_enum_member_comes_back_as_its_equal_plain_value(store: MemoryStore) -> None:
    created = await store.create(node("n", spec={"colour": Colour.RED}))
    assert created["spec"]["colour"] == Colour.RED
    assert type(created["spec"]["colour"]) is str


async def test_nan_is_kept_as_nan(store: MemoryStore) -> None:
    created = await store.create(node("n", spec={"v": math.nan}))
    assert math.isnan(created["spec"]["v"])
    assert math.isnan((await store.get("Node", "n"))["spec"]["v"])


async def test_copies_of_a_wire_object_are_equal_and_independent_everywhere(store: MemoryStore) -> None:
    created = await store.create(configmap("a", labels={"k": "v"}, x="1"))
    got = await store.get("ConfigMap", "a", "default")
    listed = (await store.list("ConfigMap")).items[0]
    async with store.watch("ConfigMap", since=0) as stream:
        (event,) = await take(stream, 1)
    copies = [created, got, listed, event.object]
    assert all(c == created for c in copies)
    assert len({id(c["metadata"]["labels"]) for c in copies}) == len(copies)


async def test_a_deleted_object_is_returned_and_watched_at_the_deletion_revision(store: MemoryStore) -> None:
    await store.create(node("n", spec={"v": ("kept", "tuple")}))
    await store.create(configmap("a", x="1"))
    gone_node = await store.delete("Node", "n")
    gone_cm = await store.delete("ConfigMap", "a", "default")
    assert (gone_node["metadata"]["resourceVersion"], gone_node["spec"]["v"]) == ("3", ("kept", "tuple"))
    assert (gone_cm["metadata"]["resourceVersion"], gone_cm["data"]) == ("4", {"x": "1"})
    async with store.watch(since=2) as stream:
        events = await take(stream, 2)
    assert [(e.type, e.object) for e in events] == [("DELETED", gone_node), ("DELETED", gone_cm)]
    gone_cm["data"]["x"] = "mutated"
    async with store.watch(since=3) as stream:
        assert (await take(stream, 1))[0].object["data"] == {"x": "1"}


# -- watchers ---------------------------------------------------------------------------------------------------


async def test_a_pod_watcher_queues_none_of_20000_configmap_writes(store: MemoryStore) -> None:
    async with store.watch("Pod", fields="spec.nodeName=node-a") as stream:
        for i in range(20_000):
            await store.create(configmap(f"noise-{i}"))
        assert len(stream._pending) == 0
        assert not stream._replaying
        mine = await store.create(pod("mine", "default", "node-a"))
        (event,) = await take(stream, 1)
    assert (event.object, event.revision) == (mine, 20_001)


async def test_a_watcher_that_does_not_read_queues_at_most_the_limit_then_replays_every_event_in_order(
    store: MemoryStore,
) -> None:
    limit = memory_backend._PENDING_LIMIT
    async with store.watch("ConfigMap") as stream:
        written = [await store.create(configmap(f"o{i}")) for i in range(limit + 500)]
        assert len(stream._pending) <= limit
        events = await take(stream, len(written))
    assert [(e.object, e.revision) for e in events] == [(obj, i + 1) for i, obj in enumerate(written)]


async def test_an_overflowed_watcher_whose_history_was_compacted_raises_gone(clock: FakeClock) -> None:
    limit = memory_backend._PENDING_LIMIT
    store = MemoryStore(clock=clock, history_limit=limit // 2)
    try:
        async with store.watch("ConfigMap") as stream:
            for i in range(limit + 1):
                await store.create(configmap(f"o{i}"))
            with pytest.raises(errors.Gone):
                await take(stream, 1)
    finally:
        await store.close()


# -- bounds: history bytes, object size, watcher queues -------------------------------------------------------------

MiB = 1024 * 1024


def _big(name: str, fill: str, size: int) -> dict[str, Any]:
    return configmap(name, blob=fill * size)


async def _rewrite(store: MemoryStore, name: str, times: int, size: int) -> dict[str, Any]:
    obj = await store.create(_big(name, "0", size))
    for i in range(1, times + 1):
        obj["data"]["blob"] = str(i % 10) * size
        obj = await store.update(obj)
    return obj


async def test_history_is_bounded_by_encoded_bytes_as_well_as_count(clock: FakeClock) -> None:
    store = MemoryStore(clock=clock, history_bytes=2 * MiB)
    try:
        last = await _rewrite(store, "big", 300, 64 * 1024)
        assert store._history_size <= 2 * MiB
        assert sum(record.size for record in store._history) == store._history_size
        assert 20 < len(store._history) < 40  # about 2 MiB of 64 KiB events, not 300 of them
        with pytest.raises(errors.Gone):
            async with store.watch(since=0):
                pytest.fail("entered a watch whose history was compacted")
        async with store.watch(since=int(last["metadata"]["resourceVersion"]) - 5) as stream:
            assert [e.object["data"]["blob"][0] for e in await take(stream, 5)] == ["6", "7", "8", "9", "0"]
    finally:
        await store.close()


async def test_history_keeps_old_versions_as_json_bytes_only() -> None:
    store = MemoryStore()
    await _rewrite(store, "a", 3, 10)
    assert [record.obj for record in store._history] == [None] * 4
    assert all(isinstance(record.body, bytes) for record in store._history)


async def test_the_versions_of_a_deleted_big_object_are_freed_once_compacted_past(clock: FakeClock) -> None:
    tracemalloc.start()
    try:
        store = MemoryStore(clock=clock, history_bytes=4 * MiB)
        baseline = tracemalloc.get_traced_memory()[0]
        await _rewrite(store, "big", 40, MiB)
        held = tracemalloc.get_traced_memory()[0] - baseline
        assert held < 4 * MiB + 4 * MiB  # the bounded history plus the object (kept twice: dict and bytes)
        await store.delete("ConfigMap", "big", "default")
        await store.compact(await store.revision())
        gc.collect()
        assert tracemalloc.get_traced_memory()[0] - baseline < MiB // 4
        assert store._history == []
        assert store._history_size == 0
    finally:
        tracemalloc.stop()


async def test_stored_bodies_take_their_own_size_not_the_encoders_buffer(clock: FakeClock) -> None:
    tracemalloc.start()
    try:
        store = MemoryStore(clock=clock)
        baseline = tracemalloc.get_traced_memory()[0]
        for i in range(2000):
            await store.create(configmap(f"small-{i}", x="v" * 50))
        per_object = (tracemalloc.get_traced_memory()[0] - baseline) / 2000
        assert per_object < 3 * 1024  # orjson's output buffer alone is at least 4 KiB
    finally:
        tracemalloc.stop()


async def test_an_object_over_the_configured_size_limit_is_too_large_and_changes_nothing(clock: FakeClock) -> None:
    store = MemoryStore(clock=clock, max_object_bytes=1000)
    small = await store.create(configmap("a", x="1"))
    small["data"]["x"] = "y" * 1000
    with pytest.raises(errors.TooLarge, match=r"ConfigMap default/a is too large: .* the limit is 1000 bytes"):
        await store.update(small)
    assert (await store.get("ConfigMap", "a", "default"))["data"] == {"x": "1"}
    assert await store.revision() == 1
    assert len(store._history) == 1


@pytest.mark.parametrize("setting", ["history_limit", "history_bytes", "max_object_bytes"])
def test_bounds_below_one_are_invalid(setting: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        MemoryStore(**{setting: 0})
    assert [f.path for f in caught.value.fields] == [setting]


async def test_a_watcher_that_does_not_read_big_events_queues_a_bounded_number_of_bytes_then_replays_them(
    clock: FakeClock,
) -> None:
    store = MemoryStore(clock=clock)
    try:
        async with store.watch("ConfigMap") as stream:
            last = await _rewrite(store, "big", 30, MiB // 2)
            assert stream._pending_bytes <= memory_backend._PENDING_BYTES
            assert len(stream._pending) < 20
            events = await take(stream, 31)
        assert [e.revision for e in events] == list(range(1, 32))
        assert events[-1].object == last
    finally:
        await store.close()


async def test_a_replaying_watcher_skips_unselected_history_in_steps_and_then_goes_live(store: MemoryStore) -> None:
    for i in range(3 * memory_backend._SCAN_STEP):
        await store.create(configmap(f"noise-{i}"))
    mine = await store.create(pod("mine", "default", "node-a"))
    async with store.watch("Pod", since=0) as stream:
        assert stream._replaying
        (event,) = await take(stream, 1)
        assert event.object == mine
        later = await store.create(pod("later", "default", "node-a"))
        (live,) = await take(stream, 1)
        assert not stream._replaying
        assert live.object == later
