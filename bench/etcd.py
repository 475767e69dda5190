"""etcd store benchmark: CAS update through the adapter against a bare etcd transaction, and a list of 10k objects.

Runs Debian's `etcd` (the binary `make test` installs) on free loopback ports with a temporary data directory on
disk, stopped by PID at the end. Both sides talk through the same gRPC connection (the store's own), so the ratio is
the adapter's cost: encoding, stamping, the guard and decoding the result.

- `cas_update`: `store.update` of an Instance with its current resourceVersion (one guarded transaction, the stored
  value remembered from the previous write). Yardstick `bare_txn`: the same transaction built by hand (compare
  mod_revision, put a body of the same size) on keys of its own, interleaved block by block with the store's writes
  so machine noise hits both alike. Goal: cas_update p50 <= 1.5x bare_txn p50.
- `cas_loop`: `store.cas` (get, decide, update) of one Instance, for scale: two round trips.
- `list`: `store.list` of 10k Instances (pages of 500 at one revision, decoded, filtered, sorted). Yardsticks: the
  same pages fetched bare (no decoding), and one unpaged Range of everything.

Figures are microseconds (p50/p99); `python -m bench etcd` writes them to JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from bench import measures
from devplace.store import cas
from devplace.store._etcd import EtcdStore
from devplace.store.etcdserverpb import rpc_pb2 as pb

__all__ = ["run"]

_BLOCK = 50  # writes per interleaved block


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def _etcd(directory: Path) -> Iterator[str]:
    """A single-member etcd on loopback; yields its client endpoint, stops it by PID."""
    with _etcd_process(directory) as (endpoint, _):
        yield endpoint


@contextlib.contextmanager
def _etcd_process(directory: Path) -> Iterator[tuple[str, int]]:
    """`_etcd`, yielding its PID beside the endpoint (for the CPU it uses)."""
    binary = shutil.which("etcd")
    if binary is None:
        raise SystemExit("etcd is not installed (make test installs Debian's etcd-server)")
    client, peer = _free_port(), _free_port()
    cmd = [
        binary,
        "--name=bench",
        f"--data-dir={directory}",
        f"--listen-client-urls=http://127.0.0.1:{client}",
        f"--advertise-client-urls=http://127.0.0.1:{client}",
        f"--listen-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-cluster=bench=http://127.0.0.1:{peer}",
        "--logger=zap",
        "--log-level=error",
    ]
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{client}/health", timeout=1) as reply:
                    if b'"true"' in reply.read():
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("etcd did not start")
            time.sleep(0.05)  # polling a child's startup, bounded by the deadline
        yield f"127.0.0.1:{client}", process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _timed(call: Any) -> tuple[int, Any]:
    started = time.perf_counter_ns()
    result = await call()
    return time.perf_counter_ns() - started, result


async def _cas(store: EtcdStore, n: int) -> dict[str, list[int]]:
    """Interleaved blocks of adapter updates and bare transactions on `n` objects each."""
    conn = store._conn
    latest = [await store.create(measures.instance(i)) for i in range(n)]
    bare_keys = [f"/bench-bare/{i:05d}".encode() for i in range(n)]
    bare_revisions = []
    for key, obj in zip(bare_keys, latest, strict=True):
        put = await conn.call("Put", pb.PutRequest(key=key, value=orjson.dumps(obj)))
        bare_revisions.append(put.header.revision)
    samples: dict[str, list[int]] = {"cas_update": [], "bare_txn": []}
    for start in range(0, n, _BLOCK):
        block = range(start, min(n, start + _BLOCK))
        gc.collect()
        for i in block:
            obj = latest[i]
            obj["status"]["writes"] += 1
            elapsed, latest[i] = await _timed(lambda obj=obj: store.update(obj))
            samples["cas_update"].append(elapsed)
        gc.collect()
        for i in block:
            obj = latest[i]
            body = orjson.dumps(obj)  # a body of the store's size, different from the key's current one
            key = bare_keys[i]
            request = pb.TxnRequest(
                compare=[
                    pb.Compare(key=key, target=pb.Compare.MOD, result=pb.Compare.EQUAL, mod_revision=bare_revisions[i])
                ],
                success=[pb.RequestOp(request_put=pb.PutRequest(key=key, value=body))],
                failure=[pb.RequestOp(request_range=pb.RangeRequest(key=key))],
            )
            elapsed, reply = await _timed(lambda request=request: conn.call("Txn", request))
            if not reply.succeeded:
                raise RuntimeError("the bare transaction's guard failed")
            bare_revisions[i] = reply.header.revision
            samples["bare_txn"].append(elapsed)

    def bump(obj: dict[str, Any]) -> dict[str, Any]:
        obj["status"]["writes"] += 1
        return obj

    samples["cas_loop"] = []
    for i in range(n):
        elapsed, _ = await _timed(
            lambda i=i: cas(store, measures.KIND, f"gpu-{i:05d}", measures.NAMESPACE, bump)  # type: ignore[arg-type]
        )
        samples["cas_loop"].append(elapsed)
    return samples


async def _list(store: EtcdStore, n: int, repeats: int) -> dict[str, list[int]]:
    conn = store._conn
    existing = len((await store.list(measures.KIND, measures.NAMESPACE)).items)
    for i in range(existing, n):
        await store.create(measures.instance(i))
    start, end = store._keys.span(measures.KIND, measures.NAMESPACE)
    samples: dict[str, list[int]] = {"list": [], "bare_paged_range": [], "bare_range": []}

    async def bare_pages() -> int:
        count, key, revision = 0, start, 0
        while True:
            reply = await conn.call(
                "Range", pb.RangeRequest(key=key, range_end=end, limit=store._page_size, revision=revision)
            )
            revision = revision or reply.header.revision
            count += len(reply.kvs)
            if not reply.more:
                return count
            key = reply.kvs[-1].key + b"\0"

    for _ in range(repeats):
        gc.collect()
        elapsed, listed = await _timed(lambda: store.list(measures.KIND, measures.NAMESPACE))
        if len(listed.items) != n:
            raise RuntimeError(f"listed {len(listed.items)} objects, expected {n}")
        samples["list"].append(elapsed)
        elapsed, count = await _timed(bare_pages)
        samples["bare_paged_range"].append(elapsed)
        elapsed, reply = await _timed(lambda: conn.call("Range", pb.RangeRequest(key=start, range_end=end)))
        samples["bare_range"].append(elapsed)
        if count != n or len(reply.kvs) != n:
            raise RuntimeError("a bare range saw another number of objects")
    return samples


def _ratio(samples: dict[str, Any], over: str, under: str, key: str) -> float:
    return round(samples[over][key] / samples[under][key], 2)


def run(quick: bool = False) -> dict[str, Any]:
    n_cas, n_list, repeats = (200, 1000, 3) if quick else (2000, 10_000, 10)
    with tempfile.TemporaryDirectory(prefix="bench-etcd-") as tmp, _etcd(Path(tmp) / "data") as endpoint:

        async def measure() -> dict[str, dict[str, list[int]]]:
            store = EtcdStore(f"etcd://{endpoint}")
            try:
                gc.freeze()
                return {"cas": await _cas(store, n_cas), "list": await _list(store, n_list, repeats)}
            finally:
                gc.unfreeze()
                await store.close()

        raw = asyncio.run(measure())
    cas_stats = {name: measures.stats(samples) for name, samples in raw["cas"].items()}
    list_stats = {name: measures.stats(samples) for name, samples in raw["list"].items()}
    return {
        "objects": {"cas": n_cas, "list": n_list},
        "cas": cas_stats,
        "list": list_stats,
        "ratios": {
            "cas_update_over_bare_txn_p50": _ratio(cas_stats, "cas_update", "bare_txn", "p50_us"),
            "cas_update_over_bare_txn_p99": _ratio(cas_stats, "cas_update", "bare_txn", "p99_us"),
            "list_over_bare_paged_range_p50": _ratio(list_stats, "list", "bare_paged_range", "p50_us"),
            "list_over_bare_range_p50": _ratio(list_stats, "list", "bare_range", "p50_us"),
        },
        "goal": "cas_update p50 <= 1.5x bare_txn p50",
    }
