"""`/openapi/v2` and `/openapi/v3`: the resource API described the way kubectl reads it.

The documents are generated once per process by `devplace.kubeapi._openapis` (from the kind registry), on the first
request for them and in a worker thread (about 0.2 s, which the event loop and its open watches do not wait for);
this module only negotiates and caches, as the apiserver does:

- `/openapi/v2`: gnostic protobuf (`devplace.kubeapi._gnostics`) to a client that asks for
  `application/com.github.proto-openapi.spec.v2@v1.0+protobuf` (kubectl: validation, `explain
  --output=plaintext-openapiv2`), served as `...spec.v2.v1.0+protobuf` as the apiserver does (the `@` is no valid
  media type character); JSON to a client that asks for JSON or anything; 406 otherwise. An `ETag` per
  representation; `If-None-Match` with it is a 304.
- `/openapi/v3`: the index, every served group/version's document path with a content hash.
  `/openapi/v3/api/v1` and `/openapi/v3/apis/<group>/<version>`: one group/version's OpenAPI 3.0 document (kubectl:
  `explain`, and the `fieldValidation` check that makes it leave validation to the server). With the current
  `?hash=` the answer may be cached for good (`Cache-Control: public, immutable`); with a stale hash it is a 301 to
  the current URL; without one, `no-cache`. JSON only: a client that accepts only protobuf gets 406.

FastAPI's own `/openapi.json` (the REST documentation of every route, /v2 included) is a different document and
stays as it is; these routes are not listed in it, as `/openapi.json` is not.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from devplace.kubeapi import (
    document_bytes,
    encode_document,
    group_version_path,
    group_versions,
    swagger,
    v3_document,
    v3_hash,
    v3_index,
)
from devplace.server import _statuses as http_errors

PROTOBUF_V2 = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
"""The media type of the protobuf answer (Go's mime parser refuses the `@` of the older name clients still send)."""
_PROTOBUF_V2_ASKED = ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf", PROTOBUF_V2)
_IMMUTABLE = "public, immutable"
_NO_CACHE = "no-cache, private"


@functools.cache
def _v2_json() -> bytes:
    return document_bytes(swagger())


@functools.cache
def _v2_protobuf() -> bytes:
    return encode_document(swagger())


@functools.cache
def _v3_index_json() -> bytes:
    return document_bytes(v3_index())


@functools.cache
def _v3_json(api_version: str) -> bytes:
    return document_bytes(v3_document(api_version))


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha512(body).hexdigest().upper() + '"'


def _accepts(accept: str | None, media_type: str) -> bool:
    """Whether an Accept header takes `media_type` (exactly, by its type/* or */*; q=0 excludes)."""
    if not accept:
        return True
    major = media_type.split("/", 1)[0]
    for entry in accept.split(","):
        kind, *params = (part.strip() for part in entry.split(";"))
        if any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in params):
            continue
        if kind.lower() in (media_type, f"{major}/*", "*/*"):
            return True
    return False


def _not_acceptable(offered: str) -> JSONResponse:
    body = http_errors.protocol_status_body(
        406, "NotAcceptable", f"only the following media types are offered: {offered}"
    )
    return JSONResponse(body, status_code=406)


def _cached(request: Request, body: bytes, media_type: str, cache_control: str) -> Response:
    etag = _etag(body)
    headers = {"ETag": etag, "Cache-Control": cache_control, "Vary": "Accept"}
    if etag in (request.headers.get("if-none-match") or ""):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media_type, headers=headers)


async def openapi_v2(request: Request) -> Response:
    accept = request.headers.get("accept")
    if accept and any(media in accept.lower() for media in _PROTOBUF_V2_ASKED):
        return _cached(request, await asyncio.to_thread(_v2_protobuf), PROTOBUF_V2, _NO_CACHE)
    if _accepts(accept, "application/json"):
        return _cached(request, await asyncio.to_thread(_v2_json), "application/json", _NO_CACHE)
    return _not_acceptable(f"application/json, {PROTOBUF_V2}")


async def openapi_v3_index(request: Request) -> Response:
    if not _accepts(request.headers.get("accept"), "application/json"):
        return _not_acceptable("application/json")
    return _cached(request, await asyncio.to_thread(_v3_index_json), "application/json", _NO_CACHE)


async def openapi_v3(request: Request) -> Response:
    path = str(request.path_params["path"])
    api_version = _api_version(path)
    if api_version not in group_versions():
        return JSONResponse(
            http_errors.protocol_status_body(404, "NotFound", f"no OpenAPI document at /openapi/v3/{path}"),
            status_code=404,
        )
    if not _accepts(request.headers.get("accept"), "application/json"):
        return _not_acceptable("application/json")
    current = await asyncio.to_thread(v3_hash, api_version)
    asked = request.query_params.get("hash")
    if asked is not None and asked != current:
        location = f"/openapi/v3/{group_version_path(api_version)}?hash={current}"
        return Response(status_code=301, headers={"Location": location, "Cache-Control": _NO_CACHE})
    body = await asyncio.to_thread(_v3_json, api_version)
    return _cached(request, body, "application/json", _IMMUTABLE if asked else _NO_CACHE)


def _api_version(path: str) -> str:
    """`api/v1` -> `v1`, `apis/akri.sh/v0` -> `akri.sh/v0`, anything else -> "" (no such document)."""
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "api":
        return parts[1]
    if len(parts) == 3 and parts[0] == "apis":
        return f"{parts[1]}/{parts[2]}"
    return ""


def router() -> APIRouter:
    api = APIRouter()
    api.add_api_route("/openapi/v2", openapi_v2, methods=["GET"], include_in_schema=False)
    api.add_api_route("/openapi/v3", openapi_v3_index, methods=["GET"], include_in_schema=False)
    api.add_api_route("/openapi/v3/{path:path}", openapi_v3, methods=["GET"], include_in_schema=False)
    return api
