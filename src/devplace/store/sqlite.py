"""SQLite Store: the embedded default backend, one file in WAL mode, shareable by several processes.

Layout: `objects` holds the current objects, `events` the write log that watches replay, `meta` the compacted revision.
Every write is one `BEGIN IMMEDIATE` transaction that reads the newest event revision, writes the object row and
appends the event carrying the same body (for creates and updates a trigger on `objects` appends it). So revisions
are global, contiguous and monotonic across every process sharing the file (SQLite's write lock serializes them),
and a write is there entirely or not at all. When a write returns, its COMMIT has reached the WAL file: it survives
kill -9 of the process. With `synchronous="NORMAL"` (the default) a power loss may drop the last commits but never
corrupts the file; `"FULL"` also keeps those.

Bodies are compact UTF-8 JSON text (`base.encode_json`), readable with any SQLite shell. Next to the body, an object
row keeps what an update needs of the old object in columns: its uid, creationTimestamp, generation and the JSON
text of its spec. So a CAS update never decodes the old body: the revision check reads the `revision` column, the
identity fields are copied from theirs, and the generation rule ("bumps when spec changes") compares the new spec's
JSON text with the stored one, decoding the old spec only when the texts differ (equal values may be written in
another key order). Files written before these columns existed get them, filled from the bodies, when first opened;
processes of that earlier version must not write to the file afterwards (the triggers make their writes fail).

Concurrency: the sqlite calls run synchronously on the event loop thread (a write costs a few tens of microseconds,
less than a hop to a worker thread would) and nothing awaits inside a transaction, so the operations of one store
are atomic with respect to each other. Writers in other processes wait for the write lock up to `busy_timeout`, blocking
their loop meanwhile; past it the operation raises `Unavailable`, as does any operation after `close()`.

Speed: a CAS update is one transaction of two statements (read the identity columns and the head revision, write
the row; the trigger appends the event). The spec is encoded once, before the transaction, and embedded as it is
in the body, which is encoded once, for both rows; the caller's copy is decoded from it, cheaper than any deep copy.
Nothing returned shares a dict with the caller's argument or with another result.

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
import contextlib
import json
import os
import sqlite3
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import orjson

from devplace import errors
from devplace.api import selectors
from devplace.clocks import Clock, SystemClock
from devplace.store import base
from devplace.store.base import Event, EventType, Key, ObjectList

__all__ = ["SqliteStore"]


def _decode(body: str) -> dict[str, Any]:
    obj: dict[str, Any] = base.decode_json(body)
    return obj


_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
# The identity columns come after `body` so that files from before they existed get the same shape by ALTER TABLE.
_IDENTITY_COLUMNS = {"uid": "TEXT", "created": "TEXT", "generation": "INTEGER", "spec": "TEXT"}
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS objects (kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,"
    " revision INTEGER NOT NULL, body TEXT NOT NULL, "
    + ", ".join(f"{column} {type_}" for column, type_ in _IDENTITY_COLUMNS.items())
    + ", PRIMARY KEY (kind, namespace, name))",
    "CREATE TABLE IF NOT EXISTS events (revision INTEGER PRIMARY KEY, type TEXT NOT NULL, kind TEXT NOT NULL,"
    " namespace TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL)",
    # Creates and updates append their event by trigger, in the statement that writes the row: one statement less
    # per write, and a writer that also appends it (a process of a version before the triggers) fails instead of
    # leaving the identity columns stale. A delete appends its event itself (its body carries the new revision).
    "CREATE TRIGGER IF NOT EXISTS objects_added AFTER INSERT ON objects BEGIN"
    " INSERT INTO events (revision, type, kind, namespace, name, body)"
    " VALUES (NEW.revision, 'ADDED', NEW.kind, NEW.namespace, NEW.name, NEW.body); END",
    "CREATE TRIGGER IF NOT EXISTS objects_modified AFTER UPDATE OF revision ON objects BEGIN"
    " INSERT INTO events (revision, type, kind, namespace, name, body)"
    " VALUES (NEW.revision, 'MODIFIED', NEW.kind, NEW.namespace, NEW.name, NEW.body); END",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO meta (key, value) VALUES ('compacted', 0)",
)
# The newest event is never compacted away, so max(events.revision) is always the store's revision.
_HEAD = "SELECT coalesce(max(revision), 0) FROM events"
_COMPACTED = "SELECT value FROM meta WHERE key = 'compacted'"
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
        """Called right after a local commit, while `obj` is still unshared: match now, decode on delivery.

        Only a matching event (or an overflow) wakes the watcher: a filtered-out event leaves a marker that keeps
        the revisions contiguous and is drained at the next matching event or poll, so a write of one kind does not
        wake every other kind's watcher (each wake costs a data_version query).
        """
        if self.overflowed:
            return
        if len(self.pending) >= _PENDING_LIMIT:
            self.pending.clear()
            self.overflowed = True
        elif base.matches(obj, self.kind, self.namespace, self.selector):
            self.pending.append((revision, type_, body))
        else:
            self.pending.append((revision, None, ""))
            return
        self.wake()

    def wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


def _wake_future(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


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
            conn.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA:
                conn.execute(statement)
            _add_identity_columns(conn)
            conn.execute("COMMIT")
            compacted: int = conn.execute(_COMPACTED).fetchone()[0]
            return compacted
        except sqlite3.OperationalError as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if e.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)  # blocking on purpose: opening is synchronous, like SQLite's own busy handler
            pause = min(pause * 2, 0.05)


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
            self._compacted_hint: int = _prepare(conn, self._path, synchronous.upper(), busy_timeout)
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
        kind, namespace, name = base.key_fields(obj)
        spec = obj.get("spec")
        spec_json = None if spec is None else base.encode_json(spec).decode()
        uid = str(uuid.uuid4())
        created = base.rfc3339(self._clock.now())
        with self._writing() as cur:
            revision = cur.execute(_HEAD).fetchone()[0] + 1
            stamped = _with_spec(
                base.stamped(obj, revision=revision, uid=uid, created=created, generation=1), spec_json
            )
            body = _encode_body(stamped)
            try:
                cur.execute(_INSERT_OBJECT, (kind, namespace, name, revision, body, uid, created, spec_json))  # + event
            except sqlite3.IntegrityError as e:
                raise errors.AlreadyExists(f"{Key(kind, namespace, name)} already exists") from e
            cur.execute("COMMIT")
        self._committed(revision, "ADDED", stamped, body)
        result: dict[str, Any] = orjson.loads(body)
        return result

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        kind, namespace, name = base.key_fields(obj)
        expected = base.resource_version_of(obj)
        spec = obj.get("spec")
        spec_json = None if spec is None else base.encode_json(spec).decode()
        with self._writing() as cur:
            row = cur.execute(_ROW_FOR_UPDATE, (kind, namespace, name)).fetchone()
            if row is None or row[0] != expected:
                base.check_revision(Key(kind, namespace, name), None if row is None else row[0], expected)
            _, rowid, uid, created, generation, old_spec_json, head = row
            generation = generation or 1
            if not _same_spec(old_spec_json, spec_json, spec):
                generation += 1
            revision = head + 1
            stamped = _with_spec(
                base.stamped(obj, revision=revision, uid=uid, created=created, generation=generation), spec_json
            )
            body = _encode_body(stamped)
            cur.execute(_UPDATE_OBJECT, (revision, body, generation, spec_json, rowid))  # + its event, by trigger
            cur.execute("COMMIT")
        # `stamped` shares nested values with the caller's `obj`: watchers match on it now, the caller gets a copy.
        self._committed(revision, "MODIFIED", stamped, body)
        result: dict[str, Any] = orjson.loads(body)
        return result

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        key = Key(kind, namespace or "", name)
        with self._writing() as cur:
            row = cur.execute(_ROW_FOR_DELETE, (key.kind, key.namespace, key.name)).fetchone()
            base.check_delete_revision(key, None if row is None else row[0], resource_version)
            _, rowid, old_body, head = row
            revision = head + 1
            gone: dict[str, Any] = _decode(old_body)
            gone["metadata"]["resourceVersion"] = str(revision)
            body = _encode_body(gone)
            cur.execute(_DELETE_OBJECT, (rowid,))
            cur.execute(_INSERT_EVENT, (revision, "DELETED", key.kind, key.namespace, key.name, body))
            cur.execute("COMMIT")
        self._committed(revision, "DELETED", gone, body)
        return gone

    async def compact(self, revision: int) -> None:
        self._compact(revision)

    def _compact(self, revision: int) -> None:
        with self._writing() as cur:
            head = cur.execute(_HEAD).fetchone()[0]
            compacted = cur.execute(_COMPACTED).fetchone()[0]
            target = min(revision, head)
            if target > compacted:
                cur.execute("DELETE FROM events WHERE revision <= ? AND revision < ?", (target, head))
                cur.execute("UPDATE meta SET value = ? WHERE key = 'compacted'", (target,))
                compacted = target
            cur.execute("COMMIT")
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

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction: `BEGIN IMMEDIATE`, then the body, which must end with COMMIT.

        Whatever the body raises rolls the transaction back: an sqlite error becomes `Unavailable`, anything else
        (`Conflict`, `NotFound`, `AlreadyExists`, a cancellation) goes on as it is.
        """
        self._check_open()
        cur = self._cur
        try:
            cur.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise self._unavailable(e) from e
        try:
            yield cur
        except sqlite3.Error as e:
            self._rollback()
            raise self._unavailable(e) from e
        except BaseException:
            self._rollback()
            raise

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
        try:
            items: list[dict[str, Any]] = [orjson.loads(row[0]) for row in rows]
        except orjson.JSONDecodeError:  # a body from before orjson (NaN, lone surrogates): the tolerant decoder
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
    return base.encode_json(obj).decode()


def _with_spec(stamped: dict[str, Any], spec_json: str | None) -> dict[str, Any]:
    """Put the already encoded spec in place of the caller's, so the body's encoding embeds it as it is.

    The stamped dict is then only good for encoding and for `base.matches` (which reads kind and metadata).
    """
    if spec_json is not None:
        stamped["spec"] = orjson.Fragment(spec_json)
    return stamped


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
