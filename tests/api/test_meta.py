"""Object metadata and the typed base: camelCase wire form, validation with dotted field paths."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from devplace import errors
from devplace.api import Instance, ObjectMeta, Pod
from devplace.api._meta import field_path, invalid_from


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        ((), ""),
        (("spec",), "spec"),
        (("spec", "nodes", 2), "spec.nodes[2]"),
        (("spec", "nodes", 2, "name"), "spec.nodes[2].name"),
        (("a", 0, 1), "a[0][1]"),
        ((0, "x"), "[0].x"),
    ],
)
def test_field_path_renders_pydantic_locations(loc: tuple[int | str, ...], path: str) -> None:
    assert field_path(loc) == path


def _instance(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": {"name": "cam-a1b2c3", "namespace": "default"},
        "spec": {"configurationName": "cam", **spec},
    }


def test_object_meta_reads_and_writes_camel_case() -> None:
    meta = ObjectMeta.model_validate(
        {"name": "x", "resourceVersion": "7", "creationTimestamp": "2024-01-01T00:00:00Z", "ownerReferences": []}
    )
    assert meta.resource_version == "7"
    assert meta.creation_timestamp == "2024-01-01T00:00:00Z"
    wire = meta.to_wire()
    assert wire["resourceVersion"] == "7"
    assert "resource_version" not in wire
    assert ObjectMeta(name="y", resource_version="3").to_wire()["resourceVersion"] == "3"


def test_object_meta_keeps_fields_it_does_not_type() -> None:
    meta = ObjectMeta.model_validate({"name": "x", "generateName": "x-", "managedFields": [{"manager": "kubectl"}]})
    wire = meta.to_wire()
    assert wire["generateName"] == "x-"
    assert wire["managedFields"] == [{"manager": "kubectl"}]


def test_from_obj_validates_and_gives_typed_access() -> None:
    inst = Instance.from_obj(_instance(nodes=["node-a"], capacity=2))
    assert inst.name == "cam-a1b2c3"
    assert inst.namespace == "default"
    assert inst.spec.nodes == ["node-a"]
    assert inst.spec.capacity == 2
    assert inst.to_wire()["spec"]["configurationName"] == "cam"


@pytest.mark.parametrize(
    ("obj", "path", "why"),
    [
        ({**_instance(), "metadata": {}}, "metadata.name", "Field required"),
        ({**_instance(), "metadata": {"name": "Cam"}}, "metadata.name", "lower case alphanumeric"),
        ({**_instance(), "metadata": {"name": "c", "namespace": "a.b"}}, "metadata.namespace", "lower case"),
        ({**_instance(), "metadata": {"name": "c", "labels": {"a": "-"}}}, "metadata.labels", "label a='-'"),
        ({**_instance(), "metadata": {"name": "c", "labels": {"A/b": "x"}}}, "metadata.labels", "prefix part"),
        (_instance(capacity=0), "spec.capacity", "greater than or equal to 1"),
        (_instance(nodes=["a", 2]), "spec.nodes[1]", "must be a string, not number 2"),
        (_instance(configurationName=""), "spec.configurationName", "at least 1 character"),
        (_instance(deviceUsage={"s": None}), "spec.deviceUsage.s", "must be a string, not null"),
        (_instance(colour="red"), "spec.colour", "Extra inputs are not permitted"),
        ({**_instance(), "extra": 1}, "extra", "Extra inputs are not permitted"),
        ({k: v for k, v in _instance().items() if k != "spec"}, "spec", "Field required"),
    ],
)
def test_from_obj_refuses_with_the_field_path_and_reason(obj: dict[str, Any], path: str, why: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        Instance.from_obj(obj)
    paths = {f.path: f.reason for f in caught.value.fields}
    assert path in paths
    assert why in paths[path]
    assert f"{path}: " in str(caught.value)
    assert isinstance(caught.value.__cause__, pydantic.ValidationError)


def test_from_obj_reports_every_bad_field_at_once() -> None:
    obj = _instance(capacity=0, nodes=[1])
    obj["metadata"] = {"name": "Bad"}
    with pytest.raises(errors.Invalid) as caught:
        Instance.from_obj(obj)
    assert {f.path for f in caught.value.fields} == {"metadata.name", "spec.capacity", "spec.nodes[0]"}


def test_invalid_from_prefixes_paths() -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        ObjectMeta.model_validate({"name": "Bad"})
    err = invalid_from(caught.value, prefix="items[3].metadata")
    assert [f.path for f in err.fields] == ["items[3].metadata.name"]
    assert not err.fields[0].reason.startswith("Value error")


def test_core_kinds_keep_fields_they_do_not_type() -> None:
    pod = Pod.from_obj(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Running"},
        }
    )
    assert pod.spec["containers"][0]["image"] == "busybox"
    assert pod.to_wire()["status"] == {"phase": "Running"}
