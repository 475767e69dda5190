from __future__ import annotations

import pytest

from devplace import errors
from devplace.api import instance_properties as device_attributes
from devplace.scheduler._devices import device_of
from tests.scheduler.builders import instance


def test_an_instance_becomes_a_device_with_its_free_slots_in_slot_order() -> None:
    dev = device_of(instance("gpus-a1b2c3", ["node-a"], capacity=3, held={1: "node-a"}), handler_name="nvidia-gpu")
    assert dev.name == "gpus-a1b2c3"
    assert dev.nodes == frozenset({"node-a"})
    assert dev.free_slots == ("gpus-a1b2c3-0", "gpus-a1b2c3-2")
    assert (dev.free, dev.held, dev.capacity) == (2, 1, 3)


@pytest.mark.parametrize(
    ("holder", "free"),
    [
        ("", 1),
        ("node-a", 0),  # held through the Instance-level plugin
        ("C:gpus-0:node-b", 0),  # held through the Configuration-level plugin
    ],
)
def test_a_slot_is_free_only_when_nobody_holds_it(holder: str, free: int) -> None:
    assert device_of(instance("g", ["node-a"], held={0: holder} if holder else None)).free == free


def test_a_slot_left_over_beyond_capacity_keeps_the_device_at_capacity() -> None:
    obj = instance("g", ["node-a"], capacity=2)
    obj["spec"]["deviceUsage"]["g-2"] = "node-b"  # retired by a resize, still held
    dev = device_of(obj)
    assert dev.free == 1


def test_kind_comes_from_the_configurations_device_kind_then_its_handler_then_the_handler_name() -> None:
    inst = instance("g", ["node-a"], props={"memory": "32Gi"})
    cfg = {"spec": {"discoveryHandler": {"name": "udev"}, "deviceKind": "nvidia-gpu"}}
    assert device_attributes(inst, cfg)["Kind"] == "nvidia-gpu"
    assert device_attributes(inst, {"spec": {"discoveryHandler": {"name": "udev"}}})["Kind"] == "udev"
    assert device_attributes(inst, None, "debugEcho")["Kind"] == "debugEcho"
    assert "Kind" not in device_attributes(inst)


def test_well_known_keys_override_properties_and_node_is_set_only_for_local_devices() -> None:
    local = instance("g", ["node-a"], props={"Kind": "fake", "node": "fake", "memory": "32Gi"})
    assert device_attributes(local, None, "nvidia-gpu") == {
        "memory": "32Gi",
        "Kind": "nvidia-gpu",
        "configuration": "gpus",
        "node": "node-a",
    }
    shared = instance("g", ["node-a", "node-b"], props={"node": "fake"})
    assert "node" not in device_attributes(shared, None, "ip-camera")


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        ({"capacity": 0}, "spec.capacity"),
        ({"shared": "yes"}, "spec.shared"),
        ({"nodes": "node-a"}, "spec.nodes"),
        ({"deviceUsage": {"g-0": 3}}, "spec.deviceUsage.g-0"),
        ({"brokerProperties": {"a": 1}}, "spec.brokerProperties.a"),
        ({"configurationName": ""}, "spec.configurationName"),
    ],
)
def test_a_malformed_instance_is_refused_naming_the_field(patch: dict[str, object], path: str) -> None:
    obj = instance("g", ["node-a"])
    obj["spec"].update(patch)
    with pytest.raises(errors.Invalid) as caught:
        device_of(obj)
    assert caught.value.fields[0].path == path
