"""Leader election through a Lease: the pure rule as a table, the elector against a MemoryStore on a FakeClock, and
the fence that refuses a part's writes unless its elector leads."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.store import (
    FencedStore,
    LeaderElector,
    LeaseAction,
    MemoryStore,
    ObservedLease,
    decide_lease,
    micro_time,
)

NOW = 1_000.0


@pytest.mark.parametrize(
    ("observed", "now", "action"),
    [
        (None, NOW, LeaseAction.CREATE),
        (ObservedLease("me", 15, NOW - 100), NOW, LeaseAction.RENEW),
        (ObservedLease("other", 15, NOW - 14.9), NOW, LeaseAction.WAIT),
        (ObservedLease("other", 15, NOW - 15), NOW, LeaseAction.TAKE_OVER),
        (ObservedLease("other", 15, NOW - 300), NOW, LeaseAction.TAKE_OVER),
        (ObservedLease("", 15, NOW), NOW, LeaseAction.TAKE_OVER),
        (ObservedLease("other", 60, NOW - 30), NOW, LeaseAction.WAIT),
    ],
    ids=[
        "no lease: create it",
        "my own lease: renew it however old",
        "another's lease seen changing within its duration: wait",
        "another's lease unchanged for its whole duration: take over",
        "another's long-stale lease: take over",
        "a released lease: take over at once",
        "the lease's own duration counts, not mine",
    ],
)
def test_decide_lease_follows_client_go_rules(observed: ObservedLease | None, now: float, action: LeaseAction) -> None:
    assert decide_lease(observed, now, "me") is action


async def _lease(store: MemoryStore) -> dict[str, Any]:
    return (await store.get("Lease", "sched", "devplace"))["spec"]


def _elector(store: MemoryStore, clock: FakeClock, identity: str) -> LeaderElector:
    return LeaderElector(
        store, "sched", "devplace", identity, clock, lease_duration=15, renew_deadline=10, retry_period=2
    )


async def test_an_elector_creates_the_absent_lease_and_renews_it() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    a = _elector(store, clock, "a")
    assert await a.try_acquire_or_renew() is True
    start = clock.now()
    assert await _lease(store) == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "acquireTime": micro_time(start),
        "renewTime": micro_time(start),
        "leaseTransitions": 0,
    }
    await clock.advance(2)
    assert await a.try_acquire_or_renew() is True
    spec = await _lease(store)
    assert (spec["acquireTime"], spec["renewTime"], spec["leaseTransitions"]) == (
        micro_time(start),
        micro_time(start + 2),
        0,
    )


async def test_a_second_elector_waits_while_the_holder_renews_and_takes_over_once_it_expires() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    a, b = _elector(store, clock, "a"), _elector(store, clock, "b")
    assert await a.try_acquire_or_renew() is True
    for _ in range(10):  # a renews every 2 s for 20 s: b never sees it unchanged for 15 s
        assert await b.try_acquire_or_renew() is False
        await clock.advance(2)
        assert await a.try_acquire_or_renew() is True
    assert await b.try_acquire_or_renew() is False  # b saw a's last renew just now
    await clock.advance(14.9)
    assert await b.try_acquire_or_renew() is False
    await clock.advance(0.1)
    assert await b.try_acquire_or_renew() is True
    spec = await _lease(store)
    assert (spec["holderIdentity"], spec["leaseTransitions"], spec["acquireTime"]) == (
        "b",
        1,
        micro_time(clock.now()),
    )
    assert await a.try_acquire_or_renew() is False  # a's view: b's fresh lease, which a must wait out


async def test_two_electors_racing_for_an_expired_lease_cannot_both_win() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    old, b, c = _elector(store, clock, "old"), _elector(store, clock, "c"), _elector(store, clock, "b")
    assert await old.try_acquire_or_renew() is True
    assert await b.try_acquire_or_renew() is False
    assert await c.try_acquire_or_renew() is False
    await clock.advance(15)
    results = await asyncio.gather(b.try_acquire_or_renew(), c.try_acquire_or_renew())
    assert sorted(results) == [False, True]
    assert (await _lease(store))["leaseTransitions"] == 1


async def test_the_run_loop_leads_then_loses_when_renews_fail_past_the_deadline() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    a = _elector(store, clock, "a")
    fenced = FencedStore(store, a)
    task = asyncio.ensure_future(a.run())
    await clock.advance(0)
    assert a.leading.is_set()
    assert a.is_leader()
    await fenced.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "d"}})
    for _ in range(5):  # renews keep it leading
        await clock.advance(2)
    assert a.is_leader()
    assert not a.lost.is_set()

    failing = {"on": True}
    real_update = store.update

    async def unavailable(obj: Any) -> dict[str, Any]:
        if failing["on"]:
            raise errors.Unavailable("the store is away")
        return await real_update(obj)

    store.update = unavailable  # type: ignore[method-assign]
    await clock.advance(8)  # renews at +2, +4, +6, +8 fail; the last success is 8 s old
    assert a.is_leader()
    assert not a.lost.is_set()
    await clock.advance(2)  # 10 s: the renew deadline
    assert not a.is_leader()
    assert a.lost.is_set()
    await asyncio.wait_for(task, 1)
    with pytest.raises(errors.Refused, match="'a' does not hold the lease devplace/sched"):
        await fenced.update({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "d"}})


async def test_the_fence_refuses_writes_once_the_last_renew_is_older_than_the_deadline_even_before_the_loop_runs() -> (
    None
):
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    a = _elector(store, clock, "a")
    fenced = FencedStore(store, a)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "d"}}
    with pytest.raises(errors.Refused):  # never led
        await fenced.create(cm)
    assert await a.try_acquire_or_renew() is True
    a.leading.set()
    created = await fenced.create(cm)
    clock._now += 10  # a pause (SIGSTOP) past the deadline: no sleeper woke, no renew ran
    for write in (fenced.update(created), fenced.delete("ConfigMap", "x", "d"), fenced.create({**cm, "x": 1})):
        with pytest.raises(errors.Refused):
            await write
    assert [o["metadata"]["name"] for o in (await store.list("ConfigMap")).items] == ["x"]
    assert (await fenced.get("ConfigMap", "x", "d"))["metadata"]["name"] == "x"  # reads still pass


async def test_a_released_lease_is_taken_over_at_once() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    a, b = _elector(store, clock, "a"), _elector(store, clock, "b")
    assert await a.try_acquire_or_renew() is True
    a.leading.set()
    assert await b.try_acquire_or_renew() is False
    await a.release()
    assert not a.is_leader()
    assert await b.try_acquire_or_renew() is True
    assert (await _lease(store))["holderIdentity"] == "b"


def test_an_elector_refuses_durations_out_of_order() -> None:
    with pytest.raises(errors.Invalid, match="renew deadline"):
        LeaderElector(MemoryStore(), "s", "d", "a", FakeClock(), lease_duration=10, renew_deadline=10)
