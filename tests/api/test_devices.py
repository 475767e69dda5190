"""Configuration discoveryProperties: Akri's shape (value | valueFrom: secretKeyRef | configMapKeyRef), by field."""

from __future__ import annotations

from typing import Any

import pytest

from devplace import errors
from devplace.api import normalize

P = "spec.discoveryHandler.discoveryProperties"


def configuration(*props: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "onvif"},
        "spec": {"discoveryHandler": {"name": "onvif", "discoveryProperties": list(props)}},
    }


def test_akri_discovery_properties_load_unchanged() -> None:
    props = [
        {"name": "realm", "value": "lab"},
        {"name": "empty"},
        {"name": "user", "valueFrom": {"secretKeyRef": {"name": "auth", "key": "username", "optional": False}}},
        {"name": "tmo", "valueFrom": {"configMapKeyRef": {"name": "s", "namespace": "edge", "key": "timeout"}}},
    ]
    assert normalize(configuration(*props))["spec"]["discoveryHandler"]["discoveryProperties"] == props


@pytest.mark.parametrize(
    ("prop", "message"),
    [
        (
            {"name": "p", "value": "x", "valueFrom": {"secretKeyRef": {"name": "a", "key": "k"}}},
            f"{P}[1]: set value or valueFrom, not both",
        ),
        (
            {"name": "p", "valueFrom": {}},
            f"{P}[1].valueFrom: exactly one of secretKeyRef or configMapKeyRef must be set",
        ),
        (
            {
                "name": "p",
                "valueFrom": {
                    "secretKeyRef": {"name": "a", "key": "k"},
                    "configMapKeyRef": {"name": "a", "key": "k"},
                },
            },
            f"{P}[1].valueFrom: exactly one of secretKeyRef or configMapKeyRef must be set",
        ),
        (
            {"name": "p", "valueFrom": {"secretKeyRef": {"name": "a"}}},
            f"{P}[1].valueFrom.secretKeyRef.key: Field required",
        ),
        (
            {"name": "p", "valueFrom": {"secretKeyRef": {"name": "a", "key": ""}}},
            f"{P}[1].valueFrom.secretKeyRef.key: String should have at least 1 character",
        ),
        (
            {"name": "p", "valueFrom": {"configMapKeyRef": {"name": "Bad_Name", "key": "k"}}},
            f"{P}[1].valueFrom.configMapKeyRef.name: 'Bad_Name' must consist of lower case alphanumeric characters",
        ),
        (
            {"name": "p", "valueFrom": {"secretKeyRef": {"name": "a", "key": "k", "namespace": "a.b"}}},
            f"{P}[1].valueFrom.secretKeyRef.namespace: 'a.b' must consist of lower case alphanumeric characters",
        ),
        (
            {"name": "p", "valueFrom": {"secretKeyRef": {"name": "a", "key": "k", "colour": "red"}}},
            f"{P}[1].valueFrom.secretKeyRef.colour: Extra inputs are not permitted",
        ),
        ({"name": "", "value": "x"}, f"{P}[1].name: String should have at least 1 character"),
    ],
)
def test_a_malformed_discovery_property_is_invalid_naming_its_field(prop: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        normalize(configuration({"name": "ok", "value": "fine"}, prop))
    assert info.value.message.startswith(message), info.value.message
    assert [f.path for f in info.value.fields] == [message.split(": ", 1)[0]]
