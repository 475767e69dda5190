"""What only the memory backend promises: Python values kept as given, even those JSON would change; watchers that
queue only what they select, bounded.

Wire objects are copied through their JSON encoding, anything else by deep copy; either way nothing the store
keeps is shared with a caller. The contract suite (test_contract.py) covers the rest.
"""

from __future__ import annotations

import copy
import datetime
import enum
import math
from typing import Any

import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.store import MemoryStore
from devplace.store import memory as memory_backend
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
        assert not stream._overflowed
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
