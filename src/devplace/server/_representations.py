"""What a read answers with: the objects as stored, or a `meta.k8s.io` `Table` of them, chosen by `Accept`.

kubectl asks `GET` (list, item and watch) for `application/json;as=Table;v=v1;g=meta.k8s.io` first (then v1beta1,
then plain JSON) and prints the server's columns. The first media range the server can serve wins, in the client's
order of preference (`q` values, then order): a Table (`meta.k8s.io/v1` or `v1beta1`), or the object (JSON for
`application/json`, `application/*`, `*/*` or no Accept at all; `application/x-ndjson`, which watches may ask for,
reads as JSON too). Media types devplace does not serve (protobuf,
YAML, `as=PartialObjectMetadata`) are passed over; when nothing acceptable remains the answer is 406 `NotAcceptable`,
as Kubernetes answers.

A Table has the columns of `devplace.kubeapi._tables` (those `devplace get` prints; `-o wide` ones at priority 1) and a
row per object carrying, per `includeObject`, nothing (`None`), the object's `PartialObjectMetadata` (`Metadata`, the
default) or the object (`Object`). A watch that asked for a Table gets one Table per event, with one row; only the
first carries the column definitions (Kubernetes saves the bytes the same way, and kubectl keeps the ones it has).

A list is written as it is sent (`Representation.list_chunks`): the list's head, then each object as the store keeps
its JSON (a Table: each object decoded for its row, one at a time), then the end, joined into slices of at least
`SLICE_BYTES` (one object, when larger), and the event loop runs its other tasks between two slices (`paced`). So a
page of big objects never holds the loop for longer than a slice takes: no decoding and encoding of the whole page,
which for 84 MB of objects held it for a third of a second (the C JSON encoder holds the interpreter lock throughout,
so a thread would not have helped). A watch start sends its ADDED events the same way (`server.watches`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi.responses import JSONResponse

from devplace import errors
from devplace.kubeapi import IncludeObject
from devplace.kubeapi import table as table_of
from devplace.store import EncodedObject


class ObjectResponse(JSONResponse):
    """A JSON answer encoded by orjson (several times the stdlib encoder's speed on an object of a few KiB, and a
    write's answer is on every writer's path); what orjson refuses is left to the stdlib encoder, as before."""

    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content)
        except orjson.JSONEncodeError:
            return super().render(content)


_TABLE_VERSIONS = ("v1", "v1beta1")
_INCLUDE: tuple[IncludeObject, ...] = ("None", "Metadata", "Object")

SLICE_BYTES = 64 * 1024
"""Bytes of a response written before the event loop runs its other tasks (module docstring)."""


async def paced(pieces: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
    """`pieces` joined into chunks of at least `SLICE_BYTES` (the last may be smaller), each followed by a turn of
    the event loop for its other tasks before the next piece is made. Closing it closes `pieces`."""
    buffer: list[bytes] = []
    size = 0
    async with contextlib.aclosing(pieces):
        async for piece in pieces:
            buffer.append(piece)
            size += len(piece)
            if size >= SLICE_BYTES:
                yield buffer[0] if len(buffer) == 1 else b"".join(buffer)
                buffer, size = [], 0
                await asyncio.sleep(0)  # the loop's other tasks run here, between two slices
    if buffer:
        yield b"".join(buffer)


def _opened(head: Mapping[str, Any], array: str) -> bytes:
    """The JSON of `head` up to the opening of its last member, the array `array`: `{...,"array":[`."""
    return orjson.dumps(head)[:-1] + (b',"' if head else b'"') + array.encode() + b'":['


@dataclass(frozen=True)
class Representation:
    """`table` is the Table's apiVersion (`meta.k8s.io/v1`), or None for the objects as stored."""

    table: str | None = None
    include_object: IncludeObject = "Metadata"

    def list_body(
        self, kind: str, api_version: str, items: Sequence[dict[str, Any]], metadata: Mapping[str, Any], now: float
    ) -> dict[str, Any]:
        if self.table is not None:
            return table_of(
                kind, items, now=now, include_object=self.include_object, api_version=self.table, metadata=metadata
            )
        return {"kind": f"{kind}List", "apiVersion": api_version, "metadata": dict(metadata), "items": list(items)}

    def list_chunks(
        self, kind: str, api_version: str, items: Sequence[EncodedObject], metadata: Mapping[str, Any], now: float
    ) -> AsyncGenerator[bytes, None]:
        """The body `list_body` describes, written a slice at a time from the objects' JSON (module docstring)."""
        return paced(self._list_pieces(kind, api_version, items, metadata, now))

    async def _list_pieces(
        self, kind: str, api_version: str, items: Sequence[EncodedObject], metadata: Mapping[str, Any], now: float
    ) -> AsyncGenerator[bytes, None]:
        if self.table is None:
            head = {"kind": f"{kind}List", "apiVersion": api_version, "metadata": dict(metadata)}
            yield _opened(head, "items")
            bodies: Iterator[bytes] = (item.body for item in items)
        else:
            table = self.list_body(kind, api_version, [], metadata, now)
            del table["rows"]
            yield _opened(table, "rows")
            bodies = (orjson.dumps(self._row(kind, orjson.loads(item.body), now)) for item in items)
        for index, body in enumerate(bodies):
            if index:
                yield b","
            yield body
        yield b"]}"

    def _row(self, kind: str, obj: dict[str, Any], now: float) -> dict[str, Any]:
        assert self.table is not None
        table = table_of(
            kind, [obj], now=now, include_object=self.include_object, api_version=self.table, definitions=False
        )
        row: dict[str, Any] = table["rows"][0]
        return row

    def item_body(self, kind: str, obj: dict[str, Any], now: float, *, definitions: bool = True) -> dict[str, Any]:
        if self.table is None:
            return obj
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        return table_of(
            kind,
            [obj],
            now=now,
            include_object=self.include_object,
            api_version=self.table,
            metadata={"resourceVersion": rv} if rv else {},
            definitions=definitions,
        )


def _ranges(accept: str) -> list[tuple[str, dict[str, str]]]:
    """Media ranges by preference: `q` descending, then the client's order; `q=0` ranges dropped."""
    ranked: list[tuple[float, int, str, dict[str, str]]] = []
    for index, clause in enumerate(accept.split(",")):
        media, *raw_params = (part.strip() for part in clause.split(";"))
        params: dict[str, str] = {}
        for raw in raw_params:
            key, _, value = raw.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 1.0
        if media and q > 0:
            ranked.append((-q, index, media.lower(), params))
    return [(media, params) for _, _, media, params in sorted(ranked, key=lambda r: (r[0], r[1]))]


def negotiate(accept: str | None, include_object: str | None = None) -> Representation | None:
    """The representation to answer with, or None when the client accepts nothing devplace serves (406).

    `includeObject` other than None, Metadata or Object is refused (400 naming it)."""
    include: IncludeObject = "Metadata"
    if include_object:
        if include_object not in _INCLUDE:
            raise errors.Malformed.field(
                "includeObject", f"unsupported value {include_object[:40]!r} (one of None, Metadata, Object)"
            )
        include = include_object
    if not accept or not accept.strip():
        return Representation(None, include)
    for media, params in _ranges(accept):
        wanted = params.get("as")
        if media in ("application/json", "application/*", "*/*", "application/x-ndjson"):
            if wanted is None:
                return Representation(None, include)
            if wanted == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") in _TABLE_VERSIONS:
                return Representation(f"meta.k8s.io/{params['v']}", include)
    return None
