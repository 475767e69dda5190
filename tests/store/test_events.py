"""The EventRecorder: non-blocking emit, aggregation into series, a bounded buffer, TTL and count sweeps; written
through the Store (a MemoryStore here, on the test's FakeClock)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from devplace import errors
from devplace.api import normalize
from devplace.clocks import FakeClock
from devplace.store import EventRecorder, MemoryStore


def pod(name: str = "web", namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "main"}]},
    }


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-{name}"}}


async def events(store: MemoryStore) -> list[dict[str, Any]]:
    return (await store.list("Event")).items


async def test_emit_touches_no_store_and_flush_writes_a_valid_v1_event(
    memory_store: MemoryStore, clock: FakeClock
) -> None:
    recorder = EventRecorder(memory_store, "devplace-scheduler", clock, instance="sched-0")
    assert recorder.emit(pod(), "FailedScheduling", "0/3 nodes are available", "Warning") is True
    assert await events(memory_store) == []
    assert await recorder.flush() == 1
    [event] = await events(memory_store)
    assert normalize(event) is not None  # a valid Event, as the API server would take it
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "web",
        "namespace": "default",
        "uid": "uid-web",
    }
    assert (event["reason"], event["message"], event["type"], event["count"]) == (
        "FailedScheduling",
        "0/3 nodes are available",
        "Warning",
        1,
    )
    assert (event["reportingComponent"], event["reportingInstance"], event["action"]) == (
        "devplace-scheduler",
        "sched-0",
        "FailedScheduling",
    )
    assert event["metadata"]["namespace"] == "default"
    assert event["metadata"]["name"].startswith("web.")
    assert "series" not in event


async def test_repeats_aggregate_into_one_event_with_a_series(memory_store: MemoryStore, clock: FakeClock) -> None:
    recorder = EventRecorder(memory_store, "devplace-scheduler", clock)
    for _ in range(3):
        recorder.emit(pod(), "FailedScheduling", "no device", "Warning")
    assert recorder.pending == 1
    await recorder.flush()
    await clock.advance(30)
    recorder.emit(pod(), "FailedScheduling", "no device", "Warning")
    await recorder.flush()
    [event] = await events(memory_store)
    assert event["count"] == 4
    assert event["series"]["count"] == 4
    assert event["lastTimestamp"] == "2026-01-01T00:00:30Z"
    assert event["firstTimestamp"] == "2026-01-01T00:00:00Z"


async def test_a_repeat_after_the_series_window_starts_a_new_event(memory_store: MemoryStore, clock: FakeClock) -> None:
    recorder = EventRecorder(memory_store, "devplace-scheduler", clock, series_window=60)
    recorder.emit(pod(), "Scheduled", "bound to node-a")
    await recorder.flush()
    await clock.advance(61)
    recorder.emit(pod(), "Scheduled", "bound to node-a")
    await recorder.flush()
    assert sorted(e["count"] for e in await events(memory_store)) == [1, 1]


async def test_a_full_buffer_drops_and_counts_instead_of_blocking(memory_store: MemoryStore, clock: FakeClock) -> None:
    recorder = EventRecorder(memory_store, "devplace-agent", clock, buffer=2)
    assert [recorder.emit(pod(f"p{i}"), "Claimed", "slot 0") for i in range(4)] == [True, True, False, False]
    assert recorder.emit(pod("p0"), "Claimed", "slot 0") is True  # a repeat of a pending one still counts
    assert recorder.dropped == 2
    assert await recorder.flush() == 2


async def test_events_about_cluster_scoped_objects_go_to_the_default_namespace(
    memory_store: MemoryStore, clock: FakeClock
) -> None:
    recorder = EventRecorder(memory_store, "devplace-controller", clock)
    recorder.emit(node("node-a"), "DeviceGone", "camera-1 is no longer seen")
    await recorder.flush()
    [event] = await events(memory_store)
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "uid-node-a"}


async def test_the_sweep_deletes_events_past_their_ttl_and_the_oldest_beyond_the_count(
    memory_store: MemoryStore, clock: FakeClock
) -> None:
    recorder = EventRecorder(memory_store, "devplace-agent", clock, ttl=600, max_events=2)
    for i in range(4):
        recorder.emit(pod(f"p{i}"), "Claimed", "slot 0")
        await recorder.flush()
        await clock.advance(100)
    other = EventRecorder(memory_store, "someone-else", clock)
    other.emit(pod("theirs"), "Seen", "not ours to sweep")
    await other.flush()
    sibling = EventRecorder(memory_store, "devplace-agent", clock, instance="node-b")  # the same part on another node
    sibling.emit(pod("q0"), "Claimed", "node-b sweeps its own")
    await sibling.flush()
    await clock.advance(250)  # p0 was last seen 650 s ago: past the TTL
    assert await recorder.sweep() == 2  # p0 (TTL), then p1 (the oldest of three within it)
    names = sorted(e["involvedObject"]["name"] for e in await events(memory_store))
    assert names == ["p2", "p3", "q0", "theirs"]


async def test_run_writes_what_is_emitted_without_being_asked(memory_store: MemoryStore, clock: FakeClock) -> None:
    recorder = EventRecorder(memory_store, "devplace-controller", clock)
    task = asyncio.create_task(recorder.run())
    try:
        recorder.emit(pod(), "BrokerCreated", "created broker pod web-broker")
        for _ in range(100):  # the writer runs as soon as the loop lets it: no clock time passes
            if await events(memory_store):
                break
            await asyncio.sleep(0)
        assert [e["reason"] for e in await events(memory_store)] == ["BrokerCreated"]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_ten_recorders_telling_of_one_object_at_one_instant_each_write_their_event(
    memory_store: MemoryStore, clock: FakeClock
) -> None:
    """Ten agents refused the same slot at the same (fake) instant: their Event names must not collide."""
    recorders = [EventRecorder(memory_store, "devplace-agent", clock, instance=f"node-{i}") for i in range(10)]
    for recorder in recorders:
        recorder.emit(pod(), "ClaimRefused", "held by another node", "Warning")
    assert [await r.flush() for r in recorders] == [1] * 10
    assert [r.failed for r in recorders] == [0] * 10
    written = await events(memory_store)
    assert sorted(e["reportingInstance"] for e in written) == [f"node-{i}" for i in range(10)]
    assert all(e["metadata"]["name"].startswith("web.") for e in written)


async def test_a_failed_write_is_counted_and_never_raised(clock: FakeClock) -> None:
    store = MemoryStore(clock=clock)
    await store.close()  # every call now raises Unavailable
    recorder = EventRecorder(store, "devplace-agent", clock)
    recorder.emit(pod(), "Claimed", "slot 0")
    assert await recorder.flush() == 0
    assert recorder.failed == 1


@pytest.mark.parametrize(
    ("regarding", "type_", "field"),
    [({"kind": "Pod"}, "Normal", "regarding"), (pod(), "Error", "type")],
)
async def test_a_bad_event_is_refused_naming_the_field(
    memory_store: MemoryStore, clock: FakeClock, regarding: dict[str, Any], type_: Any, field: str
) -> None:
    recorder = EventRecorder(memory_store, "devplace-agent", clock)
    with pytest.raises(errors.Invalid) as caught:
        recorder.emit(regarding, "Claimed", "slot 0", type_)
    assert caught.value.fields[0].path == field
    assert recorder.pending == 0
