"""Store benchmark: create, CAS update, get, list and watch latency for the memory and sqlite backends.

The yardstick is a bare sqlite3 transaction doing the row write a CAS update needs (`BEGIN IMMEDIATE; UPDATE one row
with a JSON body of the same size; COMMIT`, the store's pragmas, a table of the store's first five columns), measured
in the same run and interleaved block by block with the store's own writes so machine noise hits both alike. Every
bare write stores a body that differs from the row's current one (SQLite skips writing an unchanged row, which would
flatter the bare side). Goal: sqlite CAS update p50 <= 3x bare p50.

To tell SQL cost from Python cost: `sql_floor_update` runs the store's own update statements (imported from
`devplace.store._sqlite`, on a file with the store's schema and triggers) with none of its Python around them, and
`sqlite_components` times the JSON work an update does (encode the spec, encode the body, decode the caller's copy).

Figures are microseconds per operation (p50/p99 over N operations); `python -m bench store` writes them to JSON.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench import measures
from devplace.store import _sqlite as sqlite_backend
from devplace.store._memory import MemoryStore
from devplace.store._sqlite import SqliteStore

__all__ = ["run"]

_BARE_SCHEMA = (
    "CREATE TABLE objects (kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,"
    " revision INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, namespace, name))"
)
_UID = "4c1a6e0e-9a0b-4b8e-8d6a-0d1f2e3c4b5a"


def _connect(path: Path) -> sqlite3.Connection:
    """A plain connection with the store's pragmas (`SqliteStore` sets exactly these two)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class _Baselines:
    """The bare row write, and the store's SQL alone, each on its own file; no store code runs in the timings."""

    def __init__(self, directory: Path, count: int) -> None:
        """`directory` holds `floor.db`, a file with the store's schema and no objects."""
        self.keys = [(measures.KIND, measures.NAMESPACE, f"gpu-{i:05d}") for i in range(count)]
        self.writes = 0
        self.samples: dict[str, list[int]] = {"bare_insert": [], "bare_update": [], "sql_floor": []}
        self.bare = _connect(directory / "bare.db")
        self.bare.execute(_BARE_SCHEMA)
        self.floor = _connect(directory / "floor.db")  # `_run` gave it the store's schema (columns, triggers)
        self.floor_revision = 0

    def close(self) -> None:
        self.bare.close()
        self.floor.close()

    def body(self, i: int) -> str:
        """A body of the store's size for object `i`, different from every earlier one."""
        self.writes += 1
        obj = measures.instance(i)
        obj["status"]["writes"] = self.writes
        obj["metadata"].update(resourceVersion=str(self.writes), uid=_UID, generation=1)
        obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
        return orjson.dumps(obj).decode()

    def between_blocks(self, phase: measures.Phase, indices: range) -> None:
        if phase == "create":
            for i in indices:
                self.samples["bare_insert"].append(self._bare_insert(i, self.body(i)))
                self._floor_insert(i, self.body(i))
        else:
            for i in indices:
                self.samples["bare_update"].append(self._bare_update(i, self.body(i)))
            for i in indices:
                self.samples["sql_floor"].append(self._floor_update(i, self.body(i)))

    def _bare_insert(self, i: int, body: str) -> int:
        started = time.perf_counter_ns()
        self.bare.execute("BEGIN IMMEDIATE")
        self.bare.execute("INSERT INTO objects VALUES (?, ?, ?, ?, ?)", (*self.keys[i], self.writes, body))
        self.bare.execute("COMMIT")
        return time.perf_counter_ns() - started

    def _bare_update(self, i: int, body: str) -> int:
        started = time.perf_counter_ns()
        self.bare.execute("BEGIN IMMEDIATE")
        self.bare.execute(
            "UPDATE objects SET body = ? WHERE kind = ? AND namespace = ? AND name = ?", (body, *self.keys[i])
        )
        self.bare.execute("COMMIT")
        return time.perf_counter_ns() - started

    def _floor_insert(self, i: int, body: str) -> None:
        self.floor_revision += 1
        spec = orjson.dumps(measures.instance(i)["spec"]).decode()
        with self.floor:
            self.floor.execute(
                sqlite_backend._INSERT_OBJECT, (*self.keys[i], self.floor_revision, body, _UID, "created", spec)
            )

    def _floor_update(self, i: int, body: str) -> int:
        """What the store's CAS update asks of SQLite, with none of its Python around it."""
        conn = self.floor
        key = self.keys[i]
        started = time.perf_counter_ns()
        conn.execute("BEGIN IMMEDIATE")
        _, rowid, _, _, generation, spec, head = conn.execute(sqlite_backend._ROW_FOR_UPDATE, key).fetchone()
        conn.execute(sqlite_backend._UPDATE_OBJECT, (head + 1, body, generation, spec, rowid))
        conn.execute("COMMIT")
        return time.perf_counter_ns() - started


async def _run(n: int, list_repeats: int) -> dict[str, Any]:
    results: dict[str, Any] = {"n_objects": n}
    memory = await measures.store_latencies(MemoryStore(), n, list_repeats)
    results["memory"] = {name: measures.stats(values) for name, values in memory.items()}
    with tempfile.TemporaryDirectory(prefix="dp-bench-") as tmp:
        await SqliteStore(Path(tmp) / "floor.db").close()  # creates the store's schema for the SQL floor
        baselines = _Baselines(Path(tmp), n)
        store = SqliteStore(Path(tmp) / "store.db")
        try:
            measured = await measures.store_latencies(
                store, n, list_repeats, block=max(10, n // 20), between_blocks=baselines.between_blocks
            )
        finally:
            await store.close()
            baselines.close()
    sqlite = results["sqlite"] = {name: measures.stats(values) for name, values in measured.items()}
    bare = results["sqlite_bare"] = {
        "insert": measures.stats(baselines.samples["bare_insert"]),
        "update": measures.stats(baselines.samples["bare_update"]),
        "sql_floor_update": measures.stats(baselines.samples["sql_floor"]),
    }
    results["sqlite_components"] = _components(n)
    bare_update = bare["update"]["p50_us"]
    results["ratios"] = {
        "sqlite_update_vs_bare_update_p50": round(sqlite["update"]["p50_us"] / bare_update, 2),
        "sqlite_create_vs_bare_insert_p50": round(sqlite["create"]["p50_us"] / bare["insert"]["p50_us"], 2),
        "sqlite_create_vs_bare_update_p50": round(sqlite["create"]["p50_us"] / bare_update, 2),
        "sql_floor_update_vs_bare_update_p50": round(bare["sql_floor_update"]["p50_us"] / bare_update, 2),
        "goal_update_ratio_max": 3.0,
    }
    return results


def _components(n: int) -> dict[str, Any]:
    """The JSON work of a CAS update: encode the spec, encode the body (embedding the spec's text), decode the copy."""
    stored = measures.instance(1)
    stored["metadata"].update(resourceVersion="7", uid=_UID, generation=1, creationTimestamp="2026-01-01T00:00:00Z")
    spec = stored["spec"]
    stored["spec"] = orjson.Fragment(orjson.dumps(spec))
    body = orjson.dumps(stored)
    samples: dict[str, list[int]] = {"spec_encode": [], "body_encode": [], "body_decode": []}
    for _ in range(n):
        started = time.perf_counter_ns()
        orjson.dumps(spec).decode()
        encoded_spec = time.perf_counter_ns()
        orjson.dumps(stored).decode()
        encoded_body = time.perf_counter_ns()
        orjson.loads(body)
        decoded = time.perf_counter_ns()
        samples["spec_encode"].append(encoded_spec - started)
        samples["body_encode"].append(encoded_body - encoded_spec)
        samples["body_decode"].append(decoded - encoded_body)
    return {"body_bytes": len(body), **{name: measures.stats(values) for name, values in samples.items()}}


def run(quick: bool = False) -> dict[str, Any]:
    return asyncio.run(_run(n=200 if quick else 5000, list_repeats=5 if quick else 40))
