"""One reconcile of one Configuration, decided: the pure function the I/O shell calls.

`decide(configuration, instances, existing, ...)` -> the plan (creates, updates, deletes), the Configuration's new
status (or None) and when to look again. Level-triggered: it reads only current state (the Configuration, the
Instances, the objects the Configuration owns), so running it again after a crash, or in two controllers at once,
gives the same answer.
- Configuration deleted (None): nothing is desired, everything it owns is deleted.
- Configuration invalid (it reached the store without validation): nothing is created or deleted, and its status says
  why (`InvalidConfiguration`).
- Configuration without brokers (no brokerSpec): nothing desired.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devplace.controller import _inputs as inputs
from devplace.controller import _plans as plans
from devplace.controller import _services as services
from devplace.controller import _statuses as statuses
from devplace.controller import _strategies as strategies
from devplace.store import rfc3339


@dataclass(frozen=True)
class Settings:
    resource_prefix: str | None = None
    """An override of the extended-resource prefix; None: each Configuration's API group (`api.devices`)."""
    pending_grace: float = 300.0
    """A broker Pending for longer than this is recreated."""


@dataclass(frozen=True)
class Decision:
    plan: plans.Plan
    wake_at: float | None = None
    brokers: strategies.Brokers = field(default_factory=strategies.Brokers)
    counts: Mapping[str, int] | None = None
    """`{desired, running, pending}` broker counts for `status.brokers`; None: not reported (invalid, deleted)."""
    problem: str | None = None
    now: str = ""
    configuration: Mapping[str, Any] | None = field(default=None, repr=False)

    def status_for(self, configuration: Mapping[str, Any]) -> dict[str, Any] | None:
        """`configuration` (e.g. a fresh read inside a CAS) with this decision's status; None when already so."""
        if self.counts is None and self.problem is None:
            return None
        return statuses.status_with(
            configuration,
            brokers=self.counts,
            skips=self.brokers.skips,
            problem=self.problem,
            waiting_since=None if self.brokers.waiting_since is None else rfc3339(self.brokers.waiting_since),
            now=self.now,
        )

    @property
    def status(self) -> dict[str, Any] | None:
        """The decided-on Configuration with its new status, to write by CAS; None when the stored one is current."""
        return self.status_for(self.configuration) if self.configuration is not None else None


def _min(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def decide(
    configuration: inputs.ConfigurationFacts | None,
    instances: Iterable[inputs.InstanceFacts],
    existing: Sequence[Mapping[str, Any]],
    *,
    settings: Settings | None = None,
    now: float,
    class_matches: strategies.ClassMatches = strategies.no_classes,
) -> Decision:
    """Plan one Configuration (module docstring). `existing`: the objects it owns (by its label)."""
    settings = settings or Settings()
    if configuration is None:
        return Decision(plans.plan((), existing, now=now, pending_grace=settings.pending_grace))
    if configuration.problem is not None:
        return Decision(plans.Plan(), problem=configuration.problem, now=rfc3339(now), configuration=configuration.wire)
    instances = list(instances)
    chosen = strategies.brokers(
        configuration,
        instances,
        existing,
        prefix=settings.resource_prefix,
        now=now,
        class_matches=class_matches,
    )
    own = {i.name: i for i in instances if i.configuration == configuration.name}
    wanted = (*chosen.objects, *services.services(configuration, chosen.objects, existing, own))
    plan = plans.plan(wanted, existing, now=now, pending_grace=settings.pending_grace, retain=chosen.retain)
    broker_keys = {d.key for d in chosen.objects if d.key[0] in ("Pod", "Job")}
    after = plans.applied(plan, {plans.key_of(obj): obj for obj in existing})  # count what the plan leaves
    counted = plans.counts([obj for key, obj in after.items() if key in broker_keys])
    return Decision(
        plan,
        _min(chosen.wake_at, plan.wake_at),
        chosen,
        counts={"desired": len(broker_keys), "running": counted["running"], "pending": counted["pending"]},
        now=rfc3339(now),
        configuration=configuration.wire,
    )
