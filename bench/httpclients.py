"""The store's HTTP client against httpx2 (issue #21): client CPU per exchange with devplace's API server.

One `devplace server --store memory` child process. In this process, the same ConfigMap is updated `n` times through
each client in turn (interleaved rounds, so drift in the machine's load hits both alike), and a watch of ConfigMaps
replays the same `n` earlier events through each (nothing else runs in this process meanwhile). Figures are this
process's CPU time (`time.process_time`) per exchange or per event, the least over the rounds: the server's side is
the same for both and is not counted. `exchanges_over_httpx2_*` are the ratios.

`RemoteStore` used httpx2 until issue #21; an agent spends most of its CPU on these exchanges and watch lines, which
is why the REST core got its own (`devplace.store._exchanges`). Nothing here asserts a time.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from devplace.store._exchanges import Exchanges
from tests.servers import spawn_server

__all__ = ["run"]

PATH = "/api/v1/namespaces/default/configmaps"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def _body(i: int, obj: dict[str, Any]) -> bytes:
    obj["data"]["n"] = str(i)
    return json.dumps(obj).encode()


async def _puts_httpx2(url: str, obj: dict[str, Any], n: int) -> tuple[float, dict[str, Any]]:
    async with httpx2.AsyncClient(base_url=url, headers={"Accept": "application/json"}) as client:
        started = time.process_time()
        for i in range(n):
            response = await client.put(f"{PATH}/bench", content=_body(i, obj), headers=HEADERS)
            obj = json.loads(response.content)
        return (time.process_time() - started) / n, obj


async def _puts_exchanges(url: str, obj: dict[str, Any], n: int) -> tuple[float, dict[str, Any]]:
    client = Exchanges(url, headers={"Accept": "application/json"})
    try:
        started = time.process_time()
        for i in range(n):
            reply = await client.request("PUT", f"{PATH}/bench", content=_body(i, obj), headers=HEADERS)
            obj = json.loads(reply.content)
        return (time.process_time() - started) / n, obj
    finally:
        await client.aclose()


async def _writer(url: str, n: int) -> None:
    client = Exchanges(url)
    try:
        obj = json.loads((await client.request("GET", f"{PATH}/watched")).content)
        for i in range(n):
            reply = await client.request("PUT", f"{PATH}/watched", content=_body(i, obj), headers=HEADERS)
            obj = json.loads(reply.content)
    finally:
        await client.aclose()


WATCH = {"watch": "true", "fieldSelector": "metadata.name=watched"}


async def _cpu_per_event(lines: AsyncIterator[str], n: int) -> float:
    """This process's CPU per event over the next `n` watch events of `lines` (each decoded, as a consumer would)."""
    seen, cpu = 0, 0.0
    while seen < n:
        started = time.process_time()
        line = await anext(lines)
        if line.strip():
            json.loads(line)
            seen += 1
        cpu += time.process_time() - started
    return cpu / n


async def _watch_httpx2(url: str, n: int, revision: str) -> float:
    params = {**WATCH, "resourceVersion": revision}
    async with (
        httpx2.AsyncClient(base_url=url, timeout=httpx2.Timeout(30, read=None)) as client,
        client.stream("GET", PATH, params=params) as response,
    ):
        return await _cpu_per_event(response.aiter_lines(), n)


async def _watch_exchanges(url: str, n: int, revision: str) -> float:
    client = Exchanges(url)
    try:
        stream = await client.stream("GET", PATH, params={**WATCH, "resourceVersion": revision})
        try:
            return await _cpu_per_event(stream.aiter_lines(), n)
        finally:
            await stream.aclose()
    finally:
        await client.aclose()


async def _measure(url: str, n: int, rounds: int) -> dict[str, Any]:
    setup = Exchanges(url)
    try:
        for name in ("bench", "watched"):
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"n": "0"}}
            await setup.request("POST", PATH, content=json.dumps(body).encode(), headers=HEADERS)
        obj = json.loads((await setup.request("GET", f"{PATH}/bench")).content)
    finally:
        await setup.aclose()
    puts: dict[str, list[float]] = {"httpx2": [], "exchanges": []}
    events: dict[str, list[float]] = {"httpx2": [], "exchanges": []}
    for _ in range(rounds):
        cpu, obj = await _puts_httpx2(url, obj, n)
        puts["httpx2"].append(cpu)
        cpu, obj = await _puts_exchanges(url, obj, n)
        puts["exchanges"].append(cpu)
        probe = Exchanges(url)
        try:
            current = json.loads((await probe.request("GET", f"{PATH}/watched")).content)
        finally:
            await probe.aclose()
        await _writer(url, n)  # the events both watches replay from `current`'s revision, read with no writer here
        for name, watch in (("httpx2", _watch_httpx2), ("exchanges", _watch_exchanges)):
            events[name].append(await watch(url, n, current["metadata"]["resourceVersion"]))
    put_us = {k: round(1e6 * min(v), 1) for k, v in puts.items()}
    event_us = {k: round(1e6 * min(v), 1) for k, v in events.items()}
    return {
        "put_client_cpu_us": put_us,
        "watch_event_client_cpu_us": event_us,
        "ratios": {
            "exchanges_over_httpx2_put": round(put_us["exchanges"] / put_us["httpx2"], 3),
            "exchanges_over_httpx2_watch_event": round(event_us["exchanges"] / event_us["httpx2"], 3),
        },
        "n": n,
        "rounds": rounds,
        "figure": "the least CPU per exchange over the rounds (the machine's other load only adds)",
    }


def run(quick: bool = False) -> dict[str, Any]:
    n, rounds = (50, 1) if quick else (500, 3)
    with spawn_server("memory") as url:
        return asyncio.run(_measure(url, n, rounds))


if __name__ == "__main__":
    print(json.dumps(run(), indent=2, sort_keys=True))
