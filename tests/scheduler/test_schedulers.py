"""The scheduler's shell against a real MemoryStore and a FakeClock: seed 003's user story up to binding, bursts,
reasons, retries, restarts and class status."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from devplace.clocks import FakeClock
from devplace.scheduler import _schedulers as schedulers
from devplace.scheduler._decisions import NodeVerdict
from devplace.scheduler._schedulers import Scheduler
from devplace.store import MemoryStore, Store, open_store
from tests.scheduler.builders import SEED_CLASSES

HIGH = "nvidia.high.mem"
ANNOTATION = "scheduler.alpha.kubernetes.io/resClass_"


# -- wire objects ------------------------------------------------------------------------------------------------


def configuration(name: str = "gpus", kind: str = "nvidia-gpu") -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"discoveryHandler": {"name": "udev"}, "deviceKind": kind, "capacity": 1},
    }


def instance(
    name: str, nodes: list[str], memory: str = "32G", *, capacity: int = 1, held: int = 0, configuration: str = "gpus"
) -> dict[str, Any]:
    usage = {f"{name}-{i}": (nodes[0] if i < held else "") for i in range(capacity)}
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "configurationName": configuration,
            "capacity": capacity,
            "shared": len(nodes) > 1,
            "nodes": nodes,
            "deviceUsage": usage,
            "brokerProperties": {"memory": memory},
        },
    }


def node(
    name: str, cpu: str = "8", memory: str = "32Gi", *, devices: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """A Node; `devices` (Instance -> Healthy slots) are the Instance-level resources its kubelet advertises."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    allocatable.update({f"devplace.io/{d}": str(n) for d, n in (devices or {}).items()})
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": allocatable}}


async def advertise(store: Store, name: str, devices: Mapping[str, int]) -> None:
    """What a kubelet does when a device plugin registers or sends ListAndWatch: the Node's allocatable follows."""
    current = await store.get("Node", name)
    allocatable = {k: v for k, v in current["status"]["allocatable"].items() if not k.startswith("devplace.io/")}
    allocatable.update({f"devplace.io/{d}": str(n) for d, n in devices.items()})
    await store.update({**current, "status": {**current["status"], "allocatable": allocatable}})


def resource_class(name: str, strategy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = dict(SEED_CLASSES[name])
    if strategy is not None:
        spec["selectionStrategy"] = strategy
    return {"apiVersion": "devplace.io/v1alpha1", "kind": "ResourceClass", "metadata": {"name": name}, "spec": spec}


def pod(
    name: str,
    classes: Mapping[str, int] | None = None,
    *,
    cpu: str | None = None,
    node_name: str | None = None,
    scheduler_name: str | None = None,
) -> dict[str, Any]:
    requests: dict[str, str] = {f"rc.devplace.io/{c}": str(n) for c, n in (classes or {}).items()}
    if cpu is not None:
        requests["cpu"] = cpu
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "app", "resources": {"requests": requests}}]}
    if node_name is not None:
        spec["nodeName"] = node_name
    if scheduler_name is not None:
        spec["schedulerName"] = scheduler_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


# -- harness -----------------------------------------------------------------------------------------------------


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[MemoryStore]:
    s = MemoryStore(clock=clock)
    yield s
    await s.close()


async def settle(scheduler: Scheduler, store: Store) -> None:
    """Yield to the event loop until the scheduler is idle and the store stops moving (no time passes)."""
    async with asyncio.timeout(30):  # a safety net against a hang, not a timing assertion
        while True:
            if scheduler.is_idle():
                revision = await store.revision()
                for _ in range(30):
                    await asyncio.sleep(0)
                if scheduler.is_idle() and await store.revision() == revision:
                    return
            else:
                await asyncio.sleep(0)


async def running(store: Store, clock: FakeClock, **kwargs: Any) -> Scheduler:
    scheduler = Scheduler(store, clock, **kwargs)
    await scheduler.start()
    await settle(scheduler, store)
    return scheduler


async def create(store: Store, *objs: dict[str, Any]) -> None:
    for obj in objs:
        await store.create(obj)


async def get_pod(store: Store, name: str) -> dict[str, Any]:
    return await store.get("Pod", name, "default")


def bound(p: Mapping[str, Any]) -> tuple[str | None, dict[str, str]]:
    """(node, the binding annotations) of a pod."""
    annotations = (p.get("metadata") or {}).get("annotations") or {}
    return (p["spec"].get("nodeName"), {k: v for k, v in annotations.items() if k.startswith(ANNOTATION)})


def scheduled(p: Mapping[str, Any]) -> dict[str, Any] | None:
    """The PodScheduled condition without its timestamp."""
    for condition in (p.get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodScheduled":
            return {k: v for k, v in condition.items() if k != "lastTransitionTime"}
    return None


async def class_status(store: Store, name: str) -> Any:
    return (await store.get("ResourceClass", name)).get("status")


def pending(message: str) -> dict[str, Any]:
    return {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}


# -- seed 003 ----------------------------------------------------------------------------------------------------


async def test_seed_003_user_story_binds_the_pod_to_a_high_memory_gpu_and_class_status_follows(
    store: MemoryStore, clock: FakeClock
) -> None:
    await create(
        store,
        configuration(),
        node("node-a", devices={"gpus-aaaaaa": 1}),
        node("node-b", devices={"gpus-bbbbbb": 1}),
        instance("gpus-aaaaaa", ["node-a"], memory="16G"),
        instance("gpus-bbbbbb", ["node-b"], memory="32G"),
        resource_class(HIGH),
        resource_class("fast.nic"),
    )
    scheduler = await running(store, clock)
    try:
        assert await class_status(store, HIGH) == {"allocatable": "1", "requested": "0"}
        assert await class_status(store, "fast.nic") == {"allocatable": "0", "requested": "0"}

        await create(store, pod("trainer", {HIGH: 1}))
        await settle(scheduler, store)
        trainer = await get_pod(store, "trainer")
        assert bound(trainer) == ("node-b", {f"{ANNOTATION}nvidia.high.mem_gpus-bbbbbb": "1"})
        assert scheduled(trainer) == {"type": "PodScheduled", "status": "True"}
        assert await class_status(store, HIGH) == {"allocatable": "1", "requested": "1"}

        await store.delete("Pod", "trainer", "default")
        await settle(scheduler, store)
        assert await class_status(store, HIGH) == {"allocatable": "1", "requested": "0"}
    finally:
        await scheduler.stop()


async def test_class_status_follows_instances_their_held_slots_and_nodes(store: MemoryStore, clock: FakeClock) -> None:
    await create(store, configuration(), node("node-a"), resource_class(HIGH))
    scheduler = await running(store, clock)
    try:
        assert await class_status(store, HIGH) == {"allocatable": "0", "requested": "0"}
        await create(store, instance("gpus-aaaaaa", ["node-a"], capacity=4, held=1))
        await settle(scheduler, store)
        assert await class_status(store, HIGH) == {"allocatable": "4", "requested": "1"}
        await create(store, instance("gpus-cccccc", ["node-c"], capacity=2))  # node-c is not a known node yet
        await settle(scheduler, store)
        assert await class_status(store, HIGH) == {"allocatable": "4", "requested": "1"}
        await create(store, node("node-c"))
        await settle(scheduler, store)
        assert await class_status(store, HIGH) == {"allocatable": "6", "requested": "1"}
        await store.delete("Node", "node-a")
        await settle(scheduler, store)
        assert await class_status(store, HIGH) == {"allocatable": "2", "requested": "0"}
        writes = scheduler.writes
        node_c = await store.get("Node", "node-c")
        node_c["metadata"]["labels"] = {"zone": "b"}
        await store.update(node_c)
        await settle(scheduler, store)
        assert scheduler.writes == writes  # unchanged status: not written again
    finally:
        await scheduler.stop()


# -- bursts, strategies, races -------------------------------------------------------------------------------------


async def gpu_cluster(store: Store, nodes: int, per_node: int) -> None:
    await create(store, configuration(), resource_class(HIGH))
    for n in range(nodes):
        await create(store, node(f"node-{n}", devices={f"gpus-{n}{i}": 1 for i in range(per_node)}))
        for i in range(per_node):
            await create(store, instance(f"gpus-{n}{i}", [f"node-{n}"]))


async def test_a_queue_longer_than_the_burst_limit_is_decided_in_bursts_highest_priority_first(
    store: MemoryStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schedulers, "BURST_LIMIT", 3)
    await gpu_cluster(store, 2, 2)  # 4 GPUs for 7 pods: the 4 of highest priority must get them
    priorities = {"p0": 1, "p1": 5, "p2": 3, "p3": 9, "p4": 2, "p5": 7, "p6": 0}
    for name, priority in priorities.items():
        body = pod(name, {HIGH: 1})
        body["spec"]["priority"] = priority
        await create(store, body)
    scheduler = await running(store, clock)
    try:
        assert scheduler.bursts == 3  # 3 + 3 + 1
        placed = {name for name in priorities if bound(await get_pod(store, name))[0] is not None}
        assert placed == {"p3", "p5", "p1", "p2"}
    finally:
        await scheduler.stop()


async def test_a_burst_of_pods_is_decided_over_one_snapshot_and_never_double_books(
    store: MemoryStore, clock: FakeClock
) -> None:
    await gpu_cluster(store, 3, 2)
    await create(store, *(pod(f"p{i}", {HIGH: 1}) for i in range(8)))
    scheduler = await running(store, clock)
    try:
        assert scheduler.bursts == 1
        placed = {f"p{i}": bound(await get_pod(store, f"p{i}")) for i in range(8)}
        assert placed == {
            "p0": ("node-0", {f"{ANNOTATION}{HIGH}_gpus-00": "1"}),
            "p1": ("node-0", {f"{ANNOTATION}{HIGH}_gpus-01": "1"}),
            "p2": ("node-1", {f"{ANNOTATION}{HIGH}_gpus-10": "1"}),
            "p3": ("node-1", {f"{ANNOTATION}{HIGH}_gpus-11": "1"}),
            "p4": ("node-2", {f"{ANNOTATION}{HIGH}_gpus-20": "1"}),
            "p5": ("node-2", {f"{ANNOTATION}{HIGH}_gpus-21": "1"}),
            "p6": (None, {}),
            "p7": (None, {}),
        }
        message = "0/3 nodes are available: 3 insufficient devices for class nvidia.high.mem: want 1, 0 free."
        assert scheduled(await get_pod(store, "p7")) == pending(message)
        assert await class_status(store, HIGH) == {"allocatable": "6", "requested": "6"}
    finally:
        await scheduler.stop()


async def test_a_class_selection_strategy_overrides_the_schedulers_default(
    store: MemoryStore, clock: FakeClock
) -> None:
    await create(store, configuration(), resource_class(HIGH, strategy="spread"))
    for n in range(2):
        devices = {f"gpus-{n}{i}": 1 for i in range(2)}
        await create(store, node(f"node-{n}", devices=devices), *(instance(d, [f"node-{n}"]) for d in devices))
    await create(store, pod("p0", {HIGH: 1}), pod("p1", {HIGH: 1}))
    scheduler = await running(store, clock, strategy="firstFit")
    try:
        assert [bound(await get_pod(store, p))[0] for p in ("p0", "p1")] == ["node-0", "node-1"]
    finally:
        await scheduler.stop()


async def test_two_pods_racing_for_the_last_device_one_is_bound_the_other_pending_with_the_reason(
    store: MemoryStore, clock: FakeClock
) -> None:
    await gpu_cluster(store, 1, 1)
    await create(store, pod("a", {HIGH: 1}), pod("b", {HIGH: 1}))
    scheduler = await running(store, clock)
    try:
        assert bound(await get_pod(store, "a")) == ("node-0", {f"{ANNOTATION}{HIGH}_gpus-00": "1"})
        b = await get_pod(store, "b")
        assert bound(b) == (None, {})
        message = "0/1 nodes are available: 1 insufficient devices for class nvidia.high.mem: want 1, 0 free."
        assert scheduled(b) == pending(message)
        # the device's slot is claimed by the kubelet later: the pod's binding and the held slot are counted once
        gpu = await store.get("Instance", "gpus-00", "default")
        gpu["spec"]["deviceUsage"] = {"gpus-00-0": "node-0"}
        await store.update(gpu)
        await settle(scheduler, store)
        assert bound(await get_pod(store, "b")) == (None, {})
        assert scheduled(await get_pod(store, "b")) == pending(message)  # decided again: still none free
        assert await class_status(store, HIGH) == {"allocatable": "1", "requested": "1"}
    finally:
        await scheduler.stop()


# -- reasons -------------------------------------------------------------------------------------------------------


async def test_an_unschedulable_pod_says_why_per_node_and_is_not_rewritten_when_nothing_changed(
    store: MemoryStore, clock: FakeClock
) -> None:
    await create(store, configuration(), resource_class(HIGH))
    for i in range(5):
        await create(store, node(f"cpu-{i:02d}", cpu="1"))
    for i in range(7):
        gpu = f"gpus-{i:02d}"
        await create(store, node(f"gpu-{i:02d}", devices={gpu: 1}), instance(gpu, [f"gpu-{i:02d}"], memory="16G"))
    await create(store, pod("p", {HIGH: 1}, cpu="2"))
    scheduler = await running(store, clock)
    try:
        p = await get_pod(store, "p")
        message = "0/12 nodes are available: 7 no device matches class nvidia.high.mem, 5 insufficient cpu."
        assert scheduled(p) == pending(message)
        assert scheduler.explain("default/p") == [
            *(NodeVerdict(f"cpu-{i:02d}", "insufficient cpu") for i in range(5)),
            *(NodeVerdict(f"gpu-{i:02d}", "no device matches class nvidia.high.mem") for i in range(7)),
        ]
        await create(store, instance("gpus-99", ["gpu-00"], memory="8G"))  # retried, same verdict: no write
        await settle(scheduler, store)
        assert (await get_pod(store, "p"))["metadata"]["resourceVersion"] == p["metadata"]["resourceVersion"]
    finally:
        await scheduler.stop()


async def test_a_pod_asking_for_a_class_that_does_not_exist_is_pending_until_the_class_is_created(
    store: MemoryStore, clock: FakeClock
) -> None:
    await create(
        store, configuration(), node("node-a", devices={"gpus-aaaaaa": 1}), instance("gpus-aaaaaa", ["node-a"])
    )
    await create(store, pod("p", {HIGH: 1}))
    scheduler = await running(store, clock)
    try:
        assert scheduled(await get_pod(store, "p")) == pending('resource class "nvidia.high.mem" not found')
        assert scheduler.explain("default/p") == [NodeVerdict("node-a", 'resource class "nvidia.high.mem" not found')]
        await create(store, resource_class(HIGH))
        await settle(scheduler, store)
        p = await get_pod(store, "p")
        assert bound(p) == ("node-a", {f"{ANNOTATION}{HIGH}_gpus-aaaaaa": "1"})
        assert scheduled(p) == {"type": "PodScheduled", "status": "True"}
    finally:
        await scheduler.stop()


async def test_a_pending_pod_is_scheduled_when_a_device_appears(store: MemoryStore, clock: FakeClock) -> None:
    await create(store, configuration(), resource_class(HIGH), node("node-a"))
    await create(store, pod("p", {HIGH: 1}))
    scheduler = await running(store, clock)
    try:
        message = "0/1 nodes are available: 1 no device matches class nvidia.high.mem."
        assert scheduled(await get_pod(store, "p")) == pending(message)
        await create(store, instance("gpus-aaaaaa", ["node-a"]))
        await advertise(store, "node-a", {"gpus-aaaaaa": 1})
        await settle(scheduler, store)
        assert bound(await get_pod(store, "p")) == ("node-a", {f"{ANNOTATION}{HIGH}_gpus-aaaaaa": "1"})
    finally:
        await scheduler.stop()


async def test_a_pending_pod_is_scheduled_when_a_bound_pod_goes(store: MemoryStore, clock: FakeClock) -> None:
    await gpu_cluster(store, 1, 1)
    await create(store, pod("first", {HIGH: 1}))
    scheduler = await running(store, clock)
    try:
        await create(store, pod("second", {HIGH: 1}))
        await settle(scheduler, store)
        assert bound(await get_pod(store, "second")) == (None, {})
        await store.delete("Pod", "first", "default")
        await settle(scheduler, store)
        assert bound(await get_pod(store, "second")) == ("node-0", {f"{ANNOTATION}{HIGH}_gpus-00": "1"})
    finally:
        await scheduler.stop()


async def test_pods_bound_already_or_meant_for_another_scheduler_are_left_alone(
    store: MemoryStore, clock: FakeClock
) -> None:
    await gpu_cluster(store, 1, 2)
    await create(
        store,
        pod("pinned", {HIGH: 1}, node_name="node-0"),
        pod("theirs", {HIGH: 1}, scheduler_name="default-scheduler"),
        pod("mine", {HIGH: 1}, scheduler_name="devplace-scheduler"),
    )
    before = {p: await get_pod(store, p) for p in ("pinned", "theirs")}
    scheduler = await running(store, clock)
    try:
        assert {p: await get_pod(store, p) for p in ("pinned", "theirs")} == before
        assert bound(await get_pod(store, "mine")) == ("node-0", {f"{ANNOTATION}{HIGH}_gpus-00": "1"})
    finally:
        await scheduler.stop()


# -- restarts ------------------------------------------------------------------------------------------------------


async def test_a_restarted_scheduler_counts_the_bindings_made_before_it_and_never_double_books(
    store: MemoryStore, clock: FakeClock
) -> None:
    await gpu_cluster(store, 1, 2)
    await create(store, pod("p0", {HIGH: 1}))
    first = await running(store, clock)
    await first.stop()
    p0 = await get_pod(store, "p0")
    assert bound(p0) == ("node-0", {f"{ANNOTATION}{HIGH}_gpus-00": "1"})
    await create(store, pod("p1", {HIGH: 1}), pod("p2", {HIGH: 1}))  # no kubelet claimed gpus-00's slot yet
    second = await running(store, clock)
    try:
        assert await get_pod(store, "p0") == p0
        assert bound(await get_pod(store, "p1")) == ("node-0", {f"{ANNOTATION}{HIGH}_gpus-01": "1"})
        message = "0/1 nodes are available: 1 insufficient devices for class nvidia.high.mem: want 1, 0 free."
        assert scheduled(await get_pod(store, "p2")) == pending(message)
    finally:
        await second.stop()


async def test_over_sqlite_a_burst_binds_each_device_once_and_class_status_counts_them(
    clock: FakeClock, tmp_path: Path
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'devplace.db'}", clock=clock)
    try:
        await gpu_cluster(store, 2, 1)
        await create(store, *(pod(f"p{i}", {HIGH: 1}) for i in range(3)))
        scheduler = await running(store, clock)
        try:
            assert [bound(await get_pod(store, f"p{i}")) for i in range(3)] == [
                ("node-0", {f"{ANNOTATION}{HIGH}_gpus-00": "1"}),
                ("node-1", {f"{ANNOTATION}{HIGH}_gpus-10": "1"}),
                (None, {}),
            ]
            assert await class_status(store, HIGH) == {"allocatable": "2", "requested": "2"}
        finally:
            await scheduler.stop()
    finally:
        await store.close()


# -- devices a node offers (issue #25 item 5) ----------------------------------------------------------------------


async def test_a_device_whose_plugin_the_node_does_not_advertise_yet_is_not_chosen_and_the_pod_waits_for_it(
    store: MemoryStore, clock: FakeClock
) -> None:
    await create(store, configuration(), resource_class(HIGH), node("node-a"), instance("gpus-aaaaaa", ["node-a"]))
    await create(store, pod("p", {HIGH: 1}))
    scheduler = await running(store, clock)
    try:
        waiting = pending(
            "0/1 nodes are available: 1 insufficient devices for class nvidia.high.mem: want 1, 0 free, "
            "1 not in the node's allocatable."
        )
        assert bound(await get_pod(store, "p")) == (None, {})
        assert scheduled(await get_pod(store, "p")) == waiting
        await advertise(store, "node-a", {"gpus-aaaaaa": 0})  # the plugin registered, nothing Healthy yet
        await settle(scheduler, store)
        assert bound(await get_pod(store, "p")) == (None, {})
        assert scheduled(await get_pod(store, "p")) == waiting
        await advertise(store, "node-a", {"gpus-aaaaaa": 1})  # its ListAndWatch: the Node's allocatable changed
        await settle(scheduler, store)
        assert bound(await get_pod(store, "p")) == ("node-a", {f"{ANNOTATION}{HIGH}_gpus-aaaaaa": "1"})
    finally:
        await scheduler.stop()


async def test_a_node_offering_fewer_slots_than_the_instance_has_free_takes_only_as_many_pods(
    store: MemoryStore, clock: FakeClock
) -> None:
    await create(
        store,
        configuration(),
        resource_class(HIGH),
        node("node-a", devices={"gpus-aaaaaa": 1}),  # its kubelet has not caught up with the two freed slots
        instance("gpus-aaaaaa", ["node-a"], capacity=3),
        pod("p0", {HIGH: 1}),
        pod("p1", {HIGH: 1}),
    )
    scheduler = await running(store, clock)
    try:
        assert bound(await get_pod(store, "p0")) == ("node-a", {f"{ANNOTATION}{HIGH}_gpus-aaaaaa": "1"})
        assert bound(await get_pod(store, "p1")) == (None, {})
        message = "0/1 nodes are available: 1 insufficient devices for class nvidia.high.mem: want 1, 0 free."
        assert scheduled(await get_pod(store, "p1")) == pending(message)
        await advertise(store, "node-a", {"gpus-aaaaaa": 3})
        await settle(scheduler, store)
        assert bound(await get_pod(store, "p1")) == ("node-a", {f"{ANNOTATION}{HIGH}_gpus-aaaaaa": "1"})
    finally:
        await scheduler.stop()


async def test_a_pod_requesting_the_instance_resource_directly_counts_against_what_its_node_offers(
    store: MemoryStore, clock: FakeClock
) -> None:
    broker = pod("broker", node_name="node-a")
    broker["spec"]["containers"][0]["resources"] = {"limits": {"devplace.io/gpus-aaaaaa": "1"}}
    await create(
        store,
        configuration(),
        resource_class(HIGH),
        node("node-a", devices={"gpus-aaaaaa": 1}),
        instance("gpus-aaaaaa", ["node-a"], capacity=2),
        broker,  # bound, not yet admitted: the Instance shows both slots free
        pod("p", {HIGH: 1}),
    )
    scheduler = await running(store, clock)
    try:
        assert bound(await get_pod(store, "p")) == (None, {})
        message = (
            "0/1 nodes are available: 1 insufficient devices for class nvidia.high.mem: want 1, 0 free, "
            "1 not in the node's allocatable."
        )
        assert scheduled(await get_pod(store, "p")) == pending(message)
    finally:
        await scheduler.stop()


# -- taints and tolerations (issue #25 item 6) ---------------------------------------------------------------------


async def test_taints_cordons_and_unready_nodes_refuse_a_pod_with_kubernetes_reasons_until_it_tolerates_them(
    store: MemoryStore, clock: FakeClock
) -> None:
    gpu_node = node("gpu-node", devices={"gpus-aaaaaa": 1})
    gpu_node["spec"] = {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}
    cordoned = node("cordoned", devices={"gpus-bbbbbb": 1})
    cordoned["spec"] = {"unschedulable": True}
    unready = node("unready", devices={"gpus-cccccc": 1})
    unready["status"]["conditions"] = [{"type": "Ready", "status": "False"}]  # no lifecycle controller tainted it
    await create(
        store,
        configuration(),
        resource_class(HIGH),
        gpu_node,
        cordoned,
        unready,
        instance("gpus-aaaaaa", ["gpu-node"]),
        instance("gpus-bbbbbb", ["cordoned"]),
        instance("gpus-cccccc", ["unready"]),
        pod("p", {HIGH: 1}),
    )
    scheduler = await running(store, clock)
    try:
        message = (
            "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
            "1 node(s) had untolerated taint {nvidia.com/gpu: }, 1 node(s) were unschedulable."
        )
        assert scheduled(await get_pod(store, "p")) == pending(message)
        p = await get_pod(store, "p")
        p["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        await store.update(p)
        await settle(scheduler, store)
        assert bound(await get_pod(store, "p")) == ("gpu-node", {f"{ANNOTATION}{HIGH}_gpus-aaaaaa": "1"})
    finally:
        await scheduler.stop()


async def test_a_pod_tolerating_the_unschedulable_taint_may_go_to_a_cordoned_node(
    store: MemoryStore, clock: FakeClock
) -> None:
    cordoned = node("cordoned", devices={"gpus-bbbbbb": 1})
    cordoned["spec"] = {"unschedulable": True}
    tolerant = pod("p", {HIGH: 1})
    tolerant["spec"]["tolerations"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    await create(
        store, configuration(), resource_class(HIGH), cordoned, instance("gpus-bbbbbb", ["cordoned"]), tolerant
    )
    scheduler = await running(store, clock)
    try:
        assert bound(await get_pod(store, "p")) == ("cordoned", {f"{ANNOTATION}{HIGH}_gpus-bbbbbb": "1"})
    finally:
        await scheduler.stop()
