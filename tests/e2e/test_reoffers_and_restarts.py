"""Re-offers and restarts end to end: the kubelet offering a slot again (Akri #843), kubelet and agent restarts."""

from __future__ import annotations

import pytest

from devplace import errors
from devplace.sim import Fleet
from tests.e2e.scenarios import cl_holder_node, configuration, held, il, instances

CL = "akri.sh/akri-onvif"


async def one_camera(fleet: Fleet, *, capacity: int = 2, nodes: tuple[str, ...] = ("node-a",)) -> dict:
    for node in nodes:
        fleet.add_node(node)
    fleet.plug("cam-1", nodes=list(nodes))
    await fleet.apply(configuration("akri-onvif", capacity=capacity))
    await fleet.settle()
    [instance] = await instances(fleet)
    return instance


async def test_two_containers_of_one_pod_each_get_a_slot_and_a_re_offer_succeeds():
    async with Fleet(resource_prefix="akri.sh") as fleet:
        instance = await one_camera(fleet)
        resource = il(fleet, instance)
        containers = [{"name": "a", "requests": {resource: 1}}, {"name": "b", "requests": {resource: 1}}]
        pod = await fleet.run_pod("two-containers", node="node-a", requests=None, containers=containers)
        assert pod["status"]["phase"] == "Running"
        [instance] = await instances(fleet)
        assert sorted(held(instance).values()) == ["node-a", "node-a"]
        allocation = fleet.kubelet("node-a").allocations()[("default", "two-containers")]
        slots = [c.devices[resource] for c in allocation.containers]
        assert sorted(s for pair in slots for s in pair) == sorted(held(instance))

        answers = await fleet.kubelet("node-a").reallocate("default", "two-containers")
        assert set(answers) == {"a", "b"}
        await fleet.settle()
        [after] = await instances(fleet)
        assert held(after) == held(instance)


async def test_a_cl_re_offer_maps_to_the_same_slot():
    async with Fleet(resource_prefix="akri.sh") as fleet:
        await one_camera(fleet)
        pod = await fleet.run_pod("cl", node="node-a", requests={CL: 1})
        assert pod["status"]["phase"] == "Running"
        [before] = await instances(fleet)
        assert [cl_holder_node(h) for h in held(before).values()] == ["node-a"]
        await fleet.kubelet("node-a").reallocate("default", "cl")
        await fleet.settle()
        [after] = await instances(fleet)
        assert held(after) == held(before)


async def test_a_re_offer_of_a_slot_taken_by_another_node_is_refused():
    async with Fleet(resource_prefix="akri.sh") as fleet:
        instance = await one_camera(fleet, capacity=1, nodes=("node-a", "node-b"))
        resource = il(fleet, instance)
        assert (await fleet.run_pod("p", node="node-a", requests={resource: 1}))["status"]["phase"] == "Running"
        [instance] = await instances(fleet)
        [slot] = held(instance)
        stolen = dict(instance)
        stolen["spec"] = {**instance["spec"], "deviceUsage": {slot: "node-b"}}
        await fleet.store.update(stolen)
        await fleet.settle()
        with pytest.raises(errors.Refused, match=f"{slot} is held by node-b"):
            await fleet.kubelet("node-a").reallocate("default", "p")
        [after] = await instances(fleet)
        assert held(after) == {slot: "node-b"}


async def test_a_kubelet_restart_makes_plugins_register_again_and_held_slots_survive():
    async with Fleet(resource_prefix="akri.sh") as fleet:
        instance = await one_camera(fleet, capacity=3)
        resource = il(fleet, instance)
        await fleet.run_pod("il", node="node-a", requests={resource: 1})
        await fleet.run_pod("cl", node="node-a", requests={CL: 1})
        [before] = await instances(fleet)
        view = fleet.available("node-a")
        registrations = fleet.kubelet("node-a").registrations

        await fleet.restart_kubelet("node-a")
        await fleet.settle()

        kubelet = fleet.kubelet("node-a")
        assert kubelet.registrations >= registrations + 2
        assert set(kubelet.endpoints()) == {resource, CL}
        [after] = await instances(fleet)
        assert held(after) == held(before)
        assert fleet.available("node-a") == view
        await kubelet.reallocate("default", "il")
        pod = await fleet.run_pod("third", node="node-a", requests={resource: 1})
        assert pod["status"]["phase"] == "Running"
        [final] = await instances(fleet)
        assert len(held(final)) == 3


async def test_an_agent_restart_keeps_held_slots_and_still_releases_them():
    async with Fleet(resource_prefix="akri.sh") as fleet:
        instance = await one_camera(fleet)
        resource = il(fleet, instance)
        await fleet.run_pod("il", node="node-a", requests={resource: 1})
        await fleet.run_pod("cl", node="node-a", requests={CL: 1})
        [before] = await instances(fleet)
        assert len(held(before)) == 2

        await fleet.restart_agent("node-a")
        await fleet.settle()
        [after] = await instances(fleet)
        assert held(after) == held(before)
        assert fleet.available("node-a") == {CL: 0, resource: 0}
        await fleet.kubelet("node-a").reallocate("default", "il")
        await fleet.settle()

        await fleet.delete("Pod", "il")
        await fleet.delete("Pod", "cl")
        await fleet.settle()
        [released] = await instances(fleet)
        assert held(released) == {}
        assert fleet.available("node-a") == {CL: 1, resource: 2}


async def test_a_pod_deleted_after_a_re_offer_frees_its_slot_at_once():
    async with Fleet(resource_prefix="akri.sh") as fleet:
        instance = await one_camera(fleet)
        resource = il(fleet, instance)
        await fleet.run_pod("il", node="node-a", requests={resource: 1})
        await fleet.kubelet("node-a").reallocate("default", "il")
        await fleet.settle()
        await fleet.delete("Pod", "il")
        await fleet.settle()
        [released] = await instances(fleet)
        assert held(released) == {}
