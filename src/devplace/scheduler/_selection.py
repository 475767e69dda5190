"""Device selection: which devices serve a pod's class requests on a node, for one pod or for a batch.

Pure: a `DeviceIndex` is built once per snapshot of devices and classes; decisions read it and a map of slots already
taken by assumed pods (`taken`), and return values. Nothing here mutates its inputs.

The rules:
- A pod asking N devices of class C gets N *distinct* devices that C matches and that are visible from the node, one
  free slot each (DESIGN.md section 4: a pod never gets two slots of one Instance). This holds across classes: a pod
  asking for two classes whose device sets overlap never gets the same device twice. A device with k free slots
  serves up to k different pods.
- A node offers at most what its Node advertises (`Device.limits`, set by the scheduler's shell from the Node's
  allocatable): where that is fewer than the device's free slots, a decision on that node counts the slots already
  promised there (`here`). Limits are transient (a kubelet's Node catching up with the Instance); the batch max flow of
  `optimal` does not model them (the greedy batch and every single-pod decision do).
- Strategies order the devices a class may use: `firstFit` by name (seed 003), `binpack` fewest free slots first (keeps
  whole devices free for pods that need them), `spread` most free slots first. For a single pod `optimal` orders like
  `binpack`; its real meaning is for a batch (`place_batch`).

Complexity, and why it never goes exponential (kubernetes#131730: DRA's allocator backtracks over permutations of
identical devices, D!/(D-k)! when no allocation exists):
- one class: count the class's free devices on the node (O(devices)); too few is a refusal with a reason, enough is
  the first N in strategy order (O(devices log devices) at worst);
- several classes: devices are grouped by *signature* (which of the pod's classes match them); a max flow from classes
  to groups (`flows.Network`, at most 2^k groups for k classes, and never more groups than devices) decides exactly
  whether distinct devices exist and how many each class takes from each group; then each class takes its share in
  strategy order. O(devices + flow on a tiny network). Every refusal reports how many devices were examined.
- a batch, `optimal`: pods asking one device each are placed by one max flow from *pod groups* (same class, same
  candidate nodes) to *device groups* (same matching classes, same visibility), capacities being free slots: the
  number placed is the maximum possible. Pods asking several devices are then placed greedily, smallest first, and the
  result is compared with the greedy strategies' (the best is kept), so `optimal` never places fewer pods than they do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from devplace.scheduler._classes import ResolvedClass, Strategy
from devplace.scheduler._devices import Device
from devplace.scheduler._flows import Network
from devplace.scheduler._nodes import availability_message

_V = TypeVar("_V")
_NONE: Mapping[str, int] = {}
_UNCAPPED = 1 << 62
_NO_MATCHES: Mapping[str, tuple[str, ...]] = {}


class DeviceIndex:
    """Devices and classes of one snapshot, precomputed for the hot paths. Treat as immutable.

    - `devices`: by name, in name order; `free`: free slots per device in the snapshot;
    - `classes_of`: per device, the classes that match it (each selector evaluated once per device and class);
    - `matching`: per node, per class, the names of the matching devices visible from the node, in name order;
    - `usable`: per node, per class, how many of those have a free slot;
    - `limits`: per node, per device, how many slots the node offers where fewer than free (`Device.limits`);
    - `waiting`: per node, per class, how many matching devices with a free slot the node lists but does not offer
      yet (`Device.waiting`), for the reasons.
    Building costs O(devices x classes x selector size + devices x nodes seeing them).
    """

    __slots__ = ("classes", "classes_of", "devices", "free", "limits", "matching", "usable", "waiting")

    def __init__(
        self,
        devices: Iterable[Device],
        classes: Mapping[str, ResolvedClass],
        known: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        """`known`: the classes that match some devices, by device name, already evaluated against these very
        classes and attributes (a caller rebuilding the index after slots changed skips the selectors)."""
        self.devices: dict[str, Device] = {d.name: d for d in sorted(devices, key=lambda d: d.name)}
        self.classes: Mapping[str, ResolvedClass] = dict(sorted(classes.items()))
        self.free: dict[str, int] = {name: d.free for name, d in self.devices.items()}
        self.classes_of: dict[str, frozenset[str]] = {}
        matching: dict[str, dict[str, list[str]]] = {}
        usable: dict[str, dict[str, int]] = {}
        self.limits: dict[str, dict[str, int]] = {}
        self.waiting: dict[str, dict[str, int]] = {}
        known = known or {}
        for name, device in self.devices.items():
            mine = known.get(name)
            if mine is None:
                mine = frozenset(c for c, cls in self.classes.items() if cls.matches(device.attributes))
            self.classes_of[name] = mine
            for node, cap in device.limits.items():
                self.limits.setdefault(node, {})[name] = cap
            if device.waiting and mine and device.free > 0:
                for node in device.waiting:
                    waits = self.waiting.setdefault(node, {})
                    for c in mine:
                        waits[c] = waits.get(c, 0) + 1
            for node in sorted(device.nodes):
                per_class = matching.setdefault(node, {})
                counts = usable.setdefault(node, {})
                for c in sorted(mine):
                    per_class.setdefault(c, []).append(name)
                    counts[c] = counts.get(c, 0) + (1 if device.free > 0 else 0)
        self.matching: dict[str, dict[str, tuple[str, ...]]] = {
            node: {c: tuple(names) for c, names in per.items()} for node, per in matching.items()
        }
        self.usable: dict[str, dict[str, int]] = usable

    def matches_any(self, node: str, cls: str) -> bool:
        return bool(self.matching.get(node, _NONE).get(cls))

    def shortfall(self, node: str, cls: str, want: int, have: int) -> str:
        """Why `node` cannot give `want` devices of `cls` when it has `have`: none matches, or too few are free
        (and how many more the node lists but does not offer in its allocatable)."""
        waiting = self.waiting.get(node, _NONE).get(cls, 0)
        if not waiting and not self.matching.get(node, _NO_MATCHES).get(cls):
            return f"no device matches class {cls}"
        reason = f"insufficient devices for class {cls}: want {want}, {max(0, have)} free"
        return f"{reason}, {waiting} not in the node's allocatable" if waiting else reason


@dataclass(frozen=True)
class Pick:
    """`count` slots of `device` serve class `cls` (the binding annotation `resClass_<cls>_<device>=<count>`)."""

    cls: str
    device: str
    count: int = 1


@dataclass(frozen=True)
class Selection:
    picks: tuple[Pick, ...] = ()
    examined: int = 0
    """How many (device, class) candidates were looked at: linear in the devices, whatever the outcome."""

    def slots(self) -> dict[str, int]:
        """Slots taken per device."""
        out: dict[str, int] = {}
        for pick in self.picks:
            out[pick.device] = out.get(pick.device, 0) + pick.count
        return out


@dataclass(frozen=True)
class Refusal:
    reason: str
    examined: int = 0


def _ordered(
    devices: Sequence[str], strategy: Strategy, free: Mapping[str, int], taken: Mapping[str, int]
) -> list[str]:
    if strategy == "firstFit":
        return list(devices)  # already in name order
    if strategy == "spread":
        return sorted(devices, key=lambda d: (taken.get(d, 0) - free[d], d))
    return sorted(devices, key=lambda d: (free[d] - taken.get(d, 0), d))  # binpack, and optimal for one pod


def _strategy(strategies: Mapping[str, Strategy] | Strategy, cls: str) -> Strategy:
    return strategies if isinstance(strategies, str) else strategies.get(cls, "firstFit")


def select_devices(
    requests: Mapping[str, int],
    node: str,
    index: DeviceIndex,
    taken: Mapping[str, int] = _NONE,
    strategies: Mapping[str, Strategy] | Strategy = "firstFit",
    here: Mapping[str, int] = _NONE,
) -> Selection | Refusal:
    """Devices for `requests` (class -> count) on `node`, or a refusal saying which class fell short and by how much.

    `taken` holds slots already promised to assumed pods, `here` those promised on this node (read only where the
    node offers a device fewer slots than it has free: `DeviceIndex.limits`); `strategies` is one strategy or one per
    class.
    """
    matching = index.matching.get(node, _NO_MATCHES)
    free = index.free
    caps = index.limits.get(node)
    examined = 0
    pools: dict[str, list[str]] = {}
    classes = sorted(c for c, n in requests.items() if n > 0)
    for c in classes:
        want = requests[c]
        candidates = matching.get(c, ())
        if not candidates:
            return Refusal(index.shortfall(node, c, want, 0), examined)
        strategy = _strategy(strategies, c)
        usable: list[str] = []
        for d in candidates:
            examined += 1
            if free[d] - taken.get(d, 0) > 0 and (caps is None or caps.get(d, _UNCAPPED) - here.get(d, 0) > 0):
                usable.append(d)
                if strategy == "firstFit" and len(classes) == 1 and len(usable) == want:
                    break  # the first `want` in name order is the answer
        if len(usable) < want:
            return Refusal(index.shortfall(node, c, want, len(usable)), examined)
        pools[c] = usable
    if len(classes) <= 1:
        picks = tuple(
            Pick(c, d)
            for c in classes
            for d in sorted(_ordered(pools[c], _strategy(strategies, c), free, taken)[: requests[c]])
        )
        return Selection(picks, examined)
    return _select_distinct(requests, classes, pools, free, taken, strategies, examined)


def _select_distinct(
    requests: Mapping[str, int],
    classes: list[str],
    pools: dict[str, list[str]],
    free: Mapping[str, int],
    taken: Mapping[str, int],
    strategies: Mapping[str, Strategy] | Strategy,
    examined: int,
) -> Selection | Refusal:
    """Several classes: group devices by signature, max flow classes -> groups, then fill in strategy order."""
    signature: dict[str, list[str]] = {}
    for c in classes:
        for d in pools[c]:
            signature.setdefault(d, []).append(c)
    groups: dict[tuple[str, ...], list[str]] = {}
    for d in sorted(signature):
        groups.setdefault(tuple(signature[d]), []).append(d)
    order = sorted(groups, key=lambda sig: (len(sig), sig))  # narrow groups first: keep shared devices for later
    total = sum(requests[c] for c in classes)
    net = Network(2 + len(classes) + len(order))
    source, sink = 0, 1
    class_vertex = {c: 2 + i for i, c in enumerate(classes)}
    for c in classes:
        net.edge(source, class_vertex[c], requests[c])
    edges: dict[tuple[str, tuple[str, ...]], int] = {}
    for g, sig in enumerate(order):
        vertex = 2 + len(classes) + g
        size = len(groups[sig])
        for c in sig:
            edges[c, sig] = net.edge(class_vertex[c], vertex, size)
        net.edge(vertex, sink, size)
    if net.max_flow(source, sink) < total:
        return Refusal(
            f"insufficient devices for classes {', '.join(classes)}: want {total} distinct, {len(signature)} free",
            examined,
        )
    used: set[str] = set()
    picks: list[Pick] = []
    for c in classes:
        strategy = _strategy(strategies, c)
        for sig in order:
            share = net.flow(edges[c, sig]) if (c, sig) in edges else 0
            if not share:
                continue
            for d in _ordered(groups[sig], strategy, free, taken):
                if d not in used:
                    used.add(d)
                    picks.append(Pick(c, d))
                    share -= 1
                    if not share:
                        break
    return Selection(tuple(sorted(picks, key=lambda p: (p.cls, p.device))), examined)


# ---------------------------------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchPod:
    """A pod of a batch: its class requests and the nodes it may go to (those its other filters accept)."""

    key: str
    requests: Mapping[str, int]
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Placement:
    node: str
    selection: Selection


@dataclass(frozen=True)
class BatchResult:
    placed: Mapping[str, Placement]
    refused: Mapping[str, str]
    strategy: Strategy

    @property
    def count(self) -> int:
        return len(self.placed)


def place_batch(
    pods: Sequence[BatchPod], index: DeviceIndex, strategy: Strategy, taken: Mapping[str, int] = _NONE
) -> BatchResult:
    """Place a batch: greedily pod by pod in order (firstFit, binpack, spread) or by max flow (optimal)."""
    if strategy == "optimal":
        return _optimal(pods, index, taken)
    return _greedy(pods, index, strategy, dict(taken))


def _commit(index: DeviceIndex, taken: dict[str, int], usable: dict[str, dict[str, int]], selection: Selection) -> None:
    for d, n in selection.slots().items():
        before = index.free[d] - taken.get(d, 0)
        taken[d] = taken.get(d, 0) + n
        if before > 0 >= before - n:
            for node in index.devices[d].nodes:
                counts = usable.setdefault(node, dict(index.usable.get(node, _NONE)))
                for c in index.classes_of[d]:
                    counts[c] = counts.get(c, 0) - 1


def _greedy(pods: Sequence[BatchPod], index: DeviceIndex, strategy: Strategy, taken: dict[str, int]) -> BatchResult:
    placed: dict[str, Placement] = {}
    refused: dict[str, str] = {}
    usable: dict[str, dict[str, int]] = {}  # copies of index.usable for the nodes this batch changed

    def room(node: str, pod: BatchPod) -> int:
        counts: Mapping[str, int] | None = usable.get(node)
        if counts is None:
            counts = index.usable.get(node, _NONE)
        return sum(counts.get(c, 0) for c in pod.requests)

    here: dict[str, dict[str, int]] = {}  # slots this batch took per node, for nodes with limits
    for pod in pods:
        nodes = sorted(pod.nodes)
        if strategy == "binpack":
            nodes.sort(key=lambda n: room(n, pod))
        elif strategy == "spread":
            nodes.sort(key=lambda n: -room(n, pod))
        reasons: list[str] = []
        for node in nodes:
            decision = select_devices(pod.requests, node, index, taken, strategy, here.get(node, _NONE))
            if isinstance(decision, Selection):
                _commit(index, taken, usable, decision)
                if node in index.limits:
                    mine = here.setdefault(node, {})
                    for d, n in decision.slots().items():
                        mine[d] = mine.get(d, 0) + n
                placed[pod.key] = Placement(node, decision)
                break
            reasons.append(decision.reason)
        else:
            refused[pod.key] = availability_message(len(nodes), reasons)
    return BatchResult(placed, refused, strategy)


def _optimal(pods: Sequence[BatchPod], index: DeviceIndex, taken_before: Mapping[str, int]) -> BatchResult:
    taken = dict(taken_before)
    placed: dict[str, Placement] = {}
    refused: dict[str, str] = {}
    singles = [p for p in pods if sum(p.requests.values()) == 1]
    others: list[BatchPod] = []
    for pod in pods:
        if sum(pod.requests.values()) == 0:
            if pod.nodes:
                placed[pod.key] = Placement(min(pod.nodes), Selection())
            else:
                refused[pod.key] = availability_message(0, [])
        elif sum(pod.requests.values()) > 1:
            others.append(pod)
    _flow_singles(singles, index, taken, placed, refused)
    if others:
        position = {p.key: i for i, p in enumerate(pods)}
        ranked = sorted(others, key=lambda p: (sum(p.requests.values()), position[p.key]))
        rest = _greedy(ranked, index, "binpack", taken)
        placed.update(rest.placed)
        refused.update(rest.refused)
    result = BatchResult(_in_order(pods, placed), _in_order(pods, refused), "optimal")
    if not others:
        return result  # the flow alone is a maximum
    for strategy in ("firstFit", "binpack", "spread"):
        alternative = _greedy(pods, index, strategy, dict(taken_before))
        if alternative.count > result.count:
            result = BatchResult(alternative.placed, alternative.refused, "optimal")
    return result


def _in_order(pods: Sequence[BatchPod], values: Mapping[str, _V]) -> dict[str, _V]:
    return {p.key: values[p.key] for p in pods if p.key in values}


def _flow_singles(
    pods: Sequence[BatchPod],
    index: DeviceIndex,
    taken: dict[str, int],
    placed: dict[str, Placement],
    refused: dict[str, str],
) -> None:
    """Pods asking one device each: one max flow, pod groups -> device groups (see the module docstring)."""
    if not pods:
        return
    PodGroup = tuple[str, frozenset[str]]  # (class, candidate nodes)
    DeviceGroup = tuple[tuple[str, ...], frozenset[str]]  # (matching classes of the batch, nodes that see it)
    pod_groups: dict[PodGroup, list[BatchPod]] = {}
    for pod in pods:
        (wanted_class,) = (c for c, n in pod.requests.items() if n > 0)
        pod_groups.setdefault((wanted_class, frozenset(pod.nodes)), []).append(pod)
    wanted = {c for c, _ in pod_groups}
    device_groups: dict[DeviceGroup, list[str]] = {}
    for name, device in index.devices.items():
        if index.free[name] - taken.get(name, 0) <= 0:
            continue
        sig = tuple(sorted(index.classes_of[name] & wanted))
        if sig:
            device_groups.setdefault((sig, device.nodes), []).append(name)
    by_class: dict[str, list[DeviceGroup]] = {}
    for dg in sorted(device_groups, key=lambda k: (len(k[0]), k[0], sorted(k[1]))):
        for c in dg[0]:
            by_class.setdefault(c, []).append(dg)
    pg_keys = list(pod_groups)
    dg_vertex = {dg: 2 + len(pg_keys) + i for i, dg in enumerate(device_groups)}
    net = Network(2 + len(pg_keys) + len(device_groups))
    source, sink = 0, 1
    edges: list[list[tuple[DeviceGroup, int]]] = []
    for i, (cls, nodes) in enumerate(pg_keys):
        size = len(pod_groups[cls, nodes])
        net.edge(source, 2 + i, size)
        edges.append(
            [(dg, net.edge(2 + i, dg_vertex[dg], size)) for dg in by_class.get(cls, []) if not nodes.isdisjoint(dg[1])]
        )
    for dg, vertex in dg_vertex.items():
        net.edge(vertex, sink, sum(index.free[d] - taken.get(d, 0) for d in device_groups[dg]))
    net.max_flow(source, sink)
    # decompose: each device group hands out its devices fullest-first (binpack), so whole devices stay free
    queues = {
        dg: sorted(names, key=lambda d: (index.free[d] - taken.get(d, 0), d)) for dg, names in device_groups.items()
    }
    heads = dict.fromkeys(device_groups, 0)
    for i, (cls, nodes) in enumerate(pg_keys):
        members = pod_groups[cls, nodes]
        m = 0
        for dg, e in edges[i]:
            queue = queues[dg]
            for _ in range(net.flow(e)):
                while index.free[queue[heads[dg]]] - taken.get(queue[heads[dg]], 0) <= 0:
                    heads[dg] += 1
                chosen = queue[heads[dg]]
                taken[chosen] = taken.get(chosen, 0) + 1
                node = min(nodes & index.devices[chosen].nodes)
                placed[members[m].key] = Placement(node, Selection((Pick(cls, chosen),), 1))
                m += 1
        for pod in members[m:]:
            refused[pod.key] = f"insufficient devices for class {cls}: every free matching slot on its nodes is taken"
