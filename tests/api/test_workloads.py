"""Core kinds holding bytes: a Secret's `data` and a ConfigMap's `binaryData` must be base64, named by field."""

from __future__ import annotations

from typing import Any

import pytest

from devplace import errors
from devplace.api import Secret, lookup, normalize
from devplace.api._workloads import decode_base64


def secret(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "onvif-auth"}, **fields}


def test_a_secret_is_a_namespaced_core_kind() -> None:
    info = lookup("secrets")
    assert (info.kind, info.plural, info.namespaced, info.group_versions) == ("Secret", "secrets", True, ("v1",))
    assert info.model is Secret


def test_a_secret_round_trips_with_namespace_and_type_defaulted_and_unknown_fields_kept() -> None:
    wire = normalize(secret(data={"username": "YWRtaW4="}, stringData={"password": "s3cret"}, immutable=True))
    assert wire == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "onvif-auth", "namespace": "default"},
        "data": {"username": "YWRtaW4="},
        "stringData": {"password": "s3cret"},
        "type": "Opaque",
        "immutable": True,
    }


def test_a_secret_keeps_its_type() -> None:
    assert normalize(secret(type="kubernetes.io/basic-auth"))["type"] == "kubernetes.io/basic-auth"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("YWRtaW4", "Incorrect padding"),
        ("not base64!", "Only base64 data is allowed"),
        ("YWRt aW4=", "Only base64 data is allowed"),
        ("é", "non-ASCII character"),
    ],
)
def test_secret_data_that_is_not_base64_is_invalid_naming_the_key(value: str, reason: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        normalize(secret(data={"ok": "YQ==", "username": value}))
    message = f"data.username: must be base64 (standard alphabet, padded): {reason}"
    assert info.value.message == message
    assert [str(f) for f in info.value.fields] == [message]


def test_secret_string_data_is_plain_text_and_not_decoded() -> None:
    assert normalize(secret(stringData={"password": "not base64!"}))["stringData"] == {"password": "not base64!"}


def test_config_map_binary_data_must_be_base64_and_data_need_not_be() -> None:
    good = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"t": "not base64!"}}
    assert normalize({**good, "binaryData": {"blob": "AQI="}})["binaryData"] == {"blob": "AQI="}
    assert "binaryData" not in normalize(good)
    with pytest.raises(errors.Invalid) as info:
        normalize({**good, "binaryData": {"blob": "AQI"}})
    assert info.value.message == "binaryData.blob: must be base64 (standard alphabet, padded): Incorrect padding"


@pytest.mark.parametrize(
    ("text", "data"), [("", b""), ("AA==", b"\x00"), ("YWRtaW4=", b"admin"), ("/+8=", b"\xff\xef")]
)
def test_decode_base64_reads_the_standard_padded_alphabet(text: str, data: bytes) -> None:
    assert decode_base64(text) == data
