"""Backups of a SQLite store taken while processes write it, and restores that replace the file whole or not at all.

Writers are tests/store/writers.py processes (each prints a revision only after its write returned); each test
stops exactly the processes it started, by PID.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from devplace import errors
from devplace.store import backup_sqlite, restore_sqlite, sqlite_file
from devplace.store._sqlite import SCHEMA_VERSION, SqliteStore
from tests.processes import stop_child
from tests.store.samples import configmap

WRITERS = Path(__file__).with_name("writers.py")
PROCESS_BOUND = 60.0  # seconds a writer may take to report; a bound, not an expectation
WRITERS_COUNT = 4
ACKNOWLEDGED_EACH = 25  # writes each writer reports before the backup starts
WRITES_EACH = 10**9  # writes each writer is asked for: it is still writing while the backup runs, until killed


@pytest.fixture
async def writers(tmp_path: Path) -> AsyncIterator[list[asyncio.subprocess.Process]]:
    """Four writer processes creating ConfigMaps w<i>-0, w<i>-1, ... in one store; killed by PID at teardown."""
    db = tmp_path / "store.db"
    await SqliteStore(str(db)).close()  # created once before the writers race to open it
    started = [
        await asyncio.create_subprocess_exec(
            *(sys.executable, str(WRITERS), "create", str(db), f"w{i}", str(WRITES_EACH)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for i in range(WRITERS_COUNT)
    ]
    yield started
    for proc in started:
        await stop_child(proc, sig=signal.SIGKILL)


async def _acknowledged(proc: asyncio.subprocess.Process, count: int) -> list[int]:
    """The next `count` revisions a writer reports committed."""
    assert proc.stdout is not None
    lines = [await asyncio.wait_for(proc.stdout.readline(), PROCESS_BOUND) for _ in range(count)]
    assert all(lines), "a writer exited before reporting its writes"
    return [int(line) for line in lines]


def _names(path: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM objects")}
    conn.close()
    return names


async def test_a_backup_taken_while_four_processes_write_restores_every_acknowledged_write(
    tmp_path: Path, writers: list[asyncio.subprocess.Process]
) -> None:
    db = str(tmp_path / "store.db")
    acknowledged = {i: await _acknowledged(proc, ACKNOWLEDGED_EACH) for i, proc in enumerate(writers)}
    for proc in writers:  # still writing while the backup runs
        assert proc.returncode is None, (await proc.communicate())[1].decode()

    summary = backup_sqlite(db, str(tmp_path / "backup.db"))

    restored = str(tmp_path / "restored.db")
    assert restore_sqlite(str(tmp_path / "backup.db"), restored) == dataclasses.replace(summary, path=restored)
    store = SqliteStore(restored)
    try:
        held = {item["metadata"]["name"] for item in (await store.list("ConfigMap")).items}
        revision = await store.revision()
    finally:
        await store.close()
    assert {f"w{i}-{n}" for i in acknowledged for n in range(ACKNOWLEDGED_EACH)} <= held
    # one snapshot: every create up to its revision and nothing after (each write here is one create)
    assert len(held) == revision == summary.objects == summary.revision
    assert summary.revision >= WRITERS_COUNT * ACKNOWLEDGED_EACH
    for proc in writers:
        await stop_child(proc, sig=signal.SIGKILL)
    assert summary.schema_version == SCHEMA_VERSION


async def test_a_restore_in_place_brings_the_file_back_to_the_backup(tmp_path: Path) -> None:
    db, backup = str(tmp_path / "store.db"), str(tmp_path / "backup.db")
    store = SqliteStore(db)
    await store.create(configmap("kept"))
    await store.close()
    backup_sqlite(db, backup)
    store = SqliteStore(db)
    await store.create(configmap("after-the-backup"))
    await store.close()

    summary = restore_sqlite(backup, db)

    assert (summary.objects, summary.revision) == (1, 1)
    assert _names(db) == {"kept"}
    store = SqliteStore(db)
    try:
        assert (await store.create(configmap("next")))["metadata"]["resourceVersion"] == "2"
    finally:
        await store.close()


async def test_a_restore_into_a_store_in_use_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    db, backup = str(tmp_path / "store.db"), str(tmp_path / "backup.db")
    first = SqliteStore(db)
    await first.create(configmap("a"))
    backup_sqlite(db, backup)
    await first.create(configmap("b"))
    try:
        with pytest.raises(errors.Refused) as refused:
            restore_sqlite(backup, db)
        assert f"sqlite store {db} is in use by another process" in refused.value.message
        assert {item["metadata"]["name"] for item in (await first.list("ConfigMap")).items} == {"a", "b"}
    finally:
        await first.close()


def test_restoring_a_file_that_is_not_a_store_is_invalid_and_changes_nothing(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    target = tmp_path / "store.db"
    with pytest.raises(errors.Invalid) as invalid:
        restore_sqlite(str(junk), str(target))
    assert invalid.value.message.startswith(f"{junk}: not a devplace sqlite store")
    assert not target.exists()

    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    with pytest.raises(errors.Invalid, match="no objects, events, meta table"):
        restore_sqlite(str(empty), str(target))


def test_a_backup_newer_than_the_code_is_refused_naming_both_versions(tmp_path: Path) -> None:
    db = str(tmp_path / "store.db")
    asyncio.run(SqliteStore(db).close())
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 7}")
    conn.close()
    with pytest.raises(errors.Refused, match=f"schema version {SCHEMA_VERSION + 7}, newer than this devplace's 1"):
        restore_sqlite(db, str(tmp_path / "target.db"))
    assert not (tmp_path / "target.db").exists()


def test_backing_up_a_missing_store_is_not_found_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(errors.NotFound, match="does not exist"):
        backup_sqlite(str(tmp_path / "absent.db"), str(tmp_path / "out.db"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "expected"),
    [("sqlite:///rel/x.db", "rel/x.db"), ("sqlite:////abs/x.db", "/abs/x.db")],
)
def test_sqlite_file_reads_the_path_of_a_sqlite_url(url: str, expected: str) -> None:
    assert sqlite_file(url) == expected


def test_sqlite_file_refuses_other_stores_naming_the_store() -> None:
    with pytest.raises(errors.Invalid, match=r"^store: 'etcd://h:2379': backups and restores are of sqlite"):
        sqlite_file("etcd://h:2379")
