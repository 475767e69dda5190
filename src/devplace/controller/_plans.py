"""Diff what should exist against what does: creates, updates and deletes, as plain data.

Pure. `plan(desired, existing, now=..., pending_grace=...)` compares by store key (kind, namespace, name):
- desired and missing: create.
- existing and not desired: delete (unless `retain` names it: an old generation's Job is left to finish).
- both: the desired body carries a digest of what the controller decided (`devplace.io/spec-hash`); when the stored
  one differs the object has drifted. `on_drift` says what then: "update" rewrites it in place (Services, a dynamic
  pool's ConfigMap: the broker keeps running), "replace" deletes it and creates it again (Pods, whose spec is
  immutable), "keep" leaves it (Jobs: a new generation gets a new name instead).
- a broker Pod that is Failed or Succeeded, or Pending for longer than `pending_grace` seconds since its
  creation, is replaced (Akri's rule); `wake_at` says when the next Pending one would be due.
- an object already being deleted (`deletionTimestamp`) is left alone and not re-created until it is gone.
A delete names the uid it was decided on, so the I/O shell never deletes a newer object of the same name.
`applied(plan, existing)` is the plan's effect on a dict of objects: the convergence property is
`applied(plan(d, e), e)` holds exactly the desired keys (plus retained ones), each with the desired digest.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from devplace.controller import _inputs as inputs
from devplace.controller import _names as names

Key = tuple[str, str, str]
"""(kind, namespace, name)."""

OnDrift = Literal["replace", "update", "keep"]


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _spec_hash(obj: Mapping[str, Any]) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(names.SPEC_HASH_ANNOTATION) if isinstance(annotations, Mapping) else None
    return value if isinstance(value, str) else None


def stamped(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with its digest annotation set from its spec, data and labels (changes `body`; returns it)."""
    meta = body.setdefault("metadata", {})
    decided = {"spec": body.get("spec"), "data": body.get("data"), "labels": meta.get("labels")}
    meta.setdefault("annotations", {})[names.SPEC_HASH_ANNOTATION] = names.digest(decided, 16)
    return body


@dataclass(frozen=True)
class Desired:
    """One object the controller wants, with what to do when a stored one drifted from it."""

    body: Mapping[str, Any] = field(compare=False)
    on_drift: OnDrift = "replace"
    key: Key = field(init=False)
    digest: str | None = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", key_of(self.body))
        object.__setattr__(self, "digest", _spec_hash(self.body))


@dataclass(frozen=True)
class Deletion:
    kind: str
    namespace: str
    name: str
    uid: str
    reason: str

    @property
    def key(self) -> Key:
        return (self.kind, self.namespace, self.name)


@dataclass(frozen=True)
class Plan:
    creates: tuple[Mapping[str, Any], ...] = ()
    updates: tuple[tuple[Mapping[str, Any], Mapping[str, Any]], ...] = ()
    """(stored object, desired object): the shell writes `merged(stored, desired)` by CAS."""
    deletes: tuple[Deletion, ...] = ()
    wake_at: float | None = None

    def __len__(self) -> int:
        return len(self.creates) + len(self.updates) + len(self.deletes)


def drifted(stored: Mapping[str, Any], desired: Mapping[str, Any] | Desired) -> bool:
    want = desired.digest if isinstance(desired, Desired) else _spec_hash(desired)
    return _spec_hash(stored) != want


def merged(stored: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """`stored` carrying what the controller decides (spec, data, labels, its annotations, owners) and keeping the
    rest (resourceVersion, uid, other writers' annotations, status, fields a server filled in, e.g. clusterIP)."""
    out = copy.deepcopy(dict(stored))
    want_meta = desired.get("metadata") or {}
    meta = out.setdefault("metadata", {})
    meta["labels"] = dict(want_meta.get("labels") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), **(want_meta.get("annotations") or {})}
    if want_meta.get("ownerReferences"):
        meta["ownerReferences"] = copy.deepcopy(want_meta["ownerReferences"])
    for part in ("data", "spec"):
        if part in desired:
            value = copy.deepcopy(desired[part])
            if part == "spec" and isinstance(out.get("spec"), Mapping) and isinstance(value, dict):
                value = {**{k: v for k, v in out["spec"].items() if k == "clusterIP"}, **value}
            out[part] = value
    return out


def _phase(pod: Mapping[str, Any]) -> str:
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if isinstance(phase, str) and phase else "Pending"


def plan(
    desired: Iterable[Desired],
    existing: Iterable[Mapping[str, Any]],
    *,
    now: float,
    pending_grace: float = 300.0,
    retain: frozenset[Key] = frozenset(),
) -> Plan:
    """Creates, updates and deletes that turn `existing` into `desired` (module docstring)."""
    wanted: dict[Key, Desired] = {}
    for want in desired:
        wanted.setdefault(want.key, want)
    stored: dict[Key, Mapping[str, Any]] = {key_of(obj): obj for obj in existing}
    creates: list[Mapping[str, Any]] = []
    updates: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    deletes: list[Deletion] = []
    wake_at: float | None = None
    for key, obj in sorted(stored.items()):
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        found = wanted.get(key)
        uid = str(meta.get("uid") or "")
        if found is None:
            if key not in retain:
                deletes.append(Deletion(*key, uid, "not desired"))
            continue
        want = found
        reason = None
        if want.on_drift != "keep" and drifted(obj, want):
            if want.on_drift == "update":
                updates.append((obj, want.body))
                continue
            reason = "drifted from the Configuration"
        elif key[0] == "Pod":
            phase = _phase(obj)
            created = inputs.seconds_of(meta.get("creationTimestamp"))
            if phase in ("Failed", "Succeeded"):
                reason = f"broker {phase}"
            elif phase == "Pending" and created is not None:
                due = created + pending_grace
                if now >= due:
                    reason = f"broker Pending for more than {pending_grace:g}s"
                else:
                    wake_at = due if wake_at is None else min(wake_at, due)
        if reason is not None:
            deletes.append(Deletion(*key, uid, reason))
            creates.append(want.body)
    for key, want in sorted(wanted.items()):
        if key not in stored:
            creates.append(want.body)
    return Plan(tuple(creates), tuple(updates), tuple(deletes), wake_at)


def applied(the_plan: Plan, existing: Mapping[Key, Mapping[str, Any]]) -> dict[Key, Mapping[str, Any]]:
    """The objects after the plan is carried out (deletes, then updates, then creates), for tests and benches."""
    out = dict(existing)
    for deletion in the_plan.deletes:
        current = out.get(deletion.key)
        if current is not None and str((current.get("metadata") or {}).get("uid") or "") == deletion.uid:
            del out[deletion.key]
    for stored, want in the_plan.updates:
        out[key_of(stored)] = merged(stored, want)
    for body in the_plan.creates:
        out.setdefault(key_of(body), body)
    return out


def counts(objects: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Broker Pods and Jobs by phase: {running, pending, finished}."""
    running = pending = finished = 0
    for obj in objects:
        if obj.get("kind") == "Pod":
            phase = _phase(obj)
            running += phase == "Running"
            pending += phase == "Pending"
            finished += phase in ("Failed", "Succeeded")
        elif obj.get("kind") == "Job":
            raw = obj.get("status")
            status: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
            if status.get("active"):
                running += 1
            elif status.get("succeeded") or status.get("failed"):
                finished += 1
            else:
                pending += 1
    return {"running": running, "pending": pending, "finished": finished}
