"""The Kubernetes-style resource API over a `Store`.

Paths (the kind's scope, from the registry, decides which exist; anything else is a 404 `Status`):

    /apis/{group}/{version}/[namespaces/{namespace}/]{plural}[/{name}]   group kinds (devplace.io, akri.sh, apps, batch)
    /api/v1/[namespaces/{namespace}/]{plural}[/{name}]                   core kinds (Node, Pod, Service, ConfigMap)

A namespaced kind at the cluster path lists (and watches) across namespaces; it has no item or create route there.
Verbs: POST create (201), GET read, GET list (`labelSelector`, `fieldSelector`), GET list with `watch=1` (events
from `resourceVersion`), PUT update (compare-and-swap: the body's resourceVersion must be current, else 409), DELETE
(optional precondition as a `DeleteOptions` body or `?resourceVersion=`). Every body must pass
`devplace.api.normalize` and is stored as written (`api.manifests.validated`); names and namespaces in the URL must
agree with the body; then the rules that need stored objects (`scheduler.admissions`: ResourceClass spec
immutable, class references that exist and form no cycle). Objects come back as stored:
an `akri.sh/v0` Configuration stays `akri.sh/v0` when read through the `devplace.io` path (both name one kind).

Selectors are filtered by the store, so a client receives only what it asked for. A field selector may name
`metadata.name`, `metadata.namespace` and the fields the kind declares (`api.selectors.FIELD_LABELS`); any other is
refused with 400 `BadRequest` naming `fieldSelector`, as Kubernetes does ("field label not supported").

Store-level operations the Kubernetes API has no path for live under `/store`: the current revision, compaction,
and a watch across every kind. The remote store backend uses them.

Watch: the store's watch is entered (registered) before any byte is sent, so a compacted `resourceVersion` is a 410
`Status` response, and a watch without `resourceVersion` starts at the store's revision at that moment. A failure
after that arrives as an `ERROR` event carrying the `Status`, as Kubernetes does. Events are newline-delimited JSON,
served as `application/json;stream=watch` to a client that asks for JSON (kubectl) and as NDJSON otherwise. The
stream ends after `timeoutSeconds`; when the client goes away the store watch is exited at once, even if no event
ever came (the response listens for the disconnect itself).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import Receive, Scope, Send

from devplace import errors
from devplace.api import registry
from devplace.api.manifests import validated
from devplace.api.registry import KindInfo
from devplace.scheduler import admissions as admission
from devplace.server import errors as http_errors
from devplace.server.bodies import decode_body
from devplace.store import base
from devplace.store.base import Store, WatchStream

__all__ = [
    "KubeStatus",
    "Target",
    "delete_preconditions",
    "list_body",
    "prepare_write",
    "resolve",
    "router",
    "watch_media_type",
    "watch_response",
]

NDJSON = "application/x-ndjson"
WATCH_JSON = "application/json;stream=watch"


# -- documentation models (OpenAPI only; responses are built as plain dicts) ----------------------------------------


class KubeObject(BaseModel):
    """Any stored object: Kubernetes-shaped, fields beyond these depend on the kind."""

    model_config = ConfigDict(extra="allow")
    apiVersion: str
    kind: str
    metadata: dict[str, Any]


class KubeListMeta(BaseModel):
    resourceVersion: str


class KubeObjectList(BaseModel):
    kind: str
    apiVersion: str
    metadata: KubeListMeta
    items: list[KubeObject]


class KubeStatusCause(BaseModel):
    field: str
    message: str
    reason: str


class KubeStatusDetails(BaseModel):
    causes: list[KubeStatusCause] = Field(default_factory=list)


class KubeStatus(BaseModel):
    kind: Literal["Status"]
    apiVersion: str
    metadata: dict[str, Any]
    status: Literal["Failure"]
    message: str
    reason: str
    code: int
    details: KubeStatusDetails | None = None


class KubeWatchEvent(BaseModel):
    """One NDJSON line of a watch; `object` is a Status for `ERROR`."""

    type: Literal["ADDED", "MODIFIED", "DELETED", "ERROR"]
    object: dict[str, Any]


class StoreRevision(BaseModel):
    revision: int


# -- pure request interpretation -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What a resource URL addresses: a kind at one of its group/versions, a namespace scope, maybe one name.

    `namespace` is None at the cluster path (for a namespaced kind: across all namespaces), the URL's namespace
    at a namespaced path. `store_namespace` is what the store keys by ("" for cluster-scoped kinds).
    """

    info: KindInfo
    api_version: str
    namespace: str | None
    name: str | None

    @property
    def store_namespace(self) -> str:
        return (self.namespace or "") if self.info.namespaced else ""

    @property
    def list_namespace(self) -> str | None:
        return self.namespace if self.info.namespaced else None

    def describe(self) -> str:
        ns = f"{self.namespace}/" if self.info.namespaced and self.namespace else ""
        return f"{self.info.kind} {ns}{self.name}" if self.name else self.info.kind


def resolve(
    api_version: str, plural: str, namespace: str | None, name: str | None, *, creating: bool = False
) -> Target:
    """The Target of a resource path, or `NotFound` when the kind, its group/version or its scope rule it out."""
    info = registry.lookup_plural(plural)
    if api_version not in info.group_versions:
        raise errors.NotFound(
            f"the server could not find the requested resource: {api_version} does not serve {plural} "
            f"({info.kind} is served as {', '.join(info.group_versions)})"
        )
    if namespace is not None and not info.namespaced:
        raise errors.NotFound(f"{info.kind} is cluster-scoped: use {collection_path(info, api_version, None)}")
    if namespace is None and info.namespaced and (name is not None or creating):
        where = collection_path(info, api_version, "{namespace}")
        raise errors.NotFound(f"{info.kind} is namespaced: use {where}{'/' + name if name else ''}")
    return Target(info, api_version, namespace, name)


def collection_path(info: KindInfo, api_version: str, namespace: str | None) -> str:
    root = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    ns = f"/namespaces/{namespace}" if namespace is not None else ""
    return f"{root}{ns}/{info.plural}"


def prepare_write(body: Mapping[str, Any], target: Target) -> dict[str, Any]:
    """The object to store for a create (target without name) or update (target with name) body.

    Kind and apiVersion default from the URL when absent; the namespace defaults from the URL; a body that names
    another kind, namespace or object than the URL is refused with the field that disagrees.
    """
    info = target.info
    obj = dict(body)
    obj.setdefault("kind", info.kind)
    obj.setdefault("apiVersion", target.api_version)
    kind = obj["kind"]
    if isinstance(kind, str) and kind and kind != info.kind:
        raise errors.Invalid.field("kind", f"{kind!r} does not match the resource {info.plural!r} ({info.kind})")
    meta = obj.get("metadata")
    if meta is None and target.name is not None:
        meta = {}
    if isinstance(meta, Mapping):
        meta = dict(meta)
        if info.namespaced and target.namespace is not None:
            ns = meta.get("namespace")
            if ns in (None, ""):
                meta["namespace"] = target.namespace
            elif ns != target.namespace:
                raise errors.Invalid.field(
                    "metadata.namespace", f"{ns!r} does not match the namespace in the URL ({target.namespace!r})"
                )
        if target.name is not None:
            name = meta.get("name")
            if name in (None, ""):
                meta["name"] = target.name
            elif name != target.name:
                raise errors.Invalid.field(
                    "metadata.name", f"{name!r} does not match the name in the URL ({target.name!r})"
                )
        obj["metadata"] = meta
    return validated(obj)


@dataclass(frozen=True)
class Preconditions:
    resource_version: str | None = None
    uid: str | None = None


def delete_preconditions(body: Mapping[str, Any] | None, query_rv: str | None) -> Preconditions:
    """A DELETE's preconditions: `DeleteOptions.preconditions` from the body, else `?resourceVersion=`."""
    rv = query_rv or None
    uid = None
    if body is not None:
        pre = body.get("preconditions")
        if pre is not None:
            if not isinstance(pre, Mapping):
                raise errors.Invalid.field("preconditions", "must be an object")
            raw_rv = pre.get("resourceVersion")
            if raw_rv is not None:
                if isinstance(raw_rv, bool) or not isinstance(raw_rv, str | int):
                    raise errors.Invalid.field("preconditions.resourceVersion", "must be a string")
                rv = str(raw_rv)
            raw_uid = pre.get("uid")
            if raw_uid is not None:
                if not isinstance(raw_uid, str):
                    raise errors.Invalid.field("preconditions.uid", "must be a string")
                uid = raw_uid
    if rv is not None:
        _revision("preconditions.resourceVersion", rv)
    return Preconditions(rv, uid)


def list_body(target: Target, items: list[dict[str, Any]], revision: int) -> dict[str, Any]:
    return {
        "kind": f"{target.info.kind}List",
        "apiVersion": target.api_version,
        "metadata": {"resourceVersion": str(revision)},
        "items": items,
    }


def _revision(field: str, raw: str) -> int:
    if not (raw.isascii() and raw.isdigit()):  # int() would also take "+5", " 5" and "5_0"
        raise errors.Invalid.field(field, f"{raw!r} is not a revision (a non-negative integer)")
    return int(raw)


def _flag(field: str, raw: str | None) -> bool:
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in ("1", "true", "yes"):
        return True
    if value in ("", "0", "false", "no"):
        return False
    raise errors.Invalid.field(field, f"{raw!r} is not a boolean (true or false)")


def _timeout(raw: str | None) -> float | None:
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise errors.Invalid.field("timeoutSeconds", f"{raw!r} is not a whole, non-negative number of seconds")
    value = int(raw)
    return float(value) if value else None


def check_selectors(kind: str | None, namespace: str | None, query: Mapping[str, str]) -> None:
    """Refuse a list or watch request's bad `labelSelector` (422) or `fieldSelector` before the store is asked.

    A field selector naming a field the kind does not support is a 400 `BadRequest` (Kubernetes' answer, "field
    label not supported"), with the cause naming `fieldSelector`."""
    base.parse_filters(kind, namespace, query.get("labelSelector") or None, None)
    try:
        base.parse_filters(kind, namespace, None, query.get("fieldSelector") or None)
    except errors.Invalid as e:
        raise errors.Malformed(e.message, e.fields) from e


# -- watch streaming -------------------------------------------------------------------------------------------------


def watch_media_type(accept: str | None) -> str:
    """The media type of a watch response: kubectl asks for JSON and gets Kubernetes' `stream=watch` form; NDJSON
    when asked for, or when the client says nothing more precise (the lines are the same either way)."""
    wanted = (accept or "").lower()
    if NDJSON in wanted or "application/json" not in wanted:
        return NDJSON
    return WATCH_JSON


async def watch_response(stream: WatchStream, *, timeout: float | None, media_type: str = NDJSON) -> Response:
    """Enter `stream` (so `Gone` and other refusals raise here, before any byte is sent) and stream its events.

    The response owns the entered stream from then on: it exits it when the stream ends, fails, times out or the
    client goes away."""
    await stream.__aenter__()
    return WatchResponse(stream, timeout, media_type)


class WatchResponse(StreamingResponse):
    """Watch events as lines; exits the store watch when done. It listens for the client's disconnect itself, so a
    watch that never has an event to send is still unregistered when its client leaves."""

    def __init__(self, stream: WatchStream, timeout: float | None, media_type: str) -> None:
        super().__init__(_lines(stream, timeout), media_type=media_type)
        self._stream = stream

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def stream_then_stop() -> None:
                    await self.stream_response(send)
                    group.cancel_scope.cancel()

                group.start_soon(stream_then_stop)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._stream.__aexit__(None, None, None)


async def _lines(stream: WatchStream, timeout: float | None) -> AsyncIterator[bytes]:
    """JSON lines of an entered stream's events until `timeout` seconds have passed; a failure is an ERROR line.

    The deadline bounds each wait for an event, never a line being sent."""
    deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
    try:
        while True:
            if deadline is None:
                event = await anext(stream)
            else:
                try:
                    async with asyncio.timeout_at(deadline):
                        event = await anext(stream)
                except TimeoutError:
                    return
            yield _line(event.to_wire())
    except StopAsyncIteration:
        return
    except errors.DevplaceError as e:
        yield _line({"type": "ERROR", "object": http_errors.status_body(e)})


def _line(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode() + b"\n"


# -- routes -------------------------------------------------------------------------------------------------------


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": KubeStatus, "description": text}
    for code, text in [
        (400, "the body is not a JSON or YAML object, or the field selector names an unsupported field"),
        (404, "no such kind, group/version, scope or object"),
        (409, "the name exists, or the resourceVersion is stale"),
        (410, "the watch revision has been compacted"),
        (413, "the body is larger than the server's limit"),
        (422, "the object is invalid; `details.causes[].field` names each refused field"),
    ]
}

_OBJECT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/KubeObject"}}},
    }
}


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}, "description": description}


def _query_param(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


_LIST_QUERY = [
    _query_param("labelSelector", {"type": "string"}, "Kubernetes label selector, e.g. `app=x,tier in (a,b)`"),
    _query_param(
        "fieldSelector",
        {"type": "string"},
        "Kubernetes field selector, e.g. `spec.nodeName=node-a`: metadata.name, metadata.namespace and the kind's "
        "field labels (400 for any other field)",
    ),
    _query_param("watch", {"type": "boolean"}, "stream NDJSON watch events instead of listing"),
    _query_param("resourceVersion", {"type": "string"}, "watch: stream events after this revision (default: now)"),
    _query_param("timeoutSeconds", {"type": "integer", "minimum": 0}, "watch: end the stream after this long"),
]
_DELETE_QUERY = [_query_param("resourceVersion", {"type": "string"}, "delete only if the object is at this revision")]


class _Routes:
    """Handlers bound to one store. Each reads its path parameters from the request (see `router`)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @staticmethod
    def _target(request: Request, *, creating: bool = False) -> Target:
        params = request.path_params
        api_version = f"{params['group']}/{params['version']}" if "group" in params else str(params["version"])
        return resolve(api_version, params["plural"], params.get("namespace"), params.get("name"), creating=creating)

    async def _body(self, request: Request) -> dict[str, Any]:
        return decode_body(await request.body(), request.headers.get("content-type"))

    async def collection_get(self, request: Request) -> Response:
        target = self._target(request)
        query = request.query_params
        kind, namespace = target.info.kind, target.list_namespace
        check_selectors(kind, namespace, query)
        selector, fields = query.get("labelSelector") or None, query.get("fieldSelector") or None
        if _flag("watch", query.get("watch")):
            return await self._watch(request, kind, namespace)
        result = await self.store.list(kind, namespace, selector, fields=fields)
        return JSONResponse(list_body(target, result.items, result.revision))

    async def _watch(self, request: Request, kind: str | None, namespace: str | None) -> Response:
        query = request.query_params
        rv = query.get("resourceVersion")
        since = _revision("resourceVersion", rv) if rv else None
        timeout = _timeout(query.get("timeoutSeconds"))
        stream = self.store.watch(
            kind,
            namespace,
            since=since,
            selector=query.get("labelSelector") or None,
            fields=query.get("fieldSelector") or None,
        )
        return await watch_response(stream, timeout=timeout, media_type=watch_media_type(request.headers.get("accept")))

    async def collection_post(self, request: Request) -> Response:
        target = self._target(request, creating=True)
        obj = prepare_write(await self._body(request), target)
        await admission.admit_write(self.store, obj, creating=True)
        return JSONResponse(await self.store.create(obj), status_code=201)

    async def item_get(self, request: Request) -> Response:
        target = self._target(request)
        assert target.name is not None
        return JSONResponse(await self.store.get(target.info.kind, target.name, target.store_namespace))

    async def item_put(self, request: Request) -> Response:
        target = self._target(request)
        obj = prepare_write(await self._body(request), target)
        await admission.admit_write(self.store, obj, creating=False)
        return JSONResponse(await self.store.update(obj))

    async def item_delete(self, request: Request) -> Response:
        target = self._target(request)
        assert target.name is not None
        raw = await request.body()
        body = decode_body(raw, request.headers.get("content-type")) if raw.strip() else None
        pre = delete_preconditions(body, request.query_params.get("resourceVersion"))
        kind, name, ns = target.info.kind, target.name, target.store_namespace
        rv = pre.resource_version
        if pre.uid is not None:
            current = await self.store.get(kind, name, ns)
            meta = current["metadata"]
            if meta.get("uid") != pre.uid:
                raise errors.Conflict(
                    f"{target.describe()}: precondition failed: uid {pre.uid} does not match {meta.get('uid')}"
                )
            if rv is not None and rv != meta.get("resourceVersion"):
                raise errors.Conflict(
                    f"{target.describe()}: precondition failed: resourceVersion {rv} is stale "
                    f"(current is {meta.get('resourceVersion')})"
                )
            rv = str(meta.get("resourceVersion"))
        return JSONResponse(await self.store.delete(kind, name, ns, resource_version=rv))

    # -- /store -----------------------------------------------------------------------------------------------------

    async def store_revision(self, request: Request) -> Response:
        return JSONResponse({"revision": await self.store.revision()})

    async def store_compact(self, request: Request) -> Response:
        body = await self._body(request)
        raw = body.get("revision")
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            raise errors.Invalid.field("revision", "must be a non-negative integer")
        await self.store.compact(raw)
        return JSONResponse({"revision": raw})

    async def store_watch(self, request: Request) -> Response:
        query = request.query_params
        kind = query.get("kind") or None
        namespace = query.get("namespace")
        check_selectors(kind, namespace, query)
        return await self._watch(request, kind, namespace)

    # -- discovery --------------------------------------------------------------------------------------------------

    async def core_versions(self, request: Request) -> Response:
        return JSONResponse({"kind": "APIVersions", "versions": ["v1"]})

    async def groups(self, request: Request) -> Response:
        by_group: dict[str, list[str]] = {}
        for gv in _group_versions():
            if "/" in gv:
                group, version = gv.split("/", 1)
                by_group.setdefault(group, []).append(version)
        return JSONResponse(
            {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": group,
                        "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
                        "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
                    }
                    for group, versions in sorted(by_group.items())
                ],
            }
        )

    async def resources(self, request: Request) -> Response:
        params = request.path_params
        gv = f"{params['group']}/{params['version']}" if "group" in params else str(params["version"])
        served = [k for k in registry.kinds() if gv in k.group_versions]
        if not served:
            raise errors.NotFound(f"the server could not find the requested resource: no kinds are served as {gv}")
        verbs = ["create", "delete", "get", "list", "update", "watch"]
        return JSONResponse(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": gv,
                "resources": [
                    {"name": k.plural, "kind": k.kind, "namespaced": k.namespaced, "verbs": verbs} for k in served
                ],
            }
        )


def _group_versions() -> list[str]:
    seen: dict[str, None] = {}
    for info in registry.kinds():
        for gv in info.group_versions:
            seen.setdefault(gv, None)
    return sorted(seen)


def _param_sets() -> dict[str, list[dict[str, Any]]]:
    """Path parameters of the two roots, with the registry's groups, versions and plurals as enums (docs only)."""
    kinds = registry.kinds()
    group_versions = _group_versions()
    groups = sorted({gv.split("/", 1)[0] for gv in group_versions if "/" in gv})
    versions = sorted({gv.split("/", 1)[1] for gv in group_versions if "/" in gv})
    group_plurals = sorted({k.plural for k in kinds if any("/" in gv for gv in k.group_versions)})
    core_plurals = sorted({k.plural for k in kinds if any("/" not in gv for gv in k.group_versions)})
    core_versions = sorted({gv for gv in group_versions if "/" not in gv})

    def enum(name: str, values: list[str], description: str) -> dict[str, Any]:
        param = _path_param(name, description)
        if values:
            param["schema"] = {"type": "string", "enum": values}
        return param

    return {
        "apis": [
            enum("group", groups, "API group, e.g. devplace.io"),
            enum("version", versions, "API version within the group, e.g. v1alpha1"),
        ],
        "api": [enum("version", core_versions, "core API version")],
        "plural_apis": [enum("plural", group_plurals, "resource (plural kind), e.g. configurations")],
        "plural_api": [enum("plural", core_plurals, "resource (plural kind), e.g. nodes")],
    }


def router(store: Store) -> APIRouter:
    """Every resource route over `store`. Handlers take only the request; OpenAPI is described explicitly."""
    routes = _Routes(store)
    api = APIRouter()
    params = _param_sets()
    namespace = _path_param("namespace", "namespace of a namespaced kind")
    name = _path_param("name", "object name")

    for root, prefix, tag in (
        ("apis", "/apis/{group}/{version}", "group resources"),
        ("api", "/api/{version}", "core"),
    ):
        base = params[root]
        plural = params[f"plural_{root}"]
        shapes: list[tuple[str, list[dict[str, Any]], str]] = [
            (f"{prefix}/namespaces/{{namespace}}/{{plural}}", [*base, namespace, *plural], "Namespaced"),
            (f"{prefix}/{{plural}}", [*base, *plural], ""),
        ]
        for path, path_params, scope in shapes:
            op = f"{root.capitalize()}{scope}"
            api.add_api_route(
                path,
                routes.collection_get,
                methods=["GET"],
                operation_id=f"list{op}",
                summary="List objects, or watch them with watch=1 (NDJSON)",
                tags=[tag],
                responses={
                    200: {
                        "model": KubeObjectList,
                        "description": "the list, or with watch=1 a stream of WatchEvent lines",
                        "content": {
                            media: {"schema": {"$ref": "#/components/schemas/KubeWatchEvent"}}
                            for media in (NDJSON, WATCH_JSON)
                        },
                    },
                    **_ERRORS,
                },
                openapi_extra={"parameters": [*path_params, *_LIST_QUERY]},
            )
            api.add_api_route(
                path,
                routes.collection_post,
                methods=["POST"],
                operation_id=f"create{op}",
                summary="Create an object",
                tags=[tag],
                status_code=201,
                responses={201: {"model": KubeObject, "description": "the stored object"}, **_ERRORS},
                openapi_extra={"parameters": path_params, **_OBJECT_BODY},
            )
            item = f"{path}/{{name}}"
            item_params = [*path_params, name]
            api.add_api_route(
                item,
                routes.item_get,
                methods=["GET"],
                operation_id=f"read{op}",
                summary="Read an object",
                tags=[tag],
                responses={200: {"model": KubeObject, "description": "the object"}, **_ERRORS},
                openapi_extra={"parameters": item_params},
            )
            api.add_api_route(
                item,
                routes.item_put,
                methods=["PUT"],
                operation_id=f"replace{op}",
                summary="Replace an object (compare-and-swap on metadata.resourceVersion)",
                tags=[tag],
                responses={200: {"model": KubeObject, "description": "the stored object"}, **_ERRORS},
                openapi_extra={"parameters": item_params, **_OBJECT_BODY},
            )
            api.add_api_route(
                item,
                routes.item_delete,
                methods=["DELETE"],
                operation_id=f"delete{op}",
                summary="Delete an object (optionally only at a given resourceVersion)",
                tags=[tag],
                responses={200: {"model": KubeObject, "description": "the object as last stored"}, **_ERRORS},
                openapi_extra={"parameters": [*item_params, *_DELETE_QUERY]},
            )
        api.add_api_route(
            prefix,
            routes.resources,
            methods=["GET"],
            operation_id=f"resources{root.capitalize()}",
            summary="Kinds served at this group/version",
            tags=["discovery"],
            responses={200: {"description": "an APIResourceList"}, 404: _ERRORS[404]},
            openapi_extra={"parameters": base},
        )

    api.add_api_route("/api", routes.core_versions, methods=["GET"], tags=["discovery"], summary="Core API versions")
    api.add_api_route("/apis", routes.groups, methods=["GET"], tags=["discovery"], summary="API groups")
    api.add_api_route(
        "/store/revision",
        routes.store_revision,
        methods=["GET"],
        tags=["store"],
        summary="The store's current revision",
        responses={200: {"model": StoreRevision, "description": "the revision"}},
    )
    api.add_api_route(
        "/store/compact",
        routes.store_compact,
        methods=["POST"],
        tags=["store"],
        summary="Forget history up to and including a revision (watches from there get 410)",
        responses={200: {"model": StoreRevision, "description": "compacted"}, 400: _ERRORS[400], 422: _ERRORS[422]},
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/StoreRevision"}}},
            }
        },
    )
    api.add_api_route(
        "/store/watch",
        routes.store_watch,
        methods=["GET"],
        tags=["store"],
        summary="Watch every kind (NDJSON), optionally filtered by kind, namespace, labels and fields",
        responses={
            200: {
                "description": "WatchEvent lines",
                "content": {
                    media: {"schema": {"$ref": "#/components/schemas/KubeWatchEvent"}} for media in (NDJSON, WATCH_JSON)
                },
            },
            400: _ERRORS[400],
            410: _ERRORS[410],
            422: _ERRORS[422],
        },
        openapi_extra={
            "parameters": [
                _query_param("kind", {"type": "string"}, "only this kind"),
                _query_param("namespace", {"type": "string"}, 'only this namespace ("" for cluster-scoped)'),
                *[p for p in _LIST_QUERY if p["name"] != "watch"],
            ]
        },
    )
    return api
