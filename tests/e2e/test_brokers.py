"""Seed 002 end to end (issue #9): every broker strategy in a simulated fleet, with the real agent, controller,
scheduler and kubelets, plus Akri's own end-to-end checks on brokers and their Services.

Broker Pods carry no `nodeName` when the controller creates them: pinned strategies pin by node affinity, so every
broker goes through the scheduler and then through its node's kubelet (Allocate on the plugins it asks for). A
Running broker holds its slots in `deviceUsage`; a broker the kubelet cannot serve fails and is recreated, and waits
Pending with the scheduler's reason.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from devplace.sim import Fleet
from tests.e2e.scenarios import BROKER_JOB as JOB
from tests.e2e.scenarios import PLAIN_BROKER as PLAIN
from tests.e2e.scenarios import broker_configuration as configuration
from tests.e2e.scenarios import held, instances


async def owned(fleet: Fleet, kind: str, configuration_name: str) -> list[dict[str, Any]]:
    """Objects of `kind` the controller made for a Configuration, by name."""
    items = await fleet.list(kind)
    mine = [o for o in items if (o["metadata"].get("labels") or {}).get("akri.sh/configuration") == configuration_name]
    return sorted(mine, key=lambda o: o["metadata"]["name"])


async def brokers(fleet: Fleet, configuration_name: str) -> dict[str, tuple[str, str]]:
    """Broker Pod name -> (phase, node) ("" node while unbound; "Pending" for a pod no kubelet decided on)."""
    return {
        p["metadata"]["name"]: ((p.get("status") or {}).get("phase") or "Pending", p["spec"].get("nodeName") or "")
        for p in await owned(fleet, "Pod", configuration_name)
    }


async def service_names(fleet: Fleet, configuration_name: str) -> list[str]:
    return [s["metadata"]["name"] for s in await owned(fleet, "Service", configuration_name)]


def phases(found: dict[str, tuple[str, str]]) -> list[str]:
    return sorted(phase for phase, _ in found.values())


async def holders(fleet: Fleet, configuration_name: str) -> list[str]:
    """Every held slot's holder over the Configuration's Instances, sorted."""
    return sorted(h for i in await instances(fleet, configuration_name) for h in held(i).values())


def scheduled_message(pod: dict[str, Any]) -> str:
    [condition] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    return str(condition.get("message") or "")


# -- perNode -----------------------------------------------------------------------------------------------------


async def test_per_node_capacity_bounds_running_brokers_and_a_pending_one_takes_over_a_freed_slot():
    async with Fleet() as fleet:
        for node in ("node-a", "node-b", "node-c"):
            fleet.add_node(node)
        fleet.plug("cam-1", ["node-a", "node-b", "node-c"])
        await fleet.apply(configuration("cams", capacity=2))
        await fleet.settle()
        [instance] = await instances(fleet, "cams")
        name = instance["metadata"]["name"]
        found = await brokers(fleet, "cams")
        assert sorted(found) == [f"{node}-{name}-pod" for node in ("node-a", "node-b", "node-c")]
        assert phases(found) == ["Pending", "Running", "Running"]
        running = sorted(node for phase, node in found.values() if phase == "Running")
        assert await holders(fleet, "cams") == running  # each Running broker holds one slot on its node
        [waiting] = [pod for pod, (phase, _) in found.items() if phase == "Pending"]
        pending = await fleet.get("Pod", waiting)
        assert pending is not None
        assert not pending["spec"].get("nodeName")
        assert scheduled_message(pending) == (
            f"0/3 nodes are available: 2 node(s) didn't match node selector, 1 insufficient akri.sh/{name}."
        )
        config = await fleet.get("Configuration", "cams")
        assert config is not None
        assert config["status"]["brokers"] == {"desired": 3, "running": 2, "pending": 1}

        # the device leaves one of the running brokers' nodes: that broker goes, the pending one takes its slot
        gone = running[0]
        fleet.unplug("cam-1", [gone])
        await fleet.settle()
        found = await brokers(fleet, "cams")
        stay = sorted({"node-a", "node-b", "node-c"} - {gone})
        assert found == {f"{node}-{name}-pod": ("Running", node) for node in stay}
        assert await holders(fleet, "cams") == stay


async def test_a_deleted_per_node_broker_is_recreated_with_a_new_uid_and_capacity_still_holds():
    async with Fleet() as fleet:
        for node in ("node-a", "node-b", "node-c"):
            fleet.add_node(node)
        fleet.plug("cam-1", ["node-a", "node-b", "node-c"])
        await fleet.apply(configuration("cams", capacity=2))
        await fleet.settle()
        found = await brokers(fleet, "cams")
        before_names = list(found)
        victim = next(pod for pod, (phase, _) in sorted(found.items()) if phase == "Running")
        before = await fleet.get("Pod", victim)
        assert before is not None
        await fleet.delete("Pod", victim)
        await fleet.settle()
        after = await fleet.get("Pod", victim)
        assert after is not None
        assert after["metadata"]["uid"] != before["metadata"]["uid"]
        found = await brokers(fleet, "cams")
        assert sorted(found) == sorted(await brokers(fleet, "cams")) == sorted(before_names)
        assert phases(found) == ["Pending", "Running", "Running"]
        running = sorted(node for phase, node in found.values() if phase == "Running")
        assert await holders(fleet, "cams") == running


# -- Akri's end-to-end checks ------------------------------------------------------------------------------------


async def test_akri_two_instances_two_brokers_two_instance_services_one_configuration_service():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        fleet.add_node("node-b")
        fleet.plug("cam-1", ["node-a"])
        fleet.plug("cam-2", ["node-b"])
        await fleet.apply(configuration("cams", details="shared: false"))
        await fleet.settle()
        names = [i["metadata"]["name"] for i in await instances(fleet, "cams")]
        assert len(names) == 2
        found = await brokers(fleet, "cams")
        nodes = {i["metadata"]["name"]: i["spec"]["nodes"][0] for i in await instances(fleet, "cams")}
        assert found == {f"{n}-pod": ("Running", nodes[n]) for n in names}
        assert await service_names(fleet, "cams") == sorted([*(f"{n}-svc" for n in names), "cams-svc"])
        service = await fleet.get("Service", f"{names[0]}-svc")
        assert service is not None
        assert service["spec"]["selector"] == {"akri.sh/instance": names[0]}
        config_service = await fleet.get("Service", "cams-svc")
        assert config_service is not None
        assert config_service["spec"]["selector"] == {"akri.sh/configuration": "cams"}

        # every device offline: no brokers, no services
        fleet.unplug("cam-1")
        fleet.unplug("cam-2")
        await fleet.settle()
        assert await instances(fleet, "cams") == []
        assert await brokers(fleet, "cams") == {}
        assert await service_names(fleet, "cams") == []

        # back online: the same Instances, brokers and services again
        fleet.plug("cam-1", ["node-a"])
        fleet.plug("cam-2", ["node-b"])
        await fleet.settle()
        assert [i["metadata"]["name"] for i in await instances(fleet, "cams")] == names
        assert await brokers(fleet, "cams") == {f"{n}-pod": ("Running", nodes[n]) for n in names}
        assert await service_names(fleet, "cams") == sorted([*(f"{n}-svc" for n in names), "cams-svc"])

        # the Configuration deleted: nothing of it is left
        await fleet.delete("Configuration", "cams")
        await fleet.settle()
        assert await instances(fleet, "cams") == []
        assert await brokers(fleet, "cams") == {}
        assert await service_names(fleet, "cams") == []
        assert all(not held(i) for i in await fleet.list("Instance"))


# -- job ---------------------------------------------------------------------------------------------------------


async def test_job_strategy_one_job_per_instance_gone_with_its_device():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        fleet.plug("cam-1", ["node-a"])
        fleet.plug("cam-2", ["node-a"])
        await fleet.apply(configuration("cams", job=JOB, details="shared: false", services=False))
        await fleet.settle()
        names = [i["metadata"]["name"] for i in await instances(fleet, "cams")]
        jobs = await owned(fleet, "Job", "cams")
        assert [j["metadata"]["name"] for j in jobs] == [f"{n}-1-job" for n in names]
        limits = jobs[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert limits == {f"akri.sh/{names[0]}": "1"}
        assert await brokers(fleet, "cams") == {}

        fleet.unplug("cam-1")
        await fleet.settle()
        left = [i["metadata"]["name"] for i in await instances(fleet, "cams")]
        assert [j["metadata"]["name"] for j in await owned(fleet, "Job", "cams")] == [f"{n}-1-job" for n in left]


# -- deployment --------------------------------------------------------------------------------------------------


async def test_deployment_strategy_min_of_replicas_and_capacity_placed_by_the_scheduler():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        fleet.add_node("node-b")
        fleet.plug("cam-1", ["node-a", "node-b"])
        await fleet.apply(configuration("cams", strategy={"deployment": {"replicas": 3}}, capacity=2))
        await fleet.settle()
        [instance] = await instances(fleet, "cams")
        name = instance["metadata"]["name"]
        found = await brokers(fleet, "cams")
        assert sorted(found) == [f"{name}-0-pod", f"{name}-1-pod"]
        assert phases(found) == ["Running", "Running"]
        placed = sorted(node for _, node in found.values())
        assert set(placed) <= {"node-a", "node-b"}
        assert await holders(fleet, "cams") == placed  # each replica holds one slot, on the node it was placed
        pod = await fleet.get("Pod", f"{name}-0-pod")
        assert pod is not None
        assert "affinity" not in pod["spec"]  # not pinned: the scheduler chose
        config = await fleet.get("Configuration", "cams")
        assert config is not None
        assert config["status"]["brokers"] == {"desired": 2, "running": 2, "pending": 0}


# -- configuration-level -----------------------------------------------------------------------------------------


async def test_configuration_strategy_pods_ask_for_the_configuration_resource_and_the_scheduler_places_them():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        fleet.add_node("node-b")
        fleet.plug("cam-1", ["node-a"])
        fleet.plug("cam-2", ["node-b"])
        fleet.plug("cam-3", ["node-b"])
        strategy = {"configuration": {"replicas": 2, "devicesPerPod": 2}}
        await fleet.apply(configuration("cams", strategy=strategy, pod=PLAIN, details="shared: false"))
        await fleet.settle()
        found = await brokers(fleet, "cams")
        assert sorted(found) == ["cams-0-pod", "cams-1-pod"]
        # only node-b sees two cameras: one replica runs there, the other waits for a node with two
        assert phases(found) == ["Pending", "Running"]
        [(running_pod, _)] = [(p, n) for p, (phase, n) in found.items() if phase == "Running"]
        assert found[running_pod] == ("Running", "node-b")
        pod = await fleet.get("Pod", running_pod)
        assert pod is not None
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {"akri.sh/cams": "2"}
        held_by = await holders(fleet, "cams")
        assert len(held_by) == 2
        assert all(h.startswith("C:") and h.endswith(":node-b") for h in held_by)
        [waiting] = [p for p, (phase, _) in found.items() if phase == "Pending"]
        pending = await fleet.get("Pod", waiting)
        assert pending is not None
        assert scheduled_message(pending) == "0/2 nodes are available: 2 insufficient akri.sh/cams."

        fleet.plug("cam-4", ["node-a"])  # node-a now sees two: the waiting replica runs there
        await fleet.settle()
        assert sorted((await brokers(fleet, "cams")).values()) == [("Running", "node-a"), ("Running", "node-b")]


# -- pools -------------------------------------------------------------------------------------------------------


def pool_members(config_map: dict[str, Any]) -> list[str]:
    return [entry["name"] for entry in json.loads(config_map["data"]["instances.json"])]


async def test_static_pool_seed_002_five_cameras_three_nodes_pool_of_three():
    async with Fleet() as fleet:
        nodes = ["node-a", "node-b", "node-c"]
        for node in nodes:
            fleet.add_node(node)
        for i in range(1, 6):
            fleet.plug(f"cam-{i}", nodes, {"rtsp": f"rtsp://10.0.0.{i}/stream"})
        strategy = {"pool": {"size": 3}}
        await fleet.apply(configuration("cams", strategy=strategy, pod=PLAIN, services=False))
        await fleet.settle()
        # five cameras, pools of exactly three: one broker, two cameras wait
        found = await brokers(fleet, "cams")
        assert phases(found) == ["Running"]
        [(pod_name, (_, node))] = found.items()
        [config_map] = await owned(fleet, "ConfigMap", "cams")
        members = pool_members(config_map)
        assert len(members) == 3
        assert sorted(await holders(fleet, "cams")) == [node, node, node]  # one slot of each member, on its node
        pod = await fleet.get("Pod", pod_name)
        assert pod is not None
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {f"akri.sh/{m}": "1" for m in members}
        config = await fleet.get("Configuration", "cams")
        assert config is not None
        assert [c["reason"] for c in config["status"].get("conditions", []) if c.get("reason") == "PoolIncomplete"]

        # a sixth camera comes online: a second broker for the three available cameras
        fleet.plug("cam-6", nodes, {"rtsp": "rtsp://10.0.0.6/stream"})
        await fleet.settle()
        found = await brokers(fleet, "cams")
        assert phases(found) == ["Running", "Running"]
        assert pod_name in found
        maps = await owned(fleet, "ConfigMap", "cams")
        assert sorted(len(pool_members(m)) for m in maps) == [3, 3]
        assert len(await holders(fleet, "cams")) == 6

        # one camera of the first pool goes down: that broker goes, the other stays
        [first] = [i for i in await instances(fleet, "cams") if i["metadata"]["name"] == members[0]]
        fleet.unplug(first["spec"]["brokerProperties"]["rtsp"].split("/")[2].replace("10.0.0.", "cam-"))
        await fleet.settle()
        await fleet.advance(fleet.offline_grace)
        found = await brokers(fleet, "cams")
        assert pod_name not in found
        assert phases(found) == ["Running"]
        assert len(await holders(fleet, "cams")) == 3


async def test_static_pool_timeout_deploys_a_smaller_pool():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        for i in range(1, 3):
            fleet.plug(f"cam-{i}", ["node-a"])
        strategy = {"pool": {"size": 3, "timeoutSeconds": 60}}
        await fleet.apply(configuration("cams", strategy=strategy, pod=PLAIN, services=False))
        await fleet.settle()
        assert await brokers(fleet, "cams") == {}
        await fleet.clock.advance(59)
        await fleet.settle()
        assert await brokers(fleet, "cams") == {}
        await fleet.clock.advance(1)
        await fleet.settle()
        found = await brokers(fleet, "cams")
        assert list(found.values()) == [("Running", "node-a")]
        [config_map] = await owned(fleet, "ConfigMap", "cams")
        assert len(pool_members(config_map)) == 2


async def test_dynamic_pool_configmap_is_rewritten_in_place_as_devices_come_and_go():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        fleet.plug("cam-1", ["node-a"], {"rtsp": "rtsp://10.0.0.1/stream"})
        fleet.plug("cam-2", ["node-a"], {"rtsp": "rtsp://10.0.0.2/stream"})
        strategy = {"pool": {"size": 3, "mode": "dynamic"}}
        await fleet.apply(configuration("cams", strategy=strategy, pod=PLAIN, details="shared: false"))
        await fleet.settle()
        [(pod_name, (phase, node))] = (await brokers(fleet, "cams")).items()
        assert (phase, node) == ("Running", "node-a")
        [config_map] = await owned(fleet, "ConfigMap", "cams")
        names = [i["metadata"]["name"] for i in await instances(fleet, "cams")]
        assert sorted(pool_members(config_map)) == names
        listing = json.loads(config_map["data"]["instances.json"])
        assert sorted(e["brokerProperties"]["rtsp"] for e in listing) == [
            "rtsp://10.0.0.1/stream",
            "rtsp://10.0.0.2/stream",
        ]
        pod = await fleet.get("Pod", pod_name)
        assert pod is not None
        pod_uid, map_uid = pod["metadata"]["uid"], config_map["metadata"]["uid"]
        assert pod["spec"]["volumes"] == [
            {"name": "devplace-pool", "configMap": {"name": config_map["metadata"]["name"]}}
        ]

        fleet.plug("cam-3", ["node-a"], {"rtsp": "rtsp://10.0.0.3/stream"})
        await fleet.settle()
        [config_map] = await owned(fleet, "ConfigMap", "cams")
        assert config_map["metadata"]["uid"] == map_uid  # rewritten in place
        assert sorted(pool_members(config_map)) == [i["metadata"]["name"] for i in await instances(fleet, "cams")]
        assert len(pool_members(config_map)) == 3
        pod = await fleet.get("Pod", pod_name)
        assert pod is not None
        assert pod["metadata"]["uid"] == pod_uid  # the broker keeps running

        fleet.unplug("cam-1")
        await fleet.settle()
        [config_map] = await owned(fleet, "ConfigMap", "cams")
        assert config_map["metadata"]["uid"] == map_uid
        assert sorted(pool_members(config_map)) == [i["metadata"]["name"] for i in await instances(fleet, "cams")]
        assert len(pool_members(config_map)) == 2
        pod = await fleet.get("Pod", pod_name)
        assert pod is not None
        assert pod["metadata"]["uid"] == pod_uid


# -- group -------------------------------------------------------------------------------------------------------

HIGH_MEM = yaml.safe_dump(
    {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": {"name": "nvidia.high.mem"},
        "spec": {
            "resourceSelector": [
                {
                    "matchExpressions": [
                        {"key": "Kind", "operator": "In", "values": ["nvidia-gpu"]},
                        {"key": "memory", "operator": "GtEq", "values": ["30G"]},
                    ]
                }
            ]
        },
    }
)


async def test_group_one_high_memory_gpu_by_class_and_two_cameras_per_broker_on_one_node():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        fleet.add_node("node-b")
        fleet.plug("gpu-1", ["node-a"], {"kind": "gpu", "memory": "16G"})
        fleet.plug("gpu-2", ["node-b"], {"kind": "gpu", "memory": "32G"})
        for i in range(1, 4):
            fleet.plug(f"cam-{i}", ["node-a", "node-b"], {"kind": "cam"})
        await fleet.apply(configuration("gpus", details="kind: gpu\nshared: false", kind="nvidia-gpu", pod=PLAIN))
        await fleet.apply(configuration("cams", details="kind: cam", pod=PLAIN))
        group = {"group": {"members": [{"resourceClass": "nvidia.high.mem"}, {"configuration": "cams", "count": 2}]}}
        await fleet.apply(configuration("ml", strategy=group, pod=PLAIN, details="kind: none", services=False))
        await fleet.settle()
        assert await brokers(fleet, "ml") == {}  # the class does not exist yet: no group can be made
        config = await fleet.get("Configuration", "ml")
        assert config is not None
        assert "GroupUnsatisfiable" in json.dumps(config["status"])

        await fleet.apply(HIGH_MEM)  # the class arrives: the controller reconciles the group again
        await fleet.settle()
        found = await brokers(fleet, "ml")
        assert list(found.values()) == [("Running", "node-b")]  # only node-b has a 32G GPU
        [config_map] = await owned(fleet, "ConfigMap", "ml")
        members = pool_members(config_map)
        [gpu] = [i["metadata"]["name"] for i in await instances(fleet, "gpus") if i["spec"]["nodes"] == ["node-b"]]
        cams = [i["metadata"]["name"] for i in await instances(fleet, "cams")]
        assert members[0] == gpu
        assert len(members[1:]) == 2
        assert set(members[1:]) <= set(cams)
        [pod_name] = found
        pod = await fleet.get("Pod", pod_name)
        assert pod is not None
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {f"akri.sh/{m}": "1" for m in members}
        by_name = {i["metadata"]["name"]: i for i in await fleet.list("Instance")}
        assert [list(held(by_name[m]).values()) for m in members] == [["node-b"]] * 3

        fleet.unplug("gpu-2")  # the group's GPU goes: so does its broker
        await fleet.settle()
        assert await brokers(fleet, "ml") == {}
