"""Cluster inventories: what each cluster's nodes can still take, and their labels.

Two sources, one shape (`ClusterInventory`):
- static: the cluster's `spec.nodes` as registered over /v2 (`allocatable` is taken as what is free for new pods);
  a PUT of the cluster replaces it.
- live: a member devplace control plane at `spec.endpoint`. Every plan lists its Nodes and Pods afresh
  (`GET /api/v1/nodes`, `GET /api/v1/pods`): free = allocatable minus the requests of the pods bound to the node and
  not finished; node labels come from the same read. Nothing is cached across plans, so labels and usage never go
  stale (EMCO cached labels at registration). A member that cannot be read within its timeout yields an inventory
  with `problem` set: that cluster is rejected with the reason, the plan goes on without it.

Amounts are integers in milli-units (`Quantity.milli_value()`), so the planner compares ints, never parses.
`maxima` (per resource, the most any one node has free), `label_values` (per label key, the values some node
carries), `holders` (per resource, the nodes with any of it free) and `label_holders` (per label, the nodes carrying
it) are computed once per inventory, so the planner rejects most clusters without looking at nodes and, for a
scarce resource, scans only the nodes that have it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import httpx2

from devplace import errors
from devplace.api import Quantity


class ClusterRef(NamedTuple):
    """A cluster's identity (a tuple: hashes and orders fast, which the planner does a lot)."""

    provider: str
    name: str

    def __str__(self) -> str:
        return f"{self.provider}/{self.name}"


@dataclass(frozen=True, slots=True)
class NodeInventory:
    name: str
    free: Mapping[str, int]
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterInventory:
    ref: ClusterRef
    labels: Mapping[str, str] = field(default_factory=dict)
    nodes: tuple[NodeInventory, ...] = ()
    problem: str | None = None
    maxima: Mapping[str, int] = field(init=False, repr=False, compare=False)
    label_values: Mapping[str, frozenset[str]] = field(init=False, repr=False, compare=False)
    holders: Mapping[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)
    label_holders: Mapping[tuple[str, str], tuple[int, ...]] = field(init=False, repr=False, compare=False)
    everywhere: range = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        maxima: dict[str, int] = {}
        holders: dict[str, list[int]] = {}
        label_holders: dict[tuple[str, str], list[int]] = {}
        for i, node in enumerate(self.nodes):
            for resource, amount in node.free.items():
                if amount > 0:
                    holders.setdefault(resource, []).append(i)
                    if amount > maxima.get(resource, 0):
                        maxima[resource] = amount
            for item in node.labels.items():
                label_holders.setdefault(item, []).append(i)
        values: dict[str, set[str]] = {}
        for key, value in label_holders:
            values.setdefault(key, set()).add(value)
        object.__setattr__(self, "everywhere", range(len(self.nodes)))
        object.__setattr__(self, "maxima", maxima)
        object.__setattr__(self, "holders", {k: tuple(v) for k, v in holders.items()})
        object.__setattr__(self, "label_holders", {k: tuple(v) for k, v in label_holders.items()})
        object.__setattr__(self, "label_values", {k: frozenset(v) for k, v in values.items()})

    def has_label(self, selector: str) -> bool:
        """EMCO cluster label match: `key` (present, any value) or `key=value`."""
        key, sep, value = selector.partition("=")
        if key not in self.labels:
            return False
        return not sep or self.labels[key] == value


def milli(amount: str | int | Quantity) -> int:
    """A quantity in milli-units (rounded up); raises `Invalid` for a malformed one."""
    return Quantity(amount).milli_value()


def static_inventory(
    ref: ClusterRef, labels: Mapping[str, str], nodes: Iterable[Mapping[str, Any]]
) -> ClusterInventory:
    """From a cluster body's `spec.nodes` (already validated): `[{name, allocatable: {cpu: "8"}, labels}]`."""
    out = []
    for node in nodes:
        free = {resource: max(0, milli(amount)) for resource, amount in (node.get("allocatable") or {}).items()}
        out.append(NodeInventory(str(node["name"]), free, dict(node.get("labels") or {})))
    return ClusterInventory(ref, dict(labels), tuple(out))


def _container_amounts(container: Mapping[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    requests = dict(resources.get("requests") or {})
    for name, amount in (resources.get("limits") or {}).items():
        requests.setdefault(name, amount)  # Kubernetes defaults requests to limits
    out: dict[str, int] = {}
    for name, amount in requests.items():
        try:
            out[name] = milli(amount)
        except errors.Invalid:
            continue
    return out


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """What a pod holds on its node, as the kube-scheduler counts it: the sum over containers, at least the largest
    init container, plus one `pods` slot."""
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        for name, amount in _container_amounts(container).items():
            total[name] = total.get(name, 0) + amount
    for container in spec.get("initContainers") or []:
        for name, amount in _container_amounts(container).items():
            total[name] = max(total.get(name, 0), amount)
    total["pods"] = total.get("pods", 0) + 1000
    return total


def inventory_from_objects(
    ref: ClusterRef, labels: Mapping[str, str], nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
) -> ClusterInventory:
    """Pure: Kubernetes Node and Pod objects -> free amounts per schedulable node."""
    used: dict[str, dict[str, int]] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node_name or phase in ("Succeeded", "Failed"):
            continue
        held = used.setdefault(node_name, {})
        for name, amount in pod_requests(pod).items():
            held[name] = held.get(name, 0) + amount
    out = []
    for node in nodes:
        meta = node.get("metadata") or {}
        if (node.get("spec") or {}).get("unschedulable"):
            continue
        status = node.get("status") or {}
        allocatable = status.get("allocatable") or status.get("capacity") or {}
        held = used.get(meta.get("name", ""), {})
        free: dict[str, int] = {}
        for name, amount in allocatable.items():
            try:
                free[name] = max(0, milli(amount) - held.get(name, 0))
            except errors.Invalid:
                continue
        out.append(NodeInventory(str(meta.get("name", "")), free, dict(meta.get("labels") or {})))
    return ClusterInventory(ref, dict(labels), tuple(out))


async def live_inventory(
    client: httpx2.AsyncClient, ref: ClusterRef, labels: Mapping[str, str], endpoint: str, timeout: float
) -> ClusterInventory:
    """Read a member devplace API server; never raises: an unreachable member is an inventory with `problem` set."""
    base = endpoint.rstrip("/")
    try:
        async with asyncio.timeout(timeout):
            nodes_resp, pods_resp = await asyncio.gather(
                client.get(f"{base}/api/v1/nodes"), client.get(f"{base}/api/v1/pods")
            )
        for resp in (nodes_resp, pods_resp):
            if resp.status_code != 200:
                return ClusterInventory(ref, dict(labels), problem=f"GET {resp.url} answered {resp.status_code}")
        nodes = nodes_resp.json().get("items") or []
        pods = pods_resp.json().get("items") or []
    except TimeoutError:
        return ClusterInventory(ref, dict(labels), problem=f"{base} did not answer within {timeout:g} s")
    except (httpx2.HTTPError, ValueError, AttributeError) as e:
        return ClusterInventory(ref, dict(labels), problem=f"{base}: {type(e).__name__}: {e}")
    return inventory_from_objects(ref, labels, nodes, pods)
