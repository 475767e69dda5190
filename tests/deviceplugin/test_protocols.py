"""The generated kubelet stubs speak their wire names: a real grpc.aio round trip per service on a unix socket."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from devplace.deviceplugin import HEALTHY, UNHEALTHY, VERSION
from devplace.deviceplugin.podresources.v1 import api_pb2 as pr
from devplace.deviceplugin.podresources.v1 import api_pb2_grpc as pr_grpc
from devplace.deviceplugin.v1beta1 import api_pb2 as dp
from devplace.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc


def test_services_carry_the_full_names_the_kubelet_calls() -> None:
    assert dp.DESCRIPTOR.package == "v1beta1"
    assert dp.DESCRIPTOR.services_by_name["Registration"].full_name == "v1beta1.Registration"
    plugin = dp.DESCRIPTOR.services_by_name["DevicePlugin"]
    assert [m.name for m in plugin.methods] == [
        "GetDevicePluginOptions",
        "ListAndWatch",
        "GetPreferredAllocation",
        "Allocate",
        "PreStartContainer",
    ]
    assert plugin.methods_by_name["ListAndWatch"].server_streaming
    assert pr.DESCRIPTOR.package == "v1"
    lister = pr.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert [m.name for m in lister.methods] == ["List", "GetAllocatableResources", "Get"]


def test_field_numbers_match_the_kubelet_wire_format() -> None:
    def numbers(message: Any) -> dict[str, int]:
        return {f.name: f.number for f in message.DESCRIPTOR.fields}

    assert numbers(dp.RegisterRequest) == {"version": 1, "endpoint": 2, "resource_name": 3, "options": 4}
    assert numbers(dp.Device) == {"ID": 1, "health": 2, "topology": 3}
    assert numbers(dp.ContainerPreferredAllocationRequest) == {
        "available_deviceIDs": 1,
        "must_include_deviceIDs": 2,
        "allocation_size": 3,
    }
    assert numbers(dp.ContainerAllocateResponse) == {
        "envs": 1,
        "mounts": 2,
        "devices": 3,
        "annotations": 4,
        "cdi_devices": 5,
    }
    assert numbers(pr.DynamicResource) == {"claim_name": 2, "claim_namespace": 3, "claim_resources": 4}
    assert numbers(pr.ClaimResource)["share_id"] == 5
    assert pr.ClaimResource.DESCRIPTOR.fields_by_name["share_id"].has_presence
    assert numbers(pr.ContainerMemory) == {"memory_type": 1, "size": 2, "topology": 3}


class _Kubelet(dp_grpc.RegistrationServicer):
    def __init__(self) -> None:
        self.requests: list[dp.RegisterRequest] = []

    async def Register(self, request: dp.RegisterRequest, context: Any) -> dp.Empty:
        self.requests.append(request)
        return dp.Empty()


class _Plugin(dp_grpc.DevicePluginServicer):
    async def GetDevicePluginOptions(self, request: dp.Empty, context: Any) -> dp.DevicePluginOptions:
        return dp.DevicePluginOptions(get_preferred_allocation_available=True)

    async def ListAndWatch(self, request: dp.Empty, context: Any) -> AsyncIterator[dp.ListAndWatchResponse]:
        yield dp.ListAndWatchResponse(devices=[dp.Device(ID="d-0", health=HEALTHY)])
        yield dp.ListAndWatchResponse(
            devices=[dp.Device(ID="d-0", health=UNHEALTHY), dp.Device(ID="d-1", health=HEALTHY)]
        )

    async def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: Any
    ) -> dp.PreferredAllocationResponse:
        return dp.PreferredAllocationResponse(
            container_responses=[
                dp.ContainerPreferredAllocationResponse(deviceIDs=list(r.available_deviceIDs)[: r.allocation_size])
                for r in request.container_requests
            ]
        )

    async def Allocate(self, request: dp.AllocateRequest, context: Any) -> dp.AllocateResponse:
        return dp.AllocateResponse(
            container_responses=[
                dp.ContainerAllocateResponse(
                    envs={"SLOTS": ",".join(r.devices_ids)},
                    mounts=[dp.Mount(container_path="/c", host_path="/h", read_only=True)],
                    devices=[dp.DeviceSpec(container_path="/dev/x", host_path="/dev/x", permissions="rw")],
                    annotations={"devplace.io/slots": ",".join(r.devices_ids)},
                    cdi_devices=[dp.CDIDevice(name="vendor.com/class=x")],
                )
                for r in request.container_requests
            ]
        )

    async def PreStartContainer(
        self, request: dp.PreStartContainerRequest, context: Any
    ) -> dp.PreStartContainerResponse:
        return dp.PreStartContainerResponse()


class _Lister(pr_grpc.PodResourcesListerServicer):
    def _pod(self) -> pr.PodResources:
        return pr.PodResources(
            name="p",
            namespace="default",
            containers=[
                pr.ContainerResources(
                    name="c", devices=[pr.ContainerDevices(resource_name="devplace.io/cam", device_ids=["cam-0"])]
                )
            ],
        )

    async def List(self, request: pr.ListPodResourcesRequest, context: Any) -> pr.ListPodResourcesResponse:
        return pr.ListPodResourcesResponse(pod_resources=[self._pod()])

    async def GetAllocatableResources(
        self, request: pr.AllocatableResourcesRequest, context: Any
    ) -> pr.AllocatableResourcesResponse:
        return pr.AllocatableResourcesResponse(
            devices=[pr.ContainerDevices(resource_name="devplace.io/cam", device_ids=["cam-0", "cam-1"])]
        )

    async def Get(self, request: pr.GetPodResourcesRequest, context: Any) -> pr.GetPodResourcesResponse:
        if request.pod_name != "p":
            await context.abort(grpc.StatusCode.NOT_FOUND, f"pod {request.pod_name} not found")
        return pr.GetPodResourcesResponse(pod_resources=self._pod())


async def _serve(sock: Path, add: Any, servicer: Any) -> grpc.aio.Server:
    server = grpc.aio.server()
    add(servicer, server)
    server.add_insecure_port(f"unix://{sock}")
    await server.start()
    return server


async def test_registration_round_trip_delivers_the_request(sock_dir: Path) -> None:
    kubelet = _Kubelet()
    server = await _serve(sock_dir / "kubelet.sock", dp_grpc.add_RegistrationServicer_to_server, kubelet)
    try:
        async with grpc.aio.insecure_channel(f"unix://{sock_dir / 'kubelet.sock'}") as channel:
            stub = dp_grpc.RegistrationStub(channel)
            request = dp.RegisterRequest(
                version=VERSION,
                endpoint="cam.sock",
                resource_name="devplace.io/cam",
                options=dp.DevicePluginOptions(pre_start_required=True),
            )
            assert await stub.Register(request) == dp.Empty()
    finally:
        await server.stop(None)
    assert kubelet.requests == [request]


async def test_device_plugin_round_trip_covers_every_method(sock_dir: Path) -> None:
    sock = sock_dir / "cam.sock"
    server = await _serve(sock, dp_grpc.add_DevicePluginServicer_to_server, _Plugin())
    try:
        async with grpc.aio.insecure_channel(f"unix://{sock}") as channel:
            stub = dp_grpc.DevicePluginStub(channel)
            options = await stub.GetDevicePluginOptions(dp.Empty())
            assert options == dp.DevicePluginOptions(get_preferred_allocation_available=True)

            lists = [[(d.ID, d.health) for d in r.devices] async for r in stub.ListAndWatch(dp.Empty())]
            assert lists == [[("d-0", HEALTHY)], [("d-0", UNHEALTHY), ("d-1", HEALTHY)]]

            preferred = await stub.GetPreferredAllocation(
                dp.PreferredAllocationRequest(
                    container_requests=[
                        dp.ContainerPreferredAllocationRequest(available_deviceIDs=["a", "b", "c"], allocation_size=2)
                    ]
                )
            )
            assert [list(r.deviceIDs) for r in preferred.container_responses] == [["a", "b"]]

            allocated = await stub.Allocate(
                dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=["a", "b"])])
            )
            (response,) = allocated.container_responses
            assert dict(response.envs) == {"SLOTS": "a,b"}
            assert dict(response.annotations) == {"devplace.io/slots": "a,b"}
            assert response.mounts[0] == dp.Mount(container_path="/c", host_path="/h", read_only=True)
            assert response.devices[0].permissions == "rw"
            assert response.cdi_devices[0].name == "vendor.com/class=x"

            assert await stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=["a"])) == (
                dp.PreStartContainerResponse()
            )
    finally:
        await server.stop(None)


async def test_pod_resources_round_trip_lists_gets_and_reports_allocatable(sock_dir: Path) -> None:
    sock = sock_dir / "pr.sock"
    server = await _serve(sock, pr_grpc.add_PodResourcesListerServicer_to_server, _Lister())
    try:
        async with grpc.aio.insecure_channel(f"unix://{sock}") as channel:
            stub = pr_grpc.PodResourcesListerStub(channel)
            listed = await stub.List(pr.ListPodResourcesRequest())
            assert [(p.name, p.containers[0].devices[0].device_ids[0]) for p in listed.pod_resources] == [
                ("p", "cam-0")
            ]
            allocatable = await stub.GetAllocatableResources(pr.AllocatableResourcesRequest())
            assert list(allocatable.devices[0].device_ids) == ["cam-0", "cam-1"]
            got = await stub.Get(pr.GetPodResourcesRequest(pod_name="p", pod_namespace="default"))
            assert got.pod_resources.namespace == "default"
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Get(pr.GetPodResourcesRequest(pod_name="q", pod_namespace="default"))
            assert info.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await server.stop(None)
