"""What an idle fleet costs: CPU seconds per wall second of a settled `Fleet` that nothing happens to.

A fleet of `NODES` nodes (a real agent and a simulated kubelet each, over real gRPC) with `CONFIGURATIONS`
Configurations, each discovering one device every node sees (so every node serves one device plugin per
Configuration), is settled and then left alone for `SECONDS` of wall time. The process's CPU time over that window
(`time.process_time()`, every thread: gRPC's pollers too) divided by the window is the figure the issue asks to be
near zero: an idle part should sleep on events, not poll. Store writes during the window must be zero (an idle
fleet that writes is not idle).

The fake clock does not move during the window: only real-time loops can spend CPU here.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from devplace.sim import Fleet

NODES, CONFIGURATIONS, SECONDS = 100, 10, 10.0
QUICK = (8, 2, 1.0)


def _configuration(index: int) -> str:
    return f"""
apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: idle-{index}
  namespace: default
spec:
  discoveryHandler:
    name: sim
    discoveryDetails: "kind: idle-{index}"
  capacity: 2
"""


async def _measure(nodes: int, configurations: int, seconds: float) -> dict[str, Any]:
    names = [f"node-{i:03d}" for i in range(nodes)]
    async with Fleet(resource_prefix="akri.sh") as fleet:
        started = time.perf_counter()
        for name in names:
            fleet.add_node(name)
        for index in range(configurations):
            fleet.plug(f"idle-device-{index}", nodes=names, properties={"kind": f"idle-{index}"})
            await fleet.apply(_configuration(index))
        await fleet.settle(timeout=600.0)
        settled_after = time.perf_counter() - started
        instances = len(await fleet.list("Instance"))
        plugins = sum(len(fleet.kubelet(name).endpoints()) for name in names)
        revision = await fleet.store.revision()
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        writes = await fleet.store.revision() - revision
    return {
        "nodes": nodes,
        "configurations": configurations,
        "instances": instances,
        "device_plugins": plugins,
        "setup_seconds": round(settled_after, 3),
        "idle_wall_seconds": round(wall, 3),
        "idle_cpu_seconds": round(cpu, 4),
        "cpu_per_wall_second": round(cpu / wall, 5),
        "store_writes_while_idle": writes,
    }


def run(quick: bool = False) -> dict[str, Any]:
    nodes, configurations, seconds = QUICK if quick else (NODES, CONFIGURATIONS, SECONDS)
    return asyncio.run(_measure(nodes, configurations, seconds))


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
