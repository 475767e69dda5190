"""Backups of a SQLite store file, taken while the server runs, and their restore.

`backup_sqlite(path, out)` copies the file with SQLite's online backup API in one step: the copy reads the file in
one read transaction, which in WAL mode never blocks a writer and sees exactly the commits before it began; so the
backup holds every write acknowledged before it started, and none half. The copy is written to a temporary file
beside `out`, switched to rollback-journal mode (one self-contained file, no -wal to forget), checked with
`PRAGMA integrity_check`, flushed to disk and renamed over `out`: `out` is either the old file or the whole backup.

`restore_sqlite(backup, path)` refuses a store in use: it takes SQLite's exclusive lock on `path` (locking mode
EXCLUSIVE, without waiting), which another open connection (a running server, agent or CLI) prevents, and says so;
stop the processes sharing the file first. A restore behind a running server's back would leave it serving the
replaced file's pages from its cache. Holding that lock, the backup is copied into `path` with the backup API, one
SQLite transaction: the store is wholly the old one or wholly the backup, also across a crash. A missing `path` is
created by a temporary file renamed into place. Before any of this the backup is checked (`integrity_check`, the
store's tables, a schema version this code can open: `Refused` naming both versions otherwise); nothing changes
when it fails. The restored file is migrated forward, if it is older, when a store next opens it.

Revisions: a backup is the file, so a restore brings back its revisions and history as they were. Clients that
watched the store past the backup's revision must relist; the server started on it answers their watches `Gone`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from devplace import errors
from devplace.store._open import _sqlite_path
from devplace.store._sqlite import SCHEMA_VERSION, schema_version

_TABLES = ("objects", "events", "meta")


@dataclass(frozen=True)
class FileSummary:
    """What a backup or a restore wrote: the file, its schema version, its objects and its revision."""

    path: str
    schema_version: int
    objects: int
    revision: int


def _connect_existing(path: str, *, read_only: bool, timeout: float = 5.0) -> sqlite3.Connection:
    """A connection to the database at `path`, which must exist (a plain connect would create an empty one)."""
    if not os.path.isfile(path):
        raise errors.NotFound(f"sqlite store {path} ({os.path.abspath(path)}) does not exist")
    mode = "ro" if read_only else "rw"
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode={mode}"
    try:
        return sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as e:
        raise errors.Unavailable(f"cannot open sqlite store {path}: {e}") from e


def _summary(conn: sqlite3.Connection, path: str) -> FileSummary:
    """The checks a backup passes, and what it holds: `Invalid` naming `path` for a file that is not a store."""
    try:
        check = conn.execute("PRAGMA integrity_check").fetchall()
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as e:
        raise errors.Invalid.field(path, f"not a devplace sqlite store: {e}") from e
    if check != [("ok",)]:
        raise errors.Invalid.field(path, f"integrity check failed: {'; '.join(str(row[0]) for row in check[:5])}")
    missing = [table for table in _TABLES if table not in tables]
    if missing:
        raise errors.Invalid.field(path, f"not a devplace sqlite store (no {', '.join(missing)} table)")
    objects: int = conn.execute("SELECT count(*) FROM objects").fetchone()[0]
    revision: int = conn.execute("SELECT coalesce(max(revision), 0) FROM events").fetchone()[0]
    return FileSummary(path, schema_version(conn), objects, revision)


def _fsync(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_to_temporary(source: sqlite3.Connection, out: str) -> str:
    """`source` copied by the backup API into a new file beside `out`, in rollback-journal mode, flushed; its path."""
    directory = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(directory):
        raise errors.Invalid.field(out, f"directory {directory} does not exist")
    temporary = os.path.join(directory, f".{os.path.basename(out)}.partial-{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    target = sqlite3.connect(temporary, isolation_level=None)
    try:
        source.backup(target)  # pages=-1: the whole file in one step, one read transaction of the source
        target.execute("PRAGMA journal_mode=DELETE")
        _summary(target, out)
    except BaseException:
        target.close()
        os.unlink(temporary)
        raise
    target.close()
    _fsync(temporary)
    return temporary


def backup_sqlite(path: str, out: str) -> FileSummary:
    """Copy the store file at `path` to `out` while others may write it (module docstring); what `out` holds."""
    source = _connect_existing(path, read_only=False)
    try:
        try:
            temporary = _copy_to_temporary(source, out)
        except sqlite3.Error as e:
            raise errors.Unavailable(f"backup of sqlite store {path}: {e}") from e
    finally:
        source.close()
    os.replace(temporary, out)
    _fsync(os.path.dirname(os.path.abspath(out)))
    check = _connect_existing(out, read_only=True)
    try:
        return _summary(check, out)
    finally:
        check.close()


def restore_sqlite(backup: str, path: str) -> FileSummary:
    """Replace the store file at `path` with `backup`, atomically, refusing a store in use (module docstring)."""
    source = _connect_existing(backup, read_only=True)
    try:
        summary = _summary(source, backup)
        if summary.schema_version > SCHEMA_VERSION:
            raise errors.Refused(
                f"backup {backup} has schema version {summary.schema_version}, newer than this devplace's"
                f" {SCHEMA_VERSION}: restore it with the devplace that wrote it"
            )
        if not os.path.exists(path):
            for leftover in (f"{path}-wal", f"{path}-shm"):
                if os.path.exists(leftover):
                    raise errors.Refused(f"{leftover} exists without {path}: remove it before restoring")
            temporary = _copy_to_temporary(source, path)
            os.replace(temporary, path)
            _fsync(os.path.dirname(os.path.abspath(path)))
        else:
            _restore_in_place(source, path)
    except sqlite3.Error as e:
        raise errors.Unavailable(f"restore of {backup} into {path}: {e}") from e
    finally:
        source.close()
    return FileSummary(path, summary.schema_version, summary.objects, summary.revision)


def _restore_in_place(source: sqlite3.Connection, path: str) -> None:
    target = _connect_existing(path, read_only=False, timeout=0)
    try:
        target.execute("PRAGMA locking_mode=EXCLUSIVE")  # kept until close: nobody opens the file meanwhile
        try:
            target.execute("BEGIN EXCLUSIVE")
            target.execute("COMMIT")
        except sqlite3.OperationalError as e:
            raise errors.Refused(
                f"sqlite store {path} is in use by another process ({e}): stop the devplace processes that use it"
                " (server, agents, controllers) before restoring"
            ) from e
        source.backup(target)  # one transaction of the target: all of the backup or nothing
    finally:
        target.close()


def sqlite_file(url: str) -> str:
    """The file of a `sqlite:///PATH` store URL (`store._open`'s rule); `Invalid` naming `store` for another URL."""
    if not url.startswith("sqlite://"):
        raise errors.Invalid.field("store", f"{url!r}: backups and restores are of sqlite:///PATH stores")
    return _sqlite_path(url)
