"""Leader election through a `coordination.k8s.io/v1` Lease, as client-go's `leaderelection` does it, and a fence.

Several copies of a part (`devplace scheduler`, `devplace controller`) may run; one decides. Each copy's
`LeaderElector` reads the Lease and acts by `decide_lease` (pure: the observed record, the time, its identity):
- no Lease: create it, holding it;
- its own: renew (`renewTime` now), every `retry_period`;
- another's, or released (`holderIdentity` empty): take it over once expired, keeping `acquireTime` fresh and
  `leaseTransitions` + 1 on a change of holder; otherwise wait.

Expiry is judged as client-go judges it: by when this elector *saw the record change* (its own clock) plus
`leaseDurationSeconds`, never by the `renewTime` written by another host's clock, so clock skew between hosts does not
matter, only rates. Every write is a compare-and-swap on the read `resourceVersion`, so two electors racing for an
expired Lease cannot both win: the loser's write is a `Conflict` and it tries again after `retry_period`.

A leader that has not renewed within `renew_deadline` (< `leaseDurationSeconds`) gives up: `lost` is set and it never
leads again (the daemon exits and its process manager restarts it, as kube-scheduler does). `FencedStore` enforces it
on every write: a create, update or delete through it is refused (`errors.Refused`) unless the elector leads and its
last successful renew, on its own clock, is younger than `renew_deadline`. A copy paused (SIGSTOP, a long GC) past its
lease therefore writes nothing on resuming: its clock has moved on, the check fails before the request is sent. The
window left is a write already checked and in flight when the process stopped, as in Kubernetes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devplace import errors
from devplace.clocks import Clock
from devplace.store._base import DelegatingStore, Store
from devplace.store._bindings import bind_pod

log = logging.getLogger(__name__)

LEASE_API_VERSION = "coordination.k8s.io/v1"


class LeaseAction(enum.Enum):
    CREATE = "create"
    RENEW = "renew"
    TAKE_OVER = "take over"
    WAIT = "wait"


@dataclass(frozen=True)
class ObservedLease:
    """A Lease as an elector last saw it: its holder (`""` when released), its duration, and when (the elector's
    clock) the record was first seen as it is now."""

    holder: str
    duration: float
    observed_at: float


def decide_lease(observed: ObservedLease | None, now: float, identity: str) -> LeaseAction:
    """What an elector named `identity` does at `now` about the Lease it observed (None: there is none)."""
    if observed is None:
        return LeaseAction.CREATE
    if observed.holder == identity:
        return LeaseAction.RENEW
    if observed.holder and now < observed.observed_at + observed.duration:
        return LeaseAction.WAIT
    return LeaseAction.TAKE_OVER


def micro_time(seconds: float) -> str:
    """Kubernetes' MicroTime: RFC 3339 with microseconds, UTC."""
    return _dt.datetime.fromtimestamp(seconds, tz=_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(spec: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(spec.get(f) for f in ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime"))


class LeaderElector:
    """One candidate for the Lease `namespace/name` (module docstring). `run()` campaigns until leading, then renews
    until it stops or loses; `leading` and `lost` are set on those changes, `is_leader()` answers the fence."""

    def __init__(
        self,
        store: Store,
        name: str,
        namespace: str,
        identity: str,
        clock: Clock,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ) -> None:
        if not identity:
            raise errors.Invalid.field("identity", "must not be empty")
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise errors.Invalid(
                f"leader election needs 0 < retry period ({retry_period}) < renew deadline ({renew_deadline}) "
                f"< lease duration ({lease_duration})"
            )
        self.store, self.name, self.namespace, self.identity, self.clock = store, name, namespace, identity, clock
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self._observed: ObservedLease | None = None
        self._record: tuple[Any, ...] | None = None
        self._renewed_at: float | None = None

    def is_leader(self) -> bool:
        """True while this elector leads and its last renew is younger than `renew_deadline` (its clock)."""
        if not self.leading.is_set() or self.lost.is_set() or self._renewed_at is None:
            return False
        return self.clock.now() - self._renewed_at < self.renew_deadline

    async def try_acquire_or_renew(self) -> bool:
        """One read and, when `decide_lease` says so, one compare-and-swap write; True when this elector holds the
        Lease."""
        now = self.clock.now()
        try:
            current: dict[str, Any] | None = await self.store.get("Lease", self.name, self.namespace)
        except errors.NotFound:
            current = None
        except errors.DevplaceError as exc:
            log.warning("lease %s/%s: read failed: %s", self.namespace, self.name, exc)
            return False
        spec: dict[str, Any] = dict((current or {}).get("spec") or {})
        if current is None:
            self._observed, self._record = None, None
        elif _record(spec) != self._record or self._observed is None:
            self._record = _record(spec)
            duration = spec.get("leaseDurationSeconds")
            self._observed = ObservedLease(
                str(spec.get("holderIdentity") or ""),
                float(duration) if isinstance(duration, int | float) else self.lease_duration,
                now,
            )
        action = decide_lease(self._observed, now, self.identity)
        if action is LeaseAction.WAIT:
            return False
        stamp = micro_time(now)
        new_spec = {**spec, "holderIdentity": self.identity, "leaseDurationSeconds": round(self.lease_duration)}
        new_spec["renewTime"] = stamp
        if action is not LeaseAction.RENEW:
            new_spec["acquireTime"] = stamp
            new_spec["leaseTransitions"] = 0 if current is None else int(spec.get("leaseTransitions") or 0) + 1
        try:
            if current is None:
                meta = {"name": self.name, "namespace": self.namespace}
                body = {"apiVersion": LEASE_API_VERSION, "kind": "Lease", "metadata": meta, "spec": new_spec}
                written = await self.store.create(body)
            else:
                written = await self.store.update({**current, "spec": new_spec})
        except errors.DevplaceError as exc:  # Conflict/AlreadyExists: another won; Unavailable: try again later
            log.info("lease %s/%s: %s failed: %s", self.namespace, self.name, action.value, exc)
            return False
        if action is not LeaseAction.RENEW:
            log.info("lease %s/%s: %s acquired it", self.namespace, self.name, self.identity)
        self._record = _record(written.get("spec") or {})
        self._observed = ObservedLease(self.identity, self.lease_duration, now)
        self._renewed_at = now
        return True

    async def run(self) -> None:
        """Campaign until leading, then renew every `retry_period` until cancelled or lost (returns once lost)."""
        while not await self.try_acquire_or_renew():
            await self.clock.sleep(self.retry_period)
        self.leading.set()
        while True:
            await self.clock.sleep(self.retry_period)
            if self._renewed_at is not None and self.clock.now() - self._renewed_at >= self.renew_deadline:
                break  # resumed after a pause past the deadline: renewing now would not undo the gap
            if not await self.try_acquire_or_renew() and (
                self._renewed_at is None or self.clock.now() - self._renewed_at >= self.renew_deadline
            ):
                break
        log.warning("lease %s/%s: %s lost it", self.namespace, self.name, self.identity)
        self.lost.set()

    async def release(self) -> None:
        """On a clean stop: empty `holderIdentity` if this elector still leads, so another takes over at once
        instead of after the lease expires (best effort: a failure leaves the lease to expire)."""
        if not self.is_leader():
            return
        self.lost.set()  # no write of the part goes through the fence from here on
        with contextlib.suppress(errors.DevplaceError):
            current = await self.store.get("Lease", self.name, self.namespace)
            spec = dict(current.get("spec") or {})
            if spec.get("holderIdentity") == self.identity:
                spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=micro_time(self.clock.now()))
                await self.store.update({**current, "spec": spec})


class FencedStore(DelegatingStore):
    """`inner` for reads; every write refused with `errors.Refused` unless `elector.is_leader()` (module
    docstring). The part whose decisions must come from one copy runs over this store; the elector does not."""

    def __init__(self, inner: Store, elector: LeaderElector) -> None:
        super().__init__(inner)
        self.elector = elector

    def _fence(self, verb: str, kind: str, name: str) -> None:
        if not self.elector.is_leader():
            e = self.elector
            raise errors.Refused(
                f"{verb} {kind} {name!r} refused: {e.identity!r} does not hold the lease {e.namespace}/{e.name}"
            )

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._fence("create", str(obj.get("kind")), str((obj.get("metadata") or {}).get("name")))
        return await self.inner.create(obj)

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._fence("update", str(obj.get("kind")), str((obj.get("metadata") or {}).get("name")))
        return await self.inner.update(obj)

    async def bind(self, body: Mapping[str, Any]) -> None:
        self._fence("bind", "Pod", str((body.get("metadata") or {}).get("name")))
        await bind_pod(self.inner, body, clock=self.elector.clock)

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        self._fence("delete", kind, name)
        return await self.inner.delete(kind, name, namespace, resource_version=resource_version)
