"""Swagger 2.0 documents as gnostic protobuf (`openapi.v2.Document`): the only form of `/openapi/v2` kubectl reads.

kubectl downloads the v2 document with `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf` and
unmarshals it as gnostic's `openapi_v2.Document` (github.com/google/gnostic-models, OpenAPIv2.proto); it has no JSON
fallback. Rather than vendoring that proto and generated code, this module writes the protobuf wire format itself for
the subset of Swagger 2.0 that `devplace.kubeapi._openapis` produces: info, paths (operations with body, query and path
parameters and responses), definitions (schemas with `$ref`, types, items, properties, additionalProperties,
required, enum, defaults, bounds and `x-` extensions). Field numbers are gnostic's. Values gnostic keeps as YAML
(`default`, `enum`, `x-` extensions) are written as JSON, which is YAML. As in any proto3 encoding, zero values
(empty strings, false, 0) are left out, so `minimum: 0` does not survive (kubectl does not use it).

Pure: a function of the document; `devplace.server._openapis` caches the bytes.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping
from typing import Any

_VARINT, _FIXED64, _BYTES = 0, 1, 2


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64: two's complement, ten bytes
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _message(number: int, payload: bytes) -> bytes:
    """A length-delimited field (embedded message, string, bytes); written even when empty (a set message)."""
    return _key(number, _BYTES) + _varint(len(payload)) + payload


def _string(number: int, value: Any) -> bytes:
    if value is None or value == "":
        return b""
    return _message(number, str(value).encode())


def _strings(number: int, values: Iterable[Any]) -> bytes:
    return b"".join(_message(number, str(v).encode()) for v in values)


def _bool(number: int, value: Any) -> bytes:
    return _key(number, _VARINT) + b"\x01" if value else b""


def _int(number: int, value: Any) -> bytes:
    if not isinstance(value, int) or isinstance(value, bool) or value == 0:
        return b""
    return _key(number, _VARINT) + _varint(value)


def _double(number: int, value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float) or value == 0:
        return b""
    return _key(number, _FIXED64) + struct.pack("<d", float(value))


def _any(value: Any) -> bytes:
    """gnostic's `Any` (`{yaml = 2}`): the value as YAML text."""
    return _string(2, json.dumps(value, separators=(",", ":"), ensure_ascii=False) or "null")


def _named_anys(number: int, node: Mapping[str, Any]) -> bytes:
    """`x-` keys of `node` as repeated `NamedAny{name = 1, value = 2}`."""
    return b"".join(
        _message(number, _string(1, key) + _message(2, _any(value)))
        for key, value in node.items()
        if key.startswith("x-")
    )


def _schema(node: Mapping[str, Any]) -> bytes:
    """`openapi.v2.Schema`."""
    out = [
        _string(1, node.get("$ref")),
        _string(2, node.get("format")),
        _string(3, node.get("title")),
        _string(4, node.get("description")),
        _message(5, _any(node["default"])) if "default" in node else b"",
        _double(6, node.get("multipleOf")),
        _double(7, node.get("maximum")),
        _bool(8, node.get("exclusiveMaximum")),
        _double(9, node.get("minimum")),
        _bool(10, node.get("exclusiveMinimum")),
        _int(11, node.get("maxLength")),
        _int(12, node.get("minLength")),
        _string(13, node.get("pattern")),
        _int(14, node.get("maxItems")),
        _int(15, node.get("minItems")),
        _bool(16, node.get("uniqueItems")),
        _int(17, node.get("maxProperties")),
        _int(18, node.get("minProperties")),
        _strings(19, node.get("required", [])),
        b"".join(_message(20, _any(v)) for v in node.get("enum", [])),
    ]
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        out.append(_message(21, _message(1, _schema(extra))))
    elif isinstance(extra, bool):
        out.append(_message(21, _key(2, _VARINT) + (b"\x01" if extra else b"\x00")))
    kind = node.get("type")
    if kind:
        out.append(_message(22, _strings(1, kind if isinstance(kind, list) else [kind])))
    if isinstance(node.get("items"), Mapping):
        out.append(_message(23, _message(1, _schema(node["items"]))))
    out.extend(_message(24, _schema(sub)) for sub in node.get("allOf", []))
    if "properties" in node:
        props = b"".join(_message(1, _string(1, k) + _message(2, _schema(v))) for k, v in node["properties"].items())
        out.append(_message(25, props))
    out.append(_bool(27, node.get("readOnly")))
    out.append(_named_anys(31, node))
    return b"".join(out)


def _parameter(param: Mapping[str, Any]) -> bytes:
    """`ParametersItem{parameter = 1: Parameter{body_parameter = 1 | non_body_parameter = 2}}`."""
    where = param["in"]
    if where == "body":
        body = (
            _string(1, param.get("description"))
            + _string(2, param["name"])
            + _string(3, where)
            + _bool(4, param.get("required"))
            + _message(5, _schema(param["schema"]))
            + _named_anys(6, param)
        )
        return _message(1, _message(1, body))
    if where == "query":  # QueryParameterSubSchema, NonBodyParameter field 3
        sub = (
            _bool(1, param.get("required"))
            + _string(2, where)
            + _string(3, param.get("description"))
            + _string(4, param["name"])
            + _string(6, param.get("type"))
            + _string(7, param.get("format"))
            + _bool(20, param.get("uniqueItems"))
            + _named_anys(23, param)
        )
        return _message(1, _message(2, _message(3, sub)))
    if where == "path":  # PathParameterSubSchema, NonBodyParameter field 4
        sub = (
            _bool(1, param.get("required"))
            + _string(2, where)
            + _string(3, param.get("description"))
            + _string(4, param["name"])
            + _string(5, param.get("type"))
            + _string(6, param.get("format"))
            + _bool(19, param.get("uniqueItems"))
            + _named_anys(22, param)
        )
        return _message(1, _message(2, _message(4, sub)))
    raise ValueError(f"parameters in {where!r} are not encoded")


def _responses(responses: Mapping[str, Any]) -> bytes:
    """`Responses{response_code = 1: NamedResponseValue{name, value: ResponseValue{response = 1: Response}}}`."""
    out = []
    for code, response in responses.items():
        body = _string(1, response.get("description"))
        if "schema" in response:
            body += _message(2, _message(1, _schema(response["schema"])))  # SchemaItem{schema = 1}
        out.append(_message(1, _string(1, code) + _message(2, _message(1, body))))
    return b"".join(out)


def _operation(op: Mapping[str, Any]) -> bytes:
    return b"".join(
        [
            _strings(1, op.get("tags", [])),
            _string(2, op.get("summary")),
            _string(3, op.get("description")),
            _string(5, op.get("operationId")),
            _strings(6, op.get("produces", [])),
            _strings(7, op.get("consumes", [])),
            b"".join(_message(8, _parameter(p)) for p in op.get("parameters", [])),
            _message(9, _responses(op.get("responses", {}))),
            _strings(10, op.get("schemes", [])),
            _named_anys(13, op),
        ]
    )


_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def _path_item(item: Mapping[str, Any]) -> bytes:
    out = [_message(number, _operation(item[method])) for method, number in _METHODS.items() if method in item]
    out.extend(_message(9, _parameter(p)) for p in item.get("parameters", []))
    out.append(_named_anys(10, item))
    return b"".join(out)


def encode_document(document: Mapping[str, Any]) -> bytes:
    """`openapi.v2.Document` of a Swagger 2.0 document (the subset described in the module docstring)."""
    info = document.get("info", {})
    paths = b"".join(
        _message(2, _string(1, path) + _message(2, _path_item(item)))
        for path, item in document.get("paths", {}).items()
    )
    definitions = b"".join(
        _message(1, _string(1, name) + _message(2, _schema(node)))
        for name, node in document.get("definitions", {}).items()
    )
    return b"".join(
        [
            _string(1, document.get("swagger", "2.0")),
            _message(2, _string(1, info.get("title")) + _string(2, info.get("version"))),
            _message(8, paths),
            _message(9, definitions),
            _named_anys(16, document),
        ]
    )
