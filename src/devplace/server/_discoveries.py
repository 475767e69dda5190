"""API discovery: what kubectl asks before anything else, to map `kubectl get akric` to a group, version and path.

Two forms, as the apiserver serves them:
- Aggregated (kubectl >= 1.26, client-go's default): `/api` and `/apis` answer an `APIGroupDiscoveryList` (every
  group, version and resource in one response) to a client whose Accept names
  `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList` (or `v=v2beta1`, what kubectl 1.26-1.29
  ask for), with that media type on the response.
- Legacy: `/api` (`APIVersions`), `/apis` (`APIGroupList`), `/apis/<group>` (`APIGroup`) and `/api/v1`,
  `/apis/<group>/<version>` (`APIResourceList`), for every other client (and an aggregated client's fallback).

Both forms come from the same pure functions of the kind registry, so they list the same things: each kind's plural,
singular name, short names (Kubernetes' own for the built-in kinds, Akri's `akric` and `akrii` at `akri.sh` only, so
no two resources share one), categories (`all` for the built-in workload kinds as in Kubernetes and for Akri's kinds,
`devplace` for devplace's kinds, `akri` for Akri's, `fleet` for the fleet objects), the verbs the server serves
(get, list, watch, create, update, patch, delete; no deletecollection), and the subresources: `<plural>/status` (get,
patch, update) for kinds with a status and `deployments/scale` (get, patch, update; an `autoscaling/v1` Scale), from
`kubeapi.subresources`.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from devplace import errors
from devplace.kubeapi import SCALE_KINDS, Served, group_versions, has_status, served
from devplace.server._resources import KubeStatus
from devplace.server._reviews import REVIEWS, WHOAMI_VERSIONS

VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
SUBRESOURCE_VERBS = ["get", "patch", "update"]

SHORT_NAMES: dict[str, list[str]] = {
    "ConfigMap": ["cm"],
    "Configuration": ["akric"],
    "Deployment": ["deploy"],
    "Event": ["ev"],
    "Instance": ["akrii"],
    "Namespace": ["ns"],
    "Node": ["no"],
    "Pod": ["po"],
    "Service": ["svc"],
    "ServiceAccount": ["sa"],
}
"""Kubernetes' short names for its kinds, Akri's for its CRDs (`short_names`: at one group only)."""

SHORT_NAME_GROUPS: dict[str, str] = {"Configuration": "akri.sh", "Instance": "akri.sh", "Event": ""}
"""Kinds served in several groups whose short names belong to one of them: Akri's names to Akri's group (a short name
two resources share makes kubectl warn and pick one), Event's `ev` to the core group, as Kubernetes has it."""

_AKRI = "akri.sh"
_WORKLOADS = frozenset({"Pod", "Service", "Deployment", "Job"})
"""Built-in kinds Kubernetes puts in the `all` category (`kubectl get all`)."""

AggregatedVersion = Literal["v2", "v2beta1"]
_AGGREGATED_GROUP = "apidiscovery.k8s.io"


def _categories(s: Served) -> list[str]:
    if s.builtin:
        return ["all"] if s.info.kind in _WORKLOADS else []
    if s.group.startswith("fleet."):
        return ["fleet"]
    if s.group == _AKRI:  # Akri's CRDs are in `all`: `kubectl get all` shows Configurations and Instances
        return ["all", "akri", "devplace"]
    return ["devplace"]


def short_names(s: Served) -> list[str]:
    """The short names of a kind at one group (`SHORT_NAMES`, `SHORT_NAME_GROUPS`): no two resources share one."""
    owner = SHORT_NAME_GROUPS.get(s.info.kind)
    if owner is not None and owner != s.group:
        return []
    return SHORT_NAMES.get(s.info.kind, [])


def _served(api_version: str) -> list[Served]:
    return [s for s in served() if s.api_version == api_version]


def _groups() -> dict[str, list[str]]:
    """Group name ("" for core) -> its versions, preferred first (the registry's first listing of the group)."""
    out: dict[str, list[str]] = {}
    for api_version in [*(s.api_version for s in served()), *(gv for gv, _ in _REVIEW_KINDS)]:
        group, _, version = api_version.rpartition("/")
        versions = out.setdefault(group, [])
        if version not in versions:
            versions.append(version)
    return dict(sorted(out.items()))


_REVIEW_KINDS = [
    *((gv, (plural, kind)) for plural, (gv, kind) in REVIEWS.items()),
    *((gv, ("selfsubjectreviews", "SelfSubjectReview")) for gv in WHOAMI_VERSIONS[1:]),
]


def _reviews(api_version: str) -> list[tuple[str, str]]:
    """(resource, kind) of the self reviews served at a group/version (`server.reviews`): create only."""
    return [entry for gv, entry in _REVIEW_KINDS if gv == api_version]


# -- legacy discovery -------------------------------------------------------------------------------------------


def api_versions() -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": _groups().get("", [])}


def api_group(group: str) -> dict[str, Any]:
    versions = _groups().get(group) if group else None
    if not versions:
        raise errors.NotFound(f"the server could not find the requested resource: no API group {group!r}")
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def _group_entry(group: str, versions: list[str]) -> dict[str, Any]:
    return {
        "name": group,
        "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
        "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
    }


def api_group_list() -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_entry(group, versions) for group, versions in _groups().items() if group],
    }


def api_resource_list(api_version: str) -> dict[str, Any]:
    """The `APIResourceList` of one group/version; NotFound when no kind is served as it."""
    here = _served(api_version)
    if not here and not _reviews(api_version):
        raise errors.NotFound(f"the server could not find the requested resource: no kinds are served as {api_version}")
    resources: list[dict[str, Any]] = [
        {"name": plural, "singularName": "", "namespaced": False, "kind": kind, "verbs": ["create"]}
        for plural, kind in _reviews(api_version)
    ]
    for s in here:
        entry: dict[str, Any] = {
            "name": s.info.plural,
            "singularName": s.info.kind.lower(),
            "namespaced": s.info.namespaced,
            "kind": s.info.kind,
            "verbs": VERBS,
        }
        if short_names(s):
            entry["shortNames"] = short_names(s)
        if _categories(s):
            entry["categories"] = _categories(s)
        resources.append(entry)
        for sub, gvk in _subresources(s):
            sub_entry = {
                "name": f"{s.info.plural}/{sub}",
                "singularName": "",
                "namespaced": s.info.namespaced,
                "kind": gvk["kind"],
                "verbs": SUBRESOURCE_VERBS,
            }
            if gvk["group"] != s.group or gvk["version"] != s.version:
                sub_entry.update(group=gvk["group"], version=gvk["version"])
            resources.append(sub_entry)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version, "resources": resources}


def _subresources(s: Served) -> list[tuple[str, dict[str, str]]]:
    out = []
    if has_status(s.info.kind):
        out.append(("status", s.gvk))
    if s.info.kind in SCALE_KINDS:
        out.append(("scale", {"group": "autoscaling", "version": "v1", "kind": "Scale"}))
    return out


# -- aggregated discovery ---------------------------------------------------------------------------------------


def aggregated_discovery(core: bool, version: AggregatedVersion = "v2") -> dict[str, Any]:
    """The `APIGroupDiscoveryList` of `/api` (core: the "" group) or `/apis` (every other group)."""
    items = []
    for group, versions in _groups().items():
        if (group == "") != core:
            continue
        items.append(
            {
                "metadata": {"name": group, "creationTimestamp": None},
                "versions": [
                    {
                        "version": v,
                        "resources": [
                            *(_resource_discovery(s) for s in _served(f"{group}/{v}" if group else v)),
                            *(_review_discovery(group, v, plural, kind) for plural, kind in _reviews(f"{group}/{v}")),
                        ],
                        "freshness": "Current",
                    }
                    for v in versions
                ],
            }
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"{_AGGREGATED_GROUP}/{version}",
        "metadata": {},
        "items": items,
    }


def _review_discovery(group: str, version: str, plural: str, kind: str) -> dict[str, Any]:
    return {
        "resource": plural,
        "responseKind": {"group": group, "kind": kind, "version": version},
        "scope": "Cluster",
        "singularResource": "",
        "verbs": ["create"],
    }


def _resource_discovery(s: Served) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": s.info.plural,
        "responseKind": s.gvk,
        "scope": "Namespaced" if s.info.namespaced else "Cluster",
        "singularResource": s.info.kind.lower(),
        "verbs": VERBS,
    }
    if short_names(s):
        entry["shortNames"] = short_names(s)
    if _categories(s):
        entry["categories"] = _categories(s)
    subs = [{"subresource": sub, "responseKind": gvk, "verbs": SUBRESOURCE_VERBS} for sub, gvk in _subresources(s)]
    if subs:
        entry["subresources"] = subs
    return entry


def wanted_discovery(accept: str | None) -> AggregatedVersion | None:
    """The aggregated discovery version an Accept header asks for first, or None (legacy discovery).

    Client-go lists the forms it takes in order of preference, e.g.
    `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,...;v=v2beta1;...,application/json`."""
    for entry in (accept or "").split(","):
        kind, *raw = (part.strip() for part in entry.split(";"))
        params = dict(p.split("=", 1) for p in raw if "=" in p)
        params = {k.strip().lower(): v.strip() for k, v in params.items()}
        if kind.lower() != "application/json":
            continue
        if not params.get("g"):
            return None  # plain JSON is preferred to what follows
        if params.get("g") != _AGGREGATED_GROUP or params.get("as") != "APIGroupDiscoveryList":
            continue
        if params.get("v") in ("v2", "v2beta1"):
            version: AggregatedVersion = "v2" if params["v"] == "v2" else "v2beta1"
            return version
    return None


def _aggregated_response(core: bool, version: AggregatedVersion) -> Response:
    media = f"application/json;g={_AGGREGATED_GROUP};v={version};as=APIGroupDiscoveryList"
    return JSONResponse(aggregated_discovery(core, version), media_type=media, headers={"Vary": "Accept"})


# -- routes -----------------------------------------------------------------------------------------------------


async def core_versions(request: Request) -> Response:
    version = wanted_discovery(request.headers.get("accept"))
    if version is not None:
        return _aggregated_response(True, version)
    return JSONResponse(api_versions(), headers={"Vary": "Accept"})


async def groups(request: Request) -> Response:
    version = wanted_discovery(request.headers.get("accept"))
    if version is not None:
        return _aggregated_response(False, version)
    return JSONResponse(api_group_list(), headers={"Vary": "Accept"})


async def group(request: Request) -> Response:
    return JSONResponse(api_group(str(request.path_params["group"])))


async def resources(request: Request) -> Response:
    params = request.path_params
    gv = f"{params['group']}/{params['version']}" if "group" in params else str(params["version"])
    return JSONResponse(api_resource_list(gv))


def _path_param(name: str, values: list[str], description: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if values:
        schema["enum"] = values
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": description}


def router() -> APIRouter:
    """The discovery routes (documented in FastAPI's /openapi.json under the `discovery` tag)."""
    api = APIRouter()
    grouped = [gv.split("/", 1) for gv in group_versions() if "/" in gv]
    group_names = sorted({g for g, _ in grouped})
    group_param = _path_param("group", group_names, "API group, e.g. devplace.io")
    version_param = _path_param("version", sorted({v for _, v in grouped}), "version within the group, e.g. v1alpha1")
    core = [gv for gv in group_versions() if "/" not in gv]
    core_param = _path_param("version", core, "core API version")
    not_found: dict[int | str, dict[str, Any]] = {
        404: {"model": KubeStatus, "description": "no kind is served at this group/version"}
    }
    api.add_api_route(
        "/api", core_versions, methods=["GET"], tags=["discovery"], summary="Core API versions (APIVersions)"
    )
    api.add_api_route("/apis", groups, methods=["GET"], tags=["discovery"], summary="API groups (APIGroupList)")
    api.add_api_route(
        "/apis/{group}",
        group,
        methods=["GET"],
        operation_id="groupApis",
        tags=["discovery"],
        summary="One API group's versions (APIGroup)",
        responses={200: {"description": "an APIGroup"}, **not_found},
        openapi_extra={"parameters": [group_param]},
    )
    api.add_api_route(
        "/apis/{group}/{version}",
        resources,
        methods=["GET"],
        operation_id="resourcesApis",
        tags=["discovery"],
        summary="Kinds served at this group/version (APIResourceList)",
        responses={200: {"description": "an APIResourceList"}, **not_found},
        openapi_extra={"parameters": [group_param, version_param]},
    )
    api.add_api_route(
        "/api/{version}",
        resources,
        methods=["GET"],
        operation_id="resourcesApi",
        tags=["discovery"],
        summary="Core kinds (APIResourceList)",
        responses={200: {"description": "an APIResourceList"}, **not_found},
        openapi_extra={"parameters": [core_param]},
    )
    return api
