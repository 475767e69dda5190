"""Store benchmark: create, CAS update, get, list and watch latency for the memory and sqlite backends.

The yardstick is a bare sqlite3 transaction doing the row write a CAS update needs (`BEGIN IMMEDIATE; UPDATE one row
with a JSON body of the same size; COMMIT`, the same pragmas and table shape), measured in the same run and
interleaved block by block with the store's own writes so machine noise hits both alike. Every bare write stores a
body that differs from the row's current one (SQLite skips writing an unchanged row, which would flatter the bare
side). Goal: sqlite CAS update p50 <= 3x bare p50. `sql_floor_update` is the store's own statements (read row and
head, update the row, append the event) run bare, and `sqlite_components` the JSON work an update must do (one
encode, two decodes: the old body, the caller's copy), to tell SQL cost from Python cost.

Figures are microseconds per operation (p50/p99 over N operations); `python -m bench store` writes them to JSON.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from devplace.store.base import Store
from devplace.store.memory import MemoryStore
from devplace.store.sqlite import SqliteStore

__all__ = ["run"]

_encode = json.JSONEncoder(separators=(",", ":")).encode
_KIND = "Instance"
_NAMESPACE = "default"
_SCHEMA = (
    "CREATE TABLE objects (kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,"
    " revision INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, namespace, name))",
    "CREATE TABLE events (revision INTEGER PRIMARY KEY, type TEXT NOT NULL, kind TEXT NOT NULL,"
    " namespace TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL)",
)


def _instance(i: int) -> dict[str, Any]:
    """An Instance of the size devplace writes most (about 700 bytes of JSON)."""
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": _KIND,
        "metadata": {"name": f"gpu-{i:05d}", "namespace": _NAMESPACE, "labels": {"configuration": "gpus"}},
        "spec": {
            "configurationName": "gpus",
            "capacity": 4,
            "shared": True,
            "nodes": ["node-a", "node-b", "node-c"],
            "deviceUsage": {f"gpus-{i:05d}-{slot}": "" for slot in range(4)},
            "brokerProperties": {"DEVICE_PATH": f"/dev/dri/renderD{128 + i % 64}", "PCI": "0000:3b:00.0"},
            "attributes": {"vendor": "acme", "model": "a100-80g", "driver": "535.104.05"},
        },
        "status": {"writes": 0},
    }


def _stats(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)
    n = len(ordered)
    return {
        "n": n,
        "p50_us": round(ordered[n // 2] / 1000, 2),
        "p99_us": round(ordered[min(n - 1, (n * 99) // 100)] / 1000, 2),
    }


class _Bare:
    """The baseline: plain sqlite3 on its own file, the store's pragmas and table shape, no store code."""

    def __init__(self, path: Path, count: int) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA:
            self.conn.execute(statement)
        self.keys = [(_KIND, _NAMESPACE, f"gpu-{i:05d}") for i in range(count)]
        self.writes = 0
        self.revision = 0

    def body(self, i: int) -> str:
        self.writes += 1
        obj = _instance(i)
        obj["status"]["writes"] = self.writes
        obj["metadata"].update(resourceVersion=str(self.writes), uid="4c1a6e0e-9a0b-4b8e-8d6a-0d1f2e3c4b5a")
        return _encode(obj)

    def insert(self, i: int, body: str) -> int:
        started = time.perf_counter_ns()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO objects VALUES (?, ?, ?, ?, ?)", (*self.keys[i], self.writes, body))
        self.conn.execute("COMMIT")
        return time.perf_counter_ns() - started

    def update(self, i: int, body: str) -> int:
        started = time.perf_counter_ns()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(
            "UPDATE objects SET body = ? WHERE kind = ? AND namespace = ? AND name = ?", (body, *self.keys[i])
        )
        self.conn.execute("COMMIT")
        return time.perf_counter_ns() - started

    def sql_floor_update(self, i: int, body: str) -> int:
        """What the store's CAS update asks of SQLite, with none of its Python around it."""
        key = self.keys[i]
        started = time.perf_counter_ns()
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "SELECT revision, body, (SELECT max(revision) FROM events) FROM objects"
            " WHERE kind = ? AND namespace = ? AND name = ?",
            key,
        ).fetchone()
        self.revision += 1
        conn.execute(
            "UPDATE objects SET revision = ?, body = ? WHERE kind = ? AND namespace = ? AND name = ?",
            (self.revision, body, *key),
        )
        conn.execute("INSERT INTO events VALUES (?, 'MODIFIED', ?, ?, ?, ?)", (self.revision, *key, body))
        conn.execute("COMMIT")
        return time.perf_counter_ns() - started


async def _timed(call: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
    started = time.perf_counter_ns()
    result = await call()
    return time.perf_counter_ns() - started, result


async def _bench_store(store: Store, n: int, list_repeats: int, bare: _Bare | None) -> dict[str, Any]:
    block = max(10, n // 20)
    samples: dict[str, list[int]] = {
        k: [] for k in ("create", "update", "get", "list", "watch_latency", "bare_insert", "bare_update", "sql_floor")
    }
    latest: list[dict[str, Any]] = []

    # create, interleaved block by block with bare inserts of the same bodies' size
    for start in range(0, n, block):
        gc.collect()
        for i in range(start, min(n, start + block)):
            obj = _instance(i)
            elapsed, created = await _timed(lambda obj=obj: store.create(obj))  # type: ignore[misc]
            samples["create"].append(elapsed)
            latest.append(created)
        if bare is not None:
            for i in range(start, min(n, start + block)):
                samples["bare_insert"].append(bare.insert(i, bare.body(i)))

    # CAS update round-robin over every object, interleaved with the bare row write and the SQL floor
    for start in range(0, n, block):
        gc.collect()
        for i in range(start, min(n, start + block)):
            obj = latest[i]
            obj["status"]["writes"] += 1
            elapsed, latest[i] = await _timed(lambda obj=obj: store.update(obj))  # type: ignore[misc]
            samples["update"].append(elapsed)
        if bare is not None:
            for i in range(start, min(n, start + block)):
                samples["bare_update"].append(bare.update(i, bare.body(i)))
            for i in range(start, min(n, start + block)):
                samples["sql_floor"].append(bare.sql_floor_update(i, bare.body(i)))

    gc.collect()
    for i in range(n):
        elapsed, _ = await _timed(lambda i=i: store.get(_KIND, f"gpu-{i:05d}", _NAMESPACE))  # type: ignore[misc]
        samples["get"].append(elapsed)
    for _ in range(list_repeats):
        elapsed, listed = await _timed(lambda: store.list(_KIND, _NAMESPACE))
        assert len(listed.items) == n
        samples["list"].append(elapsed)

    # watch latency: from the start of a write to the event reaching a watcher in this process
    received: dict[int, int] = {}
    arrived = asyncio.Event()
    stream = store.watch(_KIND, since=await store.revision())

    async def consume() -> None:
        async for event in stream:
            received[event.revision] = time.perf_counter_ns()
            arrived.set()

    consumer = asyncio.create_task(consume())
    await asyncio.sleep(0)
    gc.collect()
    for i in range(n):
        obj = latest[i % len(latest)]
        obj["status"]["writes"] += 1
        arrived.clear()
        started = time.perf_counter_ns()
        latest[i % len(latest)] = updated = await store.update(obj)
        revision = int(updated["metadata"]["resourceVersion"])
        while revision not in received:
            await asyncio.wait_for(arrived.wait(), timeout=10)
            arrived.clear()
        samples["watch_latency"].append(received.pop(revision) - started)
    consumer.cancel()
    await asyncio.gather(consumer, return_exceptions=True)
    await stream.aclose()  # type: ignore[attr-defined]

    return {name: _stats(values) for name, values in samples.items() if values}


async def _run(n: int, list_repeats: int) -> dict[str, Any]:
    results: dict[str, Any] = {"n_objects": n}
    results["memory"] = await _bench_store(MemoryStore(), n, list_repeats, None)
    with tempfile.TemporaryDirectory(prefix="dp-bench-") as tmp:
        bare = _Bare(Path(tmp) / "bare.db", n)
        store = SqliteStore(str(Path(tmp) / "store.db"))
        try:
            measured = await _bench_store(store, n, list_repeats, bare)
        finally:
            await store.close()
            bare.conn.close()
    results["sqlite_bare"] = {
        "insert": measured.pop("bare_insert"),
        "update": measured.pop("bare_update"),
        "sql_floor_update": measured.pop("sql_floor"),
    }
    results["sqlite"] = measured
    results["sqlite_components"] = _components(n)
    bare_update = results["sqlite_bare"]["update"]["p50_us"]
    results["ratios"] = {
        "sqlite_update_vs_bare_update_p50": round(measured["update"]["p50_us"] / bare_update, 2),
        "sqlite_create_vs_bare_insert_p50": round(
            measured["create"]["p50_us"] / results["sqlite_bare"]["insert"]["p50_us"], 2
        ),
        "sqlite_create_vs_bare_update_p50": round(measured["create"]["p50_us"] / bare_update, 2),
        "sql_floor_update_vs_bare_update_p50": round(
            results["sqlite_bare"]["sql_floor_update"]["p50_us"] / bare_update, 2
        ),
        "goal_update_ratio_max": 3.0,
    }
    return results


def _components(n: int) -> dict[str, Any]:
    """The JSON work a CAS update cannot skip: decode the old body, encode the new one, decode the caller's copy."""
    stored = _instance(1)
    stored["metadata"].update(resourceVersion="7", uid="4c1a6e0e-9a0b-4b8e-8d6a-0d1f2e3c4b5a", generation=1)
    body = _encode(stored)
    encode, decode = [], []
    for _ in range(n):
        started = time.perf_counter_ns()
        _encode(stored)
        encode.append(time.perf_counter_ns() - started)
        started = time.perf_counter_ns()
        json.loads(body)
        decode.append(time.perf_counter_ns() - started)
    return {"body_bytes": len(body), "json_encode": _stats(encode), "json_decode": _stats(decode)}


def run(quick: bool = False) -> dict[str, Any]:
    return asyncio.run(_run(n=200 if quick else 5000, list_repeats=5 if quick else 40))
