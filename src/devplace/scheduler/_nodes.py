"""Nodes as the scheduler sees them: labels, allocatable resources and what bound pods already request.

Pure: `node_info` reads a Node wire dict once (quantities parsed with `devplace.api._quantity`, a bad one refused with
its field path); filters and scores then compare plain integers.

Units: cpu in millicores, every other resource (memory, pods, ephemeral-storage, hugepages-*, extended resources
such as `nvidia.com/gpu`) in whole units, rounded up as Kubernetes' `Value()` does. `requested.pods` counts bound pods.

`availability_message` formats the Kubernetes-style summary of why no node fits:
`0/12 nodes are available: 7 no device matches class nvidia.high.mem, 5 insufficient cpu.` (counts descending, then
reasons in order); every node contributes its first failing reason, so the counts add up to the nodes evaluated.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devplace import errors
from devplace.api import Quantity
from devplace.scheduler._taints import Taint, node_taints

DEFAULT_MAX_PODS = 110
"""Pods a node holds when its status does not say (the kubelet's default `maxPods`)."""


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of resources: cpu (millicores), memory (bytes), pods, and other resources by name (whole units)."""

    cpu: int = 0
    memory: int = 0
    pods: int = 0
    extended: Mapping[str, int] = field(default_factory=dict, hash=False)

    def __add__(self, other: Resources) -> Resources:
        extended = dict(self.extended)
        for name, amount in other.extended.items():
            extended[name] = extended.get(name, 0) + amount
        return Resources(self.cpu + other.cpu, self.memory + other.memory, self.pods + other.pods, extended)

    def __sub__(self, other: Resources) -> Resources:
        extended = dict(self.extended)
        for name, amount in other.extended.items():
            extended[name] = extended.get(name, 0) - amount
        return Resources(self.cpu - other.cpu, self.memory - other.memory, self.pods - other.pods, extended)


def _amount(name: str, value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise errors.Invalid.field(path, f"must be a quantity, not {type(value).__name__}")
    try:
        quantity = Quantity(value)
    except errors.Invalid as e:
        raise errors.Invalid.field(path, e.message) from e
    return quantity.milli_value() if name == "cpu" else quantity.value()


def resources_of(amounts: Mapping[str, Any] | None, path: str, *, skip_prefix: str | None = None) -> Resources:
    """`Resources` of a `{name: quantity}` wire map (`status.allocatable`, a container's requests)."""
    if amounts is None:
        return Resources()
    if not isinstance(amounts, Mapping):
        raise errors.Invalid.field(path, "must be a mapping of resource name to quantity")
    cpu = memory = pods = 0
    extended: dict[str, int] = {}
    for name, value in amounts.items():
        if skip_prefix is not None and name.startswith(skip_prefix):
            continue
        amount = _amount(name, value, f"{path}[{name}]")
        if name == "cpu":
            cpu = amount
        elif name == "memory":
            memory = amount
        elif name == "pods":
            pods = amount
        else:
            extended[name] = amount
    return Resources(cpu, memory, pods, dict(sorted(extended.items())))


@dataclass(frozen=True)
class NodeInfo:
    """One node: `allocatable` is what it offers, `requested` what bound (or assumed) pods ask of it."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    allocatable: Resources = Resources()
    requested: Resources = Resources()
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    """`spec.taints` and the lifecycle taints its conditions stand for (`taints.node_taints`)."""


def node_info(node: Mapping[str, Any], bound: Iterable[Resources] = ()) -> NodeInfo:
    """A Node wire dict and the requests of the pods bound to it (e.g. `PodInfo.requests`)."""
    metadata = node.get("metadata") or {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise errors.Invalid.field("metadata.name", "required, a non-empty string")
    labels = metadata.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise errors.Invalid.field("metadata.labels", "must be a mapping")
    status = node.get("status") or {}
    amounts = status.get("allocatable")
    path = "status.allocatable"
    if amounts is None:
        amounts, path = status.get("capacity"), "status.capacity"
    allocatable = resources_of(amounts, path)
    if not isinstance(amounts, Mapping) or "pods" not in amounts:
        allocatable = Resources(allocatable.cpu, allocatable.memory, DEFAULT_MAX_PODS, allocatable.extended)
    requested = Resources()
    for pod in bound:
        requested = requested + pod
    spec = node.get("spec") or {}
    unschedulable = bool(spec.get("unschedulable", False)) if isinstance(spec, Mapping) else False
    return NodeInfo(name, dict(labels), allocatable, requested, unschedulable, node_taints(node))


def availability_message(total: int, reasons: Iterable[str]) -> str:
    """`0/<total> nodes are available: <n> <reason>, ...` with counts descending, then reasons in order."""
    counts = Counter(reasons)
    if not counts:
        return f"0/{total} nodes are available."
    parts = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return f"0/{total} nodes are available: " + ", ".join(f"{n} {reason}" for reason, n in parts) + "."
