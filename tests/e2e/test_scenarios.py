"""The double-booking detector the end-to-end tests rely on must itself be able to fail."""

from __future__ import annotations

import asyncio

from devplace.sim._invariants import UsageHistory
from devplace.store import MemoryStore
from tests.e2e.scenarios import cl_holder_node


def _instance(usage: dict[str, str]) -> dict:
    return {"metadata": {"name": "cam"}, "spec": {"deviceUsage": usage}}


def test_a_slot_passing_straight_from_one_holder_to_another_is_a_double_booking():
    history = UsageHistory()
    history.record("ADDED", _instance({"cam-0": "", "cam-1": ""}))
    history.record("MODIFIED", _instance({"cam-0": "node-a", "cam-1": ""}))
    history.record("MODIFIED", _instance({"cam-0": "node-b", "cam-1": "C:cam:node-a"}))
    assert history.double_bookings() == ["cam cam-0: 'node-a' -> 'node-b'"]


def test_claims_and_releases_through_free_are_not_double_bookings():
    history = UsageHistory()
    for usage in ({"cam-0": ""}, {"cam-0": "node-a"}, {"cam-0": ""}, {"cam-0": "C:cam:node-b"}):
        history.record("MODIFIED", _instance(usage))
    history.record("DELETED", _instance({"cam-0": "C:cam:node-b"}))
    assert history.double_bookings() == []
    assert len(list(history.transitions())) == 4


def test_cl_holders_name_their_node():
    assert cl_holder_node("C:akri-onvif-8120fe:node-a") == "node-a"
    assert cl_holder_node("node-a") is None


async def test_a_followed_history_catches_up_with_every_store_write(memory_store: MemoryStore) -> None:
    history = UsageHistory()
    task = asyncio.create_task(history.follow(memory_store, await memory_store.revision()))
    try:
        cam = {"apiVersion": "akri.sh/v0", "kind": "Instance", **_instance({"cam-0": ""})}
        cam["metadata"]["namespace"] = "default"
        stored = await memory_store.create(cam)
        stored["spec"]["deviceUsage"] = {"cam-0": "node-a"}
        await memory_store.update(stored)
        await memory_store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}})
        assert await history.caught_up(memory_store)
        assert history.revision == await memory_store.revision()
        assert history.states == {"cam": [{"cam-0": ""}, {"cam-0": "node-a"}]}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
