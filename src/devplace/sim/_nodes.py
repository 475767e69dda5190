"""The Node object a simulated kubelet keeps in the store: pure decisions over wire dicts.

The kubelet owns `status.capacity` and `status.allocatable` of its Node. For extended resources it reports exactly the
plugins registered right now: capacity = every advertised device, allocatable = the Healthy ones. A resource whose
plugin went away is removed at once rather than left behind at zero or, worse, at its old count (Akri issue #181:
stale resources on nodes). Everything else on the Node (labels set by users, base resources, conditions set by
others) is kept, and every write is a compare-and-swap by the caller.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from devplace.sim import _admissions as admissions

DEFAULT_BASE_RESOURCES: Mapping[str, str] = {"cpu": "8", "memory": "32Gi", "pods": "110"}
"""What a simulated node offers besides devices, so the scheduler's cpu/memory/pods filters have something to read."""


def _merged(existing: Mapping[str, Any], extended: Mapping[str, int]) -> dict[str, str]:
    kept = {k: v for k, v in existing.items() if not admissions.is_extended_resource(k)}
    kept.update({k: str(v) for k, v in sorted(extended.items())})
    return kept


def new_node(
    name: str,
    capacity: Mapping[str, int],
    allocatable: Mapping[str, int],
    now: str,
    base: Mapping[str, str] = DEFAULT_BASE_RESOURCES,
) -> dict[str, Any]:
    """The Node a kubelet registers the first time it starts: Ready, with base resources and its devices."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "capacity": _merged(base, capacity),
            "allocatable": _merged(base, allocatable),
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now},
            ],
        },
    }


def with_extended_resources(
    node: Mapping[str, Any], capacity: Mapping[str, int], allocatable: Mapping[str, int]
) -> dict[str, Any] | None:
    """`node` with its extended resources replaced by exactly these, or None when nothing changes."""
    status = node.get("status") or {}
    old_capacity = status.get("capacity") or {}
    old_allocatable = status.get("allocatable") or {}
    new_capacity = _merged(old_capacity, capacity)
    new_allocatable = _merged(old_allocatable, allocatable)
    if new_capacity == old_capacity and new_allocatable == old_allocatable:
        return None
    out = copy.deepcopy(dict(node))
    out_status = dict(out.get("status") or {})
    out_status["capacity"] = new_capacity
    out_status["allocatable"] = new_allocatable
    out["status"] = out_status
    return out
