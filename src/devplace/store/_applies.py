"""Apply: create or update one validated object from a manifest, the one shell around `api.applies.plan_apply`.

`devplace apply` and `Fleet.apply` both call `apply_object`, so they agree on everything the plan decides (what is
kept of the stored object: status, server-owned metadata, an Instance's slot holders) and on how it is written:
a create, or the plan re-decided inside `store.cas` on the object as stored (a concurrent writer makes it decide
again, never lose their write). Rules that need other stored objects (a ResourceClass's references, its immutable
spec) live above the store (`scheduler.admissions`); callers pass them as `Admission` hooks, which refuse by
raising `errors.Invalid` before anything is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from devplace import errors
from devplace.api import Create, Update, plan_apply
from devplace.clocks import Clock, SystemClock
from devplace.store._base import Store
from devplace.store._cas import cas

ApplyOutcome = Literal["created", "configured", "unchanged"]


@dataclass(frozen=True)
class Admission:
    """Checks a write must pass against stored objects: `create(store, new)` and `update(current, new)`."""

    create: Callable[[Store, Mapping[str, Any]], Awaitable[None]]
    update: Callable[[Mapping[str, Any], Mapping[str, Any]], None]


@dataclass(frozen=True)
class Applied:
    """What applying one document did, and what the plan noted (e.g. slot holders it kept)."""

    outcome: ApplyOutcome
    object: dict[str, Any]
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """`configured`, or `configured (kept 2 slot holders written by agents)`."""
        return f"{self.outcome} ({'; '.join(self.notes)})" if self.notes else self.outcome


async def apply_object(
    store: Store, desired: Mapping[str, Any], *, admission: Admission | None = None, clock: Clock | None = None
) -> Applied:
    """Create or update one validated object (module docstring); `clock` paces the CAS loop's backoff."""
    meta = desired["metadata"]
    kind, name, ns = desired["kind"], meta["name"], meta.get("namespace") or ""
    try:
        stored: dict[str, Any] | None = await store.get(kind, name, ns)
    except errors.NotFound:
        stored = None
    plan = plan_apply(desired, stored)
    if isinstance(plan, Create):
        if admission is not None:
            await admission.create(store, plan.object)
        try:
            return Applied("created", await store.create(plan.object), plan.notes)
        except errors.AlreadyExists:
            stored = None  # created meanwhile: decide on what is stored now
    notes: tuple[str, ...] = ()

    def decide(current: dict[str, Any]) -> dict[str, Any] | None:
        nonlocal notes
        decided = plan_apply(desired, current)
        if isinstance(decided, Create):  # `current` exists: the plan never creates over it
            raise AssertionError("plan_apply planned a create over a stored object")
        notes = decided.notes
        if not isinstance(decided, Update):
            return None
        if admission is not None:
            admission.update(current, decided.object)
        return decided.object

    written = await cas(store, kind, name, ns, decide, first=stored, clock=clock or SystemClock())
    return Applied("configured" if written.action == "updated" else "unchanged", written.object, notes)
