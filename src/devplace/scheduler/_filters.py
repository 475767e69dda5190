"""Filter plugins: may this pod go to this node? Each says yes (None) or a short reason.

Shape (Kubernetes' PreFilter + Filter in one): `prepare(pod, context)` runs once per pod and returns a check
specialised to what the pod asks for, or None when the plugin has nothing to check (a pod without a nodeSelector
skips the selector plugin entirely). The check then runs once per node: O(1) for every built-in plugin except a pod
asking for several classes, which runs the exact distinct-device check of `selection` (O(devices on the node)).

Checks receive the *effective* NodeInfo (bound pods plus assumed ones). Reasons are the words of
`availability_message`: `node(s) were unschedulable`, `node(s) didn't match node selector`, `too many pods`,
`insufficient cpu`, `insufficient memory`, `insufficient <resource>`, `no device matches class <c>`,
`insufficient devices for class <c>: want <n>, <m> free`. A node reports the reason of the first plugin that refuses
it, so the order of `DEFAULT_FILTERS` is the order reasons win in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from devplace.scheduler._assumptions import Assumed
from devplace.scheduler._classes import Strategy
from devplace.scheduler._nodes import NodeInfo
from devplace.scheduler._pods import PodInfo
from devplace.scheduler._selection import DeviceIndex, Refusal, select_devices

NodeCheck = Callable[[NodeInfo], str | None]
"""None when the node passes, else the reason it does not."""


@dataclass(frozen=True)
class Context:
    """What plugins may read besides the pod and the node: the device index and the assumed cache."""

    devices: DeviceIndex
    assumed: Assumed
    strategies: Mapping[str, Strategy]
    """The selection strategy of each class the pod asks for."""


class Filter(Protocol):
    name: str

    def prepare(self, pod: PodInfo, context: Context) -> NodeCheck | None: ...


class NodeUnschedulable:
    """Nodes marked `spec.unschedulable` (cordoned) take no new pods."""

    name = "NodeUnschedulable"

    def prepare(self, pod: PodInfo, context: Context) -> NodeCheck | None:
        return lambda node: "node(s) were unschedulable" if node.unschedulable else None


class NodeSelectorFit:
    """`spec.nodeSelector` (every label equal) and the required node affinity (terms ORed, expressions ANDed)."""

    name = "NodeAffinity"
    reason = "node(s) didn't match node selector"

    def prepare(self, pod: PodInfo, context: Context) -> NodeCheck | None:
        selector = tuple(pod.node_selector.items())
        affinity = pod.affinity
        if not selector and affinity is None:
            return None
        reason = self.reason

        def check(node: NodeInfo) -> str | None:
            labels = node.labels
            for key, value in selector:
                if labels.get(key) != value:
                    return reason
            if affinity is not None and not affinity.matches(labels, node.name):
                return reason
            return None

        return check


class PodCountFit:
    """A node holds at most `allocatable.pods` pods."""

    name = "PodCount"

    def prepare(self, pod: PodInfo, context: Context) -> NodeCheck | None:
        want = pod.requests.pods or 1
        return lambda node: "too many pods" if node.requested.pods + want > node.allocatable.pods else None


class ResourcesFit:
    """cpu, memory and every other named resource (extended resources, hugepages): allocatable minus requested."""

    name = "NodeResourcesFit"

    def prepare(self, pod: PodInfo, context: Context) -> NodeCheck | None:
        cpu, memory = pod.requests.cpu, pod.requests.memory
        extended = tuple((name, n, f"insufficient {name}") for name, n in pod.requests.extended.items() if n > 0)
        if not cpu and not memory and not extended:
            return None

        def check(node: NodeInfo) -> str | None:
            alloc, used = node.allocatable, node.requested
            if cpu and used.cpu + cpu > alloc.cpu:
                return "insufficient cpu"
            if memory and used.memory + memory > alloc.memory:
                return "insufficient memory"
            for name, n, reason in extended:
                if used.extended.get(name, 0) + n > alloc.extended.get(name, 0):
                    return reason
            return None

        return check


class ResourceClassFit:
    """Enough distinct free devices of each requested class visible from the node (assumed slots taken out)."""

    name = "ResourceClasses"

    def prepare(self, pod: PodInfo, context: Context) -> NodeCheck | None:
        wanted = tuple((c, n) for c, n in sorted(pod.classes.items()) if n > 0)
        if not wanted:
            return None
        index, assumed = context.devices, context.assumed
        usable_all, matching = index.usable, index.matching
        empty: Mapping[str, int] = {}
        several = len(wanted) > 1
        requests = dict(wanted)

        lost_all = assumed.lost_by_node(index)  # the decision does not change `assumed` while it runs

        def check(node: NodeInfo) -> str | None:
            name = node.name
            usable = usable_all.get(name, empty)
            lost = lost_all.get(name, empty)
            for c, n in wanted:
                have = usable.get(c, 0) - lost.get(c, 0)
                if have < n:
                    if not matching.get(name, empty).get(c):
                        return f"no device matches class {c}"
                    return f"insufficient devices for class {c}: want {n}, {have} free"
            if several:
                decision = select_devices(requests, name, index, assumed.taken, "firstFit")
                if isinstance(decision, Refusal):
                    return decision.reason
            return None

        return check


DEFAULT_FILTERS: tuple[Filter, ...] = (
    NodeUnschedulable(),
    NodeSelectorFit(),
    PodCountFit(),
    ResourcesFit(),
    ResourceClassFit(),
)
