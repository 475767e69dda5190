"""The simulated kubelet against tiny real device plugins (grpc.aio on unix sockets) and a real store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.deviceplugin import _constants as constants
from devplace.deviceplugin.podresources.v1 import api_pb2 as pr_pb2
from devplace.deviceplugin.podresources.v1 import api_pb2_grpc as pr_grpc
from devplace.sim import _kubelets as kubelets
from devplace.sim._kubelets import SimKubelet
from devplace.store import MemoryStore
from tests.sim.plugins import FakePlugin

H, U = constants.HEALTHY, constants.UNHEALTHY
RES = "example.com/cam"


async def eventually(check: Callable[[], bool | Awaitable[bool]], timeout: float = 5.0) -> None:
    """Poll a condition (real time, bounded): for I/O settling only, never for time-based behaviour."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


@pytest.fixture
async def kubelet(sock_dir: Path, memory_store: MemoryStore, clock: FakeClock) -> AsyncIterator[SimKubelet]:
    k = SimKubelet("node-a", sock_dir, memory_store, clock, device_order="sorted")
    await k.start()
    yield k
    await k.stop()


@pytest.fixture
async def plugin_factory(sock_dir: Path) -> AsyncIterator[Callable[..., Awaitable[FakePlugin]]]:
    started: list[FakePlugin] = []

    async def make(resource: str = RES, devices: dict[str, str] | None = None, **kw: Any) -> FakePlugin:
        plugin = FakePlugin(sock_dir / constants.DEVICE_PLUGIN_DIR, resource, devices or {}, **kw)
        await plugin.start()
        started.append(plugin)
        return plugin

    yield make
    for plugin in started:
        await plugin.stop()


async def registered(kubelet: SimKubelet, plugin: FakePlugin) -> FakePlugin:
    await plugin.register(kubelet.registration_socket)
    await eventually(kubelet.is_idle)
    return plugin


def pod(name: str, containers: list[dict[str, Any]], node: str = "node-a", init: list[dict[str, Any]] | None = None):
    def container(c: dict[str, Any]) -> dict[str, Any]:
        reqs = {k: str(v) for k, v in c.get("requests", {}).items()}
        return {"name": c["name"], "image": "sim", "resources": {"requests": reqs, "limits": reqs}}

    spec: dict[str, Any] = {"nodeName": node, "containers": [container(c) for c in containers]}
    if init:
        spec["initContainers"] = [container(c) for c in init]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


async def admitted(store: MemoryStore, kubelet: SimKubelet, obj: dict[str, Any]) -> dict[str, Any]:
    await store.create(obj)
    name = obj["metadata"]["name"]

    async def decided() -> bool:
        current = await store.get("Pod", name, "default")
        return (current.get("status") or {}).get("phase") in ("Running", "Failed")

    await eventually(decided)
    await eventually(kubelet.is_idle)
    return await store.get("Pod", name, "default")


async def test_registered_plugin_sets_capacity_to_all_devices_and_allocatable_to_healthy_ones(kubelet, plugin_factory):
    await registered(kubelet, await plugin_factory(devices={"d0": H, "d1": U, "d2": H}))
    assert kubelet.capacity() == {RES: 3}
    assert kubelet.allocatable() == {RES: 2}
    assert kubelet.available() == {RES: 2}
    node = await kubelet.store.get("Node", "node-a")
    assert node["status"]["capacity"][RES] == "3"
    assert node["status"]["allocatable"][RES] == "2"
    assert node["status"]["capacity"]["cpu"] == "8"


async def test_device_list_updates_follow_list_and_watch(kubelet, plugin_factory):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H}))
    plugin.set_devices({"d0": U, "d1": H, "d2": H})
    await eventually(lambda: kubelet.capacity() == {RES: 3})
    await eventually(kubelet.is_idle)
    assert kubelet.allocatable() == {RES: 2}
    node = await kubelet.store.get("Node", "node-a")
    assert node["status"]["allocatable"][RES] == "2"


async def test_registration_with_an_unsupported_version_is_refused(kubelet, plugin_factory):
    plugin = await plugin_factory(devices={"d0": H})
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await plugin.register(kubelet.registration_socket, version="v1alpha1")
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "v1alpha1" in (info.value.details() or "")
    assert kubelet.endpoints() == {}


@pytest.mark.parametrize("resource", ["cam", "kubernetes.io/cam", "example.com/"])
async def test_registration_of_a_non_extended_resource_is_refused(kubelet, plugin_factory, resource):
    plugin = await plugin_factory(resource=resource, endpoint="x.sock", devices={"d0": H})
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await plugin.register(kubelet.registration_socket)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert kubelet.endpoints() == {}


async def test_a_resource_held_by_another_live_endpoint_is_refused(kubelet, plugin_factory):
    await registered(kubelet, await plugin_factory(endpoint="first.sock", devices={"d0": H}))
    second = await plugin_factory(endpoint="second.sock", devices={"d9": H})
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await second.register(kubelet.registration_socket)
    assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert kubelet.endpoints() == {RES: "first.sock"}
    assert kubelet.devices(RES) == {"d0": H}


async def test_a_re_registration_of_the_same_endpoint_replaces_the_old_connection(kubelet, plugin_factory):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H}))
    plugin.devices = {"d0": H, "d1": H}
    await registered(kubelet, plugin)
    assert kubelet.devices(RES) == {"d0": H, "d1": H}
    assert kubelet.registrations == 2


async def test_a_resource_whose_plugin_is_gone_can_be_taken_by_a_new_endpoint(kubelet, plugin_factory):
    first = await registered(kubelet, await plugin_factory(endpoint="first.sock", devices={"d0": H}))
    await first.stop()
    second = await plugin_factory(endpoint="second.sock", devices={"d9": H})
    await registered(kubelet, second)
    assert kubelet.endpoints() == {RES: "second.sock"}
    assert kubelet.devices(RES) == {"d9": H}


async def test_a_plugin_that_goes_away_is_removed_from_the_node_at_once(kubelet, plugin_factory):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H}))
    await plugin.stop()
    await eventually(lambda: kubelet.endpoints() == {})
    await eventually(kubelet.is_idle)
    node = await kubelet.store.get("Node", "node-a")
    assert RES not in node["status"]["capacity"]
    assert RES not in node["status"]["allocatable"]
    assert node["status"]["capacity"]["pods"] == "110"


async def test_a_plugin_gone_before_the_kubelet_dials_it_ends_its_handshake_and_is_dropped(
    kubelet, sock_dir, monkeypatch
):
    # a plugin that registered and went away at once (its server stopped, its socket removed) before the kubelet
    # dialled it: only the socket's absence may end the handshake, not the RPC timeout
    monkeypatch.setattr(kubelets, "_RPC_TIMEOUT", 3600.0)
    gone = FakePlugin(sock_dir / constants.DEVICE_PLUGIN_DIR, RES, {"d0": H})
    await gone.register(kubelet.registration_socket)
    assert kubelet.registrations == 1
    await eventually(kubelet.is_idle)
    assert kubelet.endpoints() == {}
    assert kubelet.busy_with() == []
    node = await kubelet.store.get("Node", "node-a")
    assert RES not in node["status"]["capacity"]


async def test_a_fresh_plugin_registers_after_one_that_went_away_during_its_handshake(
    kubelet, plugin_factory, sock_dir, monkeypatch
):
    monkeypatch.setattr(kubelets, "_RPC_TIMEOUT", 3600.0)
    gone = FakePlugin(sock_dir / constants.DEVICE_PLUGIN_DIR, RES, {"d0": H})
    await gone.register(kubelet.registration_socket)
    await eventually(kubelet.is_idle)
    fresh = await registered(kubelet, await plugin_factory(devices={"d0": H, "d1": U}))
    assert kubelet.endpoints() == {RES: fresh.endpoint}
    assert kubelet.devices(RES) == {"d0": H, "d1": U}
    assert kubelet.registrations == 2


async def test_an_admitted_pod_gets_the_lowest_free_healthy_devices_and_runs(kubelet, plugin_factory, memory_store):
    plugin = await registered(kubelet, await plugin_factory(devices={"d2": H, "d0": U, "d1": H, "d3": H}))
    result = await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {RES: 2}}]))
    assert result["status"]["phase"] == "Running"
    assert [c["name"] for c in result["status"]["containerStatuses"]] == ["main"]
    assert plugin.allocations == [["d1", "d2"]]
    assert kubelet.available() == {RES: 1}
    held = kubelet.allocations()[("default", "p1")]
    assert held.containers[0].devices == {RES: ["d1", "d2"]}
    assert held.containers[0].responses[RES].envs["DEVICES"] == "d1,d2"


async def test_a_pod_needing_more_healthy_free_devices_than_exist_fails_out_of_the_resource(
    kubelet, plugin_factory, memory_store
):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H, "d1": U}))
    result = await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {RES: 2}}]))
    assert result["status"]["phase"] == "Failed"
    assert result["status"]["reason"] == f"OutOf{RES}"
    assert "requested: 2, free: 1" in result["status"]["message"]
    assert plugin.allocations == []
    assert kubelet.allocations() == {}


async def test_a_pod_asking_for_an_unregistered_resource_fails_out_of_it(kubelet, memory_store):
    result = await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {"example.com/nope": 1}}]))
    assert result["status"]["reason"] == "OutOfexample.com/nope"


async def test_an_allocate_error_fails_the_pod_with_unexpected_admission_error(kubelet, plugin_factory, memory_store):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H, "d1": H}))
    plugin.refuse_allocate = "slot d0 is held by node-b"
    result = await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {RES: 1}}]))
    assert result["status"]["phase"] == "Failed"
    assert result["status"]["reason"] == "UnexpectedAdmissionError"
    assert "slot d0 is held by node-b" in result["status"]["message"]
    assert kubelet.allocations() == {}
    assert kubelet.available() == {RES: 2}


async def test_a_second_pod_never_gets_devices_held_by_the_first(kubelet, plugin_factory, memory_store):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H, "d1": H, "d2": H}))
    await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {RES: 2}}]))
    second = await admitted(memory_store, kubelet, pod("p2", [{"name": "main", "requests": {RES: 2}}]))
    assert second["status"]["reason"] == f"OutOf{RES}"
    third = await admitted(memory_store, kubelet, pod("p3", [{"name": "main", "requests": {RES: 1}}]))
    assert third["status"]["phase"] == "Running"
    assert plugin.allocations == [["d0", "d1"], ["d2"]]


async def test_the_plugins_preferred_allocation_is_honoured(kubelet, plugin_factory, memory_store):
    plugin = await registered(
        kubelet, await plugin_factory(devices={"d0": H, "d1": H, "d2": H, "d3": H}, preferred=["d3", "d1"])
    )
    await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {RES: 2}}]))
    assert plugin.allocations == [["d3", "d1"]]
    asked = plugin.preferred_requests[0]
    assert list(asked.available_deviceIDs) == ["d0", "d1", "d2", "d3"]
    assert asked.allocation_size == 2


async def test_an_invalid_preferred_allocation_is_ignored(kubelet, plugin_factory, memory_store):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H, "d1": H, "d2": H}, preferred=["d2"]))
    await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {RES: 2}}]))
    assert plugin.allocations == [["d0", "d1"]]


async def test_each_container_of_a_pod_is_allocated_separately_with_distinct_devices(
    kubelet, plugin_factory, memory_store
):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H, "d1": H, "d2": H}))
    containers = [{"name": "a", "requests": {RES: 1}}, {"name": "b", "requests": {RES: 1}}]
    result = await admitted(memory_store, kubelet, pod("p1", containers))
    assert result["status"]["phase"] == "Running"
    assert plugin.allocations == [["d0"], ["d1"]]
    assert kubelet.available() == {RES: 1}


async def test_devices_of_init_containers_are_offered_again_to_app_containers(kubelet, plugin_factory, memory_store):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H, "d1": H}))
    result = await admitted(
        memory_store,
        kubelet,
        pod("p1", [{"name": "main", "requests": {RES: 1}}], init=[{"name": "setup", "requests": {RES: 1}}]),
    )
    assert result["status"]["phase"] == "Running"
    assert plugin.allocations == [["d0"], ["d0"]]
    assert kubelet.available() == {RES: 1}


async def test_pre_start_container_is_called_when_the_plugin_requires_it(kubelet, plugin_factory, memory_store):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H}, pre_start_required=True))
    await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {RES: 1}}]))
    assert plugin.pre_starts == [["d0"]]


async def test_a_non_integer_request_fails_the_pod_naming_the_field(kubelet, plugin_factory, memory_store):
    await registered(kubelet, await plugin_factory(devices={"d0": H}))
    bad = pod("p1", [{"name": "main", "requests": {RES: 1}}])
    bad["spec"]["containers"][0]["resources"] = {"limits": {RES: "1.5"}}
    result = await admitted(memory_store, kubelet, bad)
    assert result["status"]["reason"] == "UnexpectedAdmissionError"
    assert f"spec.containers[0].resources.limits.{RES}" in result["status"]["message"]


async def test_pods_bound_to_other_nodes_are_ignored(kubelet, plugin_factory, memory_store):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H}))
    await memory_store.create(pod("elsewhere", [{"name": "main", "requests": {RES: 1}}], node="node-b"))
    await eventually(kubelet.is_idle)
    current = await memory_store.get("Pod", "elsewhere", "default")
    assert "status" not in current or not current["status"]
    assert plugin.allocations == []


@pytest.mark.parametrize("ending", ["delete", "succeed"])
async def test_a_deleted_or_finished_pods_devices_are_free_again(kubelet, plugin_factory, memory_store, ending):
    await registered(kubelet, await plugin_factory(devices={"d0": H}))
    running = await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {RES: 1}}]))
    assert kubelet.available() == {RES: 0}
    if ending == "delete":
        await memory_store.delete("Pod", "p1", "default")
    else:
        running["status"]["phase"] = "Succeeded"
        await memory_store.update(running)
    await eventually(lambda: kubelet.available() == {RES: 1})
    assert kubelet.allocations() == {}


async def test_reallocate_offers_the_same_devices_again(kubelet, plugin_factory, memory_store):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H, "d1": H}))
    await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {RES: 1}}]))
    answers = await kubelet.reallocate("default", "p1")
    assert plugin.allocations == [["d0"], ["d0"]]
    assert answers["main"][RES].envs["DEVICES"] == "d0"


async def test_reallocate_surfaces_the_plugins_refusal_as_a_devplace_error(kubelet, plugin_factory, memory_store):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H}))
    await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {RES: 1}}]))
    plugin.refuse_allocate = "no longer yours"
    with pytest.raises(errors.Refused, match="no longer yours"):
        await kubelet.reallocate("default", "p1")
    with pytest.raises(errors.NotFound):
        await kubelet.reallocate("default", "nobody")


async def test_pod_resources_lists_each_containers_devices(kubelet, plugin_factory, memory_store):
    await registered(kubelet, await plugin_factory(devices={"d0": H, "d1": H, "d2": U}))
    containers = [{"name": "a", "requests": {RES: 1}}, {"name": "b", "requests": {RES: 1}}]
    await admitted(memory_store, kubelet, pod("p1", containers))
    async with grpc.aio.insecure_channel(f"unix://{kubelet.pod_resources_socket}") as channel:
        stub = pr_grpc.PodResourcesListerStub(channel)
        listed = await stub.List(pr_pb2.ListPodResourcesRequest())
        got = await stub.Get(pr_pb2.GetPodResourcesRequest(pod_name="p1", pod_namespace="default"))
        allocatable = await stub.GetAllocatableResources(pr_pb2.AllocatableResourcesRequest())
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Get(pr_pb2.GetPodResourcesRequest(pod_name="nobody", pod_namespace="default"))
    assert [(p.namespace, p.name) for p in listed.pod_resources] == [("default", "p1")]
    by_container = {
        c.name: [(d.resource_name, list(d.device_ids)) for d in c.devices] for c in listed.pod_resources[0].containers
    }
    assert by_container == {"a": [(RES, ["d0"])], "b": [(RES, ["d1"])]}
    assert got.pod_resources == listed.pod_resources[0]
    assert [(d.resource_name, list(d.device_ids)) for d in allocatable.devices] == [(RES, ["d0", "d1"])]
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


async def test_restart_recreates_the_socket_drops_plugins_and_keeps_allocations(kubelet, plugin_factory, memory_store):
    plugin = await registered(kubelet, await plugin_factory(devices={"d0": H, "d1": H}))
    await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {RES: 1}}]))
    inode = kubelet.registration_socket.stat().st_ino
    await kubelet.restart()
    assert kubelet.registration_socket.exists()
    assert kubelet.registration_socket.stat().st_ino != inode
    assert kubelet.endpoints() == {}
    await registered(kubelet, plugin)
    assert kubelet.available() == {RES: 1}
    assert kubelet.allocations()[("default", "p1")].containers[0].devices == {RES: ["d0"]}
    second = await admitted(memory_store, kubelet, pod("p2", [{"name": "main", "requests": {RES: 1}}]))
    assert second["status"]["phase"] == "Running"
    assert plugin.allocations == [["d0"], ["d1"]]


async def test_wait_registered_names_the_plugins_that_did_not_come_back(kubelet):
    with pytest.raises(errors.Unavailable, match=r"example\.com/gone"):
        await kubelet.wait_registered(["example.com/gone"], timeout=0.05)


async def test_a_forgotten_pod_vanishes_from_pod_resources_but_keeps_its_status(kubelet, plugin_factory, memory_store):
    await registered(kubelet, await plugin_factory(devices={"d0": H}))
    await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {RES: 1}}]))
    kubelet.forget_pod("default", "p1")
    assert kubelet.available() == {RES: 1}
    assert (await memory_store.get("Pod", "p1", "default"))["status"]["phase"] == "Running"
    async with grpc.aio.insecure_channel(f"unix://{kubelet.pod_resources_socket}") as channel:
        listed = await pr_grpc.PodResourcesListerStub(channel).List(pr_pb2.ListPodResourcesRequest())
    assert list(listed.pod_resources) == []
    with pytest.raises(errors.NotFound):
        kubelet.forget_pod("default", "p1")


async def test_without_a_preference_a_random_kubelet_offers_devices_in_a_seeded_shuffled_order(
    sock_dir, memory_store, clock, plugin_factory
):
    devices = {f"d{i:02}": H for i in range(20)}
    picks = []
    for seed in ("s1", "s1", "s2"):
        k = SimKubelet("node-a", sock_dir, memory_store, clock, seed=seed)
        await k.start()
        plugin = await registered(k, await plugin_factory(endpoint=f"{len(picks)}.sock", devices=devices))
        await admitted(memory_store, k, pod(f"p{len(picks)}", [{"name": "main", "requests": {RES: 3}}]))
        picks.append(plugin.allocations[0])
        await k.stop()
        await plugin.stop()
    assert picks[0] == picks[1]
    assert picks[0] != picks[2]
    assert picks[0] != ["d00", "d01", "d02"]


async def test_a_resource_class_request_is_served_by_the_devices_the_scheduler_annotated(
    kubelet, plugin_factory, memory_store
):
    gpu_a = await registered(kubelet, await plugin_factory(resource="devplace.io/gpu-a", devices={"s0": H, "s1": H}))
    gpu_b = await registered(kubelet, await plugin_factory(resource="devplace.io/gpu-b", devices={"s0": H}))
    obj = pod("p1", [{"name": "main", "requests": {"rc.devplace.io/fast-gpu": 3}}])
    obj["metadata"]["annotations"] = {
        "scheduler.alpha.kubernetes.io/resClass_fast-gpu_gpu-a": "2",
        "scheduler.alpha.kubernetes.io/resClass_fast-gpu_gpu-b": "1",
    }
    result = await admitted(memory_store, kubelet, obj)
    assert result["status"]["phase"] == "Running"
    assert gpu_a.allocations == [["s0", "s1"]]
    assert gpu_b.allocations == [["s0"]]
    assert kubelet.available() == {"devplace.io/gpu-a": 0, "devplace.io/gpu-b": 0}


async def test_a_resource_class_request_without_the_schedulers_choice_fails_admission(kubelet, memory_store):
    result = await admitted(memory_store, kubelet, pod("p1", [{"name": "main", "requests": {"rc.devplace.io/x": 1}}]))
    assert result["status"]["phase"] == "Failed"
    assert result["status"]["reason"] == "UnexpectedAdmissionError"
    assert result["status"]["message"] == (
        "resource class rc.devplace.io/x requested but no device was chosen for it "
        "(no scheduler.alpha.kubernetes.io/resClass_x_<device> annotation): resource classes are served only to "
        "pods bound by the devplace scheduler"
    )


async def test_a_class_choice_naming_a_device_without_a_plugin_here_fails_admission(
    kubelet, plugin_factory, memory_store
):
    gpu_a = await registered(kubelet, await plugin_factory(resource="devplace.io/gpu-a", devices={"s0": H}))
    obj = pod("p1", [{"name": "main", "requests": {"rc.devplace.io/fast-gpu": 2}}])
    obj["metadata"]["annotations"] = {
        "scheduler.alpha.kubernetes.io/resClass_fast-gpu_gpu-a": "1",
        "scheduler.alpha.kubernetes.io/resClass_fast-gpu_gpu-z": "1",
    }
    result = await admitted(memory_store, kubelet, obj)
    assert result["status"]["reason"] == "UnexpectedAdmissionError"
    assert result["status"]["message"] == (
        "resource class rc.devplace.io/fast-gpu: 1 more device(s) requested than the scheduler's choice "
        "(gpu-a=1, gpu-z=1) can serve on node node-a (a chosen device has no device plugin here, or too few were "
        "chosen)"
    )
    assert gpu_a.allocations == []  # nothing allocated for a pod that cannot run


async def test_an_unexpected_error_in_admission_is_logged_and_the_kubelet_keeps_admitting(
    kubelet, plugin_factory, memory_store, caplog
):
    await registered(kubelet, await plugin_factory(devices={"d0": H}))
    real_admit = kubelet._admit

    async def buggy_admit(obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == "bug":
            raise RuntimeError("a bug in admission")
        await real_admit(obj)

    kubelet._admit = buggy_admit  # type: ignore[method-assign]
    await memory_store.create(pod("bug", [{"name": "main", "requests": {RES: 1}}]))
    await eventually(lambda: kubelet.supervisor.restarts.get("admissions") == 1)
    result = await admitted(memory_store, kubelet, pod("p2", [{"name": "main", "requests": {RES: 1}}]))
    assert result["status"]["phase"] == "Running"
    assert "status" not in await memory_store.get("Pod", "bug", "default")  # seen once, never retried
    failures = [r for r in caplog.records if r.getMessage() == "kubelet node-a: admissions failed"]
    assert len(failures) == 1
    assert failures[0].exc_info is not None
    assert str(failures[0].exc_info[1]) == "a bug in admission"
