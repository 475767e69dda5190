"""Scheduler decision-core benchmark: pods/s per device-selection strategy, cpu/memory pods/s, placement quality, and
the cost of refusing an impossible request. Pure data (no store, no I/O), as the scheduler's shell would call it.

Workloads (full / `--quick`):
- `devices`: 500 nodes x 10 GPUs (capacity 1; 32Gi or 80Gi), 5,000 pods asking one device of `nvidia.high.mem`
  (seed 003: memory GtEq 30G) or `gpu.80g` (memory GtEq 80Gi) plus 100m cpu / 128Mi: `schedule_one` then `assume`,
  pod after pod, per class strategy (firstFit, binpack, spread, optimal). Goal >= 500 pods/s. Also reported:
  the same with every node evaluated (`percentage_of_nodes_to_score=100`), and `place_batch(optimal)` on the whole
  batch (one max flow).
- `cpu_memory`: 5,000 nodes, 10,000 pods with cpu/memory requests only. Goal >= 1,000 pods/s.
- `quality`: 100 generated fragmented workloads (small clusters, slots partly held, overlapping classes, pods limited
  to random node subsets, some asking 2 devices): per strategy, pods placed / pods placed by `optimal`.
- `no_solution`: a pod asking 11 devices on 500 nodes of 10: time of the whole refusal divided by the nodes (goal
  < 10 ms per node; DRA's allocator is D!/(D-k)! here, kubernetes#131730), and devices examined per node.
- `shell` (through the store): the same device workload (and a cpu/memory one) through `Scheduler` over a
  `MemoryStore`, each Node advertising its GPUs' Instance-level resources as kubelets do: pods created first, then
  the scheduler started, timed until every pod is bound and the scheduler idle (informer listing, decisions, one Pod
  CAS per binding, class status). Reported with the cost of the raw store write it must do per pod (a Pod update)
  measured in the same run, and the ratio between the two.
Context (published, other machines): kube-scheduler CI floors 680 pods/s (5,000 nodes, basic) and 40-51 pods/s
(DRA, 500 nodes x 10 devices). Figures here are measured in-process on one core; nothing asserts a time.
"""

from __future__ import annotations

import asyncio
import gc
import random
import statistics
import time
from typing import Any

from devplace.scheduler._assumptions import Assumed
from devplace.scheduler._classes import STRATEGIES, Strategy, resolve_classes
from devplace.scheduler._decisions import Binding, Config, Snapshot, schedule_burst, schedule_one
from devplace.scheduler._devices import Device, device_of
from devplace.scheduler._nodes import NodeInfo, Resources
from devplace.scheduler._pods import PodInfo
from devplace.scheduler._selection import BatchPod, DeviceIndex, place_batch, select_devices

__all__ = ["run"]

STRATEGY_NAMES: tuple[str, ...] = STRATEGIES

GI = 2**30
CLASSES = {
    "nvidia.high.mem": {
        "resourceSelector": [
            {
                "matchExpressions": [
                    {"key": "Kind", "operator": "In", "values": ["nvidia-gpu"]},
                    {"key": "memory", "operator": "GtEq", "values": ["30G"]},
                ]
            }
        ]
    },
    "gpu.80g": {
        "resourceSelector": [{"matchExpressions": [{"key": "memory", "operator": "GtEq", "values": ["80Gi"]}]}]
    },
    "any.gpu": {"resourceSelector": [{"classRef": "nvidia.high.mem"}, {"classRef": "gpu.80g"}]},
}


def _device(name: str, nodes: list[str], capacity: int, held: int, memory: str) -> Device:
    usage = {f"{name}-{i}": ("x" if i < held else "") for i in range(capacity)}
    return device_of(
        {
            "metadata": {"name": name},
            "spec": {
                "configurationName": "gpus",
                "capacity": capacity,
                "shared": len(nodes) > 1,
                "nodes": nodes,
                "deviceUsage": usage,
                "brokerProperties": {"memory": memory},
            },
        },
        handler_name="nvidia-gpu",
    )


def _node(name: str, cpu: int, memory_gi: int) -> NodeInfo:
    return NodeInfo(name, {"zone": f"z{hash(name) % 3}"}, Resources(cpu * 1000, memory_gi * GI, 110))


def _classes(strategy: Strategy) -> Any:
    return resolve_classes({n: {**spec, "selectionStrategy": strategy} for n, spec in CLASSES.items()})


def _timed_burst(pods: list[PodInfo], cluster: Snapshot, config: Config) -> tuple[float, float, list[Any]]:
    gc.collect()
    gc.freeze()
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        decisions = schedule_burst(pods, cluster, Assumed(), config)
        return time.perf_counter() - t0, time.process_time() - c0, decisions
    finally:
        gc.unfreeze()


def _device_bench(rng: random.Random, nodes: int, pods: int) -> dict[str, Any]:
    names = [f"node-{n:04d}" for n in range(nodes)]
    node_infos = [_node(name, 32, 128) for name in names]
    devices = [
        _device(f"gpu-{n:04d}-{i}", [name], 1, 0, rng.choice(["32Gi", "32Gi", "80Gi"]))
        for n, name in enumerate(names)
        for i in range(10)
    ]
    wanted = [
        PodInfo(
            f"p{i:05d}",
            requests=Resources(100, 128 * 2**20, 1),
            classes={"gpu.80g" if rng.random() < 0.25 else "nvidia.high.mem": 1},
        )
        for i in range(pods)
    ]
    out: dict[str, Any] = {"nodes": nodes, "devices": len(devices), "pods": pods}
    for strategy in STRATEGIES:
        cluster = Snapshot.build(node_infos, devices, _classes(strategy))
        wall, cpu, decisions = _timed_burst(wanted, cluster, Config())
        bound = sum(1 for d in decisions if isinstance(d, Binding))
        out[strategy] = {
            "pods_per_s": round(pods / wall, 1),
            "pods_per_cpu_s": round(pods / cpu, 1),
            "ms_per_pod": round(wall * 1000 / pods, 3),
            "bound": bound,
            "unschedulable": pods - bound,
        }
    cluster = Snapshot.build(node_infos, devices, _classes("firstFit"))
    wall, _, decisions = _timed_burst(wanted, cluster, Config(percentage_of_nodes_to_score=100))
    out["firstFit_all_nodes"] = {
        "pods_per_s": round(pods / wall, 1),
        "bound": sum(1 for d in decisions if isinstance(d, Binding)),
    }
    batch = [BatchPod(p.key, dict(p.classes), tuple(names)) for p in wanted]
    t0 = time.perf_counter()
    result = place_batch(batch, cluster.devices, "optimal")
    wall = time.perf_counter() - t0
    out["optimal_batch"] = {"pods_per_s": round(pods / wall, 1), "placed": result.count}
    return out


def _cpu_memory_bench(rng: random.Random, nodes: int, pods: int) -> dict[str, Any]:
    node_infos = [
        _node(f"node-{n:05d}", rng.choice([8, 16, 32, 64]), rng.choice([32, 64, 128, 256])) for n in range(nodes)
    ]
    cluster = Snapshot.build(node_infos, [], {})
    wanted = [
        PodInfo(
            f"p{i:05d}", requests=Resources(rng.choice([100, 250, 500, 1000]), rng.choice([128, 256, 512]) * 2**20, 1)
        )
        for i in range(pods)
    ]
    wall, cpu, decisions = _timed_burst(wanted, cluster, Config())
    bound = sum(1 for d in decisions if isinstance(d, Binding))
    return {
        "nodes": nodes,
        "pods": pods,
        "pods_per_s": round(pods / wall, 1),
        "pods_per_cpu_s": round(pods / cpu, 1),
        "ms_per_pod": round(wall * 1000 / pods, 3),
        "bound": bound,
    }


def _fragmented(rng: random.Random) -> tuple[DeviceIndex, list[BatchPod]]:
    """A small cluster with partly held, partly shared devices and pods limited to random node subsets."""
    names = [f"n{i}" for i in range(rng.randint(3, 8))]
    devices = []
    for i in range(rng.randint(6, 24)):
        seen = rng.sample(names, 2 if rng.random() < 0.2 else 1)
        capacity = rng.choice([1, 1, 2, 4])
        devices.append(
            _device(f"d{i:02d}", seen, capacity, rng.randint(0, capacity), rng.choice(["16Gi", "32Gi", "80Gi"]))
        )
    index = DeviceIndex(devices, _classes("firstFit"))
    pods = []
    for p in range(rng.randint(8, 40)):
        cls = rng.choice(["nvidia.high.mem", "gpu.80g", "any.gpu"])
        want = 2 if rng.random() < 0.15 else 1
        pods.append(BatchPod(f"p{p:02d}", {cls: want}, tuple(sorted(rng.sample(names, rng.randint(1, len(names)))))))
    return index, pods


def _quality_bench(rng: random.Random, workloads: int) -> dict[str, Any]:
    ratios: dict[str, list[float]] = {s: [] for s in STRATEGIES if s != "optimal"}
    placed = dict.fromkeys(STRATEGIES, 0)
    for _ in range(workloads):
        index, pods = _fragmented(rng)
        best = place_batch(pods, index, "optimal").count
        placed["optimal"] += best
        for strategy, values in ratios.items():
            count = place_batch(pods, index, strategy).count
            placed[strategy] += count
            values.append(count / best if best else 1.0)
    return {
        "workloads": workloads,
        "pods_placed_total": placed,
        "ratio_to_optimal": {
            s: {
                "min": round(min(v), 3),
                "p10": round(sorted(v)[len(v) // 10], 3),
                "median": round(statistics.median(v), 3),
                "mean": round(statistics.fmean(v), 3),
                "workloads_below_optimal": sum(1 for x in v if x < 1),
            }
            for s, v in ratios.items()
        },
    }


def _no_solution_bench(nodes: int) -> dict[str, Any]:
    names = [f"node-{n:04d}" for n in range(nodes)]
    devices = [_device(f"gpu-{n:04d}-{i}", [name], 1, 0, "32Gi") for n, name in enumerate(names) for i in range(10)]
    cluster = Snapshot.build([_node(name, 32, 128) for name in names], devices, _classes("firstFit"))
    pod = PodInfo("greedy", requests=Resources(100, 0, 1), classes={"nvidia.high.mem": 11})
    t0 = time.perf_counter()
    decision = schedule_one(pod, cluster, Assumed())
    wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    examined = 0
    for name in names:  # the selection alone, node by node, as a filter without the count shortcut would run it
        refusal = select_devices({"nvidia.high.mem": 11}, name, cluster.devices)
        examined += refusal.examined
    select_wall = time.perf_counter() - t0
    return {
        "nodes": nodes,
        "devices_per_node": 10,
        "requested": 11,
        "message": getattr(decision, "message", None),
        "ms_per_node": round(wall * 1000 / nodes, 5),
        "selection_ms_per_node": round(select_wall * 1000 / nodes, 5),
        "devices_examined_per_node": examined / nodes,
    }


def _wire_class(name: str, strategy: str) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": {"name": name},
        "spec": {**CLASSES[name], "selectionStrategy": strategy},
    }


def _wire_pod(name: str, requests: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "app", "resources": {"requests": requests}}]},
    }


async def _shell_once(rng: random.Random, nodes: int, per_node: int, pods: int, strategy: str) -> dict[str, Any]:
    from devplace.clocks import FakeClock
    from devplace.scheduler._schedulers import Scheduler
    from devplace.store import MemoryStore

    clock = FakeClock()
    store = MemoryStore(clock=clock, history_limit=10 * (nodes * (per_node + 1) + pods) + 1000)
    try:
        await store.create(
            {
                "apiVersion": "devplace.io/v1alpha1",
                "kind": "Configuration",
                "metadata": {"name": "gpus", "namespace": "default"},
                "spec": {"discoveryHandler": {"name": "udev"}, "deviceKind": "nvidia-gpu"},
            }
        )
        for name in ("nvidia.high.mem", "gpu.80g"):
            await store.create(_wire_class(name, strategy))
        for n in range(nodes):
            node = f"node-{n:05d}"
            cpu, memory = (32, 128) if per_node else (rng.choice([8, 16, 32, 64]), rng.choice([32, 64, 128, 256]))
            allocatable = {"cpu": str(cpu), "memory": f"{memory}Gi", "pods": "110"}
            # each GPU's Instance-level resource, as the node's kubelet advertises it once the agent's plugin registered
            allocatable.update({f"devplace.io/gpu-{n:05d}-{i}": "1" for i in range(per_node)})
            await store.create(
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}, "status": {"allocatable": allocatable}}
            )
            for i in range(per_node):
                gpu = f"gpu-{n:05d}-{i}"
                await store.create(
                    {
                        "apiVersion": "devplace.io/v1alpha1",
                        "kind": "Instance",
                        "metadata": {"name": gpu, "namespace": "default"},
                        "spec": {
                            "configurationName": "gpus",
                            "capacity": 1,
                            "nodes": [node],
                            "deviceUsage": {f"{gpu}-0": ""},
                            "brokerProperties": {"memory": rng.choice(["32Gi", "32Gi", "80Gi"])},
                        },
                    }
                )
        for i in range(pods):
            if per_node:
                cls = "gpu.80g" if rng.random() < 0.25 else "nvidia.high.mem"
                requests = {"cpu": "100m", "memory": "128Mi", f"rc.devplace.io/{cls}": "1"}
            else:
                requests = {
                    "cpu": f"{rng.choice([100, 250, 500, 1000])}m",
                    "memory": f"{rng.choice([128, 256, 512])}Mi",
                }
            await store.create(_wire_pod(f"p{i:05d}", requests))
        # the raw write the scheduler must make per pod, measured on this store
        probe = await store.create(_wire_pod("probe", {}))
        t0 = time.perf_counter()
        for _ in range(1000):
            probe = await store.update(probe)
        update_us = (time.perf_counter() - t0) * 1e6 / 1000
        await store.delete("Pod", "probe", "default")

        scheduler = Scheduler(store, clock, strategy=strategy)  # type: ignore[arg-type]
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        await scheduler.start()
        while True:
            await asyncio.sleep(0)
            if scheduler.is_idle():
                revision = await store.revision()
                for _ in range(20):
                    await asyncio.sleep(0)
                if scheduler.is_idle() and await store.revision() == revision:
                    break
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        bound = sum(1 for p in scheduler.pods.values() if p.node)
        await scheduler.stop()
        return {
            "pods_per_s": round(pods / wall, 1),
            "pods_per_cpu_s": round(pods / cpu, 1),
            "ms_per_pod": round(wall * 1000 / pods, 3),
            "bound": bound,
            "bursts": scheduler.bursts,
            "writes": scheduler.writes,
            "store_update_us": round(update_us, 1),
            "ratio_to_store_update": round(wall * 1e6 / pods / update_us, 1),
        }
    finally:
        await store.close()


def _shell_bench(rng: random.Random, nodes: int, pods: int, cpu_nodes: int, cpu_pods: int) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": nodes, "devices": nodes * 10, "pods": pods}
    for strategy in STRATEGY_NAMES:
        out[strategy] = asyncio.run(_shell_once(rng, nodes, 10, pods, strategy))
    out["cpu_memory"] = {"nodes": cpu_nodes, "pods": cpu_pods} | asyncio.run(
        _shell_once(rng, cpu_nodes, 0, cpu_pods, "firstFit")
    )
    return out


def run(quick: bool = False) -> dict[str, Any]:
    rng = random.Random(20260517)
    if quick:
        devices = _device_bench(rng, 50, 500)
        cpu_memory = _cpu_memory_bench(rng, 500, 1000)
        quality = _quality_bench(rng, 10)
        no_solution = _no_solution_bench(50)
        shell = _shell_bench(rng, 50, 500, 500, 1000)
    else:
        devices = _device_bench(rng, 500, 5000)
        cpu_memory = _cpu_memory_bench(rng, 5000, 10_000)
        quality = _quality_bench(rng, 100)
        no_solution = _no_solution_bench(500)
        shell = _shell_bench(rng, 500, 5000, 5000, 10_000)
    goals = {
        "device_pods_per_s_min": 500,
        "cpu_memory_pods_per_s_min": 1000,
        "no_solution_ms_per_node_max": 10,
    }
    met = {
        "device_pods_per_s": all(devices[s]["pods_per_s"] >= 500 for s in STRATEGIES),
        "cpu_memory_pods_per_s": cpu_memory["pods_per_s"] >= 1000,
        "no_solution_ms_per_node": no_solution["ms_per_node"] < 10,
        "optimal_never_below_greedy": all(r["min"] <= 1.0 for r in quality["ratio_to_optimal"].values())
        and all(quality["pods_placed_total"]["optimal"] >= n for n in quality["pods_placed_total"].values()),
    }
    return {
        "devices": devices,
        "cpu_memory": cpu_memory,
        "quality": quality,
        "no_solution": no_solution,
        "shell": shell,
        "goals": goals,
        "goals_met": met,
    }
