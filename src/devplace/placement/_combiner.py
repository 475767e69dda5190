"""The scheduler of placement controllers: combine every controller's partition candidates and choose clusters. Pure.

- A controller that failed or timed out fails the whole decision, naming the controller and its error: no plan is
  made from the controllers that happened to answer.
- Per app, the admitted clusters are the intersection of the allow lists minus the union of the deny lists; every
  cluster a controller excluded keeps that controller's reason (several reasons join with "; ").
- The replication count is the one the controllers state (None = no opinion; the default is 1); controllers that
  state different counts fail the app. `required` clusters (allOf) must all be admitted.
- The rest are picked by score (the sum of the controllers' scores), highest first, ties by cluster name, so the same
  inputs always give the same plan.
- An app that cannot get its count fails the decision with the reasons; apps that could be placed keep their clusters
  in the decision (a dry run shows them), but `Decision.ok` is false and nothing may be committed from it.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from devplace.placement._candidates import Because, Candidate, Reason
from devplace.placement._inventory import ClusterRef

_SHOWN_REASONS = 5


@dataclass(frozen=True)
class Outcome:
    """What one controller returned: candidates per app, or the error that stopped it."""

    controller: str
    candidates: Mapping[str, Candidate] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class AppPlacement:
    app: str
    clusters: tuple[ClusterRef, ...] = ()
    scores: Mapping[ClusterRef, float] = field(default_factory=dict)
    rejected: Mapping[ClusterRef, Sequence[Reason]] = field(default_factory=dict)
    qualified: int = 0
    wanted: int = 1
    error: str | None = None

    def reason(self, cluster: ClusterRef) -> str:
        return "; ".join(str(r) for r in self.rejected.get(cluster, ()))


@dataclass(frozen=True)
class Decision:
    apps: tuple[AppPlacement, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors

    def app(self, name: str) -> AppPlacement:
        return next(a for a in self.apps if a.app == name)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _reasons_summary(rejected: Mapping[ClusterRef, Sequence[Reason]], among: Collection[ClusterRef]) -> str:
    first = heapq.nsmallest(_SHOWN_REASONS, among)
    shown = [f"{ref}: {'; '.join(str(r) for r in rejected[ref])}" for ref in first]
    more = len(among) - len(shown)
    return "; ".join(shown) + (f" (and {more} more)" if more > 0 else "")


def _place_app(app: str, universe: Sequence[ClusterRef], cands: Sequence[tuple[str, Candidate]]) -> AppPlacement:
    universe_set = frozenset(universe)
    allowed: set[ClusterRef] = set(universe_set)
    rejected: dict[ClusterRef, list[Reason]] = {}
    required: set[ClusterRef] = set()
    counts: dict[str, int] = {}
    problems: list[str] = []
    for controller, cand in cands:
        if cand.allow is not None:
            excluded = universe_set - cand.allow
            allowed &= cand.allow
        else:
            assert cand.deny is not None
            excluded = cand.deny & universe_set
            allowed -= cand.deny
        fallback = Because(f"rejected by {controller}")
        reasons = cand.reasons
        for ref in excluded:
            why = reasons.get(ref, fallback)
            if ref in rejected:
                rejected[ref].append(why)
            else:
                rejected[ref] = [why]
        required |= cand.required
        if cand.replicas is not None:
            counts[controller] = cand.replicas
        problems.extend(f"app {app}: {p}" for p in cand.problems)
    frozen: Mapping[ClusterRef, Sequence[Reason]] = rejected
    wanted = next(iter(counts.values()), 1)

    def failed(error: str) -> AppPlacement:
        return AppPlacement(app, (), {}, frozen, len(allowed), wanted, error)

    if problems:
        return failed("; ".join(problems))
    if len(set(counts.values())) > 1:
        stated = ", ".join(f"{c}: {n}" for c, n in sorted(counts.items()))
        return failed(f"app {app}: controllers disagree on the replication count ({stated})")
    if not universe:
        return failed(f"app {app}: no clusters are registered")
    missing = sorted(required - allowed)
    if missing:
        return failed(f"app {app}: required clusters were rejected: {_reasons_summary(frozen, missing)}")
    if len(allowed) < wanted:
        qualify = f"{len(allowed)} qualifies" if len(allowed) == 1 else f"{len(allowed)} qualify"
        return failed(
            f"app {app}: needs {_plural(wanted, 'cluster')}, {qualify}: {_reasons_summary(frozen, frozen.keys())}"
        )

    totals: dict[ClusterRef, float] = {}
    for _, cand in cands:
        for ref, value in cand.scores.items():
            if value:
                totals[ref] = totals.get(ref, 0.0) + value
    chosen = tuple(sorted(required)) + _best(allowed - required, totals, wanted - len(required))
    return AppPlacement(app, chosen, {ref: totals.get(ref, 0.0) for ref in chosen}, frozen, len(allowed), wanted)


def _best(pool: set[ClusterRef], totals: Mapping[ClusterRef, float], count: int) -> tuple[ClusterRef, ...]:
    """The `count` best of `pool`: highest score first, ties by name. Clusters are grouped by score (scores take few
    distinct values) and each group is ranked by name with a C-speed selection, which matters at 10,000 clusters."""
    if count <= 0:
        return ()
    groups: dict[float, list[ClusterRef]] = {}
    unscored: list[ClusterRef] = []
    for ref in pool:
        value = totals.get(ref, 0.0)
        if value:
            groups.setdefault(value, []).append(ref)
        else:
            unscored.append(ref)
    groups.setdefault(0.0, unscored)
    out: list[ClusterRef] = []
    for value in sorted(groups, reverse=True):
        out += heapq.nsmallest(count - len(out), groups[value])
        if len(out) >= count:
            break
    return tuple(out)


def combine(apps: Sequence[str], universe: Sequence[ClusterRef], outcomes: Sequence[Outcome]) -> Decision:
    """The decision for `apps` over `universe` (cluster order is irrelevant) from the controllers' outcomes."""
    failures = [f"placement controller {o.controller} failed: {o.error}" for o in outcomes if o.error is not None]
    if failures:
        return Decision((), tuple(failures))
    known = set(apps)
    errors = [
        f"placement controller {o.controller} returned a candidate for {name!r}, which is not an app of this "
        "composite app"
        for o in outcomes
        for name in sorted(o.candidates)
        if name not in known
    ]
    placements = []
    for app in apps:
        cands = [(o.controller, o.candidates[app]) for o in outcomes if app in o.candidates]
        placement = _place_app(app, universe, cands)
        placements.append(placement)
        if placement.error is not None:
            errors.append(placement.error)
    return Decision(tuple(placements), tuple(errors))
