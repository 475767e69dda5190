"""The DRA claims filter of one pod in a burst (`scheduler._claimchecks`): its memo of verdicts per (claims, node)
never changes a verdict, and a reservation assumes the devices so the next pod does not get them."""

from __future__ import annotations

import random
from typing import Any

from devplace.api import Verdicts
from devplace.scheduler._allocations import NoFit, Snapshot
from devplace.scheduler._claimchecks import ClaimCheck
from devplace.scheduler._decisions import Binding
from devplace.scheduler._nodes import NodeInfo
from devplace.scheduler._podclaims import PodClaims

DRIVER = "gpu.example.com"
CLASS = {"metadata": {"name": "gpu"}, "spec": {"selectors": []}}


def slices(rng: random.Random, nodes: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "metadata": {"name": n},
            "spec": {
                "driver": DRIVER,
                "nodeName": n,
                "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": f"d{i}", "attributes": {"model": {"string": rng.choice("ab")}}}
                    for i in range(rng.randint(1, 3))
                ],
            },
        }
        for n in nodes
    ]


def claim(i: int, model: str, count: int) -> dict[str, Any]:
    selector = {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "{model}"'}}
    return {
        "metadata": {"name": f"c{i}", "namespace": "default", "uid": f"uid-{i}"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "g", "exactly": {"deviceClassName": "gpu", "count": count, "selectors": [selector]}}
                ]
            }
        },
    }


def test_remembered_verdicts_are_the_verdicts_a_fresh_allocation_gives_pod_after_pod() -> None:
    rng = random.Random(7)
    for _ in range(30):
        nodes = [f"n{i}" for i in range(4)]
        cluster = slices(rng, nodes)
        snapshot = Snapshot(cluster, [CLASS], verdicts=Verdicts())
        for i in range(8):  # pods alike (two shapes), each placed on the first node that passes
            wire = claim(i, rng.choice("ab"), rng.randint(1, 2))
            check = ClaimCheck(snapshot, PodClaims(((f"default/c{i}", wire),)), first_fit=True)
            fresh = Snapshot(cluster, [CLASS], [{"status": {"allocation": a}} for a in taken(snapshot)])
            chosen = None
            for n in nodes:
                verdict = check(NodeInfo(n))
                expected = fresh.allocate(n, [wire], first_fit=True)
                assert (verdict is None) == (not isinstance(expected, NoFit)), (n, verdict, expected)
                if isinstance(expected, NoFit):
                    assert verdict == expected.reason.replace(f"claim uid-{i}", f"claim default/c{i}")
                if verdict is None and chosen is None:
                    chosen = n
            if chosen is not None:
                done = check.reserve(Binding(f"default/p{i}", chosen))
                [(key, allocation)] = done.claims
                assert key == f"default/c{i}"
                assert allocation is not None
                assert all(r["pool"] == chosen for r in allocation["devices"]["results"])


def taken(snapshot: Snapshot) -> list[dict[str, Any]]:
    """What the snapshot holds, as allocations (exclusive devices only here)."""
    return [
        {"devices": {"results": [{"request": "x", "driver": d, "pool": p, "device": n}]}}
        for d, p, n in sorted(snapshot.holdings.exclusive)
    ]
