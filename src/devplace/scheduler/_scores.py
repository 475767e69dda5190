"""Score plugins: how good is this feasible node for this pod? Integers 0..100, weighted, summed.

Like filters, `prepare(pod, context)` runs once per pod and returns a per-node function (or None to abstain).
The framework picks the highest total; ties go to the node whose name sorts first, so a decision never depends on
iteration order or randomness (Kubernetes picks among ties at random).

- `LeastAllocated` (Kubernetes' NodeResourcesFit default): mean over cpu and memory of the free fraction left after
  placing the pod. Spreads load.
- `BalancedAllocation`: 100 x (1 - |cpu fraction - memory fraction| / 2) after placing the pod, as Kubernetes computes
  the standard deviation of two fractions. Avoids nodes with stranded cpu or memory.
- `DeviceFit`: follows each requested class's strategy at the node level: `binpack` (and `optimal`) prefer the node
  with the fewest free matching devices left (fill nodes, keep others whole), `spread` the most; `firstFit` abstains.
- `TaintToleration` (kube-scheduler's, weight 3 as there): the fewer PreferNoSchedule taints the pod does not tolerate,
  the better: 100 / (1 + count). kube-scheduler normalizes the count over the feasible nodes (the most-tainted gets 0);
  a score here is the node's own (so decisions can remember it per node), which keeps the order kube-scheduler's
  normalized scores give (untainted first, then by fewer intolerable taints) but not their spread.
All are O(1) per node (O(taints x tolerations) on a tainted node).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from devplace.scheduler._filters import Context
from devplace.scheduler._nodes import NodeInfo
from devplace.scheduler._pods import PodInfo
from devplace.scheduler._taints import PREFER_NO_SCHEDULE, intolerable_preferences

NodeScore = Callable[[NodeInfo], int]


class Score(Protocol):
    name: str
    weight: int

    def prepare(self, pod: PodInfo, context: Context) -> NodeScore | None: ...


class LeastAllocated:
    name = "LeastAllocated"

    def __init__(self, weight: int = 1) -> None:
        self.weight = weight

    def prepare(self, pod: PodInfo, context: Context) -> NodeScore | None:
        cpu, memory = pod.requests.cpu, pod.requests.memory

        def score(node: NodeInfo) -> int:  # the hot path: integers only, no builtins
            alloc, used = node.allocatable, node.requested
            a = (alloc.cpu - used.cpu - cpu) * 100 // alloc.cpu if alloc.cpu > 0 else 0
            b = (alloc.memory - used.memory - memory) * 100 // alloc.memory if alloc.memory > 0 else 0
            return ((a if a > 0 else 0) + (b if b > 0 else 0)) // 2

        return score


class BalancedAllocation:
    name = "BalancedAllocation"

    def __init__(self, weight: int = 1) -> None:
        self.weight = weight

    def prepare(self, pod: PodInfo, context: Context) -> NodeScore | None:
        cpu, memory = pod.requests.cpu, pod.requests.memory
        if not cpu and not memory:
            return None

        def score(node: NodeInfo) -> int:  # fractions in thousandths, capped at 1: integers only
            alloc, used = node.allocatable, node.requested
            if alloc.cpu <= 0 or alloc.memory <= 0:
                return 0
            a = (used.cpu + cpu) * 1000 // alloc.cpu
            b = (used.memory + memory) * 1000 // alloc.memory
            a = a if a < 1000 else 1000
            b = b if b < 1000 else 1000
            return 100 - (a - b if a > b else b - a) // 20

        return score


class DeviceFit:
    name = "DeviceFit"

    def __init__(self, weight: int = 1) -> None:
        self.weight = weight

    def prepare(self, pod: PodInfo, context: Context) -> NodeScore | None:
        signs: Mapping[str, int] = {
            c: (1 if context.strategies.get(c) in ("binpack", "optimal") else -1)
            for c, n in pod.classes.items()
            if n > 0 and context.strategies.get(c) != "firstFit"
        }
        if not signs:
            return None
        index, assumed = context.devices, context.assumed
        want = {c: pod.classes[c] for c in signs}
        empty: Mapping[str, int] = {}

        usable_all, lost_all = index.usable, assumed.lost_by_node(index)

        def score(node: NodeInfo) -> int:
            usable = usable_all.get(node.name, empty)
            lost = lost_all.get(node.name, empty)
            total = 0
            for c, sign in signs.items():
                have = max(1, usable.get(c, 0) - lost.get(c, 0))
                fill = want[c] * 100 // have  # 100 when the pod takes every free device
                total += fill if sign > 0 else 100 - fill
            return total // len(signs)

        return score


class TaintToleration:
    name = "TaintToleration"

    def __init__(self, weight: int = 3) -> None:
        self.weight = weight

    def prepare(self, pod: PodInfo, context: Context) -> NodeScore | None:
        if PREFER_NO_SCHEDULE not in context.taint_effects:
            return None  # every node scores the same
        tolerations = pod.tolerations

        def score(node: NodeInfo) -> int:
            taints = node.taints
            if not taints:
                return 100
            return 100 // (1 + intolerable_preferences(taints, tolerations))

        return score


DEFAULT_SCORES: tuple[Score, ...] = (LeastAllocated(), BalancedAllocation(), DeviceFit(), TaintToleration())
