"""The one CAS loop: re-decide on fresh state, bounded jittered backoff on the clock, deletes, cached first copies."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.store import DELETE, Decided, Store, cas
from devplace.store._cas import BASE_DELAY, MAX_DELAY, Delete, backoff


def _cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": data}


def _bump(obj: dict[str, Any]) -> dict[str, Any]:
    n = int(obj["data"].get("n", "0"))
    return {**obj, "data": {**obj["data"], "n": str(n + 1)}}


async def test_a_decision_is_written_with_the_revision_it_read(store: Store) -> None:
    created = await store.create(_cm("c", n="1"))
    written = await cas(store, "ConfigMap", "c", "default", _bump)
    assert written.action == "updated"
    assert written.object["data"] == {"n": "2"}
    assert int(written.object["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_nothing_to_change_writes_nothing_and_returns_the_current_object(store: Store) -> None:
    await store.create(_cm("c", n="1"))
    before = await store.revision()
    written = await cas(store, "ConfigMap", "c", "default", lambda obj: None)
    assert written.action == "unchanged"
    assert written.object["data"] == {"n": "1"}
    assert await store.revision() == before


async def test_delete_is_preconditioned_on_the_revision_the_decision_read(store: Store) -> None:
    await store.create(_cm("c", n="1"))
    written = await cas(store, "ConfigMap", "c", "default", lambda obj: DELETE)
    assert written.action == "deleted"
    with pytest.raises(errors.NotFound):
        await store.get("ConfigMap", "c", "default")


async def test_a_missing_object_raises_not_found(store: Store) -> None:
    with pytest.raises(errors.NotFound):
        await cas(store, "ConfigMap", "absent", "default", _bump)


async def test_concurrent_increments_lose_no_update(store: Store) -> None:
    await store.create(_cm("c", n="0"))
    await asyncio.gather(*(cas(store, "ConfigMap", "c", "default", _bump, attempts=64) for _ in range(20)))
    assert (await store.get("ConfigMap", "c", "default"))["data"]["n"] == "20"


async def test_a_lost_race_re_decides_on_the_fresh_object_after_a_backoff_on_the_clock() -> None:
    from devplace.store import MemoryStore

    clock = FakeClock()
    store = MemoryStore(clock=clock)
    await store.create(_cm("c", n="0"))
    seen: list[str] = []

    def decide(obj: dict[str, Any]) -> dict[str, Any]:
        seen.append(obj["data"]["n"])
        return _bump(obj)

    real_update = store.update
    raced = False

    async def racing_update(obj: Any) -> dict[str, Any]:
        nonlocal raced
        if not raced:
            raced = True
            current = await store.get("ConfigMap", "c", "default")
            await real_update(_bump(current))  # somebody else writes first
        return await real_update(obj)

    store.update = racing_update  # type: ignore[method-assign]
    task = asyncio.create_task(cas(store, "ConfigMap", "c", "default", decide, clock=clock))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done()
    assert clock.pending_sleepers == 1
    await clock.advance(MAX_DELAY * 1.5)
    written = await task
    assert seen == ["0", "1"]  # the second decision saw the other writer's result
    assert written.object["data"]["n"] == "2"


async def test_attempts_are_bounded_and_the_last_conflict_is_raised() -> None:
    from devplace.store import MemoryStore

    store = MemoryStore()
    await store.create(_cm("c", n="0"))

    async def always_stale(obj: Any) -> dict[str, Any]:
        raise errors.Conflict("stale")

    store.update = always_stale  # type: ignore[method-assign]
    with pytest.raises(errors.Conflict, match="gave up after 3 conflicting writes"):
        await cas(store, "ConfigMap", "c", "default", _bump, attempts=3, base_delay=0.0001)


async def test_attempts_below_one_are_refused() -> None:
    from devplace.store import MemoryStore

    with pytest.raises(errors.Invalid, match="attempts"):
        await cas(MemoryStore(), "ConfigMap", "c", "default", _bump, attempts=0)


async def test_a_stale_cached_copy_costs_one_more_read_not_a_backoff(store: Store) -> None:
    stale = await store.create(_cm("c", n="0"))
    await cas(store, "ConfigMap", "c", "default", _bump)
    seen: list[str] = []

    def decide(obj: dict[str, Any]) -> dict[str, Any]:
        seen.append(obj["data"]["n"])
        return _bump(obj)

    written = await cas(store, "ConfigMap", "c", "default", decide, first=stale, clock=FakeClock())
    assert seen == ["0", "1"]
    assert written.object["data"]["n"] == "2"


async def test_a_refusal_on_a_stale_cached_copy_is_re_decided_on_a_fresh_read(store: Store) -> None:
    stale = await store.create(_cm("slot", holder="node-b"))
    fresh = await store.get("ConfigMap", "slot", "default")
    await store.update({**fresh, "data": {"holder": ""}})  # node-b released it; the cache has not seen that yet

    def claim(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["data"]["holder"] not in ("", "node-a"):
            raise errors.Refused(f"held by {obj['data']['holder']}")
        return {**obj, "data": {"holder": "node-a"}}

    written = await cas(store, "ConfigMap", "slot", "default", claim, first=stale)
    assert written.object["data"] == {"holder": "node-a"}


async def test_a_refusal_on_the_stored_object_is_final_and_writes_nothing(store: Store) -> None:
    await store.create(_cm("slot", holder="node-b"))
    before = await store.revision()

    def claim(obj: dict[str, Any]) -> dict[str, Any]:
        raise errors.Refused(f"held by {obj['data']['holder']}")

    with pytest.raises(errors.Refused, match="held by node-b"):
        await cas(store, "ConfigMap", "slot", "default", claim)
    assert await store.revision() == before


def test_backoff_grows_exponentially_within_its_jitter_and_is_capped() -> None:
    for attempt in range(12):
        nominal = min(MAX_DELAY, BASE_DELAY * 2**attempt)
        for _ in range(20):
            pause = backoff(attempt)
            assert 0.5 * nominal <= pause <= 1.5 * nominal


async def test_an_async_decision_conditioned_on_its_own_read_is_run_again_when_that_read_went_stale(
    store: Store,
) -> None:
    await store.create(_cm("group", n="0"))
    evaluations: list[str] = []

    async def evaluate(_stored: dict[str, Any]) -> dict[str, Any]:
        seen = await store.get("ConfigMap", "group", "default")  # the decision reads for itself
        evaluations.append(seen["data"]["n"])
        if len(evaluations) == 1:
            await store.update(_bump(seen))  # an intent changes while the evaluation runs
        return {**seen, "data": {**seen["data"], "decided": seen["data"]["n"]}}

    written = await cas(store, "ConfigMap", "group", "default", evaluate, clock=_instant())
    assert evaluations == ["0", "1"]
    assert written.object["data"] == {"n": "1", "decided": "1"}


def _instant() -> FakeClock:
    """A clock whose sleeps end at once (the backoff is asserted elsewhere)."""

    class Instant(FakeClock):
        async def sleep(self, seconds: float) -> None:
            await asyncio.sleep(0)

    return Instant()


async def test_a_delete_decided_on_a_stale_copy_is_decided_again_on_the_state_it_would_remove(store: Store) -> None:
    stale = await store.create(_cm("offline", nodes=""))
    fresh = await store.get("ConfigMap", "offline", "default")
    await store.update({**fresh, "data": {"nodes": "node-b"}})  # a node sees the device again meanwhile
    seen: list[str] = []

    def expire(obj: dict[str, Any]) -> Delete | None:
        seen.append(obj["data"]["nodes"])
        return DELETE if not obj["data"]["nodes"] else None

    written = await cas(store, "ConfigMap", "offline", "default", expire, first=stale)
    assert seen == ["", "node-b"]
    assert written.action == "unchanged"
    assert (await store.get("ConfigMap", "offline", "default"))["data"] == {"nodes": "node-b"}


async def test_a_decided_value_comes_back_from_the_decision_the_write_rests_on(store: Store) -> None:
    stale = await store.create(_cm("c", n="0"))
    await cas(store, "ConfigMap", "c", "default", _bump)

    def decide(obj: dict[str, Any]) -> Decided[str]:
        return Decided(_bump(obj), f"from n={obj['data']['n']}")

    written = await cas(store, "ConfigMap", "c", "default", decide, first=stale, clock=FakeClock())
    assert written.action == "updated"
    assert written.value == "from n=1"  # the stale copy's decision (n=0) conflicted: its value is not the one
    assert written.object["data"]["n"] == "2"


async def test_a_decided_value_comes_back_with_unchanged_delete_and_async_decisions(store: Store) -> None:
    await store.create(_cm("c", n="0"))
    unchanged = await cas(store, "ConfigMap", "c", "default", lambda obj: Decided(None, 7))
    assert (unchanged.action, unchanged.value) == ("unchanged", 7)

    async def later(obj: dict[str, Any]) -> Decided[list[str]]:
        return Decided(DELETE, [obj["data"]["n"]])

    deleted = await cas(store, "ConfigMap", "c", "default", later)
    assert (deleted.action, deleted.value) == ("deleted", ["0"])
    await store.create(_cm("d", n="0"))
    plain = await cas(store, "ConfigMap", "d", "default", _bump)
    assert (plain.action, plain.value) == ("updated", None)


# -- metrics ---------------------------------------------------------------------------------------------------------


async def test_each_cas_is_timed_by_kind_and_outcome_and_each_lost_race_is_counted() -> None:
    from devplace.store import MemoryStore
    from tests.scrapes import delta, registry

    store = MemoryStore()
    await store.create(_cm("c", n="0"))
    before = registry()
    await cas(store, "ConfigMap", "c", "default", _bump)
    await cas(store, "ConfigMap", "c", "default", lambda obj: None)
    with pytest.raises(errors.NotFound):
        await cas(store, "ConfigMap", "missing", "default", _bump)

    async def always_stale(obj: Any) -> dict[str, Any]:
        raise errors.Conflict("stale")

    store.update = always_stale  # type: ignore[method-assign]
    with pytest.raises(errors.Conflict):
        await cas(store, "ConfigMap", "c", "default", _bump, attempts=3, base_delay=0.0001)
    after = registry()
    count = "devplace_store_cas_duration_seconds_count"
    assert delta(before, after, count, kind="ConfigMap", outcome="updated") == 1
    assert delta(before, after, count, kind="ConfigMap", outcome="unchanged") == 1
    assert delta(before, after, count, kind="ConfigMap", outcome="missing") == 1
    assert delta(before, after, count, kind="ConfigMap", outcome="conflict") == 1
    assert delta(before, after, "devplace_store_cas_conflicts_total", kind="ConfigMap") == 3
