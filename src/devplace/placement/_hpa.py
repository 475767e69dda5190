"""The HPA placement controller (seed 004): which clusters can run each app's resource consumers. Pure.

Rules, one branch each below and one table row each in tests/placement/test_hpa.py:
- A consumer's mandatory requirements: an allocatable one needs `requests` free on a node (or `limits` when requests
  are absent, as Kubernetes defaults requests to limits); a non-allocatable one needs the node label `name=value`.
  Several label requirements on one key are alternatives (`key in (v1, v2)`).
- A cluster qualifies for an app only if every replica of every consumer of the app lands on some node that satisfies
  all of that consumer's mandatory requirements at once, accounting node by node: a placed replica uses up what it
  requests on its node (first fit, consumers largest first, nodes in inventory order; a node takes as many replicas
  as fit before the next is tried). A failed attempt leaves nothing behind: every allocation of the attempt is in an
  undo log that is replayed on failure (EMCO's rollback of this accounting was broken by aliased maps). First fit is
  a heuristic, like the kube-scheduler's: it can miss a packing that exists; it never admits one that does not.
- Apps that contend: every qualifying app of a cluster is packed onto it together, in order of how few clusters each
  has secured so far (then name). An app that fits alone but not after the others is denied the cluster with a
  `Contended` reason, so apps contending for a scarce resource get disjoint lists, and contended clusters are shared
  out round-robin rather than all to one app.
- Optional requirements score: a qualifying cluster earns an optional requirement's weight (default 1) when every
  replica of the consumer fits with it added to the consumer's mandatory requirements (`optional_fits`; the action
  controller then writes it into the manifest for that cluster).
- The HPA controller has no opinion on replication counts.

Speed (bench/placement.py: 10,000 clusters x 50 nodes): a cluster is first checked against its per-resource maxima and
label value sets (`ClusterInventory.maxima`, `label_values`), which rejects most unsuitable clusters in a few dict
lookups; nodes are scanned only for clusters that pass, only those holding the consumer's scarcest extended resource
or label (`holders`, `label_holders`), and a scan stops as soon as every replica has a node. Contention is checked
only when an app that fits some node fails after other apps were packed (a second, solo packing tells contention from
plain shortage). Rejections are small `Reason` objects, rendered to text only when a status document is made.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from devplace.api import Quantity
from devplace.placement._candidates import Candidate, Reason
from devplace.placement._inventory import ClusterInventory, ClusterRef
from devplace.placement._requirements import HpaRequirementBody, requirement_quantities

_BYTE_RESOURCES = ("memory", "ephemeral-storage")

Demand = tuple[tuple[str, int], ...]
_NONE: frozenset[str] = frozenset()
LabelNeeds = tuple[tuple[str, frozenset[str]], ...]


def show_amount(resource: str, amount: int) -> str:
    """Milli-units -> the Kubernetes quantity a user reads (`16Gi`, `1G`, `500m`, `4`)."""
    units = Fraction(amount, 1000)
    binary = (resource in _BYTE_RESOURCES or resource.startswith("hugepages-")) and units.denominator == 1
    binary = binary and units.numerator % 1024 == 0
    return str(Quantity.from_fraction(units, binary=binary))


@dataclass(frozen=True)
class Requirement:
    name: str
    source: str = ""
    mandatory: bool = True
    weight: int = 1
    allocatable: bool = True
    requests: Quantity | None = None
    limits: Quantity | None = None
    value: str | None = None

    @property
    def need(self) -> int:
        """Milli-units a node must have free: requests, or limits when requests are absent."""
        amount = self.requests if self.requests is not None else self.limits
        return 0 if amount is None else amount.milli_value()

    @classmethod
    def from_body(cls, body: HpaRequirementBody) -> Requirement:
        need = body.need
        if not need.allocatable:
            return cls(need.name, body.name, need.mandatory, need.weight or 1, False, value=need.value)
        requests, limits = requirement_quantities(need)
        return cls(need.name, body.name, need.mandatory, need.weight or 1, True, requests, limits)

    def describe(self) -> str:
        if not self.allocatable:
            return f"{self.name}={self.value}"
        return f"{self.name} >= {show_amount(self.name, self.need)}"


@dataclass(frozen=True)
class Consumer:
    """One HPA resource consumer with its requirements, resolved against its app's manifests.

    `replicas` is how many pods to account for per cluster (the intent's replicas, else the workload's, 1 for a
    DaemonSet or Pod); `set_replicas` is the intent's own value, which the action controller writes into the manifest.
    """

    app: str
    name: str
    kind: str = "Deployment"
    workload: str = ""
    api_version: str = "apps/v1"
    container: str | None = None
    replicas: int = 1
    set_replicas: int | None = None
    exclusive_cpus: bool = False
    requirements: tuple[Requirement, ...] = ()
    intent: str = ""
    demand: Demand = field(init=False, repr=False, compare=False)
    label_needs: LabelNeeds = field(init=False, repr=False, compare=False)
    optional: tuple[Requirement, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        demand: dict[str, int] = {}
        labels: dict[str, set[str]] = {}
        for req in self.requirements:
            if not req.mandatory:
                continue
            if req.allocatable:
                demand[req.name] = max(demand.get(req.name, 0), req.need)
            elif req.value is not None:
                labels.setdefault(req.name, set()).add(req.value)
        object.__setattr__(self, "demand", tuple(sorted(demand.items())))
        object.__setattr__(self, "label_needs", tuple(sorted((k, frozenset(v)) for k, v in labels.items())))
        object.__setattr__(self, "optional", tuple(r for r in self.requirements if not r.mandatory))


# -- reasons ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShortOf(Reason):
    consumer: str
    resource: str
    need: int
    best: int

    def text(self) -> str:
        need, best = show_amount(self.resource, self.need), show_amount(self.resource, self.best)
        return f"no node has {self.resource} >= {need} (max {best}) for {self.consumer}"


@dataclass(frozen=True, slots=True)
class MissingLabel(Reason):
    consumer: str
    key: str
    values: frozenset[str]

    def text(self) -> str:
        if len(self.values) == 1:
            return f"no node has label {self.key}={next(iter(self.values))} for {self.consumer}"
        return f"no node has label {self.key} in ({', '.join(sorted(self.values))}) for {self.consumer}"


@dataclass(frozen=True, slots=True)
class NoSingleNode(Reason):
    consumer: str
    demand: Demand
    labels: LabelNeeds

    def text(self) -> str:
        parts = [f"{r} >= {show_amount(r, n)}" for r, n in self.demand]
        parts += [f"{k} in ({', '.join(sorted(v))})" if len(v) > 1 else f"{k}={next(iter(v))}" for k, v in self.labels]
        return f"no single node has {', '.join(parts)} together for {self.consumer}"


@dataclass(frozen=True, slots=True)
class ReplicasShort(Reason):
    consumer: str
    wanted: int
    fitted: int

    def text(self) -> str:
        return f"only {self.fitted} of {self.wanted} replicas of {self.consumer} fit, counting node by node"


@dataclass(frozen=True, slots=True)
class Contended(Reason):
    rivals: tuple[str, ...]
    resources: tuple[str, ...]

    def text(self) -> str:
        rivals = ", ".join(self.rivals)
        what = ", ".join(self.resources) or "node capacity"
        return f"contends with {rivals} for {what}: they do not fit together, and the cluster went to {rivals}"


@dataclass(frozen=True, slots=True)
class NoNodes(Reason):
    def text(self) -> str:
        return "has no schedulable nodes"


@dataclass(frozen=True, slots=True)
class InventoryUnavailable(Reason):
    problem: str

    def text(self) -> str:
        return f"inventory unavailable: {self.problem}"


# -- the controller ---------------------------------------------------------------------------------------------

_COMMON = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})
"""Resources nearly every node has: never worth narrowing a node scan by."""


@dataclass(frozen=True, slots=True)
class _Unit:
    """`count` replicas of one consumer's demand, plus what narrows the node scan (scarce resources, labels)."""

    consumer: Consumer
    demand: Demand
    labels: LabelNeeds
    count: int
    scarce: tuple[str, ...]
    label_items: tuple[tuple[str, str], ...]
    narrow: bool

    @classmethod
    def of(cls, consumer: Consumer, demand: Demand, labels: LabelNeeds, count: int) -> _Unit:
        scarce = tuple(r for r, n in demand if n > 0 and r not in _COMMON)
        items = tuple((k, next(iter(v))) for k, v in labels if len(v) == 1)
        return cls(consumer, demand, labels, count, scarce, items, bool(scarce or items))


Used = dict[int, dict[str, int]]


@dataclass
class _App:
    name: str
    consumers: tuple[Consumer, ...]
    units: list[_Unit]
    resources: frozenset[str]
    needs: tuple[tuple[str, int, str], ...]
    label_needs: tuple[tuple[str, frozenset[str], str], ...]
    optional: tuple[tuple[Requirement, _Unit], ...]
    secured: int = 0


def _labels_fit(labels: Mapping[str, str], needs: LabelNeeds) -> bool:
    return all(labels.get(key) in values for key, values in needs)


def _scan_order(cluster: ClusterInventory, unit: _Unit) -> Sequence[int]:
    """The nodes worth scanning: those holding the unit's scarcest resource or label (all nodes when none is)."""
    best: Sequence[int] | None = None
    for resource in unit.scarce:
        holders = cluster.holders.get(resource, ())
        if best is None or len(holders) < len(best):
            best = holders
    for item in unit.label_items:
        holders = cluster.label_holders.get(item, ())
        if best is None or len(holders) < len(best):
            best = holders
    return cluster.everywhere if best is None else best


def _pack(units: Sequence[_Unit], cluster: ClusterInventory, used: Used) -> Reason | None:
    """Place every unit's replicas node by node (first fit) on top of `used`, in place; on failure, undo and say why.

    `used` maps node index -> amounts taken by earlier placements on this cluster; the undo log restores it exactly
    when a unit does not fit, so a failed attempt leaves nothing behind. (The hot loop of the planner: kept flat.)
    """
    nodes = cluster.nodes
    undo: list[tuple[dict[str, int], Demand, int]] = []
    for unit in units:
        demand, labels = unit.demand, unit.labels
        left = unit.count
        fits_empty = False  # does some node take one replica when nothing else is placed? (names the failure)
        order = _scan_order(cluster, unit) if unit.narrow else cluster.everywhere
        for i in order:
            node = nodes[i]
            if labels:
                node_labels = node.labels
                if any(node_labels.get(key) not in values for key, values in labels):
                    continue
            free = node.free
            taken = used.get(i)
            fit = left
            if taken:
                for resource, need in demand:
                    avail = free.get(resource, 0) - taken.get(resource, 0)
                    if avail < need * fit:
                        fit = avail // need
                        if fit <= 0:
                            break
                if fit <= 0:
                    fits_empty = fits_empty or all(free.get(resource, 0) >= need for resource, need in demand)
                    continue
            else:
                for resource, need in demand:
                    avail = free.get(resource, 0)
                    if avail < need * fit:
                        fit = avail // need
                        if fit <= 0:
                            break
                if fit <= 0:
                    continue
                taken = used[i] = {}
            fits_empty = True
            for resource, need in demand:
                taken[resource] = taken.get(resource, 0) + need * fit
            undo.append((taken, demand, fit))
            left -= fit
            if not left:
                break
        if left:
            for taken, done, fit in undo:
                for resource, need in done:
                    taken[resource] -= need * fit
            if not fits_empty:
                return NoSingleNode(unit.consumer.name, demand, labels)
            return ReplicasShort(unit.consumer.name, unit.count, unit.count - left)
    return None


def _optional_unit(consumer: Consumer, req: Requirement) -> _Unit:
    """The consumer's replicas with `req` added to its mandatory requirements."""
    if req.allocatable:
        merged = dict(consumer.demand)
        merged[req.name] = max(merged.get(req.name, 0), req.need)
        return _Unit.of(consumer, tuple(sorted(merged.items())), consumer.label_needs, max(1, consumer.replicas))
    labels = (*consumer.label_needs, (req.name, frozenset({req.value or ""})))
    return _Unit.of(consumer, consumer.demand, labels, max(1, consumer.replicas))


def _optional_met(req: Requirement, unit: _Unit, cluster: ClusterInventory) -> bool:
    if req.allocatable:
        if cluster.maxima.get(req.name, 0) < req.need:
            return False
    elif req.value not in cluster.label_values.get(req.name, _NONE):
        return False
    return _pack([unit], cluster, {}) is None


def optional_fits(consumer: Consumer, cluster: ClusterInventory) -> tuple[Requirement, ...]:
    """The consumer's optional requirements that `cluster` meets for every replica together with the mandatory ones."""
    return tuple(req for req in consumer.optional if _optional_met(req, _optional_unit(consumer, req), cluster))


def _score(app: _App, cluster: ClusterInventory) -> float:
    return float(sum(req.weight for req, unit in app.optional if _optional_met(req, unit, cluster)))


def _apps(consumers: Iterable[Consumer]) -> list[_App]:
    grouped: dict[str, list[Consumer]] = {}
    for consumer in consumers:
        grouped.setdefault(consumer.app, []).append(consumer)
    apps = []
    for name in sorted(grouped):
        members = tuple(sorted(grouped[name], key=lambda c: c.name))
        units = [_Unit.of(c, c.demand, c.label_needs, max(1, c.replicas)) for c in members]
        units.sort(key=lambda u: (-len(u.labels), tuple(-n for _, n in u.demand), u.consumer.name))
        needs: dict[str, tuple[int, str]] = {}
        label_needs: list[tuple[str, frozenset[str], str]] = []
        for c in members:
            for resource, need in c.demand:
                if need > needs.get(resource, (0, ""))[0]:
                    needs[resource] = (need, c.name)
            label_needs.extend((key, values, c.name) for key, values in c.label_needs)
        flat = tuple((resource, need, who) for resource, (need, who) in sorted(needs.items()))
        resources = frozenset(needs)
        optional = tuple((req, _optional_unit(c, req)) for c in members for req in c.optional)
        apps.append(_App(name, members, units, resources, flat, tuple(label_needs), optional))
    return apps


def _quick_reject(app: _App, cluster: ClusterInventory) -> Reason | None:
    maxima = cluster.maxima
    for resource, need, who in app.needs:
        best = maxima.get(resource, 0)
        if best < need:
            return ShortOf(who, resource, need, best)
    if app.label_needs:
        values = cluster.label_values
        for key, wanted, who in app.label_needs:
            if values.get(key, _NONE).isdisjoint(wanted):
                return MissingLabel(who, key, wanted)
    return None


def hpa_candidates(consumers: Iterable[Consumer], clusters: Sequence[ClusterInventory]) -> dict[str, Candidate]:
    """One candidate per app that has consumers; apps without consumers are not this controller's business."""
    apps = _apps(consumers)
    universe = [c.ref for c in clusters]
    allowed: dict[str, list[ClusterRef]] = {a.name: [] for a in apps}
    reasons: dict[str, dict[ClusterRef, Reason]] = {a.name: {} for a in apps}
    scores: dict[str, dict[ClusterRef, float]] = {a.name: {} for a in apps}
    no_nodes = NoNodes()
    for cluster in clusters:
        ref = cluster.ref
        if cluster.problem is not None or not cluster.nodes:
            why: Reason = InventoryUnavailable(cluster.problem) if cluster.problem is not None else no_nodes
            for app in apps:
                reasons[app.name][ref] = why
            continue
        feasible: list[_App] = []
        for app in apps:
            rejected = _quick_reject(app, cluster)
            if rejected is None:
                feasible.append(app)
            else:
                reasons[app.name][ref] = rejected
        if len(feasible) > 1:
            feasible.sort(key=lambda a: (a.secured, a.name))
        used: Used = {}
        winners: list[_App] = []
        for app in feasible:
            failed = _pack(app.units, cluster, used)
            # Contended: it fits alone but not after the apps already given this cluster.
            if isinstance(failed, ReplicasShort) and winners and _pack(app.units, cluster, {}) is None:
                rivals = tuple(w.name for w in winners)
                shared = frozenset().union(*(w.resources for w in winners)) & app.resources
                reasons[app.name][ref] = Contended(rivals, tuple(sorted(shared)))
                continue
            if failed is not None:
                reasons[app.name][ref] = failed
                continue
            winners.append(app)
            app.secured += 1
            allowed[app.name].append(ref)
            if app.optional:
                scores[app.name][ref] = _score(app, cluster)
    return {
        app.name: Candidate.from_allowed(
            app.name, allowed[app.name], universe, reasons=reasons[app.name], scores=scores[app.name]
        )
        for app in apps
    }
