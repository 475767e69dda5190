"""The `devices` subresource of ResourceClasses and DeviceClasses: which devices a class selects, decided by the
schedulers' engines over plain data (unit tests), and served read-only with the API's authorization (route tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace import errors
from devplace.server._app import create_app
from devplace.server._authn import Auth, Tokens
from devplace.server._classdevices import Selection, device_class_devices, resource_class_devices
from devplace.store import MemoryStore
from tests.scheduler.builders import device_class_object
from tests.servers import serve_app

BOUND = 10.0
TOKENS = """\
admin-token,alice,1,admin
reader-token,rita,2,reader
node-a-token,system:node:node-a,3,system:nodes
nobody-token,nora,4
"""
RESOURCE_CLASSES = "/apis/devplace.io/v1alpha1/resourceclasses"
DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"


def configuration(name: str, handler: str) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"discoveryHandler": {"name": handler}, "capacity": 2},
    }


def instance(name: str, config: str, nodes: list[str], shared: bool = False, **properties: str) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "configurationName": config,
            "shared": shared,
            "nodes": nodes,
            "capacity": 2,
            "deviceUsage": {f"{name}-0": "", f"{name}-1": ""},
            "brokerProperties": properties,
        },
    }


def resource_class(name: str, *terms: Any) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": {"name": name},
        "spec": {"resourceSelector": list(terms)},
    }


def where(key: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}


def resource_slice(name: str, node: str, generation: int, *devices: tuple[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": [{"name": d, "attributes": {"model": {"string": model}}} for d, model in devices],
        },
    }


CONFIGURATIONS = [configuration("cam", "onvif"), configuration("usb", "udev")]
BIG = instance("cam-0a0a0a", "cam", ["node-a", "node-b"], shared=True, size="big")
SMALL = instance("cam-0b0b0b", "cam", ["node-a"], size="small")
STICK = instance("usb-0c0c0c", "usb", ["node-b"], size="big")
INSTANCES = [STICK, SMALL, BIG]
CLASSES = [
    resource_class("cams", where("Kind", "onvif")),
    resource_class("big", where("size", "big")),
    resource_class("big-or-cams", {"classRef": "big"}, {"classRef": "cams"}),
    resource_class("nothing", where("size", "huge")),
]


def specs(classes: list[dict[str, Any]]) -> dict[str, Any]:
    return {c["metadata"]["name"]: c["spec"] for c in classes}


def names(selection: Selection) -> list[str]:
    return [item["name"] for item in selection.items]


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        ("cams", ["cam-0a0a0a", "cam-0b0b0b"]),  # Kind comes from the Configuration's discovery handler
        ("big", ["cam-0a0a0a", "usb-0c0c0c"]),
        ("big-or-cams", ["cam-0a0a0a", "cam-0b0b0b", "usb-0c0c0c"]),  # nested: the union of what both select
        ("nothing", []),
    ],
)
def test_a_resource_class_selects_the_instances_its_resolved_selector_matches(cls: str, expected: list[str]) -> None:
    selection = resource_class_devices(cls, specs(CLASSES), INSTANCES, CONFIGURATIONS)
    assert (names(selection), selection.problem) == (expected, None)


def test_a_resource_class_device_item_names_its_instance_nodes_capacity_and_attributes() -> None:
    selection = resource_class_devices("cams", specs(CLASSES), INSTANCES, CONFIGURATIONS)
    assert selection.items == [
        {
            "name": "cam-0a0a0a",
            "namespace": "default",
            "nodes": ["node-a", "node-b"],
            "capacity": 2,
            "attributes": {"Kind": "onvif", "configuration": "cam", "size": "big"},
        },
        {
            "name": "cam-0b0b0b",
            "namespace": "default",
            "nodes": ["node-a"],
            "capacity": 2,
            "attributes": {"Kind": "onvif", "configuration": "cam", "node": "node-a", "size": "small"},
        },
    ]


def test_a_class_in_a_reference_cycle_selects_nothing_and_says_why() -> None:
    cyclic = [resource_class("a", {"classRef": "b"}), resource_class("b", {"classRef": "a"})]
    selection = resource_class_devices("a", specs(cyclic), INSTANCES, CONFIGURATIONS)
    assert selection == Selection([], "class a selects nothing: spec.resourceSelector[0].classRef: cycle a -> b -> a")


def test_an_unknown_resource_class_is_not_found() -> None:
    with pytest.raises(errors.NotFound) as raised:
        resource_class_devices("gone", specs(CLASSES), INSTANCES, CONFIGURATIONS)
    assert raised.value.message == 'resourceclasses.devplace.io "gone" not found'


def test_an_instance_that_does_not_parse_is_left_out() -> None:
    broken = instance("cam-0d0d0d", "cam", ["node-a"], size="big")
    broken["spec"]["brokerProperties"] = {"size": 3}
    selection = resource_class_devices("big", specs(CLASSES), [*INSTANCES, broken], CONFIGURATIONS)
    assert names(selection) == ["cam-0a0a0a", "usb-0c0c0c"]


SLICES = [
    resource_slice("node-b-slice", "node-b", 1, ("gpu-0", "h100"), ("gpu-1", "a100")),
    resource_slice("node-a-old", "node-a", 1, ("gpu-9", "h100")),  # an older generation of node-a's pool
    resource_slice("node-a-slice", "node-a", 2, ("gpu-0", "h100")),
]


@pytest.mark.parametrize(
    ("expressions", "expected"),
    [
        ((), ["node-a/gpu-0", "node-b/gpu-0", "node-b/gpu-1"]),  # no selector: every device
        (('device.attributes["gpu.example.com"].model == "h100"',), ["node-a/gpu-0", "node-b/gpu-0"]),
        (
            ('device.driver == "gpu.example.com"', 'device.attributes["gpu.example.com"].model == "a100"'),
            ["node-b/gpu-1"],
        ),
        (('device.driver == "other.example.com"',), []),
    ],
)
def test_a_device_class_selects_the_newest_pool_devices_all_its_selectors_accept(
    expressions: tuple[str, ...], expected: list[str]
) -> None:
    selection = device_class_devices("gpus", device_class_object("gpus", *expressions), SLICES)
    assert ([f"{item['pool']}/{item['name']}" for item in selection.items], selection.problem) == (expected, None)


def test_a_device_class_device_item_names_its_driver_pool_slice_node_and_qualified_attributes() -> None:
    selection = device_class_devices(
        "a100", device_class_object("a100", 'device.attributes["gpu.example.com"].model == "a100"'), SLICES
    )
    assert selection.items == [
        {
            "name": "gpu-1",
            "driver": "gpu.example.com",
            "pool": "node-b",
            "slice": "node-b-slice",
            "nodes": ["node-b"],
            "allNodes": False,
            "attributes": {"gpu.example.com/model": "a100"},
        }
    ]


def test_a_device_class_whose_selector_fails_on_a_device_leaves_it_out_and_says_so() -> None:
    selection = device_class_devices(
        "odd", device_class_object("odd", 'device.attributes["gpu.example.com"].missing'), SLICES
    )
    assert selection == Selection(
        [],
        'selector #0 on device gpu.example.com/node-a/gpu-0: device.attributes["gpu.example.com"].missing: '
        "no such key: missing",
    )


def test_an_unknown_device_class_is_not_found() -> None:
    with pytest.raises(errors.NotFound) as raised:
        device_class_devices("gone", None, SLICES)
    assert raised.value.message == 'deviceclasses.resource.k8s.io "gone" not found'


# -- the routes ----------------------------------------------------------------------------------------------------


@pytest.fixture
async def url(memory_store: MemoryStore) -> AsyncIterator[str]:
    for obj in [*CONFIGURATIONS, *INSTANCES]:
        await memory_store.create(obj)
    app = create_app(memory_store, fleet_api=False, auth=Auth(Tokens.parse(TOKENS)))
    async with serve_app(app) as base_url:
        admin = httpx2.AsyncClient(base_url=base_url, timeout=BOUND, headers={"Authorization": "Bearer admin-token"})
        async with admin:
            for obj in CLASSES:
                assert (await admin.post(RESOURCE_CLASSES, json=obj)).status_code == 201
            assert (
                await admin.post(
                    DEVICE_CLASSES,
                    json=device_class_object("h100", 'device.attributes["gpu.example.com"].model == "h100"'),
                )
            ).status_code == 201
            for obj in SLICES:
                created = await admin.post("/apis/resource.k8s.io/v1/resourceslices", json=obj)
                assert created.status_code == 201, created.text
        yield base_url


async def get(url: str, token: str, path: str) -> httpx2.Response:
    async with httpx2.AsyncClient(base_url=url, timeout=BOUND, headers={"Authorization": f"Bearer {token}"}) as client:
        return await client.get(path)


async def test_a_reader_gets_the_instances_a_nested_resource_class_selects(url: str, memory_store: MemoryStore) -> None:
    response = await get(url, "reader-token", f"{RESOURCE_CLASSES}/big-or-cams/devices")
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["kind"], body["apiVersion"]) == ("DeviceList", "v1")
    assert body["metadata"] == {"resourceVersion": str(await memory_store.revision())}
    assert [(item["name"], item["nodes"]) for item in body["items"]] == [
        ("cam-0a0a0a", ["node-a", "node-b"]),
        ("cam-0b0b0b", ["node-a"]),
        ("usb-0c0c0c", ["node-b"]),
    ]
    assert body["items"][2]["attributes"] == {"Kind": "udev", "configuration": "usb", "node": "node-b", "size": "big"}


async def test_a_resource_class_that_matches_nothing_answers_an_empty_list(url: str) -> None:
    response = await get(url, "reader-token", f"{RESOURCE_CLASSES}/nothing/devices")
    assert (response.status_code, response.json()["items"]) == (200, [])


async def test_a_reader_gets_the_slice_devices_a_device_class_selects(url: str) -> None:
    response = await get(url, "reader-token", f"{DEVICE_CLASSES}/h100/devices")
    assert response.status_code == 200, response.text
    assert response.json()["items"] == [
        {
            "name": "gpu-0",
            "driver": "gpu.example.com",
            "pool": pool,
            "slice": f"{pool}-slice",
            "nodes": [pool],
            "allNodes": False,
            "attributes": {"gpu.example.com/model": "h100"},
        }
        for pool in ("node-a", "node-b")
    ]


@pytest.mark.parametrize("path", [f"{RESOURCE_CLASSES}/gone/devices", f"{DEVICE_CLASSES}/gone/devices"])
async def test_the_devices_of_an_unknown_class_are_a_404_status(url: str, path: str) -> None:
    response = await get(url, "admin-token", path)
    body = response.json()
    assert (response.status_code, body["kind"], body["reason"]) == (404, "Status", "NotFound")


@pytest.mark.parametrize(("token", "rule"), [("node-a-token", "node-kinds"), ("nobody-token", "no-role")])
@pytest.mark.parametrize("path", [f"{RESOURCE_CLASSES}/cams/devices", f"{DEVICE_CLASSES}/h100/devices"])
async def test_an_identity_that_may_not_get_the_class_is_refused_its_devices(
    url: str, token: str, rule: str, path: str
) -> None:
    response = await get(url, token, path)
    assert response.status_code == 403, response.text
    assert f"rule {rule}" in response.json()["message"]
    assert "(devices)" in response.json()["message"]


async def test_the_devices_routes_are_in_the_rest_documentation(url: str) -> None:
    paths = (await get(url, "reader-token", "/openapi.json")).json()["paths"]
    assert paths[f"{RESOURCE_CLASSES}/{{name}}/devices"]["get"]["operationId"] == "readResourceClassDevices"
    assert paths[f"{DEVICE_CLASSES}/{{name}}/devices"]["get"]["operationId"] == "readDeviceClassDevices"
