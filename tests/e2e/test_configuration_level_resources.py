"""Seed 000 end to end: Configuration-level (CL) and Instance-level (IL) resources drawing from one deviceUsage.

Two nodes see two cameras, capacity 2. The walk-through of the seed, with the real agent and a simulated kubelet on
each node, for both `uniqueDevices` policies, on memory and (for the default policy) on a real sqlite file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devplace.sim import Fleet
from tests.e2e.scenarios import cl_holder_node, configuration, held, il, instances

CL = "akri.sh/akri-onvif"


async def two_cameras(fleet: Fleet, *, unique: bool) -> tuple[str, str]:
    fleet.add_node("node-a")
    fleet.add_node("node-b")
    fleet.plug("cam-1", nodes=["node-a", "node-b"], properties={"model": "x"})
    fleet.plug("cam-2", nodes=["node-a", "node-b"], properties={"model": "x"})
    await fleet.apply(configuration("akri-onvif", capacity=2, unique=unique))
    await fleet.settle()
    found = await instances(fleet, "akri-onvif")
    assert len(found) == 2
    for instance in found:
        assert sorted(instance["spec"]["nodes"]) == ["node-a", "node-b"]
        assert instance["spec"]["deviceUsage"] == {f"{instance['metadata']['name']}-{i}": "" for i in range(2)}
    first, second = (il(fleet, i) for i in found)
    return first, second


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory" if request.param == "memory" else f"sqlite:///{tmp_path}/devplace.db"


async def test_seed_000_walkthrough_with_unique_devices(store_url: str):
    async with Fleet(store=store_url, resource_prefix="akri.sh") as fleet:
        il1, il2 = await two_cameras(fleet, unique=True)
        for node in ("node-a", "node-b"):
            assert fleet.available(node) == {CL: 2, il1: 2, il2: 2}
            node_obj = await fleet.get("Node", node)
            assert node_obj is not None
            assert {k: node_obj["status"]["capacity"][k] for k in (CL, il1, il2)} == {CL: "2", il1: "2", il2: "2"}

        pod = await fleet.run_pod("onvif-broker", node="node-a", requests={CL: 2})
        assert pod["status"]["phase"] == "Running"
        assert fleet.available("node-a") == {CL: 0, il1: 1, il2: 1}
        for instance in await instances(fleet, "akri-onvif"):
            holders = held(instance)
            assert len(holders) == 1, holders
            assert [cl_holder_node(h) for h in holders.values()] == ["node-a"]

        pod_b = await fleet.run_pod("il-broker", node="node-b", requests={il2: 1})
        assert pod_b["status"]["phase"] == "Running"
        assert fleet.available("node-a") == {CL: 0, il1: 1, il2: 0}
        assert fleet.available("node-b") == {CL: 1, il1: 1, il2: 0}
        first, second = await instances(fleet, "akri-onvif")
        assert [cl_holder_node(h) for h in held(first).values()] == ["node-a"]
        assert sorted(cl_holder_node(h) or f"IL:{h}" for h in held(second).values()) == ["IL:node-b", "node-a"]
        assert len(usage_free(first)) == 1
        assert usage_free(second) == []


def usage_free(instance: dict) -> list[str]:
    return [slot for slot, holder in instance["spec"]["deviceUsage"].items() if not holder]


async def test_seed_000_walkthrough_with_shared_device_usage():
    async with Fleet(resource_prefix="akri.sh") as fleet:
        il1, il2 = await two_cameras(fleet, unique=False)
        for node in ("node-a", "node-b"):
            assert fleet.available(node) == {CL: 4, il1: 2, il2: 2}

        pod = await fleet.run_pod("onvif-broker", node="node-a", requests={CL: 2})
        assert pod["status"]["phase"] == "Running"
        # the CL plugin spreads a pod's devices across Instances by default, exactly like the seed's picture
        assert fleet.available("node-a") == {CL: 2, il1: 1, il2: 1}
        for instance in await instances(fleet, "akri-onvif"):
            assert [cl_holder_node(h) for h in held(instance).values()] == ["node-a"]

        pod_b = await fleet.run_pod("il-broker", node="node-b", requests={il2: 1})
        assert pod_b["status"]["phase"] == "Running"
        assert fleet.available("node-a")[il1] == 1
        assert fleet.available("node-a")[il2] == 0
        assert fleet.available("node-b")[il2] == 0
        first, second = await instances(fleet, "akri-onvif")
        assert [cl_holder_node(h) for h in held(first).values()] == ["node-a"]
        assert sorted(cl_holder_node(h) or f"IL:{h}" for h in held(second).values()) == ["IL:node-b", "node-a"]


async def test_a_pod_asking_for_more_unique_cameras_than_exist_is_refused_and_holds_nothing():
    """Seed 000: 3 cameras asked, 2 exist. With uniqueDevices the node advertises one CL device per camera, so the
    kubelet refuses the pod at admission (`OutOf<resource>`) before any slot could be taken."""
    async with Fleet(resource_prefix="akri.sh") as fleet:
        il1, il2 = await two_cameras(fleet, unique=True)
        pod = await fleet.run_pod("greedy", node="node-a", requests={CL: 3})
        assert pod["status"]["phase"] == "Failed"
        assert pod["status"]["reason"] == f"OutOf{CL}"
        for instance in await instances(fleet, "akri-onvif"):
            assert held(instance) == {}
        assert fleet.available("node-a") == {CL: 2, il1: 2, il2: 2}


async def test_an_allocation_the_agent_refuses_fails_the_pod_with_unexpected_admission_error_and_holds_nothing():
    """Seed 000/001: when the kubelet asks for a slot the Instance already gives to someone else (its health view is
    a moment behind), the agent refuses Allocate, the pod fails with UnexpectedAdmissionError and nothing is held."""
    async with Fleet(resource_prefix="akri.sh") as fleet:
        il1, il2 = await two_cameras(fleet, unique=True)
        first, second = await instances(fleet, "akri-onvif")
        # node-b's agent claims both slots of the second camera; in the same instant node-a's kubelet admits a pod
        # asking for both CL devices, still seeing the second camera as free.
        claimed = dict(second)
        claimed["spec"] = {**second["spec"], "deviceUsage": dict.fromkeys(second["spec"]["deviceUsage"], "node-b")}
        await fleet.store.update(claimed)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "late", "namespace": "default"},
            "spec": {
                "nodeName": "node-a",
                "containers": [
                    {"name": "main", "image": "x", "resources": {"requests": {CL: "2"}, "limits": {CL: "2"}}}
                ],
            },
        }
        await fleet.store.create(pod)
        await fleet.settle()
        result = await fleet.get("Pod", "late")
        assert result is not None
        assert result["status"]["phase"] == "Failed"
        assert result["status"]["reason"] == "UnexpectedAdmissionError"
        first, second = await instances(fleet, "akri-onvif")
        assert held(first) == {}
        assert set(held(second).values()) == {"node-b"}
        assert fleet.available("node-a") == {CL: 1, il1: 2, il2: 0}
