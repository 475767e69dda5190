"""The generic placement controller (EMCO's allOf/anyOf cluster intents). Pure.

For each app, over all its app intents in the deployment intent group:
- `allOf` entries are required: a named cluster, or every cluster carrying a label (`key` or `key=value`) from that
  provider. They are the candidate's `required` set and each counts toward the replication count.
- `anyOf` entries form a pool; each app intent with an `anyOf` adds one cluster to the replication count, to be picked
  from the pool (pools of several intents for one app merge into one; the count never exceeds what the pool adds
  beyond the required clusters).
- The allow list is required + pool; every other cluster is denied with the reason that no intent selects it.
- An `allOf` entry, or a whole `anyOf`, that selects nothing (a cluster that is not registered, a label no cluster
  carries) is a problem that fails the app: deploying to "all of" an empty set is almost certainly a typo.
Apps without app intents get no candidate: any cluster will do, once (the combiner's default).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from devplace.placement._candidates import Candidate, Reason
from devplace.placement._inventory import ClusterInventory, ClusterRef


@dataclass(frozen=True)
class ClusterSelector:
    provider: str
    cluster: str | None = None
    label: str | None = None

    def select(self, clusters: Sequence[ClusterInventory]) -> list[ClusterRef]:
        if self.cluster is not None:
            return [c.ref for c in clusters if c.ref.provider == self.provider and c.ref.name == self.cluster]
        label = self.label or ""
        return [c.ref for c in clusters if c.ref.provider == self.provider and c.has_label(label)]

    def __str__(self) -> str:
        if self.cluster is not None:
            return f"{self.provider}/{self.cluster}"
        return f"{self.provider} label {self.label}"


@dataclass(frozen=True)
class AppIntent:
    app: str
    name: str
    all_of: tuple[ClusterSelector, ...] = ()
    any_of: tuple[ClusterSelector, ...] = ()


@dataclass(frozen=True, slots=True)
class NotSelected(Reason):
    intents: tuple[str, ...]

    def text(self) -> str:
        return f"not selected by generic placement intent {', '.join(self.intents)}"


def generic_candidates(intents: Iterable[AppIntent], clusters: Sequence[ClusterInventory]) -> dict[str, Candidate]:
    by_app: dict[str, list[AppIntent]] = {}
    for intent in intents:
        by_app.setdefault(intent.app, []).append(intent)
    universe = [c.ref for c in clusters]
    out: dict[str, Candidate] = {}
    for app, app_intents in sorted(by_app.items()):
        app_intents.sort(key=lambda i: i.name)
        required: set[ClusterRef] = set()
        pool: set[ClusterRef] = set()
        problems: list[str] = []
        picks = 0
        for intent in app_intents:
            for selector in intent.all_of:
                chosen = selector.select(clusters)
                if not chosen:
                    problems.append(f"app intent {intent.name}: allOf {selector} selects no registered cluster")
                required.update(chosen)
            offered = {ref for selector in intent.any_of for ref in selector.select(clusters)}
            if intent.any_of and not offered:
                listed = ", ".join(str(s) for s in intent.any_of)
                problems.append(f"app intent {intent.name}: anyOf {listed} selects no registered cluster")
            pool |= offered
            if intent.any_of:
                picks += 1
        allowed = required | pool
        picks = min(picks, len(pool - required))
        why = NotSelected(tuple(i.name for i in app_intents))
        reasons = {ref: why for ref in universe if ref not in allowed}
        out[app] = Candidate.from_allowed(
            app,
            allowed,
            universe,
            replicas=len(required) + picks,
            required=required,
            reasons=reasons,
            problems=problems,
        )
    return out
