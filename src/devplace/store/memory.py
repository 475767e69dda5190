"""In-memory Store: the reference backend, for tests and simulations.

All state changes happen without awaiting, so each operation is atomic on the event loop. History (for watch
replay) is kept since the last compaction; `history_limit` compacts automatically so long simulations stay bounded.

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
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson

from devplace import errors
from devplace.api import selectors
from devplace.clocks import Clock, SystemClock
from devplace.store import base
from devplace.store.base import Event, EventType, Key, ObjectList

__all__ = ["MemoryStore"]

# Datetimes, dataclasses and subclasses of str, int, dict and list would be written as something else: refusing them
# sends them to the deep-copy path. (Enum members have no such switch; see the module docstring.)
_FAITHFUL = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS

_Stored = tuple[dict[str, Any], bytes | None]  # a private object and its JSON encoding, None when not faithful


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
        self._watchers: set[asyncio.Queue[tuple[Event, bytes | None]]] = set()
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
        for queue in self._watchers:
            queue.put_nowait(entry)

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

    async def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> ObjectList:
        self._check_open()
        parsed = selectors.parse_label_selector(selector) if selector else None
        # Sorting plain (namespace, name) tuples of one kind: comparing `Key` dataclasses costs several times more.
        found = sorted(
            ((key.namespace, key.name), stored)
            for key, stored in self._objects.items()
            if key.kind == kind and (namespace is None or key.namespace == namespace)
        )
        items = [_copy(stored) for _, stored in found if base.matches(stored[0], None, None, parsed)]
        return ObjectList(items, self._revision)

    async def revision(self) -> int:
        return self._revision

    async def compact(self, revision: int) -> None:
        revision = min(revision, self._revision)
        self._history = [entry for entry in self._history if entry[0].revision > revision]
        self._compacted = max(self._compacted, revision)

    async def watch(
        self,
        kind: str | None = None,
        namespace: str | None = None,
        *,
        since: int | None = None,
        selector: str | None = None,
    ) -> AsyncIterator[Event]:
        self._check_open()
        parsed = selectors.parse_label_selector(selector) if selector else None
        start = self._revision if since is None else since
        if start < self._compacted:
            raise errors.Gone(
                f"revision {start} has been compacted (oldest available is {self._compacted + 1}); "
                "relist and watch again"
            )
        queue: asyncio.Queue[tuple[Event, bytes | None]] = asyncio.Queue()
        self._watchers.add(queue)
        try:
            last = start
            for event, body in list(self._history):
                if event.revision > last:
                    last = event.revision
                    if base.matches(event.object, kind, namespace, parsed):
                        yield Event(event.type, _copy((event.object, body)), event.revision)
            while True:
                event, body = await queue.get()
                if event.revision <= last:
                    continue
                last = event.revision
                if base.matches(event.object, kind, namespace, parsed):
                    yield Event(event.type, _copy((event.object, body)), event.revision)
        finally:
            self._watchers.discard(queue)

    async def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise errors.Unavailable("store is closed")
