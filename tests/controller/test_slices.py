"""The controller publishes shared Instances once, in slices whose nodeSelector names the nodes that see them; a
change rewrites only the slices that hold the device, and a device nobody sees leaves no slice."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from devplace.agent._instances import OFFLINE_SINCE
from devplace.api import (
    DEVICE_PATHS_ANNOTATION,
    PUBLISHER_LABEL,
    UNHEALTHY_TAINT,
    normalize,
    probe_slice,
    shared_pool,
)
from devplace.clocks import FakeClock
from devplace.controller import Controller
from devplace.store import MemoryStore, Store
from tests.controller.samples import configuration, instance
from tests.controller.test_controllers import settle


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[Store]:
    opened = MemoryStore(clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def controller(store: Store, clock: FakeClock) -> AsyncIterator[Controller]:
    c = Controller(store, clock, dra_slices=None)  # on where the store keeps a probe slice: memory does
    c.start()
    try:
        yield c
    finally:
        await c.stop()


async def slices(store: Store) -> dict[str, dict[str, Any]]:
    return {s["metadata"]["name"]: s for s in (await store.list("ResourceSlice")).items}


def devices_by_pool(found: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in found.values():
        out.setdefault(item["spec"]["pool"]["name"], []).extend(d["name"] for d in item["spec"]["devices"])
    return {k: sorted(v) for k, v in out.items()}


AB = shared_pool(["node-a", "node-b"])
A = shared_pool(["node-a"])


async def three(store: Store, controller: Controller) -> None:
    for body in (
        instance("cam-1", ["node-a", "node-b"]),
        instance("cam-2", ["node-b", "node-a"]),
        instance("cam-3", ["node-a"]),
        instance("usb-1", ["node-a"], shared=False),  # local: the agent's to publish
    ):
        await store.create(normalize(body))
    await settle(controller)


async def test_shared_instances_are_published_once_per_node_set_with_a_selector_naming_the_nodes(
    store: Store, controller: Controller
) -> None:
    await three(store, controller)
    found = await slices(store)
    assert devices_by_pool(found) == {AB.pool: ["cam-1", "cam-2"], A.pool: ["cam-3"]}
    item = found[AB.slice_name(0)]
    assert item["spec"]["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a", "node-b"]}]}
        ]
    }
    assert "nodeName" not in item["spec"]
    assert item["spec"]["devices"][0]["attributes"]["instance"] == {"string": "cam-1"}


async def test_a_change_of_one_shared_device_rewrites_only_the_slice_that_holds_it(
    store: Store, controller: Controller
) -> None:
    await three(store, controller)
    before = await slices(store)
    writes = controller.slices.writes
    cam = await store.get("Instance", "cam-1", "default")
    cam["spec"]["brokerProperties"] = {"ONVIF_DEVICE_UUID": "cam-1", "firmware": "2.1.0"}
    await store.update(cam)
    await settle(controller)
    after = await slices(store)
    assert controller.slices.writes == writes + 1
    assert after[A.slice_name(0)] == before[A.slice_name(0)]
    assert after[AB.slice_name(0)]["spec"]["devices"][0]["attributes"]["firmware"] == {"version": "2.1.0"}


async def test_a_device_whose_nodes_change_moves_pools_and_a_pool_left_empty_goes(
    store: Store, controller: Controller
) -> None:
    await three(store, controller)
    for name in ("cam-1", "cam-2"):
        cam = await store.get("Instance", name, "default")
        cam["spec"]["nodes"] = ["node-a"]
        await store.update(cam)
    await settle(controller)
    assert devices_by_pool(await slices(store)) == {A.pool: ["cam-1", "cam-2", "cam-3"]}
    for name in ("cam-1", "cam-2", "cam-3"):
        await store.delete("Instance", name, "default")
    await settle(controller)
    assert await slices(store) == {}


async def test_a_shared_device_offline_or_reported_unhealthy_is_tainted(store: Store, controller: Controller) -> None:
    await three(store, controller)
    cam = await store.get("Instance", "cam-3", "default")
    cam["metadata"]["annotations"] = {OFFLINE_SINCE: "2026-11-26T18:00:00Z"}
    await store.update(cam)
    cam = await store.get("Instance", "cam-1", "default")
    cam["spec"]["brokerProperties"] = {"ONVIF_DEVICE_UUID": "cam-1", "devplace.io/health": "Unhealthy"}
    await store.update(cam)
    await settle(controller)
    found = await slices(store)
    taint = [{"key": UNHEALTHY_TAINT, "effect": "NoSchedule"}]
    [device] = found[A.slice_name(0)]["spec"]["devices"]
    assert device["taints"] == taint
    assert [d.get("taints") for d in found[AB.slice_name(0)]["spec"]["devices"]] == [taint, None]  # cam-1, cam-2


async def test_without_dra_slices_the_controller_publishes_nothing(store: Store, clock: FakeClock) -> None:
    c = Controller(store, clock)
    c.start()
    try:
        await store.create(normalize(instance("cam-1", ["node-a", "node-b"])))
        await settle(c)
        assert await slices(store) == {}
    finally:
        await c.stop()


async def test_a_slice_with_the_controllers_label_that_no_shared_pool_names_is_deleted(
    store: Store, controller: Controller
) -> None:
    await three(store, controller)
    leftover = probe_slice("old-layout-0", None)
    leftover["spec"] = {**leftover["spec"], "driver": "devplace.io", "pool": {"name": "old", "resourceSliceCount": 1}}
    leftover["metadata"]["labels"] = {PUBLISHER_LABEL: "controller"}
    await store.create(leftover)
    await settle(controller)
    assert devices_by_pool(await slices(store)) == {AB.pool: ["cam-1", "cam-2"], A.pool: ["cam-3"]}


# -- device paths (issue #26 item 2): a Configuration served through device plugins only is in no slice ------------


def annotated(paths: str | None, name: str = "akri-onvif") -> dict[str, Any]:
    body = configuration(name)
    if paths is not None:
        body["metadata"]["annotations"] = {DEVICE_PATHS_ANNOTATION: paths}
    return normalize(body)


async def test_a_configuration_for_device_plugins_only_has_no_shared_device_in_a_slice_and_a_change_converges(
    store: Store, controller: Controller
) -> None:
    await three(store, controller)
    before = await slices(store)
    assert devices_by_pool(before) == {AB.pool: ["cam-1", "cam-2"], A.pool: ["cam-3"]}  # the default: both

    await store.create(annotated("device-plugins"))
    await settle(controller)
    assert await slices(store) == {}  # the pools went: nothing allocates the cams through DRA

    stored = await store.get("Configuration", "akri-onvif", "default")
    stored["metadata"]["annotations"] = {DEVICE_PATHS_ANNOTATION: "dra"}
    await store.update(stored)
    await settle(controller)
    assert devices_by_pool(await slices(store)) == {AB.pool: ["cam-1", "cam-2"], A.pool: ["cam-3"]}


async def test_the_controllers_default_paths_hold_unless_the_configuration_says(store: Store, clock: FakeClock) -> None:
    c = Controller(store, clock, dra_slices=None, device_paths="device-plugins")
    c.start()
    try:
        await store.create(annotated(None))
        await store.create(annotated("dra", "screens"))
        await store.create(normalize(instance("cam-1", ["node-a", "node-b"])))
        await store.create(normalize(instance("screen-1", ["node-a", "node-b"], configuration="screens")))
        await settle(c)
        assert devices_by_pool(await slices(store)) == {AB.pool: ["screen-1"]}
    finally:
        await c.stop()
