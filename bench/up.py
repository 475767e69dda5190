"""How soon `devplace up` answers kubectl, and how soon it stops (issue #29: an answer within 5 s of start).

Each run starts `devplace up --nodes N --port 0` as its own process in a fresh directory, polls `kubectl get nodes`
against the kubeconfig it writes until every node is listed, then sends SIGTERM and waits for the exit. Reported per
run and as medians: seconds from spawn to the kubeconfig, to the first kubectl answer listing every node, and from
SIGTERM to the exit (with its code); beside them, the seconds a bare `python -c 'import devplace.cli'` takes in the
same run (the floor any CLI start pays) and kubectl's own round trip once up is running (`kubectl version
--client` would not touch the server; `get nodes` on a running up does). A run that does not answer within
`LIMIT` seconds is reported as such, never hidden.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RUNS, NODES = 5, 4
QUICK = (1, 2)
LIMIT = 60.0
GOAL = 5.0
"""Seconds from start to kubectl's first answer that issue #29 asks for."""


async def _kubectl(directory: Path, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        shutil.which("kubectl") or "kubectl",
        "--kubeconfig",
        str(directory / "devplace.kubeconfig"),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=directory,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def _import_floor() -> float:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import devplace.cli")
    await proc.wait()
    return time.perf_counter() - started


async def _one(nodes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="devplace-bench-up-") as tmp:
        directory = Path(tmp)
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "devplace.cli",
            "up",
            "--nodes",
            str(nodes),
            "--port",
            "0",
            cwd=directory,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        out: dict[str, Any] = {"kubeconfig_s": None, "first_answer_s": None, "stop_s": None, "exit_code": None}
        try:
            wanted = sorted(f"node/node-{i}" for i in range(1, nodes + 1))
            while time.perf_counter() - started < LIMIT and proc.returncode is None:
                if out["kubeconfig_s"] is None and (directory / "devplace.kubeconfig").exists():
                    out["kubeconfig_s"] = time.perf_counter() - started
                if out["kubeconfig_s"] is not None:
                    code, text = await _kubectl(directory, "get", "nodes", "-o", "name")
                    if code == 0 and sorted(text.split()) == wanted:
                        out["first_answer_s"] = time.perf_counter() - started
                        break
                await asyncio.sleep(0.05)
            if out["first_answer_s"] is not None:
                before = time.perf_counter()
                await _kubectl(directory, "get", "nodes", "-o", "name")
                out["kubectl_round_trip_s"] = time.perf_counter() - before
        finally:
            if proc.returncode is None:
                stopping = time.perf_counter()
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), LIMIT)
                    out["stop_s"] = time.perf_counter() - stopping
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
            out["exit_code"] = proc.returncode
        return out


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


async def _measure(runs: int, nodes: int) -> dict[str, Any]:
    floors = [await _import_floor() for _ in range(runs)]
    results = [await _one(nodes) for _ in range(runs)]
    first = _median([r["first_answer_s"] for r in results])
    return {
        "runs": runs,
        "nodes": nodes,
        "import_floor_s": _median(list(floors)),
        "first_answer_s": first,
        "kubeconfig_s": _median([r["kubeconfig_s"] for r in results]),
        "stop_s": _median([r["stop_s"] for r in results]),
        "kubectl_round_trip_s": _median([r.get("kubectl_round_trip_s") for r in results]),
        "answered": sum(1 for r in results if r["first_answer_s"] is not None),
        "clean_exits": sum(1 for r in results if r["exit_code"] == 0),
        "goal_first_answer_s": GOAL,
        "meets_goal": first is not None and first <= GOAL,
        "per_run": results,
    }


def run(quick: bool = False) -> dict[str, Any]:
    runs, nodes = QUICK if quick else (RUNS, NODES)
    return asyncio.run(_measure(runs, nodes))
