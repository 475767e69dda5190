"""Pods with ResourceClaims through the scheduler's shell and the claim lifecycle (`controller.claims`), on a real
MemoryStore with a FakeClock: seed 003's example through DRA (GPUs of 16G, 24G, 32Gi and 80G, a DeviceClass compiled
from the seed's class), kube-scheduler's commit order, shared claims, slots in devplace's Instances, and a claim freed
when its pod goes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from devplace import errors
from devplace.api import compile_class, normalize
from devplace.api._selectors import DeviceSelector, Requirement
from devplace.clocks import FakeClock
from devplace.controller._claims import ClaimLifecycle, claim_name_for
from devplace.scheduler._schedulers import Scheduler
from devplace.store import DelegatingStore, MemoryStore, Store
from tests.scheduler.builders import (
    GPU_CONFIGURATION,
    claim_pod_object,
    gpu_instance_object,
    gpu_slice,
    node_object,
)

HIGH = "nvidia.high.mem"


TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-big-gpu", "namespace": "default"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": HIGH}}]}}},
}


def claim(name: str, count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": HIGH, "count": count}}]}},
    }


SELECTOR = DeviceSelector([[Requirement("Kind", "In", ("nvidia-gpu",)), Requirement("memory", "GtEq", ("30G",))]])

GPUS = {  # seed 003's GPUs: one per node
    "gpu-16g": ("node-a", "16G"),
    "gpu-24g": ("node-b", "24G"),
    "gpu-32gi": ("node-c", "32Gi"),
    "gpu-80g": ("node-d", "80G"),
}


async def seed_gpus(store: Store) -> None:
    """Seed 003's GPUs, one per node, each an Instance published in its node's slice, and the class's DeviceClass."""
    await store.create(normalize(GPU_CONFIGURATION))
    for name, (where, memory) in GPUS.items():
        await store.create(node_object(where))
        inst = gpu_instance_object(name, where, memory)
        await store.create(inst)
        await store.create(gpu_slice(where, [inst]))
    await store.create(compile_class(HIGH, SELECTOR))


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[MemoryStore]:
    s = MemoryStore(clock=clock)
    yield s
    await s.close()


@pytest.fixture
async def cluster(store: MemoryStore, clock: FakeClock) -> AsyncIterator[tuple[Scheduler, ClaimLifecycle]]:
    await seed_gpus(store)
    await store.create(TEMPLATE)
    scheduler = Scheduler(store, clock)
    lifecycle = ClaimLifecycle(store, clock)
    await scheduler.start()
    lifecycle.start()
    try:
        yield scheduler, lifecycle
    finally:
        await scheduler.stop()
        await lifecycle.stop()


async def settle(store: Store, *parts: Any) -> None:
    async with asyncio.timeout(30):  # a safety net against a hang, not a timing assertion
        while True:
            if all(p.is_idle() for p in parts):
                revision = await store.revision()
                for _ in range(50):
                    await asyncio.sleep(0)
                if all(p.is_idle() for p in parts) and await store.revision() == revision:
                    return
            else:
                await asyncio.sleep(0)


def scheduled(p: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in (p.get("status") or {}).get("conditions") or () if c["type"] == "PodScheduled"), None)


async def test_seed_003_through_dra_binds_two_pods_to_the_big_gpus_and_the_third_waits_until_one_goes(
    store: MemoryStore, cluster: tuple[Scheduler, ClaimLifecycle]
) -> None:
    scheduler, lifecycle = cluster
    for name in ("train-1", "train-2", "train-3"):
        await store.create(claim_pod_object(name, template="one-big-gpu"))
        await settle(store, scheduler, lifecycle)  # one after another: the third is the one left out
    pods = {p["metadata"]["name"]: p for p in (await store.list("Pod", "default")).items}
    assert {n: p["spec"].get("nodeName") for n, p in pods.items()} == {
        "train-1": "node-c",
        "train-2": "node-d",
        "train-3": None,
    }
    claims = {c["metadata"]["name"]: c for c in (await store.list("ResourceClaim", "default")).items}
    first = claims[claim_name_for(pods["train-1"], "gpu")]
    assert first["metadata"]["ownerReferences"][0]["uid"] == pods["train-1"]["metadata"]["uid"]
    assert first["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    result = first["status"]["allocation"]["devices"]["results"]
    assert [(r["request"], r["driver"], r["pool"], r["device"]) for r in result] == [
        ("gpu", "devplace.io", "node-c", "gpu-32gi")
    ]
    assert first["status"]["reservedFor"] == [
        {"resource": "pods", "name": "train-1", "uid": pods["train-1"]["metadata"]["uid"]}
    ]
    assert pods["train-1"]["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": first["metadata"]["name"]}
    ]
    # the devices' slots in devplace's Instances are held for the claims: the device plugins see them taken
    usage = {i["metadata"]["name"]: i["spec"]["deviceUsage"] for i in (await store.list("Instance")).items}
    assert usage["gpu-32gi"] == {"gpu-32gi-0": f"D:default/{first['metadata']['name']}:node-c"}
    assert usage["gpu-16g"] == {"gpu-16g-0": ""}
    waiting = scheduled(pods["train-3"])
    assert waiting is not None
    assert waiting["status"] == "False"
    claim3 = claim_name_for(pods["train-3"], "gpu")
    assert waiting["message"] == (
        f"0/4 nodes are available: 2 claim default/{claim3}, request gpu: 1 devices needed, 1 match and 0 of them "
        f"can be had, 2 claim default/{claim3}, request gpu: no device on the node matches class nvidia.high.mem and "
        "the request."
    )
    # a delete frees a device for the third pod: the claim goes with its pod, the slot is free, the pod is bound
    await store.delete("Pod", "train-1", "default")
    await settle(store, scheduler, lifecycle)
    third = await store.get("Pod", "train-3", "default")
    assert third["spec"]["nodeName"] == "node-c"
    names = {c["metadata"]["name"] for c in (await store.list("ResourceClaim", "default")).items}
    assert first["metadata"]["name"] not in names
    gpu = await store.get("Instance", "gpu-32gi", "default")
    assert gpu["spec"]["deviceUsage"] == {"gpu-32gi-0": f"D:default/{claim_name_for(third, 'gpu')}:node-c"}


async def test_a_claim_shared_by_two_pods_is_allocated_once_and_reserved_for_both(
    store: MemoryStore, cluster: tuple[Scheduler, ClaimLifecycle]
) -> None:
    scheduler, lifecycle = cluster
    await store.create(claim("shared"))
    await store.create(claim_pod_object("reader-1", claim_name="shared"))
    await store.create(claim_pod_object("reader-2", claim_name="shared"))
    await settle(store, scheduler, lifecycle)
    pods = {p["metadata"]["name"]: p for p in (await store.list("Pod", "default")).items}
    shared = await store.get("ResourceClaim", "shared", "default")
    device = shared["status"]["allocation"]["devices"]["results"][0]["device"]
    where = GPUS[device][0]
    assert pods["reader-1"]["spec"]["nodeName"] == pods["reader-2"]["spec"]["nodeName"] == where
    assert sorted(e["name"] for e in shared["status"]["reservedFor"]) == ["reader-1", "reader-2"]
    # one pod goes: the claim stays allocated for the other; both go: it is deallocated and its slot freed
    await store.delete("Pod", "reader-1", "default")
    await settle(store, scheduler, lifecycle)
    shared = await store.get("ResourceClaim", "shared", "default")
    assert [e["name"] for e in shared["status"]["reservedFor"]] == ["reader-2"]
    await store.delete("Pod", "reader-2", "default")
    await settle(store, scheduler, lifecycle)
    shared = await store.get("ResourceClaim", "shared", "default")
    assert "allocation" not in shared.get("status", {})
    assert "finalizers" not in shared["metadata"]
    inst = await store.get("Instance", device, "default")
    assert set(inst["spec"]["deviceUsage"].values()) == {""}


async def test_a_claim_no_node_can_serve_leaves_the_pod_pending_with_a_reason_per_node(
    store: MemoryStore, cluster: tuple[Scheduler, ClaimLifecycle]
) -> None:
    scheduler, lifecycle = cluster
    await store.create(claim("three", count=3))
    await store.create(claim_pod_object("greedy", claim_name="three"))
    await settle(store, scheduler, lifecycle)
    greedy = await store.get("Pod", "greedy", "default")
    assert "nodeName" not in greedy["spec"]
    condition = scheduled(greedy)
    assert condition is not None
    assert condition["reason"] == "Unschedulable"
    verdicts = scheduler.explain("default/greedy")
    assert [v.node for v in verdicts] == ["node-a", "node-b", "node-c", "node-d"]
    assert all(v.reason for v in verdicts)
    assert (await store.get("ResourceClaim", "three", "default")).get("status") is None


async def test_a_pod_whose_claim_does_not_exist_waits_and_says_so(
    store: MemoryStore, cluster: tuple[Scheduler, ClaimLifecycle]
) -> None:
    scheduler, lifecycle = cluster
    await store.create(claim_pod_object("early", claim_name="later"))
    await settle(store, scheduler, lifecycle)
    condition = scheduled(await store.get("Pod", "early", "default"))
    assert condition is not None
    assert condition["message"] == 'resourceclaim "later" not found'
    await store.create(claim("later"))
    await settle(store, scheduler, lifecycle)
    assert (await store.get("Pod", "early", "default"))["spec"]["nodeName"] in ("node-c", "node-d")


async def test_a_pod_waiting_for_its_templates_claim_is_gated_without_a_write_then_bound_once_the_claim_is_made(
    store: MemoryStore, clock: FakeClock
) -> None:
    """kube-scheduler's DRA PreEnqueue: no condition, no Event, while the claim lifecycle has not made the claim."""
    await seed_gpus(store)
    await store.create(TEMPLATE)
    scheduler = Scheduler(store, clock)
    await scheduler.start()
    lifecycle = ClaimLifecycle(store, clock)
    try:
        created = await store.create(claim_pod_object("gated", template="one-big-gpu"))
        await settle(store, scheduler)
        pod = await store.get("Pod", "gated", "default")
        assert pod["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]  # nobody wrote it
        assert scheduled(pod) is None
        assert (await store.list("Event", "default")).items == []
        assert {v.reason for v in scheduler.explain("default/gated")} == {
            'waiting for the ResourceClaim of entry "gpu" (template "one-big-gpu") to be created'
        }
        lifecycle.start()
        await settle(store, scheduler, lifecycle)
        bound = await store.get("Pod", "gated", "default")
        assert bound["spec"]["nodeName"] in ("node-c", "node-d")
        condition = scheduled(bound)
        assert condition is not None
        assert condition["status"] == "True"
    finally:
        await scheduler.stop()
        await lifecycle.stop()


async def test_a_pod_bound_elsewhere_meanwhile_is_answered_409_and_keeps_its_node(store: MemoryStore) -> None:
    from devplace.api import binding
    from devplace.store import bind_pod

    clock = FakeClock()
    await store.create(node_object("node-a"))
    await store.create(claim_pod_object("p", claim_name="x"))
    await bind_pod(store, binding("default", "p", "node-a"), clock=clock)
    with pytest.raises(errors.Conflict, match='already assigned to node "node-a"'):
        await bind_pod(store, binding("default", "p", "node-b"), clock=clock)
    bound = await store.get("Pod", "p", "default")
    assert bound["spec"]["nodeName"] == "node-a"
    assert scheduled(bound) == {
        "type": "PodScheduled",
        "status": "True",
        "lastTransitionTime": scheduled(bound)["lastTransitionTime"],
    }  # type: ignore[index]


class FailingBinds(DelegatingStore):
    """The store, but the first `failures` bindings (a Pod update that sets spec.nodeName) fail as a store outage."""

    def __init__(self, inner: Store, failures: int) -> None:
        super().__init__(inner)
        self.failures = failures

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        if obj.get("kind") == "Pod" and (obj.get("spec") or {}).get("nodeName") and self.failures > 0:
            current = await self.inner.get("Pod", obj["metadata"]["name"], obj["metadata"]["namespace"])
            if not current["spec"].get("nodeName"):
                self.failures -= 1
                raise errors.Unavailable("the store went away mid-binding")
        return await self.inner.update(obj)


async def test_a_binding_that_fails_after_the_claim_was_allocated_binds_later_on_the_claims_node(
    store: MemoryStore, clock: FakeClock
) -> None:
    await seed_gpus(store)
    await store.create(claim("mine"))
    failing = FailingBinds(store, failures=1)
    scheduler = Scheduler(failing, clock, retry_after=5.0)
    lifecycle = ClaimLifecycle(store, clock)
    await scheduler.start()
    lifecycle.start()
    try:
        await store.create(claim_pod_object("worker", claim_name="mine"))
        await settle(store, scheduler, lifecycle)
        assert failing.failures == 0  # the first binding failed after the claim was allocated and reserved
        allocated = await store.get("ResourceClaim", "mine", "default")
        [result] = allocated["status"]["allocation"]["devices"]["results"]
        assert [e["name"] for e in allocated["status"]["reservedFor"]] == ["worker"]
        # the retry uses the claim as it is: the pod goes to the allocated device's node, nothing allocated anew
        await clock.advance(5.0)
        await settle(store, scheduler, lifecycle)
        worker = await store.get("Pod", "worker", "default")
        assert worker["spec"]["nodeName"] == GPUS[result["device"]][0]
        assert (await store.get("ResourceClaim", "mine", "default"))["status"]["allocation"] == allocated["status"][
            "allocation"
        ]
    finally:
        await scheduler.stop()
        await lifecycle.stop()


async def test_a_pod_deleted_between_its_claims_allocation_and_its_binding_leaves_no_device_allocated(
    store: MemoryStore, clock: FakeClock
) -> None:
    await seed_gpus(store)
    await store.create(claim("mine"))
    scheduler = Scheduler(FailingBinds(store, failures=1), clock, retry_after=5.0)
    lifecycle = ClaimLifecycle(store, clock)
    await scheduler.start()
    lifecycle.start()
    try:
        await store.create(claim_pod_object("worker", claim_name="mine"))
        await settle(store, scheduler, lifecycle)
        device = (await store.get("ResourceClaim", "mine", "default"))["status"]["allocation"]["devices"]["results"][0]
        await store.delete("Pod", "worker", "default")
        await clock.advance(5.0)
        await settle(store, scheduler, lifecycle)
        mine = await store.get("ResourceClaim", "mine", "default")
        assert "allocation" not in mine.get("status", {})
        assert "reservedFor" not in mine.get("status", {})
        usage = (await store.get("Instance", device["device"], "default"))["spec"]["deviceUsage"]
        assert set(usage.values()) == {""}
    finally:
        await scheduler.stop()
        await lifecycle.stop()


async def test_a_slot_left_held_by_a_claims_interrupted_try_is_freed_once_the_claim_is_allocated_elsewhere(
    store: MemoryStore, cluster: tuple[Scheduler, ClaimLifecycle]
) -> None:
    """A scheduler stopped between its slot write and its claim write (SIGKILL, or a leader paused past its lease:
    its cleanup is fenced) leaves the slot held for a claim that is not allocated; the next leader may allocate the
    claim another device. The stale slot is then freed, so the device is not lost and another pod gets it."""
    scheduler, lifecycle = cluster
    await store.create(claim("mine"))
    gpu = await store.get("Instance", "gpu-80g", "default")
    await store.update({**gpu, "spec": {**gpu["spec"], "deviceUsage": {"gpu-80g-0": "D:default/mine:node-d"}}})
    await store.create(claim_pod_object("first", claim_name="mine"))
    await settle(store, scheduler, lifecycle)
    mine = await store.get("ResourceClaim", "mine", "default")
    assert [r["device"] for r in mine["status"]["allocation"]["devices"]["results"]] == ["gpu-32gi"]
    assert (await store.get("Instance", "gpu-80g", "default"))["spec"]["deviceUsage"] == {"gpu-80g-0": ""}
    await store.create(claim_pod_object("second", template="one-big-gpu"))
    await settle(store, scheduler, lifecycle)
    assert (await store.get("Pod", "second", "default"))["spec"]["nodeName"] == "node-d"


# -- one truth: slots held through the device plugins are not given again through DRA ---------------------------------


def two_slot_slice(consumable: bool) -> dict[str, Any]:
    """Instance `cam` (capacity 2) as the agent publishes it: one shared device of 2 `slots`, or two devices."""
    if consumable:
        devices = [
            {
                "name": "cam",
                "attributes": {"instance": {"string": "cam"}},
                "allowMultipleAllocations": True,
                "capacity": {
                    "slots": {"value": "2", "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "2"}}}
                },
            }
        ]
    else:
        devices = [
            {"name": f"cam-{i}", "attributes": {"instance": {"string": "cam"}, "slot": {"int": i}}} for i in range(2)
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-a-devplace.io"},
        "spec": {
            "driver": "devplace.io",
            "nodeName": "node-a",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


@pytest.mark.parametrize("consumable", [False, True])
async def test_a_slot_held_through_the_device_plugin_is_never_allocated_again_through_dra(
    store: MemoryStore, clock: FakeClock, consumable: bool
) -> None:
    await store.create(normalize(GPU_CONFIGURATION))
    await store.create(node_object("node-a"))
    cam = gpu_instance_object("cam", "node-a", "1G", capacity=2)
    cam["spec"]["deviceUsage"] = {"cam-0": "node-a", "cam-1": ""}  # slot 0: the node's Instance-level plugin
    await store.create(cam)
    await store.create(two_slot_slice(consumable))
    await store.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "cams"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "devplace.io"'}}]},
        }
    )
    scheduler = Scheduler(store, clock)
    await scheduler.start()
    try:
        for name in ("one", "two"):
            await store.create(
                {
                    **claim(name),
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "cams"}}]}},
                }
            )
            await store.create(claim_pod_object(f"pod-{name}", claim_name=name))
            await settle(store, scheduler)
        usage = (await store.get("Instance", "cam", "default"))["spec"]["deviceUsage"]
        assert usage == {"cam-0": "node-a", "cam-1": "D:default/one:node-a"}
        assert (await store.get("Pod", "pod-one", "default"))["spec"]["nodeName"] == "node-a"
        two = await store.get("Pod", "pod-two", "default")
        assert "nodeName" not in two["spec"]
        assert "allocation" not in ((await store.get("ResourceClaim", "two", "default")).get("status") or {})
        condition = scheduled(two)
        assert condition is not None
        assert condition["reason"] == "Unschedulable"
    finally:
        await scheduler.stop()


# -- extended resources backed by a DeviceClass (DRAExtendedResource) --------------------------------------------------


async def test_an_extended_resource_a_device_class_serves_is_allocated_as_a_claim_made_for_the_pod(
    store: MemoryStore, cluster: tuple[Scheduler, ClaimLifecycle]
) -> None:
    scheduler, lifecycle = cluster
    big = compile_class("big-gpu", SELECTOR)
    big["spec"]["extendedResourceName"] = "example.com/gpu"
    await store.create(big)
    wire = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "legacy", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "app", "resources": {"limits": {"example.com/gpu": "2"}}}]},
    }
    await store.create(wire)
    await settle(store, scheduler, lifecycle)
    # no node offers example.com/gpu and no node has two big GPUs: pending, with the allocator's reason
    legacy = await store.get("Pod", "legacy", "default")
    assert "nodeName" not in legacy["spec"]
    condition = scheduled(legacy)
    assert condition is not None
    assert condition["message"].startswith("0/4 nodes are available: ")
    assert "request container-0-request-0" in condition["message"]
    await store.delete("Pod", "legacy", "default")
    wire["metadata"]["name"] = "legacy-one"
    wire["spec"]["containers"][0]["resources"] = {"requests": {"example.com/gpu": "1"}}
    await store.create(wire)
    await settle(store, scheduler, lifecycle)
    pod_one = await store.get("Pod", "legacy-one", "default")
    assert pod_one["spec"]["nodeName"] in ("node-c", "node-d")
    status = pod_one["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [
        {"containerName": "main", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"}
    ]
    made = await store.get("ResourceClaim", status["resourceClaimName"], "default")
    assert made["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert made["metadata"]["ownerReferences"][0]["uid"] == pod_one["metadata"]["uid"]
    assert made["spec"]["devices"]["requests"] == [
        {
            "name": "container-0-request-0",
            "exactly": {"deviceClassName": "big-gpu", "allocationMode": "ExactCount", "count": 1},
        }
    ]
    [result] = made["status"]["allocation"]["devices"]["results"]
    assert GPUS[result["device"]][0] == pod_one["spec"]["nodeName"]
    assert [e["name"] for e in made["status"]["reservedFor"]] == ["legacy-one"]
    # the pod goes: its claim goes with it and the device is free again
    await store.delete("Pod", "legacy-one", "default")
    await settle(store, scheduler, lifecycle)
    names = {c["metadata"]["name"] for c in (await store.list("ResourceClaim", "default")).items}
    assert status["resourceClaimName"] not in names
    assert set((await store.get("Instance", result["device"], "default"))["spec"]["deviceUsage"].values()) == {""}


async def test_an_extended_resource_a_node_offers_goes_through_its_device_plugin_without_a_claim(
    store: MemoryStore, cluster: tuple[Scheduler, ClaimLifecycle]
) -> None:
    scheduler, lifecycle = cluster
    big = compile_class("big-gpu", SELECTOR)
    big["spec"]["extendedResourceName"] = "example.com/gpu"
    await store.create(big)
    offered = await store.get("Node", "node-a")
    offered["status"]["allocatable"]["example.com/gpu"] = "1"
    await store.update(offered)
    await store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "plugin", "namespace": "default"},
            "spec": {
                "containers": [{"name": "main", "image": "app", "resources": {"requests": {"example.com/gpu": "1"}}}],
                "nodeSelector": {"kubernetes.io/hostname": "node-a"},
            },
        }
    )
    await settle(store, scheduler, lifecycle)
    plugin = await store.get("Pod", "plugin", "default")
    assert plugin["spec"]["nodeName"] == "node-a"  # node-a's GPU is 16G: only its device plugin serves the pod
    assert "extendedResourceClaimStatus" not in plugin.get("status", {})
    assert (await store.list("ResourceClaim", "default")).items == []


def node_offering_cams() -> dict[str, Any]:
    """node-a, its kubelet advertising the two slots of Instance `cam` as its Instance-level resource."""
    allocatable = {**node_object("node-a")["status"]["allocatable"], "devplace.io/cam": "2"}
    return {**node_object("node-a"), "status": {"allocatable": allocatable}}


async def seed_cam_and_claim_one(store: Store) -> None:
    """Instance `cam` (2 slots) on node-a, which advertises it; its slice, DeviceClass `cams`, and claim `one` of it."""
    await store.create(normalize(GPU_CONFIGURATION))
    await store.create(node_offering_cams())
    await store.create(gpu_instance_object("cam", "node-a", "1G", capacity=2))
    await store.create(two_slot_slice(False))
    await store.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "cams"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "devplace.io"'}}]},
        }
    )
    await store.create(
        {**claim("one"), "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "cams"}}]}}}
    )


def cam_pod(name: str, node: str | None = None) -> dict[str, Any]:
    """A pod asking `cam`'s Instance-level resource directly (bound to `node` when given)."""
    asks = {"devplace.io/cam": "1"}
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "app", "resources": {"requests": asks, "limits": asks}}]
    }
    if node is not None:
        spec["nodeName"] = node
    return {**claim_pod_object(name), "spec": spec}


class WriteOrder(DelegatingStore):
    """The store, recording every Instance slot write and Pod binding in the order they land."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.writes: list[str] = []

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        out = await self.inner.update(obj)
        name = obj["metadata"]["name"]
        if obj.get("kind") == "Instance":
            self.writes.append(f"slots {name}: {sorted(h for h in obj['spec']['deviceUsage'].values() if h)}")
        elif obj.get("kind") == "Pod" and (obj.get("spec") or {}).get("nodeName"):
            self.writes.append(f"bind {name}")
        return out


async def test_a_burst_takes_its_claims_slots_before_it_binds_a_device_path_pod_to_the_same_device(
    store: MemoryStore, clock: FakeClock
) -> None:
    """A pod asking the Instance-level resource and a pod with a claim on the same device, decided in one burst: the
    claim's slot is in the Instance before the device-path pod is bound, so the kubelet that admits that pod (its
    preference read from the store) cannot pick the slot the claim took."""
    await seed_cam_and_claim_one(store)
    await store.create(cam_pod("a-plain"))
    await store.create(claim_pod_object("b-claim", claim_name="one"))
    recorder = WriteOrder(store)
    scheduler = Scheduler(recorder, clock)
    await scheduler.start()
    try:
        await settle(store, scheduler)
    finally:
        await scheduler.stop()
    assert recorder.writes == ["slots cam: ['D:default/one:node-a']", "bind b-claim", "bind a-plain"]


async def test_dra_takes_no_slot_of_a_device_while_a_device_path_pod_asking_it_is_being_admitted(
    store: MemoryStore, clock: FakeClock
) -> None:
    """A pod asking the Instance-level resource is bound to node-a, not yet admitted: its kubelet picks its slot from a
    device list that may still show a slot free which a claim would take. DRA waits until the kubelet has decided
    (the pod Running), then takes a free slot."""
    await seed_cam_and_claim_one(store)
    plain = await store.create(cam_pod("a-plain", node="node-a"))
    await store.create(claim_pod_object("b-claim", claim_name="one"))
    scheduler = Scheduler(store, clock)
    await scheduler.start()
    try:
        await settle(store, scheduler)
        waiting = await store.get("Pod", "b-claim", "default")
        assert "nodeName" not in waiting["spec"]
        assert "allocation" not in ((await store.get("ResourceClaim", "one", "default")).get("status") or {})
        await store.update({**plain, "status": {"phase": "Running"}})
        await settle(store, scheduler)
        assert (await store.get("Pod", "b-claim", "default"))["spec"]["nodeName"] == "node-a"
        usage = (await store.get("Instance", "cam", "default"))["spec"]["deviceUsage"]
        assert sorted(usage.values()) == ["", "D:default/one:node-a"]
    finally:
        await scheduler.stop()
