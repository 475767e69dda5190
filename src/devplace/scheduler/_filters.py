"""Filter plugins: may this pod go to this node? Each says yes (None) or a short reason.

Shape (Kubernetes' PreFilter + Filter in one): `prepare(pod, context)` runs once per pod and returns a check
specialised to what the pod asks for, or None when the plugin has nothing to check (a pod without a nodeSelector
skips the selector plugin entirely). The check then runs once per node: O(1) for every built-in plugin except a pod
asking for several classes, which runs the exact distinct-device check of `selection` (O(devices on the node)).

Checks receive the *effective* NodeInfo (bound pods plus assumed ones). Reasons are the words of
`availability_message`, kube-scheduler's where it has one: `node(s) were unschedulable`,
`node(s) had untolerated taint {<key>: <value>}`, `node(s) didn't match node selector`, `too many pods`,
`insufficient cpu`, `insufficient memory`, `insufficient <resource>`, `no device matches class <c>`,
`insufficient devices for class <c>: want <n>, <m> free` (with `, <k> not in the node's allocatable` when devices of
the class that the node lists are not offered by its kubelet: see `selection`). A node reports the reason of the
first plugin that refuses it, so the order of `DEFAULT_FILTERS` is the order reasons win in: kube-scheduler's
(NodeUnschedulable, TaintToleration, NodeAffinity, then the resources).

NodeUnschedulable and TaintToleration are kube-scheduler's (`taints` holds the matching rules): a cordoned node
(`spec.unschedulable`) takes only pods tolerating `node.kubernetes.io/unschedulable:NoSchedule`; a NoSchedule or
NoExecute taint no toleration of the pod tolerates refuses the node, naming the first such taint.
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
from devplace.scheduler._taints import (
    EFFECTS,
    NO_EXECUTE,
    NO_SCHEDULE,
    UNSCHEDULABLE_TAINT,
    first_untolerated,
    tolerated,
    untolerated_reason,
)

EVERY_EFFECT = frozenset(EFFECTS)

NodeCheck = Callable[[NodeInfo], str | None]
"""None when the node passes, else the reason it does not."""


@dataclass(frozen=True)
class Context:
    """What plugins may read besides the pod and the node: the device index and the assumed cache."""

    devices: DeviceIndex
    assumed: Assumed
    strategies: Mapping[str, Strategy]
    """The selection strategy of each class the pod asks for."""
    taint_effects: frozenset[str] = EVERY_EFFECT
    """The effects of the taints some node of the snapshot has: a taint plugin with none to read abstains."""


class Filter(Protocol):
    name: str

    def prepare(self, pod: PodInfo, context: Context) -> NodeCheck | None: ...


class NodeUnschedulable:
    """Nodes marked `spec.unschedulable` (cordoned) take no new pods but those tolerating
    `node.kubernetes.io/unschedulable:NoSchedule`."""

    name = "NodeUnschedulable"
    reason = "node(s) were unschedulable"

    def prepare(self, pod: PodInfo, context: Context) -> NodeCheck | None:
        if NO_SCHEDULE not in context.taint_effects:
            return None  # no node is cordoned (`decisions.Snapshot.taint_effects`)
        if pod.tolerations and tolerated(pod.tolerations, UNSCHEDULABLE_TAINT):
            return None
        reason = self.reason
        return lambda node: reason if node.unschedulable else None


class TaintToleration:
    """A node's NoSchedule and NoExecute taints must each be tolerated by the pod (`taints`)."""

    name = "TaintToleration"

    def prepare(self, pod: PodInfo, context: Context) -> NodeCheck | None:
        if NO_SCHEDULE not in context.taint_effects and NO_EXECUTE not in context.taint_effects:
            return None
        tolerations = pod.tolerations

        def check(node: NodeInfo) -> str | None:
            taints = node.taints
            if not taints:
                return None
            taint = first_untolerated(taints, tolerations)
            return None if taint is None else untolerated_reason(taint)

        return check


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
    """Enough distinct free devices of each requested class that the node offers (assumed slots taken out).

    The counts (`DeviceIndex.usable` less what assumptions emptied) are an upper bound; where they cannot be exact
    (several classes, or a node offering a device fewer slots than it has free) the exact selection decides."""

    name = "ResourceClasses"

    def prepare(self, pod: PodInfo, context: Context) -> NodeCheck | None:
        wanted = tuple((c, n) for c, n in sorted(pod.classes.items()) if n > 0)
        if not wanted:
            return None
        index, assumed = context.devices, context.assumed
        usable_all, limits = index.usable, index.limits
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
                    return index.shortfall(name, c, n, have)
            if several or name in limits:
                decision = select_devices(requests, name, index, assumed.taken, "firstFit", assumed.taken_on(name))
                if isinstance(decision, Refusal):
                    return decision.reason
            return None

        return check


DEFAULT_FILTERS: tuple[Filter, ...] = (
    NodeUnschedulable(),
    TaintToleration(),
    NodeSelectorFit(),
    PodCountFit(),
    ResourcesFit(),
    ResourceClassFit(),
)
