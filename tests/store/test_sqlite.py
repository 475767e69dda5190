"""What only the sqlite backend promises: a file that survives reopening and kill -9, shared by processes.

Subprocesses run tests/store/writers.py; each test stops exactly the processes it started, by PID. A second
`SqliteStore` on the same file in this process is another connection, which is all "another process" means to
SQLite, so most multi-writer cases run without spawning.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.store import Event, open_store
from devplace.store import _sqlite as sqlite_backend
from devplace.store._sqlite import SqliteStore
from tests.processes import stop_child
from tests.store.samples import WATCH_BOUND, configmap, node, pod, rv, take

WRITERS = Path(__file__).with_name("writers.py")
PROCESS_BOUND = 60.0  # seconds a writer process may take; a bound, not an expectation

Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


@pytest.fixture
async def store(db: str, clock: FakeClock) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(db, clock=clock, poll_interval=0.01)
    yield opened
    await opened.close()


@pytest.fixture
async def spawn() -> AsyncIterator[Spawn]:
    """Start writer processes; whatever is still running at teardown is killed, by its PID."""
    started: list[asyncio.subprocess.Process] = []

    async def start(*args: str) -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(WRITERS), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        await stop_child(proc, sig=signal.SIGKILL)


async def finish(proc: asyncio.subprocess.Process) -> list[int]:
    """Wait for a writer to exit cleanly; the revisions it reported committed."""
    out, err = await asyncio.wait_for(proc.communicate(), PROCESS_BOUND)
    assert proc.returncode == 0, err.decode()
    return [int(line) for line in out.split()]


async def history(store: SqliteStore) -> list[Event]:
    """Every event still in the store, from revision 1."""
    head = await store.revision()
    async with store.watch(since=0) as stream:
        return await take(stream, head)


# -- the file -------------------------------------------------------------------------------------------------


async def test_the_file_is_in_wal_mode(store: SqliteStore, db: str) -> None:
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_objects_history_and_revision_survive_reopen(db: str, clock: FakeClock) -> None:
    first = SqliteStore(db, clock=clock)
    a = await first.create(configmap("a", x="1"))
    a["data"]["x"] = "2"
    a = await first.update(a)
    b = await first.create(configmap("b"))
    await first.delete("ConfigMap", "b", "default")
    before = await history(first)
    await first.close()

    again = SqliteStore(db, clock=clock)
    try:
        assert await again.get("ConfigMap", "a", "default") == a
        assert (await again.list("ConfigMap")).items == [a]
        assert await again.revision() == 4
        assert await history(again) == before
        assert rv(await again.create(configmap("b"))) == 5
        assert rv(b) == 3
    finally:
        await again.close()


async def test_compaction_survives_reopen(db: str) -> None:
    first = SqliteStore(db)
    for i in range(4):
        await first.create(configmap(f"o{i}"))
    await first.compact(2)
    await first.close()
    again = SqliteStore(db)
    try:
        with pytest.raises(errors.Gone):
            async with again.watch(since=1):
                pytest.fail("entered a watch whose history was compacted")
        async with again.watch(since=2) as stream:
            assert [e.revision for e in await take(stream, 2)] == [3, 4]
    finally:
        await again.close()


async def test_compacting_everything_keeps_the_revision_counting(db: str) -> None:
    first = SqliteStore(db)
    for i in range(3):
        await first.create(configmap(f"o{i}"))
    await first.compact(3)
    await first.close()
    again = SqliteStore(db)
    try:
        assert await again.revision() == 3
        assert rv(await again.create(configmap("next"))) == 4
    finally:
        await again.close()


async def test_open_store_opens_sqlite_urls(tmp_path: Path) -> None:
    opened = open_store(f"sqlite:///{tmp_path}/via-url.db")
    try:
        assert isinstance(opened, SqliteStore)
        assert opened.path == f"{tmp_path}/via-url.db"
        await opened.create(configmap("a"))
    finally:
        await opened.close()
    assert (tmp_path / "via-url.db").exists()


async def test_a_store_in_a_missing_directory_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(errors.Unavailable):
        SqliteStore(str(tmp_path / "no" / "such" / "dir.db"))


def test_several_processes_opening_a_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    # Threads stand in for processes: each opener has its own connection. Switching a new file to WAL can fail
    # with SQLITE_BUSY without SQLite waiting; about one file in ten failed this way before opening retried.
    failures: list[BaseException] = []
    for n in range(40):
        path = str(tmp_path / f"new-{n}.db")
        start = threading.Barrier(6)

        def open_once(path: str = path, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                asyncio.run(SqliteStore(path).close())
            except BaseException as e:  # collected, so one failure does not hide the others
                failures.append(e)

        openers = [threading.Thread(target=open_once) for _ in range(6)]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join()
    assert failures == []


async def test_opening_a_file_whose_lock_is_held_past_the_busy_timeout_is_unavailable(db: str) -> None:
    await SqliteStore(db).close()
    blocker = sqlite3.connect(db, isolation_level=None)
    try:
        blocker.execute("BEGIN EXCLUSIVE")
        with pytest.raises(errors.Unavailable, match=f"cannot open sqlite store {db}: database is locked"):
            SqliteStore(db, busy_timeout=0.05)
    finally:
        blocker.close()


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ({"synchronous": "SOMETIMES"}, "synchronous"),
        ({"poll_interval": 0}, "poll_interval"),
        ({"history_limit": 0}, "history_limit"),
        ({"history_bytes": 0}, "history_bytes"),
        ({"max_object_bytes": 0}, "max_object_bytes"),
    ],
)
def test_bad_settings_are_invalid(db: str, setting: dict, field: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        SqliteStore(db, **setting)
    assert [f.path for f in caught.value.fields] == [field]


async def test_an_object_that_is_not_json_is_invalid_and_nothing_is_written(store: SqliteStore) -> None:
    with pytest.raises(errors.Invalid):
        await store.create({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {1, 2}})
    assert await store.revision() == 0
    created = await store.create(configmap("a"))
    created["data"] = {"when": object()}
    with pytest.raises(errors.Invalid):
        await store.update(created)
    assert await store.revision() == 1
    assert (await store.get("ConfigMap", "a", "default"))["data"] == {}


async def test_a_write_blocked_past_the_busy_timeout_is_unavailable_and_writes_nothing(db: str) -> None:
    store = SqliteStore(db, busy_timeout=0.05)
    blocker = sqlite3.connect(db, isolation_level=None)
    try:
        created = await store.create(configmap("a"))
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        with pytest.raises(errors.Unavailable):
            await store.update(created)
        with pytest.raises(errors.Unavailable):
            await store.create(configmap("b"))
        blocker.execute("ROLLBACK")
        assert await store.revision() == 1
        assert rv(await store.update(created)) == 2
    finally:
        blocker.close()
        await store.close()


async def ticks_while(pending: asyncio.Future[Any], limit: int = 100) -> int:
    """Let this task run `limit` times (or until `pending` is done); how many times it ran with `pending` not done."""
    ran = 0
    while ran < limit and not pending.done():
        await asyncio.sleep(0)
        ran += 1
    return ran


async def test_a_write_waiting_for_another_process_s_lock_leaves_the_event_loop_running(db: str) -> None:
    store = SqliteStore(db, busy_timeout=30)  # the test releases the lock itself, long before that
    blocker = sqlite3.connect(db, isolation_level=None)  # another connection is all another process is to SQLite
    order: list[str] = []
    try:
        created = await store.create(configmap("a", x="1"))
        created["data"]["x"] = "2"
        blocker.execute("BEGIN IMMEDIATE")  # the other process holds the write lock
        update = asyncio.ensure_future(store.update(created))
        update.add_done_callback(lambda _: order.append("update done"))
        read = asyncio.ensure_future(store.get("ConfigMap", "a", "default"))  # queues behind the update
        read.add_done_callback(lambda _: order.append("read done"))
        # A blocking wait would hold the loop until busy_timeout: this task could not run before the update ended.
        assert await ticks_while(update) == 100
        order.append("ticked 100 times while the update waited")
        blocker.execute("ROLLBACK")
        order.append("lock released")
        updated = await asyncio.wait_for(update, WATCH_BOUND)
        assert await asyncio.wait_for(read, WATCH_BOUND) == updated  # never interleaved with the update
    finally:
        blocker.close()
        await store.close()
    assert rv(updated) == 2
    assert order == ["ticked 100 times while the update waited", "lock released", "update done", "read done"]


async def test_a_write_cancelled_while_waiting_for_the_lock_leaves_the_store_consistent(db: str) -> None:
    store = SqliteStore(db, busy_timeout=30)
    blocker = sqlite3.connect(db, isolation_level=None)
    try:
        async with store.watch("ConfigMap") as stream:
            blocker.execute("BEGIN IMMEDIATE")
            create = asyncio.ensure_future(store.create(configmap("late")))
            assert await ticks_while(create) == 100
            create.cancel()
            with pytest.raises(asyncio.CancelledError):
                await create
            blocker.execute("ROLLBACK")
            # The thread still got the lock and committed: the write happened, its caller just never heard.
            (event,) = await take(stream, 1)
            assert await store.get("ConfigMap", "late", "default") == event.object
            assert rv(await store.create(configmap("next"))) == 2
    finally:
        blocker.close()
        await store.close()


async def test_a_watcher_keeps_receiving_local_writes_while_a_write_waits_for_the_lock(db: str) -> None:
    store = SqliteStore(db, busy_timeout=30)
    other = SqliteStore(db, busy_timeout=30)
    blocker = sqlite3.connect(db, isolation_level=None)
    try:
        async with store.watch("ConfigMap") as stream:
            first = await store.create(configmap("first"))
            blocker.execute("BEGIN IMMEDIATE")
            waiting = asyncio.ensure_future(other.create(configmap("second")))  # another store waits off its loop
            assert [e.object for e in await take(stream, 1)] == [first]  # this loop still delivers
            assert not waiting.done()
            blocker.execute("ROLLBACK")
            second = await asyncio.wait_for(waiting, WATCH_BOUND)
            assert [e.object for e in await take(stream, 1)] == [second]
    finally:
        blocker.close()
        await other.close()
        await store.close()


# -- history --------------------------------------------------------------------------------------------------


async def test_history_limit_compacts_old_events_automatically(db: str) -> None:
    store = SqliteStore(db, history_limit=10)
    try:
        for i in range(30):
            await store.create(configmap(f"o{i}"))
        with pytest.raises(errors.Gone):
            async with store.watch(since=0):
                pytest.fail("entered a watch whose history was compacted")
        async with store.watch(since=20) as stream:
            assert [e.revision for e in await take(stream, 10)] == list(range(21, 31))
    finally:
        await store.close()


MiB = 1024 * 1024


async def _rewrite(store: SqliteStore, name: str, times: int, size: int) -> dict[str, Any]:
    obj = await store.create(configmap(name, blob="0" * size))
    for i in range(1, times + 1):
        obj["data"]["blob"] = str(i % 10) * size
        obj = await store.update(obj)
    return obj


def _file_size(path: str) -> int:
    return os.path.getsize(path)


def _history_bytes(db: str) -> tuple[int, int]:
    """(the bytes of the events table's bodies, the store's running count of them)."""
    with sqlite3.connect(db) as conn:
        actual = conn.execute("SELECT coalesce(sum(length(CAST(body AS BLOB))), 0) FROM events").fetchone()[0]
        counted = conn.execute(sqlite_backend._HISTORY_BYTES).fetchone()[0]
    return actual, counted


async def test_history_is_bounded_by_bytes_and_the_running_count_stays_exact(db: str) -> None:
    store = SqliteStore(db, history_bytes=2 * MiB)
    try:
        last = await _rewrite(store, "big", 100, 64 * 1024)
        await store.delete("ConfigMap", "big", "default")
        actual, counted = _history_bytes(db)
        assert actual == counted
        assert actual <= 2 * MiB + 2 * MiB // 8 + 64 * 1024 + 1024  # the bound, a batch, one event checked late
        with pytest.raises(errors.Gone):
            async with store.watch(since=0):
                pytest.fail("entered a watch whose history was compacted")
        async with store.watch(since=rv(last) - 3) as stream:
            assert [e.type for e in await take(stream, 4)] == ["MODIFIED"] * 3 + ["DELETED"]
    finally:
        await store.close()


async def test_another_connection_s_writes_and_compactions_keep_the_byte_count_exact(db: str) -> None:
    one, two = SqliteStore(db, history_bytes=MiB), SqliteStore(db, history_bytes=MiB)
    try:
        await _rewrite(one, "a", 20, 50_000)
        await _rewrite(two, "b", 20, 50_000)
        await one.compact(await one.revision() - 5)
        await _rewrite(one, "c", 3, 1000)
        actual, counted = _history_bytes(db)
        assert actual == counted <= MiB + MiB // 8 + 2 * 50_000
    finally:
        await one.close()
        await two.close()


async def test_the_file_stops_growing_once_history_is_bounded_its_free_pages_are_reused(db: str) -> None:
    store = SqliteStore(db, history_bytes=4 * MiB)
    try:
        obj = await _rewrite(store, "big", 100, 256 * 1024)
        after_100 = _file_size(db)
        for i in range(200):
            obj["data"]["blob"] = str(i % 10) * (256 * 1024)
            obj = await store.update(obj)
        after_300 = _file_size(db)
    finally:
        await store.close()
    assert after_100 < 8 * MiB  # 100 versions of 256 KiB would be 25 MiB
    assert after_300 <= after_100 * 1.1


async def test_event_sizes_and_running_totals_follow_every_write(store: SqliteStore, db: str) -> None:
    a = await store.create(configmap("a", x="1"))
    a["data"]["x"] = "22"
    await store.update(a)
    await store.delete("ConfigMap", "a", "default")
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT size, total, length(CAST(body AS BLOB)) FROM events ORDER BY revision").fetchall()
    sizes = [row[2] for row in rows]
    assert [row[0] for row in rows] == sizes
    assert [row[1] for row in rows] == [sizes[0], sizes[0] + sizes[1], sum(sizes)]


async def test_a_watcher_that_does_not_read_big_events_holds_a_bounded_queue_and_misses_nothing(
    store: SqliteStore,
) -> None:
    async with store.watch("ConfigMap") as stream:
        last = await _rewrite(store, "big", 40, MiB // 2)
        assert stream._pending_bytes <= sqlite_backend._PENDING_BYTES
        assert len(stream._pending) <= 16
        events = await take(stream, 41)
    assert [e.revision for e in events] == list(range(1, 42))
    assert events[-1].object == last


async def test_a_replay_page_of_big_events_stops_at_its_byte_bound(store: SqliteStore) -> None:
    await _rewrite(store, "big", 40, MiB // 2)
    read = await store._run(store._read_events, 0, "ConfigMap", None)
    assert 15 <= len(read.rows) <= 17  # 8 MiB of 0.5 MiB bodies...
    assert read.more  # ...then the next page
    async with store.watch("ConfigMap", since=0) as stream:
        assert [e.revision for e in await take(stream, 41)] == list(range(1, 42))


async def test_replay_longer_than_a_page_is_complete_and_in_order(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_backend, "_REPLAY_PAGE", 3)
    nodes = []
    for i in range(10):
        await store.create(configmap(f"o{i}"))
        nodes.append(await store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"}}))
    async with store.watch("Node", since=0) as stream:
        assert [e.object for e in await take(stream, 10)] == nodes
    async with store.watch(since=0) as stream:
        assert [e.revision for e in await take(stream, 20)] == list(range(1, 21))


async def test_a_watcher_that_falls_far_behind_rereads_the_file_and_misses_nothing(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_backend, "_PENDING_LIMIT", 4)
    async with store.watch("ConfigMap", since=0) as stream:
        written = [await store.create(configmap(f"o{i}")) for i in range(20)]
        assert len(stream._pending) == 0  # overflowed: dropped, to be reread from the file
        events = await take(stream, 20)
    assert [e.object for e in events] == written


async def test_a_pod_watcher_queues_none_of_20000_configmap_writes(store: SqliteStore) -> None:
    async with store.watch("Pod", fields="spec.nodeName=node-a") as stream:
        for i in range(20_000):
            await store.create(configmap(f"noise-{i}"))
            assert not stream._pending
            assert not stream._stale
        mine = await store.create(pod("mine", "default", "node-a"))
        (event,) = await take(stream, 1)
    assert (event.object, event.revision) == (mine, 20_001)


async def test_one_poller_serves_every_watch_and_stops_with_the_last(store: SqliteStore) -> None:
    def pollers() -> int:
        return sum(1 for task in asyncio.all_tasks() if task.get_name().startswith("sqlite poller") and not task.done())

    assert store._poller is None
    async with store.watch("ConfigMap"), store.watch("Pod"), store.watch():
        assert pollers() == 1
    assert store._poller is None
    await asyncio.sleep(0)  # the cancelled poller finishes
    assert pollers() == 0


async def test_a_poller_that_failed_is_started_again_for_the_next_watch(
    store: SqliteStore, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = [errors.Unavailable("disk I/O error")]

    def failing_once(self: SqliteStore, cur: Any) -> bool:
        if failures:
            raise failures.pop()
        return original(self, cur)

    original = SqliteStore._data_version_changed
    monkeypatch.setattr(SqliteStore, "_data_version_changed", failing_once)
    async with store.watch("Pod"):  # a watch whose consumer has not read yet: still registered after the failure
        async with store.watch("ConfigMap") as stream:
            with pytest.raises(errors.Unavailable, match="disk I/O error"):
                await asyncio.wait_for(anext(stream), 10)  # the poller's failure ends the watch
        other = SqliteStore(db)
        try:
            async with store.watch("ConfigMap") as stream:  # what an informer does next: watch again
                theirs = await other.create(configmap("theirs"))  # another connection: only the poller sees it
                (event,) = await asyncio.wait_for(take(stream, 1), 10)
            assert event.object == theirs
        finally:
            await other.close()


# -- several connections and processes ------------------------------------------------------------------------


async def test_writes_through_another_connection_reach_a_watcher_in_revision_order(store: SqliteStore, db: str) -> None:
    other = SqliteStore(db)
    try:
        async with store.watch("ConfigMap", since=0) as stream:
            theirs = await other.create(configmap("theirs-1"))
            ours = await store.create(configmap("ours"))  # revision 2: our watcher must first fetch 1 from the file
            later = await other.create(configmap("theirs-2"))  # no local write follows: found by polling
            events = await take(stream, 3)
        assert [e.object for e in events] == [theirs, ours, later]
    finally:
        await other.close()


async def test_a_local_write_after_a_foreign_one_is_delivered_after_it_even_mid_stream(
    store: SqliteStore, db: str
) -> None:
    other = SqliteStore(db)
    try:
        async with store.watch("ConfigMap", since=0) as stream:
            a = await store.create(configmap("a"))
            assert [e.object for e in await take(stream, 1)] == [a]
            # the watcher is suspended right after yielding `a`; revision 3 reaches it directly, 2 only via the file
            theirs = await other.create(configmap("theirs"))
            ours = await store.create(configmap("ours"))
            assert [e.object for e in await take(stream, 2)] == [theirs, ours]
    finally:
        await other.close()


async def test_a_lagging_watcher_whose_events_another_connection_compacted_raises_gone(
    store: SqliteStore, db: str
) -> None:
    other = SqliteStore(db)
    try:
        await other.create(configmap("a"))
        await other.create(configmap("b"))
        async with store.watch("ConfigMap", since=0) as stream:
            assert [e.revision for e in await take(stream, 1)] == [1]
            for i in range(3):
                await other.create(configmap(f"more-{i}"))
            await other.compact(4)
            assert [e.revision for e in await take(stream, 1)] == [2]  # already read with revision 1
            with pytest.raises(errors.Gone):
                await take(stream, 1)
    finally:
        await other.close()


async def test_writes_of_another_process_reach_a_watcher_in_this_one(store: SqliteStore, db: str, spawn: Spawn) -> None:
    async with store.watch("ConfigMap", since=await store.revision()) as stream:
        reported = await finish(await spawn("create", db, "remote", "5"))
        remote = await take(stream, 5)
        local = await store.create(configmap("local"))
        (after,) = await take(stream, 1)
    assert [(e.type, e.object["metadata"]["name"]) for e in remote] == [("ADDED", f"remote-{i}") for i in range(5)]
    assert [e.revision for e in remote] == reported == [1, 2, 3, 4, 5]
    assert after.object == local


async def test_two_processes_incrementing_by_cas_lose_no_update(db: str, spawn: Spawn) -> None:
    procs = [await spawn("counter", db, "40") for _ in range(2)]
    reported = [r for revisions in await asyncio.gather(*(finish(p) for p in procs)) for r in revisions]
    store = SqliteStore(db)
    try:
        counter = await store.get("ConfigMap", "counter", "default")
        assert counter["data"]["count"] == "80"
        assert len(set(reported)) == 80
        assert rv(counter) == max(reported) == await store.revision()
    finally:
        await store.close()


async def test_every_write_reported_committed_survives_kill_9_of_the_writer(db: str, spawn: Spawn) -> None:
    proc = await spawn("counter", db, "0")  # increments until killed, printing each committed revision
    assert proc.stdout is not None
    reported: list[int] = []
    while len(reported) < 60:
        line = await asyncio.wait_for(proc.stdout.readline(), PROCESS_BOUND)
        assert line, "the writer exited early"
        reported.append(int(line))
    os.kill(proc.pid, signal.SIGKILL)
    rest, _ = await asyncio.wait_for(proc.communicate(), PROCESS_BOUND)
    assert proc.returncode == -signal.SIGKILL
    reported += [int(line) for line in rest.split()]

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store = SqliteStore(db)
    try:
        events = await history(store)
        assert set(reported) <= {e.revision for e in events}
        counter = await store.get("ConfigMap", "counter", "default")
        assert int(counter["data"]["count"]) == sum(1 for e in events if e.type == "MODIFIED")
        assert rv(counter) == events[-1].revision >= max(reported)
    finally:
        await store.close()


# -- the layout -----------------------------------------------------------------------------------------------


async def test_bodies_are_json_text_and_the_identity_columns_match_them(store: SqliteStore, db: str) -> None:
    created = await store.create(node("n", spec={"cpu": 4}))
    created["spec"] = {"cpu": 8}
    updated = await store.update(created)
    with sqlite3.connect(db) as conn:
        kinds = conn.execute(
            "SELECT typeof(body), json_valid(body) FROM objects UNION ALL SELECT typeof(body),"
            " json_valid(body) FROM events"
        ).fetchall()
        row = conn.execute("SELECT body, uid, created, generation, spec FROM objects").fetchone()
    assert kinds == [("text", 1)] * 3
    assert json.loads(row[0]) == updated
    meta = updated["metadata"]
    assert row[1:4] == (meta["uid"], meta["creationTimestamp"], 2)
    assert json.loads(row[4]) == {"cpu": 8}


async def test_an_object_without_spec_stores_no_spec_text(store: SqliteStore, db: str) -> None:
    await store.create(configmap("a", x="1"))
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT spec, generation FROM objects").fetchone() == (None, 1)


async def test_keys_that_are_not_strings_are_stored_as_strings(store: SqliteStore) -> None:
    created = await store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {1: "x"}})
    assert created["data"] == {"1": "x"}
    assert (await store.get("ConfigMap", "a"))["data"] == {"1": "x"}


@pytest.mark.parametrize("value", [2**64, "\ud800", {"a", "b"}], ids=["int-beyond-64-bits", "lone-surrogate", "set"])
async def test_a_value_json_cannot_carry_exactly_is_invalid_and_nothing_is_written(
    store: SqliteStore, value: Any
) -> None:
    created = await store.create(node("n", spec={"v": 1}))
    with pytest.raises(errors.Invalid):
        await store.create(node("m", spec={"v": value}))
    created["spec"] = {"v": value}
    with pytest.raises(errors.Invalid):
        await store.update(created)
    created["spec"] = {"v": 1}
    created["status"] = {"v": value}
    with pytest.raises(errors.Invalid):
        await store.update(created)
    assert await store.revision() == 1
    assert (await store.get("Node", "n"))["spec"] == {"v": 1}


async def test_a_spec_equal_in_value_but_not_in_text_keeps_the_generation(store: SqliteStore) -> None:
    created = await store.create(node("n", spec={"cpu": 1, "zones": ["a"]}))
    created["spec"] = {"zones": ["a"], "cpu": 1.0}
    same = await store.update(created)
    assert same["metadata"]["generation"] == 1
    same["spec"]["zones"].append("b")
    assert (await store.update(same))["metadata"]["generation"] == 2


# -- files from before the identity columns -------------------------------------------------------------------

_LEGACY_SCHEMA = (
    "CREATE TABLE objects (kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,"
    " revision INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, namespace, name))",
    "CREATE TABLE events (revision INTEGER PRIMARY KEY, type TEXT NOT NULL, kind TEXT NOT NULL,"
    " namespace TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT INTO meta (key, value) VALUES ('compacted', 0)",
)


def _legacy(obj: dict, revision: int, generation: int) -> dict:
    out = copy.deepcopy(obj)
    out["metadata"].update(
        resourceVersion=str(revision),
        uid=f"uid-{out['metadata']['name']}",
        generation=generation,
        creationTimestamp="2025-06-01T00:00:00Z",
    )
    return out


def _write_legacy_file(path: str) -> list[tuple[int, str, dict]]:
    """A store file as the stdlib-JSON version without identity columns or triggers wrote it; returns its events."""
    cm = _legacy(configmap("café", x="1"), 1, 1)
    gpu = _legacy(node("gpu", spec={"cpu": 4, "zones": ["a"]}), 2, 1)
    gpu["status"] = {"load": float("nan")}  # the stdlib encoder wrote NaN, which strict JSON parsers refuse
    gpu_later = _legacy(node("gpu", spec={"cpu": 4, "zones": ["a"]}), 3, 1)
    gpu_later["status"] = {"load": 0.5}
    events = [(1, "ADDED", cm), (2, "ADDED", gpu), (3, "MODIFIED", gpu_later)]
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        for statement in _LEGACY_SCHEMA:
            conn.execute(statement)
        for revision, type_, obj in events:
            ns = obj["metadata"].get("namespace", "")
            body = json.dumps(obj, separators=(",", ":"))
            conn.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)",
                (revision, type_, obj["kind"], ns, obj["metadata"]["name"], body),
            )
            conn.execute(
                "INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?, ?)",
                (obj["kind"], ns, obj["metadata"]["name"], revision, body),
            )
    conn.close()
    return events


async def test_a_file_from_before_the_identity_columns_opens_and_keeps_every_rule(db: str, clock: FakeClock) -> None:
    legacy = _write_legacy_file(db)
    store = SqliteStore(db, clock=clock)
    try:
        assert await store.revision() == 3
        assert await store.get("ConfigMap", "café", "default") == legacy[0][2]
        gpu = await store.get("Node", "gpu")
        assert gpu == legacy[2][2]
        replayed = await history(store)
        assert [(e.revision, e.type) for e in replayed] == [(1, "ADDED"), (2, "ADDED"), (3, "MODIFIED")]
        assert math.isnan(replayed[1].object["status"]["load"])

        gpu["status"] = {"load": 0.7}
        gpu["spec"] = {"zones": ["a"], "cpu": 4}  # the same spec, keys in another order than the legacy text
        same = await store.update(gpu)
        assert (rv(same), same["metadata"]["generation"]) == (4, 1)
        assert (same["metadata"]["uid"], same["metadata"]["creationTimestamp"]) == ("uid-gpu", "2025-06-01T00:00:00Z")
        same["spec"]["cpu"] = 8
        assert (await store.update(same))["metadata"]["generation"] == 2
        cm = await store.get("ConfigMap", "café", "default")
        cm["data"]["x"] = "2"
        assert (await store.update(cm))["metadata"]["uid"] == "uid-café"
        with pytest.raises(errors.Conflict):
            await store.update(legacy[0][2])
    finally:
        await store.close()


async def test_a_legacy_file_is_upgraded_once_and_reopens_unchanged(db: str) -> None:
    _write_legacy_file(db)
    await SqliteStore(db).close()
    with sqlite3.connect(db) as conn:
        first = conn.execute("SELECT * FROM objects ORDER BY rowid").fetchall()
    again = SqliteStore(db)
    try:
        assert (await again.get("Node", "gpu"))["metadata"]["generation"] == 1
    finally:
        await again.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT * FROM objects ORDER BY rowid").fetchall() == first
        assert [row[1] for row in conn.execute("PRAGMA table_info(objects)")][-4:] == [
            "uid",
            "created",
            "generation",
            "spec",
        ]
        assert [row[1] for row in conn.execute("PRAGMA table_info(events)")][-2:] == ["size", "total"]


async def test_a_legacy_file_gets_event_sizes_and_totals_and_counts_new_writes_on(db: str) -> None:
    _write_legacy_file(db)
    store = SqliteStore(db)
    try:
        cm = await store.get("ConfigMap", "café", "default")
        cm["data"]["x"] = "3"
        await store.update(cm)
    finally:
        await store.close()
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT size, total, length(CAST(body AS BLOB)) FROM events ORDER BY revision").fetchall()
    sizes = [row[2] for row in rows]
    assert [row[0] for row in rows] == sizes
    assert [row[1] for row in rows] == [sum(sizes[: i + 1]) for i in range(len(sizes))]
    assert _history_bytes(db) == (sum(sizes), sum(sizes))


async def test_a_writer_that_appends_its_own_event_fails_and_writes_nothing(store: SqliteStore, db: str) -> None:
    created = await store.create(configmap("a", x="1"))
    stale_layout_writer = sqlite3.connect(db, isolation_level=None)
    try:
        stale_layout_writer.execute("BEGIN IMMEDIATE")
        stale_layout_writer.execute("UPDATE objects SET revision = 2, body = '{}' WHERE name = 'a'")
        with pytest.raises(sqlite3.IntegrityError):
            stale_layout_writer.execute(
                "INSERT INTO events (revision, type, kind, namespace, name, body)"
                " VALUES (2, 'MODIFIED', 'ConfigMap', 'default', 'a', '{}')"
            )
        stale_layout_writer.execute("ROLLBACK")
    finally:
        stale_layout_writer.close()
    assert await store.revision() == 1
    assert await store.get("ConfigMap", "a", "default") == created


async def test_a_live_watcher_with_a_selector_gets_objects_with_a_spec_exactly_as_returned(store: SqliteStore) -> None:
    async with store.watch("Node", selector="tier=gpu") as stream:  # entered: the writes below reach it in-process
        created = await store.create(node("a", labels={"tier": "gpu"}, spec={"cpu": 4}))
        await store.create(node("b", labels={"tier": "cpu"}, spec={"cpu": 2}))
        created["spec"]["cpu"] = 8
        updated = await store.update(created)
        events = await take(stream, 2)
    assert [(e.type, e.object, e.revision) for e in events] == [
        ("ADDED", created | {"spec": {"cpu": 4}}, 1),
        ("MODIFIED", updated, 3),
    ]


# -- schema versions ----------------------------------------------------------------------------------------------


def _rows(db: str) -> tuple[list[tuple], list[tuple]]:
    with sqlite3.connect(db) as conn:
        objects = conn.execute("SELECT kind, namespace, name, revision, body FROM objects ORDER BY rowid").fetchall()
        events = conn.execute("SELECT revision, type, body FROM events ORDER BY revision").fetchall()
    conn.close()
    return objects, events


def _user_version(db: str, set_to: int | None = None) -> int:
    with sqlite3.connect(db) as conn:
        if set_to is not None:
            conn.execute(f"PRAGMA user_version = {set_to}")
        version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    return version


async def test_a_new_file_carries_the_code_s_schema_version(store: SqliteStore, db: str) -> None:
    assert sqlite_backend.SCHEMA_VERSION == 1
    assert _user_version(db) == 1


async def test_an_unversioned_file_of_today_s_layout_migrates_keeping_every_object_byte_for_byte(
    db: str, clock: FakeClock
) -> None:
    first = SqliteStore(db, clock=clock)
    gpu = await first.create(node("gpu", spec={"cpu": 4, "zones": ["a", "b"]}))
    gpu["spec"]["cpu"] = 8
    await first.update(gpu)
    await first.create(configmap("café", x="ünïcode"))
    await first.create(configmap("gone"))
    await first.delete("ConfigMap", "gone", "default")
    await first.close()
    assert _user_version(db, set_to=0) == 0  # the layout every file had before versions
    objects, events = _rows(db)

    again = SqliteStore(db, clock=clock)
    try:
        assert _user_version(db) == sqlite_backend.SCHEMA_VERSION
        assert _rows(db) == (objects, events)
        assert [await again.get("Node", "gpu"), await again.get("ConfigMap", "café", "default")] == [
            json.loads(objects[0][4]),
            json.loads(objects[1][4]),
        ]
        assert rv(await again.create(configmap("after"))) == 6
    finally:
        await again.close()


async def test_a_file_from_before_the_identity_columns_migrates_to_the_current_version(db: str) -> None:
    _write_legacy_file(db)
    assert _user_version(db) == 0
    await SqliteStore(db).close()
    assert _user_version(db) == sqlite_backend.SCHEMA_VERSION


def test_a_file_newer_than_the_code_is_refused_naming_both_versions_and_left_unchanged(db: str) -> None:
    async def create() -> None:
        first = SqliteStore(db)
        await first.create(configmap("a"))
        await first.close()

    asyncio.run(create())
    _user_version(db, set_to=sqlite_backend.SCHEMA_VERSION + 1)
    before = Path(db).read_bytes()
    with pytest.raises(errors.Refused) as refused:
        SqliteStore(db)
    assert refused.value.message == (
        f"sqlite store {db} has schema version 2, newer than this devplace's 1: run the devplace that wrote it, or"
        " restore a backup taken before the upgrade"
    )
    assert Path(db).read_bytes() == before
    assert _user_version(db) == 2


async def test_watch_events_carry_the_stored_json_their_objects_decode_from(store: SqliteStore) -> None:
    """Offered at commit and read back from the file: a server sends that JSON as it is (`Event.body`)."""
    async with store.watch("ConfigMap", "default") as live:
        created = await store.create(configmap("c", k="é"))
        created["data"]["k"] = "ü"
        await store.update(created)
        offered = await take(live, 2)
    read = await history(store)
    for event in [*offered, *read]:
        assert event.body is not None
        assert json.loads(event.body) == event.object
    assert [e.object["data"]["k"] for e in offered] == ["é", "ü"]
