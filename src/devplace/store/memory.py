"""In-memory Store: the reference backend, for tests and simulations.

All state changes happen without awaiting, so each operation is atomic on the event loop. History (for watch
replay) is kept since the last compaction; `history_limit` compacts automatically so long simulations stay bounded.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from devplace import errors
from devplace.api import selectors
from devplace.clocks import Clock, SystemClock
from devplace.store import base
from devplace.store.base import Event, EventType, Key, ObjectList

__all__ = ["MemoryStore"]


class MemoryStore:
    def __init__(self, clock: Clock | None = None, history_limit: int = 100_000) -> None:
        self._clock = clock or SystemClock()
        self._objects: dict[Key, dict[str, Any]] = {}
        self._history: list[Event] = []
        self._compacted = 0
        self._revision = 0
        self._history_limit = history_limit
        self._watchers: set[asyncio.Queue[Event]] = set()
        self._closed = False

    # -- writes ---------------------------------------------------------------------------------------------

    def _commit(self, type_: EventType, key: Key, obj: dict[str, Any], revision: int) -> None:
        """Apply one write: `obj` is the stored object, or for DELETED the object as it was, at `revision`."""
        if type_ == "DELETED":
            del self._objects[key]
        else:
            self._objects[key] = obj
        self._revision = revision
        event = Event(type_, obj, revision)
        self._history.append(event)
        if len(self._history) > self._history_limit:
            drop = len(self._history) - self._history_limit
            self._compacted = self._history[drop - 1].revision
            del self._history[:drop]
        for queue in self._watchers:
            queue.put_nowait(event)

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._check_open()
        key = base.key_of(obj)
        if key in self._objects:
            raise errors.AlreadyExists(f"{key} already exists")
        stored = base.stamp_created(obj, self._revision + 1, self._clock.now(), str(uuid.uuid4()))
        self._commit("ADDED", key, stored, self._revision + 1)
        return base.deep_copy(stored)

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._check_open()
        key = base.key_of(obj)
        expected = base.resource_version_of(obj)
        old = base.check_update_target(key, self._objects.get(key), expected)
        stored = base.stamp_updated(old, obj, self._revision + 1)
        self._commit("MODIFIED", key, stored, self._revision + 1)
        return base.deep_copy(stored)

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        self._check_open()
        key = Key(kind, namespace or "", name)
        stored = self._objects.get(key)
        base.check_delete_precondition(key, stored, resource_version)
        assert stored is not None
        gone = base.deep_copy(stored)
        gone["metadata"]["resourceVersion"] = str(self._revision + 1)
        self._commit("DELETED", key, gone, self._revision + 1)
        return base.deep_copy(gone)

    # -- reads ----------------------------------------------------------------------------------------------

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        self._check_open()
        key = Key(kind, namespace or "", name)
        stored = self._objects.get(key)
        if stored is None:
            raise errors.NotFound(f"{key} not found")
        return base.deep_copy(stored)

    async def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> ObjectList:
        self._check_open()
        parsed = selectors.parse_label_selector(selector) if selector else None
        items = [
            base.deep_copy(obj)
            for key, obj in sorted(self._objects.items())
            if key.kind == kind and base.matches(obj, None, namespace, parsed)
        ]
        return ObjectList(items, self._revision)

    async def revision(self) -> int:
        return self._revision

    async def compact(self, revision: int) -> None:
        revision = min(revision, self._revision)
        self._history = [e for e in self._history if e.revision > revision]
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
        queue: asyncio.Queue[Event] = asyncio.Queue()
        self._watchers.add(queue)
        try:
            last = start
            for event in list(self._history):
                if event.revision > last:
                    last = event.revision
                    if base.matches(event.object, kind, namespace, parsed):
                        yield Event(event.type, base.deep_copy(event.object), event.revision)
            while True:
                event = await queue.get()
                if event.revision <= last:
                    continue
                last = event.revision
                if base.matches(event.object, kind, namespace, parsed):
                    yield Event(event.type, base.deep_copy(event.object), event.revision)
        finally:
            self._watchers.discard(queue)

    async def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise errors.Unavailable("store is closed")
