"""ResourceSlice writes per device change (issue #26, benchmark 2): 1,000 devices on 100 nodes, one device changing.

The real publishers run over one memory store: per node the agent's `SlicePublisher` (its node's local pool) over its
own `NodeCache`, and the controller's `SharedSlices` (shared pools, one per node set). The cluster holds 900 local
Instances (9 per node) and 100 shared ones (10 groups of 10 nodes, 10 devices seen by every node of a group), each
Instance one device (capacity 1), so 100 local pools of one slice and 10 shared pools of one slice.

Start: every publisher probes the store (a probe slice created and deleted: `initial.probe_writes`) and writes its
pools. Then, one at a time, a device changes and the store's ResourceSlice watch counts the writes until every publisher
is idle again: a local device's properties change, a local device goes, a local device comes, a shared device's
properties change, a shared device loses one of its nodes (it moves to the pool of its new node set). Reported per kind
of change: writes (mean, max), slices written, and the slices that contained the device before or after (the goal: 1
write for a local device; for a shared one, only the slices that contain it). `latency_ms_p50` is the time from the
Instance write to the last slice write, for the record only. Figures are from this run; nothing here asserts a time.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from typing import Any

from devplace.agent._caches import NodeCache
from devplace.agent._slices import SlicePublisher
from devplace.api import normalize
from devplace.clocks import FakeClock
from devplace.controller._slices import SharedSlices
from devplace.store import MemoryStore, Store
from devplace.supervisors import Supervisor

GROUP = 10


def _configuration(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"discoveryHandler": {"name": "sim"}, "capacity": 1},
    }


def _instance(name: str, configuration: str, nodes: list[str], shared: bool, props: dict[str, str]) -> dict[str, Any]:
    return normalize(
        {
            "apiVersion": "devplace.io/v1alpha1",
            "kind": "Instance",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "configurationName": configuration,
                "nodes": nodes,
                "shared": shared,
                "capacity": 1,
                "deviceUsage": {f"{name}-0": ""},
                "brokerProperties": props,
            },
        }
    )


class _Bench:
    def __init__(self, store: Store, nodes: int, per_node: int) -> None:
        self.store = store
        self.nodes = [f"node-{i:03d}" for i in range(nodes)]
        self.per_node = per_node
        self.supervisor = Supervisor("controller")
        self.supervisors = [self.supervisor]
        self.publishers: list[SlicePublisher] = []
        self.shared = SharedSlices(store, self.supervisor, True)
        self.events: list[tuple[float, dict[str, Any]]] = []

    def idle(self) -> bool:
        return not self.shared.pending and not any(p.pending for p in self.publishers)

    async def settle(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        calm = 0
        while calm < 5:
            if time.monotonic() > deadline:
                raise RuntimeError("the slice publishers did not settle")
            await asyncio.sleep(0.002)
            calm = calm + 1 if self.idle() else 0

    async def populate(self) -> None:
        await self.store.create(_configuration("cams"))
        await self.store.create(_configuration("shared-cams"))
        for n, node in enumerate(self.nodes):
            for d in range(self.per_node):
                props = {"ip": f"10.{n}.0.{d}"}
                await self.store.create(_instance(f"cams-{n:03d}{d:03d}", "cams", [node], False, props))
        for g in range(0, len(self.nodes), GROUP):
            group = self.nodes[g : g + GROUP]
            for d in range(GROUP):
                name = f"shared-cams-{g:03d}{d:03d}"
                await self.store.create(_instance(name, "shared-cams", group, True, {"ip": f"10.{g}.1.{d}"}))

    async def start(self) -> None:
        for node in self.nodes:
            supervisor = Supervisor(f"agent {node}")
            self.supervisors.append(supervisor)
            cache = NodeCache(self.store, node, supervisor)
            await cache.start()
            publisher = SlicePublisher(node, self.store, cache, supervisor, True)
            await publisher.start()
            self.publishers.append(publisher)
        self.shared.start()

    async def watch(self, ready: asyncio.Event) -> None:
        async with self.store.watch("ResourceSlice") as events:
            ready.set()
            async for event in events:
                self.events.append((time.perf_counter(), event.object))

    async def change(self, mutate: Any, device: str) -> dict[str, Any]:
        """Apply one change, wait until the publishers are idle, and count the slice writes it caused."""
        before = await self._holding(device)
        seen = len(self.events)
        started = time.perf_counter()
        await mutate()
        await self.settle()
        await asyncio.sleep(0.01)  # the watch delivers the last events
        caused = self.events[seen:]
        after = await self._holding(device)
        return {
            "writes": len(caused),
            "slices_written": len({e["metadata"]["name"] for _, e in caused}),
            "slices_holding": len(before | after),
            "outside": len({e["metadata"]["name"] for _, e in caused} - (before | after)),
            "latency_ms": (caused[-1][0] - started) * 1000 if caused else 0.0,
        }

    async def _holding(self, device: str) -> set[str]:
        items = (await self.store.list("ResourceSlice")).items
        return {s["metadata"]["name"] for s in items if any(d["name"] == device for d in s["spec"].get("devices", []))}

    async def update_props(self, name: str, props: dict[str, str]) -> None:
        obj = await self.store.get("Instance", name, "default")
        obj["spec"]["brokerProperties"] = props
        await self.store.update(obj)

    async def set_nodes(self, name: str, nodes: list[str]) -> None:
        obj = await self.store.get("Instance", name, "default")
        obj["spec"]["nodes"] = nodes
        await self.store.update(obj)


def _summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    writes = [s["writes"] for s in samples]
    return {
        "n": len(samples),
        "writes_mean": round(statistics.fmean(writes), 3),
        "writes_max": max(writes),
        "slices_written_max": max(s["slices_written"] for s in samples),
        "slices_holding_max": max(s["slices_holding"] for s in samples),
        "writes_outside_holding_slices": sum(s["outside"] for s in samples),
        "latency_ms_p50": round(statistics.median(s["latency_ms"] for s in samples), 2),
    }


async def _measure(nodes: int, per_node: int, changes: int) -> dict[str, Any]:
    rng = random.Random(26)
    store = MemoryStore(clock=FakeClock())
    bench = _Bench(store, nodes, per_node)
    ready = asyncio.Event()
    watcher = asyncio.create_task(bench.watch(ready))
    await ready.wait()
    try:
        await bench.populate()
        started = time.perf_counter()
        await bench.start()
        await bench.settle()
        initial = {
            "seconds": round(time.perf_counter() - started, 3),
            "slices": len((await store.list("ResourceSlice")).items),
            "writes": len(bench.events),
            "probe_writes": sum(1 for _, e in bench.events if e["metadata"]["name"].startswith("devplace.io-probe-")),
        }
        samples: dict[str, list[dict[str, Any]]] = {
            "local_property": [],
            "local_gone": [],
            "local_new": [],
            "shared_property": [],
            "shared_node_left": [],
        }
        for i in range(changes):
            n, d = rng.randrange(nodes), rng.randrange(per_node)
            name = f"cams-{n:03d}{d:03d}"

            async def local_property(name: str = name, i: int = i) -> None:
                await bench.update_props(name, {"ip": f"10.9.{i % 250}.{i % 199}"})

            samples["local_property"].append(await bench.change(local_property, name))
            body = await store.get("Instance", name, "default")

            async def gone(name: str = name) -> None:
                await store.delete("Instance", name, "default")

            samples["local_gone"].append(await bench.change(gone, name))

            async def new(body: dict[str, Any] = body) -> None:
                fresh = dict(body)
                fresh["metadata"] = {"name": body["metadata"]["name"], "namespace": "default"}
                await store.create(fresh)

            samples["local_new"].append(await bench.change(new, name))
            g = rng.randrange(0, nodes, GROUP)
            shared = f"shared-cams-{g:03d}{rng.randrange(GROUP):03d}"

            async def shared_property(shared: str = shared, i: int = i) -> None:
                await bench.update_props(shared, {"ip": f"10.8.{i % 250}.1"})

            samples["shared_property"].append(await bench.change(shared_property, shared))
            group = bench.nodes[g : g + GROUP]

            async def node_left(shared: str = shared, group: list[str] = group) -> None:
                await bench.set_nodes(shared, group[:-1])

            samples["shared_node_left"].append(await bench.change(node_left, shared))

            async def node_back(shared: str = shared, group: list[str] = group) -> None:
                await bench.set_nodes(shared, group)

            await bench.change(node_back, shared)
        return {
            "nodes": nodes,
            "devices": nodes * per_node + nodes,
            "local_devices_per_node": per_node,
            "shared_devices": nodes,
            "shared_group_size": GROUP,
            "initial": initial,
            "changes": {kind: _summary(found) for kind, found in samples.items()},
            "goal_local_writes_per_change": 1,
            "local_goal_met": all(
                s["writes"] == 1 for kind in ("local_property", "local_gone", "local_new") for s in samples[kind]
            ),
            "shared_goal_met": all(
                s["outside"] == 0 and s["writes"] <= s["slices_holding"]
                for kind in ("shared_property", "shared_node_left")
                for s in samples[kind]
            ),
        }
    finally:
        for publisher in bench.publishers:
            publisher.slices.close()
        bench.shared.stop()
        for supervisor in bench.supervisors:
            await supervisor.stop()
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        await store.close()


def run(quick: bool = False) -> dict[str, Any]:
    if quick:
        return asyncio.run(_measure(nodes=20, per_node=9, changes=3))
    return asyncio.run(_measure(nodes=100, per_node=9, changes=30))


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick=True), indent=2))
