"""Reading a resource request: pure functions from a URL, a query and a body to what the server must do.

What a URL addresses (`Target`, `resolve`), the body a write stores (`prepare_write`: names and namespaces in the
URL and the body agree, unknown fields handled per `fieldValidation`), and Kubernetes' write options (`dryRun`,
`fieldValidation`, DeleteOptions from a body or the query, preconditions). No I/O and no store: every refusal is a
devplace error naming the field (the query parameter or the body's path) and the reason, raised before anything is
read or written, so a bad request changes nothing. The routes in `resources` and `patches` call these first.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from devplace import errors
from devplace.api import KindInfo, lookup_plural, parse_revision, validated
from devplace.kubeapi import EVENTS_V1, events_fields, events_view, stored_event
from devplace.store import parse_filters


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
    kind_wide: bool = False
    """The request comes from devplace's remote store (`store.STORE_CLIENT_HEADER`): it sees every group's objects."""

    @property
    def separate(self) -> bool:
        """Whether this group shows only its own objects of the kind (`separate_groups`) to this request."""
        return not self.kind_wide and separate_groups(self.info)

    @property
    def events_view(self) -> bool:
        """Whether this is the `events.k8s.io/v1` view of Events (stored as `v1`, converted: `kubeapi.events`)."""
        return self.info.kind == "Event" and self.api_version == EVENTS_V1

    @property
    def stored(self) -> Target:
        """The target in the form objects are stored in (the `v1` Events behind the `events.k8s.io/v1` view)."""
        return dataclasses.replace(self, api_version="v1") if self.events_view else self

    def shown(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A stored object as this target shows it (converted for the `events.k8s.io/v1` view)."""
        return events_view(obj) if self.events_view else obj

    def to_store(self, body: dict[str, Any]) -> dict[str, Any]:
        """A body sent to this target in the form objects are stored in."""
        return stored_event(body) if self.events_view and isinstance(body, dict) else body

    def with_group(self, fields: str | None) -> str | None:
        """A list or watch's field selector as the store reads it: narrowed to this group's objects when the kind's
        groups are apart, and naming the stored fields for the `events.k8s.io/v1` view."""
        if self.events_view:
            return events_fields(fields)
        if not self.separate:
            return fields
        own = f"apiVersion={self.api_version}"
        return f"{fields},{own}" if fields else own

    def check_group(self, obj: dict[str, Any]) -> dict[str, Any]:
        """`obj` (as stored) when it is an object of this group, else `NotFound` as for an object that does not
        exist here (Kubernetes' words), saying where it is."""
        stored = obj.get("apiVersion")
        if self.separate and stored != self.api_version:
            raise errors.NotFound(f"{self.resource} {_quoted(self.name)} not found (it is a {stored} {self.info.kind})")
        return obj

    @property
    def resource(self) -> str:
        """`configurations.akri.sh`, `pods`: the resource as Kubernetes names it in messages."""
        group = self.api_version.rpartition("/")[0]
        return f"{self.info.plural}.{group}" if group else self.info.plural

    @property
    def store_namespace(self) -> str:
        return (self.namespace or "") if self.info.namespaced else ""

    @property
    def list_namespace(self) -> str | None:
        return self.namespace if self.info.namespaced else None

    def describe(self) -> str:
        ns = f"{self.namespace}/" if self.info.namespaced and self.namespace else ""
        return f"{self.info.kind} {ns}{self.name}" if self.name else self.info.kind


VIEW_KINDS = frozenset({"Event"})
"""Kinds whose groups are views of the same objects (Kubernetes' `v1` and `events.k8s.io/v1` Events, converted
`server.conversions`); the other kinds served in several groups hold apart objects in each (`separate_groups`)."""


def separate_groups(info: KindInfo) -> bool:
    """Whether each group a kind is served in holds its own objects, as two CRDs of one kind on a cluster do
    (Configuration and Instance in `akri.sh` and `devplace.io`): a list shows only the group's objects, a get,
    write or delete of another group's object is 404. Names stay unique per kind across the groups (the store
    keys objects by kind), so a create whose name another group's object holds is 409."""
    return len(info.group_versions) > 1 and info.kind not in VIEW_KINDS


def _quoted(name: str | None) -> str:
    return '"' + str(name).replace('"', '\\"') + '"'


def resolve(
    api_version: str,
    plural: str,
    namespace: str | None,
    name: str | None,
    *,
    creating: bool = False,
    kind_wide: bool = False,
) -> Target:
    """The Target of a resource path, or `NotFound` when the kind, its group/version or its scope rule it out.
    `kind_wide`: the request is devplace's remote store's (`Target.kind_wide`)."""
    info = lookup_plural(plural)
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
    return Target(info, api_version, namespace, name, kind_wide)


def collection_path(info: KindInfo, api_version: str, namespace: str | None) -> str:
    root = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    ns = f"/namespaces/{namespace}" if namespace is not None else ""
    return f"{root}{ns}/{info.plural}"


def prepare_write(
    body: Mapping[str, Any],
    target: Target,
    *,
    validation: FieldValidation = "Strict",
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """The object to store for a create (target without name) or update (target with name) body.

    Kind and apiVersion default from the URL when absent; the namespace defaults from the URL; a body that names
    another kind, namespace or object than the URL is refused with the field that disagrees. `validation` is the
    request's `fieldValidation` (module docstring); the warnings it produces are appended to `warnings`.
    """
    return with_field_validation(aligned_body(body, target), validation, warnings)


def aligned_body(body: Mapping[str, Any], target: Target) -> dict[str, Any]:
    """`body` with kind, apiVersion, namespace and name from the URL where it has none; refused where it disagrees.
    A cluster-scoped object's namespace is dropped, as Kubernetes drops it."""
    info = target.info
    obj = dict(body)
    obj.setdefault("kind", info.kind)
    obj.setdefault("apiVersion", target.api_version)
    kind = obj["kind"]
    if isinstance(kind, str) and kind and kind != info.kind:
        raise errors.Invalid.field("kind", f"{kind!r} does not match the resource {info.plural!r} ({info.kind})")
    given = obj["apiVersion"]
    if separate_groups(info) and given != target.api_version:  # each group holds its own objects
        raise errors.Malformed.field(
            "apiVersion",
            f"the API version in the data ({str(given)[:100]}) does not match the expected API version "
            f"({target.api_version})",
        )
    meta = obj.get("metadata")
    if meta is None and target.name is not None:
        meta = {}
    if isinstance(meta, Mapping):
        meta = dict(meta)
        if not info.namespaced:  # Kubernetes clears a cluster-scoped object's namespace (Akri's bindings set one)
            meta.pop("namespace", None)
        in_url = {"namespace": target.namespace if info.namespaced else None, "name": target.name}
        for field, wanted in in_url.items():
            given = meta.get(field)
            if wanted is None:
                continue
            if given in (None, ""):
                meta[field] = wanted
            elif given != wanted:
                raise errors.Invalid.field(
                    f"metadata.{field}", f"{given!r} does not match the {field} in the URL ({wanted!r})"
                )
        obj["metadata"] = meta
    return obj


def on_create(obj: dict[str, Any]) -> dict[str, Any]:
    """What Kubernetes sets on a new object that its body leaves unset: a Pod's `status.phase` is `Pending` and a
    Namespace's `Active` (their registries' PrepareForCreate). Unlike Kubernetes, a status the body gives is kept
    (devplace's parts and the simulated kubelet create Pods with theirs); only a missing phase is set."""
    phase = _CREATED_PHASES.get(str(obj.get("kind")))
    status = obj.get("status")
    if phase is None or (isinstance(status, Mapping) and status.get("phase")):
        return obj
    return {**obj, "status": {**(status if isinstance(status, Mapping) else {}), "phase": phase}}


_CREATED_PHASES = {"Pod": "Pending", "Namespace": "Active"}


FieldValidation = Literal["Strict", "Warn", "Ignore"]
_UNKNOWN_FIELD = "Extra inputs are not permitted"  # pydantic's reason for a field a model does not declare
_PATH_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def with_field_validation(
    obj: dict[str, Any], validation: FieldValidation, warnings: list[str] | None
) -> dict[str, Any]:
    """`validated(obj)`; under Warn and Ignore, fields the kind's schema does not know are dropped first (each named
    in `warnings` under Warn) and the rest validated as usual."""
    for _ in range(_MAX_DROPS):
        try:
            return validated(obj)
        except errors.Invalid as e:
            unknown = [f.path for f in e.fields if f.reason == _UNKNOWN_FIELD]
            if validation == "Strict" or not unknown:
                raise
            pruned = _without(obj, unknown)
            if pruned is None:
                raise
            obj = pruned
            if validation == "Warn" and warnings is not None:
                warnings.extend(f'unknown field "{path}"' for path in unknown)
    return validated(obj)


_MAX_DROPS = 4  # rounds of dropping unknown fields (one round drops every field reported; nesting may need more)


def _without(obj: dict[str, Any], paths: list[str]) -> dict[str, Any] | None:
    """`obj` without the fields at `paths` (`spec.nodes[2].x`), copying only what changes; None when a path does
    not lead to a field."""
    out: Any = obj
    for path in paths:
        steps: list[str | int] = [m[1] if m[1] is not None else int(m[2]) for m in _PATH_STEP.finditer(path)]
        if not steps:
            return None
        out = _dropped(out, steps)
        if out is None:
            return None
    result: dict[str, Any] = out
    return result


def _dropped(node: Any, steps: list[str | int]) -> Any:
    head, rest = steps[0], steps[1:]
    if isinstance(head, int):
        if not isinstance(node, list) or not 0 <= head < len(node):
            return None
        if not rest:
            return None  # an unknown field is a key, never a list element
        child = _dropped(node[head], rest)
        return None if child is None else [*node[:head], child, *node[head + 1 :]]
    if not isinstance(node, dict) or head not in node:
        return None
    if not rest:
        return {k: v for k, v in node.items() if k != head}
    child = _dropped(node[head], rest)
    return None if child is None else {**node, head: child}


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
        query_revision("preconditions.resourceVersion", rv)
    return Preconditions(rv, uid)


def query_revision(field: str, raw: str) -> int:
    """A revision from a request (query or body): the one strict parser, 422 naming `field` (`api.revisions`)."""
    return parse_revision(field, raw)


def query_flag(field: str, raw: str | None) -> bool:
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in ("1", "true", "yes"):
        return True
    if value in ("", "0", "false", "no"):
        return False
    raise errors.Invalid.field(field, f"{raw!r} is not a boolean (true or false)")


def dry_run(values: list[str]) -> bool:
    """`dryRun` (query values, or a DeleteOptions body's list): `All` is a dry run, none is a write; anything
    else is 400 naming `dryRun`, as Kubernetes answers."""
    for value in values:
        if value != "All":
            raise errors.Malformed.field("dryRun", f"unsupported value {value[:40]!r} (the only one is All)")
    return bool(values)


def field_validation(raw: str | None) -> FieldValidation:
    """`fieldValidation`: Strict (also when unset), Warn or Ignore; anything else is 400 naming it."""
    if raw is None or raw == "" or raw == "Strict":
        return "Strict"
    if raw == "Warn":
        return "Warn"
    if raw == "Ignore":
        return "Ignore"
    raise errors.Malformed.field("fieldValidation", f"unsupported value {raw[:40]!r} (one of Strict, Warn, Ignore)")


PropagationPolicy = Literal["Orphan", "Background", "Foreground"]
_POLICIES: tuple[PropagationPolicy, ...] = ("Orphan", "Background", "Foreground")


@dataclass(frozen=True)
class DeleteOptions:
    """A DELETE's options (module docstring): only `preconditions` and `dry_run` change what happens."""

    preconditions: Preconditions = Preconditions()
    dry_run: bool = False
    grace_period_seconds: int | None = None
    propagation_policy: PropagationPolicy | None = None


def _grace(raw: Any) -> int | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) <= 18:
        return int(raw)
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < 10**18:
        return raw
    raise errors.Invalid.field("gracePeriodSeconds", f"{str(raw)[:40]!r} is not a non-negative whole number")


def delete_options(body: Mapping[str, Any] | None, query: Mapping[str, str], query_dry_run: list[str]) -> DeleteOptions:
    """`DeleteOptions` from the body, its missing fields from the query string; checked as Kubernetes checks them."""
    body = body or {}
    kind = body.get("kind")
    if kind not in (None, "DeleteOptions"):
        raise errors.Invalid.field("kind", f"a DELETE body is a DeleteOptions, not {str(kind)[:40]!r}")
    pre = delete_preconditions(body, query.get("resourceVersion"))
    raw_dry = body.get("dryRun")
    if raw_dry is None:
        dry = dry_run(query_dry_run)
    elif isinstance(raw_dry, list) and all(isinstance(v, str) for v in raw_dry):
        dry = dry_run(raw_dry)
    else:
        raise errors.Malformed.field("dryRun", "must be a list of strings")
    grace = _grace(body.get("gracePeriodSeconds", query.get("gracePeriodSeconds")))
    raw_policy = body.get("propagationPolicy", query.get("propagationPolicy")) or None
    if raw_policy is not None and raw_policy not in _POLICIES:
        raise errors.Invalid.field(
            "propagationPolicy", f"unsupported value {str(raw_policy)[:40]!r} (one of {', '.join(_POLICIES)})"
        )
    policy: PropagationPolicy | None = raw_policy
    orphan = body.get("orphanDependents", query.get("orphanDependents"))
    if orphan is not None and orphan != "":
        if isinstance(orphan, str):
            orphan = query_flag("orphanDependents", orphan)
        if not isinstance(orphan, bool):
            raise errors.Invalid.field("orphanDependents", "must be a boolean")
        if policy is not None:
            raise errors.Invalid.field("propagationPolicy", "orphanDependents and propagationPolicy cannot both be set")
        policy = "Orphan" if orphan else "Background"
    return DeleteOptions(pre, dry, grace, policy)


def query_timeout(raw: str | None) -> float | None:
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise errors.Invalid.field("timeoutSeconds", f"{raw!r} is not a whole, non-negative number of seconds")
    value = int(raw)
    return float(value) if value else None


def check_selectors(
    kind: str | None, namespace: str | None, query: Mapping[str, str], target: Target | None = None
) -> None:
    """Refuse a list or watch request's bad `labelSelector` (422) or `fieldSelector` before the store is asked
    (the field selector as `target` reads it, `Target.with_group`).

    A field selector naming a field the kind does not support is a 400 `BadRequest` (Kubernetes' answer, "field
    label not supported"), with the cause naming `fieldSelector`."""
    parse_filters(kind, namespace, query.get("labelSelector") or None, None)
    fields = query.get("fieldSelector") or None
    if target is not None and target.events_view:
        fields = events_fields(fields)
    try:
        parse_filters(kind, namespace, None, fields)
    except errors.Invalid as e:
        raise errors.Malformed(e.message, e.fields) from e
