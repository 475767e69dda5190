"""An idle node agent's footprint (issue #21): resident memory and CPU with three devices, settled.

`devplace server` (memory store), one node's `devplace kubelet-sim` and `devplace agent` as processes, as on a node;
one debugEcho Configuration of three devices. Once the three Instances exist and the kubelet-sim sees their plugins,
the agent's RSS (VmRSS) is sampled every 0.5 s for `seconds`: `agent_rss_mib` is the peak over the samples (the
goal: <= 55 MiB; Akri's Rust agent requests 11 MiB and is limited to 79), and `agent_idle_cpu_ms_per_s` its CPU
while nothing changes (the bench's agents look at PodResources every 0.1 s: `bench.distributed.AGENT_ARGS`). The
agent is `devplace agent` as a program, so it runs as what the command re-executes itself as once its options are
checked (`devplace.cli._agentruns`, without the typer application). `import_rss_mib` is a fresh interpreter's RSS
after `import devplace.agent`, after `import devplace.cli._agentruns` (what the agent's process loads before it
imports the agent), and after `import devplace.cli._app` (the whole CLI: what `devplace agent` parses its options with),
against a bare interpreter's: what the code costs before any work. Nothing here asserts a size or a time.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

from bench.distributed import cluster, configuration, instances_seen_by, plugins_served, short_dir
from devplace.store import open_store

__all__ = ["run"]

DEVICES = 3
GOAL_MIB = 55


def _import_rss(module: str | None) -> float:
    """VmRSS of a fresh interpreter after importing `module` (not ru_maxrss: Linux carries it over from the
    parent across fork and exec)."""
    code = (
        "import " + module + "\n" if module else ""
    ) + "print([l for l in open('/proc/self/status') if l.startswith('VmRSS:')][0].split()[1])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return round(int(out) / 1024, 1)


async def _idle_agent(seconds: float) -> dict[str, Any]:
    with short_dir() as root:
        async with cluster("sqlite", root, ["node-0"], control_plane=False) as made:
            store = open_store(made.url)
            try:
                descriptions = [f"dev{i}" for i in range(DEVICES)]
                await store.create(configuration("idle", descriptions, 1))
                names = await instances_seen_by(made, store, "idle", DEVICES)
                await plugins_served(made, ["node-0"], names)
            finally:
                await store.close()
            agent = made.agents["node-0"]
            await asyncio.sleep(1.0)  # settling: the last registrations and ListAndWatch sends
            samples: list[int] = []
            cpu_before = agent.cpu_seconds()
            started = time.perf_counter()
            while time.perf_counter() - started < seconds:
                samples.append(agent.rss_bytes())
                await asyncio.sleep(0.5)  # sampling period
            cpu = agent.cpu_seconds() - cpu_before
            wall = time.perf_counter() - started
    return {
        "agent_rss_mib": round(max(samples) / 2**20, 1),
        "agent_rss_mib_mean": round(sum(samples) / len(samples) / 2**20, 1),
        "agent_idle_cpu_ms_per_s": round(1000 * cpu / wall, 2),
        "samples": len(samples),
    }


def run(quick: bool = False) -> dict[str, Any]:
    seconds = 2.0 if quick else 10.0
    result = asyncio.run(_idle_agent(seconds))
    result["import_rss_mib"] = {
        "bare_interpreter": _import_rss(None),
        "devplace.agent": _import_rss("devplace.agent"),
        "devplace.cli._agentruns": _import_rss("devplace.cli._agentruns"),
        "devplace.cli._app": _import_rss("devplace.cli._app"),
    }
    result["devices"] = DEVICES
    result["goal_agent_rss_mib"] = GOAL_MIB
    return result


if __name__ == "__main__":
    print(json.dumps(run(), indent=2, sort_keys=True))
