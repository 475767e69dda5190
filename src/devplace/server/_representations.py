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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devplace import errors
from devplace.kubeapi import IncludeObject
from devplace.kubeapi import table as table_of

_TABLE_VERSIONS = ("v1", "v1beta1")
_INCLUDE: tuple[IncludeObject, ...] = ("None", "Metadata", "Object")


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
