"""PATCH on the resource API: the four patch types of Kubernetes, on objects and their /status and /scale.

    PATCH /apis/{group}/{version}/[namespaces/{namespace}/]{plural}/{name}[/status|/scale]
    PATCH /api/{version}/[namespaces/{namespace}/]{plural}/{name}[/status]

The Content-Type says which patch (`kubeapi.patches`): `application/merge-patch+json`, `application/json-patch+json`,
`application/strategic-merge-patch+json` (Kubernetes' own kinds only) or `application/apply-patch+yaml` (server-side
apply; `fieldManager` is required, `force=true` takes over conflicting fields). Any other type is 415 with the list
the kind accepts. A body that does not parse is 400; a result the kind's schema refuses is 422 with a cause per field
(`prepare_write`, the same check as PUT, then the same admission rules).

Every patch is one compare-and-swap (`store.cas`) whose decision applies the patch to the object as read, so a
concurrent writer never loses an update: on a conflict the patch is applied again to the fresh object. A patch that
carries `metadata.resourceVersion` (or, for a JSON patch, sets it) makes it a precondition: stale is 409, not retried.
A patch that changes nothing writes nothing (no new resourceVersion). `dryRun=All` answers the result and stores
nothing. An apply patch to an object that does not exist creates it (201).

`/status` applies the patch to the object and keeps only the status; `/scale` applies it to the `autoscaling/v1`
`Scale` view (`kubeapi.subresources`) and writes back `spec.replicas`, answering the Scale. As for PUT, a main-resource
patch may change status (devplace's parts write whole objects).

`metadata.managedFields` is the server's (`kubeapi.managedfields`): an apply records the applier's fields, every other
patch an `Update` entry for its manager (`fieldManager`, else the User-Agent up to its first `/`), with `subresource`
set for /status and /scale. A patch of the object may write managedFields itself, as Kubernetes allows (an empty
list resets them; kubectl moves client-side apply's fields to server-side apply so); an apply patch may not.

An apply body is a whole configuration of the object the URL names, as Kubernetes requires: its `apiVersion` and
`kind` are given and are the URL's (for /scale: `autoscaling/v1` `Scale`), and a `metadata.name` or
`metadata.namespace` it gives is the URL's; anything else is 400 `BadRequest` naming the field, before the object is
read. (A name left out is the URL's.) Every patch's result then passes what a PUT of it would (`prepare_write` and
the kind's rules: a Pod left without containers is 422), so no patch type stores what PUT refuses.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from devplace import errors
from devplace.api import KindInfo
from devplace.api import kinds as registered_kinds
from devplace.clocks import Clock, SystemClock
from devplace.kubeapi import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    SCALE_KINDS,
    STRATEGIC_MERGE_PATCH,
    PatchType,
    comparable,
    has_status,
    json_patch,
    manager_name,
    merge_patch,
    parse_json_patch,
    root_of,
    same,
    scale_of,
    server_side_apply,
    strategic_merge,
    updated_managed_fields,
    with_scale,
    with_status,
)
from devplace.kubeapi import patch_type as parse_patch_type
from devplace.scheduler import admit_create, admit_update
from devplace.server import _namespaces as namespaces
from devplace.server._bodies import decode_body
from devplace.server._representations import ObjectResponse
from devplace.server._requests import (
    FieldValidation,
    Target,
    dry_run,
    field_validation,
    on_create,
)
from devplace.server._resources import (
    KubeObject,
    KubeStatus,
    name_subject,
    other_group,
    prepared_write,
    taken,
    target_of,
)
from devplace.store import Store, cas, stamp_created, stamp_updated

PATCH_ATTEMPTS = 64
"""Lost races a patch without a precondition retries (re-applied to the fresh object each time) before 409."""

_CREATE_ATTEMPTS = 3


@dataclass(frozen=True)
class _Request:
    """One PATCH request, parsed: what it addresses and how to apply it."""

    target: Target
    subresource: str
    kind: str
    name: str
    namespace: str
    patch_type: PatchType
    body: Any
    manager: str
    force: bool
    dry_run: bool
    validation: FieldValidation
    state: Any
    """The request's state: where `_checked` records the object a 422 names (`resources.name_subject`)."""


def _precondition(body: Any) -> str | None:
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return None if rv is None or rv == "" else str(rv)


def _stale(target: Target, given: str, current: str) -> errors.Conflict:
    group = target.api_version.rpartition("/")[0]
    resource = f"{target.info.plural}.{group}" if group else target.info.plural
    return errors.Conflict(
        f"Operation cannot be fulfilled on {resource} {json.dumps(target.name)}: the object has been modified "
        f"(resourceVersion {given} is stale, the object is at {current}); "
        "please apply your changes to the latest version and try again"
    )


def _revision(obj: Mapping[str, Any]) -> int:
    rv = str((obj.get("metadata") or {}).get("resourceVersion") or "0")
    return int(rv) if rv.isdigit() else 0


def _unchanged(current: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    def managed(obj: Mapping[str, Any]) -> Any:
        return (obj.get("metadata") or {}).get("managedFields")

    return (
        current.get("apiVersion") == new.get("apiVersion")
        and same(comparable(current), comparable(new))
        and same(managed(current), managed(new))
    )


_SCALE_API_VERSION = "autoscaling/v1"


def _check_apply_body(body: Mapping[str, Any], target: Target, subresource: str) -> None:
    """An apply body names the object the URL names (module docstring): else `Malformed` (400) naming each field."""
    api_version, kind = (
        (_SCALE_API_VERSION, "Scale") if subresource == "scale" else (target.api_version, target.info.kind)
    )
    problems: list[errors.FieldError] = []
    for field, wanted in (("apiVersion", api_version), ("kind", kind)):
        given = body.get(field)
        if given is None or given == "":
            problems.append(errors.FieldError(field, f"an apply patch names its {field}: {wanted}"))
        elif given != wanted:
            problems.append(errors.FieldError(field, f"{str(given)[:100]!r} does not match the URL's {wanted}"))
    meta = body.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    in_url = {"name": target.name, "namespace": target.namespace if target.info.namespaced else None}
    for field, expected in in_url.items():
        given = meta.get(field)
        if expected is not None and given not in (None, "") and given != expected:
            said = f"the {field} of the object ({str(given)[:100]}) does not match the {field} on the URL ({expected})"
            problems.append(errors.FieldError(f"metadata.{field}", said))
    if problems:
        raise errors.Malformed("; ".join(str(p) for p in problems), problems)


class _Patches:
    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def item(self, request: Request) -> Response:
        return await self._patch(request, "")

    async def status(self, request: Request) -> Response:
        return await self._patch(request, "status")

    async def scale(self, request: Request) -> Response:
        return await self._patch(request, "scale")

    async def _parse(self, request: Request, subresource: str) -> _Request:
        target = target_of(request)
        kind = target.info.kind
        if subresource == "status" and not has_status(kind):
            raise errors.NotFound(f"the server could not find the requested resource: {kind} has no status")
        if subresource == "scale" and kind not in SCALE_KINDS:
            raise errors.NotFound(f"the server could not find the requested resource: {kind} has no scale")
        strategic = root_of(kind, builtin_only=True) is not None
        patch_type = parse_patch_type(request.headers.get("content-type"), strategic=strategic)
        query = request.query_params
        dry = dry_run(query.getlist("dryRun"))
        validation = field_validation(query.get("fieldValidation"))
        raw_force = query.get("force")
        force = False
        if raw_force is not None:
            if patch_type != APPLY_PATCH:
                raise errors.Malformed.field("force", "force is only allowed for an apply patch")
            if raw_force.strip().lower() not in ("true", "false", "1", "0", ""):
                raise errors.Malformed.field("force", f"{raw_force[:40]!r} is not a boolean (true or false)")
            force = raw_force.strip().lower() in ("true", "1")
        field_manager = query.get("fieldManager")
        if patch_type == APPLY_PATCH and not field_manager:
            raise errors.Malformed.field("fieldManager", "fieldManager is required for apply requests")
        manager = manager_name(field_manager, request.headers.get("user-agent"))
        raw = await request.body()
        body: Any
        if patch_type == JSON_PATCH:
            body = parse_json_patch(raw)
        else:
            body = decode_body(raw, request.headers.get("content-type"))
        assert target.name is not None
        if patch_type == APPLY_PATCH:
            _check_apply_body(body, target, subresource)
        return _Request(
            target,
            subresource,
            kind,
            target.name,
            target.store_namespace,
            patch_type,
            body,
            manager,
            force,
            dry,
            validation,
            request.state,
        )

    async def _patch(self, request: Request, subresource: str) -> Response:
        req = await self._parse(request, subresource)
        warnings: list[str] = []
        decide = self._decision(req, warnings)
        status_code = 200
        try:
            if req.dry_run:
                current = await self.store.get(req.kind, req.name, req.namespace)
                decided = await decide(current)
                result = current if decided is None else stamp_updated(current, decided, _revision(current))
            else:
                result = await self._write(req, decide)
        except errors.NotFound:
            if req.patch_type != APPLY_PATCH or req.subresource:
                raise
            result = await self._create(req, decide, warnings)
            status_code = 201
        except RecursionError as e:
            raise errors.Malformed("the patch or the object is nested too deeply") from e
        result = scale_of(result) if req.subresource == "scale" else req.target.shown(result)
        response = ObjectResponse(result, status_code=status_code)
        for text in warnings:  # Kubernetes' warnings: one `Warning: 299 - "text"` header each (kubectl prints them)
            response.headers.append("Warning", f"299 - {json.dumps(text)}")
        return response

    async def _write(self, req: _Request, decide: Callable[[dict[str, Any]], Awaitable[Any]]) -> dict[str, Any]:
        written = await cas(self.store, req.kind, req.name, req.namespace, decide, attempts=PATCH_ATTEMPTS)
        return written.object

    async def _create(
        self, req: _Request, decide: Callable[[dict[str, Any]], Awaitable[Any]], warnings: list[str]
    ) -> dict[str, Any]:
        """An apply to an object that does not exist: create it (and if somebody else did meanwhile, patch theirs)."""
        for _ in range(_CREATE_ATTEMPTS):
            given = _precondition(req.body)
            if given is not None:
                raise errors.Conflict(
                    f"resourceVersion {given} is given but {req.target.describe()} does not exist; "
                    "remove metadata.resourceVersion to create it"
                )
            config = req.target.to_store(self._config(req, None))
            applied = server_side_apply(
                None,
                config,
                manager=req.manager,
                force=req.force,
                api_version=req.target.api_version,
                now=self.clock.now(),
            )
            obj = on_create(await self._checked(req, applied, warnings))
            obj["metadata"]["managedFields"] = applied["metadata"]["managedFields"]
            await admit_create(self.store, obj)
            if req.target.info.namespaced:
                await namespaces.check_creatable(self.store, req.namespace)
            if req.dry_run:  # what the create would store, as a dry-run POST answers it: no resourceVersion
                would = stamp_created(obj, 0, self.clock.now(), str(uuid.uuid4()))
                del would["metadata"]["resourceVersion"]
                return would
            try:
                return await self.store.create(obj)
            except errors.AlreadyExists as e:
                if await other_group(self.store, req.target, obj) is not None:  # nothing of this group to patch
                    raise await taken(self.store, req.target, obj) from e
                try:
                    return await self._write(req, decide)
                except errors.NotFound:
                    continue  # created and deleted again meanwhile: create once more
        raise errors.Conflict(f"{req.target.describe()} kept changing while it was being applied; try again")

    def _config(self, req: _Request, current: Mapping[str, Any] | None) -> dict[str, Any]:
        """An apply body as a full configuration of the object (kind, apiVersion and name default from the URL)."""
        config = dict(req.body)
        if req.subresource == "scale":
            replicas = (config.get("spec") or {}).get("replicas") if isinstance(config.get("spec"), Mapping) else None
            config = {"spec": {"replicas": replicas}} if replicas is not None else {}
            config["apiVersion"] = (current or {}).get("apiVersion") or req.target.api_version
            config["kind"] = req.kind
        elif req.subresource == "status":
            config = {k: v for k, v in config.items() if k in ("apiVersion", "kind", "metadata", "status")}
        config.setdefault("apiVersion", req.target.api_version)
        config.setdefault("kind", req.kind)
        meta = dict(config.get("metadata") or {}) if isinstance(config.get("metadata"), Mapping) else {}
        meta.setdefault("name", req.name)
        if req.target.info.namespaced:
            meta.setdefault("namespace", req.namespace)
        meta.pop("resourceVersion", None)
        config["metadata"] = meta
        return config

    async def _checked(self, req: _Request, obj: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
        """`obj` as PUT would store it (validated against the URL and the kind's schema; off the loop where PUT is).
        A 422 from here on names the object; one from applying the patch before names none, as Kubernetes'."""
        name_subject(req.state, req.target, req.name)
        return await prepared_write(obj, req.target.stored, validation=req.validation, warnings=warnings)

    def _decision(
        self, req: _Request, warnings: list[str]
    ) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]:
        """The compare-and-swap decision: the patch applied to the object as read (None: nothing changes)."""

        async def decide(current: dict[str, Any]) -> dict[str, Any] | None:
            req.target.check_group(current)
            meta = current.get("metadata") or {}
            rv = str(meta.get("resourceVersion") or "")
            given = _precondition(req.body) if req.patch_type != JSON_PATCH else None
            if given is not None and given != rv:
                raise _stale(req.target, given, rv)
            now = self.clock.now()
            managed: list[dict[str, Any]] | None = None
            requested: Any = None
            if req.patch_type == APPLY_PATCH:
                applied = server_side_apply(
                    current,
                    req.target.to_store(self._config(req, current)),
                    manager=req.manager,
                    force=req.force,
                    api_version=req.target.api_version,
                    now=now,
                    subresource=req.subresource,
                )
                managed = applied["metadata"]["managedFields"]
                new = with_status(current, applied) if req.subresource == "status" else applied
            else:
                view = scale_of(current) if req.subresource == "scale" else req.target.shown(current)
                patched = req.target.to_store(self._apply(req, view))
                if not isinstance(patched, dict):
                    raise errors.Invalid.field("", "the patched object must be a JSON object")
                patched_meta = patched.get("metadata")
                after = patched_meta.get("resourceVersion") if isinstance(patched_meta, Mapping) else None
                if after not in (None, "") and str(after) != rv:
                    raise _stale(req.target, str(after), rv)
                if isinstance(patched_meta, Mapping):  # a patch may write managedFields (kubectl's upgrade to SSA)
                    requested = patched_meta.get("managedFields")
                new = self._onto(req, current, patched)
            warnings.clear()  # a retry decides again: only the last decision's warnings are the answer's
            obj = await self._checked(req, new, warnings)
            obj["metadata"]["resourceVersion"] = rv
            if managed is None:
                managed = updated_managed_fields(
                    current,
                    obj,
                    manager=req.manager,
                    api_version=req.target.api_version,
                    now=now,
                    root=root_of(req.kind),
                    subresource=req.subresource,
                    requested=requested,
                )
            if managed:
                obj["metadata"]["managedFields"] = managed
            else:
                obj["metadata"].pop("managedFields", None)
            if _unchanged(current, obj):
                return None
            admit_update(current, obj)  # what this write replaces: it is guarded by current's resourceVersion
            return obj

        return decide

    def _apply(self, req: _Request, view: dict[str, Any]) -> Any:
        if req.patch_type == JSON_PATCH:
            return json_patch(view, req.body)
        if req.patch_type == MERGE_PATCH:
            return merge_patch(view, req.body)
        kind = "Scale" if req.subresource == "scale" else req.kind
        return strategic_merge(view, req.body, kind)

    @staticmethod
    def _onto(req: _Request, current: dict[str, Any], patched: dict[str, Any]) -> dict[str, Any]:
        """The whole object a patch of the target (object, status or scale) makes of `current`."""
        if req.subresource == "status":
            return with_status(current, patched)
        if req.subresource == "scale":
            if "spec" in patched and "replicas" in (patched.get("spec") or {}):
                return with_scale(current, patched)
            return copy.deepcopy(current)
        return patched


# -- routes -------------------------------------------------------------------------------------------------------

_MEDIA_TYPES = (MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)

_PATCH_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            **{media: {"schema": {"type": "object"}} for media in _MEDIA_TYPES},
            JSON_PATCH: {
                "schema": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["op", "path"],
                        "properties": {
                            "op": {"type": "string", "enum": ["add", "remove", "replace", "move", "copy", "test"]},
                            "path": {"type": "string"},
                            "from": {"type": "string"},
                            "value": {},
                        },
                    },
                }
            },
        },
    }
}

_PATCH_QUERY = [
    {"name": name, "in": "query", "required": False, "schema": {"type": "string"}, "description": text}
    for name, text in (
        ("fieldManager", "who makes the change (required for an apply patch)"),
        ("force", "apply: take over fields other managers own instead of failing with 409"),
        ("dryRun", "All: answer the result without storing it"),
        ("fieldValidation", "Strict (default), Warn or Ignore: what to do with fields the kind does not know"),
    )
]

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": KubeObject, "description": "the patched object (for /scale: the Scale)"},
    201: {"model": KubeObject, "description": "an apply patch created the object"},
    **{
        code: {"model": KubeStatus, "description": text}
        for code, text in [
            (400, "the patch does not parse, or a parameter is wrong (fieldManager missing for apply, ...)"),
            (404, "no such kind, scope, object or subresource"),
            (409, "a stale resourceVersion, or an apply conflict (`details.causes` names each field and owner)"),
            (413, "the body is larger than the server's limit"),
            (415, "the Content-Type is no patch type this kind takes"),
            (422, "the patch does not apply, or the result is invalid; `details.causes` names each field"),
        ]
    },
}


def _path_param(name: str, description: str, values: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "enum": values} if values else {"type": "string"}
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": description}


def _served(root: str, kinds: list[KindInfo]) -> list[str]:
    """Plurals of `kinds` served under /apis (root "apis") or /api (root "api")."""
    grouped = root == "apis"
    return sorted({k.plural for k in kinds if any(("/" in gv) == grouped for gv in k.group_versions)})


def router(store: Store, *, clock: Clock | None = None) -> APIRouter:
    """PATCH routes over `store`; `clock` stamps managedFields times (default: the system clock)."""
    handlers = _Patches(store, clock or SystemClock())
    api = APIRouter()
    kinds = registered_kinds()
    gvs = sorted({gv for k in kinds for gv in k.group_versions})
    groups = sorted({gv.split("/", 1)[0] for gv in gvs if "/" in gv})
    versions = sorted({gv.split("/", 1)[1] for gv in gvs if "/" in gv})
    roots = {
        "apis": (
            "/apis/{group}/{version}",
            [_path_param("group", "API group", groups), _path_param("version", "version in the group", versions)],
        ),
        "api": ("/api/{version}", [_path_param("version", "core API version", [gv for gv in gvs if "/" not in gv])]),
    }
    namespace = _path_param("namespace", "namespace of a namespaced kind")
    name = _path_param("name", "object name")
    status_kinds = [k for k in kinds if has_status(k.kind)]
    scale_kinds = [k for k in kinds if k.kind in SCALE_KINDS]
    for root, (prefix, root_params) in roots.items():
        for scope, ns_path, ns_params in (
            ("Namespaced", "/namespaces/{namespace}", [namespace]),
            ("", "", []),
        ):
            item = f"{prefix}{ns_path}/{{plural}}/{{name}}"
            op = f"{root.capitalize()}{scope}"
            subs: list[tuple[str, Callable[[Request], Awaitable[Response]], list[KindInfo], str]] = [
                ("", handlers.item, kinds, "Patch an object (merge, JSON, strategic merge or apply patch; one CAS)"),
                ("/status", handlers.status, status_kinds, "Patch an object's status"),
                ("/scale", handlers.scale, scale_kinds, "Patch a Deployment's Scale (spec.replicas)"),
            ]
            for suffix, handler, served, summary in subs:
                plurals = _served(root, served)
                if not plurals:
                    continue
                plural = _path_param("plural", "resource (plural kind), e.g. deployments", plurals)
                api.add_api_route(
                    item + suffix,
                    handler,
                    methods=["PATCH"],
                    operation_id=f"patch{op}{suffix.strip('/').capitalize()}",
                    summary=summary,
                    tags=["core" if root == "api" else "group resources"],
                    responses=_RESPONSES,
                    openapi_extra={
                        "parameters": [*root_params, *ns_params, plural, name, *_PATCH_QUERY],
                        **_PATCH_BODY,
                    },
                )
    return api
