"""A tiny device plugin for testing the simulated kubelet: a real grpc.aio DevicePlugin server on a unix socket.

It advertises whatever devices the test sets, records every call the kubelet makes, and can be told to prefer
certain devices or to refuse Allocate, so each kubelet rule can be exercised without the agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from devplace.deviceplugin import _constants as constants
from devplace.deviceplugin.v1beta1 import api_pb2 as dp_pb2
from devplace.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc

__all__ = ["FakePlugin"]


class FakePlugin(dp_grpc.DevicePluginServicer):
    def __init__(
        self,
        plugin_dir: Path,
        resource: str,
        devices: Mapping[str, str],
        *,
        endpoint: str | None = None,
        preferred: Sequence[str] | None = None,
        pre_start_required: bool = False,
    ) -> None:
        self.plugin_dir = plugin_dir
        self.resource = resource
        self.endpoint = endpoint or resource.replace("/", "_") + ".sock"
        self.devices = dict(devices)
        self.preferred = list(preferred) if preferred is not None else None
        self.pre_start_required = pre_start_required
        self.refuse_allocate: str | None = None
        self.allocations: list[list[str]] = []
        self.preferred_requests: list[dp_pb2.ContainerPreferredAllocationRequest] = []
        self.pre_starts: list[list[str]] = []
        self._watchers: set[asyncio.Queue[dict[str, str]]] = set()
        self._server: grpc.aio.Server | None = None

    @property
    def path(self) -> Path:
        return self.plugin_dir / self.endpoint

    async def start(self) -> None:
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        server = grpc.aio.server()
        dp_grpc.add_DevicePluginServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.path}")
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(None)
            self._server = None
        self.path.unlink(missing_ok=True)

    async def register(self, kubelet_socket: Path, *, version: str = constants.VERSION) -> None:
        async with grpc.aio.insecure_channel(f"unix://{kubelet_socket}") as channel:
            stub = dp_grpc.RegistrationStub(channel)
            await stub.Register(
                dp_pb2.RegisterRequest(
                    version=version,
                    endpoint=self.endpoint,
                    resource_name=self.resource,
                    options=dp_pb2.DevicePluginOptions(
                        get_preferred_allocation_available=self.preferred is not None,
                        pre_start_required=self.pre_start_required,
                    ),
                ),
                timeout=5,
            )

    def set_devices(self, devices: Mapping[str, str]) -> None:
        self.devices = dict(devices)
        for queue in self._watchers:
            queue.put_nowait(dict(self.devices))

    # -- DevicePlugin ------------------------------------------------------------------------------------------------

    async def GetDevicePluginOptions(
        self, request: dp_pb2.Empty, context: grpc.aio.ServicerContext[Any, Any]
    ) -> dp_pb2.DevicePluginOptions:
        return dp_pb2.DevicePluginOptions(
            get_preferred_allocation_available=self.preferred is not None, pre_start_required=self.pre_start_required
        )

    async def ListAndWatch(  # type: ignore[override]
        self, request: dp_pb2.Empty, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[dp_pb2.ListAndWatchResponse]:
        queue: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        self._watchers.add(queue)
        try:
            queue.put_nowait(dict(self.devices))
            while True:
                devices = await queue.get()
                yield dp_pb2.ListAndWatchResponse(
                    devices=[dp_pb2.Device(ID=d, health=h) for d, h in sorted(devices.items())]
                )
        finally:
            self._watchers.discard(queue)

    async def GetPreferredAllocation(
        self, request: dp_pb2.PreferredAllocationRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> dp_pb2.PreferredAllocationResponse:
        responses = []
        for container in request.container_requests:
            self.preferred_requests.append(container)
            available = set(container.available_deviceIDs)
            picks = list(container.must_include_deviceIDs)
            picks += [d for d in self.preferred or [] if d in available and d not in picks]
            responses.append(dp_pb2.ContainerPreferredAllocationResponse(deviceIDs=picks[: container.allocation_size]))
        return dp_pb2.PreferredAllocationResponse(container_responses=responses)

    async def Allocate(
        self, request: dp_pb2.AllocateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> dp_pb2.AllocateResponse:
        if self.refuse_allocate is not None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, self.refuse_allocate)
        responses = []
        for container in request.container_requests:
            ids = list(container.devices_ids)
            self.allocations.append(ids)
            responses.append(
                dp_pb2.ContainerAllocateResponse(
                    envs={"DEVICES": ",".join(ids)}, annotations={"fake/devices": ",".join(ids)}
                )
            )
        return dp_pb2.AllocateResponse(container_responses=responses)

    async def PreStartContainer(
        self, request: dp_pb2.PreStartContainerRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> dp_pb2.PreStartContainerResponse:
        self.pre_starts.append(list(request.devices_ids))
        return dp_pb2.PreStartContainerResponse()
