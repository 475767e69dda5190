"""The agent end to end on real parts: a store, the simulated device World, real gRPC on unix sockets."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from devplace import errors
from devplace.agent import _instances as instances
from devplace.agent._instances import OFFLINE_SINCE
from devplace.discovery import Device, HandlerRegistry
from devplace.store import Store
from tests.processes import stop_child

from .conftest import PREFIX, MiniKubelet, Nodes, configuration, eventually, pod, secret


async def instance_list(store: Store) -> list[dict[str, Any]]:
    return (await store.list("Instance")).items


async def only_instance(store: Store) -> dict[str, Any]:
    items = await instance_list(store)
    assert len(items) == 1, [i["metadata"]["name"] for i in items]
    return items[0]


def name_of(device: str, node: str = "node-a", shared: bool = True, cfg: str = "cams") -> str:
    return instances.instance_name(cfg, device, node, shared)


# -- Instances ----------------------------------------------------------------------------------------------


async def test_a_shared_device_seen_by_two_nodes_is_one_instance_listing_both(nodes: Nodes) -> None:
    await nodes.add("node-a")
    await nodes.add("node-b")
    nodes.world.plug("cam-1", ["node-a", "node-b"], {"ip": "10.0.0.1"})
    await nodes.store.create(configuration(capacity=2, broker_properties={"RES": "720p"}))
    await nodes.settle()
    inst = await only_instance(nodes.store)
    name = name_of("cam-1")
    assert inst["metadata"]["name"] == name
    assert sorted(inst["spec"]["nodes"]) == ["node-a", "node-b"]
    assert inst["spec"]["deviceUsage"] == {f"{name}-0": "", f"{name}-1": ""}
    assert inst["spec"]["brokerProperties"] == {"ip": "10.0.0.1", "RES": "720p"}
    assert inst["metadata"]["ownerReferences"][0]["name"] == "cams"


async def test_a_node_losing_a_shared_device_removes_only_itself_then_grace_deletes(nodes: Nodes) -> None:
    await nodes.add("node-a", offline_grace=60.0)
    await nodes.add("node-b", offline_grace=60.0)
    nodes.world.plug("cam-1", ["node-a", "node-b"])
    await nodes.store.create(configuration())
    await nodes.settle()
    nodes.world.unplug("cam-1", ["node-a"])
    await nodes.settle()
    assert (await only_instance(nodes.store))["spec"]["nodes"] == ["node-b"]
    nodes.world.unplug("cam-1", ["node-b"])
    await nodes.settle()
    inst = await only_instance(nodes.store)
    assert inst["spec"]["nodes"] == []
    assert OFFLINE_SINCE in inst["metadata"]["annotations"]
    await nodes.advance(55.0)
    assert len(await instance_list(nodes.store)) == 1
    await nodes.advance(10.0)
    assert await instance_list(nodes.store) == []


async def test_a_shared_device_seen_again_within_the_grace_is_rejoined(nodes: Nodes) -> None:
    await nodes.add("node-a", offline_grace=60.0)
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration())
    await nodes.settle()
    uid = (await only_instance(nodes.store))["metadata"]["uid"]
    nodes.world.unplug("cam-1")
    await nodes.settle()
    await nodes.advance(30.0)
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.settle()
    await nodes.advance(60.0)
    inst = await only_instance(nodes.store)
    assert inst["metadata"]["uid"] == uid
    assert inst["spec"]["nodes"] == ["node-a"]
    assert OFFLINE_SINCE not in (inst["metadata"].get("annotations") or {})


async def test_local_devices_get_an_instance_per_node_deleted_at_once_when_unplugged(nodes: Nodes) -> None:
    await nodes.add("node-a")
    await nodes.add("node-b")
    nodes.world.plug("usb-1", ["node-a", "node-b"])
    await nodes.store.create(configuration(details="shared: false"))
    await nodes.settle()
    names = sorted(i["metadata"]["name"] for i in await instance_list(nodes.store))
    assert names == sorted([name_of("usb-1", "node-a", False), name_of("usb-1", "node-b", False)])
    nodes.world.unplug("usb-1", ["node-a"])
    await nodes.settle()
    left = await only_instance(nodes.store)
    assert left["metadata"]["name"] == name_of("usb-1", "node-b", False)
    assert left["spec"]["nodes"] == ["node-b"]
    assert left["spec"]["shared"] is False


async def test_deleting_the_configuration_removes_instances_and_plugins(nodes: Nodes) -> None:
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration())
    await nodes.settle()
    kubelet = nodes.kubelets["node-a"]
    await eventually(lambda: kubelet.registered(f"{PREFIX}/cams"), "CL registration")
    sockets = sorted(p.name for p in kubelet.plugin_dir.glob("dp-*.sock"))
    assert len(sockets) == 2
    await nodes.store.delete("Configuration", "cams", "default")
    await nodes.settle()
    assert await instance_list(nodes.store) == []
    assert list(kubelet.plugin_dir.glob("dp-*.sock")) == []


async def test_a_capacity_change_resizes_slots_without_touching_held_ones(nodes: Nodes) -> None:
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration(capacity=4))
    await nodes.settle()
    name = name_of("cam-1")
    kubelet = nodes.kubelets["node-a"]
    await eventually(lambda: kubelet.registered(f"{PREFIX}/{name}"), "IL registration")
    il = kubelet.client(f"{PREFIX}/{name}")
    await il.allocate([f"{name}-3"])
    cfg = await nodes.store.get("Configuration", "cams", "default")
    cfg["spec"]["capacity"] = 2
    await nodes.store.update(cfg)
    await nodes.settle()
    inst = await only_instance(nodes.store)
    assert inst["spec"]["capacity"] == 2
    assert inst["spec"]["deviceUsage"] == {f"{name}-0": "", f"{name}-1": "", f"{name}-3": "node-a"}
    await il.close()


async def test_bad_discovery_details_become_a_condition_and_clear_when_fixed(nodes: Nodes) -> None:
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration(details="colour: blue"))
    await nodes.settle()
    cfg = await nodes.store.get("Configuration", "cams", "default")
    [condition] = cfg["status"]["conditions"]
    assert condition["type"] == "DiscoveryFailed"
    assert condition["status"] == "True"
    assert condition["reason"] == "InvalidDiscoveryDetails"
    assert condition["node"] == "node-a"
    assert "discoveryDetails" in condition["message"]
    assert await instance_list(nodes.store) == []
    cfg["spec"]["discoveryHandler"]["discoveryDetails"] = "shared: true"
    await nodes.store.update(cfg)
    await nodes.settle()
    cfg = await nodes.store.get("Configuration", "cams", "default")
    assert "conditions" not in (cfg.get("status") or {})
    assert len(await instance_list(nodes.store)) == 1


class _LateHandler:
    name = "late"

    async def discover(self, details: str, properties: Mapping[str, bytes] | None = None) -> Any:
        yield [Device("late-1", {"x": "1"})]
        await asyncio.Event().wait()


async def test_a_missing_handler_is_a_condition_retried_when_the_handler_registers(nodes: Nodes) -> None:
    agent = await nodes.add("node-a")
    await nodes.store.create(configuration(handler="late"))
    await nodes.settle()
    cfg = await nodes.store.get("Configuration", "cams", "default")
    assert cfg["status"]["conditions"][0]["reason"] == "DiscoveryHandlerNotFound"
    registry: HandlerRegistry = agent.handlers
    registry.add(_LateHandler())
    await nodes.settle()
    inst = await only_instance(nodes.store)
    assert inst["metadata"]["name"] == name_of("late-1")
    cfg = await nodes.store.get("Configuration", "cams", "default")
    assert "conditions" not in (cfg.get("status") or {})


# -- discovery properties -----------------------------------------------------------------------------------


class _Recording:
    """A discovery handler that remembers the properties of every `discover` call and reports device `cam-1`."""

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[dict[str, bytes]] = []

    async def discover(
        self, details: str, properties: Mapping[str, bytes] | None = None
    ) -> AsyncGenerator[list[Device], None]:
        self.calls.append(dict(properties or {}))
        yield [Device("cam-1", {})]
        await asyncio.Event().wait()


async def recording_node(nodes: Nodes) -> _Recording:
    agent = await nodes.add("node-a")
    handler = _Recording()
    agent.handlers.add(handler)
    return handler


def from_secret(name: str, key: str, secret_name: str = "onvif-auth", **extra: Any) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": key, **extra}}}


async def set_secret_data(store: Store, name: str, data: dict[str, bytes]) -> None:
    obj = await store.get("Secret", name, "default")
    obj["data"] = secret(name, data)["data"]
    await store.update(obj)


async def discovery_conditions(store: Store, name: str = "cams") -> list[dict[str, Any]]:
    """The Configuration's conditions without their timestamps."""
    cfg = await store.get("Configuration", name, "default")
    found = (cfg.get("status") or {}).get("conditions") or []
    return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in found]


async def test_the_handler_is_sent_the_resolved_discovery_properties(nodes: Nodes) -> None:
    handler = await recording_node(nodes)
    await nodes.store.create(secret("onvif-auth", {"username": b"admin"}, stringData={"password": "s3cret"}))
    await nodes.store.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cam-settings", "namespace": "default"},
            "data": {"timeout": "5"},
        }
    )
    props = [
        {"name": "REALM", "value": "lab"},
        from_secret("USERNAME", "username"),
        from_secret("PASSWORD", "password"),
        {"name": "TIMEOUT", "valueFrom": {"configMapKeyRef": {"name": "cam-settings", "key": "timeout"}}},
        from_secret("TOKEN", "token", optional=True),
    ]
    await nodes.store.create(configuration(handler="recording", discovery_properties=props))
    await nodes.settle()
    assert handler.calls == [{"REALM": b"lab", "USERNAME": b"admin", "PASSWORD": b"s3cret", "TIMEOUT": b"5"}]
    assert (await only_instance(nodes.store))["metadata"]["name"] == name_of("cam-1")
    assert await discovery_conditions(nodes.store) == []


async def test_a_change_to_a_read_secret_restarts_discovery_only_when_a_sent_value_changes(nodes: Nodes) -> None:
    handler = await recording_node(nodes)
    await nodes.store.create(secret("onvif-auth", {"username": b"admin"}))
    await nodes.store.create(secret("unrelated", {"username": b"x"}))
    await nodes.store.create(
        configuration(handler="recording", discovery_properties=[from_secret("USERNAME", "username")])
    )
    await nodes.settle()
    assert handler.calls == [{"USERNAME": b"admin"}]
    await set_secret_data(nodes.store, "unrelated", {"username": b"y"})
    await set_secret_data(nodes.store, "onvif-auth", {"username": b"admin", "unread": b"z"})
    await nodes.settle()
    assert handler.calls == [{"USERNAME": b"admin"}]  # nothing the handler is sent changed
    await set_secret_data(nodes.store, "onvif-auth", {"username": b"root"})
    await nodes.settle()
    assert handler.calls == [{"USERNAME": b"admin"}, {"USERNAME": b"root"}]
    assert len(await instance_list(nodes.store)) == 1


async def test_editing_the_configurations_properties_restarts_discovery_and_drops_the_old_reference(
    nodes: Nodes,
) -> None:
    handler = await recording_node(nodes)
    await nodes.store.create(secret("onvif-auth", {"username": b"admin"}))
    await nodes.store.create(
        configuration(handler="recording", discovery_properties=[from_secret("USERNAME", "username")])
    )
    await nodes.settle()
    cfg = await nodes.store.get("Configuration", "cams", "default")
    cfg["spec"]["discoveryHandler"]["discoveryProperties"] = [{"name": "USERNAME", "value": "guest"}]
    await nodes.store.update(cfg)
    await nodes.settle()
    assert handler.calls == [{"USERNAME": b"admin"}, {"USERNAME": b"guest"}]
    await set_secret_data(nodes.store, "onvif-auth", {"username": b"root"})  # no longer read
    await nodes.settle()
    assert handler.calls == [{"USERNAME": b"admin"}, {"USERNAME": b"guest"}]
    assert nodes.agents["node-a"].cache.sources.watched() == []  # its informer is stopped


async def test_a_missing_required_secret_is_a_condition_until_it_is_created_with_the_key(nodes: Nodes) -> None:
    handler = await recording_node(nodes)
    nodes.world.plug("usb-1", ["node-a"])
    await nodes.store.create(configuration(name="plain", details="shared: false"))  # another Configuration
    props = [{"name": "REALM", "value": "lab"}, from_secret("USERNAME", "username")]
    await nodes.store.create(configuration(handler="recording", discovery_properties=props))
    await nodes.settle()
    failed = {"type": "DiscoveryFailed", "status": "True", "reason": "InvalidDiscoveryProperties", "node": "node-a"}
    path = "spec.discoveryHandler.discoveryProperties[1].valueFrom.secretKeyRef"
    assert await discovery_conditions(nodes.store) == [
        {**failed, "message": f"{path}.name: Secret default/onvif-auth not found"}
    ]
    assert handler.calls == []
    assert [i["spec"]["configurationName"] for i in await instance_list(nodes.store)] == ["plain"]  # the agent goes on
    rv = (await nodes.store.get("Configuration", "cams", "default"))["metadata"]["resourceVersion"]
    await nodes.advance(60.0)
    assert (await nodes.store.get("Configuration", "cams", "default"))["metadata"]["resourceVersion"] == rv  # no retry

    await nodes.store.create(secret("onvif-auth", {"user": b"admin"}))  # the wrong key
    await nodes.settle()
    assert await discovery_conditions(nodes.store) == [
        {**failed, "message": f"{path}.key: Secret default/onvif-auth has no key 'username'"}
    ]
    assert handler.calls == []

    await set_secret_data(nodes.store, "onvif-auth", {"username": b"admin"})
    await nodes.settle()
    assert await discovery_conditions(nodes.store) == []
    assert handler.calls == [{"REALM": b"lab", "USERNAME": b"admin"}]
    assert sorted(i["spec"]["configurationName"] for i in await instance_list(nodes.store)) == ["cams", "plain"]


# -- plugins over gRPC --------------------------------------------------------------------------------------


async def test_plugins_register_with_the_kubelet_and_list_slots_and_vdevs(nodes: Nodes) -> None:
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    nodes.world.plug("cam-2", ["node-a"])
    await nodes.store.create(configuration(capacity=2))
    await nodes.settle()
    kubelet = nodes.kubelets["node-a"]
    a, b = sorted([name_of("cam-1"), name_of("cam-2")])
    resources = {f"{PREFIX}/cams", f"{PREFIX}/{a}", f"{PREFIX}/{b}"}
    await eventually(lambda: resources <= set(kubelet.endpoints), "three registrations")
    by_resource = {r.resource_name: r for r in kubelet.registrations}
    assert by_resource[f"{PREFIX}/cams"].version == "v1beta1"
    assert by_resource[f"{PREFIX}/cams"].options.get_preferred_allocation_available is True
    assert by_resource[f"{PREFIX}/{a}"].options.get_preferred_allocation_available is True  # the slots it sees free
    assert by_resource[f"{PREFIX}/{a}"].endpoint == kubelet.endpoints[f"{PREFIX}/{a}"]
    assert (kubelet.plugin_dir / by_resource[f"{PREFIX}/{a}"].endpoint).exists()
    cl = kubelet.client(f"{PREFIX}/cams")
    il = kubelet.client(f"{PREFIX}/{a}")
    await cl.watch()
    await il.watch()
    assert cl.latest == {a: "Healthy", b: "Healthy"}
    assert il.latest == {f"{a}-0": "Healthy", f"{a}-1": "Healthy"}
    assert (await cl.options()).get_preferred_allocation_available is True
    await cl.close()
    await il.close()


async def shared_camera(
    nodes: Nodes, properties: dict[str, str] | None = None
) -> tuple[str, str, MiniKubelet, MiniKubelet]:
    """cam-1 shared by node-a and node-b, capacity 2: (Instance, IL resource, kubelet a, kubelet b), both registered."""
    await nodes.add("node-a")
    await nodes.add("node-b")
    nodes.world.plug("cam-1", ["node-a", "node-b"], properties)
    await nodes.store.create(configuration(capacity=2))
    await nodes.settle()
    name = name_of("cam-1")
    resource = f"{PREFIX}/{name}"
    ka, kb = nodes.kubelets["node-a"], nodes.kubelets["node-b"]
    await eventually(lambda: ka.registered(resource) and kb.registered(resource), "IL registrations")
    return name, resource, ka, kb


async def test_list_and_watch_updates_after_another_node_claims_a_slot(nodes: Nodes) -> None:
    name, resource, ka, kb = await shared_camera(nodes)
    watcher = ka.client(resource)
    await watcher.watch()
    claimer = kb.client(resource)
    await claimer.allocate([f"{name}-0"])
    await eventually(lambda: watcher.latest.get(f"{name}-0") == "Unhealthy", "node-a to see the claim")
    assert watcher.latest == {f"{name}-0": "Unhealthy", f"{name}-1": "Healthy"}
    await watcher.close()
    await claimer.close()


async def test_allocate_claims_re_offers_and_refuses_a_slot_held_elsewhere(nodes: Nodes) -> None:
    name, resource, ka, kb = await shared_camera(nodes, {"ip": "10.0.0.1"})
    a, b = ka.client(resource), kb.client(resource)
    await b.watch()
    response = await a.allocate([f"{name}-0"])
    digest = name.rpartition("-")[2].upper()
    container = response.container_responses[0]
    assert dict(container.envs) == {"ip": "10.0.0.1", f"ip_{digest}": "10.0.0.1"}
    assert dict(container.annotations) == {"devplace.io/slots": f"{name}-0", "devplace.io/instances": name}
    again = await a.allocate([f"{name}-0"])  # the kubelet re-offering what it holds
    assert again.container_responses[0].annotations["devplace.io/slots"] == f"{name}-0"
    sends = len(b.lists)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await b.allocate([f"{name}-0"])
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "held by node-a" in (refused.value.details() or "")
    await eventually(lambda: len(b.lists) > sends, "health re-sent after the refusal")
    assert b.latest[f"{name}-0"] == "Unhealthy"
    inst = await only_instance(nodes.store)
    assert inst["spec"]["deviceUsage"] == {f"{name}-0": "node-a", f"{name}-1": ""}
    await nodes.settle()  # the refusal is told on the Instance as an Event, for `kubectl describe`
    [event] = [e for e in (await nodes.store.list("Event")).items if e["reason"] == "ClaimRefused"]
    assert (event["involvedObject"]["kind"], event["involvedObject"]["name"]) == ("Instance", name)
    assert (event["type"], event["reportingInstance"]) == ("Warning", "node-b")
    assert event["message"].startswith("node-b: a slot claim was refused: ")
    assert "held by node-a" in event["message"]
    await a.close()
    await b.close()


async def test_an_il_claim_re_advertises_the_cl_list_once_answered(nodes: Nodes) -> None:
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration(capacity=1))
    await nodes.settle()
    name = name_of("cam-1")
    kubelet = nodes.kubelets["node-a"]
    await eventually(lambda: kubelet.registered(f"{PREFIX}/cams") and kubelet.registered(f"{PREFIX}/{name}"))
    cl = kubelet.client(f"{PREFIX}/cams")
    await cl.watch()
    assert cl.latest == {name: "Healthy"}
    await kubelet.client(f"{PREFIX}/{name}").allocate([f"{name}-0"])
    await eventually(lambda: cl.latest == {name: "Unhealthy"}, "the CL list after the IL claim")
    await nodes.settle()  # the held-back wake-ups were let go: the agent is idle again
    assert cl.latest == {name: "Unhealthy"}
    await cl.close()


async def test_after_an_allocate_the_agent_lists_pod_resources_again(nodes: Nodes) -> None:
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration(capacity=2))
    await nodes.settle()
    name = name_of("cam-1")
    kubelet = nodes.kubelets["node-a"]
    await eventually(lambda: kubelet.registered(f"{PREFIX}/{name}"), "IL registration")
    lists = kubelet.lists
    await kubelet.client(f"{PREFIX}/{name}").allocate([f"{name}-0"])
    await nodes.settle()
    assert kubelet.lists > lists


async def test_a_re_offer_answers_alike_until_the_broker_properties_change(nodes: Nodes) -> None:
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration(capacity=2, broker_properties={"RESOLUTION": "1080p"}))
    await nodes.settle()
    name = name_of("cam-1")
    kubelet = nodes.kubelets["node-a"]
    await eventually(lambda: kubelet.registered(f"{PREFIX}/{name}"), "IL registration")
    client = kubelet.client(f"{PREFIX}/{name}")
    first = await client.allocate([f"{name}-0"])
    again = await client.allocate([f"{name}-0"])
    assert again == first
    assert first.container_responses[0].envs["RESOLUTION"] == "1080p"
    cfg = await nodes.store.get("Configuration", "cams", "default")
    cfg["spec"]["brokerProperties"] = {"RESOLUTION": "4k"}
    await nodes.store.update(cfg)
    await nodes.settle()
    changed = await client.allocate([f"{name}-0"])
    assert changed.container_responses[0].envs["RESOLUTION"] == "4k"
    assert changed.container_responses[0].annotations == first.container_responses[0].annotations
    await client.close()


async def test_a_failed_multi_container_request_holds_nothing(nodes: Nodes) -> None:
    name, resource, ka, kb = await shared_camera(nodes)
    await kb.client(resource).allocate([f"{name}-1"])
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await ka.client(resource).allocate([f"{name}-0"], [f"{name}-1"])
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"{name}-1 is held by node-b" in (refused.value.details() or "")
    inst = await only_instance(nodes.store)
    assert inst["spec"]["deviceUsage"] == {f"{name}-0": "", f"{name}-1": "node-b"}


async def test_cl_allocate_maps_vdevs_to_slots_and_re_offer_returns_the_same_slot(nodes: Nodes) -> None:
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    nodes.world.plug("cam-2", ["node-a"])
    await nodes.store.create(configuration(capacity=2))
    await nodes.settle()
    kubelet = nodes.kubelets["node-a"]
    await eventually(lambda: kubelet.registered(f"{PREFIX}/cams"), "CL registration")
    cl = kubelet.client(f"{PREFIX}/cams")
    a, b = sorted([name_of("cam-1"), name_of("cam-2")])
    response = await cl.allocate([a, b])
    assert response.container_responses[0].annotations["devplace.io/slots"] == f"{a}-0,{b}-0"
    assert response.container_responses[0].annotations["devplace.io/instances"] == f"{a},{b}"
    again = await cl.allocate([b])  # e.g. a second container of the same pod (Akri #843)
    assert again.container_responses[0].annotations["devplace.io/slots"] == f"{b}-0"
    usage = {i["metadata"]["name"]: i["spec"]["deviceUsage"] for i in await instance_list(nodes.store)}
    assert usage == {a: {f"{a}-0": f"C:{a}:node-a", f"{a}-1": ""}, b: {f"{b}-0": f"C:{b}:node-a", f"{b}-1": ""}}
    await cl.close()


async def test_cl_unique_refuses_more_unique_devices_than_exist_and_holds_nothing(nodes: Nodes) -> None:
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    nodes.world.plug("cam-2", ["node-a"])
    await nodes.store.create(configuration(capacity=2))
    await nodes.settle()
    kubelet = nodes.kubelets["node-a"]
    await eventually(lambda: kubelet.registered(f"{PREFIX}/cams"), "CL registration")
    cl = kubelet.client(f"{PREFIX}/cams")
    a, b = sorted([name_of("cam-1"), name_of("cam-2")])
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await cl.allocate([a, b, f"{a}-1"])  # three devices, two cameras
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    for inst in await instance_list(nodes.store):
        assert set(inst["spec"]["deviceUsage"].values()) == {""}
    await cl.close()


async def test_cl_refuses_when_another_node_took_the_last_slot_and_re_advertises(nodes: Nodes) -> None:
    await nodes.add("node-a")
    await nodes.add("node-b")
    nodes.world.plug("cam-1", ["node-a", "node-b"])
    await nodes.store.create(configuration(capacity=1))
    await nodes.settle()
    name = name_of("cam-1")
    ka, kb = nodes.kubelets["node-a"], nodes.kubelets["node-b"]
    await eventually(lambda: ka.registered(f"{PREFIX}/cams") and kb.registered(f"{PREFIX}/{name}"), "registrations")
    cl = ka.client(f"{PREFIX}/cams")
    await cl.watch()
    await kb.client(f"{PREFIX}/{name}").allocate([f"{name}-0"])
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await cl.allocate([name])
    assert "no free slot" in (refused.value.details() or "")
    await eventually(lambda: cl.latest == {name: "Unhealthy"}, "the CL device advertised Unhealthy")
    await cl.close()


async def test_cl_non_unique_prefers_spreading_or_packing_by_annotation(nodes: Nodes) -> None:
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    nodes.world.plug("cam-2", ["node-a"])
    await nodes.store.create(configuration(name="spread", capacity=2, unique=False))
    await nodes.store.create(
        configuration(name="pack", capacity=2, unique=False, annotations={"devplace.io/cl-preference": "pack"})
    )
    await nodes.settle()
    kubelet = nodes.kubelets["node-a"]
    await eventually(
        lambda: kubelet.registered(f"{PREFIX}/spread") and kubelet.registered(f"{PREFIX}/pack"), "CL registrations"
    )
    for cfg, expected_same in (("spread", False), ("pack", True)):
        client = kubelet.client(f"{PREFIX}/{cfg}")
        await client.watch()
        assert len(client.latest) == 4
        picked = await client.prefer(sorted(client.latest), [], 2)
        instances_picked = {v.rpartition("-")[0] for v in picked}
        assert (len(instances_picked) == 1) is expected_same, picked
        response = await client.allocate(picked)
        assert len(response.container_responses[0].annotations["devplace.io/slots"].split(",")) == 2
        await client.close()


async def test_kubelet_restart_makes_every_plugin_register_again_and_keeps_held_slots(nodes: Nodes) -> None:
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration(capacity=2))
    await nodes.settle()
    name = name_of("cam-1")
    kubelet = nodes.kubelets["node-a"]
    resources = {f"{PREFIX}/cams", f"{PREFIX}/{name}"}
    await eventually(lambda: resources <= set(kubelet.endpoints), "registrations")
    client = kubelet.client(f"{PREFIX}/{name}")
    await client.allocate([f"{name}-1"])
    await client.close()
    before = len(kubelet.registrations)
    await kubelet.restart()
    await eventually(lambda: resources <= set(kubelet.endpoints), "re-registrations after the restart")
    assert len(kubelet.registrations) >= before + 2
    client = kubelet.client(f"{PREFIX}/{name}")
    await client.watch()
    assert client.latest == {f"{name}-0": "Healthy", f"{name}-1": "Healthy"}  # held by this node: still Healthy
    await client.allocate([f"{name}-1"])  # the kubelet's checkpoint re-offers it
    assert (await only_instance(nodes.store))["spec"]["deviceUsage"][f"{name}-1"] == "node-a"
    await client.close()


# -- a store that does not answer at start ------------------------------------------------------------------


class FlakyStore:
    """A store whose first `failures` lists raise `Unavailable`, as a remote store's API server not up yet."""

    def __init__(self, inner: Store, failures: int) -> None:
        self.inner = inner
        self.failures = failures

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        if self.failures > 0:
            self.failures -= 1
            raise errors.Unavailable("the API server at http://127.0.0.1:1 did not answer")
        return await self.inner.list(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_an_agent_whose_store_does_not_answer_retries_with_backoff_on_its_clock(
    nodes: Nodes, caplog: pytest.LogCaptureFixture
) -> None:
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration())
    nodes.store = FlakyStore(nodes.store, failures=3)  # type: ignore[assignment]
    with caplog.at_level("WARNING", logger="devplace.agent._agents"):
        starting = asyncio.create_task(nodes.add("node-a"))
        for pause in (0.05, 0.1, 0.2):  # the supervisor's backoff, doubling, on the injected clock
            await eventually(lambda: nodes.clock.pending_sleepers == 1, "the agent waiting to try again")
            assert not starting.done()
            await nodes.clock.advance(pause)
        await starting
    retries = [r.message for r in caplog.records if "the store is unavailable" in r.message]
    assert [m.rpartition(" ")[2] for m in retries] == ["0.05s", "0.10s", "0.20s"]
    await nodes.settle()
    assert [i["spec"]["nodes"] for i in await instance_list(nodes.store)] == [["node-a"]]


# -- an Instance whose slots break the rules (written into the store past the API server) -----------------------


async def test_a_corrupted_instance_keeps_its_plugin_and_each_node_repairs_only_its_own_slots(
    nodes: Nodes, caplog: pytest.LogCaptureFixture
) -> None:
    await nodes.add("node-a")
    await nodes.add("node-b")
    nodes.world.plug("cam-1", ["node-a", "node-b"])
    await nodes.store.create(configuration(capacity=4))
    await nodes.settle()
    name = name_of("cam-1")
    resource = f"{PREFIX}/{name}"
    ka = nodes.kubelets["node-a"]
    await eventually(lambda: ka.registered(resource), "IL registration")
    socket = ka.plugin_dir / ka.endpoints[resource]
    registrations = len(ka.registrations)
    stored = await only_instance(nodes.store)
    stored["spec"]["capacity"] = 1
    stored["spec"]["nodes"] = ["node-b"]
    stored["spec"]["deviceUsage"] = {
        f"{name}-0": "C::node-a",  # malformed, names node-a
        f"{name}-1": "node-b",  # a valid hold of node-b's
        f"{name}-2": "C:::",  # malformed, names nobody
        f"{name}-5": "",  # free beyond capacity; slot 3 is missing
        "bogus": "node-zzz",  # not a slot name
    }
    with caplog.at_level("WARNING", logger="devplace.agent._agents"):
        await nodes.store.update(stored)  # the memory store, like SQLite, does not check; the API server would
        await nodes.settle()
    assert socket.exists()
    assert len(ka.registrations) == registrations  # served throughout, never stopped and registered again
    repaired = await only_instance(nodes.store)
    assert sorted(repaired["spec"]["nodes"]) == ["node-a", "node-b"]
    assert repaired["spec"]["capacity"] == 4
    assert repaired["spec"]["deviceUsage"] == {
        f"{name}-0": "node-a",  # its own: an IL hold now, released by the grace unless the kubelet lists it
        f"{name}-1": "node-b",
        f"{name}-2": "C:::",  # nobody's to repair: left alone, inert
        f"{name}-3": "",
        "bogus": "node-zzz",
    }
    assert any(
        f"spec.deviceUsage.{name}-2" in r.message and "breaks the slot rules" in r.message for r in caplog.records
    )
    client = ka.client(resource)
    await client.watch()
    assert client.latest == {f"{name}-{i}": h for i, h in enumerate(["Healthy", "Unhealthy", "Unhealthy", "Healthy"])}
    await client.allocate([f"{name}-3"])  # the valid free slot still serves
    assert (await only_instance(nodes.store))["spec"]["deviceUsage"][f"{name}-3"] == "node-a"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await client.allocate([f"{name}-2"])
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    await client.close()


# -- release ------------------------------------------------------------------------------------------------


async def _hold(nodes: Nodes, pod_name: str, resource: str, ids: list[str], node: str = "node-a") -> None:
    """A pod bound to `node` got `ids` of `resource`: Allocate, kubelet bookkeeping, Running in the store."""
    kubelet = nodes.kubelets[node]
    client = kubelet.client(resource)
    response = await client.allocate(ids)
    await client.close()
    assert response.container_responses
    kubelet.pods.setdefault(("default", pod_name), []).append((resource, ids))
    await nodes.store.create(pod(pod_name, node))
    await nodes.settle()


async def _usage(nodes: Nodes) -> dict[str, dict[str, str]]:
    return {i["metadata"]["name"]: i["spec"]["deviceUsage"] for i in await instance_list(nodes.store)}


async def _ready(nodes: Nodes, name: str) -> None:
    kubelet = nodes.kubelets["node-a"]
    await eventually(
        lambda: kubelet.registered(f"{PREFIX}/cams") and kubelet.registered(f"{PREFIX}/{name}"), "registrations"
    )


async def test_slots_are_released_at_once_when_their_pod_is_deleted(nodes: Nodes) -> None:
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration(capacity=2))
    await nodes.settle()
    name = name_of("cam-1")
    await _ready(nodes, name)
    await _hold(nodes, "il-pod", f"{PREFIX}/{name}", [f"{name}-1"])
    await _hold(nodes, "cl-pod", f"{PREFIX}/cams", [name])
    assert (await _usage(nodes))[name] == {f"{name}-0": f"C:{name}:node-a", f"{name}-1": "node-a"}
    del nodes.kubelets["node-a"].pods[("default", "il-pod")]
    await nodes.store.delete("Pod", "il-pod", "default")
    await nodes.settle()
    assert (await _usage(nodes))[name] == {f"{name}-0": f"C:{name}:node-a", f"{name}-1": ""}
    terminated = await nodes.store.get("Pod", "cl-pod", "default")
    terminated["status"]["phase"] = "Succeeded"
    await nodes.store.update(terminated)
    await nodes.settle()
    assert (await _usage(nodes))[name] == {f"{name}-0": "", f"{name}-1": ""}


async def test_a_slot_absent_from_pod_resources_is_released_only_after_the_grace(nodes: Nodes) -> None:
    await nodes.add("node-a", release_grace=60.0, podresources_poll=10.0)
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration(capacity=2))
    await nodes.settle()
    name = name_of("cam-1")
    await _ready(nodes, name)
    kubelet = nodes.kubelets["node-a"]
    il = kubelet.client(f"{PREFIX}/{name}")
    await il.allocate([f"{name}-0"])
    await il.close()
    cl = kubelet.client(f"{PREFIX}/cams")
    await cl.allocate([name])
    await cl.close()
    # nobody lists these devices in PodResources (e.g. the pod vanished while the agent was away)
    await nodes.advance(50.0)
    assert set((await _usage(nodes))[name].values()) == {"node-a", f"C:{name}:node-a"}
    await nodes.advance(30.0)
    assert (await _usage(nodes))[name] == {f"{name}-0": "", f"{name}-1": ""}


async def test_a_slot_listed_in_pod_resources_is_never_released_by_the_grace(nodes: Nodes) -> None:
    await nodes.add("node-a", release_grace=20.0, podresources_poll=5.0)
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration(capacity=2))
    await nodes.settle()
    name = name_of("cam-1")
    await _ready(nodes, name)
    await _hold(nodes, "p", f"{PREFIX}/{name}", [f"{name}-0"])
    await nodes.advance(100.0)
    assert (await _usage(nodes))[name][f"{name}-0"] == "node-a"


async def test_an_agent_restart_keeps_held_slots_and_still_releases(nodes: Nodes) -> None:
    await nodes.add("node-a", release_grace=60.0)
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration(capacity=3))
    await nodes.settle()
    name = name_of("cam-1")
    await _ready(nodes, name)
    await _hold(nodes, "kept", f"{PREFIX}/{name}", [f"{name}-0"])
    await _hold(nodes, "deleted-later", f"{PREFIX}/cams", [name])
    lost = nodes.kubelets["node-a"].client(f"{PREFIX}/{name}")
    await lost.allocate([f"{name}-2"])  # never listed in PodResources
    await lost.close()
    before = (await _usage(nodes))[name]
    await nodes.restart("node-a", release_grace=60.0)
    await nodes.settle()
    assert (await _usage(nodes))[name] == before
    # immediate release still works after the restart (the mapping is rebuilt from PodResources)
    del nodes.kubelets["node-a"].pods[("default", "deleted-later")]
    await nodes.store.delete("Pod", "deleted-later", "default")
    await nodes.settle()
    assert (await _usage(nodes))[name] == {f"{name}-0": "node-a", f"{name}-1": "", f"{name}-2": "node-a"}
    # and the grace release for the slot nobody lists
    await nodes.advance(80.0)
    usage = (await _usage(nodes))[name]
    assert usage == {f"{name}-0": "node-a", f"{name}-1": "", f"{name}-2": ""}


# -- external discovery handlers ----------------------------------------------------------------------------


async def echo_process(root: Path, registration: Path, *args: str) -> asyncio.subprocess.Process:
    """An external discovery handler process `echo` registering with the agent's socket (stop it with stop_child)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "devplace.discovery._echoserver",
        "--name",
        "echo",
        "--socket-dir",
        str(root),
        "--registration",
        str(registration),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def test_an_external_handler_registering_on_the_agents_socket_discovers_devices(nodes: Nodes) -> None:
    registration = nodes.root / "reg.sock"
    await nodes.add("node-a", registration_socket=registration)
    await nodes.store.create(configuration(handler="echo"))
    await nodes.settle()
    cfg = await nodes.store.get("Configuration", "cams", "default")
    assert cfg["status"]["conditions"][0]["reason"] == "DiscoveryHandlerNotFound"
    proc = await echo_process(nodes.root, registration, "--devices", "ext-1,ext-2", "--shared")
    try:

        async def two_instances() -> bool:
            return len(await instance_list(nodes.store)) == 2

        for _ in range(600):
            if await two_instances():
                break
            await asyncio.sleep(0.05)
        items = await instance_list(nodes.store)
        assert sorted(i["metadata"]["name"] for i in items) == sorted([name_of("ext-1"), name_of("ext-2")])
        assert {i["spec"]["brokerProperties"]["ECHO_DEVICE"] for i in items} == {"ext-1", "ext-2"}
        await nodes.settle()
        cfg = await nodes.store.get("Configuration", "cams", "default")
        assert "conditions" not in (cfg.get("status") or {})
    finally:
        await stop_child(proc)


async def test_an_external_handler_process_is_sent_the_properties_read_from_a_secret(nodes: Nodes) -> None:
    registration = nodes.root / "reg.sock"
    agent = await nodes.add("node-a", registration_socket=registration)
    await nodes.store.create(secret("onvif-auth", {"username": b"admin"}))
    props = [{"name": "REALM", "value": "lab"}, from_secret("USERNAME", "username")]
    await nodes.store.create(configuration(handler="echo", discovery_properties=props))
    proc = await echo_process(nodes.root, registration, "--devices", "ext-1", "--echo-properties")
    try:
        await eventually(lambda: bool(agent.cache.instances), "the Instance of ext-1", timeout=30.0)
        await nodes.settle()
        inst = await only_instance(nodes.store)
        assert inst["spec"]["brokerProperties"] == {
            "ECHO_DEVICE": "ext-1",
            "ECHO_PROPERTY_REALM": "lab",
            "ECHO_PROPERTY_USERNAME": "admin",
        }
    finally:
        await stop_child(proc)


# -- resource-name clashes ----------------------------------------------------------------------------------


def echo_cams(namespace: str, descriptions: str = "[foo0, foo1]") -> dict[str, Any]:
    """Configuration `<namespace>/cams` on debugEcho: the same devices, so the same Instance names, in any namespace."""
    cfg = configuration(handler="debugEcho", details=f"descriptions: {descriptions}")
    cfg["metadata"]["namespace"] = namespace
    return cfg


def conflicts(cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [c for c in (cfg.get("status") or {}).get("conditions") or [] if c["type"] == "ResourceNameConflict"]


def registration_counts(kubelet: MiniKubelet) -> dict[str, int]:
    counts: dict[str, int] = {}
    for registration in kubelet.registrations:
        counts[registration.resource_name] = counts.get(registration.resource_name, 0) + 1
    return counts


CAMS_TAKEN = "resource devplace.io/cams is served for Configuration a/cams (created first); rename this Configuration"


async def test_two_configurations_with_one_name_are_served_only_for_the_one_created_first(nodes: Nodes) -> None:
    await nodes.store.create(echo_cams("a"))
    await nodes.clock.advance(1.0)
    await nodes.store.create(echo_cams("b"))
    await nodes.add("node-a")
    await nodes.settle()
    kubelet = nodes.kubelets["node-a"]
    foo0, foo1 = name_of("foo0"), name_of("foo1")
    resources = {f"{PREFIX}/cams": "cams", f"{PREFIX}/{foo0}": foo0, f"{PREFIX}/{foo1}": foo1}
    # discovery is untouched: both namespaces have their Instances on the node
    assert sorted((i["metadata"]["namespace"], i["metadata"]["name"]) for i in await instance_list(nodes.store)) == [
        ("a", foo0),
        ("a", foo1),
        ("b", foo0),
        ("b", foo1),
    ]
    # ...but the kubelet is offered each name once, by a/cams's plugins, and b/cams's sockets are not served
    assert registration_counts(kubelet) == dict.fromkeys(resources, 1)
    assert kubelet.endpoints == {
        f"{PREFIX}/cams": "dp-cl-a_cams.sock",
        f"{PREFIX}/{foo0}": f"dp-il-a_{foo0}.sock",
        f"{PREFIX}/{foo1}": f"dp-il-a_{foo1}.sock",
    }
    assert sorted(p.name for p in kubelet.plugin_dir.glob("dp-*.sock")) == sorted(kubelet.endpoints.values())
    a = await nodes.store.get("Configuration", "cams", "a")
    b = await nodes.store.get("Configuration", "cams", "b")
    assert "conditions" not in (a.get("status") or {})
    [condition] = b["status"]["conditions"]
    assert {k: v for k, v in condition.items() if k != "lastTransitionTime"} == {
        "type": "ResourceNameConflict",
        "status": "True",
        "reason": "ResourceNameTaken",
        "message": CAMS_TAKEN,
        "node": "node-a",
    }
    written = b["metadata"]["resourceVersion"]
    await nodes.advance(30.0)
    assert (await nodes.store.get("Configuration", "cams", "b"))["metadata"]["resourceVersion"] == written

    await nodes.store.delete("Configuration", "cams", "a")
    await nodes.settle()
    assert registration_counts(kubelet) == dict.fromkeys(resources, 2)
    assert kubelet.endpoints == {
        f"{PREFIX}/cams": "dp-cl-b_cams.sock",
        f"{PREFIX}/{foo0}": f"dp-il-b_{foo0}.sock",
        f"{PREFIX}/{foo1}": f"dp-il-b_{foo1}.sock",
    }
    assert sorted(p.name for p in kubelet.plugin_dir.glob("dp-*.sock")) == sorted(kubelet.endpoints.values())
    b = await nodes.store.get("Configuration", "cams", "b")
    assert "conditions" not in (b.get("status") or {})
    cl = kubelet.client(f"{PREFIX}/cams")
    await cl.watch()
    assert cl.latest == {foo0: "Healthy", foo1: "Healthy"}
    await cl.close()


async def test_a_senior_configuration_whose_devices_appear_takes_the_name_from_a_junior_one(nodes: Nodes) -> None:
    await nodes.store.create(echo_cams("a", descriptions="[]"))
    await nodes.clock.advance(1.0)
    await nodes.store.create(echo_cams("b"))
    await nodes.add("node-a")
    await nodes.settle()
    kubelet = nodes.kubelets["node-a"]
    # a/cams has no device on this node, so it clashes with nothing here
    assert kubelet.endpoints[f"{PREFIX}/cams"] == "dp-cl-b_cams.sock"
    assert conflicts(await nodes.store.get("Configuration", "cams", "b")) == []

    a = await nodes.store.get("Configuration", "cams", "a")
    a["spec"]["discoveryHandler"]["discoveryDetails"] = "descriptions: [foo0]"
    await nodes.store.update(a)
    await nodes.settle()
    foo0 = name_of("foo0")
    assert kubelet.endpoints[f"{PREFIX}/cams"] == "dp-cl-a_cams.sock"
    assert kubelet.endpoints[f"{PREFIX}/{foo0}"] == f"dp-il-a_{foo0}.sock"
    # b/cams serves nothing, not even foo1, which a/cams does not have
    assert sorted(p.name for p in kubelet.plugin_dir.glob("dp-*.sock")) == ["dp-cl-a_cams.sock", f"dp-il-a_{foo0}.sock"]
    assert [c["message"] for c in conflicts(await nodes.store.get("Configuration", "cams", "b"))] == [CAMS_TAKEN]


# -- Akri compatibility: resource names, properties that change under one id ---------------------------------


async def test_without_an_override_each_configuration_names_its_resources_after_its_api_group(nodes: Nodes) -> None:
    """akri.sh/v0 -> akri.sh/<name>, devplace.io/v1alpha1 -> devplace.io/<name>: the rule the controller and the
    scheduler follow too (`api.devices.resource_name`), so a broker asks for what the kubelet was told about."""
    await nodes.add("node-a", resource_prefix=None)
    nodes.world.plug("cam-1", ["node-a"])
    akri = {**configuration("akri-cams"), "apiVersion": "akri.sh/v0"}
    await nodes.store.create(akri)
    await nodes.store.create(configuration("cams"))
    await nodes.settle()
    kubelet = nodes.kubelets["node-a"]
    akri_instance = name_of("cam-1", cfg="akri-cams")
    wanted = {
        f"akri.sh/{akri_instance}",
        "akri.sh/akri-cams",
        f"devplace.io/{name_of('cam-1')}",
        "devplace.io/cams",
    }
    await eventually(lambda: wanted <= set(kubelet.endpoints), "every plugin registered")
    assert set(kubelet.endpoints) == wanted
    stored = await nodes.store.get("Instance", akri_instance, "default")
    assert stored["spec"]["cdiName"] == f"akri.sh/akri-cams={akri_instance.rpartition('-')[2]}"
    client = kubelet.client(f"akri.sh/{akri_instance}")
    await client.allocate([f"{akri_instance}-0"])
    await client.close()
    kubelet.pods[("default", "broker")] = [(f"akri.sh/{akri_instance}", [f"{akri_instance}-0"])]
    await nodes.store.create(pod("broker", "node-a"))
    await nodes.settle()
    await nodes.store.delete("Pod", "broker", "default")
    await nodes.settle()
    released = await nodes.store.get("Instance", akri_instance, "default")
    assert released["spec"]["deviceUsage"][f"{akri_instance}-0"] == ""  # the release found it under akri.sh/


async def test_a_property_changed_under_the_same_device_id_reaches_the_next_allocate(nodes: Nodes) -> None:
    """A camera's IP changes (same device id): the Instance's brokerProperties are rewritten by CAS, and the next
    Allocate (even a re-offer of a held slot) hands the container the new value, plain and digest-suffixed."""
    await nodes.add("node-a")
    await nodes.add("node-b")
    nodes.world.plug("cam-1", ["node-a", "node-b"], {"ONVIF_DEVICE_IP_ADDRESS": "10.0.0.21"})
    await nodes.store.create(configuration(capacity=2, broker_properties={"RESOLUTION": "1080p"}))
    await nodes.settle()
    name = name_of("cam-1")
    digest = name.rpartition("-")[2].upper()
    kubelet = nodes.kubelets["node-b"]
    await eventually(lambda: kubelet.registered(f"{PREFIX}/{name}"), "IL registration")
    client = kubelet.client(f"{PREFIX}/{name}")
    before = (await client.allocate([f"{name}-0"])).container_responses[0].envs
    assert before["ONVIF_DEVICE_IP_ADDRESS"] == before[f"ONVIF_DEVICE_IP_ADDRESS_{digest}"] == "10.0.0.21"
    version = (await nodes.store.get("Instance", name, "default"))["metadata"]["resourceVersion"]

    nodes.world.plug("cam-1", ["node-a", "node-b"], {"ONVIF_DEVICE_IP_ADDRESS": "10.0.0.22"})
    await nodes.settle()
    stored = await nodes.store.get("Instance", name, "default")
    assert stored["spec"]["brokerProperties"] == {"ONVIF_DEVICE_IP_ADDRESS": "10.0.0.22", "RESOLUTION": "1080p"}
    assert int(stored["metadata"]["resourceVersion"]) > int(version)
    assert stored["spec"]["deviceUsage"][f"{name}-0"] == "node-b"  # the held slot is untouched
    after = (await client.allocate([f"{name}-0"])).container_responses[0].envs
    assert after["ONVIF_DEVICE_IP_ADDRESS"] == after[f"ONVIF_DEVICE_IP_ADDRESS_{digest}"] == "10.0.0.22"
    assert after["RESOLUTION"] == "1080p"
    await client.close()
