"""Read-decide-write by compare-and-swap: the one loop through which every part changes or deletes an object.

`cas` reads the object, runs a pure decision on it and writes the result with the resourceVersion it read. On
`Conflict` (somebody wrote first) it re-reads and re-decides on the fresh state, with bounded attempts and jittered
exponential backoff through the injected `Clock` (tests pass a `FakeClock` and see the schedule; parts pass the
clock that paces their I/O). The decision returns the new object, `DELETE` to delete it (with the read
resourceVersion as precondition, so a delete never removes a state it did not decide on), or None for "nothing
to change"; it may raise to abort (e.g. `errors.Refused`), and then nothing is written. A decision may also be a
coroutine function, for decisions that must read more than the object itself (fleet placement evaluates a whole
intent tree): it may then return an object built on a copy it read itself, and its resourceVersion is what the write
is conditioned on, so anything that changed the object since that read makes the write conflict and the decision
run again.

A caller that keeps a cache may pass its copy as `first`: the first decision is made on it, saving a read (one round
trip when the cache is current, the common case for Allocate). A cached copy may be stale, so neither a `Conflict`
nor a refusal made on it is final: a `Conflict` re-reads at once (no backoff: that was staleness, not contention)
and a `Refused` raised by the decision on the cached copy is re-decided once on a fresh read before it is raised.
`decide` must not change its argument: the first attempt may get the caller's cached object itself.

A decision that computes something the caller needs afterwards (the claim Allocate made, the evaluated placement)
returns it with its outcome as `Decided(outcome, value)`: `cas` acts on `outcome` and returns `value` as
`Written.value`, taken from the same decision the write (or "unchanged") rests on, never from an earlier attempt's.
A plain decision's `value` is None (typed `Any`, so a caller whose decision is itself typed loosely still gets a
typed `Written`).

A decision that reads only part of the object on an object many writers change at once (a shared Instance's slots)
may offer its write also as a JSON patch whose `test` operations are what it read (`Decided.patch`). Where the store
offers patches (`JsonPatchStore`: an API server, which applies the patch by its own compare-and-swap), `cas` sends
the patch, which loses only to a change of what it tested, not to every write of the object; a patch that fails (or
is refused) is written again at once as the whole object by compare-and-swap, so a patch never lands where the plain
write would not, and every refusal, conflict and retry is the plain write's.

Every `cas` is measured (`devplace.metrics`): its duration by kind and outcome (`updated`, `patched`, `deleted`,
`unchanged`, `conflict` when it gave up, `refused`, `missing`, `failed`) and each write that lost a race, a CAS retry.
"""

from __future__ import annotations

import inspect
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar, overload

from devplace import errors, metrics
from devplace.clocks import Clock, SystemClock
from devplace.store._base import Store
from devplace.store._patches import takes_patches


class Delete:
    """The decision "delete the object as read"; use the `DELETE` instance."""

    _instance: Delete | None = None

    def __new__(cls) -> Delete:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DELETE"


DELETE: Final = Delete()

Decide = Callable[[dict[str, Any]], "dict[str, Any] | Delete | Awaitable[dict[str, Any] | Delete | None] | None"]

Action = Literal["updated", "patched", "deleted", "unchanged"]

V = TypeVar("V")
W = TypeVar("W")


@dataclass(frozen=True)
class Decided(Generic[V]):
    """A decision with a value for the caller: `cas` acts on `outcome` as if the decision had returned it, and
    returns `value` as `Written.value` (module docstring). `patch`: the same write as an RFC 6902 JSON patch whose
    `test` operations are what the decision read, sent instead where the store offers it (module docstring)."""

    outcome: dict[str, Any] | Delete | None
    value: V
    patch: Sequence[Mapping[str, Any]] | None = None


DecideValue = Callable[[dict[str, Any]], "Decided[V] | Awaitable[Decided[V]]"]


@dataclass(frozen=True)
class Written(Generic[W]):
    """What `cas` did: `object` is the stored result, the deleted object (its resourceVersion is the deletion's
    revision), or for "unchanged" the object the decision was made on; `value` is the deciding `Decided`'s value
    (None for a plain decision)."""

    object: dict[str, Any]
    action: Action
    value: W


DEFAULT_ATTEMPTS = 8
BASE_DELAY = 0.002
MAX_DELAY = 0.25


def backoff(attempt: int, base_delay: float = BASE_DELAY, max_delay: float = MAX_DELAY) -> float:
    """The pause after the `attempt`-th lost race (0-based): exponential, capped, jittered by ±50%."""
    nominal: float = min(max_delay, base_delay * 2.0 ** min(attempt, 16))
    return nominal * random.uniform(0.5, 1.5)


@overload
async def cas(
    store: Store,
    kind: str,
    name: str,
    namespace: str,
    decide: Decide,
    *,
    first: Mapping[str, Any] | None = None,
    clock: Clock | None = None,
    attempts: int = DEFAULT_ATTEMPTS,
    base_delay: float = BASE_DELAY,
    max_delay: float = MAX_DELAY,
) -> Written[Any]: ...


@overload
async def cas(
    store: Store,
    kind: str,
    name: str,
    namespace: str,
    decide: DecideValue[V],
    *,
    first: Mapping[str, Any] | None = None,
    clock: Clock | None = None,
    attempts: int = DEFAULT_ATTEMPTS,
    base_delay: float = BASE_DELAY,
    max_delay: float = MAX_DELAY,
) -> Written[V]: ...


async def cas(
    store: Store,
    kind: str,
    name: str,
    namespace: str,
    decide: Decide | DecideValue[Any],
    *,
    first: Mapping[str, Any] | None = None,
    clock: Clock | None = None,
    attempts: int = DEFAULT_ATTEMPTS,
    base_delay: float = BASE_DELAY,
    max_delay: float = MAX_DELAY,
) -> Written[Any]:
    """Apply `decide` to the current object until a compare-and-swap lands (see the module docstring).

    Raises `NotFound` when the object does not exist (or is deleted meanwhile), `Conflict` after `attempts` lost
    races, and whatever `decide` raises.
    """
    if attempts < 1:
        raise errors.Invalid.field("attempts", f"must be at least 1 (got {attempts})")
    started = time.perf_counter()
    outcome = "failed"
    try:
        written = await _cas(
            store, kind, name, namespace, decide, first, clock or SystemClock(), attempts, base_delay, max_delay
        )
        outcome = written.action
        return written
    except errors.Conflict:
        outcome = "conflict"
        raise
    except errors.Refused:
        outcome = "refused"
        raise
    except errors.NotFound:
        outcome = "missing"
        raise
    finally:
        metrics.STORE_CAS_DURATION.labels(kind, outcome).observe(time.perf_counter() - started)


async def _cas(
    store: Store,
    kind: str,
    name: str,
    namespace: str,
    decide: Decide | DecideValue[Any],
    first: Mapping[str, Any] | None,
    clock: Clock,
    attempts: int,
    base_delay: float,
    max_delay: float,
) -> Written[Any]:
    cached: Mapping[str, Any] | None = first
    lost = 0
    while True:
        from_cache = cached is not None
        current: dict[str, Any]
        if cached is not None:
            current = cached  # type: ignore[assignment]  # decide must not change it (module docstring)
            cached = None
        else:
            current = await store.get(kind, name, namespace)
        try:
            decided = decide(current)
            outcome = await decided if inspect.isawaitable(decided) else decided
        except errors.Refused:
            if from_cache:
                continue  # refused on a possibly stale copy: decide once more on the store's
            raise
        value: Any = None
        patch: Sequence[Mapping[str, Any]] | None = None
        if isinstance(outcome, Decided):
            value, patch, outcome = outcome.value, outcome.patch, outcome.outcome
        if outcome is None:
            return Written(current, "unchanged", value)
        try:
            if isinstance(outcome, Delete):
                rv = str((current.get("metadata") or {}).get("resourceVersion") or "")
                gone = await store.delete(kind, name, namespace, resource_version=rv or None)
                return Written(gone, "deleted", value)
            if patch is not None and takes_patches(store):
                version = current.get("apiVersion")
                try:
                    return Written(
                        await store.json_patch(kind, name, namespace, patch, api_version=version), "patched", value
                    )
                except (errors.Invalid, errors.Conflict, errors.NotFound):
                    pass  # a test failed (or the patch was refused): the same decision goes as the whole object
            return Written(await store.update(outcome), "updated", value)
        except errors.Conflict:
            metrics.STORE_CAS_CONFLICTS.labels(kind).inc()
            if from_cache:
                continue  # the cache was behind: read and decide again at once
            lost += 1
            if lost >= attempts:
                raise errors.Conflict(
                    f"{kind} {namespace + '/' if namespace else ''}{name}: gave up after {attempts} conflicting writes"
                ) from None
            await clock.sleep(backoff(lost - 1, base_delay, max_delay))
        except errors.NotFound:
            if from_cache:
                continue  # the cached copy outlived the object: the read says so, or finds a new one
            raise
