"""Slot release end to end: there is no Deallocate, so the agent frees slots from what it can observe.

- the pod holding a slot is deleted or terminates -> the slot is free at once (IL and CL);
- the slot's container vanished from the kubelet's PodResources -> free only after the release grace period,
  measured on the fake clock, also across an agent restart.
"""

from __future__ import annotations

import pytest

from devplace.sim import Fleet
from tests.e2e.scenarios import configuration, held, il, instances

CL = "akri.sh/akri-onvif"
GRACE = 300.0
POLL = 10.0


async def one_camera(fleet: Fleet) -> str:
    fleet.add_node("node-a")
    fleet.add_node("node-b")
    fleet.plug("cam-1", nodes=["node-a", "node-b"])
    await fleet.apply(configuration("akri-onvif", capacity=2))
    await fleet.settle()
    [instance] = await instances(fleet)
    return il(fleet, instance)


@pytest.mark.parametrize("level", ["IL", "CL"])
@pytest.mark.parametrize("ending", ["deleted", "succeeded"])
async def test_a_slot_is_free_at_once_when_its_pod_goes(level: str, ending: str):
    async with Fleet(resource_prefix="akri.sh", release_grace=GRACE, podresources_poll=POLL) as fleet:
        resource = await one_camera(fleet)
        wanted = resource if level == "IL" else CL
        pod = await fleet.run_pod("p", node="node-a", requests={wanted: 1})
        assert pod["status"]["phase"] == "Running"
        [instance] = await instances(fleet)
        assert len(held(instance)) == 1
        assert fleet.available("node-b")[resource] == 1

        if ending == "deleted":
            await fleet.delete("Pod", "p")
        else:
            pod["status"]["phase"] = "Succeeded"
            await fleet.store.update(pod)
        await fleet.settle()

        [instance] = await instances(fleet)
        assert held(instance) == {}
        assert fleet.available("node-a") == {CL: 1, resource: 2}
        assert fleet.available("node-b") == {CL: 1, resource: 2}


@pytest.mark.parametrize("level", ["IL", "CL"])
async def test_a_slot_missing_from_pod_resources_is_freed_only_after_the_grace_period(level: str):
    async with Fleet(resource_prefix="akri.sh", release_grace=GRACE, podresources_poll=POLL) as fleet:
        resource = await one_camera(fleet)
        wanted = resource if level == "IL" else CL
        await fleet.run_pod("p", node="node-a", requests={wanted: 1})
        [instance] = await instances(fleet)
        before = held(instance)
        assert len(before) == 1

        fleet.kubelet("node-a").forget_pod("default", "p")  # the container vanished; the pod object did not
        await fleet.advance(GRACE - 3 * POLL)
        [instance] = await instances(fleet)
        assert held(instance) == before

        await fleet.advance(3 * POLL + 2 * POLL)
        [instance] = await instances(fleet)
        assert held(instance) == {}
        assert fleet.available("node-b")[resource] == 2


async def test_the_release_grace_period_holds_across_an_agent_restart():
    async with Fleet(resource_prefix="akri.sh", release_grace=GRACE, podresources_poll=POLL) as fleet:
        resource = await one_camera(fleet)
        await fleet.run_pod("p", node="node-a", requests={resource: 1})
        await fleet.run_pod("kept", node="node-a", requests={resource: 1})
        [instance] = await instances(fleet)
        assert len(held(instance)) == 2
        kept = fleet.kubelet("node-a").allocations()[("default", "kept")].containers[0].devices[resource]

        fleet.kubelet("node-a").forget_pod("default", "p")
        await fleet.advance(GRACE / 2)
        await fleet.restart_agent("node-a")
        await fleet.settle()
        [instance] = await instances(fleet)
        assert len(held(instance)) == 2

        await fleet.advance(GRACE / 2 - 3 * POLL)
        [instance] = await instances(fleet)
        assert len(held(instance)) == 2, "a slot must not be freed before the grace period has passed"

        await fleet.advance(GRACE / 2 + 5 * POLL)
        [instance] = await instances(fleet)
        assert held(instance) == {kept[0]: "node-a"}, "only the slot without a container is freed"
        assert fleet.available("node-a")[resource] == 1
