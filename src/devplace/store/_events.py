"""Events: what devplace's parts tell a user about an object (`kubectl describe`, `kubectl get events`), written
through the Store like every other object, so to a real cluster's API server too on `kube://`.

    recorder = EventRecorder(store, "devplace-scheduler", clock, instance="node-a")
    recorder.emit(pod, "FailedScheduling", "0/3 nodes: 3 no device matches class gpu", "Warning")   # never blocks
    supervisor.run("events", recorder.run)         # writes what was emitted, sweeps old events

Rules, as Kubernetes' event recorders have them:
- `emit` never blocks and never raises for a full buffer: it only records in memory (bounded: `buffer` distinct
  pending events) and wakes the writer. A repeat of an event still pending adds to its count. When the buffer is
  full the event is dropped and counted (`dropped`): a part that emits in a hot loop loses events, never time.
- The writer (`run`, or `flush` directly) writes each pending event as an `Event` in its `v1` form (the form
  `kubectl describe` reads; `events.k8s.io/v1` clients get it converted by the API server): `involvedObject` is the
  `regarding` object's reference, `message` the note (cut to 1024 characters), `type` `Normal` or `Warning`,
  `reportingComponent` / `source.component` the component, `reportingInstance` the instance, `action` the reason
  unless given. A repeat of an event written less than `series_window` seconds ago (Kubernetes: 6 minutes) updates
  that Event by compare-and-swap: `count` and `series.count` grow, `lastTimestamp` and `series.lastObservedTime`
  move; an older one starts a new Event. Names are `<object>.<hex nanoseconds>`, as Kubernetes names them, plus a
  per-recorder offset (a digest of component and instance) so two recorders naming at one instant do not collide;
  events about cluster-scoped objects go to the `default` namespace.
- Bounded in the store: `sweep` (run every `sweep_interval` by `run`) deletes its own Events (its component's, by
  its instance) last seen more than `ttl` seconds ago (Kubernetes keeps events an hour), and the oldest beyond
  `max_events`. Writes that fail (the store away) are logged and dropped: an event is advice, and a part must never
  wait on one.
- Memory is bounded too: at most `max_events` series are remembered for aggregation (the least recent forgotten).

`regarding` is an object's wire dict (its apiVersion, kind, metadata.name, namespace, uid are read) or an
`involvedObject`-style reference with those fields at the top.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from devplace import errors
from devplace.api import DEFAULT_NAMESPACE, label_key_problem
from devplace.clocks import Clock
from devplace.queues import wait_event_until
from devplace.store._base import Store, rfc3339
from devplace.store._cas import cas

EventKind = Literal["Normal", "Warning"]

TTL = 3600.0
"""Seconds an Event is kept after it was last seen (Kubernetes' default event TTL)."""
MAX_EVENTS = 1000
"""This component's Events kept at most in the store (the oldest go first), and series remembered."""
BUFFER = 1000
"""Distinct events waiting to be written at most; beyond, `emit` drops."""
SERIES_WINDOW = 360.0
"""Seconds within which a repeat updates the same Event (Kubernetes' 6 minutes)."""
MAX_NOTE = 1024
MAX_FIELD = 128
"""Kubernetes' limits on an Event's note (message), and on its reason, action and reporting instance."""

_log = logging.getLogger(__name__)
_Key = tuple[str, ...]


@dataclass
class _Pending:
    reference: dict[str, Any]
    namespace: str
    reason: str
    note: str
    type: EventKind
    action: str
    count: int
    first: float
    last: float


@dataclass
class _Series:
    name: str
    namespace: str
    last_written: float


def _microtime(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def reference_of(regarding: Mapping[str, Any]) -> dict[str, Any]:
    """An `ObjectReference` (apiVersion, kind, name, namespace, uid) of an object's wire dict, or of a reference."""
    meta = regarding.get("metadata")
    source = meta if isinstance(meta, Mapping) else regarding
    out: dict[str, Any] = {}
    for key in ("apiVersion", "kind"):
        if isinstance(regarding.get(key), str) and regarding[key]:
            out[key] = regarding[key]
    for key in ("name", "namespace", "uid", "fieldPath"):
        if isinstance(source.get(key), str) and source[key]:
            out[key] = source[key]
    if not out.get("kind") or not out.get("name"):
        raise errors.Invalid.field("regarding", "an event is about an object: its kind and metadata.name")
    return out


class EventRecorder:
    """Emits Events for one component (module docstring)."""

    def __init__(
        self,
        store: Store,
        component: str,
        clock: Clock,
        *,
        instance: str = "",
        ttl: float = TTL,
        max_events: int = MAX_EVENTS,
        buffer: int = BUFFER,
        series_window: float = SERIES_WINDOW,
        sweep_interval: float | None = None,
    ) -> None:
        problem = label_key_problem(component)  # a qualified name, as Kubernetes checks reportingComponent
        if problem:
            raise errors.Invalid.field("component", f"{component!r}: {problem}")
        for name, value in (("ttl", ttl), ("max_events", max_events), ("buffer", buffer)):
            if value <= 0:
                raise errors.Invalid.field(name, "must be positive")
        self.store = store
        self.component = component
        self.instance = (instance or component)[:MAX_FIELD]
        self.clock = clock
        self.ttl = ttl
        self.max_events = max_events
        self.buffer = buffer
        self.series_window = series_window
        self.sweep_interval = sweep_interval if sweep_interval is not None else min(ttl / 4, 300.0)
        self.dropped = 0
        """Events `emit` dropped because the buffer was full."""
        self.failed = 0
        """Events the writer could not write (the store refused or did not answer)."""
        self._pending: OrderedDict[_Key, _Pending] = OrderedDict()
        self._series: OrderedDict[_Key, _Series] = OrderedDict()
        self._wake = asyncio.Event()
        # Recorders of different parts (ten agents refusing one slot) may name events about one object at the same
        # instant (a fake clock that stands still): each counts from its own offset, so their names do not collide.
        self._sequence = (
            int(hashlib.blake2b(f"{component}/{self.instance}".encode(), digest_size=3).hexdigest(), 16) << 8
        )

    # -- emitting (never blocks) -------------------------------------------------------------------------------------

    def emit(
        self,
        regarding: Mapping[str, Any],
        reason: str,
        note: str,
        type: EventKind = "Normal",
        *,
        action: str = "",
    ) -> bool:
        """Record an event about `regarding` to be written soon; False when it was dropped (the buffer is full).
        Never blocks, never touches the store. A `type` other than Normal or Warning, or a `regarding` without a
        kind and name, is `Invalid` (a programming error of the caller, not a runtime condition)."""
        if type not in ("Normal", "Warning"):
            raise errors.Invalid.field("type", f"must be Normal or Warning, not {type!r}")
        reference = reference_of(regarding)
        namespace = reference.get("namespace") or DEFAULT_NAMESPACE
        reason, action = reason[:MAX_FIELD], (action or reason)[:MAX_FIELD]
        note = note[:MAX_NOTE]
        key = _key(reference, reason, note, type, action)
        now = self.clock.now()
        pending = self._pending.get(key)
        if pending is not None:
            pending.count += 1
            pending.last = now
            self._wake.set()
            return True
        if len(self._pending) >= self.buffer:
            self.dropped += 1
            return False
        self._pending[key] = _Pending(reference, namespace, reason, note, type, action, 1, now, now)
        self._wake.set()
        return True

    @property
    def pending(self) -> int:
        """Distinct events waiting to be written."""
        return len(self._pending)

    # -- writing -------------------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Write what is emitted, as it is emitted, and sweep every `sweep_interval` seconds; runs until cancelled
        (under a supervisor, like every long-running loop)."""
        next_sweep = self.clock.now() + self.sweep_interval
        while True:
            await wait_event_until(self._wake, self.clock, next_sweep)
            await self.flush()
            if self.clock.now() >= next_sweep:
                await self.sweep()
                next_sweep = self.clock.now() + self.sweep_interval

    async def flush(self) -> int:
        """Write every pending event now; the number written. A failed write is logged and dropped (`failed`)."""
        self._wake.clear()
        written = 0
        while self._pending:
            key, pending = self._pending.popitem(last=False)
            try:
                await self._write(key, pending)
                written += 1
            except errors.DevplaceError as e:
                self.failed += 1
                _log.warning("event %s about %s not written: %s", pending.reason, pending.reference.get("name"), e)
        return written

    async def _write(self, key: _Key, pending: _Pending) -> None:
        series = self._series.get(key)
        if series is not None and pending.first - series.last_written <= self.series_window:
            try:
                await cas(self.store, "Event", series.name, series.namespace, _repeated(pending), clock=self.clock)
                self._remember(key, series.name, series.namespace)
                return
            except errors.NotFound:
                pass  # swept or deleted meanwhile: a new Event
        name = await self._create(pending)
        self._remember(key, name, pending.namespace)

    async def _create(self, pending: _Pending) -> str:
        for _ in range(8):
            self._sequence += 1
            name = f"{pending.reference['name']}.{int(pending.first * 1e9) + self._sequence:x}"
            try:
                await self.store.create(self._event(name, pending))
                return name
            except errors.AlreadyExists:
                continue
        raise errors.Conflict(f"no free name for an event about {pending.reference['name']}")

    def _remember(self, key: _Key, name: str, namespace: str) -> None:
        self._series[key] = _Series(name, namespace, self.clock.now())
        self._series.move_to_end(key)
        while len(self._series) > self.max_events:
            self._series.popitem(last=False)

    def _event(self, name: str, pending: _Pending) -> dict[str, Any]:
        event: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": pending.namespace},
            "involvedObject": pending.reference,
            "reason": pending.reason,
            "message": pending.note,
            "type": pending.type,
            "action": pending.action,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": rfc3339(pending.first),
            "lastTimestamp": rfc3339(pending.last),
            "eventTime": _microtime(pending.first),
            "count": pending.count,
        }
        if pending.count > 1:
            event["series"] = {"count": pending.count, "lastObservedTime": _microtime(pending.last)}
        return event

    # -- bounds --------------------------------------------------------------------------------------------------------

    async def sweep(self) -> int:
        """Delete this recorder's Events (its component's, written by its instance: an agent per node sweeps only
        its own, so a thousand agents do not race to delete the same ones) last seen more than `ttl` seconds ago,
        and the oldest beyond `max_events`; the number deleted. Kubernetes selects Events by `reportingComponent`
        but not by `reportingInstance`, so the instance is matched here."""
        listing = await self.store.list("Event", None, fields=f"reportingComponent={self.component}")
        now = self.clock.now()
        mine = (e for e in listing.items if e.get("reportingInstance") == self.instance)
        aged = sorted(mine, key=_last_seen)
        doomed = [e for e in aged if now - _last_seen(e) > self.ttl]
        kept = [e for e in aged if now - _last_seen(e) <= self.ttl]
        doomed += kept[: max(0, len(kept) - self.max_events)]
        deleted = 0
        for event in doomed:
            meta = event.get("metadata") or {}
            try:
                await self.store.delete("Event", str(meta.get("name")), str(meta.get("namespace") or ""))
                deleted += 1
            except errors.NotFound:
                continue
            except errors.DevplaceError as e:
                _log.warning("event %s not swept: %s", meta.get("name"), e)
        return deleted


def _key(reference: Mapping[str, Any], reason: str, note: str, type: str, action: str) -> _Key:
    ref = tuple(str(reference.get(k, "")) for k in ("apiVersion", "kind", "namespace", "name", "uid", "fieldPath"))
    return (*ref, reason, note, type, action)


def _repeated(pending: _Pending) -> Any:
    """The compare-and-swap decision that adds `pending`'s occurrences to the Event of its series."""

    def decide(current: dict[str, Any]) -> dict[str, Any]:
        count = int(current.get("count") or 1) + pending.count
        return {
            **current,
            "count": count,
            "lastTimestamp": rfc3339(pending.last),
            "series": {"count": count, "lastObservedTime": _microtime(pending.last)},
        }

    return decide


def _last_seen(event: Mapping[str, Any]) -> float:
    series = event.get("series")
    for raw in (
        series.get("lastObservedTime") if isinstance(series, Mapping) else None,
        event.get("lastTimestamp"),
        event.get("eventTime"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        if isinstance(raw, str) and raw:
            try:
                return dt.datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return 0.0
