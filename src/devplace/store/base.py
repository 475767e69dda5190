"""The Store protocol: what every backend (memory, sqlite, etcd, remote) promises.

Objects are Kubernetes-shaped wire dicts keyed by (kind, namespace, name); cluster-scoped kinds use namespace "".
The store does not validate bodies (that happens once, at the boundary, with `devplace.api.registry.normalize`);
it owns `metadata.resourceVersion`, `uid`, `creationTimestamp` and `generation`.

Concurrency rule (DESIGN.md section 3): every write is a compare-and-swap.
- `create` fails with `AlreadyExists` if the key exists.
- `update` requires `metadata.resourceVersion` and fails with `Conflict` unless it equals the stored one.
- `delete` optionally takes a resourceVersion precondition (`Conflict` on mismatch).
Revisions are global and monotonic: every successful write gets the next one, and it becomes the object's
resourceVersion (a decimal string). `generation` starts at 1 and bumps when `spec` changes.

Watch: `watch(kind, namespace, since=R)` yields, in revision order, every event with revision > R that matches,
then live events. `since=None` starts at the current revision. A watch from a revision before the last
compaction raises `Gone` (on first iteration); the watcher relists and watches from the list's revision.
`list` returns items ordered by namespace, then name (etcd's key order).
Returned dicts are copies: callers may mutate them freely.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from devplace import errors

__all__ = [
    "Event",
    "EventType",
    "Key",
    "ObjectList",
    "Store",
    "key_of",
    "next_generation",
    "resource_version_of",
]

EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True, order=True)
class Key:
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


@dataclass(frozen=True)
class Event:
    type: EventType
    object: dict[str, Any]
    revision: int

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.type, "object": self.object}


@dataclass(frozen=True)
class ObjectList:
    items: list[dict[str, Any]] = field(default_factory=list)
    revision: int = 0


@runtime_checkable
class Store(Protocol):
    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]: ...

    async def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> ObjectList:
        """`namespace=None` lists all namespaces; `selector` is a Kubernetes label selector string."""
        ...

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        """Returns the object as it was last stored; its resourceVersion is the deletion's revision."""
        ...

    def watch(
        self,
        kind: str | None = None,
        namespace: str | None = None,
        *,
        since: int | None = None,
        selector: str | None = None,
    ) -> AsyncIterator[Event]: ...

    async def revision(self) -> int: ...

    async def compact(self, revision: int) -> None:
        """Forget history up to and including `revision`; watches from there on raise `Gone`."""
        ...

    async def close(self) -> None: ...


def key_of(obj: Mapping[str, Any]) -> Key:
    """The store key of a wire dict; refuses objects without kind or name."""
    kind = obj.get("kind")
    meta = obj.get("metadata")
    if not isinstance(kind, str) or not kind:
        raise errors.Invalid.field("kind", "required")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        raise errors.Invalid.field("metadata.name", "required")
    ns = meta.get("namespace") or ""
    if not isinstance(ns, str):
        raise errors.Invalid.field("metadata.namespace", "must be a string")
    return Key(kind, ns, meta["name"])


def resource_version_of(obj: Mapping[str, Any]) -> int:
    raw = (obj.get("metadata") or {}).get("resourceVersion")
    if raw is None or raw == "":
        raise errors.Invalid.field("metadata.resourceVersion", "required for an update (compare-and-swap)")
    try:
        value = int(str(raw))
    except ValueError as e:
        raise errors.Invalid.field("metadata.resourceVersion", f"{raw!r} is not a revision") from e
    if value < 0:
        raise errors.Invalid.field("metadata.resourceVersion", f"{raw!r} is not a revision")
    return value


def next_generation(old: Mapping[str, Any], new: Mapping[str, Any]) -> int:
    gen = int((old.get("metadata") or {}).get("generation") or 1)
    return gen + 1 if old.get("spec") != new.get("spec") else gen


def deep_copy(obj: Mapping[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(dict(obj))


def rfc3339(seconds: float) -> str:
    import datetime as _dt

    return _dt.datetime.fromtimestamp(seconds, tz=_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stamp_created(obj: Mapping[str, Any], revision: int, now: float, uid: str) -> dict[str, Any]:
    """The stored form of a new object: server-owned metadata set, caller's resourceVersion ignored."""
    out = deep_copy(obj)
    meta = dict(out.get("metadata") or {})
    meta["resourceVersion"] = str(revision)
    meta["uid"] = uid
    meta["generation"] = 1
    meta["creationTimestamp"] = rfc3339(now)
    if not meta.get("namespace"):
        meta.pop("namespace", None)
    out["metadata"] = meta
    return out


def stamp_updated(old: Mapping[str, Any], new: Mapping[str, Any], revision: int) -> dict[str, Any]:
    """The stored form of an update: identity fields kept from `old`, generation bumped on spec change."""
    out = deep_copy(new)
    meta = dict(out.get("metadata") or {})
    old_meta = old["metadata"]
    meta["resourceVersion"] = str(revision)
    meta["uid"] = old_meta.get("uid")
    meta["creationTimestamp"] = old_meta.get("creationTimestamp")
    meta["generation"] = next_generation(old, out)
    if not meta.get("namespace"):
        meta.pop("namespace", None)
    out["metadata"] = meta
    return out


def check_update_target(key: Key, stored: Mapping[str, Any] | None, expected_rv: int) -> Mapping[str, Any]:
    """The CAS rule shared by every backend: the object exists and its revision is the one the caller read."""
    if stored is None:
        raise errors.NotFound(f"{key} not found")
    current = int(stored["metadata"]["resourceVersion"])
    if current != expected_rv:
        raise errors.Conflict(
            f"{key}: the object has been modified (resourceVersion {expected_rv} is stale, current is {current}); "
            "re-read and try again"
        )
    return stored


def check_delete_precondition(key: Key, stored: Mapping[str, Any] | None, resource_version: str | None) -> None:
    if stored is None:
        raise errors.NotFound(f"{key} not found")
    if resource_version is not None and str(stored["metadata"]["resourceVersion"]) != str(resource_version):
        raise errors.Conflict(
            f"{key}: precondition failed: resourceVersion {resource_version} is stale "
            f"(current is {stored['metadata']['resourceVersion']})"
        )


def matches(obj: Mapping[str, Any], kind: str | None, namespace: str | None, selector: Any) -> bool:
    """Does `obj` fall under a list/watch filter? `selector` is a parsed label selector or None."""
    if kind is not None and obj.get("kind") != kind:
        return False
    meta = obj.get("metadata") or {}
    if namespace is not None and (meta.get("namespace") or "") != namespace:
        return False
    return selector is None or bool(selector.matches(meta.get("labels") or {}))
