"""The pure parts of the plugins: AllocateResponse contents and the CL preference knob."""

from __future__ import annotations

from typing import Any

import pytest

from devplace.agent import plugins
from devplace.agent.instances import InstanceRecord
from devplace.discovery import Device, DeviceSpec, Mount


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
