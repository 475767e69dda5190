"""SQLite Store: the embedded default backend, one file in WAL mode, shareable by several processes.

Layout: `objects` holds the current objects, `events` the write log that watches replay, `meta` the compacted revision.
Every write is one `BEGIN IMMEDIATE` transaction that reads the newest event revision, writes the object row and
appends the event carrying the same body. So revisions are global, contiguous and monotonic across every process
sharing the file (SQLite's write lock serializes them), and a write is there entirely or not at all. When a write
returns, its COMMIT has reached the WAL file: it survives kill -9 of the process. With `synchronous="NORMAL"` (the
default) a power loss may drop the last commits but never corrupts the file; `"FULL"` also keeps those.

Concurrency: the sqlite calls run synchronously on the event loop thread (a write costs a few tens of microseconds,
less than a hop to a worker thread would) and nothing awaits inside a transaction, so the operations of one store
are atomic with respect to each other. Writers in other processes wait for the write lock up to `busy_timeout`, blocking
their loop meanwhile; past it the operation raises `Unavailable`, as does any operation after `close()`.

Speed: a CAS update is one transaction of three statements (read the row and the head revision, write the row,
append the event). The body is encoded once, for both rows, and the caller's copy is decoded from it: cheaper than
the deep copies of `base.stamp_created`/`stamp_updated`, which `_stamp_created`/`_stamp_updated` below mirror
field for field. Nothing returned shares a dict with the caller's argument or with another result.

Watch: at commit an in-process write hands its encoded body to every live watcher of this store, matched then, so
they see it at once without reading the file. Revisions being contiguous, a watcher that meets a gap knows another
process wrote in between and reads the events table. Writes of other processes with no local write after them are
noticed through `PRAGMA data_version` (it changes when another connection commits), checked whenever a watcher wakes
and at least every `poll_interval` seconds (real time: this waits on I/O, not on behaviour). A watcher whose next
revision has been compacted away raises `Gone`, at the start or later; so does one that fell so far behind that
its events were compacted while it was not reading.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import uuid
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Any

from devplace import errors
from devplace.api import selectors
from devplace.clocks import Clock, SystemClock
from devplace.store import base
from devplace.store.base import Event, EventType, Key, ObjectList

__all__ = ["SqliteStore"]

# Bodies are always encoded by `_encode`, so decoding skips json.loads' whitespace and trailing-data checks;
# cycles are caught by the recursion limit instead of a marker dict (both are refused as Invalid).
_encode = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
_raw_decode = json.JSONDecoder().raw_decode


def _decode(body: str) -> dict[str, Any]:
    obj: dict[str, Any] = _raw_decode(body)[0]
    return obj


_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS objects (kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,"
    " revision INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, namespace, name))",
    "CREATE TABLE IF NOT EXISTS events (revision INTEGER PRIMARY KEY, type TEXT NOT NULL, kind TEXT NOT NULL,"
    " namespace TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO meta (key, value) VALUES ('compacted', 0)",
)
# The newest event is never compacted away, so max(events.revision) is always the store's revision.
_HEAD = "SELECT coalesce(max(revision), 0) FROM events"
_COMPACTED = "SELECT value FROM meta WHERE key = 'compacted'"
_ROW_FOR_WRITE = (
    "SELECT revision, body, (SELECT max(revision) FROM events) FROM objects"
    " WHERE kind = ? AND namespace = ? AND name = ?"
)
_GET = "SELECT body FROM objects WHERE kind = ? AND namespace = ? AND name = ?"
_INSERT_OBJECT = "INSERT INTO objects (kind, namespace, name, revision, body) VALUES (?, ?, ?, ?, ?)"
_UPDATE_OBJECT = "UPDATE objects SET revision = ?, body = ? WHERE kind = ? AND namespace = ? AND name = ?"
_DELETE_OBJECT = "DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?"
_INSERT_EVENT = "INSERT INTO events (revision, type, kind, namespace, name, body) VALUES (?, ?, ?, ?, ?, ?)"

_Rows = list[tuple[int, EventType, str]]  # (revision, type, body) rows of the events table

_REPLAY_PAGE = 512  # events read per query when replaying; bounds memory for long histories
_PENDING_LIMIT = 4096  # in-process events queued for a watcher that does not read; past it, it rereads the file


class _Watcher:
    """One live watch of this store: the in-process events it has not consumed yet, and how to wake it."""

    __slots__ = ("kind", "namespace", "overflowed", "pending", "selector", "waiter")

    def __init__(self, kind: str | None, namespace: str | None, selector: Any) -> None:
        self.kind = kind
        self.namespace = namespace
        self.selector = selector
        # (revision, type or None when filtered out, body): the revision is kept either way to prove contiguity.
        self.pending: deque[tuple[int, EventType | None, str]] = deque()
        self.overflowed = False
        self.waiter: asyncio.Future[None] | None = None

    def offer(self, revision: int, type_: EventType, obj: Mapping[str, Any], body: str) -> None:
        """Called right after a local commit, while `obj` is still unshared: match now, decode on delivery."""
        if self.overflowed:
            pass
        elif len(self.pending) >= _PENDING_LIMIT:
            self.pending.clear()
            self.overflowed = True
        elif base.matches(obj, self.kind, self.namespace, self.selector):
            self.pending.append((revision, type_, body))
        else:
            self.pending.append((revision, None, ""))
        self.wake()

    def wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


def _wake_future(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class SqliteStore:
    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        synchronous: str = "NORMAL",
        poll_interval: float = 0.05,
        busy_timeout: float = 5.0,
        history_limit: int | None = 100_000,
    ) -> None:
        """Open (creating if needed) the store file at `path`.

        `history_limit` keeps at most about that many events for watch replay (older ones are compacted in batches);
        None keeps everything until `compact` is called.
        """
        if synchronous.upper() not in _SYNCHRONOUS:
            raise errors.Invalid.field("synchronous", f"{synchronous!r} is not one of {', '.join(_SYNCHRONOUS)}")
        if poll_interval <= 0:
            raise errors.Invalid.field("poll_interval", "must be positive")
        if history_limit is not None and history_limit < 1:
            raise errors.Invalid.field("history_limit", "must be at least 1 (or None for no limit)")
        self._path = os.fspath(path)
        self._clock = clock or SystemClock()
        self._poll_interval = poll_interval
        self._history_limit = history_limit
        self._compact_batch = 0 if history_limit is None else max(1, min(1024, history_limit // 8))
        self._watchers: set[_Watcher] = set()
        self._closed = False
        try:
            conn = sqlite3.connect(self._path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise errors.Unavailable(f"cannot open sqlite store {self._path}: {e}") from e
        self._conn = conn
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal" and self._path != ":memory:":
                raise errors.Unavailable(f"sqlite store {self._path}: cannot use WAL mode (got {mode!r})")
            conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
            conn.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute("COMMIT")
            self._compacted_hint: int = conn.execute(_COMPACTED).fetchone()[0]
        except sqlite3.Error as e:
            conn.close()
            raise errors.Unavailable(f"cannot open sqlite store {self._path}: {e}") from e
        except BaseException:
            conn.close()
            raise
        self._cur = conn.cursor()

    @property
    def path(self) -> str:
        return self._path

    # -- writes ---------------------------------------------------------------------------------------------

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        key = base.key_of(obj)
        cur = self._begin_write()
        try:
            revision = cur.execute(_HEAD).fetchone()[0] + 1
            stamped = _stamp_created(obj, revision, self._clock.now())
            body = _encode_body(stamped)
            cur.execute(_INSERT_OBJECT, (key.kind, key.namespace, key.name, revision, body))
            cur.execute(_INSERT_EVENT, (revision, "ADDED", key.kind, key.namespace, key.name, body))
            cur.execute("COMMIT")
        except sqlite3.IntegrityError as e:
            self._rollback()
            raise errors.AlreadyExists(f"{key} already exists") from e
        except sqlite3.Error as e:
            self._rollback()
            raise self._unavailable(e) from e
        except BaseException:
            self._rollback()
            raise
        self._committed(revision, "ADDED", stamped, body)
        return _decode(body)

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        key = base.key_of(obj)
        expected = base.resource_version_of(obj)
        cur = self._begin_write()
        try:
            row = cur.execute(_ROW_FOR_WRITE, (key.kind, key.namespace, key.name)).fetchone()
            old = base.check_update_target(key, None if row is None else _decode(row[1]), expected)
            revision = row[2] + 1
            stamped = _stamp_updated(old, obj, revision)
            body = _encode_body(stamped)
            cur.execute(_UPDATE_OBJECT, (revision, body, key.kind, key.namespace, key.name))
            cur.execute(_INSERT_EVENT, (revision, "MODIFIED", key.kind, key.namespace, key.name, body))
            cur.execute("COMMIT")
        except sqlite3.Error as e:
            self._rollback()
            raise self._unavailable(e) from e
        except BaseException:
            self._rollback()
            raise
        # `stamped` shares nested values with the caller's `obj`: watchers match on it now, the caller gets a copy.
        self._committed(revision, "MODIFIED", stamped, body)
        return _decode(body)

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        key = Key(kind, namespace or "", name)
        cur = self._begin_write()
        try:
            row = cur.execute(_ROW_FOR_WRITE, (key.kind, key.namespace, key.name)).fetchone()
            gone: dict[str, Any] | None = None if row is None else _decode(row[1])
            base.check_delete_precondition(key, gone, resource_version)
            assert gone is not None
            assert row is not None
            revision = row[2] + 1
            gone["metadata"]["resourceVersion"] = str(revision)
            body = _encode_body(gone)
            cur.execute(_DELETE_OBJECT, (key.kind, key.namespace, key.name))
            cur.execute(_INSERT_EVENT, (revision, "DELETED", key.kind, key.namespace, key.name, body))
            cur.execute("COMMIT")
        except sqlite3.Error as e:
            self._rollback()
            raise self._unavailable(e) from e
        except BaseException:
            self._rollback()
            raise
        self._committed(revision, "DELETED", gone, body)
        return gone

    async def compact(self, revision: int) -> None:
        self._compact(revision)

    def _compact(self, revision: int) -> None:
        cur = self._begin_write()
        try:
            head = cur.execute(_HEAD).fetchone()[0]
            compacted = cur.execute(_COMPACTED).fetchone()[0]
            target = min(revision, head)
            if target > compacted:
                cur.execute("DELETE FROM events WHERE revision <= ? AND revision < ?", (target, head))
                cur.execute("UPDATE meta SET value = ? WHERE key = 'compacted'", (target,))
                compacted = target
            cur.execute("COMMIT")
        except sqlite3.Error as e:
            self._rollback()
            raise self._unavailable(e) from e
        except BaseException:
            self._rollback()
            raise
        self._compacted_hint = compacted

    def _committed(self, revision: int, type_: EventType, obj: Mapping[str, Any], body: str) -> None:
        for watcher in self._watchers:
            watcher.offer(revision, type_, obj, body)
        if self._history_limit is not None and revision - self._compacted_hint > self._history_limit + (
            self._compact_batch
        ):
            try:
                self._compact(revision - self._history_limit)
            except errors.Unavailable:
                pass  # the write itself is committed; compaction is retried after the next one

    def _begin_write(self) -> sqlite3.Cursor:
        self._check_open()
        try:
            self._cur.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise self._unavailable(e) from e
        return self._cur

    def _rollback(self) -> None:
        try:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the connection is unusable; the failure that brought us here is what the caller sees

    # -- reads ----------------------------------------------------------------------------------------------

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        self._check_open()
        try:
            row = self._cur.execute(_GET, (kind, namespace or "", name)).fetchone()
        except sqlite3.Error as e:
            raise self._unavailable(e) from e
        if row is None:
            raise errors.NotFound(f"{Key(kind, namespace or '', name)} not found")
        return _decode(row[0])

    async def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> ObjectList:
        self._check_open()
        parsed = selectors.parse_label_selector(selector) if selector else None
        cur = self._cur
        try:
            cur.execute("BEGIN")  # one read snapshot for the items and the revision
            try:
                revision = cur.execute(_HEAD).fetchone()[0]
                if namespace is None:
                    cur.execute("SELECT body FROM objects WHERE kind = ? ORDER BY namespace, name", (kind,))
                else:
                    cur.execute(
                        "SELECT body FROM objects WHERE kind = ? AND namespace = ? ORDER BY name", (kind, namespace)
                    )
                rows = cur.fetchall()
            finally:
                cur.execute("COMMIT")
        except sqlite3.Error as e:
            self._rollback()
            raise self._unavailable(e) from e
        items = [_decode(row[0]) for row in rows]
        if parsed is not None:
            items = [item for item in items if base.matches(item, None, None, parsed)]
        return ObjectList(items, revision)

    async def revision(self) -> int:
        self._check_open()
        return self._head()

    def _head(self) -> int:
        try:
            head: int = self._cur.execute(_HEAD).fetchone()[0]
        except sqlite3.Error as e:
            raise self._unavailable(e) from e
        return head

    def _data_version(self) -> int:
        """Changes whenever another connection (another process) commits to the file."""
        try:
            version: int = self._cur.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error as e:
            raise self._unavailable(e) from e
        return version

    def _read_events(self, after: int, kind: str | None, namespace: str | None) -> tuple[_Rows, int, bool]:
        """Events with revision > `after` (filtered by kind/namespace) in one snapshot.

        Returns the rows, the revision the reader has now seen up to, and whether more rows may follow.
        """
        sql = "SELECT revision, type, body FROM events WHERE revision > ?"
        params: list[Any] = [after]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        if namespace is not None:
            sql += " AND namespace = ?"
            params.append(namespace)
        sql += f" ORDER BY revision LIMIT {_REPLAY_PAGE}"
        cur = self._cur
        try:
            cur.execute("BEGIN")
            try:
                compacted = cur.execute(_COMPACTED).fetchone()[0]
                head = cur.execute(_HEAD).fetchone()[0]
                rows: _Rows = cur.execute(sql, params).fetchall()
            finally:
                cur.execute("COMMIT")
        except sqlite3.Error as e:
            self._rollback()
            raise self._unavailable(e) from e
        if after < compacted:
            raise errors.Gone(
                f"revision {after} has been compacted (oldest available is {compacted + 1}); relist and watch again"
            )
        full = len(rows) == _REPLAY_PAGE
        return rows, (rows[-1][0] if full else max(head, after)), full

    # -- watch ----------------------------------------------------------------------------------------------

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
        last = self._head() if since is None else since
        watcher = _Watcher(kind, namespace, parsed)
        self._watchers.add(watcher)
        loop = asyncio.get_running_loop()
        try:
            must_read = True  # replay first; this also raises Gone for a compacted `since`
            while True:
                if must_read:
                    version = self._data_version()
                    rows, last, must_read = self._read_events(last, kind, namespace)
                    for revision, type_, body in rows:
                        obj = _decode(body)
                        if parsed is None or base.matches(obj, None, None, parsed):
                            yield Event(type_, obj, revision)
                    continue
                pending = watcher.pending
                while pending:
                    revision, maybe_type, body = pending[0]
                    if revision > last + 1:  # another process wrote in between: read the file
                        must_read = True
                        break
                    pending.popleft()
                    if revision <= last:
                        continue
                    last = revision
                    if maybe_type is not None:
                        yield Event(maybe_type, _decode(body), revision)
                if watcher.overflowed:
                    watcher.overflowed = False
                    must_read = True
                if must_read:
                    continue
                waiter: asyncio.Future[None] = loop.create_future()
                watcher.waiter = waiter
                timer = loop.call_later(self._poll_interval, _wake_future, waiter)
                try:
                    await waiter
                finally:
                    timer.cancel()
                    watcher.waiter = None
                self._check_open()
                if self._data_version() != version:
                    must_read = True
        finally:
            self._watchers.discard(watcher)

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for watcher in list(self._watchers):
            watcher.wake()
        self._conn.close()

    def _check_open(self) -> None:
        if self._closed:
            raise errors.Unavailable(f"sqlite store {self._path} is closed")

    def _unavailable(self, e: sqlite3.Error) -> errors.Unavailable:
        if self._closed:
            return errors.Unavailable(f"sqlite store {self._path} is closed")
        return errors.Unavailable(f"sqlite store {self._path}: {e}")


def _encode_body(obj: Mapping[str, Any]) -> str:
    try:
        return _encode(obj)
    except (TypeError, ValueError, RecursionError) as e:
        raise errors.Invalid(f"the object is not JSON: {e}") from e


def _stamp_created(obj: Mapping[str, Any], revision: int, now: float) -> dict[str, Any]:
    """`base.stamp_created` without its deep copy: the result is only encoded, never kept or returned."""
    meta = dict(obj.get("metadata") or {})
    meta["resourceVersion"] = str(revision)
    meta["uid"] = str(uuid.uuid4())
    meta["generation"] = 1
    meta["creationTimestamp"] = base.rfc3339(now)
    if not meta.get("namespace"):
        meta.pop("namespace", None)
    out = dict(obj)
    out["metadata"] = meta
    return out


def _stamp_updated(old: Mapping[str, Any], new: Mapping[str, Any], revision: int) -> dict[str, Any]:
    """`base.stamp_updated` without its deep copy: the result is encoded, and matched by watchers before returning."""
    meta = dict(new.get("metadata") or {})
    old_meta = old["metadata"]
    meta["resourceVersion"] = str(revision)
    meta["uid"] = old_meta.get("uid")
    meta["creationTimestamp"] = old_meta.get("creationTimestamp")
    meta["generation"] = base.next_generation(old, new)
    if not meta.get("namespace"):
        meta.pop("namespace", None)
    out = dict(new)
    out["metadata"] = meta
    return out
