"""DRA prepare benchmark: the kubelet's NodePrepareResources against its physical floor, in one run.

The agent serves the kubelet's DRA plugin (v1) on its unix socket over a sqlite store; one Instance of capacity 1 and
one ResourceClaim allocated to its device. Each timed call is a NodePrepareResources of that claim from a gRPC client
(devplace's own v1 stubs): the plugin GETs the claim, takes the slot by CAS, writes the CDI spec (atomic, fsync) and
its prepared state, and answers. Between calls, untimed, NodeUnprepareResources frees the slot and removes the files,
so every timed call does the whole work.

Floor, measured interleaved block by block in the same run and process: a bare grpc.aio unary echo on a unix socket
(no protobuf, no work) + a bare `store.get` of the claim + a bare `store.update` of an object the size of the
Instance (a holder flipped) + one `files.write_atomically` of a file the size of the spec with fsync (file and
directory, as the CDI spec). Goal: prepare p50 / (sum of the floor's p50s) <= 1.5. Figures are microseconds;
nothing here asserts a time.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from devplace.agent import Agent, AgentConfig, instance_name
from devplace.agent import _kubelets as kubelets
from devplace.api import dra_device
from devplace.clocks import SystemClock
from devplace.deviceplugin.dra.v1 import api_pb2, api_pb2_grpc
from devplace.discovery import World, builtin_registry
from devplace.files import write_atomically
from devplace.store import Store
from devplace.store._sqlite import SqliteStore

__all__ = ["run"]

BLOCK = 10


def _summary(samples: list[float]) -> dict[str, float]:
    us = sorted(s * 1e6 for s in samples)
    return {
        "p50_us": round(statistics.median(us), 1),
        "p99_us": round(us[min(len(us) - 1, int(0.99 * len(us)))], 1),
        "n": len(us),
    }


async def _echo_server(path: Path) -> grpc.aio.Server:
    async def echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return request

    handler = grpc.method_handlers_generic_handler("bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix://{path}")
    await server.start()
    return server


async def _settle(agent: Agent, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    streak = 0
    while streak < 3:
        if loop.time() > deadline:
            raise TimeoutError("the agent did not settle")
        await asyncio.sleep(0.01)
        streak = streak + 1 if agent.is_idle() else 0


async def _timed(samples: list[float], call: Callable[[], Awaitable[Any]]) -> None:
    start = time.perf_counter()
    await call()
    samples.append(time.perf_counter() - start)


async def _measure(root: Path, n: int) -> dict[str, Any]:
    store: Store = SqliteStore(root / "prepare.db")
    world = World()
    world.plug("cam-1", ["node-a"], {"ip": "10.0.0.1", "RESOLUTION": "1080p"})
    agent = Agent(
        AgentConfig(node="node-a", kubelet_dir=root / "kubelet", dra=True, cdi_dir=root / "cdi"),
        store,
        builtin_registry("node-a", world=world),
        SystemClock(),
    )
    await agent.start()
    try:
        await store.create(
            {
                "apiVersion": "devplace.io/v1alpha1",
                "kind": "Configuration",
                "metadata": {"name": "cams", "namespace": "default"},
                "spec": {"discoveryHandler": {"name": "sim", "discoveryDetails": ""}, "capacity": 1},
            }
        )
        name = instance_name("cams", "cam-1", "node-a", True)
        while agent.cache.instance("default", name) is None:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        await _settle(agent)
        claim = await store.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "cam", "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "cam", "exactly": {"deviceClassName": "cams"}}]}},
            }
        )
        claim["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "cam",
                            "driver": "devplace.io",
                            "pool": "node-a",
                            "device": dra_device(name, {}).name,
                        }
                    ]
                }
            }
        }
        claim = await store.update(claim)
        uid = claim["metadata"]["uid"]
        assert agent.dra is not None
        channel = grpc.aio.insecure_channel(f"unix://{agent.dra.endpoint}")
        stub = api_pb2_grpc.DRAPluginStub(channel)
        ref = api_pb2.Claim(namespace="default", name="cam", uid=uid)
        prepare_request = api_pb2.NodePrepareResourcesRequest(claims=[ref])
        unprepare_request = api_pb2.NodeUnprepareResourcesRequest(claims=[ref])

        answer = await stub.NodePrepareResources(prepare_request, timeout=45)
        if answer.claims[uid].error:
            raise RuntimeError(f"prepare failed: {answer.claims[uid].error}")
        spec_bytes = next((root / "cdi").iterdir()).read_bytes()
        await stub.NodeUnprepareResources(unprepare_request, timeout=45)

        echo_path = root / "echo.sock"
        echo_server = await _echo_server(echo_path)
        echo_channel = grpc.aio.insecure_channel(f"unix://{echo_path}")
        echo = echo_channel.unary_unary("/bench.Echo/Echo", None, None)
        payload = prepare_request.SerializeToString()
        instance = await store.get("Instance", name, "default")
        twin = await store.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "twin", "namespace": "default"}}
            | {"spec": instance["spec"]}
        )
        slot = f"{name}-0"

        async def bare_cas() -> None:
            nonlocal twin
            usage = twin["spec"]["deviceUsage"]
            usage[slot] = "" if usage[slot] else "D:default/cam:node-a"
            twin = await store.update(twin)

        floor_file = root / "floor" / "spec.json"
        floor_file.parent.mkdir(parents=True, exist_ok=True)

        async def bare_write() -> None:
            write_atomically(floor_file, spec_bytes, mode=0o644, sync="all")

        samples: dict[str, list[float]] = {k: [] for k in ("prepare", "echo", "get", "cas", "cdi_write")}
        errors = 0
        gc.collect()
        gc.freeze()
        try:
            while len(samples["prepare"]) < n:
                gc.collect()
                for _ in range(BLOCK):
                    start = time.perf_counter()
                    answer = await stub.NodePrepareResources(prepare_request, timeout=45)
                    samples["prepare"].append(time.perf_counter() - start)
                    errors += bool(answer.claims[uid].error)
                    await stub.NodeUnprepareResources(unprepare_request, timeout=45)
                gc.collect()
                for _ in range(BLOCK):
                    await _timed(samples["echo"], lambda: echo(payload))
                    await _timed(samples["get"], lambda: store.get("ResourceClaim", "cam", "default"))
                    await _timed(samples["cas"], bare_cas)
                    await _timed(samples["cdi_write"], bare_write)
        finally:
            gc.unfreeze()
        await channel.close(None)
        await echo_channel.close(None)
        await echo_server.stop(None)
    finally:
        await agent.stop()
        await store.close()
    figures = {k: _summary(v) for k, v in samples.items()}
    floor = sum(figures[k]["p50_us"] for k in ("echo", "get", "cas", "cdi_write"))
    return {
        **figures,
        "prepare_errors": errors,
        "floor_p50_us": round(floor, 1),
        "ratio_prepare_p50_to_floor": round(figures["prepare"]["p50_us"] / floor, 2),
        "goal_ratio": 1.5,
    }


def run(quick: bool = False) -> dict[str, Any]:
    n = 20 if quick else 400
    quiet = logging.getLogger(kubelets.__name__)
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the benchmark is the kubelet: no device-plugin kubelet.sock to warn about
    try:
        with tempfile.TemporaryDirectory(prefix="dp-bench-", dir="/tmp") as tmp:
            result = asyncio.run(_measure(Path(tmp), n))
    finally:
        quiet.setLevel(level)
    if result["prepare_errors"]:
        raise RuntimeError(f"{result['prepare_errors']} prepares failed")
    return {"n": n, **result}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
