"""The Kubernetes-style resource API over a `Store`, served so that kubectl and Kubernetes clients work unchanged.

Paths (the kind's scope, from the registry, decides which exist; anything else is a 404 `Status`):

    /apis/{group}/{version}/[namespaces/{namespace}/]{plural}[/{name}[/status|/scale]]   devplace.io, akri.sh, apps...
    /api/v1/[namespaces/{namespace}/]{plural}[/{name}[/status]]                           core kinds (Node, Pod, ...)

A namespaced kind at the cluster path lists (and watches) across namespaces; it has no item or create route there.
Verbs: POST create (201), GET read, GET list, GET list with `watch=1`, PUT update (compare-and-swap: the body's
resourceVersion must be current, else 409), DELETE. Every body must pass `devplace.api.normalize` and is stored as
written (`api.manifests.validated`); names and namespaces in the URL must agree with the body; then the rules that
need stored objects (`scheduler.admissions`: ResourceClass spec immutable, class references that exist and form no
cycle). The kinds whose validation compiles CEL selectors (`CEL_KINDS`: DeviceClass, ResourceClaim,
ResourceClaimTemplate) are validated off the event loop: a 3 MiB body of distinct 10 KiB selectors takes seconds to
compile and check, and other requests are answered meanwhile. Objects come back as stored: an `akri.sh/v0`
Configuration stays `akri.sh/v0` when read through the `devplace.io` path (both name one kind).

Reads: list and item GETs (and watches) answer a `meta.k8s.io` `Table` to a client that asks for one
(`server.representations`; the columns are `kubeapi.tables`', those `devplace get` prints). Lists page with `limit` and
`continue` and honour `resourceVersion`/`resourceVersionMatch` (`server.lists` says what consistency pages have).
Selectors are filtered by the store, so a client receives only what it asked for. A field selector may name
`metadata.name`, `metadata.namespace` and the fields the kind declares (`api.selectors.FIELD_LABELS`); any other is
refused with 400 `BadRequest` naming `fieldSelector`, as Kubernetes does ("field label not supported").
Watches are `server.watches`: `application/json;stream=watch`, bookmarks, `timeoutSeconds`, 410 as an ERROR event.
A Kubernetes (JSON) watch without a resourceVersion, or from "0", starts with the current objects as ADDED events,
as Kubernetes' does; an NDJSON watch (devplace's remote store) starts exactly after its resourceVersion, or now.

Subresources: `.../{name}/status` (GET, PUT) on every kind whose model has a status (`kubeapi.subresources.has_status`)
writes only `status` (the rest of the body is ignored, as Kubernetes does), and `deployments/{name}/scale` (GET,
PUT) reads and writes `spec.replicas` through an `autoscaling/v1` `Scale` (`kubectl scale`). Both write by
compare-and-swap: against the body's resourceVersion when it has one (stale: 409), else against the object as read.
Departure from Kubernetes: for kinds with a status subresource, Kubernetes' main-resource PUT ignores `status`;
devplace's writes the whole object, status included, because devplace's own parts and the remote store backend
write full objects through it (`status` is what the controller and the scheduler report, and they write it with
the object they read).

Writes take Kubernetes' options:
- `dryRun=All` (POST, PUT, DELETE and the subresource PUTs): the write is validated and admitted as usual, the
  preconditions are checked (an existing name is 409, a stale resourceVersion 409), nothing is stored, and the
  answer is the object as it would be stored (a create's with a uid and creationTimestamp, no resourceVersion). Any
  other value is 400 naming `dryRun`.
- `fieldValidation=Strict|Warn|Ignore` (unset: Strict; any other value 400). devplace's own kinds have a schema, and
  a field it does not know is refused with 422 naming it under `Strict`, dropped with a `Warning: 299` header per
  field under `Warn`, and dropped silently under `Ignore` (what `kubectl --validate=false` sends). Departures: unset
  means `Strict` (Kubernetes defaults to `Warn`, and a typo in a device Configuration is better refused than
  dropped); the built-in kinds (Pod, Deployment, ...) keep fields devplace does not model under every setting, as
  they are stored as written; duplicate JSON keys are not detected (the last one wins).
- DELETE takes `DeleteOptions` as a body or as query parameters (the body's fields win): `preconditions` (uid,
  resourceVersion; stale: 409), `dryRun`, `gracePeriodSeconds` (a non-negative integer) and `propagationPolicy`
  (Orphan, Background or Foreground; `orphanDependents` and `propagationPolicy` together are refused, as Kubernetes
  refuses them). devplace has no garbage collector and no graceful termination: the object is deleted at once
  whatever the grace period, and its dependents (objects whose ownerReferences name it) are left as they are under
  every policy; the parts that own objects (the controller's brokers) clean up after the objects they follow.

Store-level operations the Kubernetes API has no path for live under `/store`: the current revision, compaction,
and a watch across every kind. The remote store backend uses them.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Literal

import anyio.to_thread
import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from devplace import errors
from devplace.api import bound_pod, validated
from devplace.api import kinds as registered_kinds
from devplace.clocks import Clock, SystemClock
from devplace.kubeapi import (
    DELETE_QUERY,
    LIST_QUERY,
    SCALE_KINDS,
    WRITE_QUERY,
    Parameter,
    has_status,
    is_builtin,
    manager_name,
    recorded,
    scale_of,
    with_scale,
    with_status,
)
from devplace.scheduler import admit_create, admit_update
from devplace.server import _lists as lists
from devplace.server import _namespaces as namespaces
from devplace.server import _statuses as http_errors
from devplace.server import _watches as watches
from devplace.server._bodies import decode_body
from devplace.server._representations import ObjectResponse, Representation, negotiate
from devplace.server._requests import (
    FieldValidation,
    Target,
    aligned_body,
    check_selectors,
    delete_options,
    dry_run,
    field_validation,
    on_create,
    prepare_write,
    query_flag,
    query_revision,
    query_timeout,
    resolve,
    with_field_validation,
)
from devplace.server._watches import NDJSON, WATCH_JSON
from devplace.store import (
    STORE_CLIENT_HEADER,
    EncodedObject,
    Store,
    cas,
    key_fields,
    key_of,
    resource_version_of,
    rfc3339,
    stamp_created,
    stamp_updated,
)

DELETE_ATTEMPTS = 8
"""Reads a DELETE that must see the object first (a uid precondition, a group check) makes while others write it."""

DEFAULT_BOOKMARK_INTERVAL = 60.0
"""Seconds between BOOKMARK events on a watch that allows them (Kubernetes sends about one a minute)."""


# -- documentation models (OpenAPI only; responses are built as plain dicts) ----------------------------------------


async def prepared_write(
    body: Mapping[str, Any], target: Target, *, validation: FieldValidation, warnings: list[str]
) -> dict[str, Any]:
    """`prepare_write`, in a worker thread for the kinds whose validation compiles CEL (`CEL_KINDS`, module
    docstring): every write of them, create, update, patch or apply, so a heavy valid claim never stalls the loop."""
    if target.info.kind not in CEL_KINDS:
        return prepare_write(body, target, validation=validation, warnings=warnings)
    prepare = functools.partial(prepare_write, body, target, validation=validation, warnings=warnings)
    return await anyio.to_thread.run_sync(prepare)


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

    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
    object: dict[str, Any]


class StoreRevision(BaseModel):
    revision: int


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


_LIST_OPENAPI = [p.openapi3() for p in LIST_QUERY]
_STORE_WATCH_QUERY = frozenset({"kind", "namespace", "sendInitialEvents", *(p.name for p in LIST_QUERY)})
"""The parameters /store/watch reads (`store_watch` refuses any other)."""
_WRITE_OPENAPI = [p.openapi3() for p in WRITE_QUERY]
_DELETE_OPENAPI = [p.openapi3() for p in DELETE_QUERY]


def _not_acceptable(accept: str | None) -> Response:
    message = f"only application/json and Tables (as=Table;g=meta.k8s.io;v=v1) are served, not {str(accept)[:200]!r}"
    return JSONResponse(http_errors.protocol_status_body(406, "NotAcceptable", message), status_code=406)


def _with_warnings(response: Response, warnings: list[str]) -> Response:
    """Kubernetes' warnings: one `Warning: 299 - "text"` header each (kubectl prints them)."""
    for text in warnings:
        response.headers.append("Warning", f"299 - {json.dumps(text)}")
    return response


CEL_KINDS = frozenset({"DeviceClass", "ResourceClaim", "ResourceClaimTemplate"})
"""Kinds whose validation compiles CEL selectors (`api.dra`), validated off the event loop (module docstring)."""


def _check_resource_version(target: Target, expected: str | None, current: Mapping[str, Any]) -> None:
    """A write's precondition: `expected` (from the body) is the stored object's resourceVersion."""
    stored = str((current.get("metadata") or {}).get("resourceVersion"))
    if expected is not None and expected != stored:
        raise errors.Conflict(
            f"Operation cannot be fulfilled on {target.describe()}: the object has been modified; please apply your "
            f"changes to the latest version and try again (resourceVersion {expected} is stale, current is {stored})"
        )


def _shown(target: Target, item: EncodedObject) -> EncodedObject:
    """A listed object's JSON as `target` shows it (`Target.shown`)."""
    return EncodedObject(item.namespace, item.name, orjson.dumps(target.shown(orjson.loads(item.body))))


def _managed(body: Mapping[str, Any]) -> Any:
    """The `managedFields` a write's body gives (None: none): a client may write them (`kubeapi.managedfields`)."""
    meta = body.get("metadata")
    return meta.get("managedFields") if isinstance(meta, Mapping) else None


def _expected_version(body: Mapping[str, Any]) -> str | None:
    meta = body.get("metadata")
    raw = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    if raw is None or raw == "":
        return None
    return str(query_revision("metadata.resourceVersion", str(raw)))


def name_subject(state: Any, target: Target, name: Any) -> None:
    """Record in a request's `state` the object its write names (the URL's group and kind, the object's name): a
    422 from then on names it (`statuses.Subject`; the app's error handler reads it)."""
    group = target.api_version.rpartition("/")[0]
    state.subject = http_errors.Subject(group, target.info.kind, name if isinstance(name, str) else "")


def _body_name(body: Mapping[str, Any]) -> Any:
    meta = body.get("metadata")
    return meta.get("name") if isinstance(meta, Mapping) else None


def target_of(request: Request, *, creating: bool = False) -> Target:
    """What a resource request's path addresses (`requests.resolve`), for devplace's remote store kind-wide."""
    params = request.path_params
    api_version = f"{params['group']}/{params['version']}" if "group" in params else str(params["version"])
    kind_wide = request.headers.get(STORE_CLIENT_HEADER, "").strip().lower() == "kinds"
    return resolve(
        api_version,
        params["plural"],
        params.get("namespace"),
        params.get("name"),
        creating=creating,
        kind_wide=kind_wide,
    )


async def other_group(store: Store, target: Target, obj: Mapping[str, Any]) -> str | None:
    """The apiVersion of another group's object of the kind that holds `obj`'s name, or None (the groups keep apart
    objects, `requests.separate_groups`, under one set of names per kind)."""
    if not target.separate:
        return None
    kind, namespace, name = key_fields(obj)
    try:
        held = await store.get(kind, name, namespace)
    except errors.NotFound:
        return None
    stored = held.get("apiVersion")
    return str(stored) if stored != target.api_version else None


async def taken(store: Store, target: Target, obj: Mapping[str, Any]) -> errors.AlreadyExists:
    """Kubernetes' 409 for a create whose name is taken, naming the group of the object that holds it when that is
    another group (`other_group`)."""
    name = key_fields(obj)[2]
    message = f"{target.resource} {json.dumps(name)} already exists"
    held_as = await other_group(store, target, obj)
    if held_as is not None:
        message += f" as a {held_as} {target.info.kind} (devplace keeps one name per kind across its groups)"
    return errors.AlreadyExists(message)


RETURNS_DELETED = frozenset(
    {
        "Namespace",
        "Pod",
        "Service",
        "ServiceAccount",
        "PersistentVolumeClaim",
        "ResourceClaim",
        "ResourceClaimTemplate",
    }
)
"""Built-in kinds whose DELETE answers the object (Kubernetes' registries that return it: graceful deletion, a
Namespace while it terminates, ...); every other built-in kind answers a `Status`, and custom resources answer the
object."""


def deleted_answer(target: Target, obj: dict[str, Any]) -> dict[str, Any]:
    """What a DELETE answers, as Kubernetes does (`RETURNS_DELETED`): the object, or a `Status` of `Success` whose
    details name it (`kind` is the resource, as Kubernetes writes it). devplace's remote store always gets the object
    (`Target.kind_wide`: the Store protocol's delete returns it)."""
    if target.kind_wide or not is_builtin(target.api_version) or target.info.kind in RETURNS_DELETED:
        return obj
    meta = obj.get("metadata") or {}
    group = target.api_version.rpartition("/")[0]
    details: dict[str, Any] = {"name": meta.get("name"), **({"group": group} if group else {})}
    details.update(kind=target.info.plural, uid=meta.get("uid"))
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


class _Routes:
    """Handlers bound to one store. Each reads its path parameters from the request (see `router`)."""

    def __init__(self, store: Store, clock: Clock, bookmark_interval: float) -> None:
        self.store = store
        self.clock = clock
        self.bookmark_interval = bookmark_interval

    @staticmethod
    def _target(request: Request, *, creating: bool = False) -> Target:
        return target_of(request, creating=creating)

    async def _body(self, request: Request) -> dict[str, Any]:
        return decode_body(await request.body(), request.headers.get("content-type"))

    # -- reads ------------------------------------------------------------------------------------------------------

    async def collection_get(self, request: Request) -> Response:
        target = self._target(request)
        query = request.query_params
        kind, namespace = target.info.kind, target.list_namespace
        check_selectors(kind, namespace, query, target)
        if kind == "Namespace":
            await namespaces.ensure_default(self.store)
        selector, fields = query.get("labelSelector") or None, target.with_group(query.get("fieldSelector") or None)
        shown = negotiate(request.headers.get("accept"), query.get("includeObject"))
        if shown is None:
            return _not_acceptable(request.headers.get("accept"))
        if query_flag("watch", query.get("watch")):
            return await self._watch(request, kind, namespace, target, shown)
        options = lists.list_options(query)
        page = await self.store.list_page(
            kind,
            namespace,
            selector,
            fields=fields,
            after=lists.after(options),
            limit=options.limit or lists.MAX_LIST_ITEMS,
            max_bytes=lists.MAX_LIST_BYTES,
        )
        lists.check_revision(options, page.revision)
        if options.continue_from is not None:
            await self._check_continuable(kind, namespace, selector, fields, options.continue_from.revision)
        metadata = lists.list_metadata(page, options, selected=selector is not None or fields is not None)
        items = page.items
        if target.events_view and shown.table is None:  # the view's form; a Table's rows read the stored form
            items = [
                EncodedObject(i.namespace, i.name, orjson.dumps(target.shown(orjson.loads(i.body)))) for i in items
            ]
        body = shown.list_chunks(kind, target.api_version, items, metadata, self.clock.now())
        return StreamingResponse(body, media_type="application/json")

    async def _check_continuable(
        self, kind: str, namespace: str | None, selector: str | None, fields: str | None, revision: int
    ) -> None:
        """A continue token is good while a watch from its revision is (`server.lists`): else 410 Expired."""
        try:
            async with self.store.watch(kind, namespace, since=revision, selector=selector, fields=fields):
                pass
        except errors.Gone as e:
            raise errors.Gone(
                "The provided continue parameter is too old to display a consistent list result. You can start a "
                f"new list without the continue parameter ({e.message})"
            ) from e

    async def _watch(
        self,
        request: Request,
        kind: str | None,
        namespace: str | None,
        target: Target | None = None,
        shown: Representation | None = None,
    ) -> Response:
        """A watch (`server.watches`). To a Kubernetes client (JSON) a watch without a resourceVersion, or from
        "0", starts with the current objects as ADDED events, as Kubernetes' does; NDJSON (devplace's remote store)
        starts exactly after the given revision, or now."""
        query = request.query_params
        rv = query.get("resourceVersion")
        since = query_revision("resourceVersion", rv) if rv else None
        timeout = query_timeout(query.get("timeoutSeconds"))
        if query_flag("sendInitialEvents", query.get("sendInitialEvents")):
            raise errors.Invalid.field("sendInitialEvents", "is not supported: list, then watch from the list")
        media_type = watches.watch_media_type(request.headers.get("accept"), store_protocol=target is None)
        selector, fields = query.get("labelSelector") or None, query.get("fieldSelector") or None
        if target is not None:
            fields = target.with_group(fields)
        initial = None
        if target is not None and kind is not None and media_type == WATCH_JSON and not since:
            first = await self.store.list_page(
                kind, namespace, selector, fields=fields, limit=lists.MAX_LIST_ITEMS, max_bytes=lists.MAX_LIST_BYTES
            )
            since = first.revision
            initial = lists.every_object(self.store, kind, namespace, selector, fields, first)
        stream = self.store.watch(kind, namespace, since=since, selector=selector, fields=fields)
        render = None
        if shown is not None and shown.table is not None and kind is not None:
            table_kind = kind

            def render(obj: dict[str, Any], first: bool) -> dict[str, Any]:
                return shown.item_body(table_kind, obj, self.clock.now(), definitions=first)

        elif target is not None and target.events_view:
            view = target

            def render(obj: dict[str, Any], first: bool) -> dict[str, Any]:
                return view.shown(obj)

        bookmarks = None
        if query_flag("allowWatchBookmarks", query.get("allowWatchBookmarks")) and target is not None:
            api_version = target.api_version
            bookmarks = watches.Bookmarks(target.info.kind, api_version, self.bookmark_interval, self.clock)
        return await watches.watch_response(
            stream, timeout=timeout, media_type=media_type, render=render, bookmarks=bookmarks, initial=initial
        )

    async def item_get(self, request: Request) -> Response:
        target = self._target(request)
        assert target.name is not None
        shown = negotiate(request.headers.get("accept"), request.query_params.get("includeObject"))
        if shown is None:
            return _not_acceptable(request.headers.get("accept"))
        if target.info.kind == "Namespace":
            await namespaces.ensure_default(self.store)
        obj = target.check_group(await self.store.get(target.info.kind, target.name, target.store_namespace))
        if shown.table is None:
            obj = target.shown(obj)
        return ObjectResponse(shown.item_body(target.info.kind, obj, self.clock.now()))

    # -- writes -----------------------------------------------------------------------------------------------------

    async def collection_post(self, request: Request) -> Response:
        target = self._target(request, creating=True)
        query = request.query_params
        dry = dry_run(query.getlist("dryRun"))
        warnings: list[str] = []
        validation = field_validation(query.get("fieldValidation"))
        body = target.to_store(await self._body(request))
        name_subject(request.state, target, _body_name(body))
        obj = on_create(await prepared_write(body, target.stored, validation=validation, warnings=warnings))
        manager = manager_name(query.get("fieldManager"), request.headers.get("user-agent"))
        obj = recorded(
            None, obj, manager=manager, api_version=target.api_version, now=self.clock.now(), requested=_managed(body)
        )
        await admit_create(self.store, obj)
        if target.info.namespaced:
            await namespaces.check_creatable(self.store, key_fields(obj)[1])
        try:
            created = await self._dry_create(obj) if dry else await self.store.create(obj)
        except errors.AlreadyExists as e:
            raise await taken(self.store, target, obj) from e
        return _with_warnings(ObjectResponse(target.shown(created), status_code=201), warnings)

    async def _dry_create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """What a create would store, without storing it: 409 if the name is taken; no resourceVersion."""
        kind, namespace, name = key_fields(obj)
        try:
            await self.store.get(kind, name, namespace)
        except errors.NotFound:
            would = stamp_created(obj, 0, self.clock.now(), str(uuid.uuid4()))
            del would["metadata"]["resourceVersion"]
            return would
        raise errors.AlreadyExists(f"{key_of(obj)} already exists")

    async def item_put(self, request: Request) -> Response:
        target = self._target(request)
        name_subject(request.state, target, target.name)
        query = request.query_params
        dry = dry_run(query.getlist("dryRun"))
        warnings: list[str] = []
        validation = field_validation(query.get("fieldValidation"))
        body = target.to_store(await self._body(request))
        obj = await prepared_write(body, target.stored, validation=validation, warnings=warnings)
        manager = manager_name(query.get("fieldManager"), request.headers.get("user-agent"))
        try:  # managedFields: what this update changed is now the manager's (kubeapi.managedfields)
            old = await self.store.get(target.info.kind, str(target.name), target.store_namespace)
        except errors.NotFound:
            old = None
        if old is not None:
            target.check_group(old)
        obj = recorded(
            old, obj, manager=manager, api_version=target.api_version, now=self.clock.now(), requested=_managed(body)
        )
        if old is not None:  # the admission rules against what the write replaces: a change meanwhile makes it conflict
            admit_update(old, obj)
        if dry:
            current = await self.store.get(target.info.kind, str(target.name), target.store_namespace)
            expected = str(resource_version_of(obj))
            _check_resource_version(target, expected, current)
            return _with_warnings(ObjectResponse(target.shown(stamp_updated(current, obj, int(expected)))), warnings)
        return _with_warnings(ObjectResponse(target.shown(await self.store.update(obj))), warnings)

    async def item_delete(self, request: Request) -> Response:
        target = self._target(request)
        assert target.name is not None
        raw = await request.body()
        body = decode_body(raw, request.headers.get("content-type")) if raw.strip() else None
        query = request.query_params
        options = delete_options(body, query, query.getlist("dryRun"))
        pre = options.preconditions
        kind, name, ns = target.info.kind, target.name, target.store_namespace
        if kind == "Namespace" and not options.dry_run and pre.uid is None:  # with everything in it
            gone = await namespaces.delete_namespace(self.store, name, resource_version=pre.resource_version)
            return ObjectResponse(deleted_answer(target, gone))
        if pre.uid is None and not options.dry_run and not target.separate:
            gone = await self.store.delete(kind, name, ns, resource_version=pre.resource_version)
            return ObjectResponse(deleted_answer(target, gone))
        for attempt in range(DELETE_ATTEMPTS):  # the object must be read first: its uid, or its group
            current = target.check_group(await self.store.get(kind, name, ns))
            meta = current["metadata"]
            if pre.uid is not None and meta.get("uid") != pre.uid:
                raise errors.Conflict(
                    f"{target.describe()}: precondition failed: uid {pre.uid} does not match {meta.get('uid')}"
                )
            rv = pre.resource_version
            if rv is not None and rv != meta.get("resourceVersion"):
                raise errors.Conflict(
                    f"{target.describe()}: precondition failed: resourceVersion {rv} is stale "
                    f"(current is {meta.get('resourceVersion')})"
                )
            if options.dry_run:
                return ObjectResponse(deleted_answer(target, current))
            try:  # deleted only as read (what was checked is what goes); a write meanwhile: read again
                gone = await self.store.delete(kind, name, ns, resource_version=str(meta.get("resourceVersion")))
            except errors.Conflict:
                if rv is not None or attempt == DELETE_ATTEMPTS - 1:
                    raise
                continue
            return ObjectResponse(deleted_answer(target, gone))
        raise AssertionError("unreachable: the last attempt returns or raises")

    # -- subresources -----------------------------------------------------------------------------------------------

    def _subresource_target(self, request: Request, subresource: str) -> Target:
        target = self._target(request)
        name_subject(request.state, target, target.name)
        kind = target.info.kind
        served = has_status(kind) if subresource == "status" else kind in SCALE_KINDS
        if not served:
            raise errors.NotFound(
                f"the server could not find the requested resource: {target.info.plural} has no {subresource} "
                "subresource"
            )
        return target

    async def status_get(self, request: Request) -> Response:
        target = self._subresource_target(request, "status")
        obj = await self.store.get(target.info.kind, str(target.name), target.store_namespace)
        return ObjectResponse(target.check_group(obj))

    async def status_put(self, request: Request) -> Response:
        """Replace `status` only (module docstring), by compare-and-swap."""
        target = self._subresource_target(request, "status")
        incoming = aligned_body(await self._body(request), target)
        expected = _expected_version(incoming)
        validation = field_validation(request.query_params.get("fieldValidation"))
        warnings: list[str] = []
        record = self._recorder(request, target, "status")

        def decide(current: dict[str, Any]) -> dict[str, Any]:
            target.check_group(current)
            _check_resource_version(target, expected, current)
            new = record(current, with_field_validation(with_status(current, incoming), validation, warnings))
            admit_update(current, new)
            return new

        written = await self._write(target, decide, dry_run(request.query_params.getlist("dryRun")))
        return _with_warnings(ObjectResponse(written), warnings)

    async def binding_post(self, request: Request) -> Response:
        """Bind a Pod to a Node (`pods/{name}/binding`, what a scheduler POSTs): `api.bound_pod` by compare-and-swap;
        201 with a `Status` of `Success`; 409 for a Pod already bound, as Kubernetes answers."""
        target = self._target(request)
        name_subject(request.state, target, target.name)
        if target.info.kind != "Pod":
            raise errors.NotFound(
                f"the server could not find the requested resource: {target.info.plural} has no binding subresource"
            )
        return await self._bind(request, target.store_namespace, str(target.name))

    async def bindings_post(self, request: Request) -> Response:
        """`POST /api/v1/namespaces/{namespace}/bindings`, the older form (the official Python client's
        `create_namespaced_binding`): the Binding's `metadata.name` names the Pod."""
        return await self._bind(request, str(request.path_params["namespace"]), None)

    async def _bind(self, request: Request, namespace: str, name: str | None) -> Response:
        body = await self._body(request)
        if body.get("kind") not in (None, "Binding"):
            raise errors.Invalid.field("kind", f"must be Binding, not {body.get('kind')!r}")
        meta = body.get("metadata")
        named = meta.get("name") if isinstance(meta, Mapping) else None
        if name is None:
            if not isinstance(named, str) or not named:
                raise errors.Invalid.field("metadata.name", "required: the name of the Pod to bind")
            name = named
        elif named not in (None, "", name):
            raise errors.Invalid.field("metadata.name", f"must be the pod's name {name!r}, not {named!r}")
        now = rfc3339(self.clock.now())

        def decide(current: dict[str, Any]) -> dict[str, Any]:
            new = bound_pod(current, body, now)
            admit_update(current, new)
            return new

        if not dry_run(request.query_params.getlist("dryRun")):
            await cas(self.store, "Pod", name, namespace, decide, clock=self.clock)
        else:
            decide(await self.store.get("Pod", name, namespace))
        answer = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        return ObjectResponse(answer, status_code=201)

    async def scale_get(self, request: Request) -> Response:
        target = self._subresource_target(request, "scale")
        obj = await self.store.get(target.info.kind, str(target.name), target.store_namespace)
        return ObjectResponse(scale_of(target.check_group(obj)))

    async def scale_put(self, request: Request) -> Response:
        """Set `spec.replicas` from a `Scale` (`kubectl scale`), by compare-and-swap; answers the new Scale."""
        target = self._subresource_target(request, "scale")
        scale = await self._body(request)
        expected = _expected_version(scale)
        record = self._recorder(request, target, "scale")

        def decide(current: dict[str, Any]) -> dict[str, Any]:
            target.check_group(current)
            _check_resource_version(target, expected, current)
            new = record(current, validated(with_scale(current, scale)))
            admit_update(current, new)
            return new

        written = await self._write(target, decide, dry_run(request.query_params.getlist("dryRun")))
        return ObjectResponse(scale_of(written))

    def _recorder(
        self, request: Request, target: Target, subresource: str
    ) -> Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]:
        """`(old, new) -> new` with the managedFields a write through `subresource` by this request's manager
        leaves (`kubeapi.managedfields`)."""
        manager = manager_name(request.query_params.get("fieldManager"), request.headers.get("user-agent"))

        def record(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
            return recorded(
                old, new, manager=manager, api_version=target.api_version, now=self.clock.now(), subresource=subresource
            )

        return record

    async def _write(
        self, target: Target, decide: Callable[[dict[str, Any]], dict[str, Any]], dry: bool
    ) -> dict[str, Any]:
        """`decide` on the stored object and write its result by compare-and-swap (re-deciding on a conflict); a
        dry run decides on the object as read and stores nothing."""
        kind, name, namespace = target.info.kind, str(target.name), target.store_namespace
        if dry:
            current = await self.store.get(kind, name, namespace)
            revision = int(str(current["metadata"]["resourceVersion"]))
            return stamp_updated(current, decide(current), revision)
        written = await cas(self.store, kind, name, namespace, decide, clock=self.clock)
        return written.object

    # -- /store -----------------------------------------------------------------------------------------------------

    async def store_revision(self, request: Request) -> Response:
        return ObjectResponse({"revision": await self.store.revision()})

    async def store_compact(self, request: Request) -> Response:
        """Compact the store's history up to `revision`; 422 for one beyond the current revision (the store refuses
        it, naming `revision`). With authentication on, only admins may (`server.authz`)."""
        body = await self._body(request)
        raw = body.get("revision")
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            raise errors.Invalid.field("revision", "must be a non-negative integer")
        await self.store.compact(raw)
        return ObjectResponse({"revision": raw})

    async def store_watch(self, request: Request) -> Response:
        """A watch across kinds. Its parameters are devplace's own, so one it does not take is refused (400 naming
        it) rather than ignored: a watch that silently starts elsewhere than asked is worse than none."""
        query = request.query_params
        unknown = sorted(set(query.keys()) - _STORE_WATCH_QUERY)
        if unknown:
            hint = " (the revision to start after is resourceVersion)" if "revision" in unknown else ""
            raise errors.Malformed(
                f"/store/watch does not take {', '.join(repr(n[:40]) for n in unknown[:5])}{hint}; it takes "
                f"{', '.join(sorted(_STORE_WATCH_QUERY))}",
                [errors.FieldError(n[:100], "not a parameter of /store/watch") for n in unknown[:20]],
            )
        kind = query.get("kind") or None
        namespace = query.get("namespace")
        check_selectors(kind, namespace, query)
        return await self._watch(request, kind, namespace)


def _group_versions() -> list[str]:
    seen: dict[str, None] = {}
    for info in registered_kinds():
        for gv in info.group_versions:
            seen.setdefault(gv, None)
    return sorted(seen)


def _param_sets() -> dict[str, list[dict[str, Any]]]:
    """Path parameters of the two roots, with the registry's groups, versions and plurals as enums (docs only)."""
    kinds = registered_kinds()
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


def _subresource_routes(
    api: APIRouter, routes: _Routes, item: str, item_params: list[dict[str, Any]], op: str, tag: str
) -> None:
    """`{item}/status` (kinds with a status) and `{item}/scale` (Deployments): GET and PUT."""
    status_body = {"model": KubeObject, "description": "the object"}
    for verb, handler, summary in (
        ("GET", routes.status_get, "Read an object (its status subresource)"),
        ("PUT", routes.status_put, "Replace an object's status only (compare-and-swap)"),
    ):
        api.add_api_route(
            f"{item}/status",
            handler,
            methods=[verb],
            operation_id=f"{verb.lower()}Status{op}",
            summary=summary,
            tags=[tag],
            responses={200: status_body, **_ERRORS},
            openapi_extra={"parameters": [*item_params, *(_WRITE_OPENAPI if verb == "PUT" else [])]}
            | (_OBJECT_BODY if verb == "PUT" else {}),
        )
    api.add_api_route(
        f"{item}/binding",
        routes.binding_post,
        methods=["POST"],
        operation_id=f"createBinding{op}",
        summary="Bind a Pod to a Node (pods/binding; 409 for a Pod already bound)",
        tags=[tag],
        status_code=201,
        responses={201: {"description": "a Status of Success"}, **_ERRORS},
        openapi_extra={"parameters": [*item_params, _WRITE_OPENAPI[0]], **_OBJECT_BODY},
    )
    scale_body = {"description": "an autoscaling/v1 Scale"}
    for verb, handler, summary in (
        ("GET", routes.scale_get, "Read a Deployment's Scale"),
        ("PUT", routes.scale_put, "Set a Deployment's spec.replicas from a Scale (compare-and-swap)"),
    ):
        api.add_api_route(
            f"{item}/scale",
            handler,
            methods=[verb],
            operation_id=f"{verb.lower()}Scale{op}",
            summary=summary,
            tags=[tag],
            responses={200: scale_body, **_ERRORS},
            openapi_extra={"parameters": [*item_params, *([_WRITE_OPENAPI[0]] if verb == "PUT" else [])]},
        )


def router(
    store: Store, *, clock: Clock | None = None, bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL
) -> APIRouter:
    """Every resource route over `store`. Handlers take only the request; OpenAPI is described explicitly.

    `clock` dates Table ages and paces watch bookmarks, one every `bookmark_interval` seconds (`server.watches`)."""
    if bookmark_interval <= 0:
        raise errors.Invalid.field("bookmark_interval", "must be positive")
    routes = _Routes(store, clock or SystemClock(), bookmark_interval)
    api = APIRouter()
    api.add_api_route(
        "/api/v1/namespaces/{namespace}/bindings",
        routes.bindings_post,
        methods=["POST"],
        operation_id="createNamespacedBinding",
        summary="Bind the Pod a Binding's metadata.name names to a Node (409 for a Pod already bound)",
        tags=["core"],
        status_code=201,
        responses={201: {"description": "a Status of Success"}, **_ERRORS},
        openapi_extra={"parameters": [_path_param("namespace", "namespace"), _WRITE_OPENAPI[0]], **_OBJECT_BODY},
    )
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
                summary="List objects (a Table on request, paged with limit), or watch them with watch=1",
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
                openapi_extra={"parameters": [*path_params, *_LIST_OPENAPI]},
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
                openapi_extra={"parameters": [*path_params, *_WRITE_OPENAPI], **_OBJECT_BODY},
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
                responses={200: {"model": KubeObject, "description": "the object, or a Table on request"}, **_ERRORS},
                openapi_extra={
                    "parameters": [*item_params, *[p for p in _LIST_OPENAPI if p["name"] == "includeObject"]]
                },
            )
            api.add_api_route(
                item,
                routes.item_put,
                methods=["PUT"],
                operation_id=f"replace{op}",
                summary="Replace an object (compare-and-swap on metadata.resourceVersion)",
                tags=[tag],
                responses={200: {"model": KubeObject, "description": "the stored object"}, **_ERRORS},
                openapi_extra={"parameters": [*item_params, *_WRITE_OPENAPI], **_OBJECT_BODY},
            )
            api.add_api_route(
                item,
                routes.item_delete,
                methods=["DELETE"],
                operation_id=f"delete{op}",
                summary="Delete an object (optionally only at a given resourceVersion)",
                tags=[tag],
                responses={200: {"model": KubeObject, "description": "the object as last stored"}, **_ERRORS},
                openapi_extra={"parameters": [*item_params, *_DELETE_OPENAPI]},
            )
            _subresource_routes(api, routes, item, item_params, op, tag)

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
                Parameter("kind", "string", "only this kind", None).openapi3(),
                Parameter("namespace", "string", 'only this namespace ("" for cluster-scoped)', None).openapi3(),
                *[p for p in _LIST_OPENAPI if p["name"] != "watch"],
            ]
        },
    )
    return api
