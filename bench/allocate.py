"""Allocate benchmark: the node agent's claim path, contention between nodes, and discovery churn.

1. Allocate latency: the kubelet's Allocate through gRPC on a unix socket to an IL plugin of a real agent, whose
   claim is a CAS on an Instance in a sqlite store (capacity 1, released between calls outside the timing).
   Its physical floor is measured in the same run, interleaved block by block: a bare grpc.aio unary echo on a
   unix socket (no protobuf, no work) plus a bare `SqliteStore.update` of the same Instance in the same store
   (an annotation flipped, so the store's watchers cost the same). Goal:
   Allocate p50 / (echo p50 + CAS p50) <= 1.5.
   For reference (not a floor), in the same blocks: a bare DevicePlugin servicer on its own unix socket in the same
   process whose Allocate does one `update` of a same-sized object in the same store (so the same store watchers
   wake; the agent has nothing to react to) and returns a prebuilt answer; each bare call is followed, untimed, by a
   foreign write of the Instance that the agent catches up with, as each Allocate is by its release. It shows what
   the transport, protobuf and a CAS inside an RPC cost on this machine before any agent logic: the agent's own
   share is `allocate - reference_bare_servicer` (reported as `agent_us`).
2. Contention: 8 agents (8 nodes) on one sqlite store, each allocating through its CL plugin against 1 Instance
   of capacity 4 and releasing again: claims per second. Zero double-booking is asserted twice: no claim ever
   returns a slot another node holds at that moment, and every Instance state in the store's watch holds at
   most 4 slots; the final deviceUsage is checked against what the clients think they hold.
3. Discovery churn: N devices appear on a node in the simulated World: time until all N Instances exist, and
   until the agent is idle again (its N IL plugins started).

Figures are microseconds (latency) or seconds; nothing here asserts a time. The benchmark is the agents' kubelet (it
calls their plugins itself), so their warning that kubelet.sock is missing is silenced while it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from devplace.agent import Agent, AgentConfig
from devplace.agent import _instances as instances
from devplace.agent import _kubelets as kubelets
from devplace.agent import _slots as slots
from devplace.agent._servers import endpoint_name
from devplace.clocks import SystemClock
from devplace.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from devplace.discovery import World, builtin_registry
from devplace.store import Store, cas
from devplace.store._sqlite import SqliteStore

__all__ = ["run"]

PREFIX = "devplace.io"


def _configuration(name: str, capacity: int, unique: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "discoveryHandler": {"name": "sim", "discoveryDetails": ""},
            "capacity": capacity,
            "uniqueDevices": unique,
            "brokerProperties": {"RESOLUTION": "1080p"},
        },
    }


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(values_s: list[float]) -> dict[str, float]:
    us = [v * 1e6 for v in values_s]
    return {"p50_us": round(statistics.median(us), 1), "p99_us": round(_percentile(us, 0.99), 1), "n": len(us)}


async def _settle(*agents: Agent, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    streak = 0
    while streak < 3:
        if loop.time() > deadline:
            raise TimeoutError("agents did not settle")
        await asyncio.sleep(0.01)
        streak = streak + 1 if all(a.is_idle() for a in agents) else 0


async def _start_agent(node: str, store: Store, world: World, root: Path) -> Agent:
    clock = SystemClock()
    agent = Agent(
        AgentConfig(node=node, kubelet_dir=root / node, resource_prefix=PREFIX),
        store,
        builtin_registry(node, world=world),
        clock,
    )
    await agent.start()
    return agent


def _channel(agent: Agent, kind: str, name: str) -> grpc.aio.Channel:
    socket = agent.plugin_dir / endpoint_name(kind, "default", name, agent.plugin_dir)
    return grpc.aio.insecure_channel(f"unix://{socket}")


# -- 1. Allocate latency and its floor ----------------------------------------------------------------------


async def _echo_server(path: Path) -> grpc.aio.Server:
    async def echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return request

    handler = grpc.method_handlers_generic_handler("bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix://{path}")
    await server.start()
    return server


class _BareServicer(api_pb2_grpc.DevicePluginServicer):
    """Allocate = one CAS of `obj` (a slot's holder flipped) in `store` and a prebuilt answer: no agent logic."""

    def __init__(self, store: Store, obj: dict[str, Any], slot: str, answer: api_pb2.AllocateResponse) -> None:
        self.store = store
        self.obj = obj
        self.slot = slot
        self.answer = answer

    async def Allocate(
        self, request: api_pb2.AllocateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> api_pb2.AllocateResponse:
        usage = self.obj["spec"]["deviceUsage"]
        usage[self.slot] = "" if usage[self.slot] else "node-a"
        self.obj = await self.store.update(self.obj)
        return self.answer


async def _bare_server(path: Path, servicer: _BareServicer) -> grpc.aio.Server:
    server = grpc.aio.server()
    api_pb2_grpc.add_DevicePluginServicer_to_server(servicer, server)
    server.add_insecure_port(f"unix://{path}")
    await server.start()
    return server


async def _latency(root: Path, n: int) -> dict[str, Any]:
    store = SqliteStore(root / "latency.db")
    world = World()
    world.plug("cam-1", ["node-a"], {"ip": "10.0.0.1"})
    agent = await _start_agent("node-a", store, world, root)
    await store.create(_configuration("cams", 1))
    await _settle(agent)
    name = instances.instance_name("cams", "cam-1", "node-a", True)
    slot = f"{name}-0"
    channel = _channel(agent, "il", name)
    stub = api_pb2_grpc.DevicePluginStub(channel)
    request = api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=[slot])])

    echo_path = root / "echo.sock"
    echo_server = await _echo_server(echo_path)
    echo_channel = grpc.aio.insecure_channel(f"unix://{echo_path}")
    echo = echo_channel.unary_unary("/bench.Echo/Echo", None, None)
    payload = request.SerializeToString()

    answer = await stub.Allocate(request)  # the agent's answer, handed out by the bare servicer as is
    twin = await store.get("Instance", name, "default")
    twin_obj = await store.create(  # the Instance's body under a kind the agent does not watch
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "bench-twin", "namespace": "default"},
            "spec": twin["spec"],
        }
    )
    bare_path = root / "bare.sock"
    bare_servicer = _BareServicer(store, twin_obj, slot, answer)  # type: ignore[abstract]  # serves Allocate only
    bare_server = await _bare_server(bare_path, bare_servicer)
    bare_channel = grpc.aio.insecure_channel(f"unix://{bare_path}")
    bare = api_pb2_grpc.DevicePluginStub(bare_channel)

    async def foreign_write(change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> None:
        """An untimed write of the Instance by someone else; returns once the agent has seen it."""
        stored = (await cas(store, "Instance", name, "default", change)).object
        rv = int(stored["metadata"]["resourceVersion"])
        while (record := agent.cache.instance("default", name)) is None or record.resource_version < rv:  # noqa: ASYNC110
            await asyncio.sleep(0)

    def free(obj: dict[str, Any]) -> dict[str, Any] | None:
        usage = slots.Usage.parse(name, 1, obj["spec"]["deviceUsage"])
        released = slots.release_slot(usage, slot, slots.IL("node-a"))
        if released is None:
            return None
        obj["spec"]["deviceUsage"] = released.to_wire()
        return obj

    def touch(obj: dict[str, Any]) -> dict[str, Any]:
        """What follows each bare call: a write like the release that follows each Allocate, changing no slot."""
        flip = (obj["metadata"].get("annotations") or {}).get("bench") == "0"
        obj["metadata"]["annotations"] = {"bench": "1" if flip else "0"}
        return obj

    async def release() -> None:
        await foreign_write(free)

    allocate_s: list[float] = []
    echo_s: list[float] = []
    cas_s: list[float] = []
    bare_s: list[float] = []
    await release()
    for _ in range(5):  # warm up every path
        await stub.Allocate(request)
        await release()
        await echo(payload)
        await bare.Allocate(request)
    gc.collect()
    gc.disable()
    try:
        block = 20
        for _ in range(max(1, n // block)):
            for _ in range(block):
                start = time.perf_counter()
                await stub.Allocate(request)
                allocate_s.append(time.perf_counter() - start)
                await release()
            for _ in range(block):
                start = time.perf_counter()
                await echo(payload)
                echo_s.append(time.perf_counter() - start)
            for _ in range(block):
                start = time.perf_counter()
                await bare.Allocate(request)
                bare_s.append(time.perf_counter() - start)
                await foreign_write(touch)
            # the bare CAS: the same Instance in the same store (so the same watchers), an annotation flipped
            floor_obj = await store.get("Instance", name, "default")
            for i in range(block):
                floor_obj["metadata"]["annotations"] = {"bench": str(i % 2)}
                start = time.perf_counter()
                floor_obj = await store.update(floor_obj)
                cas_s.append(time.perf_counter() - start)
            await _settle(agent)
    finally:
        gc.enable()
    await channel.close(None)
    await echo_channel.close(None)
    await echo_server.stop(None)
    await bare_channel.close(None)
    await bare_server.stop(None)
    await agent.stop()
    await store.close()
    out: dict[str, Any] = {
        "allocate": _summary(allocate_s),
        "floor_grpc_echo": _summary(echo_s),
        "floor_sqlite_cas": _summary(cas_s),
        "reference_bare_servicer": _summary(bare_s),
    }
    floor = out["floor_grpc_echo"]["p50_us"] + out["floor_sqlite_cas"]["p50_us"]
    out["ratio_allocate_p50_to_floor"] = round(out["allocate"]["p50_us"] / floor, 2)
    out["ratio_bare_servicer_p50_to_floor"] = round(out["reference_bare_servicer"]["p50_us"] / floor, 2)
    out["agent_us"] = round(out["allocate"]["p50_us"] - out["reference_bare_servicer"]["p50_us"], 1)
    out["goal_ratio"] = 1.5
    return out


# -- 2. Contention ------------------------------------------------------------------------------------------


async def _contention(root: Path, seconds: float, node_count: int = 8, capacity: int = 4) -> dict[str, Any]:
    store = SqliteStore(root / "contention.db")
    world = World()
    nodes = [f"node-{i}" for i in range(node_count)]
    world.plug("cam-1", nodes)
    agents = [await _start_agent(node, store, world, root) for node in nodes]
    await store.create(_configuration("cams", capacity))
    await _settle(*agents)
    name = instances.instance_name("cams", "cam-1", nodes[0], True)

    violations: list[str] = []
    states = 0

    # Registered before any claim, so every state the Instance goes through is audited.
    audited = store.watch("Instance", fields=f"metadata.name={name}")
    await audited.__aenter__()

    last_audited = 0

    async def audit() -> None:
        nonlocal states, last_audited
        try:
            async for event in audited:
                last_audited = event.revision
                usage = event.object["spec"].get("deviceUsage") or {}
                states += 1
                held = [h for h in usage.values() if h]
                if len(held) > capacity:
                    violations.append(f"revision {event.revision}: {len(held)} slots held")
        finally:
            await audited.__aexit__(None, None, None)

    auditor = asyncio.create_task(audit())
    holding: dict[str, str] = {}  # slot -> node, as the clients know it
    claims = 0
    refusals = 0
    stop_at = time.perf_counter() + seconds

    async def client(agent: Agent) -> None:
        nonlocal claims, refusals
        channel = _channel(agent, "cl", "cams")
        stub = api_pb2_grpc.DevicePluginStub(channel)
        request = api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=[name])])
        holder = slots.CL(name, agent.node)
        try:
            while time.perf_counter() < stop_at:
                try:
                    response = await stub.Allocate(request)
                except grpc.aio.AioRpcError:
                    refusals += 1
                    await asyncio.sleep(0.001)
                    continue
                slot = response.container_responses[0].annotations["devplace.io/slots"]
                if slot in holding:
                    violations.append(f"{slot} granted to {agent.node} while {holding[slot]} holds it")
                holding[slot] = agent.node
                claims += 1
                await asyncio.sleep(0)
                del holding[slot]  # forget before the release commits, so a later grant is never misread

                def free(obj: dict[str, Any], slot: str = slot) -> dict[str, Any] | None:
                    usage = slots.Usage.parse(name, capacity, obj["spec"]["deviceUsage"])
                    released = slots.release_slot(usage, slot, holder)
                    if released is None:
                        return None
                    obj["spec"]["deviceUsage"] = released.to_wire()
                    return obj

                await cas(store, "Instance", name, "default", free, attempts=64)
        finally:
            await channel.close(None)

    started = time.perf_counter()
    await asyncio.gather(*(client(agent) for agent in agents))
    elapsed = time.perf_counter() - started
    final_obj = await store.get("Instance", name, "default")
    final_revision = int(final_obj["metadata"]["resourceVersion"])
    while last_audited < final_revision and not auditor.done():  # noqa: ASYNC110
        await asyncio.sleep(0.001)
    if auditor.done():
        auditor.result()  # the audit must not have died: raise what killed it
    auditor.cancel()
    final = final_obj["spec"]["deviceUsage"]
    leaked = {slot: holder for slot, holder in final.items() if holder}
    for agent in agents:
        await agent.stop()
    await store.close()
    assert not violations, violations[:5]
    assert not leaked, f"slots still held after every client released: {leaked}"
    return {
        "nodes": node_count,
        "capacity": capacity,
        "claims": claims,
        "refusals": refusals,
        "claims_per_s": round(claims / elapsed, 1),
        "instance_states_audited": states,
        "double_bookings": len(violations),
    }


# -- 3. Discovery churn -------------------------------------------------------------------------------------


async def _churn(root: Path, devices: int) -> dict[str, Any]:
    store = SqliteStore(root / "churn.db")
    world = World()
    agent = await _start_agent("node-a", store, world, root)
    await store.create(_configuration("cams", 2))
    await _settle(agent)
    start = time.perf_counter()
    for i in range(devices):
        world.plug(f"cam-{i:05d}", ["node-a"], {"i": str(i)})
    instances_at = None
    while True:
        count = sum(1 for record in agent.cache.instances.values() if record.namespace == "default")
        if instances_at is None and count >= devices:
            stored = len((await store.list("Instance")).items)
            if stored >= devices:
                instances_at = time.perf_counter() - start
        if instances_at is not None and agent.is_idle():
            break
        await asyncio.sleep(0.002)
    idle_at = time.perf_counter() - start
    await agent.stop()
    await store.close()
    return {
        "devices": devices,
        "all_instances_exist_s": round(instances_at, 3),
        "agent_idle_s": round(idle_at, 3),
        "instances_per_s": round(devices / instances_at, 1),
    }


@contextlib.contextmanager
def _no_kubelet_on_purpose() -> Iterator[None]:
    """The agents' warnings that kubelet.sock is missing (one per node) held back: there is none on purpose."""
    logger = logging.getLogger(kubelets.__name__)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def run(quick: bool = False) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        with _no_kubelet_on_purpose(), tempfile.TemporaryDirectory(prefix="dpb-", dir="/tmp") as tmp:
            root = Path(tmp)
            for part in ("l", "c", "d"):
                (root / part).mkdir()
            latency = await _latency(root / "l", 60 if quick else 1000)
            contention = await _contention(root / "c", 0.3 if quick else 3.0)
            churn = await _churn(root / "d", 50 if quick else 1000)
        return {"allocate_latency": latency, "contention": contention, "discovery_churn": churn}

    return asyncio.run(main())


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick=True), indent=2))
