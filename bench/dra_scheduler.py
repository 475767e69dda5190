"""DRA scheduling through the whole scheduler (issue #25): Kubernetes' scheduler_perf DRA shapes, and the quality of
device choices against first fit and an exact optimum.

1. `fill` (K test/integration/scheduler_perf/dra, SchedulingWithResourceClaimTemplate): 500 nodes x 10 devices, one
   ResourceSlice per node, a DeviceClass with a CEL selector, a ResourceClaimTemplate; 5,000 pods, each with a claim
   from the template, fill the cluster exactly. Through `devplace server` (a child process) on etcd (a child
   process), as scheduler_perf goes through kube-apiserver and etcd: the scheduler and the claim lifecycle
   (`devplace controller`'s part that makes each pod's claim from the template, as Kubernetes' resourceclaim
   controller does) run in this process over HTTP; the pods are created as fast as the store takes them. Measured:
   pods/s from the first pod created to the last one bound (goal >= 400; upstream's CI floor for the same test is
   40-81 pods/s). Each bound pod's claim is checked allocated and reserved for it (`wrong` counts any that is not).
2. `steady` (SteadyStateClusterResourceClaimTemplate): the cluster full, pods deleted and created in waves; a new pod
   can only go where a deleted one freed a device (its claim deallocated by the claim lifecycle). Pods/s bound over
   the phase (goal >= 300).
3. `memory`: the same fill over an in-process MemoryStore, beside the classic device path on the same cluster shape
   (`bench.scheduler`'s shell run: Instances, a ResourceClass, pods asking `rc.devplace.io/<class>`), so the two
   paths are compared in one run, and the store's own Pod update as the floor.
4. `floors` (after `steady`, same run, same etcd and server): what five writes per pod cost this machine before any
   devplace logic: five bare etcd transactions per pod (two creates, three guarded updates, 32 at a time, on keys of
   their own) with the CPU etcd and this process spend on them, and `devplace server`'s CPU for a request that does
   no store work (GET /healthz through its middleware and routing, 16 at a time). `fill.cpu_ms_per_pod` is what
   each process (server, etcd, this one: scheduler, claim lifecycle, pod creation) spent per bound pod during the
   fill; `budget_ms_per_pod` what the fill goal leaves (this machine's cores over 400 pods/s), to set both against.
5. `quality`: on small fragmented instances (3-4 nodes with 2-4 devices of two models, some held; 5-8 pods asking
   1-3 devices of a model), how many pods the scheduler places, pod after pod as it does (the claims filter on every
   node, the best node by the strategy's device score), per strategy (`firstFit`: Kubernetes' choice, the first node
   that fits; `binpack` and `optimal`: the node whose devices are most held; `spread`: the least), against an
   exhaustive search for the most pods that can be placed together (every subset, every node per pod): placed /
   optimum (goal >= 98%).

Figures are from this run on this machine; nothing here asserts a time.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.measures import cpu_seconds

DRIVER = "gpu.example.com"
FILL_GOAL = 400  # pods/s (issue #25)
CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu"},
    "spec": {
        "selectors": [
            {"cel": {"expression": f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "a100"'}}
        ]
    },
}
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "default"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}},
}


def _node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
    }


def _slice(node: str, per_node: int) -> dict[str, Any]:
    devices = [
        {"name": f"gpu-{i}", "attributes": {"model": {"string": "a100"}, "index": {"int": i}}} for i in range(per_node)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": "10m"}}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        },
    }


async def _create_all(store: Any, objs: list[dict[str, Any]], at_once: int = 16) -> None:
    """Create `objs`, `at_once` at a time (a client's fair share of the server's connections)."""
    for start in range(0, len(objs), at_once):
        await asyncio.gather(*(store.create(o) for o in objs[start : start + at_once]))


async def _until(check: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.01)  # a benchmark waiting on other processes' work, bounded by the deadline
    return False


async def _etcd_floor(endpoint: str, etcd_pid: int, pods: int) -> dict[str, float]:
    """Five bare transactions per pod (create two keys, then three guarded puts), 32 pods at a time."""
    from devplace.store._etcd import EtcdStore
    from devplace.store.etcdserverpb import rpc_pb2 as pb

    store = EtcdStore(f"etcd://{endpoint}")
    body = b"x" * 1500  # about a pod's JSON
    try:
        conn = store._conn

        async def put(key: bytes, revision: int) -> int:
            guard = pb.Compare(key=key, target=pb.Compare.MOD, result=pb.Compare.EQUAL, mod_revision=revision)
            request = pb.TxnRequest(
                compare=[guard], success=[pb.RequestOp(request_put=pb.PutRequest(key=key, value=body))]
            )
            reply = await conn.call("Txn", request)
            if not reply.succeeded:
                raise RuntimeError("a bare transaction's guard failed")
            return int(reply.header.revision)

        async def pod(i: int) -> None:
            pod_key, claim_key = f"/bench-floor/pods/{i}".encode(), f"/bench-floor/claims/{i}".encode()
            pod_rev, claim_rev = await put(pod_key, 0), await put(claim_key, 0)
            pod_rev = await put(pod_key, pod_rev)
            await put(claim_key, claim_rev)
            await put(pod_key, pod_rev)

        await pod(-1)  # connected
        queue = iter(range(pods))

        async def worker() -> None:
            for i in queue:
                await pod(i)

        t0, c0, e0 = time.perf_counter(), time.process_time(), cpu_seconds(etcd_pid)
        await asyncio.gather(*(worker() for _ in range(32)))
        wall, cpu, etcd = time.perf_counter() - t0, time.process_time() - c0, cpu_seconds(etcd_pid) - e0
    finally:
        await store.close()
    return {
        "pods_per_s": round(pods / wall, 1),
        "etcd_cpu_ms_per_pod": round(1000 * etcd / pods, 3),
        "client_cpu_ms_per_pod": round(1000 * cpu / pods, 3),
    }


async def _server_floor(base_url: str, server_pid: int, requests: int) -> dict[str, float]:
    """`devplace server`'s CPU per GET /healthz (no store work), 16 requests at a time."""
    import httpx2

    async with httpx2.AsyncClient(base_url=base_url) as client:
        await client.get("/healthz")
        queue = iter(range(requests))

        async def worker() -> None:
            for _ in queue:
                (await client.get("/healthz")).raise_for_status()

        t0, s0 = time.perf_counter(), cpu_seconds(server_pid)
        await asyncio.gather(*(worker() for _ in range(16)))
        wall, server = time.perf_counter() - t0, cpu_seconds(server_pid) - s0
    return {
        "requests_per_s": round(requests / wall, 1),
        "server_cpu_ms_per_request": round(1000 * server / requests, 3),
    }


async def _cluster_run(
    store: Any, nodes: int, per_node: int, pods: int, waves: int, wave: int, others: dict[str, int] | None = None
) -> dict[str, Any]:
    """Fill then steady state over `store`, with the scheduler and the claim lifecycle in this process; `others`
    names processes (by PID) whose CPU over the fill is reported beside this one's."""
    from devplace.clocks import SystemClock
    from devplace.controller._claims import ClaimLifecycle
    from devplace.scheduler._schedulers import Scheduler

    clock = SystemClock()
    await store.create(CLASS)
    await store.create(TEMPLATE)
    names = [f"node-{n:04d}" for n in range(nodes)]
    await _create_all(store, [_node(n) for n in names])
    await _create_all(store, [_slice(n, per_node) for n in names])
    scheduler = Scheduler(store, clock)
    lifecycle = ClaimLifecycle(store, clock)
    await scheduler.start()
    lifecycle.start()
    try:
        await _until(lambda: scheduler.is_idle() and lifecycle.is_idle(), 120)

        def bound() -> int:
            return sum(1 for p in scheduler.pods.values() if p.node)

        gc.collect()
        others = others or {}
        before = {name: cpu_seconds(pid) for name, pid in others.items()}
        t0, c0 = time.perf_counter(), time.process_time()
        await _create_all(store, [_pod(f"fill-{i:05d}") for i in range(pods)])
        created = time.perf_counter() - t0
        done = await _until(lambda: bound() >= pods, 600)
        fill_wall, fill_cpu = time.perf_counter() - t0, time.process_time() - c0
        spent = {name: cpu_seconds(pid) - before[name] for name, pid in others.items()}
        fill_bound = bound()
        wrong = 0
        for state in scheduler.pods.values():
            if not state.node:
                continue
            statuses = (state.wire.get("status") or {}).get("resourceClaimStatuses") or []
            claim = scheduler.claims.get("default", statuses[0]["resourceClaimName"]) if statuses else None
            reserved = [e.get("name") for e in ((claim or {}).get("status") or {}).get("reservedFor") or []]
            if claim is None or not (claim.get("status") or {}).get("allocation") or state.key[8:] not in reserved:
                wrong += 1
        fill = {
            "pods": pods,
            "bound": fill_bound,
            "all_bound": done,
            "pods_per_s": round(fill_bound / fill_wall, 1),
            "pods_per_cpu_s_this_process": round(fill_bound / max(fill_cpu, 1e-9), 1),
            "cpu_ms_per_pod": {
                name: round(1000 * seconds / max(fill_bound, 1), 3)
                for name, seconds in {**spent, "this_process": fill_cpu}.items()
            },
            "create_phase_s": round(created, 2),
            "wrong": wrong,
            "scheduler_bursts": scheduler.bursts,
        }
        # steady state: waves of deletes and creates at full load
        t0 = time.perf_counter()
        target = fill_bound
        for w in range(waves):
            victims = [f"fill-{i:05d}" for i in range(w * wave, (w + 1) * wave)]
            await asyncio.gather(*(store.delete("Pod", v, "default") for v in victims))
            await _create_all(store, [_pod(f"wave-{w:03d}-{i:04d}") for i in range(wave)])
            await _until(lambda: bound() >= target, 120)
        steady_wall = time.perf_counter() - t0
        steady = {
            "waves": waves,
            "pods_per_wave": wave,
            "pods_per_s": round(waves * wave / steady_wall, 1),
            "bound_at_end": bound(),
        }
        return {"fill": fill, "steady": steady}
    finally:
        await lifecycle.stop()
        await scheduler.stop()


async def _through_server(nodes: int, per_node: int, pods: int, waves: int, wave: int) -> dict[str, Any]:
    from bench.etcd import _etcd_process
    from bench.server import _server_process
    from devplace.store import RemoteStore

    with (
        tempfile.TemporaryDirectory(prefix="devplace-bench-dra-") as tmp,
        _etcd_process(Path(tmp) / "etcd") as (endpoint, etcd_pid),
        _server_process(f"etcd://{endpoint}") as (base_url, server_pid),
    ):
        store = RemoteStore(base_url)
        try:
            result = await _cluster_run(
                store, nodes, per_node, pods, waves, wave, {"server": server_pid, "etcd": etcd_pid}
            )
        finally:
            await store.close()
        etcd_floor = await _etcd_floor(endpoint, etcd_pid, max(200, pods // 2))
        server_floor = await _server_floor(base_url, server_pid, max(500, pods))
    five_writes = (
        etcd_floor["etcd_cpu_ms_per_pod"]
        + etcd_floor["client_cpu_ms_per_pod"]
        + 5 * server_floor["server_cpu_ms_per_request"]
    )
    result["floors"] = {
        "etcd_five_transactions_per_pod": etcd_floor,
        "server_request_without_store_work": server_floor,
        "five_writes_cpu_ms_per_pod": round(five_writes, 3),
        "budget_ms_per_pod": round((os.cpu_count() or 1) * 1000 / FILL_GOAL, 3),
        "spent_ms_per_pod": round(sum(result["fill"]["cpu_ms_per_pod"].values()), 3),
    }
    return result


async def _in_memory(nodes: int, per_node: int, pods: int) -> dict[str, Any]:
    from devplace.clocks import FakeClock
    from devplace.store import MemoryStore

    store = MemoryStore(clock=FakeClock(), history_limit=20 * (nodes + pods) + 1000)
    try:
        probe = await store.create({**_pod("probe"), "spec": {"containers": [{"name": "c", "image": "i"}]}})
        t0 = time.perf_counter()
        for _ in range(1000):
            probe = await store.update(probe)
        update_us = (time.perf_counter() - t0) * 1e6 / 1000
        await store.delete("Pod", "probe", "default")
        result = await _cluster_run(store, nodes, per_node, pods, 0, 0)
        fill = result["fill"]
        fill["store_update_us"] = round(update_us, 1)
        fill["ratio_to_store_update"] = round(1e6 / fill["pods_per_s"] / update_us, 1) if fill["pods_per_s"] else None
        return fill
    finally:
        await store.close()


# -- quality -----------------------------------------------------------------------------------------------------------


def _quality_instance(
    rng: random.Random,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str], list[dict[str, Any]]]:
    """Slices of 3-4 nodes with 2-4 devices of models a/b (some held by other claims), and 5-8 pods' claims asking
    1-3 devices of one model."""
    nodes = [f"n{i}" for i in range(rng.randint(3, 4))]
    slices, held = [], []
    for n in nodes:
        devices = [
            {"name": f"d{i}", "attributes": {"model": {"string": rng.choice("ab")}}} for i in range(rng.randint(2, 4))
        ]
        slices.append(
            {
                "metadata": {"name": n},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": n,
                    "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
        for d in devices:
            if rng.random() < 0.2:
                held.append(
                    {
                        "status": {
                            "allocation": {
                                "devices": {
                                    "results": [{"request": "x", "driver": DRIVER, "pool": n, "device": d["name"]}]
                                }
                            }
                        }
                    }
                )
    claims = []
    for p in range(rng.randint(5, 8)):
        model = rng.choice("ab")
        claims.append(
            {
                "metadata": {"name": f"c{p}", "namespace": "default", "uid": f"u{p}"},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "g",
                                "exactly": {
                                    "deviceClassName": "gpu",
                                    "count": rng.randint(1, 3),
                                    "selectors": [
                                        {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "{model}"'}}
                                    ],
                                },
                            }
                        ]
                    }
                },
            }
        )
    return slices, held, nodes, claims


def _placed(slices: Any, held: Any, nodes: list[str], claims: list[dict[str, Any]], strategy: str) -> int:
    """Pods placed one after another as the scheduler places them with `strategy`: the claims filter
    (`ClaimCheck`) on every node, the best node by its score (ties: name order; firstFit: the first that fits)."""
    from devplace.api import Verdicts
    from devplace.scheduler._allocations import Snapshot
    from devplace.scheduler._claimchecks import ClaimCheck
    from devplace.scheduler._decisions import Binding
    from devplace.scheduler._nodes import NodeInfo
    from devplace.scheduler._podclaims import PodClaims

    cls = {**CLASS, "spec": {"selectors": []}}
    snap = Snapshot(slices, [cls], held, verdicts=Verdicts())
    placed = 0
    for i, claim in enumerate(claims):
        check = ClaimCheck(
            snap, PodClaims(((f"default/c{i}", claim),)), first_fit=strategy == "firstFit", strategy=strategy
        )
        feasible = [NodeInfo(n) for n in nodes if check(NodeInfo(n)) is None]
        if not feasible:
            continue
        score = check.score
        best = max(feasible, key=lambda node: (score(node) if score else 0, [-ord(c) for c in node.name]))
        check.reserve(Binding(f"default/p{i}", best.name))
        placed += 1
    return placed


def _optimum(slices: Any, held: Any, nodes: list[str], claims: list[dict[str, Any]]) -> int:
    """The most pods that can be placed together: every subset of pods, every node per pod, every way each claim
    can be allocated there that the allocator's search gives (exhaustive over subsets and nodes)."""
    from devplace.api import Verdicts
    from devplace.scheduler._allocations import Fit, Snapshot

    cls = {**CLASS, "spec": {"selectors": []}}
    verdicts = Verdicts()

    def place(chosen: tuple[int, ...], taken: list[dict[str, Any]]) -> bool:
        if not chosen:
            return True
        snap = Snapshot(slices, [cls], [*held, *taken], verdicts=verdicts)
        for n in nodes:
            for first_fit in (True, False):
                outcome = snap.allocate(n, [claims[chosen[0]]], first_fit=first_fit)
                if isinstance(outcome, Fit):
                    more = [{"status": {"allocation": a}} for a in outcome.allocations]
                    if place(chosen[1:], [*taken, *more]):
                        return True
        return False

    for size in range(len(claims), 0, -1):
        for chosen in itertools.combinations(range(len(claims)), size):
            if place(chosen, []):
                return size
    return 0


def _quality(instances: int, seed: int = 25) -> dict[str, Any]:
    rng = random.Random(seed)
    strategies = ("firstFit", "binpack", "spread", "optimal")
    totals = dict.fromkeys((*strategies, "optimum"), 0)
    for _ in range(instances):
        slices, held, nodes, claims = _quality_instance(rng)
        for strategy in strategies:
            totals[strategy] += _placed(slices, held, nodes, claims, strategy)
        totals["optimum"] += _optimum(slices, held, nodes, claims)
    return {
        "instances": instances,
        "placed": totals,
        "over_optimum": {s: round(totals[s] / max(totals["optimum"], 1), 4) for s in strategies},
    }


def run(quick: bool = False) -> dict[str, Any]:
    from bench.scheduler import _shell_once

    if quick:
        nodes, per_node, pods, waves, wave, instances = 20, 4, 80, 2, 10, 10
    else:
        nodes, per_node, pods, waves, wave, instances = 500, 10, 5000, 10, 100, 200
    server = asyncio.run(_through_server(nodes, per_node, pods, waves, wave))
    memory = asyncio.run(_in_memory(nodes, per_node, pods))
    classic = asyncio.run(_shell_once(random.Random(25), nodes, per_node, pods, "firstFit"))
    return {
        "shape": {"nodes": nodes, "devices_per_node": per_node, "pods": pods},
        "through_server_on_etcd": server,
        "memory_store": {"dra": memory, "classic_device_path": classic},
        "dra_over_classic_in_memory": round(memory["pods_per_s"] / max(classic["pods_per_s"], 1e-9), 3),
        "quality": _quality(instances),
        "goals": {"fill_pods_per_s": FILL_GOAL, "steady_pods_per_s": 300, "quality_vs_optimum": 0.98},
    }
