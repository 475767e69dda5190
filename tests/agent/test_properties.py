"""Resolving discoveryProperties: one table row per rule of `agent._properties`, plus properties by hypothesis."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.agent import _properties as properties
from devplace.agent._configurations import Property, parse_property
from devplace.agent._properties import Source

P = "spec.discoveryHandler.discoveryProperties"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def secret_ref(name: str, key: str, **extra: Any) -> dict[str, Any]:
    return {"valueFrom": {"secretKeyRef": {"name": name, "key": key, **extra}}}


def config_map_ref(name: str, key: str, **extra: Any) -> dict[str, Any]:
    return {"valueFrom": {"configMapKeyRef": {"name": name, "key": key, **extra}}}


def props(*specs: tuple[str, dict[str, Any]]) -> list[Property]:
    return [parse_property({"name": name, **spec}, f"p[{i}]") for i, (name, spec) in enumerate(specs)]


SOURCES: dict[Source, dict[str, Any]] = {
    ("Secret", "default", "auth"): {
        "data": {"username": b64(b"admin"), "token": b64(b"\x00\xff")},
        "stringData": {"password": "s3cret", "username": "shadowed"},
    },
    ("Secret", "cams", "auth"): {"data": {"username": b64(b"cam-admin")}},
    ("ConfigMap", "default", "settings"): {
        "data": {"timeout": "5", "label": "caméra"},
        "binaryData": {"blob": b64(b"\x01\x02"), "timeout": b64(b"shadowed")},
    },
}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"value": "lab"}, {"p": b"lab"}),  # a plain value: its UTF-8 bytes
        ({"value": "ü"}, {"p": "ü".encode()}),
        ({}, {"p": None}),  # neither value nor valueFrom: no bytes at all (Akri's ByteData with vec unset)
        ({"value": ""}, {"p": b""}),  # an empty value is empty bytes, which is not the same
        (secret_ref("auth", "username"), {"p": b"admin"}),  # Secret data: base64, and it wins over stringData
        (secret_ref("auth", "token"), {"p": b"\x00\xff"}),  # bytes as they are
        (secret_ref("auth", "password"), {"p": b"s3cret"}),  # Secret stringData: plain text
        (secret_ref("auth", "username", namespace="cams"), {"p": b"cam-admin"}),  # another namespace
        (config_map_ref("settings", "timeout"), {"p": b"5"}),  # ConfigMap data: UTF-8, wins over binaryData
        (config_map_ref("settings", "label"), {"p": "caméra".encode()}),
        (config_map_ref("settings", "blob"), {"p": b"\x01\x02"}),  # ConfigMap binaryData: base64
        (secret_ref("missing", "x", optional=True), {}),  # optional and the object is missing: left out
        (secret_ref("auth", "missing", optional=True), {}),  # optional and the key is missing: left out
        (config_map_ref("missing", "x", optional=True), {}),
        (config_map_ref("settings", "missing", optional=True), {}),
        (secret_ref("auth", "username", optional=True), {"p": b"admin"}),  # optional and present: sent
    ],
)
def test_each_kind_of_property_resolves_to_its_bytes(spec: dict[str, Any], expected: dict[str, bytes | None]) -> None:
    assert properties.resolve(props(("p", spec)), SOURCES) == expected


def test_a_reference_without_a_namespace_reads_from_default_as_akri_does() -> None:
    """Akri's DiscoveryPropertyKeySelector defaults `namespace` to `default`, not to the Configuration's."""
    found = props(("p", secret_ref("auth", "username")))
    assert properties.resolve(found, SOURCES) == {"p": b"admin"}
    assert properties.property_references(found) == {("Secret", "default", "auth")}
    named = props(("p", secret_ref("auth", "username", namespace="cams")))
    assert properties.property_references(named) == {("Secret", "cams", "auth")}


def test_references_name_every_object_read_once_with_namespaces_defaulted() -> None:
    found = props(
        ("a", {"value": "x"}),
        ("b", secret_ref("auth", "username")),
        ("c", secret_ref("auth", "password")),
        ("d", config_map_ref("settings", "timeout", namespace="edge")),
    )
    assert properties.property_references(found) == {("Secret", "default", "auth"), ("ConfigMap", "edge", "settings")}


def test_a_name_given_twice_takes_the_later_value() -> None:
    found = props(("p", {"value": "first"}), ("p", {"value": "second"}))
    assert properties.resolve(found, {}) == {"p": b"second"}


@pytest.mark.parametrize(
    ("spec", "sources", "message"),
    [
        (
            secret_ref("missing", "x"),
            SOURCES,
            f"{P}[1].valueFrom.secretKeyRef.name: Secret default/missing not found",
        ),
        (
            secret_ref("auth", "missing", optional=False),
            SOURCES,
            f"{P}[1].valueFrom.secretKeyRef.key: Secret default/auth has no key 'missing'",
        ),
        (
            config_map_ref("settings", "x", namespace="edge"),
            SOURCES,
            f"{P}[1].valueFrom.configMapKeyRef.name: ConfigMap edge/settings not found",
        ),
        (
            config_map_ref("settings", "missing"),
            SOURCES,
            f"{P}[1].valueFrom.configMapKeyRef.key: ConfigMap default/settings has no key 'missing'",
        ),
        (
            secret_ref("auth", "username"),
            {("Secret", "default", "auth"): {"data": {"username": "not base64!"}}},
            f"{P}[1].valueFrom.secretKeyRef.key: Secret default/auth: data.username must be base64 "
            "(standard alphabet, padded): Only base64 data is allowed",
        ),
        (
            config_map_ref("settings", "blob"),
            {("ConfigMap", "default", "settings"): {"binaryData": {"blob": "AQI"}}},
            f"{P}[1].valueFrom.configMapKeyRef.key: ConfigMap default/settings: binaryData.blob must be base64 "
            "(standard alphabet, padded): Incorrect padding",
        ),
        (
            config_map_ref("settings", "n"),
            {("ConfigMap", "default", "settings"): {"data": {"n": 5}}},
            f"{P}[1].valueFrom.configMapKeyRef.key: ConfigMap default/settings: data.n must be a string",
        ),
    ],
)
def test_an_unresolvable_property_is_invalid_naming_its_field_and_the_reason(
    spec: dict[str, Any], sources: dict[Source, dict[str, Any]], message: str
) -> None:
    found = props(("ok", {"value": "fine"}), ("p", spec))
    with pytest.raises(errors.Invalid) as info:
        properties.resolve(found, sources)
    assert info.value.message == message
    [field] = info.value.fields
    assert str(field) == message


keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_.0123456789", min_size=1, max_size=12)


@given(st.dictionaries(keys, st.binary(max_size=40), max_size=6))
def test_every_secret_value_reaches_the_handler_byte_for_byte(data: dict[str, bytes]) -> None:
    sources: dict[Source, dict[str, Any]] = {("Secret", "ns", "s"): {"data": {k: b64(v) for k, v in data.items()}}}
    found = [parse_property({"name": f"P_{k}", **secret_ref("s", k, namespace="ns")}, "p") for k in data]
    assert properties.resolve(found, sources) == {f"P_{k}": v for k, v in data.items()}


@given(st.dictionaries(keys, st.text(max_size=40), max_size=6), st.sets(keys, max_size=4))
def test_optional_properties_are_sent_exactly_when_their_key_exists(data: dict[str, str], asked: set[str]) -> None:
    sources: dict[Source, dict[str, Any]] = {("ConfigMap", "ns", "c"): {"data": data}}
    found = [
        parse_property({"name": k, **config_map_ref("c", k, namespace="ns", optional=True)}, "p")
        for k in sorted(asked | set(data))
    ]
    assert properties.resolve(found, sources) == {k: v.encode() for k, v in data.items()}
