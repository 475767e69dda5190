"""The releaser's writes: every due slot of one Instance is freed in one CAS, against the fresh record; a slot whose
holder changed meanwhile stays with its new holder."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from devplace.agent import _release_rules as releases
from devplace.agent import _slots as slots
from devplace.agent._caches import NodeCache
from devplace.agent._instances import InstanceRecord
from devplace.agent._releasers import Releaser
from devplace.api import IL
from devplace.clocks import FakeClock
from devplace.store import MemoryStore
from devplace.supervisors import Supervisor
from tests.agent.conftest import MiniKubelet

INST = "cams-8120fe"


def instance(holders: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": {"name": INST, "namespace": "default"},
        "spec": {
            "configurationName": "cams",
            "capacity": len(holders),
            "nodes": ["node-a", "node-b"],
            "deviceUsage": {f"{INST}-{i}": holder for i, holder in enumerate(holders)},
        },
    }


@pytest.fixture
async def supervisor() -> AsyncIterator[Supervisor]:
    sup = Supervisor("test")
    yield sup
    await sup.stop()


async def releaser_over(
    store: MemoryStore,
    supervisor: Supervisor,
    clock: FakeClock,
    tmp_path: Path,
    holders: list[str],
    podresources: Path | None = None,
) -> Releaser:
    """node-a's releaser (grace 0.3 s, poll 0.1 s) over one Instance held by `holders`; PodResources at
    `podresources` (default: a socket that does not exist)."""
    stored = await store.create(instance(holders))
    cache = NodeCache(store, "node-a", supervisor)
    cache.instances.apply_event("ADDED", stored)
    socket = podresources or tmp_path / "absent.sock"
    return Releaser("node-a", "akri.sh", 0.3, 0.1, socket, cache, supervisor, clock, holding=lambda: False)


def held(releaser: Releaser) -> dict[releases.DeviceKey, releases.HeldSlot]:
    return releases.held_by_node(releaser.cache.instances.values(), "node-a", "akri.sh")


async def test_three_due_slots_of_one_instance_are_freed_in_one_write(
    memory_store: MemoryStore, supervisor: Supervisor, clock: FakeClock, tmp_path: Path
) -> None:
    releaser = await releaser_over(memory_store, supervisor, clock, tmp_path, ["node-a", "node-a", "node-a", "node-b"])
    mine = held(releaser)
    assert len(mine) == 3
    before = releaser.cache.instances.get("default", INST)
    assert before is not None
    one_by_one: slots.Usage | None = before.usage
    for slot in mine.values():
        assert one_by_one is not None
        one_by_one = slots.release_slot(one_by_one, slot.slot, slot.holder)
    revision = await memory_store.revision()

    await releaser._release_pod(("default", "pod-1"), (frozenset(mine), 1))  # the pod used all three, then ended

    assert await memory_store.revision() == revision + 1
    stored = await memory_store.get("Instance", INST, "default")
    assert stored["spec"]["deviceUsage"] == {f"{INST}-0": "", f"{INST}-1": "", f"{INST}-2": "", f"{INST}-3": "node-b"}
    assert one_by_one is not None
    assert stored["spec"]["deviceUsage"] == one_by_one.to_wire()
    cached = releaser.cache.instances.get("default", INST)
    assert cached is not None
    assert cached.usage.to_wire() == one_by_one.to_wire()


async def test_a_slot_whose_holder_changed_meanwhile_is_not_freed(
    memory_store: MemoryStore, supervisor: Supervisor, clock: FakeClock, tmp_path: Path
) -> None:
    releaser = await releaser_over(memory_store, supervisor, clock, tmp_path, ["node-a", "node-a", ""])
    mine = held(releaser)
    # meanwhile (the cache has not seen it): slot 1 went free and node-b took it
    stored = await memory_store.get("Instance", INST, "default")
    stored["spec"]["deviceUsage"][f"{INST}-1"] = "node-b"
    await memory_store.update(stored)
    revision = await memory_store.revision()

    await releaser._release_pod(("default", "pod-1"), (frozenset(mine), 1))

    assert await memory_store.revision() == revision + 1  # one write, on the fresh record after the conflict
    after = await memory_store.get("Instance", INST, "default")
    assert after["spec"]["deviceUsage"] == {f"{INST}-0": "", f"{INST}-1": "node-b", f"{INST}-2": ""}


async def test_a_grace_pass_asks_the_kubelet_only_while_the_node_holds_a_slot(
    memory_store: MemoryStore, supervisor: Supervisor, clock: FakeClock, sock_dir: Path
) -> None:
    kubelet = MiniKubelet(sock_dir)
    await kubelet.start()
    try:
        releaser = await releaser_over(memory_store, supervisor, clock, sock_dir, ["", "node-b"], kubelet.pr_socket)
        cache = releaser.cache
        stored = await memory_store.get("Instance", INST, "default")
        revision = await memory_store.revision()

        await releaser._grace_pass()  # node-a holds nothing here: nothing to free, nobody asked

        assert kubelet.lists == 0
        taken = copy.deepcopy(stored)  # the cache holds `stored` itself
        taken["spec"]["deviceUsage"][f"{INST}-0"] = "node-a"
        cache.instances.apply_event("MODIFIED", await memory_store.update(taken))
        await releaser._grace_pass()  # held and absent from the listing: its absence starts now
        assert kubelet.lists == 1
        await clock.advance(1.0)
        await releaser._grace_pass()  # absent for the grace: freed
        assert kubelet.lists == 2
        after = await memory_store.get("Instance", INST, "default")
        assert after["spec"]["deviceUsage"] == {f"{INST}-0": "", f"{INST}-1": "node-b"}
        assert await memory_store.revision() == revision + 2  # the hold, then the release
        await releaser.close()
    finally:
        await kubelet.stop()


def test_release_slots_frees_only_slots_their_holder_still_holds() -> None:
    usage = InstanceRecord.from_wire(instance(["node-a", "node-b", "node-a"])).usage
    freed = slots.release_slots(usage, [(f"{INST}-0", IL("node-a")), (f"{INST}-1", IL("node-a"))])
    assert freed is not None
    assert freed.to_wire() == {f"{INST}-0": "", f"{INST}-1": "node-b", f"{INST}-2": "node-a"}
    assert slots.release_slots(usage, [(f"{INST}-1", IL("node-a"))]) is None
