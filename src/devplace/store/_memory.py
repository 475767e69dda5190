"""In-memory Store: the reference backend, for tests and simulations.

All state changes happen without awaiting, so each operation is atomic on the event loop.

History (for watch replay) is kept since the last compaction, bounded by count (`history_limit`) and by encoded bytes
(`history_bytes`, `base.DEFAULT_HISTORY_BYTES` by default): past either bound the oldest eighth is compacted at once,
so a long simulation stays bounded and 300 updates of a 1.4 MiB object keep about 64 MiB, not 300 versions. A past
event is kept as its JSON encoding only (no dict tree), decoded again when a watcher replays it; so the versions of an
object it no longer stores cost their bytes until compacted, then nothing. Objects are at most `max_object_bytes`
(`base.MAX_OBJECT_BYTES`) of JSON: a larger create or update is refused with `TooLarge` and changes nothing.

Watchers: each open watch has a queue of the matching events it has not read, filled at commit (events it does not
match are never queued, so a Pod watcher costs nothing while 100k ConfigMaps are written). The queue is bounded by
count (`_PENDING_LIMIT`) and bytes (`_PENDING_BYTES`): past either, the watcher drops it and replays from history
(the same rule as sqlite). Replay is lazy: a watcher reads history one selected event at a time, from the revision
everything up to which it has accounted for, and goes live again when it reaches the head. If history was
compacted past that revision meanwhile, it raises `Gone` and its consumer relists. A watch from a revision beyond the
head raises `Gone` at entry (the store was reset; relist). `close` ends every open watch with `Unavailable`.

Pages: each kind's keys are kept in list order (a sorted list, updated at create and delete), so `list_page` finds a
page's start by bisection and hands out the kept encodings themselves: no sorting, copying or encoding per page.

Copies: every object stored (and every event kept) is private to the store, and every dict returned is a fresh copy.
An object whose JSON encoding decodes back to an equal value (every wire object) is kept with that encoding, and
its copies are decoded from it: several times cheaper than `copy.deepcopy`. Anything else (tuples, sets, datetimes,
NaN, keys that are not strings, integers beyond 64 bits...) is deep-copied, so this backend keeps such values as
they were given (their size is estimated for the limits). One exception: members of str or int enums come back as
their plain values (which compare equal).
"""

from __future__ import annotations

import asyncio
import bisect
import copy
import uuid
from collections import deque
from collections.abc import Mapping
from types import TracebackType
from typing import Any, NamedTuple

import orjson

from devplace import errors
from devplace.clocks import Clock, SystemClock
from devplace.store import _base as base
from devplace.store._base import Event, EventType, Filters, Key, ObjectList

# Datetimes, dataclasses and subclasses of str, int, dict and list would be written as something else: refusing them
# sends them to the deep-copy path. (Enum members have no such switch; see the module docstring.)
_FAITHFUL = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS

_Stored = tuple[dict[str, Any], bytes | None]  # a private object and its JSON encoding, None when not faithful

_PENDING_LIMIT = 4096  # unread events queued for one watcher; past it, it replays from history instead
_PENDING_BYTES = 8 * 1024 * 1024  # and their encoded bytes (a few big objects must not pin hundreds of MB)
_SCAN_STEP = 1024  # history records a replaying watcher examines before letting other tasks run


class _Record(NamedTuple):
    """One past event as history keeps it: its encoding, decoded again on replay (`obj` only when not faithful)."""

    revision: int
    type: EventType
    key: Key
    body: bytes | None
    obj: dict[str, Any] | None  # the private deep copy of an object that has no faithful encoding
    size: int  # encoded bytes (estimated when not faithful)

    def decoded(self) -> dict[str, Any]:
        """A fresh copy of the event's object."""
        if self.body is None:
            assert self.obj is not None
            return copy.deepcopy(self.obj)
        fresh: dict[str, Any] = orjson.loads(self.body)
        return fresh


def _own(obj: dict[str, Any]) -> _Stored:
    """A private copy of `obj` (which may share nested values with a caller), with its encoding when faithful."""
    try:
        body = orjson.dumps(obj, option=_FAITHFUL)
    except orjson.JSONEncodeError:
        return copy.deepcopy(obj), None
    owned: dict[str, Any] = orjson.loads(body)
    if owned != obj:  # a tuple, NaN, a non-string key...: JSON would change it
        return copy.deepcopy(obj), None
    return owned, _kept(body)


def _kept(body: bytes) -> bytes:
    """`body` in an allocation of its own size, to keep. orjson's output keeps the buffer it wrote into: at least
    4 KiB, about 10 times the text for long strings (measured with orjson 3.13); a copy is exact. With 100k small
    objects this halves the store's memory."""
    return bytes(memoryview(body))


def _size(stored: _Stored) -> int:
    """Encoded bytes of a stored object; for one without a faithful encoding, an estimate of what JSON would take."""
    obj, body = stored
    if body is not None:
        return len(body)
    try:
        return len(orjson.dumps(obj, default=repr, option=orjson.OPT_NON_STR_KEYS))
    except TypeError:  # orjson.JSONEncodeError is one: integers beyond 64 bits, say
        return len(repr(obj))


def _copy(stored: _Stored) -> dict[str, Any]:
    obj, body = stored
    if body is None:
        return copy.deepcopy(obj)
    fresh: dict[str, Any] = orjson.loads(body)
    return fresh


def _revision_of(record: _Record) -> int:
    return record.revision


class MemoryStore:
    def __init__(
        self,
        clock: Clock | None = None,
        history_limit: int = 100_000,
        *,
        history_bytes: int = base.DEFAULT_HISTORY_BYTES,
        max_object_bytes: int = base.MAX_OBJECT_BYTES,
    ) -> None:
        """`history_limit` and `history_bytes` bound the events kept for watch replay (see the module docstring);
        `max_object_bytes` the encoded size of one object."""
        for field, value in (
            ("history_limit", history_limit),
            ("history_bytes", history_bytes),
            ("max_object_bytes", max_object_bytes),
        ):
            if value < 1:
                raise errors.Invalid.field(field, "must be at least 1")
        self._clock = clock or SystemClock()
        self._objects: dict[Key, _Stored] = {}
        self._order: dict[str, list[tuple[str, str]]] = {}  # each kind's keys, (namespace, name), in list order
        self._history: list[_Record] = []
        self._history_size = 0  # encoded bytes in `_history`
        self._compacted = 0
        self._revision = 0
        self._history_limit = history_limit
        self._history_bytes = history_bytes
        self._max_object_bytes = max_object_bytes
        self._watchers: set[_MemoryWatch] = set()
        self._closed = False

    # -- writes ---------------------------------------------------------------------------------------------

    def _commit(self, type_: EventType, key: Key, stored: _Stored, revision: int, size: int) -> None:
        """Apply one write: `stored` is the stored object, or for DELETED the object as it was, at `revision`."""
        if type_ == "DELETED":
            del self._objects[key]
            order = self._order[key.kind]
            del order[bisect.bisect_left(order, (key.namespace, key.name))]
        else:
            if type_ == "ADDED":
                bisect.insort(self._order.setdefault(key.kind, []), (key.namespace, key.name))
            self._objects[key] = stored
        self._revision = revision
        obj, body = stored
        self._history.append(_Record(revision, type_, key, body, obj if body is None else None, size))
        self._history_size += size
        if len(self._history) > self._history_limit or self._history_size > self._history_bytes:
            self._trim()
        event = Event(type_, obj, revision)
        for watcher in self._watchers:
            watcher.offer(event, stored, size)

    def _trim(self) -> None:
        """Compact the oldest records: down to 7/8 of whichever bound was passed, so this runs once in a while."""
        history = self._history
        keep_count = self._history_limit
        if len(history) > keep_count:
            keep_count -= max(1, keep_count // 8)
        keep_bytes = self._history_bytes
        if self._history_size > keep_bytes:
            keep_bytes -= keep_bytes // 8
        drop = max(0, len(history) - keep_count)
        dropped = sum(record.size for record in history[:drop])
        while drop < len(history) and self._history_size - dropped > keep_bytes:
            dropped += history[drop].size
            drop += 1
        if drop:
            self._compacted = history[drop - 1].revision
            del history[:drop]
            self._history_size -= dropped

    def _stored_checked(self, key: Key, obj: dict[str, Any]) -> tuple[_Stored, int]:
        stored = _own(obj)
        size = _size(stored)
        base.check_object_size(key, size, self._max_object_bytes)
        return stored, size

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._check_open()
        key = base.key_of(obj)
        if key in self._objects:
            raise errors.AlreadyExists(f"{key} already exists")
        stamped = base.stamp_created(obj, self._revision + 1, self._clock.now(), str(uuid.uuid4()))
        stored, size = self._stored_checked(key, stamped)
        self._commit("ADDED", key, stored, self._revision + 1, size)
        return _copy(stored)

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._check_open()
        key = base.key_of(obj)
        expected = base.resource_version_of(obj)
        current = self._objects.get(key)
        old = base.check_update_target(key, None if current is None else current[0], expected)
        stored, size = self._stored_checked(key, base.stamp_updated(old, obj, self._revision + 1))
        self._commit("MODIFIED", key, stored, self._revision + 1, size)
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
        stored = (gone, None if current[1] is None else _kept(orjson.dumps(gone, option=_FAITHFUL)))
        self._commit("DELETED", key, stored, self._revision + 1, _size(stored))
        return _copy(stored)

    async def load(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create `obj` as it is, only its resourceVersion new (`devplace store import`; `SqliteStore.load`)."""
        self._check_open()
        key = base.key_of(obj)
        if key in self._objects:
            raise errors.AlreadyExists(f"{key} already exists")
        loaded = {**obj, "metadata": {**(obj.get("metadata") or {}), "resourceVersion": str(self._revision + 1)}}
        stored, size = self._stored_checked(key, loaded)
        self._commit("ADDED", key, stored, self._revision + 1, size)
        return _copy(stored)

    async def dump(self) -> tuple[int, list[dict[str, Any]]]:
        """Every object of every kind, in (kind, namespace, name) order, and the revision."""
        self._check_open()
        keys = sorted(self._objects, key=lambda key: (key.kind, key.namespace, key.name))
        return self._revision, [_copy(self._objects[key]) for key in keys]

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
    ) -> base.EncodedPage:
        """`base.Store.list_page`: the kept encodings, from the kind's ordered keys (no copy, no decoding)."""
        self._check_open()
        cut = base.PageCut(after, limit, max_bytes)
        filters = base.parse_filters(kind, namespace, selector, fields)
        order = self._order.get(kind, [])
        start, end = 0, len(order)
        if namespace is not None:  # a namespace's keys are contiguous: those before (namespace + "\0",)
            start = bisect.bisect_left(order, (namespace, ""))
            end = bisect.bisect_left(order, (namespace + "\0",))
        if after is not None:
            start = min(max(start, bisect.bisect_right(order, after)), end)
        selecting = filters.labels is not None or filters.fields is not None
        index = start
        while index < end and not cut.done():
            ns, name = order[index]
            obj, body = self._objects[Key(kind, ns, name)]
            if selecting and not filters.matches(obj):
                cut.skip(ns, name)
            else:
                body = body if body is not None else base.encode_json(obj)
                if not cut.fits(len(body)):
                    break
                cut.take(ns, name, body)
            index += 1
        return cut.page(self._revision, end - index)

    async def revision(self) -> int:
        return self._revision

    async def compact(self, revision: int) -> None:
        self._check_open()
        target = base.check_compact_target(revision, self._revision)
        if target <= self._compacted:
            return
        drop = bisect.bisect_right(self._history, target, key=_revision_of)
        self._history_size -= sum(record.size for record in self._history[:drop])
        del self._history[:drop]
        self._compacted = target

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

    def _check_replayable(self, after: int) -> None:
        """`Gone` unless history holds every event after `after` (or `after` is the head)."""
        if after < self._compacted:
            raise errors.Gone(
                f"revision {after} has been compacted (oldest available is {self._compacted + 1}); "
                "relist and watch again"
            )
        if after > self._revision:
            raise base.future_revision(after, self._revision)

    def _replay_step(self, after: int, filters: Filters) -> tuple[Event | None, int]:
        """The first event after `after` that `filters` select, looking at `_SCAN_STEP` records at most, as a fresh
        copy (None when there was none among them), and the revision examined up to; `Gone` when compacted past."""
        self._check_replayable(after)
        history = self._history
        start = bisect.bisect_right(history, after, key=_revision_of)
        end = min(len(history), start + _SCAN_STEP)
        kind, namespace = filters.kind, filters.namespace
        plain = filters.labels is None and filters.fields is None
        for record in history[start:end]:
            if (kind is not None and record.key.kind != kind) or (
                namespace is not None and record.key.namespace != namespace
            ):
                continue
            obj = record.decoded()
            if plain or filters.matches(obj):
                return Event(record.type, obj, record.revision), record.revision
        return None, history[end - 1].revision if end > start else after

    async def close(self) -> None:
        self._closed = True
        for watcher in list(self._watchers):
            watcher.wake()

    def _check_open(self) -> None:
        if self._closed:
            raise errors.Unavailable("store is closed")


class _MemoryWatch(base.BaseWatch):
    """One watch of a `MemoryStore` (see the module docstring): registered on entry, bounded, filtered at commit.

    `_cursor` is the revision everything up to which is accounted for (delivered, or known not to match); while
    `_replaying`, events come from history after it and commits are not queued (history has them)."""

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
        self._pending: deque[tuple[Event, _Stored, int]] = deque()
        self._pending_bytes = 0
        self._replaying = False
        self._waiter: asyncio.Future[None] | None = None
        self._cursor = -1

    async def __aenter__(self) -> _MemoryWatch:
        store = self._store
        store._check_open()
        since = base.watch_since(self._since)
        kind, namespace, selector, fields = self._args
        self._filters = base.parse_filters(kind, namespace, selector, fields)
        start = store._revision if since is None else since
        store._check_replayable(start)  # raises Gone before anything is registered
        self._revision = self._cursor = start
        self._replaying = start < store._revision
        self._entered = True
        store._watchers.add(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._store._watchers.discard(self)
        self._drop_pending()
        self._entered = False

    def offer(self, event: Event, stored: _Stored, size: int) -> None:
        """Called at commit; queues the event when it matches, switching to a history replay when too far behind."""
        if self._replaying:
            return
        if not self._filters.matches(event.object):
            if not self._pending:
                self._cursor = event.revision  # everything up to it is accounted for
            return
        if self._pending and (len(self._pending) >= _PENDING_LIMIT or self._pending_bytes + size > _PENDING_BYTES):
            self._drop_pending()
            self._replaying = True
        else:
            self._pending.append((event, stored, size))
            self._pending_bytes += size
        self.wake()

    def _drop_pending(self) -> None:
        self._pending.clear()
        self._pending_bytes = 0

    def wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def __anext__(self) -> Event:
        self._require_entered()
        store = self._store
        while True:
            store._check_open()
            if self._replaying:
                event, self._cursor = store._replay_step(self._cursor, self._filters)
                if self._cursor >= store._revision:
                    self._replaying = False  # caught up: commits from now on are queued
                if event is not None:
                    return event
                if self._replaying:
                    await asyncio.sleep(0)  # a long stretch of history selected nothing: let others run
                continue
            if self._pending:
                event, stored, size = self._pending.popleft()
                self._pending_bytes -= size
                self._cursor = event.revision
                return Event(event.type, _copy(stored), event.revision)
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
