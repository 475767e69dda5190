"""The plugins: AllocateResponse contents, the CL preference knob, and Allocate's rollback of a failed request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devplace.agent import _deviceplugins as plugins
from devplace.agent import _slots as slots
from devplace.agent._caches import NodeCache
from devplace.agent._instances import InstanceRecord
from devplace.deviceplugin.v1beta1 import api_pb2
from devplace.discovery import Device
from devplace.discovery._devices import DeviceSpec, Mount, device_healthy
from devplace.store import MemoryStore
from devplace.supervisors import Supervisor

from .conftest import configuration


def record(name: str, props: dict[str, str]) -> InstanceRecord:
    obj: dict[str, Any] = {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "3"},
        "spec": {
            "configurationName": "cams",
            "capacity": 2,
            "nodes": ["node-a"],
            "deviceUsage": {f"{name}-0": "", f"{name}-1": ""},
            "brokerProperties": props,
        },
    }
    return InstanceRecord.from_wire(obj)


A = record("cams-8120fe", {"URL": "rtsp://a"})
B = record("cams-a19705", {"URL": "rtsp://b", "MODEL": "x"})
DEV_A = Device(
    "a",
    {},
    mounts=(Mount("/data", "/srv/a", read_only=True),),
    device_specs=(DeviceSpec("/dev/video0", "/dev/video0", "rw"),),
)
DEV_B = Device("b", {}, device_specs=(DeviceSpec("/dev/video0", "/dev/video0", "rw"), DeviceSpec("/dev/b", "/dev/b")))


def test_container_response_carries_properties_plain_and_suffixed_by_digest() -> None:
    response = plugins.container_response([(A, "cams-8120fe-0"), (B, "cams-a19705-1")], {A.name: DEV_A, B.name: DEV_B})
    assert dict(response.envs) == {
        "URL": "rtsp://b",  # plain names: the last device wins; the suffixed ones keep every device apart
        "URL_8120FE": "rtsp://a",
        "URL_A19705": "rtsp://b",
        "MODEL": "x",
        "MODEL_A19705": "x",
    }
    assert dict(response.annotations) == {
        "devplace.io/slots": "cams-8120fe-0,cams-a19705-1",
        "devplace.io/instances": "cams-8120fe,cams-a19705",
    }
    assert [(m.container_path, m.host_path, m.read_only) for m in response.mounts] == [("/data", "/srv/a", True)]
    assert [(d.container_path, d.permissions) for d in response.devices] == [("/dev/video0", "rw"), ("/dev/b", "rwm")]


def test_container_response_without_a_known_device_has_envs_but_no_mounts() -> None:
    response = plugins.container_response([(A, "cams-8120fe-1")], {A.name: None})
    assert dict(response.envs) == {"URL": "rtsp://a", "URL_8120FE": "rtsp://a"}
    assert list(response.mounts) == []
    assert list(response.devices) == []


def test_gpus_give_their_uuids_joined_their_cdi_devices_and_never_the_reserved_properties_as_env() -> None:
    first = record(
        "gpus-1a2b3c",
        {
            "NVIDIA_VISIBLE_DEVICES": "GPU-1",
            "devplace.io/health": "Healthy",
            "devplace.io/cdi-devices": "nvidia.com/gpu=GPU-1",
        },
    )
    second = record(
        "gpus-4d5e6f",
        {
            "NVIDIA_VISIBLE_DEVICES": "GPU-2",
            "devplace.io/health": "Unhealthy",
            "devplace.io/health-reason": "XID 79 (critical error)",
            "devplace.io/cdi-devices": "nvidia.com/gpu=GPU-2, nvidia.com/gpu=all",
        },
    )
    response = plugins.container_response([(first, "gpus-1a2b3c-0"), (second, "gpus-4d5e6f-0")], {})
    assert dict(response.envs) == {
        "NVIDIA_VISIBLE_DEVICES": "GPU-1,GPU-2",  # a list NVIDIA's runtime reads, not the last device's
        "NVIDIA_VISIBLE_DEVICES_1A2B3C": "GPU-1",
        "NVIDIA_VISIBLE_DEVICES_4D5E6F": "GPU-2",
    }
    assert [d.name for d in response.cdi_devices] == [
        "nvidia.com/gpu=GPU-1",
        "nvidia.com/gpu=GPU-2",
        "nvidia.com/gpu=all",
    ]
    again = plugins.container_response([(first, "gpus-1a2b3c-0"), (first, "gpus-1a2b3c-1")], {})
    assert again.envs["NVIDIA_VISIBLE_DEVICES"] == "GPU-1"
    assert [d.name for d in again.cdi_devices] == ["nvidia.com/gpu=GPU-1"]


def test_two_slots_of_one_instance_name_it_once() -> None:
    response = plugins.container_response([(A, "cams-8120fe-0"), (A, "cams-8120fe-1")], {})
    assert response.annotations["devplace.io/instances"] == "cams-8120fe"
    assert response.annotations["devplace.io/slots"] == "cams-8120fe-0,cams-8120fe-1"


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, "spread"),
        ({plugins.CL_PREFERENCE: "pack"}, "pack"),
        ({plugins.CL_PREFERENCE: "spread"}, "spread"),
        ({plugins.CL_PREFERENCE: "clump"}, "spread"),
    ],
)
def test_cl_preference_reads_the_configuration_annotation(annotations: dict[str, str], expected: str) -> None:
    assert plugins.preference_of(annotations) == expected


class _Host:
    """The least a plugin needs from its agent: a cache and a node name."""

    def __init__(self, cache: NodeCache) -> None:
        self._cache = cache
        self.refused: list[tuple[str, str, str]] = []
        self.dra = False

    @property
    def cache(self) -> NodeCache:
        return self._cache

    @property
    def node(self) -> str:
        return "node-a"

    def device(self, namespace: str, instance: str) -> Device | None:
        return None

    def allocated(self, keys: Iterable[Any]) -> None:
        pass

    def claim_refused(self, namespace: str, instance: str, reason: str) -> None:
        self.refused.append((namespace, instance, reason))

    def dra_serves(self, record: Any) -> bool:
        return self.dra

    def hold(self) -> Callable[[], None]:
        return lambda: None


class _FailingStore:
    """A MemoryStore whose `fail_at`-th update does not complete: it hangs (`hang`) or raises a non-devplace error."""

    def __init__(self, store: MemoryStore, fail_at: int, hang: bool) -> None:
        self._store = store
        self._fail_at = fail_at
        self._hang = hang
        self.updates = 0
        self.reached = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.updates += 1
        if self.updates == self._fail_at:
            self.reached.set()
            if self._hang:
                await asyncio.Event().wait()
            raise RuntimeError("the backend broke")
        return await self._store.update(obj)


@pytest.mark.parametrize("ending", ["cancelled", "crashed"])
@pytest.mark.parametrize("level", ["IL", "CL"])
async def test_an_allocate_that_ends_mid_request_releases_what_it_claimed(
    memory_store: MemoryStore, level: str, ending: str
) -> None:
    """The kubelet's deadline (the RPC is cancelled) or an unexpected error during the second claim of a request (IL:
    the second container's; CL: the second Instance of one container's): the first claim is undone at once, not left
    held until the release grace."""
    names = ["cams-8120fe", "cams-a19705"]
    for name in names:
        await memory_store.create(record(name, {}).obj | {"metadata": {"name": name, "namespace": "default"}})
    store = _FailingStore(memory_store, fail_at=2, hang=ending == "cancelled")
    cache = NodeCache(store, "node-a", Supervisor("test"))
    cache.configurations.replace(
        [
            {
                **configuration(capacity=2, unique=True),
                "metadata": {"name": "cams", "namespace": "default", "resourceVersion": "1"},
            }
        ],
        1,
    )
    listing = await memory_store.list("Instance")
    cache.instances.replace(listing.items, listing.revision)
    plugin: plugins.DevicePlugin
    if level == "IL":
        plugin = plugins.InstancePlugin(_Host(cache), "default", names[0], f"devplace.io/{names[0]}")
        containers = [[f"{names[0]}-0"], [f"{names[0]}-1"]]
    else:
        plugin = plugins.ConfigurationPlugin(_Host(cache), "default", "cams", "devplace.io/cams")
        containers = [names]
    request = api_pb2.AllocateRequest(
        container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=ids) for ids in containers]
    )
    call = asyncio.create_task(plugin.Allocate(request, None))  # type: ignore[arg-type]
    await asyncio.wait_for(store.reached.wait(), 5)
    if ending == "cancelled":
        call.cancel()
    with pytest.raises(asyncio.CancelledError if ending == "cancelled" else RuntimeError):
        await call
    for name in names:
        stored = await memory_store.get("Instance", name, "default")
        assert stored["spec"]["deviceUsage"] == {f"{name}-0": "", f"{name}-1": ""}
    assert store.updates == 3  # the first claim, the failed one, the release


async def _cams_cache(store: MemoryStore, names: list[str]) -> NodeCache:
    """node-a's cache of Configuration `cams` (capacity 2, a vdev per slot) and its Instances `names`."""
    for name in names:
        await store.create(record(name, {}).obj | {"metadata": {"name": name, "namespace": "default"}})
    cache = NodeCache(store, "node-a", Supervisor("test"))
    cache.configurations.replace(
        [
            {
                **configuration(capacity=2, unique=False),
                "metadata": {"name": "cams", "namespace": "default", "resourceVersion": "1"},
            }
        ],
        1,
    )
    listing = await store.list("Instance")
    cache.instances.replace(listing.items, listing.revision)
    return cache


async def test_a_cl_plugin_recomputes_only_the_part_of_the_instance_that_changed(memory_store: MemoryStore) -> None:
    names = ["cams-8120fe", "cams-a19705", "cams-c0ffee"]
    cache = await _cams_cache(memory_store, names)
    plugin = plugins.ConfigurationPlugin(_Host(cache), "default", "cams", "devplace.io/cams")

    def fresh() -> list[slots.DeviceHealth]:
        return slots.cl_health((r.usage for r in cache.visible("default", "cams")), "node-a", False)

    before = plugin.devices()
    assert before == fresh()
    kept = {name: plugin._parts[name].states for name in names}
    stored = await memory_store.get("Instance", names[1], "default")
    stored["spec"]["deviceUsage"] = {f"{names[1]}-0": "C:cams-a19705-0:node-b", f"{names[1]}-1": ""}
    cache.instances.record(await memory_store.update(stored))
    after = plugin.devices()
    assert after == fresh()
    assert after != before  # one slot of the second Instance is held by another node now: one vdev less Healthy
    assert [plugin._parts[name].states is kept[name] for name in names] == [True, False, True]


def _wire(devices: Iterable[slots.DeviceHealth]) -> bytes:
    entries = [api_pb2.Device(ID=d.id, health="Healthy" if d.healthy else "Unhealthy") for d in devices]
    return api_pb2.ListAndWatchResponse(devices=entries).SerializeToString()


async def test_the_lists_a_plugin_sends_are_its_devices_in_wire_form(memory_store: MemoryStore) -> None:
    """ListAndWatch sends `encoded_devices()` as it is: it must be the ListAndWatchResponse of `devices()`, for the IL
    and the CL plugin, before and after a change, with a sick device and with slots that break the rules."""
    names = ["cams-8120fe", "cams-a19705"]
    cache = await _cams_cache(memory_store, names)
    host = _Host(cache)
    il = plugins.InstancePlugin(host, "default", names[1], "devplace.io/cams-a19705")
    cl = plugins.ConfigurationPlugin(host, "default", "cams", "devplace.io/cams")
    usages: list[dict[str, Any]] = [
        {f"{names[1]}-0": "C:cams-a19705-0:node-b", f"{names[1]}-1": "node-a"},
        {f"{names[1]}-0": "node-b", f"{names[1]}-1": "", f"{names[1]}-2": "node-a", "stray": ""},  # retiring, unnamed
        {f"{names[1]}-0": "C::node-a", f"{names[1]}-1": ""},  # an unreadable holder
    ]
    for i, usage in enumerate([None, *usages, usages[0]]):
        if usage is not None:
            stored = await memory_store.get("Instance", names[1], "default")
            stored["spec"]["deviceUsage"] = usage
            stored["spec"]["brokerProperties"] = {"devplace.io/health": "Unhealthy"} if i == 4 else {}
            cache.instances.record(await memory_store.update(stored))
        for plugin in (il, cl):
            assert plugin.encoded_devices() == _wire(plugin.devices())
            assert api_pb2.ListAndWatchResponse.FromString(plugin.encoded_devices()).devices  # never an empty list here


@pytest.mark.parametrize(("dra", "preferred"), [(True, "-0"), (False, "-1")])
async def test_an_il_preference_reads_the_store_when_a_dra_claim_may_hold_a_slot_the_cache_shows_free(
    memory_store: MemoryStore, dra: bool, preferred: str
) -> None:
    """The cache (and the kubelet's device list) still shows slot 1 free and slot 0 held by node-b; in the store node-b
    let slot 0 go and a DRA claim took slot 1. Served to DRA, the preference is read from the store and names slot 0
    (slot 1 would fail Allocate); otherwise the cache is enough."""
    name = "cams-8120fe"
    stale = record(name, {}).obj | {"metadata": {"name": name, "namespace": "default"}}
    stale["spec"] = {**stale["spec"], "nodes": ["node-a", "node-b"], "shared": True}
    stale["spec"]["deviceUsage"] = {f"{name}-0": "node-b", f"{name}-1": ""}
    created = await memory_store.create(stale)
    cache = NodeCache(memory_store, "node-a", Supervisor("test"))
    cache.instances.replace([created], int(created["metadata"]["resourceVersion"]))
    fresh = dict(created)
    fresh["spec"] = {**created["spec"], "deviceUsage": {f"{name}-0": "", f"{name}-1": "D:default/claim-1:node-a"}}
    await memory_store.update(fresh)
    host = _Host(cache)
    host.dra = dra
    plugin = plugins.InstancePlugin(host, "default", name, f"devplace.io/{name}")
    request = api_pb2.PreferredAllocationRequest(
        container_requests=[
            api_pb2.ContainerPreferredAllocationRequest(
                available_deviceIDs=[f"{name}-0", f"{name}-1"], allocation_size=1
            )
        ]
    )
    response = await plugin.GetPreferredAllocation(request, None)  # type: ignore[arg-type]
    assert list(response.container_responses[0].deviceIDs) == [f"{name}{preferred}"]


class _Listed(plugins.DevicePlugin):
    """A plugin whose list never changes: every notification is for its open streams to send again (forced)."""

    def devices(self) -> list[slots.DeviceHealth]:
        return []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["open", "notify", "send-0", "send-1", "close-0", "close-1"]), max_size=30))
async def test_a_plugins_pending_count_agrees_with_what_each_open_stream_has_sent(steps: list[str]) -> None:
    """`pending` is kept as a count (O(1)); it must say what a pass over the open streams would: one of them has not
    sent the plugin's latest generation (a stream counts a message sent once its reader asks for the next one)."""
    plugin = _Listed(_Host(NodeCache(MemoryStore(), "node-a", Supervisor("test"))), "default", "cams", "akri.sh/cams")
    streams: list[Any] = []
    sent: dict[int, int] = {}  # stream -> the notification count it sent last

    async def send(stream: Any) -> None:
        await asyncio.wait_for(stream.__anext__(), 1)

    notifications = 0
    for step in steps:
        action, _, which = step.partition("-")
        if action == "open":
            streams.append(plugin.ListAndWatch(api_pb2.Empty(), None))  # type: ignore[arg-type]
            await send(streams[-1])  # the first list, sent at once
            sent[len(streams) - 1] = notifications
        elif action == "notify":
            notifications += 1
            plugin.notify(force=True)
        elif streams and int(which) < len(streams) and int(which) in sent:
            index = int(which)
            if action == "send" and sent[index] < notifications:
                await send(streams[index])
                sent[index] = notifications
            elif action == "close":
                await streams[index].aclose()
                del sent[index]
        behind = any(generation < plugin._generation for generation in plugin._streams.values())
        assert plugin.pending is behind, (step, plugin._streams, plugin._generation)
    for index in list(sent):
        await streams[index].aclose()
    assert plugin.pending is False


_CL_HOLDERS = st.sampled_from(["", "node-a", "node-b", "C:cams-8120fe:node-a", "C:cams-8120fe:node-b", "C::x"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_CL_HOLDERS, min_size=1, max_size=3),
    st.lists(_CL_HOLDERS, min_size=1, max_size=3),
    st.integers(0, 1),
    st.sampled_from(["taken over", "equal", "sick"]),
)
def test_a_unique_cl_plugin_says_a_change_changes_its_list_exactly_when_the_instance_part_differs(
    before: list[str], after: list[str], extra: int, properties: str
) -> None:
    """`changed_by` answers without building the parts when a slot is free before and after and the properties are
    the same (the vdev is Healthy both times, or sick both times): the answer is the parts' comparison all the same,
    for usages full or not, readable or not, with the properties taken over, equal, or saying the device is sick."""
    cache = NodeCache(MemoryStore(), "node-a", Supervisor("test"))
    cfg = configuration(capacity=2, unique=True)
    cache.configurations.replace([{**cfg, "metadata": {**cfg["metadata"], "resourceVersion": "1"}}], 1)
    plugin = plugins.ConfigurationPlugin(_Host(cache), "default", "cams", "devplace.io/cams")
    name = A.name

    def wire(holders: list[str], capacity: int, props: dict[str, str], rv: int) -> dict[str, Any]:
        obj = A.obj
        usage = {f"{name}-{i}": h for i, h in enumerate(holders)}
        spec = {**obj["spec"], "capacity": capacity, "deviceUsage": usage, "brokerProperties": props}
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}, "spec": spec}

    old = InstanceRecord.from_wire(wire(before, len(before), {"URL": "rtsp://a"}, 3))
    sick = {"URL": "rtsp://a", "devplace.io/health": "Unhealthy"}
    new_wire = wire(after, len(after) + extra, sick if properties == "sick" else {"URL": "rtsp://a"}, 4)
    new = InstanceRecord.from_wire(new_wire, previous=old if properties == "taken over" else None)
    assert (new.broker_properties is old.broker_properties) == (properties == "taken over")

    def part(r: InstanceRecord) -> list[tuple[str, bool]]:
        return slots.cl_states_of(r.usage, "node-a", True, not device_healthy(r.broker_properties))

    assert plugin.changed_by(old, new) == (part(old) != part(new))
