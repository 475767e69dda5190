"""The assumed-allocation cache: what the scheduler has decided but the snapshot does not show yet.

Kubernetes' scheduler "assumes" a pod on its node the moment it decides, before the binding is written, so the next
decision already sees the node's capacity taken. Devices need the same: between the binding and the kubelet's
Allocate (which marks the slot held on the Instance), a slot is promised but still reads as free. `Assumed` keeps both.

No I/O; a small class with explicit methods, mutated only through them:
- `assume(pod, node, slots, index)` after a decision: the node's requests grow by the pod's, each device's free slots
  shrink by what the pod was given;
- `observed_bound(key)` once the snapshot's NodeInfo counts the bound pod: the node part is dropped (else it would be
  counted twice), the device part stays until the slots show as held;
- `forget(key)` once the Instances show the slots held (or the pod is gone, or binding failed): everything is dropped.
Forgetting devices early could double-book a slot between the binding and Allocate; forgetting late only under-uses.

Reads are what the hot paths need, each O(1): `node(base)` the effective NodeInfo (cached per node while its base
object is unchanged), `taken` per device, `taken_on(node)` per device for the pods assumed on that node, and
`lost(index, node)`: per class, how many of the node's matching devices the assumptions have emptied, kept
incrementally for the index it was last asked about (a new index, from a new snapshot, rebuilds it from `taken`:
O(assumed devices x nodes x classes)).

Generations, for decisions that remember per-node verdicts (`decisions.Memo`): `generations[node]` changes whenever
an assumption changes what the node offers (its requests, or the slots of a device it sees); `epoch` changes when a
change cannot be pinned to nodes (slots taken without the index that says which nodes see the device). A verdict or
score computed for a node at generation g and epoch e is still exact while both read the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from devplace.scheduler._nodes import NodeInfo, Resources
from devplace.scheduler._pods import PodInfo
from devplace.scheduler._selection import DeviceIndex

_EMPTY: Mapping[str, int] = {}


@dataclass(frozen=True)
class AssumedPod:
    key: str
    node: str
    requests: Resources
    slots: Mapping[str, int] = field(default_factory=dict, hash=False)
    node_counted: bool = True
    """True while the snapshot's NodeInfo does not count the pod yet."""


class Assumed:
    """Decided pods not yet reflected in the snapshot (see the module docstring)."""

    __slots__ = (
        "_effective",
        "_extra",
        "_generations",
        "_lost",
        "_lost_index",
        "_pods",
        "_taken",
        "_taken_at",
        "_tick",
        "epoch",
    )

    def __init__(self) -> None:
        self._pods: dict[str, AssumedPod] = {}
        self._extra: dict[str, Resources] = {}
        self._taken: dict[str, int] = {}
        self._taken_at: dict[str, dict[str, int]] = {}
        self._effective: dict[str, tuple[NodeInfo, NodeInfo]] = {}
        self._lost: dict[str, dict[str, int]] = {}
        self._lost_index: DeviceIndex | None = None
        self._generations: dict[str, int] = {}
        self._tick = 0
        self.epoch = 0
        """Changes when assumptions changed in a way not pinned to nodes (module docstring)."""

    def __contains__(self, key: object) -> bool:
        return key in self._pods

    def __len__(self) -> int:
        return len(self._pods)

    def pods(self) -> list[AssumedPod]:
        return [self._pods[k] for k in sorted(self._pods)]

    @property
    def nodes(self) -> Mapping[str, Resources]:
        """Per node with assumed pods, what they add: a node not in it is its base NodeInfo (the hot-path test)."""
        return self._extra

    @property
    def generations(self) -> Mapping[str, int]:
        """Per node, a number that changes whenever assumptions change what the node offers (absent: never did)."""
        return self._generations

    @property
    def taken(self) -> Mapping[str, int]:
        """Slots promised to assumed pods, per device."""
        return self._taken

    def taken_on(self, node: str) -> Mapping[str, int]:
        """Slots promised to the pods assumed on `node`, per device."""
        return self._taken_at.get(node, _EMPTY)

    def assume(self, pod: PodInfo, node: str, slots: Mapping[str, int], index: DeviceIndex | None = None) -> None:
        """Record a decision. Assuming a pod twice replaces the first record."""
        if pod.key in self._pods:
            self.forget(pod.key)
        record = AssumedPod(pod.key, node, pod.requests, dict(slots))
        self._pods[pod.key] = record
        self._add_node(node, pod.requests)
        for device, n in slots.items():
            self._take(device, n, index)
        if slots:
            self._take_at(node, slots, 1)

    def observed_bound(self, key: str) -> None:
        """The snapshot now counts the pod on its node: stop adding its requests there (devices stay assumed)."""
        record = self._pods.get(key)
        if record is None or not record.node_counted:
            return
        self._add_node(record.node, Resources() - record.requests)
        self._pods[key] = AssumedPod(record.key, record.node, record.requests, record.slots, node_counted=False)
        if not record.slots:
            del self._pods[key]

    def forget(self, key: str) -> None:
        """Drop the pod's assumption entirely (its slots show as held, it was deleted, or its binding failed)."""
        record = self._pods.pop(key, None)
        if record is None:
            return
        if record.node_counted:
            self._add_node(record.node, Resources() - record.requests)
        for device, n in record.slots.items():
            self._take(device, -n, self._lost_index)
        if record.slots:
            self._take_at(record.node, record.slots, -1)

    def node(self, base: NodeInfo) -> NodeInfo:
        """`base` with the requests of the pods assumed on it added."""
        extra = self._extra.get(base.name)
        if extra is None:
            return base
        cached = self._effective.get(base.name)
        if cached is not None and cached[0] is base:
            return cached[1]
        effective = NodeInfo(
            base.name, base.labels, base.allocatable, base.requested + extra, base.unschedulable, base.taints
        )
        self._effective[base.name] = (base, effective)
        return effective

    def lost(self, index: DeviceIndex, node: str) -> Mapping[str, int]:
        """Per class, how many of `node`'s matching devices that have a free slot in `index` the assumptions empty."""
        if index is not self._lost_index:
            self._rebuild_lost(index)
        return self._lost.get(node, _EMPTY)

    def lost_by_node(self, index: DeviceIndex) -> Mapping[str, Mapping[str, int]]:
        """`lost` for every node at once (a node absent has lost nothing); read once per decision, not per node."""
        if index is not self._lost_index:
            self._rebuild_lost(index)
        return self._lost

    # -----------------------------------------------------------------------------------------------------------

    def _add_node(self, node: str, delta: Resources) -> None:
        total = self._extra.get(node, Resources()) + delta
        if total.cpu == total.memory == total.pods == 0 and not any(total.extended.values()):
            self._extra.pop(node, None)
        else:
            self._extra[node] = total
        self._effective.pop(node, None)
        self._tick += 1
        self._generations[node] = self._tick

    def _take_at(self, node: str, slots: Mapping[str, int], sign: int) -> None:
        mine = self._taken_at.setdefault(node, {})
        for device, n in slots.items():
            after = mine.get(device, 0) + sign * n
            if after:
                mine[device] = after
            else:
                mine.pop(device, None)
        if not mine:
            del self._taken_at[node]

    def _take(self, device: str, n: int, index: DeviceIndex | None) -> None:
        before = self._taken.get(device, 0)
        after = before + n
        if after:
            self._taken[device] = after
        else:
            self._taken.pop(device, None)
        if index is not None and device in index.devices:
            self._tick += 1
            for node in index.devices[device].nodes:
                self._generations[node] = self._tick
        else:
            self.epoch += 1
        if index is None or index is not self._lost_index or device not in index.free:
            self._lost_index = None  # rebuilt on the next read
            return
        free = index.free[device]
        was_lost, is_lost = free > 0 and free - before <= 0, free > 0 and free - after <= 0
        if was_lost != is_lost:
            self._count_lost(index, device, 1 if is_lost else -1)

    def _count_lost(self, index: DeviceIndex, device: str, delta: int) -> None:
        for node in index.devices[device].nodes:
            per_class = self._lost.setdefault(node, {})
            for c in index.classes_of[device]:
                per_class[c] = per_class.get(c, 0) + delta

    def _rebuild_lost(self, index: DeviceIndex) -> None:
        self._lost = {}
        self._lost_index = index
        for device, n in self._taken.items():
            free = index.free.get(device, 0)
            if free > 0 and free - n <= 0:
                self._count_lost(index, device, 1)
