"""The Store protocol: what every backend (memory, sqlite, etcd, remote) promises.

Objects are Kubernetes-shaped wire dicts keyed by (kind, namespace, name); cluster-scoped kinds use namespace "".
The store does not validate bodies (that happens once, at the boundary, with `devplace.api._registry.normalize`);
it owns `metadata.resourceVersion`, `uid`, `creationTimestamp` and `generation`.

Concurrency rule (DESIGN.md section 3): every write is a compare-and-swap.
- `create` fails with `AlreadyExists` if the key exists.
- `update` requires `metadata.resourceVersion` and fails with `Conflict` unless it equals the stored one.
- `delete` optionally takes a resourceVersion precondition (`Conflict` on mismatch).
Revisions are global and monotonic: every successful write gets the next one, and it becomes the object's
resourceVersion (a decimal string). `generation` starts at 1 and bumps when `spec` changes. A resourceVersion given
to the store (an update's, a delete precondition, a watch's `since`) is read by `api.revisions.parse_revision`:
canonical decimal digits up to 2**63-1, anything else is `Invalid` naming the field, before anything changes.

Size: an object whose stored JSON encoding is over `MAX_OBJECT_BYTES` (1.5 MiB, etcd's default request limit under
Kubernetes) is refused with `TooLarge` naming it and the limit; nothing changes.

History: a backend keeps past events for watch replay, bounded by count and by encoded bytes
(`DEFAULT_HISTORY_BYTES`), compacting the oldest first; `compact(revision)` forgets up to `revision`, which must not be
beyond the current revision (`Invalid` naming `revision`).

Filters: `list` and `watch` take a label selector (`selector`, Kubernetes syntax) and a field selector (`fields`,
e.g. `spec.nodeName=node-a`; `metadata.name`, `metadata.namespace` and the fields a kind declares in
`api.selectors.FIELD_LABELS`). Both are applied by the backend (on the server, for `remote`), so a consumer receives
only what it asked for: an agent never sees another node's Pods.

Watch: `watch(kind, namespace, since=R)` returns a `WatchStream`, opened as an async context:

    async with store.watch("Pod", fields="spec.nodeName=node-a", since=listing.revision) as events:
        async for event in events: ...

The watch is registered on entry: `Gone` (a compacted `since`, or one beyond the store's current revision: a store
that was reset, e.g. a server restarted on a fresh memory store, must make its clients relist) is raised by
`async with`, and `events.revision` says where it starts (the current revision when `since` is None), so nothing
written after entry is missed. It then yields, in revision order, every matching event with revision >
`events.revision`. Leaving the context (or closing the store, which ends every open watch with `Unavailable`)
unregisters it. Iterating a stream that was not entered is a programming error (`RuntimeError`).
`list` returns items ordered by namespace, then name (etcd's key order).
Returned dicts are copies: callers may mutate them freely.

Pages: `list_page(kind, namespace, selector, fields=..., after=(namespace, name), limit=N, max_bytes=B)` is one page of
`list`, each object as its compact JSON encoding (`EncodedObject`: what `get` returns, resourceVersion included), so
a server can answer a list of big objects without decoding and re-encoding them, and without reading them all at once.
The page holds the matching objects after the key `after` (None: from the first), in list order, at one revision
(`EncodedPage.revision`, the store's when it was read); it ends (`PageCut`) after `limit` objects, before the object
that would take its encodings past `max_bytes` (a page holds at least one object, whatever its size), or once the
backend has decoded more than `max_bytes` of objects a label or field selector then skipped (sqlite and etcd decode
an object to match it; memory matches the objects it holds). `last` is the last key the page examined, `remaining`
the objects after it that the page had yet to examine (selectors not yet applied), zero when the list is complete:
a page may hold fewer than `limit` objects, or none, and still have some to follow, as a Kubernetes page may.
`limit` and `max_bytes` are at least 1 (`Invalid` naming them). The client backends (remote, kube) cut the page from
a whole `list` (`page_of`).
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Protocol, Self, runtime_checkable

import orjson

from devplace import errors
from devplace.api import (
    SERVER_OWNED_METADATA,
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
    parse_revision,
)

EventType = Literal["ADDED", "MODIFIED", "DELETED"]

STORE_CLIENT_HEADER = "X-Devplace-Store"
"""Sent (value `kinds`) on every request of the `remote` backend. A store addresses kinds, not API groups, so the
API server answers such a request with the objects of every group a kind is served in (a Kubernetes client sees, at
each group, only that group's objects) and a DELETE with the object deleted (Kubernetes answers a `Status` for most
built-in kinds): what the Store protocol promises."""

MAX_OBJECT_BYTES = 1_572_864  # 1.5 MiB of encoded JSON: etcd's default request limit, hence Kubernetes' object limit
DEFAULT_HISTORY_BYTES = 64 * 1024 * 1024  # encoded events kept for watch replay (besides a count limit)


@dataclass(frozen=True, order=True)
class Key:
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


@dataclass(frozen=True)
class Event:
    """A change: its type, the object (after it; a deletion's: as it was last) and its revision. `body`, when the
    store has it, is the object's compact JSON exactly as `object` decodes from it, so a server can send the event
    without encoding the object again (equality ignores it)."""

    type: EventType
    object: dict[str, Any]
    revision: int
    body: str | bytes | None = field(default=None, compare=False, repr=False)

    def to_wire(self) -> dict[str, Any]:
        return {"type": self.type, "object": self.object}


@dataclass(frozen=True)
class ObjectList:
    items: list[dict[str, Any]] = field(default_factory=list)
    revision: int = 0


@dataclass(frozen=True)
class EncodedObject:
    """One object of a page: its key and its compact JSON (the object `get` would return, encoded)."""

    namespace: str
    name: str
    body: bytes


@dataclass(frozen=True)
class EncodedPage:
    """One page of a list (`Store.list_page`, module docstring)."""

    items: list[EncodedObject]
    revision: int
    last: tuple[str, str] | None  # the last key examined; None when none was
    remaining: int  # objects after `last` not yet examined (selectors not applied): 0 when the list is complete


class WatchStream(Protocol):
    """An open (entered) watch: its starting revision and its events, in revision order."""

    @property
    def revision(self) -> int:
        """Events delivered have revisions above this; known once the stream is entered."""
        ...

    async def __aenter__(self) -> WatchStream: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    def __aiter__(self) -> WatchStream: ...

    async def __anext__(self) -> Event: ...


class BaseWatch:
    """What every backend's `WatchStream` shares: the call's arguments, the start revision, the entry guard.

    A backend subclass sets `_revision` and `_entered` in `__aenter__`, clears `_entered` in `__aexit__`, and calls
    `_require_entered()` first thing in `__anext__`.
    """

    def __init__(
        self, kind: str | None, namespace: str | None, since: int | None, selector: str | None, fields: str | None
    ) -> None:
        self._args = (kind, namespace, selector, fields)
        self._since = since
        self._revision = -1
        self._entered = False

    @property
    def revision(self) -> int:
        return self._revision

    def __aiter__(self) -> Self:
        return self

    def _require_entered(self) -> None:
        if not self._entered:
            raise RuntimeError("enter the watch first: `async with store.watch(...) as events`")


@runtime_checkable
class Store(Protocol):
    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]: ...

    async def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None, *, fields: str | None = None
    ) -> ObjectList:
        """`namespace=None` lists all namespaces; `selector` is a label selector, `fields` a field selector."""
        ...

    async def list_page(
        self,
        kind: str,
        namespace: str | None = None,
        selector: str | None = None,
        *,
        fields: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int,
        max_bytes: int,
    ) -> EncodedPage:
        """One page of `list`, its objects encoded (see the module docstring)."""
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
        fields: str | None = None,
    ) -> WatchStream:
        """A watch to enter with `async with` (see the module docstring); bad selectors raise `Invalid` on entry."""
        ...

    async def revision(self) -> int: ...

    async def compact(self, revision: int) -> None:
        """Forget history up to and including `revision`; watches from before it raise `Gone`. A revision beyond the
        current one is refused (`Invalid` naming `revision`) and changes nothing."""
        ...

    async def close(self) -> None:
        """Release the backend; open watches end with `Unavailable`, later calls raise it."""
        ...


class DelegatingStore:
    """A `Store` that hands every call to `inner`: the base of wrappers that change a few calls (the API server's
    access guard and its Deployment-status answers, a test's recorder) and keep the rest as the backend does."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return await self.inner.create(obj)

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        return await self.inner.get(kind, name, namespace)

    async def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None, *, fields: str | None = None
    ) -> ObjectList:
        return await self.inner.list(kind, namespace, selector, fields=fields)

    async def list_page(
        self,
        kind: str,
        namespace: str | None = None,
        selector: str | None = None,
        *,
        fields: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int,
        max_bytes: int,
    ) -> EncodedPage:
        return await self.inner.list_page(
            kind, namespace, selector, fields=fields, after=after, limit=limit, max_bytes=max_bytes
        )

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return await self.inner.update(obj)

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        return await self.inner.delete(kind, name, namespace, resource_version=resource_version)

    def watch(
        self,
        kind: str | None = None,
        namespace: str | None = None,
        *,
        since: int | None = None,
        selector: str | None = None,
        fields: str | None = None,
    ) -> WatchStream:
        return self.inner.watch(kind, namespace, since=since, selector=selector, fields=fields)

    async def revision(self) -> int:
        return await self.inner.revision()

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def close(self) -> None:
        await self.inner.close()


def key_of(obj: Mapping[str, Any]) -> Key:
    """The store key of a wire dict; refuses objects without kind or name."""
    return Key(*key_fields(obj))


def key_fields(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """`key_of` as a plain (kind, namespace, name) tuple, for hot paths that build a `Key` only to report an error."""
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise errors.Invalid.field("kind", "required")
    meta = obj.get("metadata")
    if type(meta) is not dict and not isinstance(meta, Mapping):  # the exact-type test spares the ABC check
        raise errors.Invalid.field("metadata.name", "required")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise errors.Invalid.field("metadata.name", "required")
    ns = meta.get("namespace") or ""
    if not isinstance(ns, str):
        raise errors.Invalid.field("metadata.namespace", "must be a string")
    return kind, ns, name


def resource_version_of(obj: Mapping[str, Any]) -> int:
    """An update's expected revision, `metadata.resourceVersion`, read strictly (see the module docstring)."""
    raw = (obj.get("metadata") or {}).get("resourceVersion")
    if raw is None or raw == "":
        raise errors.Invalid.field("metadata.resourceVersion", "required for an update (compare-and-swap)")
    return parse_revision("metadata.resourceVersion", raw)


def watch_since(since: int | None) -> int | None:
    """A watch's `since`, checked (`Invalid` naming `resourceVersion`, the name it has on the wire)."""
    return None if since is None else parse_revision("resourceVersion", since)


def future_revision(since: int, current: int) -> errors.Gone:
    """The refusal of a watch from a revision the store has not reached (see the module docstring)."""
    return errors.Gone(
        f"too large resource version: {since}, current: {current} (the store may have been reset); "
        "relist and watch again"
    )


def check_compact_target(revision: int, current: int) -> int:
    """The compaction rule: `revision` is a revision, and not beyond the current one. Returns it."""
    value = parse_revision("revision", revision)
    if value > current:
        raise errors.Invalid.field("revision", f"{value} is beyond the current revision {current}")
    return value


def check_object_size(key: Key | str, size: int, limit: int = MAX_OBJECT_BYTES) -> None:
    """The size rule: an object's stored encoding is at most `limit` bytes, else `TooLarge` naming both."""
    if size > limit:
        raise errors.TooLarge(
            f"{key} is too large: {size} bytes of JSON, the limit is {limit} bytes ({limit / 1048576:g} MiB)"
        )


class PageCut:
    """The page rule of `Store.list_page` (module docstring), fed the candidates in list order.

    For each candidate: stop when `done()`; else `skip` one that does not match, or `take` one that `fits` (stop at
    the first that does not). `decoded` is what the backend decoded to find that a skipped candidate does not match.
    """

    def __init__(self, after: tuple[str, str] | None, limit: int, max_bytes: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise errors.Invalid.field("limit", "must be a whole number of at least 1")
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise errors.Invalid.field("max_bytes", "must be a whole number of at least 1")
        self.items: list[EncodedObject] = []
        self.last = after
        self.examined = 0
        self._limit = limit
        self._max_bytes = max_bytes
        self._size = 0
        self._decoded = 0

    def done(self) -> bool:
        return len(self.items) >= self._limit or self._decoded > self._max_bytes

    def fits(self, size: int) -> bool:
        return not self.items or self._size + size <= self._max_bytes

    @property
    def room(self) -> int:
        """The bytes of encodings the page may still take (past the first object)."""
        return max(0, self._max_bytes - self._size)

    def skip(self, namespace: str, name: str, decoded: int = 0) -> None:
        self.last = (namespace, name)
        self.examined += 1
        self._decoded += decoded

    def take(self, namespace: str, name: str, body: bytes) -> None:
        self.items.append(EncodedObject(namespace, name, body))
        self.skip(namespace, name)
        self._size += len(body)

    def page(self, revision: int, remaining: int) -> EncodedPage:
        return EncodedPage(self.items, revision, self.last, remaining)


def page_of(listing: ObjectList, after: tuple[str, str] | None, limit: int, max_bytes: int) -> EncodedPage:
    """The page of a whole `list` result (already selected) that `list_page` asks for: the client backends' way."""
    cut = PageCut(after, limit, max_bytes)
    keyed = [(key_of(obj), obj) for obj in listing.items]
    candidates = [(k.namespace, k.name, obj) for k, obj in keyed if after is None or (k.namespace, k.name) > after]
    for namespace, name, obj in candidates:
        if cut.done():
            break
        body = encode_json(obj)
        if not cut.fits(len(body)):
            break
        cut.take(namespace, name, body)
    return cut.page(listing.revision, len(candidates) - cut.examined)


def next_generation(old: Mapping[str, Any], new: Mapping[str, Any]) -> int:
    gen = int((old.get("metadata") or {}).get("generation") or 1)
    return gen + 1 if old.get("spec") != new.get("spec") else gen


# Types the stdlib encoder refuses are refused here too (orjson would write them as strings or objects).
_JSON_STRICT = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON of a wire value, or `Invalid` saying why it is not JSON.

    Keys that are not strings (ints, floats, bools, None) become strings, as with the stdlib encoder. Refused:
    types JSON has no form for (sets, datetimes, arbitrary objects), integers beyond 64 bits, strings with lone
    surrogates, nesting deeper than 254. NaN and infinities are written as null (JSON has no such numbers).
    """
    try:
        return orjson.dumps(value, option=_JSON_STRICT)
    except orjson.JSONEncodeError:
        pass  # the rare path: retry converting non-string keys, which costs on every dict when enabled
    try:
        return orjson.dumps(value, option=_JSON_STRICT | orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as e:
        raise errors.Invalid(f"the object is not JSON: {e}") from e


def decode_json(body: str | bytes) -> Any:
    """The value of a JSON text written by `encode_json`, or by the stdlib encoder (NaN, lone surrogate escapes)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def rfc3339(seconds: float) -> str:
    return _rfc3339_second(math.floor(seconds))


@functools.lru_cache(maxsize=4)
def _rfc3339_second(second: int) -> str:
    # Writes in the same second share the text: formatting costs more than the rest of stamping a new object.
    return _dt.datetime.fromtimestamp(second, tz=_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Server-owned metadata the store neither stamps nor takes from a caller (`api.meta.SERVER_OWNED_METADATA`: the
# field manager's `managedFields` pass through; `stamped` sets the rest).
_NEVER_FROM_CALLER = tuple(
    key
    for key in SERVER_OWNED_METADATA
    if key not in ("managedFields", "resourceVersion", "uid", "generation", "creationTimestamp")
)


def stamped(obj: Mapping[str, Any], *, revision: int, uid: Any, created: Any, generation: int) -> dict[str, Any]:
    """`obj` with the server-owned metadata set: a new top-level dict and a new `metadata` dict, nothing deeper.

    The result shares every other nested value with `obj`: a backend encodes or copies it before keeping it.
    An empty namespace is dropped (cluster-scoped objects carry none), and so is server-owned metadata no caller
    sets (`deletionTimestamp`, `deletionGracePeriodSeconds`, `selfLink`; see `api.meta.SERVER_OWNED_METADATA`).
    """
    meta = dict(obj.get("metadata") or {})
    for key in _NEVER_FROM_CALLER:
        meta.pop(key, None)
    meta["resourceVersion"] = str(revision)
    meta["uid"] = uid
    meta["generation"] = generation
    meta["creationTimestamp"] = created
    if not meta.get("namespace"):
        meta.pop("namespace", None)
    out = dict(obj)
    out["metadata"] = meta
    return out


def stamp_created(obj: Mapping[str, Any], revision: int, now: float, uid: str) -> dict[str, Any]:
    """The stored form of a new object (shallow, see `stamped`): caller's resourceVersion, uid, generation ignored."""
    return stamped(obj, revision=revision, uid=uid, created=rfc3339(now), generation=1)


def stamp_updated(old: Mapping[str, Any], new: Mapping[str, Any], revision: int) -> dict[str, Any]:
    """The stored form of an update (shallow, see `stamped`): identity kept from `old`, generation bumped on a spec
    change."""
    old_meta = old["metadata"]
    return stamped(
        new,
        revision=revision,
        uid=old_meta.get("uid"),
        created=old_meta.get("creationTimestamp"),
        generation=next_generation(old, new),
    )


def check_revision(key: Key, current: int | None, expected_rv: int) -> None:
    """The CAS rule shared by every backend: the object exists (`current` is its revision) and is the one read."""
    if current is None:
        raise errors.NotFound(f"{key} not found")
    if current != expected_rv:
        raise errors.Conflict(
            f"{key}: the object has been modified (resourceVersion {expected_rv} is stale, current is {current}); "
            "re-read and try again"
        )


def check_update_target(key: Key, stored: Mapping[str, Any] | None, expected_rv: int) -> Mapping[str, Any]:
    """`check_revision` for a backend that holds the stored object; returns it."""
    check_revision(key, None if stored is None else int(stored["metadata"]["resourceVersion"]), expected_rv)
    assert stored is not None
    return stored


def check_delete_precondition(key: Key, stored: Mapping[str, Any] | None, resource_version: str | None) -> None:
    check_delete_revision(key, None if stored is None else stored["metadata"]["resourceVersion"], resource_version)


def check_delete_revision(key: Key, current: int | str | None, resource_version: str | None) -> None:
    """The delete rule: the precondition (if any) is a revision, the object exists (`current` is its revision) and is
    at that revision."""
    expected = None if resource_version is None else parse_revision("resourceVersion", resource_version)
    if current is None:
        raise errors.NotFound(f"{key} not found")
    if expected is not None and int(current) != expected:
        raise errors.Conflict(
            f"{key}: precondition failed: resourceVersion {resource_version} is stale (current is {current})"
        )


@dataclass(frozen=True)
class Filters:
    """A list/watch filter, parsed once: kind, namespace, label selector, field selector (None: no constraint)."""

    kind: str | None = None
    namespace: str | None = None
    labels: LabelSelector | None = None
    fields: FieldSelector | None = None

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return matches(obj, self.kind, self.namespace, self.labels, self.fields)


def parse_filters(kind: str | None, namespace: str | None, selector: str | None, fields: str | None) -> Filters:
    """Parse the selectors of a list or watch call; `Invalid` names `labelSelector` or `fieldSelector`."""
    labels = None
    if selector:
        try:
            labels = parse_label_selector(selector)
        except errors.Invalid as e:
            raise errors.Invalid.field("labelSelector", e.message) from e
    parsed_fields = parse_field_selector(fields, kind) if fields else None
    if parsed_fields is not None and not parsed_fields.requirements:
        parsed_fields = None
    return Filters(kind, namespace, labels, parsed_fields)


def matches(
    obj: Mapping[str, Any],
    kind: str | None,
    namespace: str | None,
    selector: Any,
    fields: FieldSelector | None = None,
) -> bool:
    """Does `obj` fall under a list/watch filter? `selector` is a parsed label selector or None."""
    if kind is not None and obj.get("kind") != kind:
        return False
    meta = obj.get("metadata") or {}
    if namespace is not None and (meta.get("namespace") or "") != namespace:
        return False
    if selector is not None and not selector.matches(meta.get("labels") or {}):
        return False
    return fields is None or fields.matches(obj)
