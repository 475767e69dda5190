"""The controller against real stores (memory and sqlite) with a fake clock: what appears, and that it converges."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from devplace.api import normalize
from devplace.clocks import FakeClock
from devplace.controller import Controller
from devplace.store import MemoryStore, Store
from devplace.store._sqlite import SqliteStore
from tests.controller.samples import BROKER_JOB_SPEC, PLAIN_POD_SPEC, configuration, instance, node


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Store]:
    opened: Store
    if request.param == "memory":
        opened = MemoryStore(clock=clock)
    else:
        opened = SqliteStore(str(tmp_path / "store.db"), clock=clock, poll_interval=0.01)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def controller(store: Store, clock: FakeClock) -> AsyncIterator[Controller]:
    c = Controller(store, clock, resource_prefix="akri.sh")
    c.start()
    try:
        yield c
    finally:
        await c.stop()


async def settle(*controllers: Controller, until: Callable[[], Any] | None = None, timeout: float = 10.0) -> None:
    """Wait (real time) until every controller is idle for a few rounds and `until` holds."""
    deadline = time.monotonic() + timeout
    calm = 0
    while calm < 5:
        if time.monotonic() > deadline:
            raise AssertionError("the controller did not settle")
        await asyncio.sleep(0.01)
        ok = all(c.is_idle() for c in controllers) and (until is None or await _holds(until))
        calm = calm + 1 if ok else 0


async def _holds(until: Callable[[], Any]) -> bool:
    result = until()
    if asyncio.iscoroutine(result):
        result = await result
    return bool(result)


async def apply(store: Store, *bodies: dict[str, Any]) -> None:
    for body in bodies:
        await store.create(normalize(body) if body["kind"] in ("Configuration", "Instance") else body)


async def names_of(store: Store, kind: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in (await store.list(kind, "default" if kind != "Node" else None)).items)


async def set_phase(store: Store, phase: str, name: str | None = None) -> None:
    for pod in (await store.list("Pod", "default")).items:
        if name is None or pod["metadata"]["name"] == name:
            pod["status"] = {"phase": phase}
            await store.update(pod)


NODES = [node("node-a"), node("node-b")]
TWO = [
    instance("akri-onvif-8120fe", ["node-a", "node-b"], capacity=2),
    instance("akri-onvif-a19705", ["node-b"], shared=False),
]
PODS = ["akri-onvif-a19705-pod", "node-a-akri-onvif-8120fe-pod", "node-b-akri-onvif-8120fe-pod"]
SERVICES = ["akri-onvif-8120fe-svc", "akri-onvif-a19705-svc", "akri-onvif-svc"]


async def test_brokers_then_services_appear_for_a_configuration_and_its_instances(
    store: Store, controller: Controller
) -> None:
    await apply(store, *NODES, configuration(), *TWO)
    await settle(controller, until=lambda: _count(store, "Pod", 3))
    assert await names_of(store, "Pod") == PODS
    assert await names_of(store, "Service") == []  # no broker runs yet
    pod = await store.get("Pod", "node-a-akri-onvif-8120fe-pod", "default")
    assert pod["metadata"]["labels"]["akri.sh/target-node"] == "node-a"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"akri.sh/akri-onvif-8120fe": "1"}
    await set_phase(store, "Running")
    await settle(controller, until=lambda: _count(store, "Service", 3))
    assert await names_of(store, "Service") == SERVICES
    cfg = await store.get("Configuration", "akri-onvif", "default")
    assert cfg["status"]["brokers"] == {"desired": 3, "running": 3, "pending": 0}


async def _count(store: Store, kind: str, n: int) -> bool:
    return len((await store.list(kind, "default")).items) == n


async def test_device_gone_and_back_and_a_deleted_broker_comes_back_with_a_new_uid(
    store: Store, controller: Controller
) -> None:
    await apply(store, *NODES, configuration(), *TWO)
    await settle(controller, until=lambda: _count(store, "Pod", 3))
    await set_phase(store, "Running")
    await settle(controller, until=lambda: _count(store, "Service", 3))
    # the local camera goes: its broker and its Service go, the rest stay
    await store.delete("Instance", "akri-onvif-a19705", "default")
    await settle(controller, until=lambda: _count(store, "Pod", 2))
    assert await names_of(store, "Pod") == PODS[1:]
    await settle(controller, until=lambda: _count(store, "Service", 2))
    assert await names_of(store, "Service") == ["akri-onvif-8120fe-svc", "akri-onvif-svc"]
    # it comes back
    await apply(store, TWO[1])
    await settle(controller, until=lambda: _count(store, "Pod", 3))
    # a broker deleted by hand is recreated, as a new Pod
    old = await store.get("Pod", "node-a-akri-onvif-8120fe-pod", "default")
    await store.delete("Pod", "node-a-akri-onvif-8120fe-pod", "default")

    async def recreated() -> bool:
        pods = {p["metadata"]["name"]: p for p in (await store.list("Pod", "default")).items}
        new = pods.get("node-a-akri-onvif-8120fe-pod")
        return new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]

    await settle(controller, until=recreated)
    assert await names_of(store, "Pod") == PODS


async def test_a_deleted_configuration_leaves_no_orphans(store: Store, controller: Controller) -> None:
    await apply(store, *NODES, configuration(), *TWO)
    await settle(controller, until=lambda: _count(store, "Pod", 3))
    await set_phase(store, "Running")
    await settle(controller, until=lambda: _count(store, "Service", 3))
    await store.delete("Configuration", "akri-onvif", "default")
    await settle(controller, until=lambda: _count(store, "Pod", 0))
    await settle(controller, until=lambda: _count(store, "Service", 0))
    assert await names_of(store, "Pod") == []
    assert await names_of(store, "Service") == []


async def test_a_failed_or_long_pending_broker_is_recreated(
    store: Store, controller: Controller, clock: FakeClock
) -> None:
    await apply(store, *NODES, configuration(), *TWO)
    await settle(controller, until=lambda: _count(store, "Pod", 3))
    await set_phase(store, "Running", "akri-onvif-a19705-pod")
    await set_phase(store, "Failed", "node-a-akri-onvif-8120fe-pod")
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in (await store.list("Pod", "default")).items}

    async def uids() -> dict[str, str]:
        return {p["metadata"]["name"]: p["metadata"]["uid"] for p in (await store.list("Pod", "default")).items}

    async def failed_replaced() -> bool:
        now = await uids()
        return len(now) == 3 and now["node-a-akri-onvif-8120fe-pod"] != before["node-a-akri-onvif-8120fe-pod"]

    await settle(controller, until=failed_replaced)
    middle = await uids()
    assert middle["node-b-akri-onvif-8120fe-pod"] == before["node-b-akri-onvif-8120fe-pod"]  # Pending, young
    await clock.advance(301)  # node-b's broker has been Pending for more than 5 minutes (so has the new node-a one)

    async def pending_replaced() -> bool:
        now = await uids()
        return len(now) == 3 and now["node-b-akri-onvif-8120fe-pod"] != before["node-b-akri-onvif-8120fe-pod"]

    await settle(controller, until=pending_replaced)
    assert (await uids())["akri-onvif-a19705-pod"] == before["akri-onvif-a19705-pod"]  # Running: untouched


async def test_jobs_per_instance_and_generation(store: Store, controller: Controller) -> None:
    cfg = configuration(job=BROKER_JOB_SPEC)
    await apply(store, *NODES, cfg, *TWO)
    await settle(controller, until=lambda: _count(store, "Job", 2))
    assert await names_of(store, "Job") == ["akri-onvif-8120fe-1-job", "akri-onvif-a19705-1-job"]
    current = await store.get("Configuration", "akri-onvif", "default")
    current["spec"]["brokerSpec"]["brokerJobSpec"]["backoffLimit"] = 5
    await store.update(current)
    await settle(controller, until=lambda: _count(store, "Job", 4))
    assert await names_of(store, "Job") == [
        "akri-onvif-8120fe-1-job",
        "akri-onvif-8120fe-2-job",
        "akri-onvif-a19705-1-job",
        "akri-onvif-a19705-2-job",
    ]


async def test_dynamic_pool_config_maps_change_in_place_without_restarting_brokers(
    store: Store, controller: Controller
) -> None:
    cfg = configuration(strategy={"pool": {"size": 2, "mode": "dynamic"}}, pod=PLAIN_POD_SPEC)
    cams = [instance(f"akri-onvif-cam00{i}", ["node-a"]) for i in range(1, 4)]
    await apply(store, *NODES, cfg, *cams)
    await settle(controller, until=lambda: _count(store, "Pod", 2))
    assert await names_of(store, "ConfigMap") == ["akri-onvif-pool-0", "akri-onvif-pool-1"]
    pod = await store.get("Pod", "akri-onvif-pool-1-pod", "default")
    await apply(store, instance("akri-onvif-cam004", ["node-a"]))

    async def joined() -> bool:
        cm = await store.get("ConfigMap", "akri-onvif-pool-1", "default")
        return "cam004" in cm["data"]["instances.json"]

    await settle(controller, until=joined)
    again = await store.get("Pod", "akri-onvif-pool-1-pod", "default")
    assert again["metadata"]["uid"] == pod["metadata"]["uid"]


async def test_a_static_pool_timeout_runs_on_the_clock(store: Store, controller: Controller, clock: FakeClock) -> None:
    cfg = configuration(strategy={"pool": {"size": 3, "timeoutSeconds": 60}}, pod=PLAIN_POD_SPEC)
    cams = [instance(f"akri-onvif-cam00{i}", ["node-a", "node-b"]) for i in range(1, 6)]
    await apply(store, *NODES, cfg, *cams)
    await settle(controller, until=lambda: _count(store, "Pod", 1))
    status = (await store.get("Configuration", "akri-onvif", "default"))["status"]
    assert status["pools"] == {"waitingSince": "2026-01-01T00:00:00Z"}
    assert [c["reason"] for c in status["conditions"]] == ["PoolIncomplete"]
    await clock.advance(59)
    await settle(controller)
    assert len(await names_of(store, "Pod")) == 1
    await clock.advance(1)
    await settle(controller, until=lambda: _count(store, "Pod", 2))
    status = (await store.get("Configuration", "akri-onvif", "default"))["status"]
    assert "pools" not in status
    assert "conditions" not in status


async def test_an_invalid_configuration_in_the_store_gets_a_condition_and_no_brokers(
    store: Store, controller: Controller
) -> None:
    bad = configuration(strategy={"pool": {"size": 3}})  # {{PLACEHOLDER}} with a pool strategy
    bad["metadata"] = {"name": "akri-onvif", "namespace": "default"}
    await store.create(bad)  # straight into the store: not validated
    await apply(store, *NODES, *TWO)

    async def flagged() -> bool:
        cfg = await store.get("Configuration", "akri-onvif", "default")
        return any(c["type"] == "InvalidConfiguration" for c in (cfg.get("status") or {}).get("conditions", []))

    await settle(controller, until=flagged)
    assert await names_of(store, "Pod") == []


# -- restarts and rivals ---------------------------------------------------------------------------------------

MANY = [instance(f"akri-onvif-{i:06x}", ["node-a", "node-b"]) for i in range(40)]


async def test_a_controller_restarted_mid_way_converges_without_duplicates(store: Store, clock: FakeClock) -> None:
    await apply(store, *NODES, configuration(services=False), *MANY)
    first = Controller(store, clock)
    first.start()
    for _ in range(100_000):  # stop it after its first few writes
        if first.writes >= 5:
            break
        await asyncio.sleep(0)
    await first.stop()
    made = {p["metadata"]["name"]: p["metadata"]["uid"] for p in (await store.list("Pod", "default")).items}
    assert 0 < len(made) < 80, "stopped mid-way"
    second = Controller(store, clock)
    second.start()
    try:
        await settle(second, until=lambda: _count(store, "Pod", 80))
    finally:
        await second.stop()
    pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in (await store.list("Pod", "default")).items}
    assert len(pods) == 80
    assert all(pods[name] == uid for name, uid in made.items())  # what the first made was kept, not redone


async def test_two_controllers_at_once_create_each_broker_once(store: Store, clock: FakeClock) -> None:
    await apply(store, *NODES, configuration(services=False), *MANY)
    seen: list[tuple[str, str]] = []

    async def record() -> None:
        async with store.watch("Pod", "default") as events:
            async for event in events:
                seen.append((event.type, event.object["metadata"]["name"]))

    watcher = asyncio.create_task(record())
    await asyncio.sleep(0.05)
    rivals = [Controller(store, clock, name="a"), Controller(store, clock, name="b")]
    for c in rivals:
        c.start()
    try:
        await settle(*rivals, until=lambda: _count(store, "Pod", 80))
        await settle(*rivals, until=lambda: len(seen) >= 80)
    finally:
        for c in rivals:
            await c.stop()
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    added = [name for type_, name in seen if type_ == "ADDED"]
    assert len(added) == 80
    assert len(set(added)) == 80
    assert [type_ for type_, _ in seen if type_ == "DELETED"] == []


# -- node cleanup ----------------------------------------------------------------------------------------------


async def test_a_deleted_node_leaves_every_instance_and_its_slots_are_freed(
    store: Store, controller: Controller
) -> None:
    shared = instance(
        "akri-onvif-8120fe",
        ["node-a", "node-b"],
        capacity=3,
        usage={"akri-onvif-8120fe-0": "node-b", "akri-onvif-8120fe-1": "C:0:node-b", "akri-onvif-8120fe-2": "node-a"},
    )
    local = instance("akri-onvif-a19705", ["node-b"], shared=False)
    await apply(store, *NODES, configuration(services=False), shared, local)
    await settle(controller, until=lambda: _count(store, "Pod", 3))
    await store.delete("Node", "node-b")

    async def cleaned() -> bool:
        return await names_of(store, "Instance") == ["akri-onvif-8120fe"]

    await settle(controller, until=cleaned)
    inst = await store.get("Instance", "akri-onvif-8120fe", "default")
    assert inst["spec"]["nodes"] == ["node-a"]
    assert inst["spec"]["deviceUsage"] == {
        "akri-onvif-8120fe-0": "",
        "akri-onvif-8120fe-1": "",
        "akri-onvif-8120fe-2": "node-a",
    }
    await settle(controller, until=lambda: _count(store, "Pod", 1))
    assert await names_of(store, "Pod") == ["node-a-akri-onvif-8120fe-pod"]
    assert controller._deleted_nodes == set()  # once no Instance names node-b, nothing is kept about it


async def test_a_controller_restarted_over_warm_informers_still_cleans_up_a_deleted_node(
    store: Store, controller: Controller, clock: FakeClock
) -> None:
    # the fresh controller's views start from the shared feeds the first one filled: no change is heard for the
    # Instances already there, yet it must know which nodes they name
    shared = instance("akri-onvif-8120fe", ["node-a", "node-b"], usage={"akri-onvif-8120fe-0": "node-b"})
    await apply(store, *NODES, configuration(services=False), shared)
    await settle(controller, until=lambda: _count(store, "Pod", 2))
    await controller.stop()
    restarted = Controller(store, clock, resource_prefix="akri.sh")
    restarted.start()
    try:
        await settle(restarted)
        await store.delete("Node", "node-b")

        async def cleaned() -> bool:
            inst = await store.get("Instance", "akri-onvif-8120fe", "default")
            return bool(inst["spec"]["nodes"] == ["node-a"])

        await settle(restarted, until=cleaned)
        inst = await store.get("Instance", "akri-onvif-8120fe", "default")
        assert inst["spec"]["deviceUsage"] == {"akri-onvif-8120fe-0": ""}
    finally:
        await restarted.stop()


async def test_a_node_not_ready_past_the_grace_is_cleaned_up(
    store: Store, controller: Controller, clock: FakeClock
) -> None:
    since = "2026-01-01T00:00:00Z"  # the FakeClock's start
    shared = instance("akri-onvif-8120fe", ["node-a", "node-b"], usage={"akri-onvif-8120fe-0": "node-b"})
    await apply(store, node("node-a"), node("node-b", ready="Unknown", since=since), configuration(), shared)
    await settle(controller, until=lambda: _count(store, "Pod", 2))
    await clock.advance(299)
    await settle(controller)
    assert (await store.get("Instance", "akri-onvif-8120fe", "default"))["spec"]["nodes"] == ["node-a", "node-b"]
    await clock.advance(2)

    async def cleaned() -> bool:
        inst = await store.get("Instance", "akri-onvif-8120fe", "default")
        return bool(inst["spec"]["nodes"] == ["node-a"] and inst["spec"]["deviceUsage"] == {"akri-onvif-8120fe-0": ""})

    await settle(controller, until=cleaned)


async def test_a_configuration_that_lost_a_resource_name_clash_on_a_node_gets_no_brokers_there_until_it_clears(
    store: Store, controller: Controller
) -> None:
    from devplace.agent import _conditions as conditions

    await apply(store, *NODES, configuration(), *TWO)
    await settle(controller, until=lambda: _count(store, "Pod", 3))
    # node-b's agent says the resource names are served for a senior Configuration there
    clash = conditions.Failure(conditions.RESOURCE_NAME_TAKEN, "akri.sh/akri-onvif is served for other/akri-onvif")
    cfg = await store.get("Configuration", "akri-onvif", "default")
    lost = conditions.with_condition(cfg, "node-b", clash, "2026-01-01T00:00:00Z", conditions.RESOURCE_NAME_CONFLICT)
    assert lost is not None
    await store.update(lost)
    await settle(controller, until=lambda: _count(store, "Pod", 1))
    assert await names_of(store, "Pod") == ["node-a-akri-onvif-8120fe-pod"]
    cfg = await store.get("Configuration", "akri-onvif", "default")
    skipped = [c for c in cfg["status"]["conditions"] if c["type"] == "BrokersSkipped"]
    assert {c.get("node") for c in skipped} == {"node-b"}
    assert any(c["type"] == conditions.RESOURCE_NAME_CONFLICT for c in cfg["status"]["conditions"])  # kept
    cleared = conditions.with_condition(cfg, "node-b", None, "2026-01-01T00:01:00Z", conditions.RESOURCE_NAME_CONFLICT)
    assert cleared is not None
    await store.update(cleared)
    await settle(controller, until=lambda: _count(store, "Pod", 3))
    assert await names_of(store, "Pod") == PODS
    conditions_now = (await store.get("Configuration", "akri-onvif", "default"))["status"].get("conditions") or []
    assert [c for c in conditions_now if c["type"] == "BrokersSkipped"] == []
