"""Request bodies: a size cap, decoding off the event loop, and JSON or YAML into a plain JSON tree.

`BodyGuard` is an ASGI middleware in front of every route (resource API and /v2). For a method that carries a body
(POST, PUT, PATCH, DELETE) it reads the whole body first, refusing it with 413 as soon as its declared or streamed
size passes the cap, then decodes it in a worker thread (at most `DECODE_THREADS` at once), so a body that takes long
to decode never holds the event loop: /healthz and every other request keep being answered meanwhile. A body that does
not decode is answered at once with a `Status` (through the `refuse` function the app gives, which knows the
dialect), so no route ever parses it: neither the resource routes nor FastAPI's own JSON parsing of the /v2 routes.
A body that decodes is handed to the route as it was read, and `body_value` / `decode_body` (the routes' calls)
return the tree decoded in the thread instead of decoding again. Small JSON bodies (`INLINE_JSON_BYTES`) are decoded
in place: that costs less than the hop to a thread and is bounded (well under a millisecond, nesting capped).
Form bodies (`multipart/form-data`, EMCO's uploads on /v2, and url-encoded forms) are not decoded here: the route that
takes them reads the form, and `body_value` refuses them anywhere else without parsing them.

Decoding accepts JSON and YAML (Kubernetes accepts both) and always yields what JSON could have carried
(`devplace.api._manifests.json_tree`, the one boundary shared with the CLI and the simulation: YAML timestamps become
strings, non-string keys become strings, and anything else, binary, sets, NaN, infinities, is refused naming the field
path, because it could not be stored or sent back). The hostile-input rules of `devplace.api._manifests` hold for both:
maps and lists nest at most `MAX_DEPTH` levels, YAML aliases may add at most `MAX_ALIAS_EXPANSION`, and a key given
twice in one map is refused, naming the key and the map's path (JSON readers keep the last one silently). Every write
body then passes `devplace.api._manifests.validated`.

Problems found before any devplace rule runs are `errors.Malformed` (undecodable, duplicate keys, too deep, too many
aliases, empty) and `errors.TooLarge`. The resource API answers Malformed with 400 `BadRequest`, as Kubernetes does;
the /v2 fleet API answers it with 422, as EMCO does for a body that does not parse (the table in
`devplace.server._statuses`), with the same reason, `BadRequest`, naming what went wrong: the code follows each API's
dialect, the reason says what kind of failure it was, in both. FastAPI's own "not JSON" on /v2 (a body without a
content type that only parses as YAML) maps to the same Malformed in `server.app`.

Media types (Kubernetes' input negotiation, on the resource API and /store; the /v2 fleet API keeps EMCO's own
rules): a POST or PUT body, and a DELETE's DeleteOptions when it has one, is `application/json` or `application/yaml`
(parameters such as `charset` and the case of the type do not matter); any other type is 415 `UnsupportedMediaType`
with Kubernetes' message, before the body is read. A body without a Content-Type is JSON, as kube-apiserver reads it
(the first type it serves), so YAML must say so. A PATCH body is decoded only in one of the four patch types; in any
other the route refuses it with 415 naming the types its kind takes (`server.patches`), without decoding it.
Protobuf: kubectl 1.32 and later post some built-in kinds as `application/vnd.kubernetes.protobuf` whatever the server
(`kubectl create configmap|namespace|secret|serviceaccount`, `kubectl auth can-i`). devplace has no protobuf codec
for objects; `server.protobufs` reads those few kinds field by field into the JSON a route expects, and refuses any
other kind, or a field it does not read that carries a value, with 415 saying to send JSON or YAML. The self reviews
pass undecoded to their route, which reads their few fields (`server.reviews`).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import yaml
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from devplace import errors
from devplace.api import MAX_DEPTH, json_tree, yaml_documents, yaml_where
from devplace.kubeapi import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH
from devplace.server._authz import REVIEW_PATHS
from devplace.server._protobufs import MEDIA_TYPE as PROTOBUF
from devplace.server._protobufs import decode_object

DECODE_THREADS = 4
"""Bodies decoded at once in worker threads; more wait their turn (the decode of one large YAML body takes seconds)."""

INLINE_JSON_BYTES = 8 * 1024
"""JSON bodies up to this size are decoded on the event loop (cheaper than a thread hop, bounded in time)."""

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
WRITE_MEDIA_TYPES = ("application/json", "application/yaml")
"""What a POST, PUT or DELETE body of the resource API may be; the first is what a body without a type is."""
_PATCH_MEDIA_TYPES = frozenset({JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH})
_NEGOTIATED = ("/api/", "/apis/", "/store/")  # Kubernetes' input negotiation (module docstring); not /v2
_FORMS = ("multipart/form-data", "application/x-www-form-urlencoded")
_A_FORM = object()  # what `BodyGuard` records for a form body it left to the route

Refuse = Callable[[errors.DevplaceError, Scope], ASGIApp]
"""Given an error and the request's scope, the ASGI response that answers it (the app knows the dialect)."""


@dataclass(frozen=True)
class _Decoded:
    raw: bytes
    content_type: str | None
    value: Any


_DECODED: ContextVar[_Decoded | None] = ContextVar("devplace_decoded_body", default=None)


def _too_large(limit: int) -> errors.TooLarge:
    return errors.TooLarge(f"the request body is larger than the server's limit of {limit} bytes")


class BodyGuard:
    """ASGI middleware: cap request bodies at `limit` bytes and decode them off the event loop (module docstring)."""

    def __init__(self, app: ASGIApp, limit: int, refuse: Refuse) -> None:
        self.app = app
        self.limit = limit
        self.refuse = refuse
        self._limiter: anyio.CapacityLimiter | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await self.refuse(_too_large(self.limit), scope)(scope, receive, send)
            return
        if scope["method"] not in _BODY_METHODS:
            await self.app(scope, _limited(receive, self.limit), send)
            return
        content_type = _header(scope, b"content-type")
        negotiated = str(scope.get("path", "")).startswith(_NEGOTIATED)
        protobuf = _protobuf_review(scope, content_type)
        readable = _writable(content_type) or _media(content_type) == PROTOBUF
        if negotiated and scope["method"] in ("POST", "PUT") and not readable:
            await self.refuse(unsupported_media_type(), scope)(scope, receive, send)
            return
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away before sending its body
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.limit:
                await self.refuse(_too_large(self.limit), scope)(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        raw = b"".join(chunks)
        token = None
        read_as = content_type
        if negotiated:
            read_as = content_type or WRITE_MEDIA_TYPES[0]
            if scope["method"] == "DELETE" and raw.strip() and not _writable(content_type):
                await self.refuse(unsupported_media_type(), scope)(scope, receive, send)
                return
        if negotiated and scope["method"] == "PATCH" and _media(content_type) not in _PATCH_MEDIA_TYPES:
            pass  # no patch type: the route refuses it (415, with the types the kind takes) without decoding it
        elif protobuf:
            pass  # a review kubectl sent as protobuf: its route reads the few fields it has (`server.reviews`)
        elif _media(content_type) in _FORMS:
            token = _DECODED.set(_Decoded(raw, content_type, _A_FORM))
        elif raw.strip():
            try:
                value = await self._decode(raw, read_as)
            except errors.DevplaceError as e:
                await self.refuse(e, scope)(scope, receive, send)
                return
            token = _DECODED.set(_Decoded(raw, content_type, value))
        try:
            await self.app(scope, _replay(raw, receive), send)
        finally:
            if token is not None:
                _DECODED.reset(token)

    async def _decode(self, raw: bytes, content_type: str | None) -> Any:
        if _media(content_type) == PROTOBUF:  # small, and read field by field: no thread needed
            return decode_object(raw)
        if len(raw) <= INLINE_JSON_BYTES and _is_json(raw, content_type):
            with contextlib.suppress(_NotJson):  # it may still be YAML: that is decoded in a thread
                return decode_value(raw, content_type, yaml_too=False)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(DECODE_THREADS)
        return await anyio.to_thread.run_sync(decode_value, raw, content_type, limiter=self._limiter)


def _limited(receive: Receive, limit: int) -> Receive:
    """`receive` that refuses a streamed body once it passes `limit` (methods whose body no route reads)."""
    seen = 0

    async def limited_receive() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _too_large(limit)
        return message

    return limited_receive


def _replay(raw: bytes, receive: Receive) -> Receive:
    """`receive` that hands the app the body already read, then passes on what the server sends (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return replay


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _content_length(scope: Scope) -> int | None:
    raw = _header(scope, b"content-length")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def _media(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _protobuf_review(scope: Scope, content_type: str | None) -> bool:
    """Whether the request is a review posted as protobuf (module docstring), which its route reads itself."""
    path = str(scope.get("path", "")).rstrip("/")
    return scope["method"] == "POST" and path in REVIEW_PATHS and _media(content_type) == PROTOBUF


def _writable(content_type: str | None) -> bool:
    """Whether a resource API write body in `content_type` is read (None: JSON, as kube-apiserver reads it)."""
    return not (content_type or "").strip() or _media(content_type) in WRITE_MEDIA_TYPES


def unsupported_media_type() -> errors.UnsupportedMediaType:
    """Kubernetes' 415 for a write body in a media type it does not read."""
    return errors.UnsupportedMediaType(
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(WRITE_MEDIA_TYPES)
    )


def _is_json(raw: bytes, content_type: str | None) -> bool:
    media = _media(content_type)
    if "yaml" in media:
        return False
    return media.endswith("json") or raw.lstrip()[:1] in (b"{", b"[")


def decode_body(raw: bytes, content_type: str | None) -> dict[str, Any]:
    """One JSON or YAML object from a request body (`body_value`); anything else is `errors.Malformed`."""
    value = body_value(raw, content_type)
    if not isinstance(value, dict):
        raise errors.Malformed(f"the request body must be a JSON or YAML object, not {_type_name(value)}")
    return value


def body_value(raw: bytes, content_type: str | None, *, what: str = "the request body") -> Any:
    """The JSON value of a request body: the tree `BodyGuard` decoded off the event loop for this request, or, for
    bytes it did not see (a form's part, a direct call), `decode_value` now. Routes call this or `decode_body`, never
    a parser of their own. `what` names the bytes in messages."""
    pending = _DECODED.get()
    if pending is not None and pending.content_type == content_type and pending.raw == raw:
        if pending.value is _A_FORM:
            raise errors.Malformed(f"{what} is a form ({_media(content_type)}), not JSON or YAML")
        _DECODED.set(None)  # one route, one body: a second call decodes afresh rather than share the tree
        return pending.value
    return decode_value(raw, content_type, what=what)


def decode_value(raw: bytes, content_type: str | None, *, yaml_too: bool = True, what: str = "the request body") -> Any:
    """Any JSON value from a request body (an object, or e.g. a JSON Patch's list), under the module's rules.

    `yaml_too=False` raises `_NotJson` instead of trying YAML on a body that is not JSON and not said to be; `what`
    names the bytes in messages.
    """
    if not raw.strip():
        raise errors.Malformed(f"{what} is empty; expected a JSON or YAML object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise errors.Malformed(f"{what} is not UTF-8 text (byte {e.start})") from e
    media = _media(content_type)
    value: Any
    if "yaml" in media:
        value = _load_yaml(text, what)
    else:
        try:
            value, plain = _load_json(text)
        except _NotJson as e:
            if media.endswith("json"):
                raise errors.Malformed(f"{what} is not valid JSON: {e}") from e
            if not yaml_too:
                raise
            value = _load_yaml(text, what, also_not_json=True)
        else:
            if plain:
                return value
    return json_tree(value)


class _NotJson(ValueError):
    pass


class _Duplicated(dict[str, Any]):
    """A JSON object that named `key` twice (the decoder keeps reading; the path is found afterwards)."""

    def __init__(self, pairs: list[tuple[str, Any]], key: str) -> None:
        super().__init__(pairs)
        self.key = key


def _load_json(text: str) -> tuple[Any, bool]:
    """The value of a JSON text, and whether it is already what `json_tree` would make of it, so the walk over it
    can be skipped: no `\\u` escape (only one can name a lone surrogate: UTF-8 text cannot hold one), fewer brackets
    than `MAX_DEPTH` (so nothing nests deeper) and no number too big for a float (read as an infinity). JSON's own
    types are all it can hold, its keys are strings, and duplicate keys and NaN are refused here."""
    duplicated = False
    infinite = False

    def float_from(text: str) -> float:
        nonlocal infinite
        number = float(text)
        if number in (_INF, -_INF):
            infinite = True  # the walk names where
        return number

    def object_from(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal duplicated
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        duplicated = True
        names: set[str] = set()
        for key, _ in pairs:
            if key in names:
                return _Duplicated(pairs, key)
            names.add(key)
        raise AssertionError("dict() dropped a key that is not repeated")

    try:
        value = json.loads(text, object_pairs_hook=object_from, parse_constant=_refuse_constant, parse_float=float_from)
    except RecursionError as e:  # the C decoder's own guard, near 1000 levels: find where MAX_DEPTH was passed
        raise errors.Malformed.field(_deep_json_path(text), f"nested deeper than {MAX_DEPTH} levels") from e
    except ValueError as e:
        raise _NotJson(str(e)) from e
    if duplicated:
        path, key = _first_duplicate(value)
        raise errors.Malformed.field(path, f"duplicate key {key!r}")
    plain = not infinite and "\\u" not in text and text.count("{") + text.count("[") <= MAX_DEPTH
    return value, plain


_INF = float("inf")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _first_duplicate(value: Any) -> tuple[str, str]:
    """The path and key of the first object (in document order) that named a key twice; iterative (any depth)."""
    todo: list[tuple[str, Any]] = [("", value)]
    while todo:
        path, item = todo.pop()
        if isinstance(item, _Duplicated):
            return path, item.key
        if isinstance(item, dict):
            todo.extend((f"{path}.{k}" if path else k, v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            todo.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    raise AssertionError("a duplicate was recorded but not found")


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]')


def _deep_json_path(text: str) -> str:
    """Where a JSON text first nests deeper than `MAX_DEPTH` (a scan of its tokens; only after the decoder gave up)."""
    stack: list[list[Any]] = []  # per open object or array: [is_object, current key or index]
    last = ""
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token[0] == '"':
            last = token
        elif token in "[{":
            if len(stack) >= MAX_DEPTH:
                break
            stack.append([token == "{", "?" if token == "{" else 0])
        elif token in "]}":
            if stack:
                stack.pop()
        elif token == ":" and stack and stack[-1][0]:
            try:
                stack[-1][1] = json.loads(last)
            except ValueError:
                stack[-1][1] = last
        elif token == "," and stack and not stack[-1][0]:
            stack[-1][1] += 1
    out = ""
    for is_object, at in stack:
        out += (f".{at}" if out else str(at)) if is_object else f"[{at}]"
    return out


def _load_yaml(text: str, what: str, *, also_not_json: bool = False) -> Any:
    language = "JSON or YAML" if also_not_json else "YAML"
    try:
        with contextlib.closing(yaml_documents(text)) as documents:
            value = next(documents, None)
            extra = next(documents, _NONE)
    except yaml.YAMLError as e:
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise errors.Malformed(f"{what} is not valid {language}{yaml_where(e)}: {problem}") from e
    if extra is not _NONE:
        raise errors.Malformed(f"{what} is not valid {language}: it holds more than one document")
    return value


_NONE = object()


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"
