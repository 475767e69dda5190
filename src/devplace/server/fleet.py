"""The EMCO-style fleet API under /v2: EMCO's paths, bodies and status codes over the devplace store.

Every collection of `devplace.api.fleet.LEVELS` gets POST (201), GET list (200), GET one (200), PUT one (200, or
201 when it creates) and DELETE one (204), generated from the level table so the eleven collections cannot drift
apart. Deployment intent groups add `plan` (200, a dry run), `instantiate` (202), `status` (200), `approve` and
`terminate` (202); clusters add EMCO's `/labels` (POST, GET list, GET one, DELETE; see `placement.labels`).
Routes are thin: bodies are validated by FastAPI against the EMCO body models (which also document them in
OpenAPI), then `placement.catalog.Catalog`, `placement.labels.ClusterLabels` and `placement.service.PlacementService`
do the work.

Errors are raised as devplace errors and become responses in the app's exception handlers, which use
`devplace.server.errors` in the "emco" dialect for /v2 paths: schema violations 400 ("Invalid Input: ..."),
unparsable JSON 422, a missing object or ancestor 404 (naming the missing level), duplicates and parents with
children 409, a failed instantiation 409 with the reasons.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Body
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from devplace.api import fleet
from devplace.api.fleet import Level
from devplace.placement.labels import ClusterLabels
from devplace.placement.service import PlacementService
from devplace.store.base import Store

__all__ = [
    "PlacementStatus",
    "router",
]

PREFIX = "/v2"


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
    """A deployment intent group's placement: the decision per app, patched manifests, and why it failed."""

    state: str = Field(description="Created, Approved, Planned (dry run), Instantiated, Failed or Terminated")
    dry_run: bool = Field(alias="dryRun")
    apps: list[AppStatus]
    errors: list[str]


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": StatusBody, "description": "Invalid Input: the body violates the schema"},
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


def _endpoint(
    fn: Callable[..., Awaitable[Any]], params: list[inspect.Parameter], name: str
) -> Callable[..., Awaitable[Any]]:
    """Give a generic `**kwargs` handler the signature FastAPI reads (path parameters, body)."""

    async def endpoint(**kwargs: Any) -> Any:
        return await fn(**kwargs)

    endpoint.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    endpoint.__name__ = name
    return endpoint


def _path(level: Level, kwargs: dict[str, Any], names: tuple[str, ...] | None = None) -> tuple[str, ...]:
    return tuple(str(kwargs[p]) for p in (names if names is not None else level.all_params))


def _crud(api: APIRouter, level: Level, service: PlacementService) -> None:
    catalog = service.catalog
    parent_params = level.all_params[: level.parent_width]
    tag = level.title
    snake = level.kind[0].lower() + "".join(f"_{c.lower()}" if c.isupper() else c for c in level.kind[1:])
    body_param = inspect.Parameter("body", inspect.Parameter.KEYWORD_ONLY, annotation=level.body, default=Body(...))

    async def create(**kw: Any) -> JSONResponse:
        return JSONResponse(await catalog.create(level, _path(level, kw, parent_params), kw["body"]), 201)

    async def list_all(**kw: Any) -> JSONResponse:
        return JSONResponse(await catalog.list_bodies(level, _path(level, kw, parent_params)))

    async def get_one(**kw: Any) -> JSONResponse:
        return JSONResponse(await catalog.get(level, _path(level, kw)))

    async def put_one(**kw: Any) -> JSONResponse:
        body, created = await catalog.put(level, _path(level, kw), kw["body"])
        return JSONResponse(body, 201 if created else 200)

    async def delete_one(**kw: Any) -> Response:
        await catalog.delete(level, _path(level, kw))
        return Response(status_code=204)

    collection, item = _collection(level), _item(level)
    many: Any = list[level.body]  # type: ignore[name-defined]
    ok = {"model": level.body, "description": f"the {level.title}"}
    api.add_api_route(
        collection,
        _endpoint(create, [*_params(parent_params), body_param], f"create_{snake}"),
        methods=["POST"],
        status_code=201,
        tags=[tag],
        summary=f"Create a {level.title}",
        responses={201: ok, **_ERRORS},
        response_class=JSONResponse,
    )
    api.add_api_route(
        collection,
        _endpoint(list_all, _params(parent_params), f"list_{snake}s"),
        methods=["GET"],
        tags=[tag],
        summary=f"List {level.title}s",
        responses={200: {"model": many, "description": f"every {level.title}"}, 404: _ERRORS[404]},
        response_class=JSONResponse,
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
        _endpoint(put_one, [*_params(level.all_params), body_param], f"put_{snake}"),
        methods=["PUT"],
        tags=[tag],
        summary=f"Replace a {level.title} (refused while it has children; creates it when absent)",
        responses={200: ok, 201: ok, **_ERRORS},
        response_class=JSONResponse,
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


def _lifecycle(api: APIRouter, service: PlacementService) -> None:
    level = fleet.DEPLOYMENT_INTENT_GROUP
    item = _item(level)
    tag = "placement"
    optional_body = inspect.Parameter(
        "body",
        inspect.Parameter.KEYWORD_ONLY,
        annotation=dict[str, Any] | None,
        default=Body(None, description="ignored; EMCO clients send an empty JSON object"),
    )
    doc = {"model": PlacementStatus, "description": "the placement status"}

    async def plan(**kw: Any) -> JSONResponse:
        return JSONResponse(await service.plan(_path(level, kw)))

    async def instantiate(**kw: Any) -> JSONResponse:
        return JSONResponse(await service.instantiate(_path(level, kw)), 202)

    async def status(**kw: Any) -> JSONResponse:
        return JSONResponse(await service.status(_path(level, kw)))

    async def approve(**kw: Any) -> JSONResponse:
        return JSONResponse(await service.approve(_path(level, kw)), 202)

    async def terminate(**kw: Any) -> JSONResponse:
        return JSONResponse(await service.terminate(_path(level, kw)), 202)

    params = _params(level.all_params)
    verbs: list[tuple[str, Callable[..., Awaitable[Any]], int, str]] = [
        ("plan", plan, 200, "Dry run: place every app and patch its manifests without committing anything"),
        ("instantiate", instantiate, 202, "Place every app and commit the decision (409 with reasons if impossible)"),
        ("approve", approve, 202, "Mark the group approved"),
        ("terminate", terminate, 202, "Withdraw an instantiated group's placement"),
    ]
    for verb, fn, code, summary in verbs:
        api.add_api_route(
            f"{item}/{verb}",
            _endpoint(fn, [*params, optional_body], f"{verb}_deployment_intent_group"),
            methods=["POST"],
            status_code=code,
            tags=[tag],
            summary=summary,
            responses={code: doc, 404: _ERRORS[404], 409: _ERRORS[409], 422: _ERRORS[422]},
            response_class=JSONResponse,
        )
    api.add_api_route(
        f"{item}/status",
        _endpoint(status, params, "status_deployment_intent_group"),
        methods=["GET"],
        tags=[tag],
        summary="The decision and patched manifests of the last plan committed",
        responses={200: doc, 404: _ERRORS[404]},
        response_class=JSONResponse,
    )


class ClusterLabel(BaseModel):
    """A cluster label as EMCO lists it: `edge`, or `zone=east` for a label with a value."""

    cluster_label: str = Field(alias="clusterLabel")


def _cluster_labels(api: APIRouter, labels: ClusterLabels) -> None:
    level = fleet.CLUSTER
    collection = f"{_item(level)}/labels"
    item = f"{collection}/{{clusterLabel:path}}"  # `:path`: qualified keys (example.com/gpu) hold a slash
    params = _params(level.all_params)
    label_param = _params(("clusterLabel",))
    body_param = inspect.Parameter(
        "body", inspect.Parameter.KEYWORD_ONLY, annotation=fleet.ClusterLabelBody, default=Body(...)
    )
    tag = "cluster label"
    ok = {"model": ClusterLabel, "description": "the cluster label"}

    async def create(**kw: Any) -> JSONResponse:
        return JSONResponse(await labels.add(_path(level, kw), kw["body"].model_dump(by_alias=True)), 201)

    async def list_all(**kw: Any) -> JSONResponse:
        return JSONResponse(await labels.list_all(_path(level, kw)))

    async def get_one(**kw: Any) -> JSONResponse:
        return JSONResponse(await labels.get(_path(level, kw), kw["clusterLabel"]))

    async def delete_one(**kw: Any) -> Response:
        await labels.delete(_path(level, kw), kw["clusterLabel"])
        return Response(status_code=204)

    api.add_api_route(
        collection,
        _endpoint(create, [*params, body_param], "create_cluster_label"),
        methods=["POST"],
        status_code=201,
        tags=[tag],
        summary="Label a cluster (generic placement intents select clusters by label)",
        responses={201: ok, **_ERRORS},
        response_class=JSONResponse,
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
    for level in fleet.LEVELS:
        _crud(api, level, service)
    _lifecycle(api, service)
    _cluster_labels(api, ClusterLabels(service.catalog))
    return api
