"""Which devices a class selects, as a read-only subresource (the dashboard's Classes view reads it; issue 30):

    GET /apis/devplace.io/v1alpha1/resourceclasses/{name}/devices     the Instances a ResourceClass matches
    GET /apis/resource.k8s.io/v1/deviceclasses/{name}/devices         the ResourceSlice devices a DeviceClass selects

The answer is a `DeviceList`, computed from the store at request time (nothing is stored or cached):
`{"kind": "DeviceList", "apiVersion": "v1", "metadata": {"resourceVersion": ...}, "items": [...]}`, with
`"problem"` added when the class cannot select as written (then `items` is empty or partial, and `problem` says why).
`metadata.resourceVersion` is the newest revision among the lists read (classes, Instances and Configurations, or the
class and the ResourceSlices): separate reads, not one snapshot, so a change between them shows at the next read, which
a watcher of those kinds makes anyway (the dashboard does). An unknown class is a 404 `Status`, as a read of the class
would be. The routes are in FastAPI's `/openapi.json`;
kubectl's OpenAPI (`/openapi/v2`, `/openapi/v3`, what `kubectl explain` reads) describes kinds, not routes, and is
unchanged. Authorization is the resource API's (`server.authz.action_of`): verb `get` on subresource `devices` of the
class, so whoever may get the class (admins, readers) may read what it selects, and a node identity may not (it reads
neither kind).

The decisions are pure functions over wire dicts, and they use the engines the schedulers use, so the page shows what
the scheduler would consider, not a second reading of the rules:
- ResourceClass (`resource_class_devices`): classes are resolved by `scheduler.resolve_each` (nested classes through
  `classRef` included; a class that is refused, by a cycle or a reference to a missing class, selects nothing and its
  reason is the `problem`), and an Instance's attributes are `api.instance_properties` with its Configuration (found
  in the Instance's namespace by `configurationName`), as the scheduler's `device_of` and the controller's
  `ClassMatcher` read them. An Instance whose fields do not parse is left out. Items:
  `{"name", "namespace", "nodes", "capacity", "attributes"}`, by namespace and name.
- DeviceClass (`device_class_devices`): every CEL selector of the class must be true of the device
  (`api.compile_selector` in the stored-expression environment, evaluated on `api.DeviceInput`, as the DRA
  allocator does). Devices are those of each pool's newest generation (driver, pool), as the allocator counts them;
  whether the pool is complete, its counters and taints, and what claims hold are allocation questions, not selection,
  and are not applied. A selector that does not compile selects nothing (`problem`); one that fails at run time on a
  device leaves that device out (`problem` names the first). Items: `{"name", "driver", "pool", "slice", "nodes",
  "allNodes", "attributes"}` (attributes by fully qualified name, with the typed value), by driver, pool and name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from devplace import errors
from devplace.api import DeviceInput, compile_selector, instance_properties
from devplace.scheduler import resolve_each
from devplace.store import Store

RESOURCE_CLASS_DEVICES = "/apis/devplace.io/v1alpha1/resourceclasses/{name}/devices"
DEVICE_CLASS_DEVICES = "/apis/resource.k8s.io/v1/deviceclasses/{name}/devices"
_ATTRIBUTE_TYPES = ("int", "bool", "string", "version")


@dataclass(frozen=True)
class Selection:
    """What a class selects: the items of a `DeviceList`, and why the class cannot select as written (or None)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def resource_class_devices(
    name: str,
    classes: Mapping[str, Mapping[str, Any] | None],
    instances: Iterable[Mapping[str, Any]],
    configurations: Iterable[Mapping[str, Any]],
) -> Selection:
    """The Instances ResourceClass `name` matches (module docstring). `classes` maps every class's name to its spec
    (references resolve against them); `errors.NotFound` when `name` is not among them."""
    if name not in classes:
        raise errors.NotFound(f'resourceclasses.devplace.io "{name}" not found')
    resolved, refused = resolve_each(classes)
    if name in refused:
        return Selection([], f"class {name} selects nothing: {refused[name].message}")
    cls = resolved[name]
    by_key = {_key(c): c for c in configurations}
    items: list[dict[str, Any]] = []
    for instance in instances:
        namespace, instance_name = _key(instance)
        spec = instance.get("spec") or {}
        configuration = by_key.get((namespace, str(spec.get("configurationName") or "")))
        try:
            attributes = instance_properties(instance, configuration)
        except errors.Invalid:
            continue  # the scheduler ignores it too (`device_of`)
        if not cls.matches(attributes):
            continue
        nodes = spec.get("nodes") or []
        items.append(
            {
                "name": instance_name,
                "namespace": namespace,
                "nodes": sorted(str(n) for n in nodes),
                "capacity": spec.get("capacity", 1),
                "attributes": dict(sorted(attributes.items())),
            }
        )
    items.sort(key=lambda item: (item["namespace"], item["name"]))
    return Selection(items)


def _attribute_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        for typed in _ATTRIBUTE_TYPES:
            if value.get(typed) is not None:
                return value[typed]
    return value


def _newest_slices(slices: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The slices of each pool's newest generation, by driver, pool and slice name."""
    newest: dict[tuple[str, str], int] = {}
    parsed: list[tuple[tuple[str, str], int, Mapping[str, Any]]] = []
    for raw in slices:
        spec = raw.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
        generation = pool.get("generation") or 0
        generation = generation if isinstance(generation, int) and not isinstance(generation, bool) else 0
        parsed.append((key, generation, raw))
        newest[key] = max(newest.get(key, generation), generation)
    kept = [(key, _key(raw)[1], raw) for key, generation, raw in parsed if generation == newest[key]]
    return [raw for _, _, raw in sorted(kept, key=lambda entry: entry[:2])]


def device_class_devices(
    name: str, device_class: Mapping[str, Any] | None, slices: Iterable[Mapping[str, Any]]
) -> Selection:
    """The ResourceSlice devices DeviceClass `name` selects (module docstring); `device_class` is its wire dict,
    None when there is no such class (`errors.NotFound`)."""
    if device_class is None:
        raise errors.NotFound(f'deviceclasses.resource.k8s.io "{name}" not found')
    selectors = []
    for i, selector in enumerate((device_class.get("spec") or {}).get("selectors") or ()):
        expression = ((selector or {}).get("cel") or {}).get("expression") if isinstance(selector, Mapping) else None
        if not expression:
            return Selection([], f"selector #{i}: CEL expression empty (unsupported selector type?)")
        try:
            selectors.append(compile_selector(str(expression), new=False))
        except errors.Invalid as e:
            return Selection([], f"selector #{i}: {e.message}")
    items: list[dict[str, Any]] = []
    problem: str | None = None
    for raw in _newest_slices(slices):
        spec = raw.get("spec") or {}
        driver = str(spec.get("driver") or "")
        pool = str((spec.get("pool") or {}).get("name") or "")
        slice_name = _key(raw)[1]
        for device in spec.get("devices") or ():
            if not isinstance(device, Mapping):
                continue
            device_name = str(device.get("name") or "")
            selected = True
            for i, selector in enumerate(selectors):
                try:
                    verdict = selector.matches(DeviceInput(driver, device))
                except errors.Invalid as e:
                    problem = problem or f"selector #{i} on device {driver}/{pool}/{device_name}: {e.message}"
                    verdict = False
                if not verdict:
                    selected = False
                    break
            if not selected:
                continue
            where = device if spec.get("perDeviceNodeSelection") else spec
            node = where.get("nodeName")
            items.append(
                {
                    "name": device_name,
                    "driver": driver,
                    "pool": pool,
                    "slice": slice_name,
                    "nodes": [str(node)] if node else [],
                    "allNodes": bool(where.get("allNodes")),
                    "attributes": {
                        (key if "/" in key else f"{driver}/{key}"): _attribute_value(value)
                        for key, value in sorted((device.get("attributes") or {}).items())
                    },
                }
            )
    items.sort(key=lambda item: (item["driver"], item["pool"], item["name"]))
    return Selection(items, problem)


def device_list(selection: Selection, revision: int) -> dict[str, Any]:
    """The `DeviceList` body of a selection read at `revision`."""
    body: dict[str, Any] = {
        "kind": "DeviceList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(revision)},
        "items": selection.items,
    }
    if selection.problem is not None:
        body["problem"] = selection.problem
    return body


def router(store: Store) -> APIRouter:
    """The two `devices` routes over `store` (module docstring)."""
    api = APIRouter()

    async def resource_class(request: Request) -> Response:
        name = str(request.path_params["name"])
        classes = await store.list("ResourceClass")
        instances = await store.list("Instance")
        configurations = await store.list("Configuration")
        specs = {_key(c)[1]: c.get("spec") for c in classes.items}
        selection = resource_class_devices(name, specs, instances.items, configurations.items)
        revision = max(classes.revision, instances.revision, configurations.revision)
        return JSONResponse(device_list(selection, revision))

    async def device_class(request: Request) -> Response:
        name = str(request.path_params["name"])
        try:
            found: dict[str, Any] | None = await store.get("DeviceClass", name)
        except errors.NotFound:
            found = None
        slices = await store.list("ResourceSlice")
        selection = device_class_devices(name, found, slices.items)
        return JSONResponse(device_list(selection, slices.revision))

    described: dict[int | str, dict[str, Any]] = {
        200: {"description": "a DeviceList: the devices the class selects now"},
        403: {"description": "a Status: the identity may not get the class"},
        404: {"description": "a Status: no such class"},
    }
    name_param = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}, "description": "class"}
    for path, handler, operation, summary in (
        (
            RESOURCE_CLASS_DEVICES,
            resource_class,
            "readResourceClassDevices",
            "The Instances a ResourceClass selects (nested classes resolved), computed now",
        ),
        (
            DEVICE_CLASS_DEVICES,
            device_class,
            "readDeviceClassDevices",
            "The ResourceSlice devices a DeviceClass's CEL selectors select, computed now",
        ),
    ):
        api.add_api_route(
            path,
            handler,
            methods=["GET"],
            operation_id=operation,
            summary=summary,
            tags=["classes"],
            responses=described,
            openapi_extra={"parameters": [name_param]},
        )
    return api
