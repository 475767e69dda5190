"""DRA allocation, the pure core (issue #25; scheduler._allocations): Kubernetes' scheduler_perf shape and a worst case.

1. Fill (K test/integration/scheduler_perf/dra, SchedulingWithResourceClaimTemplate/5000pods_500nodes): 500 nodes x
   10 devices, one ResourceSlice per node; 5,000 pods, each with one claim made from a template whose request names a
   DeviceClass with a CEL selector; the pods fill the cluster exactly. Per pod: the claim is parsed, nodes are
   filtered from a rotating start (Kubernetes' nextStartNodeIndex) until one fits, its allocation is assumed into the
   cycle's snapshot. `pods_per_s` (goal >= 2,000) is the pure core; Kubernetes' own floor for this test is 40 pods/s
   (usually > 51) for the whole scheduler (shared/reference/dra.md section 6). Also measured: the same with
   Kubernetes' node sampling (each pod filters nodes until `feasible_nodes` fit, then takes the first), and the
   snapshot build.
2. Worst case: 1,000 generated claims that cannot be allocated, with constraints, each filtered on a few nodes of a
   cluster with 16 devices per node (numa, pcie root, lane, model attributes, memory): per (claim, node) filter time
   p50/p99/max (goal p99 <= 1 ms) and the share that ends `Undecided` (goal <= 0.1%). Families, each unsatisfiable
   by construction: matchAttribute over more devices than any value has; distinctAttribute over more devices than
   values; selectors that make requests compete (Hall's condition broken); match + distinct together; two
   distinctAttribute constraints over 2 values; two over 4 values each whose devices have no matching (4 requests of
   one device: merged into one demand, a bipartite matching); firstAvailable whose every alternative fails; All with
   a held device; partitionable devices whose counters cannot cover the count (outside the exact shapes: decided by
   the counter bound). A `Fit` for
   any of them would be a wrong verdict and is counted (`wrong_fits`, must be 0).

Figures are from this run on this machine; nothing here asserts a time.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from devplace.api import Verdicts
from devplace.scheduler._allocations import Fit, NodeRef, Snapshot, Undecided
from devplace.scheduler._claims import parse_claim

DRIVER = "gpu.devplace.io"
CLASS = {
    "metadata": {"name": "gpu"},
    "spec": {
        "selectors": [
            {"cel": {"expression": f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "a100"'}}
        ]
    },
}
TEMPLATE_SPEC = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}


def _slice(node: str, devices: list[dict[str, Any]], counters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "nodeName": node,
        "devices": devices,
    }
    out = [{"metadata": {"name": f"{node}-gpus"}, "spec": spec}]
    if counters is not None:
        spec["pool"]["resourceSliceCount"] = 2
        out.append(
            {
                "metadata": {"name": f"{node}-counters"},
                "spec": {**{k: v for k, v in spec.items() if k != "devices"}, "sharedCounters": counters},
            }
        )
    return out[0] if counters is None else {"many": out}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- 1. fill ------------------------------------------------------------------------------------------------------


def _fill_cluster(nodes: int, per_node: int) -> list[dict[str, Any]]:
    return [
        _slice(
            f"node-{n}",
            [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "model": {"string": "a100"},
                        "index": {"int": i},
                        "uuid": {"string": f"GPU-{n}-{i}"},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(per_node)
            ],
        )
        for n in range(nodes)
    ]


def _pod_claim(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"pod-{i}-gpu", "namespace": "default", "uid": f"uid-{i}"}, "spec": TEMPLATE_SPEC}


def fill(nodes: int, per_node: int, pods: int, feasible_nodes: int | None = None) -> dict[str, Any]:
    slices = _fill_cluster(nodes, per_node)
    refs = [NodeRef(f"node-{n}") for n in range(nodes)]
    started = time.perf_counter()
    snapshot = Snapshot(slices, [CLASS], verdicts=Verdicts())
    for ref in refs:  # per-node views and CEL verdicts: what a cycle's first pod pays
        snapshot.view(ref)
    built = time.perf_counter() - started
    calls = 0
    scheduled = 0
    next_start = 0
    call_times: list[float] = []
    started = time.perf_counter()
    for i in range(pods):
        claim = parse_claim(_pod_claim(i))
        chosen: Fit | None = None
        feasible = 0
        for k in range(nodes):
            ref = refs[(next_start + k) % nodes]
            t0 = time.perf_counter()
            outcome = snapshot.allocate(ref, [claim])
            if i % 50 == 0:
                call_times.append(time.perf_counter() - t0)
            calls += 1
            if isinstance(outcome, Fit):
                feasible += 1
                if chosen is None:
                    chosen = outcome
                if feasible >= (feasible_nodes or 1):
                    break
        next_start = (next_start + 1) % nodes
        if chosen is not None:
            snapshot.assume(chosen.allocations)
            scheduled += 1
    elapsed = time.perf_counter() - started
    return {
        "nodes": nodes,
        "devices_per_node": per_node,
        "pods": pods,
        "scheduled": scheduled,
        "feasible_nodes_per_pod": feasible_nodes or 1,
        "seconds": round(elapsed, 3),
        "pods_per_s": round(pods / elapsed, 1),
        "filter_calls": calls,
        "filter_calls_per_pod": round(calls / pods, 2),
        "filter_us_p50": round(statistics.median(call_times) * 1e6, 1) if call_times else None,
        "snapshot_build_s": round(built, 3),
    }


# -- 2. the worst case --------------------------------------------------------------------------------------------


def _worst_device(i: int, rng: random.Random) -> dict[str, Any]:
    return {
        "name": f"d{i}",
        "attributes": {
            "model": {"string": "x" if i % 4 != 3 else "y"},
            "numa": {"int": i // 8},
            "pcie": {"int": i // 4},
            "lane": {"int": i % 4},
            "index": {"int": i},
        },
        "capacity": {"memory": {"value": rng.choice(["40Gi", "80Gi"])}},
    }


def _worst_cluster(nodes: int, rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    slices: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    for n in range(nodes):
        devices = [_worst_device(i, rng) for i in range(16)]
        if n % 4 == 3:  # partitionable nodes: every device draws on one counter set
            for d in devices:
                d["consumesCounters"] = [{"counterSet": "gpu", "counters": {"mem": {"value": str(rng.choice([2, 3]))}}}]
            slices.extend(_slice(f"node-{n}", devices, [{"name": "gpu", "counters": {"mem": {"value": "10"}}}])["many"])
        else:
            slices.append(_slice(f"node-{n}", devices))
        taken = rng.sample(range(16), 2)  # two devices held by other claims on every node
        held.append(
            {
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {"request": "r", "driver": DRIVER, "pool": f"node-{n}", "device": f"d{i}"}
                                for i in taken
                            ]
                        }
                    }
                }
            }
        )
    return slices, held


def _sel(expression: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": expression}}]


def _req(name: str, count: int | None, expression: str | None = None) -> dict[str, Any]:
    fields: dict[str, Any] = {"deviceClassName": "any"}
    if count is None:
        fields["allocationMode"] = "All"
    else:
        fields["count"] = count
    if expression:
        fields["selectors"] = _sel(expression)
    return {"name": name, "exactly": fields}


def _attr(name: str) -> str:
    return f'device.attributes["{DRIVER}"].{name}'


FAMILIES = (
    "match",
    "distinct",
    "hall",
    "match+distinct",
    "two-distinct",
    "two-distinct-hall",
    "first-available",
    "all-held",
    "counters",
)


def _unsatisfiable(family: str, i: int, rng: random.Random) -> dict[str, Any]:
    """One claim of `family` that no node of the worst-case cluster can hold (the docstring says why, per family)."""
    a = f"{DRIVER}/"
    requests: list[dict[str, Any]]
    constraints: list[dict[str, Any]] = []
    if family == "match":  # a numa has 8 devices: 9 with one numa cannot be
        k = rng.randint(1, 8)
        requests = [_req("a", k), _req("b", 9 - k)]
        constraints = [{"matchAttribute": a + "numa"}]
    elif family == "distinct":  # 4 pcie roots: 5 distinct roots cannot be
        k = rng.randint(1, 4)
        requests = [_req("a", k), _req("b", 5 - k)]
        constraints = [{"distinctAttribute": a + "pcie"}]
    elif family == "hall":  # 12 model-x devices; a wants k of them, b wants 13-k with numa 0 or 1 among model x
        k = rng.randint(6, 11)
        requests = [_req("a", k, f'{_attr("model")} == "x"'), _req("b", 13 - k, f'{_attr("model")} == "x"')]
    elif family == "match+distinct":  # one numa has 2 pcie roots: 3 distinct roots on one numa cannot be
        requests = [_req("a", 1), _req("b", 2)]
        constraints = [{"matchAttribute": a + "numa"}, {"distinctAttribute": a + "pcie"}]
    elif family == "two-distinct":  # 3 devices with distinct numa (2 values) and distinct lane
        requests = [_req("a", 1), _req("b", 1), _req("c", 1)]
        constraints = [{"distinctAttribute": a + "lane"}, {"distinctAttribute": a + "numa"}]
        rng.shuffle(constraints)
    elif family == "two-distinct-hall":  # 4 devices, distinct pcie and lane, 3 roots limited to 2 lanes: no matching
        roots = rng.sample(range(4), 3)
        lanes = rng.sample(range(4), 2)
        limited = f"({_attr('pcie')} in {roots} && {_attr('lane')} in {lanes}) || !({_attr('pcie')} in {roots})"
        requests = [_req(name, 1, limited) for name in "abcd"]
        constraints = [{"distinctAttribute": a + "pcie"}, {"distinctAttribute": a + "lane"}]
    elif family == "first-available":  # every alternative asks for more model-y devices (4) than exist
        requests = [
            {
                "name": "a",
                "firstAvailable": [
                    {
                        "name": f"s{j}",
                        "deviceClassName": "any",
                        "count": 5 + j,
                        "selectors": _sel(f'{_attr("model")} == "y"'),
                    }
                    for j in range(rng.randint(2, 4))
                ],
            },
            _req("b", rng.randint(1, 3)),
        ]
    elif family == "all-held":  # All needs every device, and two are held by other claims
        requests = [_req("a", None), _req("b", 1, f"{_attr('numa')} == {rng.randint(0, 1)}")]
        constraints = [{"matchAttribute": a + "model", "requests": ["a"]}]
    else:  # counters (on the partitionable nodes): 10 units of counter, every device costs 2 or 3: 6 cannot be
        requests = [_req("a", 3), _req("b", 3)]
        constraints = [{"distinctAttribute": a + "index"}]
    return {
        "metadata": {"name": f"hard-{i}", "namespace": "default", "uid": f"hard-{i}"},
        "spec": {"devices": {"requests": requests, "constraints": constraints}},
    }


def worst(claims: int, nodes: int, nodes_per_claim: int, seed: int = 25) -> dict[str, Any]:
    rng = random.Random(seed)
    slices, held = _worst_cluster(nodes, rng)
    any_class = {"metadata": {"name": "any"}, "spec": {"selectors": _sel(f'device.driver == "{DRIVER}"')}}
    snapshot = Snapshot(slices, [any_class], held)
    refs = [NodeRef(f"node-{n}") for n in range(nodes)]
    for ref in refs:
        snapshot.view(ref)
    times: list[float] = []
    undecided = 0
    wrong = 0
    per_family: dict[str, list[float]] = {f: [] for f in FAMILIES}
    steps: list[int] = []
    partitionable = [ref for n, ref in enumerate(refs) if n % 4 == 3]
    for i in range(claims):
        family = FAMILIES[i % len(FAMILIES)]
        claim = parse_claim(_unsatisfiable(family, i, rng))
        for ref in rng.sample(partitionable if family == "counters" else refs, nodes_per_claim):
            t0 = time.perf_counter()
            outcome = snapshot.allocate(ref, [claim])
            dt = time.perf_counter() - t0
            times.append(dt)
            per_family[family].append(dt)
            steps.append(outcome.steps)
            if isinstance(outcome, Undecided):
                undecided += 1
            elif isinstance(outcome, Fit):
                wrong += 1
    return {
        "claims": claims,
        "nodes": nodes,
        "filters": len(times),
        "filter_us_p50": round(_percentile(times, 0.5) * 1e6, 1),
        "filter_us_p99": round(_percentile(times, 0.99) * 1e6, 1),
        "filter_us_max": round(max(times) * 1e6, 1),
        "undecided": undecided,
        "undecided_share": round(undecided / len(times), 5),
        "wrong_fits": wrong,
        "steps_p99": _percentile([float(s) for s in steps], 0.99),
        "steps_max": max(steps),
        "per_family_us_p99": {f: round(_percentile(v, 0.99) * 1e6, 1) for f, v in per_family.items() if v},
        "goal_p99_us": 1000,
        "goal_undecided_share": 0.001,
    }


def run(quick: bool = False) -> dict[str, Any]:
    if quick:
        return {
            "fill": fill(nodes=20, per_node=10, pods=200),
            "fill_kubernetes_sampling": fill(nodes=20, per_node=10, pods=50, feasible_nodes=5),
            "worst": worst(claims=48, nodes=8, nodes_per_claim=2),
        }
    return {
        "fill": fill(nodes=500, per_node=10, pods=5000),
        "fill_kubernetes_sampling": fill(nodes=500, per_node=10, pods=1000, feasible_nodes=230),
        "worst": worst(claims=1000, nodes=100, nodes_per_claim=5),
        "goal_pods_per_s": 2000,
    }
