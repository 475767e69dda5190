"""A minimal kubelet speaking the real protocols, agents on a simulated device World, and settle helpers.

`MiniKubelet` serves Registration on `<dir>/device-plugins/kubelet.sock` and PodResources on
`<dir>/pod-resources/kubelet.sock` (real grpc.aio servers on unix sockets), records registrations, and lets a
test say which pod holds which device ids. `PluginClient` talks to a registered plugin like the kubelet does:
one ListAndWatch stream kept open, Allocate and GetPreferredAllocation calls.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from devplace.agent import Agent, AgentConfig
from devplace.clocks import FakeClock
from devplace.deviceplugin import DEVICE_PLUGIN_DIR, KUBELET_SOCKET_NAME, POD_RESOURCES_DIR
from devplace.deviceplugin.podresources.v1 import api_pb2 as pr_pb2
from devplace.deviceplugin.podresources.v1 import api_pb2_grpc as pr_grpc
from devplace.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from devplace.discovery import World, builtin_registry
from devplace.store import Store

PREFIX = "devplace.io"


async def eventually(check: Callable[[], bool], what: str = "condition", timeout: float = 5.0) -> None:
    """Poll `check` in small real steps (I/O settling only; never a timed assertion)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


class _Registration(api_pb2_grpc.RegistrationServicer):
    def __init__(self, kubelet: MiniKubelet) -> None:
        self.kubelet = kubelet

    async def Register(self, request: api_pb2.RegisterRequest, context: Any) -> api_pb2.Empty:
        self.kubelet.registrations.append(request)
        self.kubelet.endpoints[request.resource_name] = request.endpoint
        return api_pb2.Empty()


class _PodResources(pr_grpc.PodResourcesListerServicer):
    def __init__(self, kubelet: MiniKubelet) -> None:
        self.kubelet = kubelet

    async def List(self, request: Any, context: Any) -> pr_pb2.ListPodResourcesResponse:
        self.kubelet.lists += 1
        pods = []
        for (namespace, name), devices in sorted(self.kubelet.pods.items()):
            container = pr_pb2.ContainerResources(
                name="main",
                devices=[pr_pb2.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in devices],
            )
            pods.append(pr_pb2.PodResources(name=name, namespace=namespace, containers=[container]))
        return pr_pb2.ListPodResourcesResponse(pod_resources=pods)


class MiniKubelet:
    def __init__(self, kubelet_dir: Path) -> None:
        self.dir = kubelet_dir
        self.plugin_dir = kubelet_dir / DEVICE_PLUGIN_DIR
        self.socket = self.plugin_dir / KUBELET_SOCKET_NAME
        self.pr_socket = kubelet_dir / POD_RESOURCES_DIR / KUBELET_SOCKET_NAME
        self.registrations: list[api_pb2.RegisterRequest] = []
        self.endpoints: dict[str, str] = {}
        self.pods: dict[tuple[str, str], list[tuple[str, list[str]]]] = {}
        self.lists = 0
        self._servers: list[grpc.aio.Server] = []

    async def start(self) -> None:
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self.pr_socket.parent.mkdir(parents=True, exist_ok=True)
        registration = grpc.aio.server()
        api_pb2_grpc.add_RegistrationServicer_to_server(_Registration(self), registration)
        registration.add_insecure_port(f"unix://{self.socket}")
        podresources = grpc.aio.server()
        pr_grpc.add_PodResourcesListerServicer_to_server(_PodResources(self), podresources)
        podresources.add_insecure_port(f"unix://{self.pr_socket}")
        for server in (registration, podresources):
            await server.start()
        self._servers = [registration, podresources]

    async def stop(self) -> None:
        for server in self._servers:
            await server.stop(None)
        self._servers = []
        for path in (self.socket, self.pr_socket):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    async def restart(self, wipe_plugin_sockets: bool = True) -> None:
        """Like a kubelet restart: kubelet.sock recreated; the real kubelet also deletes plugin sockets."""
        await self.stop()
        self.endpoints.clear()
        if wipe_plugin_sockets:
            for path in self.plugin_dir.glob("*.sock"):
                path.unlink()
        await self.start()

    def registered(self, resource: str) -> bool:
        return resource in self.endpoints

    def client(self, resource: str) -> PluginClient:
        return PluginClient(self.plugin_dir / self.endpoints[resource])


class PluginClient:
    """The kubelet's side of one plugin: a ListAndWatch stream and Allocate calls."""

    def __init__(self, socket: Path) -> None:
        self.channel = grpc.aio.insecure_channel(f"unix://{socket}")
        self.stub = api_pb2_grpc.DevicePluginStub(self.channel)
        self.lists: list[list[tuple[str, str]]] = []
        self._task: asyncio.Task[None] | None = None

    async def watch(self) -> None:
        async def consume() -> None:
            async for response in self.stub.ListAndWatch(api_pb2.Empty()):
                self.lists.append([(d.ID, d.health) for d in response.devices])

        self._task = asyncio.create_task(consume())
        await eventually(lambda: bool(self.lists), "the first ListAndWatch list")

    @property
    def latest(self) -> dict[str, str]:
        return dict(self.lists[-1]) if self.lists else {}

    def healthy(self) -> list[str]:
        return [d for d, h in self.latest.items() if h == "Healthy"]

    async def allocate(self, *containers: list[str]) -> api_pb2.AllocateResponse:
        request = api_pb2.AllocateRequest(
            container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=ids) for ids in containers]
        )
        return await self.stub.Allocate(request, timeout=10)

    async def options(self) -> api_pb2.DevicePluginOptions:
        return await self.stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=10)

    async def prefer(self, available: list[str], must: list[str], size: int) -> list[str]:
        request = api_pb2.PreferredAllocationRequest(
            container_requests=[
                api_pb2.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
                )
            ]
        )
        response = await self.stub.GetPreferredAllocation(request, timeout=10)
        return list(response.container_responses[0].deviceIDs)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await self._task
        await self.channel.close(None)


async def settle(*agents: Agent, timeout: float = 5.0) -> None:
    """Until every agent reports idle several times in a row (real polling, bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    streak = 0
    while streak < 4:
        if loop.time() > deadline:
            raise AssertionError("agents did not settle")
        await asyncio.sleep(0.005)
        streak = streak + 1 if all(a.is_idle() for a in agents) else 0


class Nodes:
    """Agents (and mini kubelets) on one store and one World, each in its own kubelet directory."""

    def __init__(self, store: Store, clock: FakeClock, root: Path) -> None:
        self.store = store
        self.clock = clock
        self.root = root
        self.world = World()
        self.agents: dict[str, Agent] = {}
        self.kubelets: dict[str, MiniKubelet] = {}

    async def add(self, node: str, kubelet: bool = True, **config: Any) -> Agent:
        kubelet_dir = self.root / node
        if kubelet and node not in self.kubelets:
            self.kubelets[node] = MiniKubelet(kubelet_dir)
            await self.kubelets[node].start()
        config.setdefault("resource_prefix", PREFIX)
        agent = Agent(
            AgentConfig(node=node, kubelet_dir=kubelet_dir, **config),
            self.store,
            builtin_registry(node, world=self.world),
            self.clock,
        )
        await agent.start()
        self.agents[node] = agent
        return agent

    async def restart(self, node: str, **config: Any) -> Agent:
        await self.agents.pop(node).stop()
        return await self.add(node, **config)

    async def settle(self) -> None:
        await settle(*self.agents.values())

    async def advance(self, seconds: float, step: float = 5.0) -> None:
        """Move the fake clock in steps, settling after each, so periodic work runs at its times."""
        left = seconds
        while left > 0:
            move = min(step, left)
            await self.clock.advance(move)
            left -= move
            await self.settle()

    async def close(self) -> None:
        for agent in self.agents.values():
            await agent.stop()
        for kubelet in self.kubelets.values():
            await kubelet.stop()


@pytest.fixture
async def nodes(memory_store: Store, clock: FakeClock, sock_dir: Path) -> AsyncIterator[Nodes]:
    fleet = Nodes(memory_store, clock, sock_dir)
    yield fleet
    await fleet.close()


def configuration(
    name: str = "cams",
    capacity: int = 2,
    unique: bool = True,
    details: str = "",
    handler: str = "sim",
    annotations: dict[str, str] | None = None,
    broker_properties: dict[str, str] | None = None,
    discovery_properties: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if annotations:
        meta["annotations"] = annotations
    handler_info: dict[str, Any] = {"name": handler, "discoveryDetails": details}
    if discovery_properties is not None:
        handler_info["discoveryProperties"] = discovery_properties
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": meta,
        "spec": {
            "discoveryHandler": handler_info,
            "capacity": capacity,
            "uniqueDevices": unique,
            "brokerProperties": broker_properties or {},
        },
    }


def secret(
    name: str, data: dict[str, bytes] | None = None, namespace: str = "default", **fields: Any
) -> dict[str, Any]:
    """A Secret whose `data` holds `data` base64-encoded, as Kubernetes carries it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {k: base64.b64encode(v).decode() for k, v in (data or {}).items()},
        "type": "Opaque",
        **fields,
    }


def pod(name: str, node: str, phase: str = "Running", namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x"}]},
        "status": {"phase": phase},
    }
