"""DRA structured allocation for one pod on one node (issue #25; facts in shared/reference/dra.md sections 3 and 6).

Pure: a `Snapshot` holds one scheduling cycle's ResourceSlices, DeviceClasses and the claims already allocated;
`Snapshot.allocate(node, claims)` decides whether the pod's claims can all be allocated on `node` and with which
devices: a `Fit` (one AllocationResult wire dict per claim, as `status.allocation` takes it), a `NoFit` with a clear
per-node reason, or an `Undecided` when the bounded search ran out of steps. `Snapshot.assume` records a decision so
the next pod of the cycle sees its devices taken. No clock, no I/O: the same inputs always give the same outcome.

What a fit is (Kubernetes' structured allocator): every request gets `count` devices (ExactCount) or every device
that matches (All, at least one, and a matching device that cannot be had fails the request), or the first of its
firstAvailable alternatives that can be satisfied; each device matches the class's and the request's CEL selectors,
is reachable from the node, is in a complete and valid pool, tolerates the request's NoSchedule/NoExecute taints,
is not held (an exclusive device by any other claim or by another request of this pod; adminAccess requests ignore
other claims but never take a device twice in their own claim), has the capacity the request consumes (shared
devices: the sum over shares within each capacity, rounded up by the request policy) and the pool's counters left;
matchAttribute gives every chosen device of the named requests the same typed value, distinctAttribute different
ones; at most 32 devices per claim.

Never a search without an end. The search is Kubernetes' own order (claims, requests, alternatives, then devices
by pool, slice and position, combinations not orderings), so with `first_fit=True` the devices chosen are the ones
Kubernetes' first fit chooses. Three things keep it from going exponential (kubernetes#131730):
- equivalent devices (same driver, attributes, capacity, taints, sharing and counters, in the same state) are one
  choice: once one has failed at a branch, its twins are not tried;
- before each choice an oracle decides whether the rest can still be completed. It is EXACT (a max flow, a
  bipartite matching or a count) for these shapes, so the search never backtracks more than one step and the work
  is polynomial:
  * requests with ExactCount or All (an All request is a demand the flow must saturate), firstAvailable
    alternatives (each combination of alternatives is one flow, tried in priority order, at most `_MAX_FLOWS` flows
    and `_MAX_COMBINATIONS` combinations per check), exclusive devices, and shared devices whose requests consume
    equal amounts (a device then serves as many shares as its capacity has left);
  * matchAttribute constraints: each candidate value is one flow (a value fixed by a chosen device is a filter);
  * one distinctAttribute constraint that covers every remaining request (a flow through one vertex per value);
  * one remaining demand with any matchAttribute constraints and up to two distinctAttribute ones (a count per
    value; two distinct attributes make a bipartite matching between their values). Requests of one claim with the
    same candidates and constraints are one demand (four requests for one GPU each are one request for four).
  Outside them (three or more distinctAttribute constraints, or two over requests that differ; partitionable
  devices' counters; shared devices consumed unequally; adminAccess next to other requests; more combinations than
  the caps) the oracle is a relaxation: each distinct attribute must have enough values, the cheapest devices must
  fit every pool counter, the flow ignores the rest. It still prunes every branch it proves dead; the search may
  backtrack;
- every search node and every flow costs steps from a budget (`budget`, default `DEFAULT_BUDGET`); past it the
  answer is `Undecided("undecided after N steps")`, never a timeout that hides a fit and never a wrong NoFit.

Without `first_fit`, when the first check is exact the flow's own assignment is taken at once (one flow for the
whole pod instead of one per device); the devices may then differ from Kubernetes' first fit, the verdict never.

Where devplace differs from Kubernetes on purpose: a pool counts only at its newest generation over all its slices
(Kubernetes looks at the newest generation among the slices that reach the node, and so can allocate from a pool the
driver is replacing); a CEL run-time error on any candidate device of the node fails the pod there (Kubernetes fails
when its search reaches that device); an exclusive device that has shares is held. Share ids are derived from the
claim, the request and the device (uuid5), so a decision is reproducible.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from devplace.api import NodeSelector, Verdicts
from devplace.scheduler._claims import (
    MAX_RESULTS,
    AttrValue,
    Claim,
    Device,
    DeviceClassInfo,
    Holdings,
    Locality,
    Pool,
    Request,
    Slice,
    gather_pools,
    parse_claim,
    parse_class,
    quantity_text,
    tolerated,
)
from devplace.scheduler._flows import Network

DEFAULT_BUDGET = 20_000
"""Steps one `allocate` may spend: a search node is one step, a flow one step per 16 edges (at least one)."""

_MAX_FLOWS = 16
"""Flows one oracle check may run (combinations of alternatives and of matchAttribute values); past it the check
is a relaxation."""

_MAX_COMBINATIONS = 64
"""Combinations of alternatives one oracle check may look at before it is a relaxation."""

_SHARE_NAMESPACE = uuid.UUID("5f1c2b9e-6d0a-4b8e-9c3d-2a7e1f4b6c80")

Consumption = tuple[tuple[str, Fraction], ...]


@dataclass(frozen=True, slots=True)
class NodeRef:
    """The node an allocation is decided for: its name and labels (slice node selectors read them)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


def node_ref(node: NodeRef | Mapping[str, Any] | str) -> NodeRef:
    """A NodeRef from a Node wire dict, a node name, or a NodeRef."""
    if isinstance(node, NodeRef):
        return node
    if isinstance(node, str):
        return NodeRef(node)
    meta = node.get("metadata") or {}
    return NodeRef(str(meta.get("name") or ""), dict(meta.get("labels") or {}))


@dataclass(frozen=True, slots=True)
class Fit:
    allocations: tuple[dict[str, Any], ...]
    """One AllocationResult wire dict per claim, in the order the claims were given."""
    steps: int


@dataclass(frozen=True, slots=True)
class NoFit:
    reason: str
    steps: int


@dataclass(frozen=True, slots=True)
class Undecided:
    reason: str
    steps: int


Outcome = Fit | NoFit | Undecided


def available_on(allocation: Mapping[str, Any], node: NodeRef | Mapping[str, Any] | str) -> bool:
    """Can a claim allocated as `allocation` be used from `node`? (Kubernetes' filter for allocated claims.)"""
    ref = node_ref(node)
    selector = allocation.get("nodeSelector")
    if not selector:
        return True
    return NodeSelector.from_wire(list(selector.get("nodeSelectorTerms") or [])).matches(ref.labels, ref.name)


# -- the per-node view -----------------------------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class _Matched:
    """What a request's signature selects on one node (static for the snapshot)."""

    error: str | None
    selected: list[int]
    """Positions matching the selectors whose capacity the request can fit (the base of an All request)."""
    candidates: list[int]
    """`selected` whose taints the request tolerates: what ExactCount picks from."""
    consumption: dict[int, Consumption]


@dataclass(eq=False, slots=True)
class _View:
    devices: list[Device]
    slices: list[Slice]
    pools: list[int]
    cls: list[int]
    incomplete: list[str]
    invalid: list[str]
    matched: dict[tuple[Any, ...], _Matched] = field(default_factory=dict)
    pool_set: tuple[int, ...] = ()
    """The pools this node reaches, once each (what `Snapshot.node_generation` reads)."""


def _consumption(request: Request, device: Device) -> Consumption | None:
    """What one allocation for `request` consumes of each of the device's capacities, or None when the device
    cannot serve it (a requested capacity it lacks, a policy the amount breaks, more than the device has)."""
    requested: dict[str, Fraction] = {}
    for name, amount in request.capacity:
        key = name if "/" in name else f"{device.driver}/{name}"
        if key not in device.capacity:
            return None
        requested[key] = amount
    if not device.capacity:
        return ()
    out: list[tuple[str, Fraction]] = []
    for key, cap in device.capacity.items():
        policy = cap.policy
        want = requested.get(key)
        if want is None:
            amount = policy.default if policy is not None and policy.default is not None else cap.value
        else:
            amount = policy.rounded(want) if policy is not None else want
        if policy is not None and not policy.allows(amount):
            return None
        if amount > cap.value:
            return None
        out.append((key, amount))
    return tuple(out)


# -- the snapshot ----------------------------------------------------------------------------------------------------


class Snapshot:
    """One scheduling cycle's view of DRA: slices, classes and the claims already allocated (wire dicts).

    Build once per cycle; call `allocate` per (pod, node); call `assume` with a decision so later pods see it.
    `verdicts` may be shared across snapshots (CEL verdicts keyed by device content)."""

    def __init__(
        self,
        slices: Iterable[Mapping[str, Any]],
        classes: Iterable[Mapping[str, Any]],
        allocated: Iterable[Mapping[str, Any]] = (),
        *,
        budget: int = DEFAULT_BUDGET,
        verdicts: Verdicts | None = None,
        pools: list[Pool] | None = None,
    ) -> None:
        """`pools`: `gather_pools(slices)` already made (a caller whose slices did not change keeps them; pools are
        read-only here), in which case `slices` is not read."""
        self.pools: list[Pool] = gather_pools(slices) if pools is None else pools
        self.classes: dict[str, DeviceClassInfo] = {c.name: c for c in map(parse_class, classes)}
        self.holdings = Holdings()
        for claim in allocated:
            self.holdings.add_claim(claim)
        self.budget = budget
        self.verdicts = verdicts if verdicts is not None else Verdicts()
        self._views: dict[tuple[str, tuple[tuple[str, str], ...]], _View] = {}
        self._content: dict[tuple[Any, ...], int] = {}
        self._counters: dict[int, tuple[dict[tuple[str, str], Fraction], bool]] = {}
        self._pool_of: dict[tuple[str, str], int] = {(p.driver, p.name): i for i, p in enumerate(self.pools)}
        self.generations: dict[int, int] = {}
        """Pool index -> how many `assume` calls touched it."""
        self.memo: dict[tuple[Any, ...], tuple[tuple[int, ...], str | None]] = {}
        """A caller's verdicts, (claims signature, node) -> (node generation, verdict); see `node_generation`."""

    # views and caches

    def view(self, node: NodeRef) -> _View:
        key = (node.name, tuple(sorted(node.labels.items())))
        found = self._views.get(key)
        if found is not None:
            return found
        devices: list[Device] = []
        slices: list[Slice] = []
        pools: list[int] = []
        incomplete: list[str] = []
        invalid: list[str] = []
        for index, pool in enumerate(self.pools):
            reached: list[tuple[Device, Slice]] = []
            relevant = False
            for s in pool.slices:
                if s.per_device:
                    for d in s.devices:
                        if d.locality is not None and d.locality.reaches(node.name, node.labels):
                            reached.append((d, s))
                            relevant = True
                elif s.locality is not None and s.locality.reaches(node.name, node.labels):
                    relevant = True
                    reached.extend((d, s) for d in s.devices)
            if not relevant:
                continue
            if not pool.complete:
                incomplete.append(pool.label)
                continue
            if pool.problem is not None:
                invalid.append(f"{pool.label}: {pool.problem}")
                continue
            for d, s in reached:
                devices.append(d)
                slices.append(s)
                pools.append(index)
        cls = [self._content.setdefault(d.content, len(self._content)) for d in devices]
        view = _View(devices, slices, pools, cls, incomplete, invalid, pool_set=tuple(sorted(set(pools))))
        self._views[key] = view
        return view

    def node_generation(self, node: NodeRef) -> tuple[int, ...]:
        """What `assume` has changed of the pools `node` reaches: equal before and after two calls exactly when no
        assumed allocation touched those pools in between, so a verdict for the node made at one generation holds at
        the same generation (a claim's verdict depends only on the claim, the node and its pools' holdings)."""
        generations = self.generations
        return tuple(generations.get(i, 0) for i in self.view(node).pool_set)

    def _matched(self, view: _View, request: Request, cls: DeviceClassInfo) -> _Matched:
        found = view.matched.get(request.signature)
        if found is not None:
            return found
        selected: list[int] = []
        consumption: dict[int, Consumption] = {}
        error: str | None = None
        for pos, device in enumerate(view.devices):
            ok = True
            for origin, selectors in (
                ("class " + cls.name, cls.selectors),
                ("request " + request.name, request.selectors),
            ):
                for i, selector in enumerate(selectors):
                    verdict = self.verdicts.verdict(selector, device.cel())
                    if isinstance(verdict, str):
                        error = f"{origin}: selector #{i} on device {'/'.join(device.id)}: CEL runtime error: {verdict}"
                        break
                    if not verdict:
                        ok = False
                        break
                if error is not None or not ok:
                    break
            if error is not None:
                break
            if not ok:
                continue
            used = _consumption(request, device)
            if used is None:
                continue
            selected.append(pos)
            consumption[pos] = used
        if error is not None:
            result = _Matched(error, [], [], {})
        else:
            candidates = [p for p in selected if tolerated(view.devices[p].taints, request.tolerations)]
            result = _Matched(None, selected, candidates, consumption)
        view.matched[request.signature] = result
        return result

    def pool_counters(self, index: int) -> tuple[dict[tuple[str, str], Fraction], bool]:
        """What is left of a pool's counters after the devices other claims hold; and whether some counter is
        already overdrawn (then no device of the pool that draws on counters fits)."""
        found = self._counters.get(index)
        if found is not None:
            return found
        pool = self.pools[index]
        left = dict(pool.counters)
        for s in pool.slices:
            for d in s.devices:
                if d.counters and self.holdings.holds(d.id):
                    for set_name, counter, amount in d.counters:
                        if (set_name, counter) in left:
                            left[(set_name, counter)] -= amount
        result = (left, any(v < 0 for v in left.values()))
        self._counters[index] = result
        return result

    # decisions

    def allocate(
        self,
        node: NodeRef | Mapping[str, Any] | str,
        claims: Sequence[Claim | Mapping[str, Any]],
        *,
        first_fit: bool = False,
        budget: int | None = None,
    ) -> Outcome:
        """Decide whether `claims` (one pod's unallocated claims, parsed with `parse_claim` or wire dicts) can all be
        allocated on `node`, and with which devices. Raises `errors.Invalid` for a claim Kubernetes would refuse."""
        parsed = [c if isinstance(c, Claim) else parse_claim(c) for c in claims]
        ref = node_ref(node)
        search = _Search(self, self.view(ref), ref, parsed, budget or self.budget)
        return search.run(first_fit)

    def assume(self, allocations: Iterable[Mapping[str, Any]]) -> None:
        """Record AllocationResult wire dicts (a `Fit`'s allocations) as held, for the rest of the cycle."""
        touched: set[int] = set()
        for allocation in allocations:
            results = (allocation.get("devices") or {}).get("results") or ()
            self.holdings.add_results(results)
            for r in results:
                index = self._pool_of.get((str(r.get("driver") or ""), str(r.get("pool") or "")))
                if index is not None:
                    touched.add(index)
        for index in touched:
            self._counters.pop(index, None)
            self.generations[index] = self.generations.get(index, 0) + 1


# -- the search ------------------------------------------------------------------------------------------------------


class _OutOfSteps(Exception):
    pass


@dataclass(eq=False, slots=True)
class _Alt:
    """One alternative of one request slot, prepared for this node."""

    claim: int
    request: Request
    candidates: list[int]
    all_set: list[int] | None
    need: int
    consumption: dict[int, Consumption]
    constraints: tuple[int, ...]
    counters: bool = False
    """Some candidate draws on pool counters."""


@dataclass(eq=False, slots=True)
class _Unit:
    claim: int
    slot: str
    alts: list[_Alt]


@dataclass(slots=True)
class _Pick:
    alt: _Alt
    pos: int
    consumed: Consumption | None
    charged: bool
    constraints: list[tuple[int, AttrValue]]


class _Search:
    def __init__(self, snap: Snapshot, view: _View, node: NodeRef, claims: list[Claim], budget: int) -> None:
        self.snap = snap
        self.view = view
        self.node = node
        self.claims = claims
        self.budget = budget
        self.steps = 0
        self.units: list[_Unit] = []
        n = len(view.devices)
        self.picks = [0] * n  # per position: bit c set when claim c holds it exclusively in this search
        self.shares = [0] * n  # per position: shares taken in this search
        self.share_used: dict[int, dict[str, Fraction]] = {}
        self.counter_used: dict[int, dict[tuple[str, str], Fraction]] = {}
        self.match: list[list[tuple[AttrValue | None, int]]] = [[(None, 0)] * len(c.constraints) for c in claims]
        self.distinct: list[list[set[AttrValue]]] = [[set() for _ in c.constraints] for c in claims]
        self.results: list[list[_Pick]] = [[] for _ in claims]
        self.choice: list[_Alt | None] = []
        self.merged: dict[str, list[str]] = {}  # the requests the oracle last merged, by the first one's name

    # steps

    def tick(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > self.budget:
            raise _OutOfSteps

    # preparation

    def prepare(self) -> str | None:
        snap, view = self.snap, self.view
        for c, claim in enumerate(self.claims):
            least = 0
            for slot in claim.slots:
                alts: list[_Alt] = []
                for request in slot.alternatives:
                    where = f"claim {claim.key}, request {request.name}"
                    cls = snap.classes.get(request.class_name)
                    if cls is None:
                        return f"{where}: device class {request.class_name} not found"
                    if cls.problem is not None:
                        return f"{where}: {cls.problem}"
                    matched = snap._matched(view, request, cls)
                    if matched.error is not None:
                        return f"{where}: {matched.error}"
                    applies = tuple(i for i, k in enumerate(claim.constraints) if k.applies(request))
                    if request.all:
                        if view.incomplete:
                            return (
                                f"{where}: asks for all devices, but resource pool {view.incomplete[0]} "
                                "is currently being updated"
                            )
                        if view.invalid:
                            return f"{where}: asks for all devices, but resource pool {view.invalid[0]} is invalid"
                        all_set = [p for p in matched.selected if self._capacity_left(p, matched.consumption[p])]
                        alt = _Alt(c, request, [], all_set, len(all_set), matched.consumption, applies)
                    else:
                        alt = _Alt(c, request, matched.candidates, None, request.count, matched.consumption, applies)
                    alt.counters = any(view.devices[p].counters for p in (alt.all_set or alt.candidates))
                    alts.append(alt)
                least += min(a.need for a in alts)
                self.units.append(_Unit(c, slot.name, alts))
            if least > MAX_RESULTS:
                return (
                    f"claim {claim.key}: number of requested devices {least} exceeds the claim limit of {MAX_RESULTS}"
                )
        self.choice = [None] * len(self.units)
        return None

    def _capacity_left(self, pos: int, consumption: Consumption) -> bool:
        """Does one more allocation fit what others (and this search) left of the device's capacity?"""
        device = self.view.devices[pos]
        if not consumption:
            return True
        held = self.snap.holdings.shares.get(device.id)
        ours = self.share_used.get(pos)
        for key, amount in consumption:
            used = amount
            if held:
                used += held.get(key, 0)
            if ours:
                used += ours.get(key, 0)
            if used > device.capacity[key].value:
                return False
        return True

    # the state of one device

    def free(self, alt: _Alt, pos: int) -> bool:
        device = self.view.devices[pos]
        holdings = self.snap.holdings
        admin = alt.request.admin
        if device.shared:
            if not admin and device.id in holdings.exclusive:
                return False
            if not self._capacity_left(pos, alt.consumption[pos]):
                return False
        elif admin:
            if self.picks[pos] >> alt.claim & 1:
                return False
        elif self.picks[pos] or holdings.holds(device.id):
            return False
        if device.counters and not (device.shared and (device.id in holdings.shares or self.shares[pos])):
            left, overdrawn = self.snap.pool_counters(self.view.pools[pos])
            if overdrawn:
                return False
            used = self.counter_used.get(self.view.pools[pos])
            for set_name, counter, amount in device.counters:
                if (
                    left.get((set_name, counter), Fraction(0)) - (used.get((set_name, counter), 0) if used else 0)
                    < amount
                ):
                    return False
        return True

    def _constraint_ok(self, alt: _Alt, pos: int) -> bool:
        """Would the device keep the claim's constraints as they stand (values fixed by earlier picks)?"""
        attributes = self.view.devices[pos].attributes
        claim = self.claims[alt.claim]
        for i in alt.constraints:
            value = attributes.get(claim.constraints[i].attribute)
            if value is None or value[0] == "unknown":
                return False
            if claim.constraints[i].distinct:
                if value in self.distinct[alt.claim][i]:
                    return False
            else:
                fixed, count = self.match[alt.claim][i]
                if count and fixed != value:
                    return False
        return True

    def take(self, alt: _Alt, pos: int) -> _Pick | None:
        if not self.free(alt, pos) or not self._constraint_ok(alt, pos):
            return None
        device = self.view.devices[pos]
        if device.taints and not tolerated(device.taints, alt.request.tolerations):
            return None
        c = alt.claim
        claim = self.claims[c]
        fixed: list[tuple[int, AttrValue]] = []
        for i in alt.constraints:
            value = device.attributes[claim.constraints[i].attribute]
            if claim.constraints[i].distinct:
                self.distinct[c][i].add(value)
            else:
                self.match[c][i] = (value, self.match[c][i][1] + 1)
            fixed.append((i, value))
        charged = False
        holdings = self.snap.holdings
        if device.counters and not (device.shared and (device.id in holdings.shares or self.shares[pos])):
            used = self.counter_used.setdefault(self.view.pools[pos], {})
            for set_name, counter, amount in device.counters:
                used[(set_name, counter)] = used.get((set_name, counter), Fraction(0)) + amount
            charged = True
        consumed: Consumption | None = None
        if device.shared:
            consumed = alt.consumption[pos]
            self.shares[pos] += 1
            if consumed:
                ours = self.share_used.setdefault(pos, {})
                for key, amount in consumed:
                    ours[key] = ours.get(key, Fraction(0)) + amount
        else:
            self.picks[pos] |= 1 << c
        pick = _Pick(alt, pos, consumed, charged, fixed)
        self.results[c].append(pick)
        return pick

    def undo(self, pick: _Pick) -> None:
        alt, pos = pick.alt, pick.pos
        c = alt.claim
        device = self.view.devices[pos]
        self.results[c].pop()
        if device.shared:
            self.shares[pos] -= 1
            if pick.consumed:
                ours = self.share_used[pos]
                for key, amount in pick.consumed:
                    ours[key] -= amount
        else:
            self.picks[pos] &= ~(1 << c)
        if pick.charged:
            used = self.counter_used[self.view.pools[pos]]
            for set_name, counter, amount in device.counters:
                used[(set_name, counter)] -= amount
        claim = self.claims[c]
        for i, value in pick.constraints:
            if claim.constraints[i].distinct:
                self.distinct[c][i].discard(value)
            else:
                fixed, count = self.match[c][i]
                self.match[c][i] = (fixed if count > 1 else None, count - 1)

    def twin_key(self, pos: int) -> tuple[Any, ...]:
        device = self.view.devices[pos]
        key: tuple[Any, ...] = (self.view.cls[pos], self.picks[pos], self.snap.holdings.holds(device.id))
        if device.shared:
            held = self.snap.holdings.shares.get(device.id) or {}
            ours = self.share_used.get(pos) or {}
            key += (self.shares[pos], tuple(sorted(held.items())), tuple(sorted(ours.items())))
        return key

    # the oracle

    def _usable(self, alt: _Alt, need: int, start: int, enough: int | None = None) -> list[int] | None:
        """The devices the alternative can still take from `start` on (the first `enough` of them, when a count is
        all the caller needs); None when an All request cannot have one of the devices it must take."""
        if alt.all_set is not None:
            todo = alt.all_set[len(alt.all_set) - need :]
            ok = [p for p in todo if self.free(alt, p) and self._constraint_ok(alt, p)]
            if len(ok) < len(todo) or any(
                self.view.devices[p].taints and not tolerated(self.view.devices[p].taints, alt.request.tolerations)
                for p in todo
            ):
                return None
            return ok
        if enough is None:
            return [p for p in alt.candidates if p >= start and self.free(alt, p) and self._constraint_ok(alt, p)]
        found: list[int] = []
        for p in alt.candidates:
            if p >= start and self.free(alt, p) and self._constraint_ok(alt, p):
                found.append(p)
                if len(found) >= enough:
                    break
        return found

    def oracle(
        self, u: int, current: tuple[_Alt, int, int] | None, explain: bool = False
    ) -> tuple[bool, bool, str, Any]:
        """Can the search still be completed from unit `u` (with `current` = (alternative, devices still needed,
        first position) of unit `u` in progress)? Returns (maybe, exact, reason, assignment): `maybe` False is a
        proof; with `exact` True, `maybe` True is one too and `assignment` a completion (when a flow found it)."""
        self.tick()
        demands: list[tuple[int, list[tuple[_Alt, int, list[int]]]]] = []
        exact = True
        first = u
        alone = len(self.units) - u == 1  # one request left, alone: a count may be all it takes
        if current is not None:
            alt, need, start = current
            usable = self._usable(
                alt, need, start, need if alone and not alt.constraints and not alt.counters else None
            )
            if usable is None or len(usable) < need:
                return False, True, self._short(alt, need, usable) if explain else "", None
            demands.append((u, [(alt, need, usable)]))
            first = u + 1
        for v in range(first, len(self.units)):
            options: list[tuple[_Alt, int, list[int]]] = []
            for alt in self.units[v].alts:
                if alt.all_set is not None and not alt.all_set:
                    continue
                simple = alone and len(self.units[v].alts) == 1 and not alt.constraints and not alt.counters
                usable = self._usable(alt, alt.need, 0, alt.need if simple else None)
                if usable is not None and len(usable) >= alt.need:
                    options.append((alt, alt.need, usable))
            if not options:
                reason = ""
                if explain:
                    alt = self.units[v].alts[-1]
                    reason = self._short(alt, alt.need, self._usable(alt, alt.need, 0))
                return False, True, reason, None
            demands.append((v, options))
        if not demands:
            return True, True, "", {}
        short = self._counters_short(demands)
        if short is not None:
            return False, True, short if explain else "", None
        demands, merged = self._merge(demands)
        admins = [d for d in demands if any(o[0].request.admin for o in d[1])]
        if admins and len(demands) > 1:
            exact = False
        flow_demands = [d for d in demands if not any(o[0].request.admin for o in d[1])]
        if len(demands) == 1 and len(demands[0][1]) == 1:
            [(alt, need, usable)] = demands[0][1]
            ok, single_exact = self._single(alt, need, usable)
            if not ok:
                return False, single_exact, self._constrained(alt, need) if explain else "", None
            return True, single_exact, "", None
        maybe, exact, reason, assignment = self._flows(flow_demands, exact, explain)
        return maybe, exact, reason, None if merged else assignment

    def _counters_short(self, demands: list[tuple[int, list[tuple[_Alt, int, list[int]]]]]) -> str | None:
        """A lower bound on what the remaining demands draw from each pool counter, against what is left: the
        demands need N devices in all (the fewest of each one's alternatives) from the union U of what they can use;
        if only F of U do not draw on a counter, at least N - F exclusive devices that do must be taken, and the
        cheapest that many already overdraw it. A proof when it says no; otherwise says nothing."""
        if not any(alt.counters for _, options in demands for alt, _, _ in options):
            return None
        devices = self.view.devices
        demands = [d for d in demands if not any(alt.request.admin for alt, _, _ in d[1])]  # admins may share
        if not any(devices[p].counters for _, options in demands for _, _, usable in options for p in usable):
            return None
        need = sum(min(n for _, n, _ in options) for _, options in demands)
        union: set[int] = set()
        for _, options in demands:
            for _, _, usable in options:
                union.update(usable)
        costs: dict[tuple[int, str, str], list[Fraction]] = {}
        for p in union:
            device = devices[p]
            if device.shared:
                return None  # a shared device may serve many demands for one charge: no bound from counting
            for set_name, counter, amount in device.counters:
                costs.setdefault((self.view.pools[p], set_name, counter), []).append(amount)
        for (pool, set_name, counter), amounts in costs.items():
            must = need - (len(union) - len(amounts))
            if must <= 0:
                continue
            left, _ = self.snap.pool_counters(pool)
            used = self.counter_used.get(pool) or {}
            available = left.get((set_name, counter), Fraction(0)) - used.get((set_name, counter), Fraction(0))
            cheapest = sum(sorted(amounts)[:must], Fraction(0))
            if cheapest > available:
                label = self.snap.pools[pool].label
                return (
                    f"the requests need {need} devices, at least {must} of them drawing on counter "
                    f"{set_name}/{counter} of pool {label}: they take {cheapest}, {available} is left"
                )
        return None

    def _short(self, alt: _Alt, need: int, usable: list[int] | None) -> str:
        where = f"claim {self.claims[alt.claim].key}, request {alt.request.name}"
        if alt.all_set is not None:
            if not alt.all_set:
                return f"{where}: asks for all devices of class {alt.request.class_name}, and none is on the node"
            return f"{where}: asks for all {len(alt.all_set)} devices it matches, and not all of them can be had"
        matching = len(alt.candidates)
        if not matching:
            return f"{where}: no device on the node matches class {alt.request.class_name} and the request"
        have = len(usable or ())
        return f"{where}: {need} devices needed, {matching} match and {have} of them can be had"

    def _constrained(self, alt: _Alt, need: int) -> str:
        claim = self.claims[alt.claim]
        merged = self.merged.get(alt.request.name)
        who = f"requests {', '.join(merged)}" if merged else f"request {alt.request.name}"
        names = ", ".join(
            ("distinctAttribute " if claim.constraints[i].distinct else "matchAttribute ")
            + claim.constraints[i].attribute
            for i in alt.constraints
        )
        return (
            f"claim {claim.key}, {who}: no {need} devices keep the constraints ({names})"
            if names
            else f"claim {claim.key}, {who}: {need} devices cannot be had together"
        )

    def _single(self, alt: _Alt, need: int, usable: list[int]) -> tuple[bool, bool]:
        """One demand left (one request, or interchangeable ones merged): exact by counting per value of its open
        matchAttribute constraints, and for two distinctAttribute constraints by a bipartite matching between their
        values (a device is an edge between its two values; the devices must form a matching)."""
        claim = self.claims[alt.claim]
        devices = self.view.devices
        exact = not (need > 1 and any(devices[p].counters for p in usable))
        open_match = [
            i for i in alt.constraints if not claim.constraints[i].distinct and not self.match[alt.claim][i][1]
        ]
        distinct = [claim.constraints[i].attribute for i in alt.constraints if claim.constraints[i].distinct]
        if len(distinct) > 2:
            exact = False
        if need <= 1 or (not open_match and not distinct):
            return len(usable) >= need, exact
        groups: dict[tuple[AttrValue, ...], list[int]] = {}
        for p in usable:
            attributes = devices[p].attributes
            groups.setdefault(tuple(attributes[claim.constraints[i].attribute] for i in open_match), []).append(p)
        for members in groups.values():
            if len(members) < need:
                continue
            if any(len({devices[p].attributes[a] for p in members}) < need for a in distinct):
                continue
            if len(distinct) < 2 or self._matching(members, distinct[0], distinct[1]) >= need:
                return True, exact
        return False, exact

    def _matching(self, members: list[int], first: str, second: str) -> int:
        """The largest set of devices among `members` whose `first` values all differ and `second` values too."""
        devices = self.view.devices
        net = Network(2)
        left: dict[AttrValue, int] = {}
        right: dict[AttrValue, int] = {}
        pairs: set[tuple[AttrValue, AttrValue]] = set()
        for p in members:
            a, b = devices[p].attributes[first], devices[p].attributes[second]
            if a not in left:
                left[a] = net.add_vertex()
                net.edge(0, left[a], 1)
            if b not in right:
                right[b] = net.add_vertex()
                net.edge(right[b], 1, 1)
            if (a, b) not in pairs:
                pairs.add((a, b))
                net.edge(left[a], right[b], 1)
        self.tick(1 + len(pairs) // 16)
        return net.max_flow(0, 1)

    def _merge(
        self, demands: list[tuple[int, list[tuple[_Alt, int, list[int]]]]]
    ) -> tuple[list[tuple[int, list[tuple[_Alt, int, list[int]]]]], bool]:
        """Interchangeable demands as one: requests of one claim with one alternative left, the same usable
        exclusive devices and the same constraints (two requests for one GPU each are one request for two)."""
        self.merged.clear()
        if len(demands) < 2:
            return demands, False
        out: list[tuple[int, list[tuple[_Alt, int, list[int]]]]] = []
        index: dict[tuple[Any, ...], int] = {}
        merged = False
        for unit, options in demands:
            if len(options) == 1:
                alt, need, usable = options[0]
                if not alt.request.admin and not any(self.view.devices[p].shared for p in usable):
                    key = (alt.claim, alt.constraints, tuple(usable))
                    j = index.get(key)
                    if j is not None:
                        first_unit, [(first_alt, first_need, first_usable)] = out[j]
                        out[j] = (first_unit, [(first_alt, first_need + need, first_usable)])
                        self.merged.setdefault(first_alt.request.name, [first_alt.request.name]).append(
                            alt.request.name
                        )
                        merged = True
                        continue
                    index[key] = len(out)
            out.append((unit, options))
        return out, merged

    def _flows(
        self, demands: list[tuple[int, list[tuple[_Alt, int, list[int]]]]], exact: bool, explain: bool
    ) -> tuple[bool, bool, str, Any]:
        combos = itertools.product(*(options for _, options in demands))
        flows = 0
        for tried, combo in enumerate(combos):
            if tried >= _MAX_COMBINATIONS:
                return True, False, "", None
            verdict = self._combo([u for u, _ in demands], list(combo))
            if verdict is None:
                continue
            ok, combo_exact, assignment, spent = verdict
            flows += spent
            if ok:
                return True, exact and combo_exact, "", assignment if exact and combo_exact else None
            if not combo_exact:
                exact = False
            if flows >= _MAX_FLOWS:
                return True, False, "", None
        reason = ""
        if explain:
            names = ", ".join(f"{alt.request.name}" for _, options in demands for alt, _, _ in options[:1])
            reason = f"the requests {names} cannot all have their devices at once on this node"
            if len(self.claims) == 1 and len(demands) == len(self.units):
                reason = f"claim {self.claims[0].key}: {reason}"
        return False, exact, reason, None

    def _combo(
        self, units: list[int], combo: list[tuple[_Alt, int, list[int]]]
    ) -> tuple[bool, bool, dict[int, tuple[_Alt, list[int]]] | None, int] | None:
        """One combination of alternatives: enumerate the open matchAttribute values, one flow each.
        Returns (feasible, exact, assignment, flows run), or None when a constraint rules it out at once."""
        exact = True
        devices = self.view.devices
        per_claim: dict[int, int] = {}
        for alt, need, _ in combo:
            per_claim[alt.claim] = per_claim.get(alt.claim, len(self.results[alt.claim])) + need
        if any(n > MAX_RESULTS for n in per_claim.values()):
            return None
        # open matchAttribute constraints per claim, with the values every demand under them can still have
        opens: list[tuple[int, int, list[AttrValue]]] = []
        seen: set[tuple[int, int]] = set()
        distincts: set[tuple[int, int]] = set()
        for alt, _, _ in combo:
            claim = self.claims[alt.claim]
            for i in alt.constraints:
                if claim.constraints[i].distinct:
                    distincts.add((alt.claim, i))
                    continue
                if self.match[alt.claim][i][1] or (alt.claim, i) in seen:
                    continue
                seen.add((alt.claim, i))
                attribute = claim.constraints[i].attribute
                values: set[AttrValue] | None = None
                for other, _, other_usable in combo:
                    if other.claim == alt.claim and i in other.constraints:
                        mine = {devices[p].attributes[attribute] for p in other_usable}
                        values = mine if values is None else values & mine
                if not values:
                    return None
                opens.append((alt.claim, i, sorted(values, key=repr)))
        layer: tuple[int, int] | None = None
        if distincts:
            if len(distincts) == 1:
                (claim_index, i) = next(iter(distincts))
                if all(a.claim == claim_index and i in a.constraints for a, _, _ in combo):
                    layer = (claim_index, i)
            if layer is None:
                exact = False
                for claim_index, i in distincts:
                    attribute = self.claims[claim_index].constraints[i].attribute
                    covered = [(a, n, us) for a, n, us in combo if a.claim == claim_index and i in a.constraints]
                    values = {devices[p].attributes[attribute] for _, _, us in covered for p in us}
                    if len(values) < sum(n for _, n, _ in covered):
                        return None
        flows = 0
        for chosen in itertools.product(*(values for _, _, values in opens)):
            if flows >= _MAX_FLOWS:
                return True, False, None, flows
            fixed = {(c, i): v for (c, i, _), v in zip(opens, chosen, strict=True)}
            filtered: list[tuple[_Alt, int, list[int]]] = []
            possible = True
            for alt, need, usable in combo:
                claim = self.claims[alt.claim]
                keep = [
                    p
                    for p in usable
                    if all(
                        devices[p].attributes[claim.constraints[i].attribute] == fixed[(alt.claim, i)]
                        for i in alt.constraints
                        if (alt.claim, i) in fixed
                    )
                ]
                if len(keep) < need:
                    possible = False
                    break
                filtered.append((alt, need, keep))
            if not possible:
                continue
            flows += 1
            ok, flow_exact, assignment = self._flow(units, filtered, layer)
            exact = exact and flow_exact
            if ok:
                return True, exact, assignment, flows
        return False, exact, None, flows

    def _flow(
        self, units: list[int], combo: list[tuple[_Alt, int, list[int]]], layer: tuple[int, int] | None
    ) -> tuple[bool, bool, dict[int, tuple[_Alt, list[int]]] | None]:
        devices = self.view.devices
        exact = True
        net = Network(2)
        source, sink = 0, 1
        vertex: dict[int, int] = {}
        value_vertex: dict[AttrValue, int] = {}
        users: dict[int, list[_Alt]] = {}
        for alt, _, usable in combo:
            for p in usable:
                users.setdefault(p, []).append(alt)
        total = sum(n for _, n, _ in combo)
        edges: list[tuple[int, int, int]] = []
        for index, (_, need, usable) in enumerate(combo):
            d = net.add_vertex()
            net.edge(source, d, need)
            for p in usable:
                v = vertex.get(p)
                if v is None:
                    v = net.add_vertex()
                    vertex[p] = v
                    device = devices[p]
                    if device.counters:
                        exact = False
                    if layer is not None:
                        attribute = self.claims[layer[0]].constraints[layer[1]].attribute
                        value = device.attributes[attribute]
                        w = value_vertex.get(value)
                        if w is None:
                            w = net.add_vertex()
                            value_vertex[value] = w
                            net.edge(w, sink, 1)
                        net.edge(v, w, 1)
                    else:
                        capacity, uniform = self._copies(p, users[p], total)
                        exact = exact and uniform
                        net.edge(v, sink, capacity)
                edges.append((index, p, net.edge(d, v, 1)))
        self.tick(1 + len(edges) // 16)
        if net.max_flow(source, sink) < total:
            return False, exact, None
        assignment: dict[int, tuple[_Alt, list[int]]] = {}
        for index, (alt, _, _) in enumerate(combo):
            assignment[units[index]] = (alt, [])
        for index, p, e in edges:
            if net.flow(e):
                assignment[units[index]][1].append(p)
        return True, exact, assignment

    def _copies(self, pos: int, alts: list[_Alt], total: int) -> tuple[int, bool]:
        """How many of the demands may use the device: 1 if exclusive; for a shared device, how many equal
        allocations its capacity has left (exact), or `total` when the demands consume different amounts."""
        device = self.view.devices[pos]
        if not device.shared:
            return 1, True
        amounts = {alt.consumption[pos] for alt in alts}
        if len(amounts) > 1:
            return total, False
        (consumption,) = amounts
        copies = total
        held = self.snap.holdings.shares.get(device.id) or {}
        ours = self.share_used.get(pos) or {}
        for key, amount in consumption:
            if amount > 0:
                left = device.capacity[key].value - held.get(key, 0) - ours.get(key, 0)
                copies = min(copies, int(left // amount))
        return max(copies, 0), True

    # the search in Kubernetes' order

    def fill(self, u: int, alt: _Alt, remaining: int, start: int) -> bool:
        if remaining == 0:
            return self.slot(u + 1)
        self.tick()
        if len(self.results[alt.claim]) + remaining > MAX_RESULTS:
            return False
        if not (u == 0 and remaining == alt.need and len(self.units[0].alts) == 1):  # the first check covered it
            maybe, _, _, _ = self.oracle(u, (alt, remaining, start))
            if not maybe:
                return False
        if alt.all_set is not None:
            pick = self.take(alt, alt.all_set[len(alt.all_set) - remaining])
            if pick is None:
                return False
            if self.fill(u, alt, remaining - 1, 0):
                return True
            self.undo(pick)
            return False
        failed: set[tuple[Any, ...]] = set()
        for p in alt.candidates:
            if p < start:
                continue
            key = self.twin_key(p)
            if key in failed:
                continue
            pick = self.take(alt, p)
            if pick is None:
                failed.add(key)
                continue
            if self.fill(u, alt, remaining - 1, p + 1):
                return True
            self.undo(pick)
            failed.add(key)
        return False

    def slot(self, u: int) -> bool:
        if u == len(self.units):
            return True
        for alt in self.units[u].alts:
            if alt.all_set is not None and not alt.all_set:
                continue  # All needs at least one device: try the next alternative
            self.choice[u] = alt
            if self.fill(u, alt, alt.need, 0):
                return True
        self.choice[u] = None
        return False

    def replay(self, assignment: dict[int, tuple[_Alt, list[int]]]) -> bool:
        """Take a flow's assignment in the search's order; False (and nothing taken) if some take fails."""
        taken: list[_Pick] = []
        for u in range(len(self.units)):
            alt, positions = assignment[u]
            order = alt.all_set if alt.all_set is not None else sorted(positions)
            self.choice[u] = alt
            for p in order:
                pick = self.take(alt, p)
                if pick is None:
                    for done in reversed(taken):
                        self.undo(done)
                    return False
                taken.append(pick)
        return True

    def run(self, first_fit: bool) -> Outcome:
        problem = self.prepare()
        if problem is not None:
            return NoFit(problem, self.steps)
        try:
            maybe, exact, reason, assignment = self.oracle(0, None, explain=True)
            if not maybe:
                return NoFit(self._with_pools(reason), self.steps)
            found = (not first_fit and exact and assignment is not None and self.replay(assignment)) or self.slot(0)
        except _OutOfSteps:
            return Undecided(
                f"undecided after {self.budget} steps: the claims' constraints need a search longer than the budget",
                self.steps,
            )
        if not found:
            return NoFit(
                self._with_pools(f"no combination of devices satisfies the claims (searched {self.steps} steps)"),
                self.steps,
            )
        return Fit(tuple(self._allocation(c) for c in range(len(self.claims))), self.steps)

    def _with_pools(self, reason: str) -> str:
        if self.view.invalid:
            reason += "; invalid resource pools were encountered: " + "; ".join(self.view.invalid)
        if self.view.incomplete:
            reason += "; pools being updated: " + ", ".join(self.view.incomplete)
        return reason

    # results

    def _allocation(self, c: int) -> dict[str, Any]:
        claim = self.claims[c]
        results: list[dict[str, Any]] = []
        for n, pick in enumerate(self.results[c]):
            device = self.view.devices[pick.pos]
            request = pick.alt.request
            entry: dict[str, Any] = {
                "request": request.name,
                "driver": device.driver,
                "pool": device.pool,
                "device": device.name,
            }
            if request.admin:
                entry["adminAccess"] = True
            if request.tolerations_wire:
                entry["tolerations"] = [dict(t) for t in request.tolerations_wire]
            if device.binding_conditions:
                entry["bindingConditions"] = list(device.binding_conditions)
            if device.binding_failure_conditions:
                entry["bindingFailureConditions"] = list(device.binding_failure_conditions)
            if device.shared:
                name = f"{claim.key}/{request.name}/{'/'.join(device.id)}/{n}"
                entry["shareID"] = str(uuid.uuid5(_SHARE_NAMESPACE, name))
                if pick.consumed:
                    entry["consumedCapacity"] = {
                        device.capacity[key].name: quantity_text(amount) for key, amount in pick.consumed
                    }
            results.append(entry)
        devices: dict[str, Any] = {"results": results}
        config = self._config(c)
        if config:
            devices["config"] = config
        allocation: dict[str, Any] = {"devices": devices}
        selector = self._node_selector(c)
        if selector is not None:
            allocation["nodeSelector"] = selector
        return allocation

    def _config(self, c: int) -> list[dict[str, Any]]:
        claim = self.claims[c]
        chosen = [(self.units[u].slot, alt) for u, alt in enumerate(self.choice) if alt is not None and alt.claim == c]
        out: list[dict[str, Any]] = []
        by_class: dict[str, list[dict[str, Any]]] = {}
        for _, alt in chosen:
            cls = self.snap.classes[alt.request.class_name]
            if cls.name in by_class:
                for entry in by_class[cls.name]:
                    entry["requests"].append(alt.request.name)
                continue
            entries = [{"source": "FromClass", "requests": [alt.request.name], **cfg} for cfg in cls.config]
            by_class[cls.name] = entries
            out.extend(entries)
        names = {slot for slot, _ in chosen} | {alt.request.name for _, alt in chosen}
        for cfg in claim.config:
            requests = list(cfg.get("requests") or ())
            if requests and not names.intersection(requests):
                continue
            entry = {"source": "FromClaim", **{k: v for k, v in cfg.items() if k != "requests"}}
            if requests:
                entry["requests"] = requests
            out.append(entry)
        return out

    def _node_selector(self, c: int) -> dict[str, Any] | None:
        fields: list[dict[str, Any]] = []
        expressions: list[dict[str, Any]] = []
        local = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [self.node.name]}]}
            ]
        }
        for pick in self.results[c]:
            device = self.view.devices[pick.pos]
            slice_ = self.view.slices[pick.pos]
            locality: Locality | None = device.locality if slice_.per_device else slice_.locality
            if locality is None:
                continue
            if locality.node_name is not None or device.binds_to_node:
                return local
            if locality.all_nodes or locality.terms is None:
                continue
            if len(locality.terms) != 1:
                return local  # Kubernetes refuses such a selector; this node is where the devices are usable
            term = locality.terms[0]
            for source, target in (
                (term.get("matchFields") or (), fields),
                (term.get("matchExpressions") or (), expressions),
            ):
                for requirement in source:
                    if not any(_same_requirement(requirement, have) for have in target):
                        target.append(dict(requirement))
        if not fields and not expressions:
            return None
        term_out: dict[str, Any] = {}
        if expressions:
            term_out["matchExpressions"] = expressions
        if fields:
            term_out["matchFields"] = fields
        return {"nodeSelectorTerms": [term_out]}


def _same_requirement(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (
        a.get("key") == b.get("key")
        and a.get("operator") == b.get("operator")
        and set(a.get("values") or ()) == set(b.get("values") or ())
    )
