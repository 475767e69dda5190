"""Informers: a typed, indexed, always-current cache of one kind, filled by list -> watch -> relist on `Gone`.

Every control loop (agent, simulated kubelet, controller, scheduler) needs the same thing: the objects of a few kinds,
parsed once, looked up by key and by index, and a callback when one changes. An `Informer` is that, for one
(kind, namespace, label selector, field selector); the filters are applied by the store (on the server for the
remote backend), so an agent's Pod informer with `spec.nodeName=<node>` never receives another node's Pods.

Freshness: an entry is replaced only by a newer revision. Store revisions are global and monotonic, so "newer" is well
defined across watch events, relists and the results of the owner's own writes (`record`), whichever arrives
first; a deletion leaves a tombstone (bounded) so a late, older write result cannot resurrect a deleted object.
A listing at a revision below one the cache has seen means the store was reset (a server restarted on a fresh memory
store answers the watch with `Gone`, the informer relists): its revisions say nothing against the old ones, so that
listing replaces the cache outright.

Parsing: `parse(obj, previous)` turns a wire dict into the cached value (`previous` is the entry it replaces, for
parsers that reuse unchanged parts). An object that does not parse (`errors.Invalid`, `KeyError`, `TypeError`,
`ValueError`) is treated as absent and logged once per distinct reason: never trusted, never fatal.

Change handlers run synchronously on the event loop after the cache has changed, in subscription order, with a
`Change(key, old, new)`; a handler that raises is logged and the others still run (a bug in one consumer must not
stop the cache). Handlers must not await: they mark work for the owner's loops.

Failure semantics (`run`): `Gone` relists at once; any other store error is logged and the informer relists after a
pause (real time: it waits on I/O). `run` never returns; run it under a `Supervisor` loop, which also restarts it if
a bug escapes. `synced` is set once the first listing is in the cache and stays set across relists.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from devplace import errors
from devplace.store._base import Store

log = logging.getLogger(__name__)

T = TypeVar("T")
ObjKey = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped kinds."""

Parse = Callable[[dict[str, Any], Any], T]
Handler = Callable[["Change[T]"], None]
IndexFn = Callable[[T], Iterable[Hashable]]

_TOMBSTONES = 50_000
_UNPARSABLE = (errors.Invalid, KeyError, TypeError, ValueError)


def identity(obj: dict[str, Any], previous: Any) -> dict[str, Any]:
    """The default parse: keep the wire dict."""
    return obj


def revision_of(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def obj_key_of(obj: Mapping[str, Any]) -> ObjKey:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


@dataclass(frozen=True)
class Change(Generic[T]):
    """One change of an informer's cache: `old` None for an addition, `new` None for a deletion."""

    key: ObjKey
    old: T | None
    new: T | None


class Informer(Generic[T]):
    """A cache of one kind kept current from the store (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        kind: str,
        parse: Parse[T] = identity,  # type: ignore[assignment]  # T is dict[str, Any] when parse is omitted
        *,
        namespace: str | None = None,
        selector: str | None = None,
        fields: str | None = None,
        indexes: Mapping[str, IndexFn[T]] | None = None,
        retry_pause: tuple[float, float] = (0.05, 2.0),
        name: str | None = None,
    ) -> None:
        self.store = store
        self.kind = kind
        self.namespace = namespace
        self.selector = selector
        self.fields = fields
        self.name = name or kind
        self._parse = parse
        self._retry_pause = retry_pause
        self._items: dict[ObjKey, T] = {}
        self._revisions: dict[ObjKey, int] = {}
        self._tombstones: dict[ObjKey, int] = {}
        self._invalid: dict[ObjKey, str] = {}
        self._index_fns: dict[str, IndexFn[T]] = dict(indexes or {})
        self._indexes: dict[str, dict[Hashable, set[ObjKey]]] = {name: {} for name in self._index_fns}
        self._entries: dict[ObjKey, dict[str, tuple[Hashable, ...]]] = {}
        self._sorted: dict[tuple[str, Hashable], list[ObjKey]] = {}  # index buckets in key order, built on demand
        self._handlers: list[Handler[T]] = []
        self.synced = asyncio.Event()
        self.revision = 0
        """The newest store revision this cache reflects (a listing's, or the last watch event's)."""

    # -- reads -------------------------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> T | None:
        return self._items.get((namespace, name))

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> Iterator[ObjKey]:
        return iter(list(self._items))

    def values(self) -> list[T]:
        return list(self._items.values())

    def items(self) -> list[tuple[ObjKey, T]]:
        return list(self._items.items())

    def by(self, index: str, value: Hashable) -> list[T]:
        """The entries whose index function yields `value`, sorted by key."""
        return [self._items[k] for k in self._bucket(index, value)]

    def keys_by(self, index: str, value: Hashable) -> list[ObjKey]:
        return list(self._bucket(index, value))

    def _bucket(self, index: str, value: Hashable) -> list[ObjKey]:
        """A bucket's keys in order, sorted once per change of the bucket (not once per read)."""
        found = self._sorted.get((index, value))
        if found is None:
            found = sorted(self._indexes[index].get(value, ()))
            self._sorted[(index, value)] = found
        return found

    def resource_version(self, namespace: str, name: str) -> int | None:
        return self._revisions.get((namespace, name))

    # -- subscriptions -----------------------------------------------------------------------------------------

    def subscribe(self, handler: Handler[T]) -> Callable[[], None]:
        """Call `handler` after every change; returns a function that unsubscribes it."""
        self._handlers.append(handler)

        def unsubscribe() -> None:
            if handler in self._handlers:
                self._handlers.remove(handler)

        return unsubscribe

    def _notify(self, change: Change[T]) -> None:
        for handler in list(self._handlers):
            try:
                handler(change)
            except Exception:
                log.exception("%s informer: a change handler failed on %s/%s", self.name, *change.key)

    # -- updates -----------------------------------------------------------------------------------------------

    def _fresh(self, key: ObjKey, rv: int) -> bool:
        return rv > self._revisions.get(key, -1) and rv > self._tombstones.get(key, -1)

    def record(self, obj: Mapping[str, Any], *, deleted: bool = False, parsed: T | None = None) -> bool:
        """Take in the result of the owner's own write (or a fresh read): applied when newer than what is cached.

        `parsed`, when given, is cached as is (the owner built it; nothing is parsed again). Returns whether the
        cache changed. A deleted object is recorded with `deleted=True` and its deletion's resourceVersion.
        """
        key = obj_key_of(obj)
        rv = revision_of(obj)
        if not self._fresh(key, rv):
            return False
        if deleted:
            self._delete(key, rv)
        else:
            self._put(key, obj, rv, parsed)
        return True

    def forget(self, namespace: str, name: str) -> None:
        """Drop an object a read showed to be gone (no revision known: the tombstone is the cached one's)."""
        key = (namespace, name)
        if key in self._items or key in self._revisions:
            self._delete(key, self._revisions.get(key, -1))

    def _put(self, key: ObjKey, obj: Mapping[str, Any], rv: int, parsed: T | None = None) -> None:
        old = self._items.get(key)
        if parsed is None:
            try:
                parsed = self._parse(dict(obj), old)
            except _UNPARSABLE as e:
                reason = getattr(e, "message", None) or str(e)
                if self._invalid.get(key) != reason:
                    self._invalid[key] = reason
                    log.warning("ignoring %s %s/%s: %s", self.kind, key[0], key[1], reason)
                self._revisions[key] = rv
                if old is not None:
                    self._remove(key)
                    self._notify(Change(key, old, None))
                return
        self._invalid.pop(key, None)
        self._revisions[key] = rv
        self._items[key] = parsed
        self._reindex(key, parsed)
        self._notify(Change(key, old, parsed))

    def _delete(self, key: ObjKey, rv: int) -> None:
        self._revisions.pop(key, None)
        self._invalid.pop(key, None)
        self._tombstones[key] = max(rv, self._tombstones.get(key, -1))
        if len(self._tombstones) > _TOMBSTONES:
            for old_key in sorted(self._tombstones, key=self._tombstones.__getitem__)[: _TOMBSTONES // 2]:
                del self._tombstones[old_key]
        old = self._items.get(key)
        if old is not None:
            self._remove(key)
            self._notify(Change(key, old, None))

    def _remove(self, key: ObjKey) -> None:
        del self._items[key]
        for index, values in self._entries.pop(key, {}).items():
            buckets = self._indexes[index]
            for value in values:
                self._sorted.pop((index, value), None)
                bucket = buckets.get(value)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del buckets[value]

    def _reindex(self, key: ObjKey, value: T) -> None:
        if not self._index_fns:
            return
        old = self._entries.get(key, {})
        new: dict[str, tuple[Hashable, ...]] = {}
        for index, fn in self._index_fns.items():
            values = tuple(fn(value))
            new[index] = values
            if old.get(index) == values:
                continue
            buckets = self._indexes[index]
            for stale in old.get(index, ()):
                self._sorted.pop((index, stale), None)
                bucket = buckets.get(stale)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del buckets[stale]
            for fresh in values:
                if key not in buckets.setdefault(fresh, set()):
                    buckets[fresh].add(key)
                    self._sorted.pop((index, fresh), None)
        self._entries[key] = new

    def apply_event(self, type_: str, obj: Mapping[str, Any]) -> None:
        """One watch event (also used by tests and by owners that read an object themselves)."""
        self.record(obj, deleted=type_ == "DELETED")

    def replace(self, items: Iterable[Mapping[str, Any]], revision: int) -> None:
        """A relist: the cache becomes `items` as of `revision`, keeping only entries newer than the listing (the
        owner's own writes that landed after it); a listing from a store that was reset replaces it all."""
        if revision < self.revision:  # the store went back in time: nothing cached compares with its revisions
            self._tombstones.clear()
            self._revisions = dict.fromkeys(self._revisions, -1)
            self.revision = revision
        seen: set[ObjKey] = set()
        for obj in items:
            key = obj_key_of(obj)
            seen.add(key)
            rv = revision_of(obj)
            self._tombstones.pop(key, None)
            if self._revisions.get(key, -1) >= rv and key not in self._invalid:
                continue  # unchanged, or the cache holds a newer write of ours
            self._revisions.pop(key, None)
            self._put(key, obj, rv)
        for key in [k for k in set(self._items) | set(self._revisions) if k not in seen]:
            if self._revisions.get(key, -1) > revision:
                continue  # written after the listing: the watch will say more
            self._delete(key, revision)
        self.revision = max(self.revision, revision)

    # -- the loop ------------------------------------------------------------------------------------------------

    async def list_once(self) -> int:
        """List into the cache; returns the listing's revision (sets `synced`)."""
        listing = await self.store.list(self.kind, self.namespace, self.selector, fields=self.fields)
        self.replace(listing.items, listing.revision)
        self.synced.set()
        return listing.revision

    async def run(self) -> None:
        """List, then watch; relist on `Gone` at once, on other store errors after a growing pause. Never returns."""
        pause = self._retry_pause[0]
        revision: int | None = None
        while True:
            try:
                if revision is None:
                    revision = await self.list_once()
                async with self.store.watch(
                    self.kind, self.namespace, since=revision, selector=self.selector, fields=self.fields
                ) as events:
                    async for event in events:
                        revision = event.revision
                        self.revision = event.revision
                        self.apply_event(event.type, event.object)
                        pause = self._retry_pause[0]
                    revision = None  # a watch that ends without an error: list again
            except errors.Gone:
                revision = None
            except errors.DevplaceError as e:
                log.warning("%s informer: %s; relisting in %.2fs", self.name, e, pause)
                revision = None
                await asyncio.sleep(pause)
                pause = min(pause * 2, self._retry_pause[1])

    async def wait_synced(self) -> None:
        await self.synced.wait()
