"""The Fleet API: nodes, manifests, pods, settling and time, over real parts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.deviceplugin import _constants as constants
from devplace.deviceplugin.v1beta1 import api_pb2 as dp_pb2
from devplace.sim import Fleet
from devplace.store import InformerSet, MemoryStore
from devplace.supervisors import Supervisor
from tests.e2e.scenarios import PLAIN_BROKER, broker_configuration
from tests.sim.plugins import FakePlugin

CONFIG = """
apiVersion: devplace.io/v1alpha1
kind: Configuration
metadata:
  name: cams
spec:
  discoveryHandler:
    name: sim
  capacity: 2
"""


@pytest.fixture
async def fleet() -> AsyncIterator[Fleet]:
    async with Fleet() as running:
        running.add_node("node-a")
        await running.settle()
        yield running


async def test_apply_stores_validated_objects_as_written_and_reapplying_the_same_manifest_writes_nothing(fleet):
    [created] = await fleet.apply(CONFIG)
    assert created["metadata"]["namespace"] == "default"
    assert created["spec"] == {"discoveryHandler": {"name": "sim"}, "capacity": 2}  # as written, as the server stores
    revision = await fleet.store.revision()
    [again] = await fleet.apply(CONFIG)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert await fleet.store.revision() == revision


async def test_apply_updates_by_compare_and_swap_and_keeps_status(fleet):
    [created] = await fleet.apply(CONFIG)
    created["status"] = {"conditions": [{"type": "Seen", "status": "True"}]}
    await fleet.store.update(created)
    [updated] = await fleet.apply(CONFIG.replace("capacity: 2", "capacity: 3"))
    assert updated["spec"]["capacity"] == 3
    assert updated["status"] == {"conditions": [{"type": "Seen", "status": "True"}]}
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert updated["metadata"]["generation"] == 2


async def test_apply_accepts_a_dict_and_a_list_of_dicts(fleet):
    node = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one"}, "data": {"a": "1"}}
    [one] = await fleet.apply(node)
    two = await fleet.apply([{**node, "metadata": {"name": "two"}}, {**node, "metadata": {"name": "three"}}])
    assert one["metadata"]["name"] == "one"
    assert [o["metadata"]["name"] for o in two] == ["two", "three"]


async def test_a_bad_document_is_refused_naming_it_and_its_field_and_nothing_is_written(fleet):
    bad = CONFIG + "---\n" + CONFIG.replace("name: cams", "name: other").replace("capacity: 2", "capacity: -1")
    with pytest.raises(errors.Invalid) as info:
        await fleet.apply(bad)
    assert "document 2" in info.value.message
    assert any(f.path == "spec.capacity" for f in info.value.fields)
    assert await fleet.list("Configuration") == []
    with pytest.raises(errors.Invalid, match="document 1"):
        await fleet.apply({"apiVersion": "v1", "kind": "Nope", "metadata": {"name": "x"}})


def _resource_class(name: str, term: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": {"name": name},
        "spec": {"resourceSelector": [term]},
    }


async def test_apply_refuses_what_the_api_server_refuses_a_dangling_class_reference_and_a_spec_change(fleet):
    with pytest.raises(errors.Invalid) as dangling:
        await fleet.apply(_resource_class("any-gpu", {"classRef": "gpu"}))
    assert [f.path for f in dangling.value.fields] == ["spec.resourceSelector[0].classRef"]
    assert await fleet.list("ResourceClass") == []
    gpu = {"matchExpressions": [{"key": "Kind", "operator": "In", "values": ["gpu"]}]}
    await fleet.apply(_resource_class("gpu", gpu))
    [any_gpu] = await fleet.apply(_resource_class("any-gpu", {"classRef": "gpu"}))
    with pytest.raises(errors.Invalid) as immutable:
        await fleet.apply(_resource_class("gpu", {**gpu, "matchExpressions": [{"key": "Kind", "operator": "Exists"}]}))
    assert [f.path for f in immutable.value.fields] == ["spec"]
    stored = await fleet.get("ResourceClass", "gpu")
    assert stored is not None
    assert stored["spec"] == {"resourceSelector": [gpu]}
    assert any_gpu["spec"] == {"resourceSelector": [{"classRef": "gpu"}]}


async def test_get_list_and_delete_resolve_kinds_and_namespaces(fleet):
    await fleet.apply(CONFIG)
    await fleet.apply(CONFIG.replace("name: cams", "name: cams\n  namespace: lab"))
    assert (await fleet.get("Configuration", "cams"))["metadata"]["namespace"] == "default"
    assert (await fleet.get("configurations", "cams", "lab"))["metadata"]["namespace"] == "lab"
    assert await fleet.get("Configuration", "missing") is None
    assert len(await fleet.list("Configuration")) == 2
    assert len(await fleet.list("Configuration", namespace="lab")) == 1
    assert [n["metadata"]["name"] for n in await fleet.list("Node")] == ["node-a"]
    deleted = await fleet.delete("Configuration", "cams", "lab")
    assert deleted["metadata"]["name"] == "cams"
    with pytest.raises(errors.NotFound):
        await fleet.delete("Configuration", "cams", "lab")
    with pytest.raises(errors.Invalid, match="cluster-scoped"):
        await fleet.get("Node", "node-a", "default")


async def test_nodes_added_while_running_start_and_settle_awaits_them(fleet):
    fleet.add_node("node-b")
    await fleet.settle()
    assert fleet.nodes == ["node-a", "node-b"]
    assert fleet.agent("node-b").is_idle()
    assert (await fleet.get("Node", "node-b"))["status"]["capacity"]["pods"] == "110"
    with pytest.raises(errors.AlreadyExists):
        fleet.add_node("node-b")
    with pytest.raises(errors.Invalid) as info:
        fleet.add_node("Node_B")
    assert info.value.fields[0].path == "name"


async def test_plugged_devices_become_instances_and_resources_every_node_sees(fleet):
    fleet.add_node("node-b")
    fleet.plug("cam-1", nodes=["node-a", "node-b"], properties={"model": "x"})
    await fleet.apply(CONFIG)
    await fleet.settle()
    [instance] = await fleet.list("Instance")
    name = instance["metadata"]["name"]
    assert name.startswith("cams-")
    assert sorted(instance["spec"]["nodes"]) == ["node-a", "node-b"]
    expected = {"devplace.io/cams": 1, f"devplace.io/{name}": 2}
    assert fleet.available("node-a") == expected
    assert fleet.capacity("node-b") == expected
    assert fleet.allocatable("node-b") == expected

    fleet.unplug("cam-1", nodes=["node-a"])
    await fleet.settle()
    [instance] = await fleet.list("Instance")
    assert instance["spec"]["nodes"] == ["node-b"]
    assert fleet.available("node-a") == {}


async def test_run_pod_returns_the_kubelets_verdict(fleet):
    fleet.plug("cam-1", nodes=["node-a"])
    await fleet.apply(CONFIG)
    await fleet.settle()
    ok = await fleet.run_pod("p1", node="node-a", requests={"devplace.io/cams": 1})
    assert ok["status"]["phase"] == "Running"
    assert ok["spec"]["nodeName"] == "node-a"
    too_many = await fleet.run_pod("p2", node="node-a", requests={"devplace.io/cams": 1})
    assert (too_many["status"]["phase"], too_many["status"]["reason"]) == ("Failed", "OutOfdevplace.io/cams")
    plain = await fleet.run_pod("p3", node="node-a", containers=[{"name": "a"}, {"name": "b"}], namespace="lab")
    assert [c["name"] for c in plain["status"]["containerStatuses"]] == ["a", "b"]
    with pytest.raises(errors.Invalid, match="no node 'node-z'"):
        await fleet.run_pod("p4", node="node-z", requests={})


async def test_advance_moves_fake_time_in_steps_and_settles(fleet):
    start = fleet.clock.now()
    await fleet.advance(25.0, step=10.0)
    assert fleet.clock.now() == pytest.approx(start + 25.0)
    with pytest.raises(errors.Invalid):
        await fleet.advance(-1)


async def test_restart_kubelet_waits_until_plugins_register_again(fleet):
    fleet.plug("cam-1", nodes=["node-a"])
    await fleet.apply(CONFIG)
    await fleet.settle()
    before = fleet.kubelet("node-a").registrations
    await fleet.restart_kubelet("node-a")
    assert fleet.kubelet("node-a").registrations == before + 2
    assert len(fleet.kubelet("node-a").endpoints()) == 2


class _SilentPlugin(FakePlugin):
    """Registers, then never sends its device list: the kubelet's handshake stays open."""

    async def ListAndWatch(self, request: dp_pb2.Empty, context: Any) -> AsyncIterator[dp_pb2.ListAndWatchResponse]:  # type: ignore[override]
        await asyncio.Event().wait()
        yield dp_pb2.ListAndWatchResponse()


async def test_settle_names_the_busy_parts_when_it_times_out(fleet):
    kubelet = fleet.kubelet("node-a")
    plugin = _SilentPlugin(
        kubelet.kubelet_dir / constants.DEVICE_PLUGIN_DIR, "example.com/silent", {}, endpoint="s.sock"
    )
    await plugin.start()
    try:
        await plugin.register(kubelet.registration_socket)
        with pytest.raises(errors.Unavailable, match=r"kubelet node-a \(handshake with s\.sock\)"):
            await fleet.settle(timeout=0.2)
    finally:
        await plugin.stop()


async def test_a_fleet_over_a_given_store_leaves_it_open(clock: FakeClock):
    store = MemoryStore(clock=clock)
    async with Fleet(store=store, clock=clock) as fleet:
        fleet.add_node("node-a")
        await fleet.settle()
        assert fleet.store is store
    assert (await store.get("Node", "node-a"))["metadata"]["name"] == "node-a"


async def test_parts_of_a_fleet_that_is_not_running_are_unavailable():
    fleet = Fleet()
    fleet.add_node("node-a")
    with pytest.raises(errors.Unavailable):
        fleet.kubelet("node-a")
    with pytest.raises(errors.Unavailable):
        fleet.agent("node-a")


class _Labeller:
    """A tiny cluster-level part: labels every Node it sees, then reports idle."""

    def __init__(self, store: Any, clock: FakeClock) -> None:
        self.store = store
        self.started = self.stopped = False
        self._task: asyncio.Task[None] | None = None
        self._busy = False

    async def start(self) -> None:
        self.started = True
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async with self.store.watch("Node", since=0) as changes:
            async for change in changes:
                if change.type == "DELETED" or "seen" in (change.object["metadata"].get("labels") or {}):
                    continue
                self._busy = True
                try:
                    node = change.object
                    node["metadata"].setdefault("labels", {})["seen"] = "yes"
                    try:
                        await self.store.update(node)
                    except errors.Conflict:
                        pass
                finally:
                    self._busy = False

    async def stop(self) -> None:
        self.stopped = True
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    def is_idle(self) -> bool:
        return not self._busy


async def test_cluster_level_parts_run_beside_the_nodes_and_settle_waits_for_them():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        fleet.add_part("labeller", _Labeller)
        await fleet.settle()
        part = fleet.part("labeller")
        assert part.started
        assert (await fleet.get("Node", "node-a"))["metadata"]["labels"]["seen"] == "yes"
        with pytest.raises(errors.AlreadyExists):
            fleet.add_part("labeller", _Labeller)
        with pytest.raises(errors.Invalid):
            fleet.part("nope")
    assert part.stopped


class _Doomed:
    """A part whose one loop fails for good: its supervisor may not restart it."""

    def __init__(self, store: Any, clock: FakeClock) -> None:
        self.supervisor = Supervisor("doomed")

    async def start(self) -> None:
        async def broken() -> None:
            raise ValueError("the doomed loop broke")

        self.supervisor.loop("broken", broken, restart=False)

    async def stop(self) -> None:
        await self.supervisor.stop()

    def is_idle(self) -> bool:
        return self.supervisor.idle


async def test_settle_raises_a_parts_fatal_failure_as_it_is(fleet):
    fleet.add_part("doomed", _Doomed)
    with pytest.raises(ValueError, match="the doomed loop broke"):
        await fleet.settle()


async def test_a_fleet_runs_the_scheduler_and_the_controller_by_default_and_can_do_without():
    async with Fleet() as fleet:
        assert {type(fleet.scheduler).__name__, type(fleet.controller).__name__} == {"Scheduler", "Controller"}
        fleet.add_node("node-a")
        pod = await fleet.run_pod("free", requests={"cpu": "1"})
        assert (pod["spec"]["nodeName"], pod["status"]["phase"]) == ("node-a", "Running")
        scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert [c["status"] for c in scheduled] == ["True"]
    async with Fleet(scheduler=False, controller=False) as bare:
        bare.add_node("node-a")
        with pytest.raises(errors.Invalid, match="no part 'scheduler'"):
            bare.part("scheduler")
        with pytest.raises(errors.Invalid, match="runs no scheduler"):
            await bare.run_pod("free", requests={"cpu": "1"})


async def test_run_pod_without_a_node_returns_the_schedulers_refusal_while_pending():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        pod = await fleet.run_pod("huge", requests={"cpu": "64"})
        assert pod["status"].get("phase", "Pending") == "Pending"
        assert not pod["spec"].get("nodeName")
        [condition] = pod["status"]["conditions"]
        assert (condition["type"], condition["status"], condition["reason"]) == (
            "PodScheduled",
            "False",
            "Unschedulable",
        )
        assert condition["message"] == "0/1 nodes are available: 1 insufficient cpu."


async def test_a_restarted_part_is_a_fresh_one_that_settles_again():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        await fleet.settle()
        before = fleet.controller
        await fleet.restart_part("controller")
        await fleet.settle()
        assert fleet.controller is not before
        assert fleet.controller.is_idle()
        with pytest.raises(errors.Invalid):
            await fleet.restart_part("nope")


async def test_a_node_taken_down_is_not_waited_for_and_comes_back_with_its_node_object():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        fleet.add_node("node-b")
        fleet.plug("cam-1", ["node-a", "node-b"])
        await fleet.apply(CONFIG)
        await fleet.settle()
        [instance] = await fleet.list("Instance")
        pod = await fleet.run_pod("p", node="node-b", requests={f"devplace.io/{instance['metadata']['name']}": 1})
        assert pod["status"]["phase"] == "Running"

        await fleet.stop_node("node-b")
        await fleet.settle()  # the controller drops the deleted node and frees its slot
        assert fleet.is_down("node-b")
        assert await fleet.get("Node", "node-b") is None
        [instance] = await fleet.list("Instance")
        assert instance["spec"]["nodes"] == ["node-a"]
        assert set(instance["spec"]["deviceUsage"].values()) == {""}

        await fleet.start_node("node-b")
        await fleet.settle()
        assert not fleet.is_down("node-b")
        assert await fleet.get("Node", "node-b") is not None
        [instance] = await fleet.list("Instance")
        assert sorted(instance["spec"]["nodes"]) == ["node-a", "node-b"]


@pytest.mark.parametrize("deleted", [True, False], ids=["node-deleted", "node-kept"])
async def test_a_node_back_after_its_shared_device_was_unplugged_while_it_was_down_settles(deleted: bool):
    # the sequence tests/e2e/test_broker_machine.py found. With its Node deleted, the (restarted) controller drops
    # node-a from the camera's Instance at once. With its Node kept (within the node grace) the Instance still names
    # node-a: back up, it serves the camera's plugins and stops them as it finds the camera gone, and its kubelet
    # must drop those plugins rather than wait for their sockets (it stayed busy in their handshakes for ever)
    async with Fleet() as fleet:
        for node in ("node-a", "node-b", "node-c"):
            fleet.add_node(node)
        await fleet.apply(broker_configuration("cams", capacity=2, details="kind: cam"))
        pool = {"pool": {"size": 2, "mode": "dynamic"}}
        await fleet.apply(
            broker_configuration("sensors", strategy=pool, pod=PLAIN_BROKER, details="kind: sensor\nshared: false")
        )
        await fleet.settle()
        fleet.plug("sensor-3", ["node-a"], {"kind": "sensor", "url": "sim://sensor-3"})
        await fleet.settle()
        fleet.plug("cam-1", ["node-a", "node-c"], {"kind": "cam", "url": "sim://cam-1"})
        await fleet.settle()
        await fleet.restart_part("controller")
        await fleet.settle()
        await fleet.stop_node("node-a", delete=deleted)
        await fleet.settle()
        [camera] = [i for i in await fleet.list("Instance") if i["spec"]["configurationName"] == "cams"]
        assert sorted(camera["spec"]["nodes"]) == (["node-c"] if deleted else ["node-a", "node-c"])
        fleet.unplug("cam-1")
        await fleet.settle()

        await fleet.start_node("node-a")
        await fleet.settle()
        kubelet = fleet.kubelet("node-a")
        assert kubelet.busy_with() == []
        assert list(kubelet.endpoints()) == ["akri.sh/sensors", "akri.sh/sensors-72f037"]
        node = await fleet.get("Node", "node-a")
        assert node is not None
        assert sorted(r for r in node["status"]["capacity"] if r.startswith("akri.sh/")) == [
            "akri.sh/sensors",
            "akri.sh/sensors-72f037",
        ]
        [camera] = [i for i in await fleet.list("Instance") if i["spec"]["configurationName"] == "cams"]
        assert camera["spec"]["nodes"] == []


async def test_in_one_fleet_each_kind_is_listed_and_watched_once_however_many_parts_read_it():
    async with Fleet() as fleet:
        for node in ("node-a", "node-b", "node-c"):
            fleet.add_node(node)
        fleet.plug("cam-1", nodes=["node-a", "node-b"])
        await fleet.apply(CONFIG)
        await fleet.settle()
        ok = await fleet.run_pod("p1", requests={"devplace.io/cams": 1})
        assert ok["status"]["phase"] == "Running"
        informers = InformerSet.of(fleet.store)
        # agents (3), kubelets (3), the scheduler, the controller and the class matcher all read these kinds
        for kind in ("Configuration", "Instance", "Node", "Pod", "ResourceClass"):
            assert (kind, informers.lists.get(kind), informers.watches.get(kind)) == (kind, 1, 1)
        assert all(count == 1 for count in informers.lists.values()), informers.lists
        assert all(count == 1 for count in informers.watches.values()), informers.watches
        assert sorted(key[0] for key in informers.feeds) == sorted({key[0] for key in informers.feeds})


def _events(events: list[dict[str, Any]], reason: str) -> list[tuple[str, str, str, str]]:
    return sorted(
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"], e["message"])
        for e in events
        if e["reason"] == reason
    )


async def test_the_controller_tells_of_each_broker_it_creates_and_deletes_on_the_configuration():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        fleet.plug("cam-1", nodes=["node-a"])
        await fleet.apply(broker_configuration("cams", services=False))
        await fleet.settle()
        [broker] = [p for p in await fleet.list("Pod") if p["metadata"].get("labels", {}).get("app") != "x"]
        created = _events(await fleet.list("Event"), "SuccessfulCreate")
        assert created == [("Configuration", "cams", "Normal", f"Created pod: {broker['metadata']['name']}")]
        fleet.unplug("cam-1")
        await fleet.advance(400.0, step=100.0)  # past the offline grace: the Instance goes, and its broker
        deleted = _events(await fleet.list("Event"), "SuccessfulDelete")
        assert deleted == [("Configuration", "cams", "Normal", f"Deleted pod: {broker['metadata']['name']}")]


async def test_the_agent_tells_of_a_device_it_no_longer_discovers_on_the_instance():
    async with Fleet() as fleet:
        fleet.add_node("node-a")
        fleet.plug("cam-1", nodes=["node-a"])
        await fleet.apply(CONFIG)
        await fleet.settle()
        [instance] = await fleet.list("Instance")
        fleet.unplug("cam-1")
        await fleet.settle()
        [event] = [e for e in await fleet.list("Event") if e["reason"] == "DeviceGone"]
        assert (event["involvedObject"]["name"], event["type"]) == (instance["metadata"]["name"], "Normal")
        assert event["message"] == "node-a left the Instance: its device is gone here"
        assert (event["reportingComponent"], event["reportingInstance"]) == ("devplace-agent", "node-a")


async def test_the_scheduler_tells_why_a_pod_waits_and_where_it_was_bound_on_the_pod():
    async with Fleet() as fleet:
        pending = await fleet.run_pod("waiting", requests={"cpu": "1"})  # no node yet
        assert pending["spec"].get("nodeName") is None
        fleet.add_node("node-a")
        await fleet.settle()
        events = await fleet.list("Event")
        [failed] = [e for e in events if e["reason"] == "FailedScheduling"]
        assert (failed["involvedObject"]["kind"], failed["involvedObject"]["name"]) == ("Pod", "waiting")
        assert (failed["type"], failed["message"]) == ("Warning", pending_message(pending))
        [scheduled] = [e for e in events if e["reason"] == "Scheduled"]
        assert scheduled["type"] == "Normal"
        assert scheduled["message"] == "Successfully assigned default/waiting to node-a"


def pending_message(pod: dict[str, Any]) -> str:
    [condition] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    return str(condition["message"])


# -- device paths: one Configuration served by device plugins, DRA or both (issue #26 item 2) ----------------------

PATHS_CAMS = {
    "apiVersion": "devplace.io/v1alpha1",
    "kind": "Configuration",
    "metadata": {"name": "cams", "namespace": "default"},
    "spec": {"discoveryHandler": {"name": "sim", "discoveryDetails": "{kind: cam, shared: false}"}, "capacity": 2},
}
PATHS_SCREENS = {
    "apiVersion": "devplace.io/v1alpha1",
    "kind": "Configuration",
    "metadata": {"name": "screens", "namespace": "default"},
    "spec": {"discoveryHandler": {"name": "sim", "discoveryDetails": "{kind: screen, shared: true}"}, "capacity": 1},
}


def with_paths(configuration: dict[str, Any], paths: str | None) -> dict[str, Any]:
    annotations = {} if paths is None else {"devplace.io/device-paths": paths}
    return {**configuration, "metadata": {**configuration["metadata"], "annotations": annotations}}


async def served(fleet: Fleet) -> tuple[list[str], list[str]]:
    """Which Configurations node-a's kubelet advertises resources of (through the IL and CL plugins), and which have a
    device in a ResourceSlice (the agent's local pool, the controller's shared ones)."""
    instances = {i["metadata"]["name"]: i["spec"]["configurationName"] for i in await fleet.list("Instance")}
    advertised = set()
    for resource in fleet.allocatable("node-a"):
        name = resource.removeprefix("devplace.io/")
        advertised.add(instances.get(name, name))
    published = {
        instances[d["attributes"]["instance"]["string"]]
        for s in await fleet.list("ResourceSlice")
        for d in s["spec"].get("devices") or []
    }
    return sorted(advertised), sorted(published)


async def paths_fleet(fleet: Fleet, cams: str | None = None, screens: str | None = None) -> None:
    fleet.add_node("node-a")
    await fleet.apply([with_paths(PATHS_CAMS, cams), with_paths(PATHS_SCREENS, screens)])
    fleet.plug("cam-1", ["node-a"], {"kind": "cam"})
    fleet.plug("screen-1", ["node-a"], {"kind": "screen"})
    await fleet.settle()


async def test_by_default_a_fleet_serves_every_configuration_through_both_paths() -> None:
    async with Fleet(dra=True) as fleet:
        assert fleet.device_paths == "both"  # devplace's scheduler sees both paths' slots
        await paths_fleet(fleet)
        assert await served(fleet) == (["cams", "screens"], ["cams", "screens"])


@pytest.mark.parametrize(
    ("cams", "expected"),
    [
        ("device-plugins", (["cams"], [])),  # no device in any slice: nothing allocates it through DRA
        ("dra", ([], ["cams"])),  # no IL or CL plugin: the kubelet advertises none of its resources
    ],
)
async def test_each_device_paths_value_chooses_what_the_kubelet_advertises_and_what_the_slices_hold(
    cams: str, expected: tuple[list[str], list[str]]
) -> None:
    async with Fleet(dra=True, controller=False) as fleet:
        fleet.add_node("node-a")
        await fleet.apply(with_paths(PATHS_CAMS, cams))
        fleet.plug("cam-1", ["node-a"], {"kind": "cam"})
        await fleet.settle()
        assert await served(fleet) == expected


async def test_the_annotation_overrides_the_fleets_default_and_a_change_converges_without_a_restart() -> None:
    async with Fleet(dra=True, device_paths="device-plugins") as fleet:
        await paths_fleet(fleet, cams="dra")  # a local and a shared device: the agent's and the controller's slices
        assert await served(fleet) == (["screens"], ["cams"])

        await fleet.apply([with_paths(PATHS_CAMS, None), with_paths(PATHS_SCREENS, "dra")])
        await fleet.settle()
        assert await served(fleet) == (["cams"], ["screens"])

        await fleet.apply([with_paths(PATHS_CAMS, "both"), with_paths(PATHS_SCREENS, "both")])
        await fleet.settle()
        assert await served(fleet) == (["cams", "screens"], ["cams", "screens"])


async def test_a_slot_held_through_a_device_plugin_stays_held_after_a_switch_to_dra_until_its_pod_goes() -> None:
    async with Fleet(dra=True, device_paths="device-plugins") as fleet:
        await paths_fleet(fleet)
        pod = await fleet.run_pod("p", "node-a", {"devplace.io/cams": 1})
        assert pod["status"]["phase"] == "Running"
        [cams] = [i for i in await fleet.list("Instance") if i["spec"]["configurationName"] == "cams"]
        held = cams["spec"]["deviceUsage"]
        assert sorted(v.split(":")[0] for v in held.values()) == ["", "C"]

        await fleet.apply(with_paths(PATHS_CAMS, "dra"))
        await fleet.settle()
        assert await served(fleet) == (["screens"], ["cams"])
        [cams] = [i for i in await fleet.list("Instance") if i["spec"]["configurationName"] == "cams"]
        assert cams["spec"]["deviceUsage"] == held  # the running pod keeps its slot

        await fleet.delete("Pod", "p", "default")
        await fleet.settle()
        [cams] = [i for i in await fleet.list("Instance") if i["spec"]["configurationName"] == "cams"]
        assert sorted(cams["spec"]["deviceUsage"].values()) == ["", ""]
