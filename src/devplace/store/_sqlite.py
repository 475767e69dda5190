"""SQLite Store: the embedded default backend, one file in WAL mode, shareable by several processes.

Layout: `objects` holds the current objects, `events` the write log that watches replay, `meta` the compacted revision
and the running byte total at it.
Every write is one `BEGIN IMMEDIATE` transaction that reads the newest event revision, writes the object row and
appends the event carrying the same body (for creates and updates a trigger on `objects` appends it). So revisions
are global, contiguous and monotonic across every process sharing the file (SQLite's write lock serializes them),
and a write is there entirely or not at all. When a write returns, its COMMIT has reached the WAL file: it survives
kill -9 of the process. With `synchronous="NORMAL"` (the default) a power loss may drop the last commits but never
corrupts the file; `"FULL"` also keeps those.

Bodies are compact UTF-8 JSON text (`base.encode_json`), readable with any SQLite shell, at most `max_object_bytes`
(`base.MAX_OBJECT_BYTES`): a larger object is refused with `TooLarge` inside its transaction, which rolls back. Next to
the body, an object row keeps what an update needs of the old object in columns: its uid, creationTimestamp, generation
and the JSON text of its spec. So a CAS update never decodes the old body: the revision check reads the `revision`
column, the identity fields are copied from theirs, and the generation rule ("bumps when spec changes") compares the new
spec's JSON text with the stored one, decoding the old spec only when the texts differ (equal values may be written in
another key order). Files written before these columns existed get them, filled from the bodies, when first opened;
processes of that earlier version must not write to the file afterwards (the triggers make their writes fail).

Versions: the file's `PRAGMA user_version` is its layout's version (`SCHEMA_VERSION`; 0 is every file from before
versions). Opening runs, in the opening transaction, each forward step from the file's version to the code's
(`_MIGRATIONS`), so a file is either wholly migrated or untouched; a file whose version is newer than the code's is
refused (`Refused`, naming both versions) before anything is written. A step never rewrites a body: objects keep
their bytes. `devplace store backup` copies a file with SQLite's online backup API (`devplace.store._backups`).

Pages (`list_page`): one transaction steps through the rows after the page's first key, in key order (the primary
key's), and stops as soon as the page is cut, then counts the rows left; the bodies go out as they are stored.

Concurrency: one connection per store, and one operation on it at a time (an `asyncio.Lock`), so a transaction is
never interleaved with another operation of this store. An uncontended write costs a few tens of microseconds,
less than a hop to a worker thread, so every operation first runs on the event loop thread with SQLite's busy
timeout at zero: it either gets the lock at once or fails with SQLITE_BUSY without waiting. Only then (another
process holds the write lock, or recovers the file) is the operation run again, whole, in the store's one worker
thread, where SQLite's busy handler may wait up to `busy_timeout`; the event loop keeps running meanwhile (other
tasks, the watchers, a device plugin's Allocate), and this store's later operations queue on the lock. Past the
timeout the operation raises `Unavailable`, as does any operation after `close()`. A caller cancelled while the
thread waits gets its `CancelledError` at once; the store keeps the connection until the thread is done.
Opening the file (the constructor) is synchronous and may wait up to `busy_timeout` for another opener.

Speed: a CAS update is one transaction of two statements (read the identity columns and the head revision, write
the row; the trigger appends the event). The spec is encoded once, before the transaction, and embedded as it is
in the body, which is encoded once, for both rows; the caller's copy is decoded from it, cheaper than any deep copy.
Nothing returned shares a dict with the caller's argument or with another result.

History: every event row carries its body's size in bytes and `total`, the running sum of sizes over every event ever
appended (the triggers compute both, from the newest row), and `meta` keeps the total as of the compacted revision; so
the bytes of history are one subtraction, exact across processes, and finding where to cut is a scan of the rows being
cut. History is bounded by rows (`history_limit`) and bytes (`history_bytes`, `base.DEFAULT_HISTORY_BYTES` by default);
past either bound the writer that noticed compacts, in the transaction after its write, a batch below it (bytes are
checked after each batch, an eighth of the bound and at most `_BYTES_BATCH`, written by this process). Deleted rows'
pages go to SQLite's free list and are reused by later writes, so the file stops growing at about the bound (plus the
objects and the WAL); it does not shrink (incremental auto-vacuum would, but releasing 8 MiB of pages took about 70 ms
holding the write lock). `secure_delete` is FAST (Debian builds SQLite with it ON): freed pages are not zeroed one by
one, which made compacting 8 MiB of big events cost 60 ms more in its COMMIT; deleted bodies may stay in the file's free
pages until reused. `compact(revision)` beyond the head is `Invalid` (naming `revision`). The newest event is never
deleted: its revision is the store's.

Watch: `watch(...)` is entered with `async with`, which registers the watcher, reads the first page of its replay
(raising `Gone` for a compacted `since`, or one beyond the head) and fixes `revision` (the head when `since` is None).
At commit, an in-process write hands its encoded body to every watcher of this store, which matches it against its kind,
namespace, label and field selectors then: an event it does not select costs it one comparison and is never queued, so a
Pod watcher ignores a stream of ConfigMap writes. Revisions being contiguous, a watcher offered a revision that does not
follow the last one offered knows another process wrote in between, and reads the events table. Writes of other
processes with no local write after them are noticed by one poller per store (running while at least one watch is open):
every `poll_interval` seconds (real time: this waits on I/O, not on behaviour) it reads `PRAGMA data_version`, which
changes when another connection commits, and when it changed wakes every watcher to read the file. So an idle store
costs one cheap query per interval however many watchers it has. A watcher that does not read keeps at most
`_PENDING_LIMIT` events (`_PENDING_BYTES` of bodies) and then rereads the file, a page (`_REPLAY_PAGE` events,
`_REPLAY_BYTES` of bodies) at a time. A watcher whose next revision has been compacted away raises `Gone`, at entry or
later; `close()` ends every open watch with `Unavailable`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import sqlite3
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

import orjson

from devplace import errors
from devplace.clocks import Clock, SystemClock
from devplace.store import _base as base
from devplace.store._base import Event, EventType, Filters, Key, ObjectList

_T = TypeVar("_T")


def _decode(body: str) -> dict[str, Any]:
    obj: dict[str, Any] = base.decode_json(body)
    return obj


_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
# The running total after the newest event (0 before the first): the newest event is never compacted away.
_NEWEST_TOTAL = "SELECT total FROM events ORDER BY revision DESC LIMIT 1"
_LAST_TOTAL = f"coalesce(({_NEWEST_TOTAL}), 0)"
_EVENT_COLUMNS = "(revision, type, kind, namespace, name, size, total, body)"
_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS objects_added AFTER INSERT ON objects BEGIN"
    f" INSERT INTO events {_EVENT_COLUMNS}"
    " VALUES (NEW.revision, 'ADDED', NEW.kind, NEW.namespace, NEW.name, length(CAST(NEW.body AS BLOB)),"
    f" {_LAST_TOTAL} + length(CAST(NEW.body AS BLOB)), NEW.body); END",
    "CREATE TRIGGER IF NOT EXISTS objects_modified AFTER UPDATE OF revision ON objects BEGIN"
    f" INSERT INTO events {_EVENT_COLUMNS}"
    " VALUES (NEW.revision, 'MODIFIED', NEW.kind, NEW.namespace, NEW.name, length(CAST(NEW.body AS BLOB)),"
    f" {_LAST_TOTAL} + length(CAST(NEW.body AS BLOB)), NEW.body); END",
)
# The identity columns come after `body` so that files from before they existed get the same shape by ALTER TABLE.
_IDENTITY_COLUMNS = {"uid": "TEXT", "created": "TEXT", "generation": "INTEGER", "spec": "TEXT"}
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS objects (kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,"
    " revision INTEGER NOT NULL, body TEXT NOT NULL, "
    + ", ".join(f"{column} {type_}" for column, type_ in _IDENTITY_COLUMNS.items())
    + ", PRIMARY KEY (kind, namespace, name))",
    # `size` and `total` come before `body`, so reading them never walks a big body's overflow pages (files from
    # before they existed get them at the end, by ALTER TABLE: slower to read, equally right).
    "CREATE TABLE IF NOT EXISTS events (revision INTEGER PRIMARY KEY, type TEXT NOT NULL, kind TEXT NOT NULL,"
    " namespace TEXT NOT NULL, name TEXT NOT NULL, size INTEGER, total INTEGER, body TEXT NOT NULL)",
    # Creates and updates append their event by trigger, in the statement that writes the row: one statement less
    # per write, and a writer that also appends it (a process of a version before the triggers) fails instead of
    # leaving the identity columns stale. A delete appends its event itself (its body carries the new revision).
    *_TRIGGERS,
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO meta (key, value) VALUES ('compacted', 0)",
    "INSERT OR IGNORE INTO meta (key, value) VALUES ('compacted_total', 0)",
)
# The newest event is never compacted away, so max(events.revision) is always the store's revision.
_HEAD = "SELECT coalesce(max(revision), 0) FROM events"
_COMPACTED = "SELECT value FROM meta WHERE key = 'compacted'"
_DATA_VERSION = "PRAGMA data_version"
_ROW_FOR_UPDATE = (
    "SELECT revision, rowid, uid, created, generation, spec, (SELECT max(revision) FROM events) FROM objects"
    " WHERE kind = ? AND namespace = ? AND name = ?"
)
_ROW_FOR_DELETE = (
    "SELECT revision, rowid, body, (SELECT max(revision) FROM events) FROM objects"
    " WHERE kind = ? AND namespace = ? AND name = ?"
)
_GET = "SELECT body FROM objects WHERE kind = ? AND namespace = ? AND name = ?"
_INSERT_OBJECT = (
    "INSERT INTO objects (kind, namespace, name, revision, body, uid, created, generation, spec)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)"
)
_UPDATE_OBJECT = "UPDATE objects SET revision = ?, body = ?, generation = ?, spec = ? WHERE rowid = ?"
_DELETE_OBJECT = "DELETE FROM objects WHERE rowid = ?"
_INSERT_EVENT = f"INSERT INTO events {_EVENT_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, {_LAST_TOTAL} + ?, ?)"
_HISTORY_BYTES = f"SELECT {_LAST_TOTAL} - (SELECT value FROM meta WHERE key = 'compacted_total')"

_Rows = list[tuple[int, EventType, str]]  # (revision, type, body) rows of the events table

_REPLAY_PAGE = 512  # events read per query when replaying; bounds memory for long histories
_REPLAY_BYTES = 8 * 1024 * 1024  # and their bodies' size (a page of big objects stops early)
_PENDING_LIMIT = 4096  # in-process events queued for a watcher that does not read; past it, it rereads the file
_PENDING_BYTES = 8 * 1024 * 1024  # and their bodies' size
_BYTES_BATCH = 4 * 1024 * 1024  # at most this many bytes of history are compacted at once


class _Written(NamedTuple):
    """A committed write, as offered to the watchers: `obj` is matched (it may share values with the caller's
    argument, so it is used only before the write returns), `body` is decoded for delivery."""

    revision: int
    type: EventType
    obj: Mapping[str, Any]
    body: str
    size: int  # the body's bytes


class _Read(NamedTuple):
    """One page of a watcher's file read: events after `after` (kind and namespace filtered), in one snapshot."""

    after: int  # the revision read after (the head when the watch started from "now")
    rows: _Rows
    upto: int  # everything up to here is accounted for
    more: bool  # the page was full: read again from `upto`
    head: int


def _is_busy(e: sqlite3.Error) -> bool:
    code = getattr(e, "sqlite_errorcode", 0) & 0xFF
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def schema_version(conn: sqlite3.Connection) -> int:
    """The layout version a store file says it has (`PRAGMA user_version`; 0 for a file from before versions)."""
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    return version


def _to_version_1(conn: sqlite3.Connection) -> None:
    """0 -> 1: files from before versions may lack the identity columns and the event sizes; version 1 has both."""
    _add_identity_columns(conn)
    _add_event_sizes(conn)


SCHEMA_VERSION = 1
"""The layout this code writes, kept in the file's `PRAGMA user_version` (see the module docstring, Versions)."""
_MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _to_version_1}  # N: the step from N-1 to N


def _prepare(conn: sqlite3.Connection, path: str, synchronous: str, busy_timeout: float) -> int:
    """Switch `conn` to WAL and create the schema; the compacted revision.

    Several processes may open a new file at once. Switching the journal mode and recovering a WAL file can fail
    with SQLITE_BUSY without waiting in SQLite's busy handler, so the whole preparation is retried (it is
    idempotent: `IF NOT EXISTS` statements in one transaction) until `busy_timeout` has passed.
    """
    deadline = time.monotonic() + busy_timeout
    pause = 0.001
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal" and path != ":memory:":
                raise errors.Unavailable(f"sqlite store {path}: cannot use WAL mode (got {mode!r})")
            conn.execute(f"PRAGMA synchronous={synchronous}")
            conn.execute("PRAGMA secure_delete=FAST")
            conn.execute("BEGIN IMMEDIATE")
            found = schema_version(conn)
            if found > SCHEMA_VERSION:
                conn.execute("ROLLBACK")
                raise errors.Refused(
                    f"sqlite store {path} has schema version {found}, newer than this devplace's {SCHEMA_VERSION}:"
                    " run the devplace that wrote it, or restore a backup taken before the upgrade"
                )
            for statement in _SCHEMA:
                conn.execute(statement)
            for version in range(found + 1, SCHEMA_VERSION + 1):
                _MIGRATIONS[version](conn)
            if found != SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
            compacted: int = conn.execute(_COMPACTED).fetchone()[0]
            return compacted
        except sqlite3.OperationalError as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if not _is_busy(e):
                raise
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)  # blocking on purpose: opening is synchronous, like SQLite's own busy handler
            pause = min(pause * 2, 0.05)


def _open_failure(path: str, error: sqlite3.Error) -> str:
    """Why the store file could not be opened, naming the path it resolved to (SQLite's own text, `unable to open
    database file`, names neither the file nor the reason) and a missing directory, the usual reason."""
    if path == ":memory:":
        return f"cannot open sqlite store {path}: {error}"
    resolved = os.path.abspath(path)
    where = path if resolved == path else f"{path} ({resolved})"
    directory = os.path.dirname(resolved)
    if not os.path.isdir(directory):
        return f"cannot open sqlite store {where}: {error}: directory {directory} does not exist"
    return f"cannot open sqlite store {where}: {error}"


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
        history_bytes: int | None = base.DEFAULT_HISTORY_BYTES,
        max_object_bytes: int = base.MAX_OBJECT_BYTES,
    ) -> None:
        """Open (creating if needed) the store file at `path`.

        `history_limit` keeps at most about that many events for watch replay, `history_bytes` about that many bytes
        of them (older ones are compacted in batches); None keeps everything until `compact` is called.
        `max_object_bytes` bounds one object's JSON. `poll_interval` is how often open watches look for other
        processes' writes; `busy_timeout` how long an operation waits for another process's lock (off the loop).
        """
        if synchronous.upper() not in _SYNCHRONOUS:
            raise errors.Invalid.field("synchronous", f"{synchronous!r} is not one of {', '.join(_SYNCHRONOUS)}")
        if poll_interval <= 0:
            raise errors.Invalid.field("poll_interval", "must be positive")
        if history_limit is not None and history_limit < 1:
            raise errors.Invalid.field("history_limit", "must be at least 1 (or None for no limit)")
        if history_bytes is not None and history_bytes < 1:
            raise errors.Invalid.field("history_bytes", "must be at least 1 (or None for no limit)")
        if max_object_bytes < 1:
            raise errors.Invalid.field("max_object_bytes", "must be at least 1")
        self._path = os.fspath(path)
        self._clock = clock or SystemClock()
        self._poll_interval = poll_interval
        self._busy_ms = max(0, round(busy_timeout * 1000))
        self._history_limit = history_limit
        self._compact_batch = 0 if history_limit is None else max(1, min(1024, history_limit // 8))
        self._history_bytes = history_bytes
        # Bytes written between looks at history's size, and compacted below the bound at each: a compaction deletes
        # about that much (4 MiB of small events took ~13 ms on the loop).
        self._bytes_batch = 0 if history_bytes is None else min(_BYTES_BATCH, history_bytes // 8)
        self._unchecked_bytes = 0  # bytes this store wrote since it last looked at the history's size
        self._max_object_bytes = max_object_bytes
        self._watchers: set[_SqliteWatch] = set()
        self._poller: asyncio.Task[None] | None = None
        self._poll_version: int | None = None  # data_version when the poller last looked (None: not yet)
        self._lock = asyncio.Lock()  # one operation on the connection at a time
        self._worker: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False
        try:
            conn = sqlite3.connect(self._path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise errors.Unavailable(_open_failure(self._path, e)) from e
        self._conn = conn
        try:
            self._compacted_hint: int = _prepare(conn, self._path, synchronous.upper(), busy_timeout)
            conn.execute("PRAGMA busy_timeout = 0")  # on the loop, never wait; waits happen in the worker thread
        except sqlite3.Error as e:
            conn.close()
            raise errors.Unavailable(_open_failure(self._path, e)) from e
        except BaseException:
            conn.close()
            raise
        self._cur = conn.cursor()

    @property
    def path(self) -> str:
        return self._path

    # -- running an operation ---------------------------------------------------------------------------------

    async def _run(self, op: Callable[..., _T], *args: Any) -> _T:
        """`op(cursor, *args)` with the connection to itself (see the module docstring): on the loop when SQLite
        does not make it wait, else again, whole, in the worker thread. A `_Written` result is offered to the
        watchers before the next operation can start. Whatever `op` raises rolls its transaction back; an sqlite
        error becomes `Unavailable`."""
        self._check_open()
        await self._lock.acquire()
        release = True
        try:
            self._check_open()
            try:
                result = self._attempt(op, args)
            except sqlite3.OperationalError as e:
                if not _is_busy(e):
                    raise
                loop = asyncio.get_running_loop()
                waiting = loop.run_in_executor(self._thread(), self._attempt_waiting, op, args)
                try:
                    result = await asyncio.shield(waiting)
                except asyncio.CancelledError:
                    release = False  # the thread holds the connection: the lock goes when it is done
                    waiting.add_done_callback(self._abandoned)
                    raise
            if isinstance(result, _Written):
                self._committed(result)
            return result
        except sqlite3.Error as e:
            raise self._unavailable(e) from e
        finally:
            if release:
                self._lock.release()

    def _attempt(self, op: Callable[..., _T], args: tuple[Any, ...]) -> _T:
        try:
            return op(self._cur, *args)
        except BaseException:
            self._rollback()
            raise

    def _attempt_waiting(self, op: Callable[..., _T], args: tuple[Any, ...]) -> _T:
        """In the worker thread: `op` with SQLite's busy handler waiting up to `busy_timeout` for the locks."""
        cur = self._cur
        cur.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        try:
            return self._attempt(op, args)
        finally:
            cur.execute("PRAGMA busy_timeout = 0")

    def _abandoned(self, done: asyncio.Future[Any]) -> None:
        """The end of an operation whose caller was cancelled while the worker thread ran it."""
        try:
            if not done.cancelled() and done.exception() is None and isinstance(done.result(), _Written):
                self._committed(done.result())
        finally:
            self._lock.release()

    def _thread(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._worker is None:
            self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"sqlite-store {self._path}")
        return self._worker

    def _rollback(self) -> None:
        try:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the connection is unusable; the failure that brought us here is what the caller sees

    # -- writes ---------------------------------------------------------------------------------------------

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        kind, namespace, name = base.key_fields(obj)
        spec = obj.get("spec")
        spec_json = None if spec is None else base.encode_json(spec).decode()
        uid = str(uuid.uuid4())
        created = base.rfc3339(self._clock.now())
        written = await self._run(
            _create, kind, namespace, name, obj, spec, spec_json, uid, created, self._max_object_bytes
        )
        result: dict[str, Any] = orjson.loads(written.body)
        return result

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        kind, namespace, name = base.key_fields(obj)
        expected = base.resource_version_of(obj)
        spec = obj.get("spec")
        spec_json = None if spec is None else base.encode_json(spec).decode()
        written = await self._run(
            _update, kind, namespace, name, expected, obj, spec, spec_json, self._max_object_bytes
        )
        result: dict[str, Any] = orjson.loads(written.body)
        return result

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        written = await self._run(_delete, Key(kind, namespace or "", name), resource_version)
        return _decode(written.body)

    async def compact(self, revision: int) -> None:
        self._compacted_hint = await self._run(_compact, revision)

    async def load(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create `obj` as it is, its uid, creationTimestamp, generation and every other field kept; only its
        resourceVersion is this store's next revision (`devplace store import`). `AlreadyExists` as `create`."""
        kind, namespace, name = base.key_fields(obj)
        written = await self._run(_load, Key(kind, namespace, name), obj, self._max_object_bytes)
        result: dict[str, Any] = orjson.loads(written.body)
        return result

    async def dump(self) -> tuple[int, list[dict[str, Any]]]:
        """Every object of every kind, in (kind, namespace, name) order, and the revision, in one snapshot."""
        revision, rows = await self._run(_dump)
        return revision, [_decode(row[0]) for row in rows]

    def _committed(self, written: _Written) -> None:
        """Right after a local commit, with the connection still ours: offer it, compact when history is long."""
        for watcher in self._watchers:
            watcher.offer(written)
        limit = self._history_limit
        if limit is not None and written.revision - self._compacted_hint > limit + self._compact_batch:
            try:  # on the loop, busy timeout zero: when another process writes, compaction waits for the next write
                self._compacted_hint = self._attempt(_compact, (written.revision - limit,))
            except (sqlite3.Error, errors.DevplaceError):
                pass  # the write itself is committed; compaction is retried after the next one
        if self._history_bytes is not None:
            self._unchecked_bytes += written.size
            if self._unchecked_bytes > self._bytes_batch:
                try:  # as above: on the loop, never waiting
                    self._compacted_hint = self._attempt(_compact_bytes, (self._history_bytes, self._bytes_batch))
                    self._unchecked_bytes = 0
                except (sqlite3.Error, errors.DevplaceError):
                    pass

    # -- reads ----------------------------------------------------------------------------------------------

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        body = await self._run(_get, kind, namespace or "", name)
        if body is None:
            raise errors.NotFound(f"{Key(kind, namespace or '', name)} not found")
        return _decode(body)

    async def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None, *, fields: str | None = None
    ) -> ObjectList:
        self._check_open()
        filters = base.parse_filters(kind, namespace, selector, fields)
        if namespace is None and filters.fields is not None:
            namespace = filters.fields.exact("metadata.namespace")  # narrows the scan; the filter still applies
        name = None if filters.fields is None else filters.fields.exact("metadata.name")
        revision, rows = await self._run(_list, kind, namespace, name)
        try:
            items: list[dict[str, Any]] = [orjson.loads(row[0]) for row in rows]
        except orjson.JSONDecodeError:  # a body from before orjson (NaN, lone surrogates): the tolerant decoder
            items = [_decode(row[0]) for row in rows]
        if filters.labels is not None or filters.fields is not None:
            items = [item for item in items if filters.matches(item)]
        return ObjectList(items, revision)

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
        """`base.Store.list_page`: the rows' bodies as they are, read in one transaction until the page is cut."""
        self._check_open()
        base.PageCut(after, limit, max_bytes)  # refuses bad bounds before any read
        filters = base.parse_filters(kind, namespace, selector, fields)
        if namespace is None and filters.fields is not None:
            namespace = filters.fields.exact("metadata.namespace")  # narrows the scan; the filter still applies
        name = None if filters.fields is None else filters.fields.exact("metadata.name")
        return await self._run(_list_page, kind, namespace, name, after, limit, max_bytes, filters)

    async def revision(self) -> int:
        return await self._run(_head)

    def _read_events(self, cur: sqlite3.Cursor, after: int | None, kind: str | None, namespace: str | None) -> _Read:
        """Events after `after` (the head when None), filtered by kind and namespace, in one snapshot; `Gone` when
        compacted past. Also gives the poller its first `data_version`, read before any watcher's first read."""
        sql = "SELECT revision, type, body FROM events WHERE revision > ?"
        params: list[Any] = [after]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        if namespace is not None:
            sql += " AND namespace = ?"
            params.append(namespace)
        sql += f" ORDER BY revision LIMIT {_REPLAY_PAGE}"
        cur.execute("BEGIN")
        if self._poll_version is None:
            self._poll_version = cur.execute(_DATA_VERSION).fetchone()[0]
        compacted: int = cur.execute(_COMPACTED).fetchone()[0]
        head: int = cur.execute(_HEAD).fetchone()[0]
        if after is None:
            after = params[0] = head
        rows: _Rows = []
        page_bytes = 0
        if after < head:
            for row in cur.execute(sql, params):
                rows.append(row)
                page_bytes += len(row[2])
                if page_bytes >= _REPLAY_BYTES:
                    break
        cur.execute("COMMIT")  # also ends the query when the page stopped early
        if after < compacted:
            raise errors.Gone(
                f"revision {after} has been compacted (oldest available is {compacted + 1}); relist and watch again"
            )
        if after > head:
            raise base.future_revision(after, head)
        full = len(rows) == _REPLAY_PAGE or page_bytes >= _REPLAY_BYTES
        return _Read(after, rows, rows[-1][0] if full else max(head, after), full, head)

    def _data_version_changed(self, cur: sqlite3.Cursor) -> bool:
        version: int = cur.execute(_DATA_VERSION).fetchone()[0]
        changed = self._poll_version is not None and version != self._poll_version
        self._poll_version = version
        return changed

    # -- watch ----------------------------------------------------------------------------------------------

    def watch(
        self,
        kind: str | None = None,
        namespace: str | None = None,
        *,
        since: int | None = None,
        selector: str | None = None,
        fields: str | None = None,
    ) -> _SqliteWatch:
        return _SqliteWatch(self, kind, namespace, since, selector, fields)

    def _register(self, watcher: _SqliteWatch) -> None:
        self._watchers.add(watcher)
        if self._poller is None or self._poller.done():  # none yet, or the last one ended on an error
            self._poll_version = None  # the first read of a watcher (or the poller) takes it, before any watcher reads
            self._poller = asyncio.get_running_loop().create_task(self._poll(), name=f"sqlite poller {self._path}")

    def _unregister(self, watcher: _SqliteWatch) -> None:
        self._watchers.discard(watcher)
        if not self._watchers:
            self._stop_poller()

    def _stop_poller(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            self._poller = None

    async def _poll(self) -> None:
        """The store's one poller: wake every watcher when another connection committed (see the module doc)."""
        try:
            while True:
                await asyncio.sleep(self._poll_interval)
                if await self._run(self._data_version_changed):
                    for watcher in self._watchers:
                        watcher.reread()
        except errors.DevplaceError as e:
            for watcher in list(self._watchers):
                watcher.fail(e)

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def close(self) -> None:
        """End every open watch with `Unavailable`, then close the file (after an operation the worker thread is
        running, which ends within `busy_timeout`)."""
        if self._closed:
            return
        self._closed = True
        for watcher in list(self._watchers):
            watcher.fail(errors.Unavailable(f"sqlite store {self._path} is closed"))
        self._stop_poller()
        async with self._lock:
            self._conn.close()
        if self._worker is not None:
            self._worker.shutdown(wait=False)

    def _check_open(self) -> None:
        if self._closed:
            raise errors.Unavailable(f"sqlite store {self._path} is closed")

    def _unavailable(self, e: sqlite3.Error) -> errors.Unavailable:
        if self._closed:
            return errors.Unavailable(f"sqlite store {self._path} is closed")
        return errors.Unavailable(f"sqlite store {self._path}: {e}")


# -- the operations (each runs with the connection to itself, on the loop or in the worker thread) -------------


def _create(
    cur: sqlite3.Cursor,
    kind: str,
    namespace: str,
    name: str,
    obj: Mapping[str, Any],
    spec: Any,
    spec_json: str | None,
    uid: str,
    created: str,
    limit: int,
) -> _Written:
    cur.execute("BEGIN IMMEDIATE")
    revision = cur.execute(_HEAD).fetchone()[0] + 1
    stamped = base.stamped(obj, revision=revision, uid=uid, created=created, generation=1)
    encoded = _encode_body(stamped, spec, spec_json)
    if len(encoded) > limit:
        base.check_object_size(Key(kind, namespace, name), len(encoded), limit)
    body = encoded.decode()
    try:
        cur.execute(_INSERT_OBJECT, (kind, namespace, name, revision, body, uid, created, spec_json))  # + its event
    except sqlite3.IntegrityError as e:
        raise errors.AlreadyExists(f"{Key(kind, namespace, name)} already exists") from e
    cur.execute("COMMIT")
    return _Written(revision, "ADDED", stamped, body, len(encoded))


def _load(cur: sqlite3.Cursor, key: Key, obj: Mapping[str, Any], limit: int) -> _Written:
    cur.execute("BEGIN IMMEDIATE")
    revision = cur.execute(_HEAD).fetchone()[0] + 1
    meta = dict(obj.get("metadata") or {})
    meta["resourceVersion"] = str(revision)
    loaded = {**obj, "metadata": meta}
    spec = obj.get("spec")
    spec_json = None if spec is None else base.encode_json(spec).decode()
    encoded = base.encode_json(loaded)
    base.check_object_size(key, len(encoded), limit)
    body = encoded.decode()
    row = (key.kind, key.namespace, key.name, revision, body, meta.get("uid"), meta.get("creationTimestamp"))
    try:
        cur.execute(
            "INSERT INTO objects (kind, namespace, name, revision, body, uid, created, generation, spec)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*row, _generation_of(meta), spec_json),
        )
    except sqlite3.IntegrityError as e:
        raise errors.AlreadyExists(f"{key} already exists") from e
    cur.execute("COMMIT")
    return _Written(revision, "ADDED", loaded, body, len(encoded))


def _dump(cur: sqlite3.Cursor) -> tuple[int, list[tuple[str]]]:
    cur.execute("BEGIN")
    revision: int = cur.execute(_HEAD).fetchone()[0]
    rows: list[tuple[str]] = cur.execute("SELECT body FROM objects ORDER BY kind, namespace, name").fetchall()
    cur.execute("COMMIT")
    return revision, rows


def _update(
    cur: sqlite3.Cursor,
    kind: str,
    namespace: str,
    name: str,
    expected: int,
    obj: Mapping[str, Any],
    spec: Any,
    spec_json: str | None,
    limit: int,
) -> _Written:
    cur.execute("BEGIN IMMEDIATE")
    row = cur.execute(_ROW_FOR_UPDATE, (kind, namespace, name)).fetchone()
    if row is None or row[0] != expected:
        base.check_revision(Key(kind, namespace, name), None if row is None else row[0], expected)
    _, rowid, uid, created, generation, old_spec_json, head = row
    generation = generation or 1
    if not _same_spec(old_spec_json, spec_json, spec):
        generation += 1
    revision = head + 1
    stamped = base.stamped(obj, revision=revision, uid=uid, created=created, generation=generation)
    encoded = _encode_body(stamped, spec, spec_json)
    if len(encoded) > limit:
        base.check_object_size(Key(kind, namespace, name), len(encoded), limit)
    body = encoded.decode()
    cur.execute(_UPDATE_OBJECT, (revision, body, generation, spec_json, rowid))  # + its event, by trigger
    cur.execute("COMMIT")
    return _Written(revision, "MODIFIED", stamped, body, len(encoded))


def _delete(cur: sqlite3.Cursor, key: Key, resource_version: str | None) -> _Written:
    cur.execute("BEGIN IMMEDIATE")
    row = cur.execute(_ROW_FOR_DELETE, (key.kind, key.namespace, key.name)).fetchone()
    base.check_delete_revision(key, None if row is None else row[0], resource_version)
    _, rowid, old_body, head = row
    revision = head + 1
    gone: dict[str, Any] = _decode(old_body)
    gone["metadata"]["resourceVersion"] = str(revision)
    encoded = base.encode_json(gone)
    body = encoded.decode()
    cur.execute(_DELETE_OBJECT, (rowid,))
    size = len(encoded)
    cur.execute(_INSERT_EVENT, (revision, "DELETED", key.kind, key.namespace, key.name, size, size, body))
    cur.execute("COMMIT")
    return _Written(revision, "DELETED", gone, body, size)


def _compact(cur: sqlite3.Cursor, revision: int) -> int:
    """Forget events up to `revision` (never the newest); the compacted revision. `Invalid` beyond the head."""
    cur.execute("BEGIN IMMEDIATE")
    head = cur.execute(_HEAD).fetchone()[0]
    target = base.check_compact_target(revision, head)
    compacted: int = cur.execute(_COMPACTED).fetchone()[0]
    if target > compacted:
        _forget(cur, target, head)
        compacted = target
    cur.execute("COMMIT")
    return compacted


def _compact_bytes(cur: sqlite3.Cursor, limit: int, batch: int) -> int:
    """When history holds over `limit` bytes, forget the oldest events down to `limit - batch` bytes (never the
    newest); the compacted revision."""
    cur.execute("BEGIN IMMEDIATE")
    compacted: int = cur.execute(_COMPACTED).fetchone()[0]
    held: int = cur.execute(_HISTORY_BYTES).fetchone()[0]
    if held > limit:
        head = cur.execute(_HEAD).fetchone()[0]
        # Totals grow with revisions: the first row whose total leaves at most the target after it is the cut.
        threshold = cur.execute(_NEWEST_TOTAL).fetchone()[0] - (limit - batch)
        row = cur.execute(
            "SELECT revision FROM events WHERE total >= ? AND revision < ? ORDER BY revision LIMIT 1", (threshold, head)
        ).fetchone()
        target = head - 1 if row is None else row[0]
        if target > compacted:
            _forget(cur, target, head)
            compacted = target
    cur.execute("COMMIT")
    return compacted


def _forget(cur: sqlite3.Cursor, target: int, head: int) -> None:
    """Delete the events up to `target` but the newest, in the caller's transaction, keeping `meta` in step."""
    cut = cur.execute(
        "SELECT total FROM events WHERE revision <= ? AND revision < ? ORDER BY revision DESC LIMIT 1", (target, head)
    ).fetchone()
    if cut is not None:
        cur.execute("DELETE FROM events WHERE revision <= ? AND revision < ?", (target, head))
        cur.execute("UPDATE meta SET value = ? WHERE key = 'compacted_total'", (cut[0],))
    cur.execute("UPDATE meta SET value = ? WHERE key = 'compacted'", (target,))


def _get(cur: sqlite3.Cursor, kind: str, namespace: str, name: str) -> str | None:
    row = cur.execute(_GET, (kind, namespace, name)).fetchone()
    return None if row is None else str(row[0])


def _list(cur: sqlite3.Cursor, kind: str, namespace: str | None, name: str | None) -> tuple[int, list[tuple[str]]]:
    """The bodies of one kind (in one namespace, of one name) in key order, and the revision, in one snapshot."""
    sql = "SELECT body FROM objects WHERE kind = ?"
    params: list[str] = [kind]
    if namespace is not None:
        sql += " AND namespace = ?"
        params.append(namespace)
    if name is not None:
        sql += " AND name = ?"
        params.append(name)
    cur.execute("BEGIN")
    revision: int = cur.execute(_HEAD).fetchone()[0]
    rows: list[tuple[str]] = cur.execute(sql + " ORDER BY namespace, name", params).fetchall()
    cur.execute("COMMIT")
    return revision, rows


def _list_page(
    cur: sqlite3.Cursor,
    kind: str,
    namespace: str | None,
    name: str | None,
    after: tuple[str, str] | None,
    limit: int,
    max_bytes: int,
    filters: base.Filters,
) -> base.EncodedPage:
    """One page (`base.Store.list_page`) in one snapshot: the rows after `after` in key order, stepped one at a time
    until the page is cut, then the count of those left. A body is decoded only to match a selector, or when it is
    from before orjson and may hold NaN (written again as JSON, as `list` then a response would)."""
    where = "kind = ?"
    params: list[str] = [kind]
    if namespace is not None:
        where += " AND namespace = ?"
        params.append(namespace)
    if name is not None:
        where += " AND name = ?"
        params.append(name)

    def beyond(key: tuple[str, str] | None) -> tuple[str, list[str]]:
        """The rows after `key`; within one namespace, by name (a row value there would sort the rows again)."""
        if key is None or (namespace is not None and key[0] < namespace):
            return where, params
        if namespace is None:
            return f"{where} AND (namespace, name) > (?, ?)", [*params, *key]
        return (f"{where} AND name > ?", [*params, key[1]]) if key[0] == namespace else (f"{where} AND 0", params)

    selecting = filters.labels is not None or filters.fields is not None
    cut = base.PageCut(after, limit, max_bytes)
    cur.execute("BEGIN")
    revision: int = cur.execute(_HEAD).fetchone()[0]
    sql, args = beyond(after)
    rows = cur.execute(f"SELECT namespace, name, body FROM objects WHERE {sql} ORDER BY namespace, name", args)
    while not cut.done():  # checked before stepping: a row is read only when the page may take it
        row = rows.fetchone()
        if row is None:
            break
        ns, row_name, text = row
        body = text.encode()
        obj = _decode(text) if selecting else None
        if b"NaN" in body or b"Infinity" in body:  # a body from before orjson may hold them; JSON has no such numbers
            body = base.encode_json(obj if obj is not None else _decode(text))
        if obj is not None and not filters.matches(obj):
            cut.skip(ns, row_name, len(body))
            continue
        if not cut.fits(len(body)):
            break
        cut.take(ns, row_name, body)
    sql, args = beyond(cut.last)
    remaining: int = cur.execute(f"SELECT count(*) FROM objects WHERE {sql}", args).fetchone()[0]
    cur.execute("COMMIT")
    return cut.page(revision, remaining)


def _head(cur: sqlite3.Cursor) -> int:
    head: int = cur.execute(_HEAD).fetchone()[0]
    return head


class _SqliteWatch(base.BaseWatch):
    """One watch of a `SqliteStore` (see the module docstring): registered on entry, fed at commit, filtered then.

    State: `_last` is the revision everything up to which is accounted for (delivered, or buffered in `_replay`);
    `_offered` the last revision offered in-process, to notice a gap (another process's write); `_stale` says the
    file must be read (a gap, an overflow, the poller saw another connection commit); `_more` that a replay page
    was full.
    """

    def __init__(
        self,
        store: SqliteStore,
        kind: str | None,
        namespace: str | None,
        since: int | None,
        selector: str | None,
        fields: str | None,
    ) -> None:
        super().__init__(kind, namespace, since, selector, fields)
        self._store = store
        self._filters = Filters()
        self._selects = False  # has a label or field selector, which the file read does not apply
        self._last = -1
        self._offered: int | None = None
        self._stale = False
        self._more = False
        self._replay: deque[Event] = deque()
        self._pending: deque[tuple[int, EventType, str]] = deque()
        self._pending_bytes = 0
        self._waiter: asyncio.Future[None] | None = None
        self._error: errors.DevplaceError | None = None

    async def __aenter__(self) -> _SqliteWatch:
        store = self._store
        store._check_open()
        kind, namespace, selector, fields = self._args
        self._filters = base.parse_filters(kind, namespace, selector, fields)
        self._selects = self._filters.labels is not None or self._filters.fields is not None
        since = base.watch_since(self._since)
        store._register(self)  # before the first read: a write committed after it is offered or read, never lost
        try:
            read = await store._run(store._read_events, since, kind, namespace)
        except BaseException:
            store._unregister(self)
            raise
        self._revision = read.after
        self._apply(read)
        self._entered = True
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._entered = False
        self._store._unregister(self)
        self._pending.clear()
        self._pending_bytes = 0
        self._replay.clear()

    async def __anext__(self) -> Event:
        self._require_entered()
        store = self._store
        kind, namespace, _, _ = self._args
        while True:
            if self._error is not None:
                raise self._error
            if self._replay:
                return self._replay.popleft()
            if self._stale or self._more:
                self._stale = False
                try:
                    read = await store._run(store._read_events, self._last, kind, namespace)
                except BaseException:
                    self._stale = True
                    raise
                self._apply(read)
                continue
            pending = self._pending
            while pending:
                revision, type_, body = pending.popleft()
                self._pending_bytes -= len(body)
                if revision > self._last:
                    self._last = revision
                    return Event(type_, _decode(body), revision, body)
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def _apply(self, read: _Read) -> None:
        for revision, type_, body in read.rows:
            obj = _decode(body)
            if not self._selects or self._filters.matches(obj):
                self._replay.append(Event(type_, obj, revision, body))
        self._last = read.upto
        self._more = read.more
        # Every local write up to the head was offered before this read (offers happen under the store's lock).
        if self._offered is None or read.head > self._offered:
            self._offered = read.head

    def offer(self, written: _Written) -> None:
        """A local commit: queue it when it is selected; a revision that does not follow the last one offered means
        another process wrote in between, so the watcher reads the file instead."""
        if self._stale:
            return  # the file read to come covers it
        offered = self._offered
        if offered is not None and written.revision != offered + 1:
            self.reread()
            return
        self._offered = written.revision
        if not self._filters.matches(written.obj):
            return
        if self._pending and (
            len(self._pending) >= _PENDING_LIMIT or self._pending_bytes + len(written.body) > _PENDING_BYTES
        ):
            self.reread()
            return
        self._pending.append((written.revision, written.type, written.body))
        self._pending_bytes += len(written.body)
        self._wake()

    def reread(self) -> None:
        self._stale = True
        self._pending.clear()
        self._pending_bytes = 0
        self._wake()

    def fail(self, error: errors.DevplaceError) -> None:
        self._error = error
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


def _encode_body(stamped: dict[str, Any], spec: Any, spec_json: str | None) -> bytes:
    """The body's JSON, embedding the already encoded spec as it is (encoded once for both columns).

    `stamped` keeps the caller's spec, so watchers can match field selectors on it."""
    if spec_json is None:
        return base.encode_json(stamped)
    stamped["spec"] = orjson.Fragment(spec_json)
    try:
        return base.encode_json(stamped)
    finally:
        stamped["spec"] = spec


def _same_spec(old_json: str | None, new_json: str | None, new: Any) -> bool:
    """The generation rule on encoded specs: equal JSON texts are equal specs; different texts may still be equal
    values (keys in another order), so then the old spec is decoded and compared."""
    if old_json == new_json:
        return True
    if old_json is None or new_json is None:
        return False
    return bool(_decode(old_json) == new)


def _generation_of(meta: Mapping[str, Any]) -> int:
    try:
        return int(meta.get("generation") or 1)
    except (TypeError, ValueError):
        return 1


def _add_event_sizes(conn: sqlite3.Connection) -> None:
    """Give an `events` table from before `size` and `total` those columns (filled from the bodies, totals counted
    from the oldest row kept) and the triggers that fill them, in the caller's transaction."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(events)")}
    if "size" in present and "total" in present:
        return
    for column in ("size", "total"):
        if column not in present:
            conn.execute(f"ALTER TABLE events ADD COLUMN {column} INTEGER")
    conn.execute("UPDATE events SET size = length(CAST(body AS BLOB))")
    conn.execute(
        "UPDATE events SET total = running.total FROM"
        " (SELECT revision, sum(size) OVER (ORDER BY revision) AS total FROM events) AS running"
        " WHERE events.revision = running.revision"
    )
    conn.execute("UPDATE meta SET value = 0 WHERE key = 'compacted_total'")
    for trigger in ("objects_added", "objects_modified"):
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    for statement in _TRIGGERS:
        conn.execute(statement)


def _add_identity_columns(conn: sqlite3.Connection) -> None:
    """Bring an `objects` table from before the identity columns up to date, in the caller's transaction."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(objects)")}
    missing = [column for column in _IDENTITY_COLUMNS if column not in present]
    if not missing:
        return
    for column in missing:
        conn.execute(f"ALTER TABLE objects ADD COLUMN {column} {_IDENTITY_COLUMNS[column]}")
    rows = conn.execute("SELECT rowid, body FROM objects").fetchall()
    for rowid, body in rows:
        obj = _decode(body)
        meta = obj.get("metadata") or {}
        spec = obj.get("spec")
        if spec is None:
            spec_json = None
        else:
            try:
                spec_json = base.encode_json(spec).decode()
            except errors.Invalid:  # written by the stdlib encoder (lone surrogates): only ever compared, decoded
                spec_json = json.dumps(spec, separators=(",", ":"))
        conn.execute(
            "UPDATE objects SET uid = ?, created = ?, generation = ?, spec = ? WHERE rowid = ?",
            (meta.get("uid"), meta.get("creationTimestamp"), _generation_of(meta), spec_json, rowid),
        )
