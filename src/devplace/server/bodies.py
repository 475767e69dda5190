"""Request bodies: a size cap for every request, and JSON or YAML decoding into a plain JSON tree.

The cap is an ASGI middleware so it covers every route (resource API and /v2) before anything is parsed: a request
whose Content-Length exceeds it is refused on its first read, and a chunked body is counted as it streams in and
refused the moment it passes the cap. Either way the route raises before touching the store, so nothing is stored.

Decoding accepts JSON and YAML (Kubernetes accepts both) and always yields what JSON could have carried: YAML
timestamps become strings, non-string keys become strings, and anything else (binary, sets, NaN, infinities) is
refused naming the field path, because it could not be stored or sent back.

`validated` is the one check every write body passes (here and in the CLI): `devplace.api.normalize` must accept
it, and then the object is kept as written, with only its namespace resolved (defaulted for namespaced kinds,
dropped for cluster-scoped ones). Storing the model's re-serialisation instead would add every default and drop
empty maps, so a store behind the server would not hand back what was put in (and Akri manifests would not
round-trip unchanged); readers apply defaults when they parse objects into models.

Problems found before any devplace rule runs are `errors.Malformed` (undecodable or empty: 400, as Kubernetes
answers) and `errors.TooLarge` (413).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from typing import Any

import yaml
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from devplace import errors
from devplace.api import registry

__all__ = ["BodyLimit", "decode_body", "json_tree", "validated"]


def _too_large(limit: int) -> errors.TooLarge:
    return errors.TooLarge(f"the request body is larger than the server's limit of {limit} bytes")


class BodyLimit:
    """ASGI middleware: refuse request bodies over `limit` bytes (declared or streamed) when the app reads them."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        limit = self.limit
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            if declared is not None and declared > limit:
                raise _too_large(limit)
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _too_large(limit)
            return message

        await self.app(scope, limited_receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def decode_body(raw: bytes, content_type: str | None) -> dict[str, Any]:
    """One JSON or YAML object from a request body; anything else is `errors.Malformed` naming the problem."""
    if not raw.strip():
        raise errors.Malformed("the request body is empty; expected a JSON or YAML object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise errors.Malformed(f"the request body is not UTF-8 text (byte {e.start})") from e
    media = (content_type or "").split(";", 1)[0].strip().lower()
    value: Any
    if "yaml" in media:
        value = _load_yaml(text)
    else:
        try:
            value = json.loads(text, parse_constant=_refuse_constant)
        except ValueError as e:
            if media.endswith("json"):
                raise errors.Malformed(f"the request body is not valid JSON: {e}") from e
            value = _load_yaml(text, also_not_json=True)
    if not isinstance(value, dict):
        raise errors.Malformed(f"the request body must be a JSON or YAML object, not {_type_name(value)}")
    tree = json_tree(value)
    assert isinstance(tree, dict)
    return tree


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _load_yaml(text: str, *, also_not_json: bool = False) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        what = "JSON or YAML" if also_not_json else "YAML"
        raise errors.Malformed(f"the request body is not valid {what}{where}: {problem}") from e


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def json_tree(value: Any, path: str = "") -> Any:
    """`value` as JSON could carry it (see module doc); refuses what JSON cannot hold with `Invalid` at its path."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise errors.Invalid.field(path, f"{value} is not a finite number")
        return value
    if isinstance(value, dt.date):  # YAML timestamps: JSON would have carried the text
        return value.isoformat()
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            skey = _key_text(key, path)
            if skey in out:
                raise errors.Invalid.field(path, f"duplicate key {skey!r} (keys are compared as JSON text)")
            out[skey] = json_tree(item, f"{path}.{skey}" if path else skey)
        return out
    if isinstance(value, list | tuple):
        return [json_tree(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise errors.Invalid.field(path, f"a {type(value).__name__} value cannot be stored (JSON types only)")


def _key_text(key: Any, path: str) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float | dt.date):
        return str(json_tree(key, path))
    raise errors.Invalid.field(path, f"a {type(key).__name__} cannot be a key (JSON keys are strings)")


def validated(obj: Any) -> dict[str, Any]:
    """`obj` as written once `registry.normalize` accepts it, with the namespace resolved (see the module doc)."""
    wire = registry.normalize(obj)
    assert isinstance(obj, dict)
    meta = dict(obj["metadata"])
    namespace = wire["metadata"].get("namespace")
    if namespace:
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    return {**obj, "metadata": meta}
