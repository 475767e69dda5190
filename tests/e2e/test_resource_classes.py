"""Seed 003 end to end (issue #8): resource classes through the real agent, scheduler and simulated kubelets.

Three nodes with local GPUs of different memory, discovered by the `sim` handler into Instances whose
brokerProperties carry the device's `memory`; classes select on `Kind` and `memory`. A pod asking for a class is
filtered and placed by the scheduler, annotated with the devices it chose, admitted by the kubelet through Allocate on
those devices' Instance-level plugins (the slot holder in `deviceUsage` is the node), and its deletion frees the slots
and brings the class status back.
"""

from __future__ import annotations

from typing import Any

import pytest

from devplace.sim import Fleet
from tests.e2e.scenarios import held, instances

ANNOTATION = "scheduler.alpha.kubernetes.io/resClass_"

GPUS = """
apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: gpus
spec:
  discoveryHandler:
    name: sim
    discoveryDetails: "kind: gpu\\nshared: false"
  deviceKind: nvidia-gpu
  capacity: 1
"""

CLASSES = """
apiVersion: devplace.io/v1alpha1
kind: ResourceClass
metadata:
  name: nvidia.high.mem
spec:
  resourceSelector:
    - matchExpressions:
        - {key: Kind, operator: In, values: [nvidia-gpu]}
        - {key: memory, operator: GtEq, values: [30G]}
---
apiVersion: devplace.io/v1alpha1
kind: ResourceClass
metadata:
  name: huge.mem
spec:
  resourceSelector:
    - matchExpressions:
        - {key: Kind, operator: In, values: [nvidia-gpu]}
        - {key: memory, operator: Gt, values: [64G]}
"""


def gpu(memory: str) -> dict[str, str]:
    return {"kind": "gpu", "memory": memory}


async def gpu_cluster(fleet: Fleet) -> dict[str, str]:
    """node-a: two high-memory GPUs; node-b: one 16G GPU; node-c: one 32G GPU. Returns device id -> Instance."""
    for node in ("node-a", "node-b", "node-c"):
        fleet.add_node(node)
    fleet.plug("gpu-1", ["node-a"], gpu("32G"))
    fleet.plug("gpu-2", ["node-a"], gpu("40G"))
    fleet.plug("gpu-3", ["node-b"], gpu("16G"))
    fleet.plug("gpu-4", ["node-c"], gpu("32G"))
    await fleet.apply(GPUS)
    await fleet.apply(CLASSES)
    await fleet.settle()
    found = await instances(fleet, "gpus")
    by_memory_node = {(i["spec"]["brokerProperties"]["memory"], i["spec"]["nodes"][0]): i for i in found}
    return {
        "gpu-1": by_memory_node["32G", "node-a"]["metadata"]["name"],
        "gpu-2": by_memory_node["40G", "node-a"]["metadata"]["name"],
        "gpu-3": by_memory_node["16G", "node-b"]["metadata"]["name"],
        "gpu-4": by_memory_node["32G", "node-c"]["metadata"]["name"],
    }


async def class_status(fleet: Fleet, name: str) -> dict[str, str]:
    obj = await fleet.get("ResourceClass", name)
    assert obj is not None
    return dict(obj.get("status") or {})


def class_annotations(pod: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in (pod["metadata"].get("annotations") or {}).items() if k.startswith(ANNOTATION)}


async def test_seed_003_user_story_submit_filter_select_annotate_allocate_run_delete():
    async with Fleet() as fleet:
        gpus = await gpu_cluster(fleet)
        assert await class_status(fleet, "nvidia.high.mem") == {"allocatable": "3", "requested": "0"}
        assert await class_status(fleet, "huge.mem") == {"allocatable": "0", "requested": "0"}

        # 1. submit: two high-memory GPUs on one node, which only node-a has
        pod = await fleet.run_pod("trainer", requests={"rc.devplace.io/nvidia.high.mem": 2})
        # 2.-3. filter, select, annotate
        assert pod["spec"]["nodeName"] == "node-a"
        assert class_annotations(pod) == {
            f"{ANNOTATION}nvidia.high.mem_{gpus['gpu-1']}": "1",
            f"{ANNOTATION}nvidia.high.mem_{gpus['gpu-2']}": "1",
        }
        # 4. the kubelet called Allocate on those devices' Instance-level plugins: node-a holds their slots
        assert pod["status"]["phase"] == "Running"
        by_name = {i["metadata"]["name"]: i for i in await instances(fleet, "gpus")}
        assert held(by_name[gpus["gpu-1"]]) == {f"{gpus['gpu-1']}-0": "node-a"}
        assert held(by_name[gpus["gpu-2"]]) == {f"{gpus['gpu-2']}-0": "node-a"}
        assert held(by_name[gpus["gpu-3"]]) == held(by_name[gpus["gpu-4"]]) == {}
        allocation = fleet.kubelet("node-a").allocations()["default", "trainer"]
        assert allocation.containers[0].devices == {
            f"akri.sh/{gpus['gpu-1']}": [f"{gpus['gpu-1']}-0"],
            f"akri.sh/{gpus['gpu-2']}": [f"{gpus['gpu-2']}-0"],
        }
        assert await class_status(fleet, "nvidia.high.mem") == {"allocatable": "3", "requested": "2"}

        # a second one-GPU pod goes where a matching device is left: node-c (node-b's GPU has 16G)
        small = await fleet.run_pod("inference", requests={"rc.devplace.io/nvidia.high.mem": 1})
        assert small["spec"]["nodeName"] == "node-c"
        assert small["status"]["phase"] == "Running"
        assert class_annotations(small) == {f"{ANNOTATION}nvidia.high.mem_{gpus['gpu-4']}": "1"}
        assert await class_status(fleet, "nvidia.high.mem") == {"allocatable": "3", "requested": "3"}

        # 5.-6. delete: the agent frees the slots, the scheduler's class status follows
        await fleet.delete("Pod", "trainer")
        await fleet.settle()
        by_name = {i["metadata"]["name"]: i for i in await instances(fleet, "gpus")}
        assert held(by_name[gpus["gpu-1"]]) == held(by_name[gpus["gpu-2"]]) == {}
        assert held(by_name[gpus["gpu-4"]]) == {f"{gpus['gpu-4']}-0": "node-c"}
        assert await class_status(fleet, "nvidia.high.mem") == {"allocatable": "3", "requested": "1"}
        assert fleet.available("node-a") == {
            "akri.sh/gpus": 2,
            f"akri.sh/{gpus['gpu-1']}": 1,
            f"akri.sh/{gpus['gpu-2']}": 1,
        }

        await fleet.delete("Pod", "inference")
        await fleet.settle()
        assert all(held(i) == {} for i in await instances(fleet, "gpus"))
        assert await class_status(fleet, "nvidia.high.mem") == {"allocatable": "3", "requested": "0"}


async def test_an_unschedulable_class_request_says_why_for_every_node():
    async with Fleet() as fleet:
        await gpu_cluster(fleet)
        pod = await fleet.run_pod("greedy", requests={"rc.devplace.io/nvidia.high.mem": 2, "cpu": "4"})
        assert pod["spec"]["nodeName"] == "node-a"
        # node-a has no high-memory GPU left and 4 of its 8 cpus; node-b has none that matches; node-c has one
        again = await fleet.run_pod("greedier", requests={"rc.devplace.io/nvidia.high.mem": 2, "cpu": "6"})
        assert again["status"].get("phase", "Pending") == "Pending"
        assert "nodeName" not in again["spec"] or not again["spec"]["nodeName"]
        [condition] = [c for c in again["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert condition["status"] == "False"
        assert condition["reason"] == "Unschedulable"
        assert condition["message"] == (
            "0/3 nodes are available: 1 insufficient cpu, 1 insufficient devices for class nvidia.high.mem: "
            "want 2, 1 free, 1 no device matches class nvidia.high.mem."
        )
        assert class_annotations(again) == {}

        nothing = await fleet.run_pod("huge", requests={"rc.devplace.io/huge.mem": 1})
        [condition] = [c for c in nothing["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert condition["message"] == "0/3 nodes are available: 3 no device matches class huge.mem."


async def test_a_pending_class_request_is_placed_once_a_matching_device_is_plugged():
    async with Fleet() as fleet:
        gpus = await gpu_cluster(fleet)
        pending = await fleet.run_pod("big", requests={"rc.devplace.io/huge.mem": 1})
        assert [c["status"] for c in pending["status"]["conditions"] if c["type"] == "PodScheduled"] == ["False"]

        fleet.plug("gpu-5", ["node-b"], gpu("80G"))
        await fleet.settle()
        pod = await fleet.get("Pod", "big")
        assert pod is not None
        assert pod["spec"]["nodeName"] == "node-b"
        assert pod["status"]["phase"] == "Running"
        [huge] = [i for i in await instances(fleet, "gpus") if i["metadata"]["name"] not in gpus.values()]
        assert held(huge) == {f"{huge['metadata']['name']}-0": "node-b"}
        assert await class_status(fleet, "huge.mem") == {"allocatable": "1", "requested": "1"}
        assert await class_status(fleet, "nvidia.high.mem") == {"allocatable": "4", "requested": "1"}


async def test_a_class_request_the_scheduler_never_chose_devices_for_fails_at_the_kubelet():
    async with Fleet() as fleet:
        await gpu_cluster(fleet)
        pod = await fleet.run_pod("bypass", node="node-a", requests={"rc.devplace.io/nvidia.high.mem": 1})
        assert pod["status"]["phase"] == "Failed"
        assert pod["status"]["reason"] == "UnexpectedAdmissionError"
        assert pod["status"]["message"].startswith("resource class rc.devplace.io/nvidia.high.mem requested but no")
        assert all(held(i) == {} for i in await instances(fleet, "gpus"))


@pytest.mark.parametrize("strategy", ["firstFit", "binpack", "spread", "optimal"])
async def test_every_selection_strategy_places_on_a_node_whose_devices_match(strategy):
    async with Fleet(strategy=strategy) as fleet:
        gpus = await gpu_cluster(fleet)
        pod = await fleet.run_pod("one", requests={"rc.devplace.io/nvidia.high.mem": 1})
        assert pod["status"]["phase"] == "Running"
        [(key, qty)] = class_annotations(pod).items()
        device = key.removeprefix(f"{ANNOTATION}nvidia.high.mem_")
        assert device in {gpus["gpu-1"], gpus["gpu-2"], gpus["gpu-4"]}
        assert qty == "1"
        [instance] = [i for i in await instances(fleet, "gpus") if i["metadata"]["name"] == device]
        assert held(instance) == {f"{device}-0": pod["spec"]["nodeName"]}
