"""What the agent reads of Configurations and Instances, parsed as plain data: the same values the models give, and
the same fields refused, each named."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from devplace import errors
from devplace.agent._configurations import ConfigurationView, KeyRef, Property, PropertySource, check_instance
from devplace.api import Configuration, Instance
from tests.api.test_registry import AKRI_CONFIGURATION


def test_an_akri_configuration_reads_as_the_model_reads_it() -> None:
    view = ConfigurationView.from_obj(AKRI_CONFIGURATION)
    model = Configuration.from_obj(AKRI_CONFIGURATION)
    assert (view.api_version, view.name, view.namespace) == (model.api_version, model.name, model.namespace)
    assert view.spec.capacity == model.spec.capacity
    assert view.spec.unique_devices == model.spec.unique_devices
    assert dict(view.spec.broker_properties) == model.spec.broker_properties
    handler = view.spec.discovery_handler
    assert (handler.name, handler.discovery_details) == (
        model.spec.discovery_handler.name,
        model.spec.discovery_handler.discovery_details,
    )
    assert handler.discovery_properties[0] == Property(
        "username",
        None,
        PropertySource(secret_key_ref=KeyRef("onvif-auth-secret", "username", "default", False)),
    )
    assert len(handler.discovery_properties) == len(model.spec.discovery_handler.discovery_properties)


def _changed(path: list[Any], value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(AKRI_CONFIGURATION)
    target: Any = obj
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return obj


_DELETE = object()
_PROPERTY = ["spec", "discoveryHandler", "discoveryProperties", 0]


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (["spec", "capacity"], 0, "spec.capacity"),
        (["spec", "capacity"], 1025, "spec.capacity"),
        (["spec", "capacity"], "many", "spec.capacity"),
        (["spec", "discoveryHandler"], _DELETE, "spec.discoveryHandler"),
        (["spec", "discoveryHandler", "name"], "", "spec.discoveryHandler.name"),
        (["spec", "brokerProperties"], {"A": 1}, "spec.brokerProperties.A"),
        (["spec", "uniqueDevices"], "yes", "spec.uniqueDevices"),
        (["metadata", "name"], "Not_A_Name", "metadata.name"),
        ([*_PROPERTY, "value"], "admin", "spec.discoveryHandler.discoveryProperties[0]"),
        ([*_PROPERTY, "valueFrom"], {}, "spec.discoveryHandler.discoveryProperties[0].valueFrom"),
        (
            [*_PROPERTY, "valueFrom", "secretKeyRef", "name"],
            "Bad Name",
            "spec.discoveryHandler.discoveryProperties[0].valueFrom.secretKeyRef.name",
        ),
        (
            [*_PROPERTY, "valueFrom", "secretKeyRef", "optional"],
            "no",
            "spec.discoveryHandler.discoveryProperties[0].valueFrom.secretKeyRef.optional",
        ),
    ],
)
def test_a_configuration_the_model_refuses_for_a_field_the_agent_reads_is_refused_naming_that_field(
    path: list[Any], value: Any, field: str
) -> None:
    bad = _changed(path, value)
    with pytest.raises(errors.Invalid) as by_model:
        Configuration.from_obj(bad, strict=True)  # as the API server checks every write (`api.normalize`)
    assert any(f.path.startswith(field) for f in by_model.value.fields), by_model.value.fields
    with pytest.raises(errors.Invalid) as by_agent:
        ConfigurationView.from_obj(bad)
    assert [f.path for f in by_agent.value.fields] == [field]


def test_a_field_the_agent_does_not_read_is_left_to_the_server() -> None:
    odd = _changed(["spec", "instanceServiceSpec"], "not a map")
    with pytest.raises(errors.Invalid):
        Configuration.from_obj(odd, strict=True)  # the API server refuses to store it
    assert ConfigurationView.from_obj(odd).spec.capacity == AKRI_CONFIGURATION["spec"]["capacity"]


def _instance(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": {"name": "cams-8120fe", "namespace": "default", "resourceVersion": "7"},
        "spec": {"configurationName": "cams", "capacity": 2, "nodes": ["node-a"], "shared": True, **spec},
    }


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"capacity": 0}, "spec.capacity"),
        ({"configurationName": ""}, "spec.configurationName"),
        ({"nodes": "node-a"}, "spec.nodes"),
        ({"nodes": ["node-a", 3]}, "spec.nodes[1]"),
        ({"shared": "true"}, "spec.shared"),
        ({"brokerProperties": {"A": None}}, "spec.brokerProperties.A"),
        ({"attributes": {}}, "spec.attributes"),
    ],
)
def test_an_instance_the_model_refuses_is_refused_naming_the_field(spec: dict[str, Any], field: str) -> None:
    bad = _instance(**spec)
    with pytest.raises(errors.Invalid):
        Instance.from_obj(bad, strict=True)
    with pytest.raises(errors.Invalid) as by_agent:
        check_instance(bad)
    assert [f.path for f in by_agent.value.fields] == [field]


def test_a_well_formed_instance_passes_both_checks() -> None:
    good = _instance(brokerProperties={"A": "b"}, cdiName="akri.sh/cams=8120fe")
    Instance.from_obj(good, strict=True)
    check_instance(good)
