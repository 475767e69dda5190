"""How the simulator grows: generated scenarios at 100 / 1,000 / 10,000 devices (nodes = devices / 10).

Each size is `devplace.sim.generate_scenario(nodes=devices // 10, devices=devices)` run by `demo.ScenarioRun` on the
memory store, as `devplace sim run` runs it: every node a real agent and a simulated kubelet, every step settled and
checked. Each size runs in a child process of its own (`python -m bench.sim --one N`), which reports each step as it
ends, so sizes do not share a heap and a size can be stopped whatever it is doing. Per size it reports:
- `wall_seconds` and `seconds_per_event` (events: the scenario's steps, its devices plugged at the start and its pods,
  counted here);
- `settle_seconds`: from the fleet's start until the first step (the Configurations applied: every device an
  Instance, every plugin registered, every kubelet's Node written) has settled: the issue's "10,000 devices on 1,000
  nodes settle in under a minute";
- `peak_mib`: tracemalloc's peak over a second run of the size with tracemalloc on (tracemalloc slows Python down
  2-3x, so every time above comes from the run without it; `tracemalloc_overhead` is the traced run's wall time over
  the untraced one's); `peak_rss_mib`: the untraced child's largest resident size, sampled twice a second (known even
  for a size that was stopped);
- `ok`: whether every expectation held; `steps`: each step's title and wall seconds.
A size that has not finished within `BUDGET` seconds, or whose process grew past `MEMORY_LIMIT` bytes resident, is
stopped (the child is killed) and reported with `finished: false`, `stopped` (`time` or `memory`), the resident
memory it had reached and the steps it got through (measured, not extrapolated); larger sizes are then skipped
(`skipped`).

Growth: `growth["1000/100"]` and `growth["10000/1000"]` divide the larger size's wall time, time per event and peak
memory by the smaller's. The issue's goal is near-linear: 10x devices, at most 12x time and memory
(`within_goal`). Nothing here asserts a time.

The transport between kubelets and agents is the generated scenario's (`sim.generate_scenario`: real gRPC on unix
sockets below 50 nodes, in process from 50) unless `DEVPLACE_BENCH_SIM_TRANSPORT` names one (`unix`, `inprocess`);
each size reports it.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import yaml

from devplace.demo import ScenarioRun
from devplace.sim import generate_scenario, load_scenario

SIZES = tuple(int(n) for n in os.environ.get("DEVPLACE_BENCH_SIM_SIZES", "100,1000,10000").split(","))
"""Devices per size (`DEVPLACE_BENCH_SIM_SIZES=100,1000` for a shorter run)."""
QUICK_SIZES = (10, 20, 40)
BUDGET = float(os.environ.get("DEVPLACE_BENCH_SIM_BUDGET", "1800"))
"""Wall seconds a size may take before it is stopped (quick mode: 120)."""
MEMORY_LIMIT = int(float(os.environ.get("DEVPLACE_BENCH_SIM_MEMORY_GIB", "6")) * 2**30)
"""Resident bytes past which a size is stopped (a guard for a shared machine)."""
TRANSPORT = os.environ.get("DEVPLACE_BENCH_SIM_TRANSPORT") or None
ROOT = Path(__file__).resolve().parents[1]
"""Where `python -m bench.sim` runs (the repository)."""
GOAL = 12.0
"""The issue's bound on growth for 10x the devices."""


def _events(document: dict[str, Any]) -> int:
    spec = document["spec"]
    return len(spec["steps"]) + len(spec["devices"]) + sum(1 for s in spec["steps"] if "run-pod" in s)


async def _child(devices: int, traced: bool) -> None:
    """One size, in this (child) process: a JSON line per step as it ends, then one with the totals."""
    nodes = max(1, devices // 10)
    document = generate_scenario(nodes=nodes, devices=devices, seed=0, transport=TRANSPORT)  # type: ignore[arg-type]
    scenario = load_scenario(yaml.safe_dump(document, sort_keys=False), f"generated-{devices}")
    started = 0.0

    def step(record: Any, sample: Any) -> None:
        line = {"step": record.title, "wall_seconds": round(record.wall_seconds, 3), "ok": record.ok}
        print(json.dumps({**line, "at": round(time.perf_counter() - started, 3)}), flush=True)

    runner = ScenarioRun(scenario, on_step=step)
    gc.collect()
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    report = await runner.run()
    wall = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] if traced else 0
    totals = {
        "nodes": nodes,
        "events": _events(document),
        "steps_total": len(scenario.spec.steps),
        "transport": scenario.spec.settings.transport,
        "ok": report.ok,
        "wall_seconds": round(wall, 3),
        "peak_mib": round(peak / 2**20, 2) if traced else None,
    }
    print(json.dumps({"totals": totals}), flush=True)


async def _run(devices: int, budget: float, traced: bool) -> dict[str, Any]:
    """Run one size in a child process, stopped (killed: it is ours) past `budget` seconds or `MEMORY_LIMIT`."""
    command = [sys.executable, "-m", "bench.sim", "--one", str(devices), *(["--traced"] if traced else [])]
    started = time.perf_counter()
    child = await asyncio.create_subprocess_exec(*command, cwd=ROOT, stdout=asyncio.subprocess.PIPE)
    assert child.stdout is not None
    steps: list[dict[str, Any]] = []
    totals: dict[str, Any] = {}
    peak_rss = 0

    async def read() -> None:
        assert child.stdout is not None
        async for raw in child.stdout:
            line = json.loads(raw)
            if "totals" in line:
                totals.update(line["totals"])
            else:
                steps.append(line)

    reader = asyncio.ensure_future(read())
    stopped = None
    while not reader.done():
        peak_rss = max(peak_rss, _resident(child.pid))
        if peak_rss > MEMORY_LIMIT:
            stopped = "memory"
        elif time.perf_counter() - started > budget:
            stopped = "time"
        if stopped is not None:
            child.kill()
            break
        await asyncio.wait({reader}, timeout=0.5)
    await child.wait()
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    elapsed = round(time.perf_counter() - started, 3)
    finished = stopped is None and bool(totals)
    nodes = max(1, devices // 10)
    document = generate_scenario(nodes=nodes, devices=devices, seed=0, transport=TRANSPORT)  # type: ignore[arg-type]
    events = _events(document)
    wall = float(totals["wall_seconds"]) if finished else elapsed
    out: dict[str, Any] = {
        "devices": devices,
        "nodes": nodes,
        "events": events,
        "finished": finished,
        "stopped": stopped,
        "transport": document["spec"]["settings"].get("transport", "unix"),
        "ok": finished and bool(totals.get("ok")),
        "wall_seconds": wall,
        "seconds_per_event": round(wall / events, 5) if events else None,
        "settle_seconds": steps[0]["at"] if steps else None,
        "steps_done": len(steps),
        "steps_total": len(document["spec"]["steps"]),
        "steps": steps,
        "peak_rss_mib": round(peak_rss / 2**20, 1),
    }
    if traced:
        out["peak_mib"] = totals.get("peak_mib")
    return out


def _resident(pid: int) -> int:
    """Resident bytes of process `pid` now (Linux /proc; 0 elsewhere or once it is gone)."""
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def _ratio(big: dict[str, Any], small: dict[str, Any], key: str) -> float | None:
    if not (big.get("finished") and small.get("finished")) or not small.get(key) or big.get(key) is None:
        return None
    return round(float(big[key]) / float(small[key]), 2)


async def _measure(sizes: tuple[int, ...], budget: float) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    skipped: list[int] = []
    for devices in sizes:
        if results and not results[-1]["finished"]:
            skipped.append(devices)
            continue
        timed = await _run(devices, budget, traced=False)
        if timed["finished"]:
            traced = await _run(devices, budget, traced=True)
            timed["peak_mib"] = traced.get("peak_mib") if traced["finished"] else None
            timed["tracemalloc_overhead"] = (
                round(traced["wall_seconds"] / timed["wall_seconds"], 2) if traced["finished"] else None
            )
        else:
            timed["peak_mib"] = timed["tracemalloc_overhead"] = None
        results.append(timed)
    growth: dict[str, dict[str, Any]] = {}
    for small, big in itertools.pairwise(results):
        figures = {
            "wall": _ratio(big, small, "wall_seconds"),
            "per_event": _ratio(big, small, "seconds_per_event"),
            "peak_memory": _ratio(big, small, "peak_mib"),
            "peak_rss": _ratio(big, small, "peak_rss_mib"),
            "devices": round(big["devices"] / small["devices"], 2),
        }
        wall, memory = figures["wall"], figures["peak_memory"]
        figures["within_goal"] = None if wall is None or memory is None else wall <= GOAL and memory <= GOAL
        growth[f"{big['devices']}/{small['devices']}"] = figures
    largest = results[-1]
    return {
        "sizes": results,
        "skipped": skipped,
        "growth": growth,
        "goal": f"10x devices -> at most {GOAL:g}x wall time and peak memory",
        "largest_settled": {
            "devices": largest["devices"],
            "settle_seconds": largest["settle_seconds"],
            "under_a_minute": largest["settle_seconds"] is not None and largest["settle_seconds"] < 60.0,
        },
        "budget_seconds": budget,
        "cpus": os.cpu_count(),
    }


def run(quick: bool = False) -> dict[str, Any]:
    sizes, budget = (QUICK_SIZES, 120.0) if quick else (SIZES, BUDGET)
    return asyncio.run(_measure(sizes, budget))


if __name__ == "__main__":
    if "--one" in sys.argv:  # a child of `_run`
        asyncio.run(_child(int(sys.argv[sys.argv.index("--one") + 1]), "--traced" in sys.argv))
    else:
        print(json.dumps(run(), indent=2))
