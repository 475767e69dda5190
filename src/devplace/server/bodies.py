"""Request bodies: a size cap for every request, and JSON or YAML decoding into a plain JSON tree.

The cap is an ASGI middleware so it covers every route (resource API and /v2) before anything is parsed: a request
whose Content-Length exceeds it is refused on its first read, and a chunked body is counted as it streams in and
refused the moment it passes the cap. Either way the route raises before touching the store, so nothing is stored.

Decoding accepts JSON and YAML (Kubernetes accepts both) and always yields what JSON could have carried
(`devplace.api.manifests.json_tree`, the one boundary shared with the CLI and the simulation: YAML timestamps become
strings, non-string keys become strings, and anything else, binary, sets, NaN, infinities, is refused naming the field
path, because it could not be stored or sent back). Every write body then passes `devplace.api.manifests.validated`.

Problems found before any devplace rule runs are `errors.Malformed` (undecodable or empty: 400, as Kubernetes
answers) and `errors.TooLarge` (413).
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from devplace import errors
from devplace.api.manifests import json_tree

__all__ = ["BodyLimit", "decode_body"]


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
