"""The scheduling decision for one pod: filter nodes, score the feasible ones, select devices, bind.

Pure over plain data: `schedule_one(pod, cluster, assumed, config, start)` reads a `Snapshot` snapshot (nodes, the
device index, resolved classes) and the `Assumed` cache, and returns a `Binding` or an `Unschedulable`; it changes
nothing. The caller (the shell, or `schedule_burst`) records a binding with `assumed.assume(...)` before deciding the
next pod, so a burst of decisions never double-books a slot or node capacity before the bindings are observed.

The snapshot is taken as a prebuilt `Snapshot` (not loose nodes, devices and classes) so the class -> matching devices
per node index is built once per snapshot, not once per pod.

How many nodes are evaluated follows kube-scheduler's `percentageOfNodesToScore`: filtering stops once enough
feasible nodes are found (all nodes below 100; else `max(5, 50 - nodes/125)` percent, at least 100 nodes), starting
where the previous decision stopped (`start` in, `next_start` out), so load rotates over the cluster. When no node
is feasible every node has been evaluated, and `Unschedulable.message` counts the reasons over all of them, as
Kubernetes does: `0/12 nodes are available: 7 no device matches class nvidia.high.mem, 5 insufficient cpu.`
Config `percentage_of_nodes_to_score=100` evaluates every node every time.

Cost per pod: O(evaluated nodes x active filters) + O(feasible nodes x active scores) + one device selection on the
chosen node, all on precomputed integers (see `filters`, `scores`, `selection`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from devplace.scheduler._assumptions import Assumed
from devplace.scheduler._classes import ResolvedClass, Strategy, binding_annotations
from devplace.scheduler._devices import Device
from devplace.scheduler._filters import DEFAULT_FILTERS, Context, Filter, NodeCheck
from devplace.scheduler._nodes import NodeInfo, availability_message
from devplace.scheduler._pods import PodInfo, pending_order
from devplace.scheduler._scores import DEFAULT_SCORES, NodeScore, Score
from devplace.scheduler._selection import DeviceIndex, Pick, Refusal, select_devices
from devplace.scheduler._taints import NO_SCHEDULE

MIN_FEASIBLE_NODES = 100


@dataclass(frozen=True)
class Config:
    filters: tuple[Filter, ...] = DEFAULT_FILTERS
    scores: tuple[Score, ...] = DEFAULT_SCORES
    strategy: Strategy = "firstFit"
    """Device selection for classes that do not name one (seed 003: first fit)."""
    percentage_of_nodes_to_score: int | None = None
    """None: kube-scheduler's adaptive percentage; 100: every node."""


def nodes_to_find(total: int, percentage: int | None = None) -> int:
    """How many feasible nodes to look for among `total` (kube-scheduler's numFeasibleNodesToFind)."""
    if total < MIN_FEASIBLE_NODES or percentage == 100:
        return total
    if percentage is None or percentage <= 0:
        percentage = max(5, 50 - total // 125)
    return max(MIN_FEASIBLE_NODES, total * percentage // 100)


@dataclass(frozen=True)
class Snapshot:
    """One snapshot: nodes in name order, the device index, resolved classes."""

    nodes: tuple[NodeInfo, ...]
    devices: DeviceIndex
    classes: Mapping[str, ResolvedClass] = field(default_factory=dict, hash=False)

    @classmethod
    def build(
        cls, nodes: Iterable[NodeInfo], devices: Iterable[Device], classes: Mapping[str, ResolvedClass]
    ) -> Snapshot:
        return cls(tuple(sorted(nodes, key=lambda n: n.name)), DeviceIndex(devices, classes), dict(classes))

    @cached_property
    def taint_effects(self) -> frozenset[str]:
        """The effects of every node's taints, NoSchedule too where a node is cordoned (assumptions never change
        either): what the taint plugins need to look at."""
        effects = {taint.effect for node in self.nodes for taint in node.taints}
        if any(node.unschedulable for node in self.nodes):
            effects.add(NO_SCHEDULE)
        return frozenset(effects)


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    reason: str | None
    """None: feasible."""


@dataclass(frozen=True)
class Binding:
    pod: str
    node: str
    picks: tuple[Pick, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict, hash=False)
    evaluated: int = 0
    feasible: int = 0
    next_start: int = 0
    refused: tuple[tuple[str, str], ...] = ()
    """(node, reason) of the evaluated nodes that were refused, in evaluation order."""
    claims: tuple[tuple[str, Mapping[str, Any] | None], ...] = field(default=(), hash=False)
    """The pod's ResourceClaims (`namespace/name`) with the allocation this decision makes for each, None for a claim
    already allocated (it only gains the pod in `reservedFor`)."""
    extended_claim: Mapping[str, Any] | None = field(default=None, hash=False)
    """The ResourceClaim to make for the pod's extended resources a DeviceClass serves on this node (`extended`)."""
    extended_status: Mapping[str, Any] | None = field(default=None, hash=False)
    """The pod's `status.extendedResourceClaimStatus` for it."""
    claim_slots: Mapping[str, int] = field(default_factory=dict, hash=False)
    """Slots of devplace's Instances those allocations take (the device path counts them as taken: one truth)."""

    @property
    def verdicts(self) -> tuple[NodeVerdict, ...]:
        """The evaluated nodes that were refused, with their reasons, in name order."""
        return tuple(NodeVerdict(node, reason) for node, reason in sorted(self.refused))

    def slots(self) -> dict[str, int]:
        out: dict[str, int] = dict(self.claim_slots)
        for pick in self.picks:
            out[pick.device] = out.get(pick.device, 0) + pick.count
        return out

    def to_wire(self) -> dict[str, Any]:
        """A Kubernetes `Binding` (pods/binding subresource body) carrying the device annotations."""
        namespace, _, name = self.pod.partition("/")
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if self.annotations:
            metadata["annotations"] = dict(self.annotations)
        return {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node},
        }


@dataclass(frozen=True)
class Unschedulable:
    pod: str
    message: str
    verdicts: tuple[NodeVerdict, ...] = ()
    """Every node with its reason, in name order (what `explain` shows)."""
    next_start: int = 0
    gated: bool = False
    """The pod waits only for the claim its template makes: nothing is written for it (kube-scheduler's PreEnqueue)."""


class Memo:
    """Per-node verdicts and scores remembered across the decisions of one burst, for pods that ask alike.

    A verdict (the reason a node is refused, or None) and a score depend only on the pod's asks and the node's state;
    the node's state changes only through `Assumed` during a burst, which bumps the node's generation when it does.
    So an entry made at generation g is exact while the node is still at g, and identical pods (same requests,
    classes, selectors, tolerations and strategies) re-evaluate only the nodes earlier decisions changed: with pods
    mostly alike, a decision costs O(nodes in the sample) dictionary reads instead of O(nodes x filters + feasible x
    scores) calls. Tied to one (cluster, assumed, config, epoch); anything else starts afresh. Decisions are identical
    with or without it.
    """

    __slots__ = ("_assumed", "_cluster", "_config", "_epoch", "_tables")

    def __init__(self) -> None:
        self._cluster: Snapshot | None = None
        self._assumed: Assumed | None = None
        self._config: Config | None = None
        self._epoch = -1
        self._tables: dict[Hashable, dict[str, tuple[int, str | None, int | None]]] = {}

    def table(
        self, pod: PodInfo, strategies: Mapping[str, Strategy], cluster: Snapshot, assumed: Assumed, config: Config
    ) -> dict[str, tuple[int, str | None, int | None]]:
        """node -> (generation, reason, score or None if not computed yet) for pods asking what `pod` asks."""
        if cluster is not self._cluster or assumed is not self._assumed or config is not self._config:
            self._cluster, self._assumed, self._config = cluster, assumed, config
            self._tables = {}
        if assumed.epoch != self._epoch:
            self._epoch = assumed.epoch
            self._tables = {}
        key = (
            pod.requests,
            tuple(sorted(pod.requests.extended.items())),
            tuple(sorted(pod.classes.items())),
            tuple(sorted(pod.node_selector.items())),
            pod.affinity,
            pod.tolerations,
            tuple(sorted(strategies.items())),
        )
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = {}
        return table


def schedule_one(
    pod: PodInfo,
    cluster: Snapshot,
    assumed: Assumed,
    config: Config = Config(),
    start: int = 0,
    memo: Memo | None = None,
    extra: NodeCheck | None = None,
) -> Binding | Unschedulable:
    """Decide where `pod` goes (see the module docstring); `memo` remembers node verdicts across a burst.

    `extra` is one more filter, run after the others on each node they pass (the DRA claims check: the costliest, and
    stateful across the burst, so a pod with one is never answered from `memo`)."""
    if extra is not None:
        memo = None
    missing = sorted(c for c in pod.classes if c not in cluster.classes)
    if missing:
        return Unschedulable(pod.key, f'resource class "{missing[0]}" not found', (), start)
    strategies = {c: cluster.classes[c].strategy or config.strategy for c in pod.classes}
    context = Context(cluster.devices, assumed, strategies, cluster.taint_effects)
    nodes = cluster.nodes
    total = len(nodes)
    if total == 0:
        return Unschedulable(pod.key, "0/0 nodes are available: no nodes.", (), 0)
    wanted = nodes_to_find(total, config.percentage_of_nodes_to_score)
    start %= total
    effective, touched = assumed.node, assumed.nodes
    feasible: list[NodeInfo] = []
    failed: list[tuple[str, str]] = []
    evaluated = 0
    rotation = (nodes[start:] + nodes[:start]) if start else nodes
    table = memo.table(pod, strategies, cluster, assumed, config) if memo is not None else None
    checks: list[NodeCheck] | None = None
    if table is not None:
        generations = assumed.generations
        for base in rotation:
            name = base.name
            generation = generations.get(name, 0)
            hit = table.get(name)
            evaluated += 1
            if hit is None or hit[0] != generation:
                if checks is None:
                    checks = [check for f in config.filters if (check := f.prepare(pod, context)) is not None]
                node = effective(base) if name in touched else base
                reason: str | None = None
                for check in checks:
                    reason = check(node)
                    if reason is not None:
                        break
                hit = table[name] = (generation, reason, None)
            if hit[1] is None:
                feasible.append(base)
                if len(feasible) >= wanted:
                    break
            else:
                failed.append((name, hit[1]))
    else:
        checks = [check for f in config.filters if (check := f.prepare(pod, context)) is not None]
        if extra is not None:
            checks.append(extra)
        first, second, third = (*checks, None, None, None)[:3]
        rest = checks[3:]
        for base in rotation:
            node = effective(base) if base.name in touched else base
            evaluated += 1
            # unrolled: a check returns None or a non-empty reason, so `or` yields the first refusal
            reason = (first(node) if first else None) or (second(node) if second else None)
            if reason is None and third is not None:
                reason = third(node)
                if reason is None:
                    for check in rest:
                        reason = check(node)
                        if reason is not None:
                            break
            if reason is None:
                feasible.append(node)
                if len(feasible) >= wanted:
                    break
            else:
                failed.append((node.name, reason))
    next_start = (start + evaluated) % total
    if not feasible:
        refused = [NodeVerdict(name, reason) for name, reason in sorted(failed)]
        message = availability_message(total, (v.reason or "" for v in refused))
        return Unschedulable(pod.key, message, tuple(refused), next_start)
    if table is not None:
        best = _best_remembered(pod, feasible, context, config.scores, table, effective, touched)
    else:
        best = _best(pod, feasible, context, config.scores, getattr(extra, "score", None))
    picks: tuple[Pick, ...] = ()
    if pod.classes:
        decision = select_devices(
            pod.classes, best.name, cluster.devices, assumed.taken, strategies, assumed.taken_on(best.name)
        )
        if isinstance(decision, Refusal):  # the class filter is exact, so only a custom filter set gets here
            verdicts = [*(NodeVerdict(n, r) for n, r in failed), NodeVerdict(best.name, decision.reason)]
            return Unschedulable(pod.key, decision.reason, tuple(sorted(verdicts, key=lambda v: v.node)), next_start)
        picks = decision.picks
    annotations = binding_annotations((p.cls, p.device, p.count) for p in picks)
    return Binding(pod.key, best.name, picks, annotations, evaluated, len(feasible), next_start, tuple(failed))


def _best_remembered(
    pod: PodInfo,
    feasible: Sequence[NodeInfo],
    context: Context,
    scores: Sequence[Score],
    table: dict[str, tuple[int, str | None, int | None]],
    effective: Callable[[NodeInfo], NodeInfo],
    touched: Mapping[str, object],
) -> NodeInfo:
    """`_best`, with each node's total score remembered in `table` next to its verdict."""
    scorers: list[tuple[int, NodeScore]] | None = None
    best, best_total = feasible[0], -1
    for base in feasible:
        name = base.name
        hit = table[name]
        total = hit[2]
        if total is None:
            if scorers is None:
                scorers = [(s.weight, fn) for s in scores if (fn := s.prepare(pod, context)) is not None]
            node = effective(base) if name in touched else base
            total = 0
            for weight, fn in scorers:
                total += weight * fn(node)
            table[name] = (hit[0], None, total)
        if total > best_total or (total == best_total and name < best.name):
            best, best_total = base, total
    return effective(best) if best.name in touched else best


EXTRA_SCORE_WEIGHT = 2
"""The weight of an extra filter's own score (the DRA claims check's device placement, `claimchecks`)."""


def _best(
    pod: PodInfo,
    feasible: Sequence[NodeInfo],
    context: Context,
    scores: Sequence[Score],
    extra_score: Callable[[NodeInfo], int] | None = None,
) -> NodeInfo:
    scorers = [(s.weight, fn) for s in scores if (fn := s.prepare(pod, context)) is not None]
    if extra_score is not None:
        scorers.append((EXTRA_SCORE_WEIGHT, extra_score))
    if not scorers or len(feasible) == 1:
        return min(feasible, key=lambda n: n.name)
    best, best_total = feasible[0], -1
    if len(scorers) == 1:
        (w1, f1), (w2, f2) = scorers[0], (0, None)
    else:
        (w1, f1), (w2, f2) = scorers[0], scorers[1]
    more = scorers[2:]
    for node in feasible:
        total = w1 * f1(node) + (w2 * f2(node) if f2 is not None else 0)
        for weight, fn in more:
            total += weight * fn(node)
        if total > best_total or (total == best_total and node.name < best.name):
            best, best_total = node, total
    return best


def schedule_burst(
    pods: Iterable[PodInfo],
    cluster: Snapshot,
    assumed: Assumed,
    config: Config = Config(),
    start: int = 0,
    extras: Callable[[PodInfo], NodeCheck | None] | None = None,
    bound: Callable[[Binding], Binding] | None = None,
) -> list[Binding | Unschedulable]:
    """Decide pods one after another in `pending_order`, assuming each binding before the next decision.

    `extras` (made just before a pod's decision: an extra filter for it, `schedule_one`'s `extra`, or None) and `bound`
    (called with each binding before the next decision; what it returns is the decision: the DRA claims check
    completes a binding with its allocations and assumes them) let a caller add a stateful filter. Mutates only
    `assumed` and what the callbacks mutate (the point: it is how decisions see each other).
    """
    out: list[Binding | Unschedulable] = []
    memo = Memo()
    for pod in pending_order(pods):
        extra = extras(pod) if extras is not None else None
        decision = schedule_one(pod, cluster, assumed, config, start, memo, extra)
        start = decision.next_start
        if isinstance(decision, Binding):
            assumed.assume(pod, decision.node, decision.slots(), cluster.devices)
            if bound is not None:
                decision = bound(decision)
        out.append(decision)
    return out
