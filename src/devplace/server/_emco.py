"""The EMCO-style fleet API under /v2: EMCO's paths, bodies and status codes over the devplace store.

Every collection of `devplace.placement._levels.LEVELS` gets POST (201), GET list (200), GET one (200), PUT one
(200, also when it creates, as EMCO answers), DELETE one (204) and DELETE of the whole collection (204), generated from
the level table so the collections cannot drift apart. Look-ups by query, answered as EMCO's routes answer them (its
router tries routes in order, and the collection's GET comes first): `hpa-intents?intent=`,
`hpa-resource-consumers?consumer=` and `resource-requirements?resource=` are the one body with the method QUERY (EMCO's
curl examples) and the whole list with GET; `app-intents/?app=NAME` (the slash is EMCO's) is the `spec` of the app's
intent, `{"intent": {}}` when none names the app, and without `app` no route (404); `clusters?label=<label>` is the
names of the clusters carrying it (`[]` for none; an empty `label=` lists the clusters) and `clusters?withLabels=true`
each cluster's metadata and labels. A path no route serves is 404 `404 page not found` (`UNKNOWN_ROUTE`), EMCO's
text. Deployment intent groups add `approve`, `instantiate`, `terminate` (202), `status` (EMCO's query parameters, see
`placement.reports.parse_status_query`) and devplace's dry run `plan` (200); clusters add EMCO's `/labels` (POST, GET
list, GET one, PUT one, DELETE one; see `placement.labels`).

Bodies are read here, once: JSON (`application/json`), or EMCO's multipart form (`metadata` part with the JSON body,
`file` part with a cluster's kubeconfig or an app's chart archive, read by `placement.charts`). The body is then
parsed by the catalog into its level's typed model, in whichever dialect the client wrote it, and stored as sent:
GET answers exactly that. OpenAPI documents every dialect's schema.

Errors are raised as devplace errors and become responses in the app's exception handlers, which use
`devplace.server._statuses` in the "emco" dialect for /v2 paths: schema violations 400 ("Invalid Input: ..."), an empty
body 400, unparsable JSON 422, a missing object or ancestor 404 (naming the missing level), duplicates (EMCO's text,
`Level.exists`: `Resource already exists`), parents with children, lifecycle steps out of order and failed
instantiations 409. The body is a Kubernetes `Status` whose `message` is the text.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from starlette.datastructures import UploadFile

from devplace import errors
from devplace.placement import (
    APP,
    CLUSTER,
    DEPLOYMENT_INTENT_GROUP,
    LEVELS,
    ClusterLabelBody,
    ClusterLabels,
    Level,
    PlacementService,
    chart_manifests,
    cluster_label_text,
    cluster_labels,
    kubeconfig_server,
    parse_status_query,
    split_cluster_label,
)
from devplace.server import _bodies as bodies
from devplace.store import Store

PREFIX = "/v2"

Obj = dict[str, Any]


class StatusBody(BaseModel):
    """The error body (a Kubernetes `Status`; EMCO clients read `message`)."""

    kind: str = "Status"
    api_version: str = Field("v1", alias="apiVersion")
    metadata: dict[str, Any] = Field(default_factory=dict)
    status: str = "Failure"
    message: str
    reason: str
    code: int
    details: dict[str, Any] | None = None


class ClusterChoice(BaseModel):
    cluster_provider: str = Field(alias="clusterProvider")
    cluster: str
    replicas: int
    score: float


class ClusterRejection(BaseModel):
    cluster_provider: str = Field(alias="clusterProvider")
    cluster: str
    reason: str


class PatchedResource(BaseModel):
    cluster_provider: str = Field(alias="clusterProvider")
    cluster: str
    manifest: dict[str, Any]


class AppStatus(BaseModel):
    name: str
    replication_count: int = Field(alias="replicationCount")
    qualified: int
    clusters: list[ClusterChoice]
    rejected: list[ClusterRejection]
    resources: list[PatchedResource]
    warnings: list[str]


class PlacementStatus(BaseModel):
    """A deployment intent group's placement decision: where each app goes, patched manifests, why it failed."""

    state: str = Field(description="Planned (dry run), Instantiated, Failed, Approved or Terminated")
    dry_run: bool = Field(alias="dryRun")
    apps: list[AppStatus]
    errors: list[str]


class Action(BaseModel):
    state: str
    instance: str
    time: str


class States(BaseModel):
    actions: list[Action]


class EmcoStatus(BaseModel):
    """EMCO's status result (its fields depend on the query; see EMCO's status API), plus devplace's `placement`."""

    model_config = {"extra": "allow"}

    name: str
    states: States | None = None
    placement: PlacementStatus | None = None


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": StatusBody, "description": "Invalid Input: the body violates the schema, or is empty"},
    404: {"model": StatusBody, "description": "the object or one of its ancestors does not exist"},
    409: {"model": StatusBody, "description": "duplicate, has children, or refused by a rule"},
    422: {"model": StatusBody, "description": "the body is not parsable JSON"},
}


def _segments(level: Level) -> str:
    """`/projects/{project}/composite-apps/{compositeApp}/{version}` for the composite app level."""
    out = ""
    for part in level.chain:
        out += f"/{part.segment}" + "".join(f"/{{{p}}}" for p in part.params)
    return out


def _collection(level: Level) -> str:
    parent = _segments(level.parent) if level.parent is not None else ""
    return f"{PREFIX}{parent}/{level.segment}"


def _item(level: Level) -> str:
    return PREFIX + _segments(level)


def _params(names: tuple[str, ...]) -> list[inspect.Parameter]:
    return [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str, default=PathParam(...))
        for name in names
    ]


_REQUEST = inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request)


def _endpoint(
    fn: Callable[..., Awaitable[Any]], params: list[inspect.Parameter], name: str
) -> Callable[..., Awaitable[Any]]:
    """Give a generic `**kwargs` handler the signature FastAPI reads (path parameters, the request)."""

    async def endpoint(**kwargs: Any) -> Any:
        return await fn(**kwargs)

    endpoint.__signature__ = inspect.Signature([*params, _REQUEST])  # type: ignore[attr-defined]
    endpoint.__name__ = name
    return endpoint


def _path(level: Level, kwargs: dict[str, Any], names: tuple[str, ...] | None = None) -> tuple[str, ...]:
    return tuple(str(kwargs[p]) for p in (names if names is not None else level.all_params))


# -- bodies -----------------------------------------------------------------------------------------------------


def _json(data: bytes, what: str = "the request body") -> Any:
    if not data.strip():
        raise errors.Invalid(f"{what} is empty; expected a JSON object")
    # The API server's one decoder: JSON only here; too deep, duplicate keys, NaN: Malformed (422 in EMCO's dialect).
    # The request body was decoded off the event loop already (server.bodies.BodyGuard): that tree is reused.
    return bodies.body_value(data, "application/json", what=what)


def _file_content(level: Level, data: bytes, filename: str) -> Obj:
    """What a multipart `file` part brings to an object of `level` (kept with it, never in its body)."""
    if level is APP:
        return {"chart": filename, "manifests": chart_manifests(data, filename)}
    if level is CLUSTER:
        return {"server": kubeconfig_server(data)}
    raise errors.Invalid.field("file", f"a {level.title} takes no file")


async def _body(request: Request, level: Level | None = None) -> tuple[Any, Obj | None]:
    """The JSON body as sent, and what its multipart `file` part brought (None for a plain JSON request)."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media not in ("multipart/form-data", "application/x-www-form-urlencoded"):
        return _json(await request.body()), None
    async with request.form() as form:
        metadata = form.get("metadata")
        if metadata is None:
            raise errors.Invalid.field("metadata", "required: the multipart form's metadata part holds the JSON body")
        text = await metadata.read() if isinstance(metadata, UploadFile) else metadata.encode("utf-8")
        raw = _json(text, "the metadata part")
        upload = form.get("file")
        if upload is None or level is None:
            return raw, None
        if not isinstance(upload, UploadFile):
            raise errors.Invalid.field("file", "must be a file part")
        data = await upload.read()
        return raw, _file_content(level, data, upload.filename or "file")


def _both_manifests_and_chart(level: Level, raw: Any, content: Obj | None) -> None:
    if level is APP and content is not None and isinstance(raw, dict):
        spec = raw.get("spec")
        if isinstance(spec, dict) and spec.get("manifests"):
            raise errors.Invalid.field("spec.manifests", "give the app's manifests or a chart archive, not both")


def _request_body(level: Level) -> dict[str, Any]:
    schema = level.body.json_schema()
    content: dict[str, Any] = {"application/json": {"schema": schema}}
    if level in (APP, CLUSTER):
        what = "a Helm chart archive (.tgz) of plain manifests" if level is APP else "a kubeconfig"
        content["multipart/form-data"] = {
            "schema": {
                "type": "object",
                "required": ["metadata"],
                "properties": {
                    "metadata": {"type": "string", "description": "the JSON body"},
                    "file": {"type": "string", "format": "binary", "description": what},
                },
            }
        }
    return {"requestBody": {"required": True, "content": content}}


def _answer(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


# -- routes -----------------------------------------------------------------------------------------------------

UNKNOWN_ROUTE = "404 page not found"
"""What EMCO's router (gorilla/mux) answers for a path no route has, word for word: the message of /v2's 404s."""


def _crud(api: APIRouter, level: Level, service: PlacementService) -> None:
    catalog = service.catalog
    parent_params = level.all_params[: level.parent_width]
    tag = level.title
    snake = level.kind[0].lower() + "".join(f"_{c.lower()}" if c.isupper() else c for c in level.kind[1:])
    schema = level.body.json_schema()
    lookup = level.query

    async def create(**kw: Any) -> JSONResponse:
        raw, content = await _body(kw["request"], level)
        _both_manifests_and_chart(level, raw, content)
        return JSONResponse(await catalog.create(level, _path(level, kw, parent_params), raw, content=content), 201)

    async def list_all(**kw: Any) -> JSONResponse:
        parent = _path(level, kw, parent_params)
        query = kw["request"].query_params
        if level is CLUSTER and (query.get("label") or "withLabels" in query):  # `label=` lists them all, as EMCO
            return JSONResponse(await _clusters_by_label(service, parent[0], query.get("label") or None, query))
        return JSONResponse(await catalog.list_bodies(level, parent))

    async def look_up(**kw: Any) -> JSONResponse:
        name = kw["request"].query_params.get(lookup or "")
        if not name:
            raise errors.Invalid.field(str(lookup), "required: the name to look up")
        return JSONResponse(await catalog.get(level, (*_path(level, kw, parent_params), name)))

    async def by_app(**kw: Any) -> JSONResponse:
        app = kw["request"].query_params.get("app")
        if not app:  # EMCO's route needs `app`: without it no route matches
            raise errors.NotFound(UNKNOWN_ROUTE)
        return JSONResponse(await catalog.app_intent_spec(_path(level, kw, parent_params), app))

    async def get_one(**kw: Any) -> JSONResponse:
        return JSONResponse(await catalog.get(level, _path(level, kw)))

    async def put_one(**kw: Any) -> JSONResponse:
        raw, content = await _body(kw["request"], level)
        _both_manifests_and_chart(level, raw, content)
        body, _ = await catalog.put(level, _path(level, kw), raw, content=content)
        return JSONResponse(body, 200)

    async def delete_one(**kw: Any) -> Response:
        await catalog.delete(level, _path(level, kw))
        return Response(status_code=204)

    async def delete_all(**kw: Any) -> Response:
        await catalog.delete_all(level, _path(level, kw, parent_params))
        return Response(status_code=204)

    collection, item = _collection(level), _item(level)
    ok = _answer(f"the {level.title}, as it was sent", schema)
    api.add_api_route(
        collection,
        _endpoint(create, _params(parent_params), f"create_{snake}"),
        methods=["POST"],
        status_code=201,
        tags=[tag],
        summary=f"Create a {level.title}",
        responses={201: ok, **_ERRORS},
        response_class=JSONResponse,
        openapi_extra=_request_body(level),
    )
    api.add_api_route(
        collection,
        _endpoint(list_all, _params(parent_params), f"list_{snake}s"),
        methods=["GET"],
        tags=[tag],
        summary=f"List {level.title}s" + (f" (`?{lookup}=` too, as EMCO: see QUERY)" if lookup else ""),
        responses={200: _answer(f"every {level.title}", {"type": "array", "items": schema}), 404: _ERRORS[404]},
        response_class=JSONResponse,
    )
    if lookup == "app":
        api.add_api_route(
            f"{collection}/",
            _endpoint(by_app, _params(parent_params), f"find_{snake}_by_app"),
            methods=["GET"],
            tags=[tag],
            summary="EMCO's look-up by app (`app-intents/?app=NAME`): the spec of its intent, `{intent: {}}` if none",
            responses={200: _answer("the spec of the app's intent", {"type": "object"}), 404: _ERRORS[404]},
            response_class=JSONResponse,
        )
        api.add_api_route(
            f"{collection}/",
            _endpoint(by_app, _params(parent_params), f"query_{snake}_by_app"),
            methods=["QUERY"],
            include_in_schema=False,
        )
    elif lookup is not None:
        api.add_api_route(
            collection,
            _endpoint(look_up, _params(parent_params), f"query_{snake}s"),
            methods=["QUERY"],
            include_in_schema=False,
        )
    api.add_api_route(
        collection,
        _endpoint(delete_all, _params(parent_params), f"delete_{snake}s"),
        methods=["DELETE"],
        status_code=204,
        tags=[tag],
        summary=f"Delete every {level.title} (refused, deleting nothing, while any has children)",
        responses={204: {"description": "deleted"}, 404: _ERRORS[404], 409: _ERRORS[409]},
        response_class=Response,
    )
    api.add_api_route(
        item,
        _endpoint(get_one, _params(level.all_params), f"get_{snake}"),
        methods=["GET"],
        tags=[tag],
        summary=f"Get a {level.title}",
        responses={200: ok, 404: _ERRORS[404]},
        response_class=JSONResponse,
    )
    api.add_api_route(
        item,
        _endpoint(put_one, _params(level.all_params), f"put_{snake}"),
        methods=["PUT"],
        tags=[tag],
        summary=f"Replace a {level.title} (refused while it has children; creates it when absent)",
        responses={200: ok, **_ERRORS},
        response_class=JSONResponse,
        openapi_extra=_request_body(level),
    )
    api.add_api_route(
        item,
        _endpoint(delete_one, _params(level.all_params), f"delete_{snake}"),
        methods=["DELETE"],
        status_code=204,
        tags=[tag],
        summary=f"Delete a {level.title} (refused while it has children)",
        responses={204: {"description": "deleted"}, 404: _ERRORS[404], 409: _ERRORS[409]},
        response_class=Response,
    )


async def _clusters_by_label(service: PlacementService, provider: str, label: str | None, query: Any) -> Any:
    """EMCO's `clusters?label=<label>` (names) and `clusters?withLabels=true` (metadata and labels of each)."""
    clusters = await service.catalog.clusters(provider)
    if label is not None:
        key, value = split_cluster_label(label)
        return [
            c.name for c in clusters if key in (held := cluster_labels(c)) and (value is None or held[key] == value)
        ]
    with_labels = query.get("withLabels")
    if with_labels not in ("true", "false"):
        raise errors.Invalid.field("withLabels", f"{with_labels!r} is not one of true, false")
    if with_labels == "false":
        return [c.obj["spec"]["emco"] for c in clusters]
    return [
        {
            "metadata": c.obj["spec"]["emco"].get("metadata", {}),
            "labels": [{"clusterLabel": cluster_label_text(k, v)} for k, v in sorted(cluster_labels(c).items())],
        }
        for c in clusters
    ]


def _lifecycle(api: APIRouter, service: PlacementService) -> None:
    level = DEPLOYMENT_INTENT_GROUP
    item = _item(level)
    tag = "placement"
    doc = {"model": PlacementStatus, "description": "the placement decision"}

    async def ignore_body(request: Request) -> None:
        await request.body()  # EMCO clients send `{}` (emcoctl a `{"metadata": {...}}`); devplace reads nothing

    async def plan(**kw: Any) -> JSONResponse:
        await ignore_body(kw["request"])
        return JSONResponse(await service.plan(_path(level, kw)))

    async def instantiate(**kw: Any) -> JSONResponse:
        await ignore_body(kw["request"])
        return JSONResponse(await service.instantiate(_path(level, kw)), 202)

    async def approve(**kw: Any) -> JSONResponse:
        await ignore_body(kw["request"])
        return JSONResponse(await service.approve(_path(level, kw)), 202)

    async def terminate(**kw: Any) -> JSONResponse:
        await ignore_body(kw["request"])
        return JSONResponse(await service.terminate(_path(level, kw)), 202)

    async def status(**kw: Any) -> JSONResponse:
        params = kw["request"].query_params
        query = parse_status_query({key: params.getlist(key) for key in params})
        return JSONResponse(await service.status(_path(level, kw), query))

    params = _params(level.all_params)
    verbs: list[tuple[str, Callable[..., Awaitable[Any]], int, str]] = [
        ("plan", plan, 200, "Dry run: place every app and patch its manifests without committing anything"),
        ("approve", approve, 202, "Approve the group (instantiation needs it)"),
        (
            "instantiate",
            instantiate,
            202,
            "Place every app, commit the decision and hand each cluster its manifests (409 before approval, or "
            "with the reasons if impossible)",
        ),
        ("terminate", terminate, 202, "Withdraw an instantiated group: its objects are taken back from the clusters"),
    ]
    for verb, fn, code, summary in verbs:
        api.add_api_route(
            f"{item}/{verb}",
            _endpoint(fn, params, f"{verb}_deployment_intent_group"),
            methods=["POST"],
            status_code=code,
            tags=[tag],
            summary=summary,
            responses={code: doc, 404: _ERRORS[404], 409: _ERRORS[409]},
            response_class=JSONResponse,
        )
    api.add_api_route(
        f"{item}/status",
        _endpoint(status, params, "status_deployment_intent_group"),
        methods=["GET"],
        tags=[tag],
        summary=(
            "EMCO's status: states, and per app, cluster and resource what was applied "
            "(query: status=ready|deployed, type=rsync|cluster, output=summary|all|detail, app, cluster "
            "(provider+cluster), resource, apps, clusters, resources, instance)"
        ),
        responses={200: {"model": EmcoStatus, "description": "the status"}, 400: _ERRORS[400], 404: _ERRORS[404]},
        response_class=JSONResponse,
    )


class ClusterLabel(BaseModel):
    """A cluster label as EMCO lists it: `edge`, or `zone=east` for a label with a value."""

    cluster_label: str = Field(alias="clusterLabel")


def _cluster_labels(api: APIRouter, labels: ClusterLabels) -> None:
    level = CLUSTER
    collection = f"{_item(level)}/labels"
    item = f"{collection}/{{clusterLabel:path}}"  # `:path`: qualified keys (example.com/gpu) hold a slash
    params = _params(level.all_params)
    label_param = _params(("clusterLabel",))
    tag = "cluster label"
    ok = {"model": ClusterLabel, "description": "the cluster label"}
    label_body = {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ClusterLabelBody.model_json_schema(by_alias=True)}},
        }
    }

    async def create(**kw: Any) -> JSONResponse:
        raw, _ = await _body(kw["request"])
        return JSONResponse(await labels.add(_path(level, kw), raw), 201)

    async def list_all(**kw: Any) -> JSONResponse:
        return JSONResponse(await labels.list_all(_path(level, kw)))

    async def get_one(**kw: Any) -> JSONResponse:
        return JSONResponse(await labels.get(_path(level, kw), kw["clusterLabel"]))

    async def put_one(**kw: Any) -> JSONResponse:
        raw, _ = await _body(kw["request"])
        return JSONResponse(await labels.put(_path(level, kw), kw["clusterLabel"], raw), 200)

    async def delete_one(**kw: Any) -> Response:
        await labels.delete(_path(level, kw), kw["clusterLabel"])
        return Response(status_code=204)

    api.add_api_route(
        collection,
        _endpoint(create, params, "create_cluster_label"),
        methods=["POST"],
        status_code=201,
        tags=[tag],
        summary="Label a cluster (generic placement intents select clusters by label)",
        responses={201: ok, **_ERRORS},
        response_class=JSONResponse,
        openapi_extra=label_body,
    )
    api.add_api_route(
        collection,
        _endpoint(list_all, params, "list_cluster_labels"),
        methods=["GET"],
        tags=[tag],
        summary="List a cluster's labels",
        responses={200: {"model": list[ClusterLabel], "description": "every label"}, 404: _ERRORS[404]},
        response_class=JSONResponse,
    )
    api.add_api_route(
        item,
        _endpoint(get_one, [*params, *label_param], "get_cluster_label"),
        methods=["GET"],
        tags=[tag],
        summary="Get a cluster label (`zone` matches any value of the key, `zone=east` only that value)",
        responses={200: ok, 404: _ERRORS[404]},
        response_class=JSONResponse,
    )
    api.add_api_route(
        item,
        _endpoint(put_one, [*params, *label_param], "put_cluster_label"),
        methods=["PUT"],
        tags=[tag],
        summary="Set a cluster label (the body's label must be the URL's)",
        responses={200: ok, **_ERRORS},
        response_class=JSONResponse,
        openapi_extra=label_body,
    )
    api.add_api_route(
        item,
        _endpoint(delete_one, [*params, *label_param], "delete_cluster_label"),
        methods=["DELETE"],
        status_code=204,
        tags=[tag],
        summary="Remove a cluster label",
        responses={204: {"description": "removed"}, 404: _ERRORS[404]},
        response_class=Response,
    )


def router(store: Store, *, service: PlacementService | None = None) -> APIRouter:
    """The /v2 routes over `store` (pass `service` to choose controllers, clock or timeouts)."""
    service = service or PlacementService(store)
    api = APIRouter()
    for level in LEVELS:
        _crud(api, level, service)
    _lifecycle(api, service)
    _cluster_labels(api, ClusterLabels(service.catalog))
    return api
