"""API server benchmark: create, CAS update, get, list and watch latency through `devplace server` + RemoteStore.

For each backend (memory, sqlite) the same operations run twice in one run: on the raw store in this process, and
through a real `devplace server` child process on 127.0.0.1 serving a store of that backend, reached with the
`remote` backend (HTTP/1.1 keep-alive, JSON bodies, NDJSON watch). Each remote figure is reported with its ratio
to the raw operation's, measured in the same run on the same machine. `http_floor` is a GET /healthz round trip:
what HTTP and the ASGI stack cost before any store work, to tell transport from store cost.

Figures are microseconds (p50/p99 over N operations), measured by `bench.measures.store_latencies` on both sides.
Watch latency runs from the start of a write to the event reaching a watcher in this process (through the server's
NDJSON stream for the remote side). Nothing asserts a time.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2

from bench import measures
from devplace.store import open_store
from devplace.store._base import Store
from devplace.store._remote import RemoteStore

__all__ = ["run"]


async def _bench_store(store: Store, n: int, list_repeats: int) -> dict[str, dict[str, float]]:
    samples = await measures.store_latencies(store, n, list_repeats)
    return {op: measures.stats(values) for op, values in samples.items()}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def _server(store_url: str) -> Iterator[str]:
    """`devplace server` as a child process on a free loopback port; terminated (then killed) by PID."""
    with _server_process(store_url) as (base_url, _):
        yield base_url


@contextmanager
def _server_process(store_url: str) -> Iterator[tuple[str, int]]:
    """`_server`, yielding its PID beside the URL (for the CPU it uses)."""
    port = _free_port()
    cmd = [sys.executable, "-m", "devplace.cli", "server", "--store", store_url, "--port", str(port)]
    cmd += ["--log-level", "warning"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"devplace server exited with {proc.returncode}")
            try:
                if httpx2.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.TransportError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.05)
        yield base_url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


async def _http_floor(base_url: str, n: int) -> dict[str, float]:
    samples = []
    async with httpx2.AsyncClient(base_url=base_url) as client:
        await client.get("/healthz")
        for _ in range(n):
            elapsed, _ = await measures.timed(lambda: client.get("/healthz"))
            samples.append(elapsed)
    return measures.stats(samples)


async def _backend(name: str, directory: Path, n: int, list_repeats: int) -> dict[str, Any]:
    def url(tag: str) -> str:
        return "memory" if name == "memory" else f"sqlite:///{directory}/{name}-{tag}.db"

    raw_store = open_store(url("raw"))
    try:
        raw = await _bench_store(raw_store, n, list_repeats)
    finally:
        await raw_store.close()
    with _server(url("served")) as base_url:
        floor = await _http_floor(base_url, n)
        remote_store = RemoteStore(base_url)
        try:
            remote = await _bench_store(remote_store, n, list_repeats)
        finally:
            await remote_store.close()
    ratios = {op: round(remote[op]["p50_us"] / max(raw[op]["p50_us"], 0.01), 1) for op in measures.OPERATIONS}
    return {"raw": raw, "remote": remote, "http_floor": floor, "remote_over_raw_p50": ratios}


def run(quick: bool = False) -> dict[str, Any]:
    n = 30 if quick else 500
    list_repeats = 3 if quick else 20
    with tempfile.TemporaryDirectory(prefix="devplace-bench-server-") as tmp:
        results = {name: asyncio.run(_backend(name, Path(tmp), n, list_repeats)) for name in ("memory", "sqlite")}
    return {
        "objects": n,
        "list_repeats": list_repeats,
        "cpus": os.cpu_count(),
        "backends": results,
        "note": "remote = RemoteStore -> `devplace server` child process on 127.0.0.1 -> store of that backend; "
        "remote_over_raw_p50 is each remote p50 over the raw store's p50 for the same operation, same run",
    }
