"""Kubernetes' protobuf envelope, read for the few bodies kubectl 1.32+ sends as protobuf: parsed exactly, and any
other bytes refused with a devplace error, never a crash."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.server._protobufs import decode_object, envelope, message_fields


def _field(number: int, value: bytes) -> bytes:
    return bytes([number << 3 | 2, len(value)]) + value


def _envelope(api_version: str, kind: str, message: bytes) -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return b"k8s\x00" + _field(1, type_meta) + _field(2, message)


def _metadata(name: str, namespace: str = "") -> bytes:
    return _field(1, name.encode()) + _field(3, namespace.encode()) + _field(8, b"") + bytes([7 << 3, 0])


def test_a_config_map_as_kubectl_sends_it_reads_as_its_json() -> None:
    entry = _field(1, b"a") + _field(2, b"b")
    raw = _field(1, b"k") + _field(2, b"\x00\xff")
    body = _envelope("v1", "ConfigMap", _field(1, _metadata("settings", "team")) + _field(2, entry) + _field(3, raw))
    assert decode_object(body) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "team"},
        "data": {"a": "b"},
        "binaryData": {"k": base64.b64encode(b"\x00\xff").decode()},
    }


def test_a_namespace_and_a_secret_read_as_their_json() -> None:
    namespace = _envelope("v1", "Namespace", _field(1, _metadata("team")) + _field(2, b""))
    assert decode_object(namespace) == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    secret = _envelope(
        "v1", "Secret", _field(1, _metadata("s")) + _field(2, _field(1, b"a") + _field(2, b"b")) + _field(3, b"Opaque")
    )
    assert decode_object(secret)["data"] == {"a": "Yg=="}


def test_another_kind_or_an_unread_field_with_a_value_is_415_saying_to_send_json() -> None:
    with pytest.raises(errors.UnsupportedMediaType) as caught:
        decode_object(_envelope("apps/v1", "Deployment", _field(1, _metadata("web"))))
    assert "not of a Deployment" in caught.value.message
    with pytest.raises(errors.UnsupportedMediaType) as caught:
        decode_object(_envelope("v1", "ConfigMap", _field(1, _metadata("c")) + _field(9, b"x")))
    assert "field 9 of a ConfigMap" in caught.value.message


def test_json_sent_as_protobuf_is_400_naming_the_missing_prefix() -> None:
    with pytest.raises(errors.Malformed) as caught:
        envelope(b'{"kind": "ConfigMap"}')
    assert "k8s\\x00" in caught.value.message


@given(st.binary(max_size=200))
def test_any_bytes_are_parsed_or_refused_with_a_devplace_error(data: bytes) -> None:
    for body in (data, b"k8s\x00" + data):
        try:
            decode_object(body)
        except (errors.Malformed, errors.UnsupportedMediaType, errors.Invalid):
            pass
    try:
        message_fields(data)
    except errors.Malformed:
        pass
