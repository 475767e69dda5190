"""Measurement helpers shared by the store benchmarks: the sample object, timing, percentiles and the latency loop.

`bench.store` (raw backends against bare SQLite) and `bench.server` (raw backends against the same operations
through `devplace server`) measure the same five operations the same way, so the loop lives here once:
`store_latencies` creates, CAS-updates, gets, lists and watches, and returns raw samples in nanoseconds; `stats`
turns samples into the p50/p99 figures every benchmark reports. Garbage is collected before each block of timed
calls (never inside one), so a collection lands in no sample by accident; what existed before the run is frozen
(`gc.freeze`) meanwhile, so those collections scan only the run's own objects, not a large host's heap (a test
process), which would cost far more than the measuring itself. Work the caller wants interleaved with
the store's (a baseline measured alongside) runs between blocks through `between_blocks`, never inside a timing.
Nothing here asserts a time.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from devplace.store._base import Store

__all__ = [
    "KIND",
    "NAMESPACE",
    "OPERATIONS",
    "Phase",
    "cpu_seconds",
    "instance",
    "stats",
    "store_latencies",
    "timed",
]

KIND = "Instance"
NAMESPACE = "default"
OPERATIONS = ("create", "update", "get", "list", "watch_latency")
WATCH_BOUND = 10.0  # seconds to wait for an event that must come: a bound on a hang, not an expectation

Phase = Literal["create", "update"]


def instance(i: int) -> dict[str, Any]:
    """An Instance of the size devplace writes most (about 700 bytes of JSON), named `gpu-<i:05d>`."""
    name = f"gpu-{i:05d}"
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": KIND,
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"configuration": "gpus"}},
        "spec": {
            "configurationName": "gpus",
            "capacity": 4,
            "shared": True,
            "nodes": ["node-a", "node-b", "node-c"],
            "deviceUsage": {f"{name}-{slot}": "" for slot in range(4)},
            "brokerProperties": {
                "DEVICE_PATH": f"/dev/dri/renderD{128 + i % 64}",
                "PCI": "0000:3b:00.0",
                "VENDOR": "acme",
                "MODEL": "a100-80g",
                "DRIVER": "535.104.05",
            },
            "cdiName": f"devplace.io/gpus={i:06x}",
        },
        "status": {"writes": 0},
    }


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process `pid` so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stats(samples_ns: list[int]) -> dict[str, float]:
    """Count, p50 and p99 (nearest rank, microseconds) of samples in nanoseconds."""
    ordered = sorted(samples_ns)
    n = len(ordered)
    if n == 0:
        return {"n": 0}
    return {
        "n": n,
        "p50_us": round(ordered[n // 2] / 1000, 2),
        "p99_us": round(ordered[min(n - 1, (n * 99) // 100)] / 1000, 2),
    }


async def timed(call: Callable[[], Awaitable[Any]]) -> tuple[int, Any]:
    """Nanoseconds one awaited call took, and its result."""
    started = time.perf_counter_ns()
    result = await call()
    return time.perf_counter_ns() - started, result


async def store_latencies(
    store: Store,
    n: int,
    list_repeats: int,
    *,
    block: int | None = None,
    between_blocks: Callable[[Phase, range], None] | None = None,
) -> dict[str, list[int]]:
    """Samples (ns) of create, CAS update, get, list and watch latency over `n` Instances in an empty `store`.

    Creates and updates run in blocks of `block` objects (default: all at once); after each block,
    `between_blocks(phase, indices)` runs untimed, for a baseline to do the same work on the same objects.
    Updates change the status on every write (round robin over the objects). Watch latency runs from the start
    of an update to its event reaching a watcher in this process; a first write establishes the watch (a remote
    stream opens asynchronously) and is not measured.
    """
    gc.freeze()
    try:
        return await _store_latencies(store, n, list_repeats, block or n, between_blocks)
    finally:
        gc.unfreeze()


async def _store_latencies(
    store: Store, n: int, list_repeats: int, size: int, between_blocks: Callable[[Phase, range], None] | None
) -> dict[str, list[int]]:
    samples: dict[str, list[int]] = {op: [] for op in OPERATIONS}
    latest: list[dict[str, Any]] = []

    for start in range(0, n, size):
        indices = range(start, min(n, start + size))
        gc.collect()
        for i in indices:
            obj = instance(i)
            elapsed, created = await timed(lambda obj=obj: store.create(obj))  # type: ignore[misc]
            samples["create"].append(elapsed)
            latest.append(created)
        if between_blocks is not None:
            between_blocks("create", indices)

    for start in range(0, n, size):
        indices = range(start, min(n, start + size))
        gc.collect()
        for i in indices:
            obj = latest[i]
            obj["status"]["writes"] += 1
            elapsed, latest[i] = await timed(lambda obj=obj: store.update(obj))  # type: ignore[misc]
            samples["update"].append(elapsed)
        if between_blocks is not None:
            between_blocks("update", indices)

    gc.collect()
    for i in range(n):
        elapsed, _ = await timed(lambda i=i: store.get(KIND, f"gpu-{i:05d}", NAMESPACE))  # type: ignore[misc]
        samples["get"].append(elapsed)
    for _ in range(list_repeats):
        elapsed, listed = await timed(lambda: store.list(KIND, NAMESPACE))
        if len(listed.items) != n:
            raise RuntimeError(f"listed {len(listed.items)} objects, expected {n}")
        samples["list"].append(elapsed)

    samples["watch_latency"] = await _watch_latencies(store, latest, n)
    return samples


async def _watch_latencies(store: Store, latest: list[dict[str, Any]], n: int) -> list[int]:
    received: dict[int, int] = {}
    arrived = asyncio.Event()
    samples: list[int] = []
    async with store.watch(KIND) as events:  # registered on entry: every write below is delivered

        async def consume() -> None:
            async for event in events:
                received[event.revision] = time.perf_counter_ns()
                arrived.set()

        async def write(i: int) -> int:
            obj = latest[i % len(latest)]
            obj["status"]["writes"] += 1
            latest[i % len(latest)] = updated = await store.update(obj)
            revision = int(updated["metadata"]["resourceVersion"])
            while revision not in received:
                await asyncio.wait_for(arrived.wait(), timeout=WATCH_BOUND)
                arrived.clear()
            return revision

        consumer = asyncio.create_task(consume())
        try:
            gc.collect()
            for i in range(n):
                arrived.clear()
                started = time.perf_counter_ns()
                revision = await write(i)
                samples.append(received.pop(revision) - started)
        finally:
            consumer.cancel()
            await asyncio.gather(consumer, return_exceptions=True)
    return samples
