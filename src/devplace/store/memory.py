"""In-memory Store: the reference backend, for tests and simulations.

All state changes happen without awaiting, so each operation is atomic on the event loop. History (for watch
replay) is kept since the last compaction; `history_limit` compacts automatically so long simulations stay bounded.

Watchers: each open watch has a queue of the matching events it has not read, filled at commit (events it does not
match are never queued, so a Pod watcher costs nothing while 100k ConfigMaps are written). The queue is bounded:
past `_PENDING_LIMIT` unread events the watcher drops it and replays from history (the same rule as sqlite); if
history was compacted past its position meanwhile, it raises `Gone` and its consumer relists. `close` ends every
open watch with `Unavailable`.

Copies: every object stored (and every event kept) is private to the store, and every dict returned is a fresh copy.
An object whose JSON encoding decodes back to an equal value (every wire object) is kept with that encoding, and
its copies are decoded from it: several times cheaper than `copy.deepcopy`. Anything else (tuples, sets, datetimes,
NaN, keys that are not strings, integers beyond 64 bits...) is deep-copied, so this backend keeps such values as
they were given. One exception: members of str or int enums come back as their plain values (which compare equal).
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections import deque
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import orjson

from devplace import errors
from devplace.clocks import Clock, SystemClock
from devplace.store import base
from devplace.store.base import Event, EventType, Filters, Key, ObjectList

__all__ = ["MemoryStore"]

# Datetimes, dataclasses and subclasses of str, int, dict and list would be written as something else: refusing them
# sends them to the deep-copy path. (Enum members have no such switch; see the module docstring.)
_FAITHFUL = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS

_Stored = tuple[dict[str, Any], bytes | None]  # a private object and its JSON encoding, None when not faithful

_Entries = list[tuple[Event, bytes | None]]  # history entries: an event and its object's encoding

_PENDING_LIMIT = 4096  # unread events queued for one watcher; past it, it replays from history instead


def _own(obj: dict[str, Any]) -> _Stored:
    """A private copy of `obj` (which may share nested values with a caller), with its encoding when faithful."""
    try:
        body = orjson.dumps(obj, option=_FAITHFUL)
    except orjson.JSONEncodeError:
        return copy.deepcopy(obj), None
    owned: dict[str, Any] = orjson.loads(body)
    if owned != obj:  # a tuple, NaN, a non-string key...: JSON would change it
        return copy.deepcopy(obj), None
    return owned, body


def _copy(stored: _Stored) -> dict[str, Any]:
    obj, body = stored
    if body is None:
        return copy.deepcopy(obj)
    fresh: dict[str, Any] = orjson.loads(body)
    return fresh


class MemoryStore:
    def __init__(self, clock: Clock | None = None, history_limit: int = 100_000) -> None:
        self._clock = clock or SystemClock()
        self._objects: dict[Key, _Stored] = {}
        # Events share their object (never mutated) with `_objects`; the encoding rides along for cheap copies.
        self._history: list[tuple[Event, bytes | None]] = []
        self._compacted = 0
        self._revision = 0
        self._history_limit = history_limit
        self._watchers: set[_MemoryWatch] = set()
        self._closed = False

    # -- writes ---------------------------------------------------------------------------------------------

    def _commit(self, type_: EventType, key: Key, stored: _Stored, revision: int) -> None:
        """Apply one write: `stored` is the stored object, or for DELETED the object as it was, at `revision`."""
        if type_ == "DELETED":
            del self._objects[key]
        else:
            self._objects[key] = stored
        self._revision = revision
        entry = (Event(type_, stored[0], revision), stored[1])
        self._history.append(entry)
        if len(self._history) > self._history_limit:
            drop = len(self._history) - self._history_limit
            self._compacted = self._history[drop - 1][0].revision
            del self._history[:drop]
        for watcher in self._watchers:
            watcher.offer(entry)

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._check_open()
        key = base.key_of(obj)
        if key in self._objects:
            raise errors.AlreadyExists(f"{key} already exists")
        stored = _own(base.stamp_created(obj, self._revision + 1, self._clock.now(), str(uuid.uuid4())))
        self._commit("ADDED", key, stored, self._revision + 1)
        return _copy(stored)

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._check_open()
        key = base.key_of(obj)
        expected = base.resource_version_of(obj)
        current = self._objects.get(key)
        old = base.check_update_target(key, None if current is None else current[0], expected)
        stored = _own(base.stamp_updated(old, obj, self._revision + 1))
        self._commit("MODIFIED", key, stored, self._revision + 1)
        return _copy(stored)

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        self._check_open()
        key = Key(kind, namespace or "", name)
        current = self._objects.get(key)
        base.check_delete_precondition(key, None if current is None else current[0], resource_version)
        assert current is not None
        gone = _copy(current)
        gone["metadata"]["resourceVersion"] = str(self._revision + 1)
        stored = (gone, None if current[1] is None else orjson.dumps(gone, option=_FAITHFUL))
        self._commit("DELETED", key, stored, self._revision + 1)
        return _copy(stored)

    # -- reads ----------------------------------------------------------------------------------------------

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        self._check_open()
        key = Key(kind, namespace or "", name)
        stored = self._objects.get(key)
        if stored is None:
            raise errors.NotFound(f"{key} not found")
        return _copy(stored)

    async def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None, *, fields: str | None = None
    ) -> ObjectList:
        self._check_open()
        filters = base.parse_filters(None, None, selector, fields)
        if fields:
            base.parse_filters(kind, None, None, fields)  # refuses fields the kind does not declare
        # Sorting plain (namespace, name) tuples of one kind: comparing `Key` dataclasses costs several times more.
        found = sorted(
            ((key.namespace, key.name), stored)
            for key, stored in self._objects.items()
            if key.kind == kind and (namespace is None or key.namespace == namespace)
        )
        items = [_copy(stored) for _, stored in found if filters.matches(stored[0])]
        return ObjectList(items, self._revision)

    async def revision(self) -> int:
        return self._revision

    async def compact(self, revision: int) -> None:
        revision = min(revision, self._revision)
        self._history = [entry for entry in self._history if entry[0].revision > revision]
        self._compacted = max(self._compacted, revision)

    def watch(
        self,
        kind: str | None = None,
        namespace: str | None = None,
        *,
        since: int | None = None,
        selector: str | None = None,
        fields: str | None = None,
    ) -> _MemoryWatch:
        return _MemoryWatch(self, kind, namespace, since, selector, fields)

    def _replay(self, after: int, filters: Filters) -> tuple[_Entries, int]:
        """History events after `after` that match, and the revision read up to; `Gone` when compacted past."""
        if after < self._compacted:
            raise errors.Gone(
                f"revision {after} has been compacted (oldest available is {self._compacted + 1}); "
                "relist and watch again"
            )
        # history is in revision order: skip what was delivered by bisecting on revisions
        lo, hi = 0, len(self._history)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._history[mid][0].revision <= after:
                lo = mid + 1
            else:
                hi = mid
        found = [entry for entry in self._history[lo:] if filters.matches(entry[0].object)]
        return found, self._revision

    async def close(self) -> None:
        self._closed = True
        for watcher in list(self._watchers):
            watcher.wake()

    def _check_open(self) -> None:
        if self._closed:
            raise errors.Unavailable("store is closed")


class _MemoryWatch(base.BaseWatch):
    """One watch of a `MemoryStore` (see the module docstring): registered on entry, bounded, filtered at commit."""

    def __init__(
        self,
        store: MemoryStore,
        kind: str | None,
        namespace: str | None,
        since: int | None,
        selector: str | None,
        fields: str | None,
    ) -> None:
        super().__init__(kind, namespace, since, selector, fields)
        self._store = store
        self._filters = Filters()
        self._pending: deque[tuple[Event, bytes | None]] = deque()
        self._overflowed = False
        self._waiter: asyncio.Future[None] | None = None
        self._last = -1

    async def __aenter__(self) -> _MemoryWatch:
        store = self._store
        store._check_open()
        kind, namespace, selector, fields = self._args
        self._filters = base.parse_filters(kind, namespace, selector, fields)
        start = store._revision if self._since is None else self._since
        replay, _ = store._replay(start, self._filters)  # raises Gone before anything is registered
        self._pending.extend(replay)
        self._revision = self._last = start
        self._entered = True
        store._watchers.add(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._store._watchers.discard(self)
        self._pending.clear()
        self._entered = False

    def offer(self, entry: tuple[Event, bytes | None]) -> None:
        """Called at commit; queues the event when it matches, overflowing to a history replay when too far behind."""
        if self._overflowed or not self._filters.matches(entry[0].object):
            return
        if len(self._pending) >= _PENDING_LIMIT:
            self._pending.clear()
            self._overflowed = True
        else:
            self._pending.append(entry)
        self.wake()

    def wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def __anext__(self) -> Event:
        self._require_entered()
        store = self._store
        while True:
            store._check_open()
            if self._overflowed:
                self._overflowed = False
                replay, _ = store._replay(self._last, self._filters)
                self._pending.extend(replay)
            while self._pending:
                event, body = self._pending.popleft()
                if event.revision <= self._last:
                    continue
                self._last = event.revision
                return Event(event.type, _copy((event.object, body)), event.revision)
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
