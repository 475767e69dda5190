"""Kubernetes' protobuf envelope, read just far enough for the request bodies kubectl sends as protobuf.

kubectl 1.32 and later send some built-in kinds' bodies as `application/vnd.kubernetes.protobuf` (a
SelfSubjectAccessReview for `kubectl auth can-i`), whatever the server's discovery says. devplace has no protobuf
codec for objects; it reads these few messages field by field:

- the envelope: the 4 bytes `k8s\\x00`, then a `runtime.Unknown` message: field 1 `TypeMeta` (1: apiVersion, 2: kind),
  field 2 the object's own message (`raw`), 3 contentEncoding, 4 contentType (`envelope`);
- a message is protobuf's wire format: tag varints (field number << 3 | wire type) followed by a varint (type 0), 8
  bytes (type 1), a length-prefixed value (type 2: strings, bytes, nested messages) or 4 bytes (type 5)
  (`message_fields`: field number -> its values, in order).

Bounds: a body is at most the server's body limit; every length is checked against what is left, varints are at
most 10 bytes, and nothing recurses except what a caller asks for, field by field. Anything that does not parse is
`errors.Malformed` (400), naming what broke.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass

from devplace import errors

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

Value = int | bytes
Fields = Mapping[int, list[Value]]


@dataclass(frozen=True)
class Envelope:
    """A protobuf body: the object's apiVersion and kind, and its message."""

    api_version: str
    kind: str
    raw: bytes


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 70, 7):
        if at >= len(data):
            raise errors.Malformed("the protobuf body ends inside a number")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
    raise errors.Malformed("the protobuf body has a number longer than 10 bytes")


def message_fields(data: bytes) -> dict[int, list[Value]]:
    """The fields of one protobuf message: number -> values (ints, or the bytes of length-prefixed values)."""
    out: dict[int, list[Value]] = {}
    at = 0
    while at < len(data):
        tag, at = _varint(data, at)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise errors.Malformed("the protobuf body has a field numbered 0")
        value: Value
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            if size > len(data) - at:
                raise errors.Malformed(f"the protobuf body's field {number} runs past its end")
            value, at = data[at : at + size], at + size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if width > len(data) - at:
                raise errors.Malformed(f"the protobuf body's field {number} runs past its end")
            value, at = int.from_bytes(data[at : at + width], "little"), at + width
        else:
            raise errors.Malformed(f"the protobuf body's field {number} has wire type {wire}, which is not read")
        out.setdefault(number, []).append(value)
    return out


def text(fields: Fields, number: int) -> str:
    """A string field (the last value, as protobuf reads a repeated scalar); "" when absent."""
    values = fields.get(number) or []
    if not values:
        return ""
    value = values[-1]
    if not isinstance(value, bytes):
        raise errors.Malformed(f"the protobuf body's field {number} is a number where a string belongs")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as e:
        raise errors.Malformed(f"the protobuf body's field {number} is not UTF-8 text") from e


def message(fields: Fields, number: int) -> dict[int, list[Value]] | None:
    """A nested message field, parsed; None when absent."""
    values = fields.get(number) or []
    if not values:
        return None
    value = values[-1]
    if not isinstance(value, bytes):
        raise errors.Malformed(f"the protobuf body's field {number} is a number where a message belongs")
    return message_fields(value)


def envelope(body: bytes) -> Envelope:
    """The object a protobuf body carries (module docstring)."""
    if not body.startswith(MAGIC):
        raise errors.Malformed("the protobuf body does not start with Kubernetes' k8s\\x00 prefix")
    unknown = message_fields(body[len(MAGIC) :])
    type_meta = message(unknown, 1) or {}
    raw = (unknown.get(2) or [b""])[-1]
    if not isinstance(raw, bytes):
        raise errors.Malformed("the protobuf body's object is a number")
    return Envelope(text(type_meta, 1), text(type_meta, 2), raw)


# -- the built-in objects `kubectl create` sends as protobuf --------------------------------------------------------

_META_STRINGS = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}
_META_MAPS = {11: "labels", 12: "annotations"}
_META_IGNORED = frozenset({4, 7, 8, 9, 10})
"""selfLink, generation, creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds: the server's to set."""

_AS_JSON = "send it as JSON or YAML (kubectl create --dry-run=client -o yaml ... | kubectl apply -f -)"

READABLE_KINDS = ("ConfigMap", "Namespace", "Secret", "ServiceAccount")
"""The kinds whose protobuf form is read (`decode_object`): those `kubectl create configmap|namespace|secret|
serviceaccount` send; any other protobuf body is 415, naming them."""


def _map(fields: Fields, number: int, *, binary: bool = False) -> dict[str, str]:
    """A `map<string, string>` (or `map<string, bytes>`, base64 as JSON carries bytes) field."""
    out: dict[str, str] = {}
    for entry in fields.get(number) or []:
        if not isinstance(entry, bytes):
            raise errors.Malformed(f"the protobuf body's map field {number} holds a number")
        pair = message_fields(entry)
        raw = (pair.get(2) or [b""])[-1]
        if not isinstance(raw, bytes):
            raise errors.Malformed(f"the protobuf body's map field {number} holds a number")
        out[text(pair, 1)] = base64.b64encode(raw).decode("ascii") if binary else text(pair, 2)
    return out


def _strings(fields: Fields, number: int) -> list[str]:
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in fields.get(number) or []]


def _unread(fields: Fields, known: frozenset[int], what: str) -> None:
    """Refuse a field this reader does not know that carries something (an empty one is Go's zero value)."""
    for number, values in fields.items():
        if number not in known and any(v not in (0, b"") for v in values):
            raise errors.UnsupportedMediaType(
                f"devplace does not read field {number} of a {what} sent as protobuf: {_AS_JSON}"
            )


def _metadata(fields: Fields) -> dict[str, object]:
    meta_fields = message(fields, 1) or {}
    _unread(meta_fields, frozenset({*_META_STRINGS, *_META_MAPS, *_META_IGNORED, 14}), "metadata")
    meta: dict[str, object] = {key: value for n, key in _META_STRINGS.items() if (value := text(meta_fields, n))}
    for number, key in _META_MAPS.items():
        if found := _map(meta_fields, number):
            meta[key] = found
    if finalizers := _strings(meta_fields, 14):
        meta["finalizers"] = finalizers
    return meta


def _flag(fields: Fields, number: int) -> bool | None:
    values = fields.get(number) or []
    return bool(values[-1]) if values else None


def decode_object(body: bytes) -> dict[str, object]:
    """The JSON form of a ConfigMap, Namespace, Secret or ServiceAccount sent as protobuf (`READABLE_KINDS`); any
    other kind, or a field this reader does not know that carries a value, is 415 `UnsupportedMediaType`."""
    sent = envelope(body)
    if sent.kind not in READABLE_KINDS:
        raise errors.UnsupportedMediaType(
            f"devplace reads protobuf bodies of {', '.join(READABLE_KINDS)} only, not of a "
            f"{sent.kind or 'nameless kind'}: {_AS_JSON}"
        )
    fields = message_fields(sent.raw)
    obj: dict[str, object] = {"apiVersion": sent.api_version, "kind": sent.kind, "metadata": _metadata(fields)}
    if sent.kind == "ConfigMap":
        _unread(fields, frozenset({1, 2, 3, 4}), sent.kind)
        obj.update(data=_map(fields, 2), binaryData=_map(fields, 3, binary=True), immutable=_flag(fields, 4))
    elif sent.kind == "Secret":
        _unread(fields, frozenset({1, 2, 3, 4, 5}), sent.kind)
        obj.update(data=_map(fields, 2, binary=True), type=text(fields, 3), stringData=_map(fields, 4))
        obj["immutable"] = _flag(fields, 5)
    elif sent.kind == "Namespace":
        _unread(fields, frozenset({1, 2, 3}), sent.kind)
        spec = message(fields, 2) or {}
        _unread(spec, frozenset({1}), "Namespace spec")
        finalizers = _strings(spec, 1)
        obj["spec"] = {"finalizers": finalizers} if finalizers else None
    else:  # ServiceAccount
        _unread(fields, frozenset({1, 3, 4}), sent.kind)
        pulls = [{"name": text(message_fields(v), 1)} for v in fields.get(3) or [] if isinstance(v, bytes)]
        obj.update(imagePullSecrets=pulls, automountServiceAccountToken=_flag(fields, 4))
    return {key: value for key, value in obj.items() if value not in (None, "", {}, [])} | {"metadata": obj["metadata"]}
