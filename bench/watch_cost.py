"""What a filtered watch costs when nothing it asked for happens: a Pod watch over 100k writes of ConfigMaps.

The store filters watches by kind (and selectors) before it wakes a watcher, so a consumer of Pods should never run
while only ConfigMaps are written: "it costs the watcher nothing". Per backend (memory, sqlite), three runs on a
fresh store each:

- `writes_only`: the writes with no watch open (the yardstick);
- `writes_with_pod_watch`: the same writes while a Pod watch is open and consumed;
- `pod_watch_without_writes`: the Pod watch open and consumed for as long as the second run took, with no writes.

Reported: process CPU seconds of each run (`time.process_time()`), the extra CPU the open watch adds to the writes
(per write, in microseconds: the store's filtering), and how many events and wakeups reached the Pod consumer: both
must be 0. A wakeup is one resumption of the consumer's `async for` (an event delivered or the stream ending).
A control Pod written last proves the watch was live: it is the one event the consumer must see.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devplace.store import Store
from devplace.store._memory import MemoryStore

WRITES, QUICK_WRITES = 100_000, 2_000
_BATCH = 500


def _config_map(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cm-{i % 1000:04d}", "namespace": "default"},
        "data": {"i": str(i)},
    }


_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "control", "namespace": "default"},
    "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "x"}]},
}


async def _write(store: Store, writes: int) -> None:
    """`writes` ConfigMap writes: creates of 1000 names, then CAS updates cycling over them."""
    latest: dict[str, dict[str, Any]] = {}
    for i in range(writes):
        obj = _config_map(i)
        name = obj["metadata"]["name"]
        if name in latest:
            obj["metadata"]["resourceVersion"] = latest[name]["metadata"]["resourceVersion"]
            latest[name] = await store.update(obj)
        else:
            latest[name] = await store.create(obj)
        if i % _BATCH == 0:
            await asyncio.sleep(0)  # give a watcher every chance to run


class _Consumer:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.wakeups = 0
        self.saw_control = asyncio.Event()

    async def consume(self, store: Store, ready: asyncio.Event) -> None:
        async with store.watch("Pod") as events:
            ready.set()
            async for event in events:
                self.wakeups += 1
                self.events.append(f"{event.type} {event.object['kind']}")
                if event.object["metadata"]["name"] == "control":
                    self.saw_control.set()
            self.wakeups += 1


async def _run(open_store: Callable[[str], Store], writes: int) -> dict[str, Any]:
    async def fresh(label: str, watch: bool, work: Callable[[Store], Any]) -> dict[str, Any]:
        store = open_store(label)
        consumer = _Consumer()
        task = None
        try:
            if watch:
                ready = asyncio.Event()
                task = asyncio.create_task(consumer.consume(store, ready))
                await ready.wait()
            cpu, wall = time.process_time(), time.perf_counter()
            await work(store)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            out: dict[str, Any] = {"cpu_seconds": round(cpu, 4), "wall_seconds": round(wall, 4)}
            if watch:
                assert task is not None
                out["pod_events_during_run"] = len(consumer.events)
                out["pod_wakeups_during_run"] = consumer.wakeups
                await store.create(_POD)  # the control: the watch was live all along
                await asyncio.wait_for(consumer.saw_control.wait(), timeout=10)
                out["control_pod_seen"] = True
            return out
        finally:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            await store.close()

    writes_only = await fresh("a", False, lambda s: _write(s, writes))
    with_watch = await fresh("b", True, lambda s: _write(s, writes))
    idle = await fresh("c", True, lambda s: asyncio.sleep(with_watch["wall_seconds"]))
    extra = with_watch["cpu_seconds"] - writes_only["cpu_seconds"]
    return {
        "writes": writes,
        "writes_only": writes_only,
        "writes_with_pod_watch": with_watch,
        "pod_watch_without_writes": idle,
        "watch_extra_cpu_seconds": round(extra, 4),
        "watch_extra_cpu_per_write_us": round(extra / writes * 1e6, 3),
        "pod_events_delivered": with_watch["pod_events_during_run"],
        "pod_wakeups": with_watch["pod_wakeups_during_run"],
    }


def run(quick: bool = False) -> dict[str, Any]:
    writes = QUICK_WRITES if quick else WRITES

    async def main() -> dict[str, Any]:
        out = {"memory": await _run(lambda _label: MemoryStore(), writes)}
        with tempfile.TemporaryDirectory(prefix="dp-watch-") as tmp:
            from devplace.store._sqlite import SqliteStore

            out["sqlite"] = await _run(lambda label: SqliteStore(Path(tmp) / f"{label}.db"), writes)
        return out

    return asyncio.run(main())


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick=True), indent=2))
