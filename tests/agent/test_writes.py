"""The agent's slot writes through an API server: a decision on single slots goes as a JSON patch that tests exactly
what it read, so a write of another slot does not make it lose; a change of what it read sends it back to the CAS on a
fresh read, which decides again (a refusal stays a refusal); decisions that read other slots keep the CAS."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from devplace import errors, metrics
from devplace.agent import _slots as slots
from devplace.agent import _writes as writes
from devplace.agent._caches import NodeCache
from devplace.agent._instances import InstanceRecord
from devplace.clocks import FakeClock
from devplace.server._app import create_app
from devplace.store import MemoryStore, RemoteStore, cas
from devplace.supervisors import Supervisor
from tests.servers import serve_app

NAME = "cams-8120fe"
SLOTS = [f"{NAME}-{i}" for i in range(3)]


def instance(usage: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": {"name": NAME, "namespace": "default"},
        "spec": {
            "configurationName": "cams",
            "capacity": 3,
            "shared": True,
            "nodes": ["node-a", "node-b"],
            "deviceUsage": usage if usage is not None else dict.fromkeys(SLOTS, ""),
        },
    }


def record(usage: dict[str, str], capacity: int = 3) -> InstanceRecord:
    obj = instance(usage)
    obj["spec"]["capacity"] = capacity
    obj["metadata"].update(uid="u-1", resourceVersion="7")
    return InstanceRecord.from_wire(obj)


def conflicts() -> float:
    return metrics.REGISTRY.get_sample_value("devplace_store_cas_conflicts_total", {"kind": "Instance"}) or 0.0


def patched() -> float:
    labels = {"kind": "Instance", "outcome": "patched"}
    return metrics.REGISTRY.get_sample_value("devplace_store_cas_duration_seconds_count", labels) or 0.0


# -- slot_patch: pure ------------------------------------------------------------------------------------------------


def test_a_claim_patch_tests_the_instance_and_the_old_holder_then_replaces_the_slot() -> None:
    before = record(dict.fromkeys(SLOTS, ""))
    after = before.usage.with_holders({SLOTS[1]: slots.IL("node-a")})
    assert writes.slot_patch(before, after) == [
        {"op": "test", "path": "/metadata/uid", "value": "u-1"},
        {"op": "test", "path": "/spec/nodes", "value": ["node-a", "node-b"]},
        {"op": "test", "path": "/spec/capacity", "value": 3},
        {"op": "test", "path": f"/spec/deviceUsage/{SLOTS[1]}", "value": ""},
        {"op": "replace", "path": f"/spec/deviceUsage/{SLOTS[1]}", "value": "node-a"},
    ]


def test_a_release_patch_tests_each_freed_slots_exact_holder() -> None:
    before = record({SLOTS[0]: "node-a", SLOTS[1]: "C:cams-1:node-a", SLOTS[2]: "node-b"})
    freed = [(SLOTS[0], slots.IL("node-a")), (SLOTS[1], slots.CL("cams-1", "node-a"))]
    after = slots.release_slots(before.usage, freed)
    assert after is not None
    assert writes.slot_patch(before, after)[3:] == [
        {"op": "test", "path": f"/spec/deviceUsage/{SLOTS[0]}", "value": "node-a"},
        {"op": "replace", "path": f"/spec/deviceUsage/{SLOTS[0]}", "value": ""},
        {"op": "test", "path": f"/spec/deviceUsage/{SLOTS[1]}", "value": "C:cams-1:node-a"},
        {"op": "replace", "path": f"/spec/deviceUsage/{SLOTS[1]}", "value": ""},
    ]


@pytest.mark.parametrize(
    ("usage", "capacity", "why"),
    [
        ({SLOTS[0]: "", SLOTS[1]: "", SLOTS[2]: "node-b"}, 2, "a retiring slot: the held count decides a claim"),
        ({SLOTS[0]: "", SLOTS[1]: "", SLOTS[2]: "no such holder!"}, 3, "an unreadable holder"),
        ({SLOTS[0]: "", SLOTS[1]: ""}, 3, "a slot missing"),
    ],
)
def test_no_patch_is_made_when_a_slot_decision_may_rest_on_other_slots(
    usage: dict[str, str], capacity: int, why: str
) -> None:
    before = record(usage, capacity)
    after = before.usage.with_holders({SLOTS[0]: slots.IL("node-a")})
    assert writes.slot_patch(before, after) is None, why


def test_no_patch_is_made_for_a_usage_with_other_slots() -> None:
    before = record(dict.fromkeys(SLOTS, ""))
    assert writes.slot_patch(before, before.usage.with_holders({SLOTS[2]: None})) is None


# -- through a real API server ---------------------------------------------------------------------------------------


@dataclass
class Setup:
    backing: MemoryStore
    cache: NodeCache


@pytest.fixture
async def setup() -> AsyncIterator[Setup]:
    backing = MemoryStore(clock=FakeClock())
    supervisor = Supervisor("test")
    try:
        async with serve_app(create_app(backing, fleet_api=False)) as url:
            remote = RemoteStore(url)
            try:
                yield Setup(backing, NodeCache(remote, "node-a", supervisor))
            finally:
                await remote.close()
    finally:
        await supervisor.stop()
        await backing.close()


async def stale_cache(setup: Setup, other: dict[str, str]) -> dict[str, Any]:
    """The Instance in the cache as created, then `other` slots written past the cache; the stored object after."""
    created = await setup.backing.create(instance())
    setup.cache.instances.apply_event("ADDED", created)

    def write(obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "spec": {**obj["spec"], "deviceUsage": {**obj["spec"]["deviceUsage"], **other}}}

    written = await cas(setup.backing, "Instance", NAME, "default", write)
    return written.object


def claim(slot: str) -> writes.DecideUsage:
    def decide(record: InstanceRecord) -> slots.Usage | None:
        decision = slots.claim_slots(record.usage, [slot], "node-a", "node-a" in record.nodes)
        if isinstance(decision, slots.Refusal):
            raise errors.Refused(decision.reason)
        return decision.usage if decision.changed else None

    return decide


async def test_a_claim_on_a_stale_cache_lands_without_a_conflict_when_only_another_slot_changed(setup: Setup) -> None:
    await stale_cache(setup, {SLOTS[2]: "node-b"})
    before, landed = conflicts(), patched()
    written = await writes.update_usage(setup.cache, "default", NAME, claim(SLOTS[0]), slot_local=True)
    stored = await setup.backing.get("Instance", NAME, "default")
    assert stored["spec"]["deviceUsage"] == {SLOTS[0]: "node-a", SLOTS[1]: "", SLOTS[2]: "node-b"}
    assert conflicts() == before
    assert patched() == landed + 1
    assert written.obj == stored
    assert written.usage.to_wire() == stored["spec"]["deviceUsage"]
    assert setup.cache.instance("default", NAME) == written


async def test_the_same_claim_by_cas_loses_once_to_the_other_slots_write(setup: Setup) -> None:
    await stale_cache(setup, {SLOTS[2]: "node-b"})
    before = conflicts()
    await writes.update_usage(setup.cache, "default", NAME, claim(SLOTS[0]))
    stored = await setup.backing.get("Instance", NAME, "default")
    assert stored["spec"]["deviceUsage"] == {SLOTS[0]: "node-a", SLOTS[1]: "", SLOTS[2]: "node-b"}
    assert conflicts() == before + 1


async def test_a_claim_of_a_slot_taken_meanwhile_is_refused_on_the_fresh_read_and_writes_nothing(setup: Setup) -> None:
    taken = await stale_cache(setup, {SLOTS[0]: "node-b"})
    before, landed = conflicts(), patched()
    with pytest.raises(errors.Refused, match="held by node-b"):
        await writes.update_usage(setup.cache, "default", NAME, claim(SLOTS[0]), slot_local=True)
    assert await setup.backing.get("Instance", NAME, "default") == taken
    assert (conflicts(), patched()) == (before + 1, landed)  # the patch lost; the fresh read refused


async def test_a_claim_on_an_instance_replaced_meanwhile_is_decided_on_the_new_one(setup: Setup) -> None:
    old = await setup.backing.create(instance())
    setup.cache.instances.apply_event("ADDED", old)
    await setup.backing.delete("Instance", NAME, "default")
    new = await setup.backing.create(instance({SLOTS[0]: "node-b", SLOTS[1]: "", SLOTS[2]: ""}))
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    with pytest.raises(errors.Refused, match="held by node-b"):
        await writes.update_usage(setup.cache, "default", NAME, claim(SLOTS[0]), slot_local=True)
    await writes.update_usage(setup.cache, "default", NAME, claim(SLOTS[1]), slot_local=True)
    stored = await setup.backing.get("Instance", NAME, "default")
    assert stored["metadata"]["uid"] == new["metadata"]["uid"]
    assert stored["spec"]["deviceUsage"] == {SLOTS[0]: "node-b", SLOTS[1]: "node-a", SLOTS[2]: ""}


async def test_a_claim_after_this_node_left_the_instance_is_refused(setup: Setup) -> None:
    created = await setup.backing.create(instance())
    setup.cache.instances.apply_event("ADDED", created)
    await cas(setup.backing, "Instance", NAME, "default", lambda o: {**o, "spec": {**o["spec"], "nodes": ["node-b"]}})
    with pytest.raises(errors.Refused):
        await writes.update_usage(setup.cache, "default", NAME, claim(SLOTS[0]), slot_local=True)
    stored = await setup.backing.get("Instance", NAME, "default")
    assert stored["spec"]["deviceUsage"] == dict.fromkeys(SLOTS, "")


async def test_a_patch_that_lost_on_the_cache_is_made_again_on_a_fresh_read(setup: Setup) -> None:
    created = await setup.backing.create(instance())
    setup.cache.instances.apply_event("ADDED", created)
    joined = ["node-a", "node-b", "node-c"]
    await cas(setup.backing, "Instance", NAME, "default", lambda o: {**o, "spec": {**o["spec"], "nodes": joined}})
    before, landed = conflicts(), patched()
    written = await writes.update_usage(setup.cache, "default", NAME, claim(SLOTS[0]), slot_local=True)
    stored = await setup.backing.get("Instance", NAME, "default")
    assert stored["spec"]["nodes"] == joined
    assert stored["spec"]["deviceUsage"] == {SLOTS[0]: "node-a", SLOTS[1]: "", SLOTS[2]: ""}
    assert (conflicts(), patched()) == (before + 1, landed + 1)  # the cached patch lost, the fresh one landed
    assert written.obj == stored


async def test_a_claim_while_a_slot_retires_is_a_cas_not_a_patch(setup: Setup) -> None:
    shrunk = instance({SLOTS[0]: "", SLOTS[1]: "", SLOTS[2]: "node-b"})
    shrunk["spec"]["capacity"] = 2  # slot 2 retires once node-b frees it: the held count decides a claim
    created = await setup.backing.create(shrunk)
    setup.cache.instances.apply_event("ADDED", created)
    landed = patched()
    await writes.update_usage(setup.cache, "default", NAME, claim(SLOTS[0]), slot_local=True)
    with pytest.raises(errors.Refused, match="2 of 2 slots are held"):
        await writes.update_usage(setup.cache, "default", NAME, claim(SLOTS[1]), slot_local=True)
    stored = await setup.backing.get("Instance", NAME, "default")
    assert stored["spec"]["deviceUsage"] == {SLOTS[0]: "node-a", SLOTS[1]: "", SLOTS[2]: "node-b"}
    assert patched() == landed
