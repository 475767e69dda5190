"""The DRA kinds (`api._dra`): published manifests validate unchanged; what kube-apiserver refuses is refused with
its field path (tests/fixtures/dra/invalid.yaml); immutable fields stay immutable; devices map to DRA devices by one
rule (`api._dradevices`)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from devplace import errors
from devplace.api import normalize
from devplace.api._cel import DeviceInput, compile_selector
from devplace.api._dra import update_problems
from devplace.api._dradevices import DRIVER, attribute_id, device_name, dra_device, instance_device

FIXTURES = Path(__file__).parent.parent / "fixtures" / "dra"
MANIFESTS = list(yaml.safe_load_all((FIXTURES / "manifests.yaml").read_text()))
INVALID: list[dict[str, Any]] = yaml.safe_load((FIXTURES / "invalid.yaml").read_text())


def expand(node: Any) -> Any:
    """The invalid cases' shorthands: `{repeat: X, count: N}`, `{generate: FORMAT, count: N[, taint]}`."""
    if isinstance(node, dict):
        if "repeat" in node:
            return [copy.deepcopy(node["repeat"]) for _ in range(node["count"])]
        if "generate" in node:
            names = [node["generate"] % i for i in range(node["count"])]
            fmt = node["generate"]
            if fmt.startswith("device"):
                taints = [{"key": "k", "effect": "NoSchedule"}] if node.get("taint") else []
                return [{"name": n, **({"taints": taints} if taints else {})} for n in names]
            if fmt.startswith("req"):
                return [{"name": n, "exactly": {"deviceClassName": "gpu.example.com"}} for n in names]
            if fmt.startswith("pod"):
                return [{"resource": "pods", "name": n, "uid": n} for n in names]
            return {n: {"int": 1} for n in names}
        return {k: expand(v) for k, v in node.items()}
    if isinstance(node, list):
        return [expand(v) for v in node]
    return node


@pytest.mark.parametrize("manifest", MANIFESTS, ids=[f"{m['kind']}/{m['metadata']['name']}" for m in MANIFESTS])
def test_published_dra_manifests_validate_unchanged(manifest: dict[str, Any]) -> None:
    stored = normalize(manifest)
    assert stored["spec"] == manifest["spec"]


@pytest.mark.parametrize("case", INVALID, ids=[c["name"] for c in INVALID])
def test_what_kube_apiserver_refuses_is_refused_naming_the_field(case: dict[str, Any]) -> None:
    with pytest.raises(errors.Invalid) as refused:
        normalize(expand(case["object"]))
    assert case["path"] in [f.path for f in refused.value.fields], refused.value.message


def test_a_hostile_selector_is_refused_naming_the_expression() -> None:
    deep = "(" * 100 + "true" + ")" * 100
    with pytest.raises(errors.Invalid) as refused:
        normalize(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "x"},
                "spec": {"selectors": [{"cel": {"expression": deep}}]},
            }
        )
    assert refused.value.fields[0].path == "spec.selectors[0].cel.expression"
    assert "((((" in refused.value.fields[0].reason


def test_immutable_fields_refuse_a_change() -> None:
    slice_ = normalize(MANIFESTS[-1])
    moved = copy.deepcopy(slice_)
    moved["spec"]["driver"] = "other.example.com"
    assert [f.path for f in update_problems(slice_, moved)] == ["spec.driver"]
    claim = normalize(MANIFESTS[-2])
    changed = copy.deepcopy(claim)
    changed["spec"]["devices"]["requests"][0]["name"] = "req-1"
    assert [f.path for f in update_problems(claim, changed)] == ["spec"]
    allocated = {
        **claim,
        "status": {
            "allocation": {"devices": {"results": [{"request": "req-0", "driver": "d", "pool": "p", "device": "a"}]}}
        },
    }
    reallocated = copy.deepcopy(allocated)
    reallocated["status"]["allocation"]["devices"]["results"][0]["device"] = "b"
    assert [f.path for f in update_problems(allocated, reallocated)] == ["status.allocation"]
    assert list(update_problems(allocated, {**allocated, "status": {}})) == []


# -- the device mapping --------------------------------------------------------------------------------------


AKRI_PROPERTIES = {
    "udev": {
        "UDEV_DEVNODE": "/dev/video0",
        "UDEV_DEVPATH": "/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/video4linux/video0/with/a/long/tail",
    },
    "onvif": {
        "ONVIF_DEVICE_SERVICE_URL": "http://10.0.0.1:1000/onvif/device_service",
        "ONVIF_DEVICE_UUID": "3fa1fe68-b915-4053-a3e1-ac15a21f5f91",
        "ONVIF_DEVICE_IP_ADDRESS": "10.0.0.1",
        "ONVIF_DEVICE_MAC_ADDRESS": "00:11:22:33:44:55",
    },
    "opcua": {"OPCUA_DISCOVERY_URL": "opc.tcp://127.0.0.1:48410/x/"},
}


@pytest.mark.parametrize("handler", list(AKRI_PROPERTIES))
def test_akri_handler_properties_become_a_valid_dra_device(handler: str) -> None:
    instance = {
        "metadata": {"name": f"akri-{handler}-a1b2c3"},
        "spec": {
            "configurationName": f"akri-{handler}",
            "nodes": ["node-a"],
            "brokerProperties": AKRI_PROPERTIES[handler],
        },
    }
    device = instance_device(instance, handler_name=handler)
    normalize(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "s"},
            "spec": {
                "driver": DRIVER,
                "pool": {"name": "node-a", "resourceSliceCount": 1},
                "nodeName": "node-a",
                "devices": [device.to_wire()],
            },
        }
    )
    assert device.attributes["Kind"] == {"string": handler}
    assert device.attributes["node"] == {"string": "node-a"}
    if handler == "udev":
        assert device.cut == ("UDEV_DEVPATH",)
        assert len(device.attributes["UDEV_DEVPATH"]["string"]) == 64


def test_the_captured_gpu_maps_with_nvidia_dra_names() -> None:
    captured = (
        json.loads(Path("/work/shared/reference/gpu/nvml.json").read_text())
        if Path("/work/shared/reference/gpu/nvml.json").exists()
        else {
            "devices": [
                {
                    "name": "NVIDIA H200",
                    "uuid": "GPU-x",
                    "memory": {"total": 150754820096},
                    "cuda_compute_capability": [9, 0],
                    "pci": {"busId": "00000000:00:06.0"},
                }
            ],
            "driver": "580.159.04",
        }
    )
    gpu = captured["devices"][0]
    from devplace.api import Quantity

    typed = {
        "productName": gpu["name"],
        "uuid": gpu["uuid"],
        "architecture": "Hopper",
        "cudaComputeCapability": tuple(gpu["cuda_compute_capability"]),
        "driverVersion": captured["driver"],
        "memory": Quantity(gpu["memory"]["total"]),
        "pciBusID": gpu["pci"]["busId"],
    }
    device = dra_device("gpu-0", {"Kind": "nvml", "configuration": "gpus"}, typed)
    assert device.attributes["productName"] == {"string": gpu["name"]}
    assert device.attributes["cudaComputeCapability"] == {"version": "9.0.0"}
    assert device.attributes["driverVersion"] == {"version": "580.159.4"}
    assert device.capacity["memory"] == {"value": str(gpu["memory"]["total"])}
    selector = compile_selector(
        'device.capacity["devplace.io"].memory.compareTo(quantity("80Gi")) >= 0 && '
        'device.attributes["devplace.io"].cudaComputeCapability.isGreaterThan(semver("8.0.0"))'
    )
    assert selector.matches(DeviceInput(DRIVER, device.to_wire())) is True


@pytest.mark.parametrize(
    ("key", "ident"),
    [
        ("Kind", "Kind"),
        ("UDEV_DEVNODE", "UDEV_DEVNODE"),
        ("a-b.c", "a_b_c"),
        ("0day", "_0day"),
        ("x" * 40, "x" * 23 + "_" + "e4f9f3e8"),
    ],
)
def test_attribute_names_become_c_identifiers_of_at_most_32_characters(key: str, ident: str) -> None:
    made = attribute_id(key)
    assert len(made) <= 32
    assert made == ident or (len(key) > 32 and made.startswith("x" * 23 + "_"))


def test_device_names_are_dns_labels() -> None:
    assert device_name("akri.onvif-a1b2c3") == "akri-onvif-a1b2c3"
    long = device_name("c" * 80)
    assert len(long) <= 63
    assert long.startswith("c" * 54)


def test_values_take_one_dra_type_each() -> None:
    device = dra_device("d", {"n": "4", "mem": "32Gi", "ok": "true", "v": "v1.2", "speed": "40GBPS", "s": "x"})
    assert device.attributes == {
        "n": {"int": 4},
        "ok": {"bool": True},
        "v": {"version": "1.2.0"},
        "speed": {"string": "40GBPS"},
        "s": {"string": "x"},
    }
    assert device.capacity == {"mem": {"value": "32Gi"}}


def test_the_scheduler_and_the_dra_mapping_read_an_instances_attributes_by_one_definition() -> None:
    from devplace import scheduler

    assert not hasattr(scheduler, "device_attributes")  # the scheduler reads api.instance_properties
    instance = {"metadata": {"name": "g"}, "spec": {"configurationName": "gpus", "brokerProperties": {"a": 1}}}
    with pytest.raises(errors.Invalid) as refused:
        instance_device(instance)
    assert [f.path for f in refused.value.fields] == ["spec.brokerProperties.a"]
