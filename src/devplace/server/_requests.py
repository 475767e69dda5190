"""Reading a resource request: pure functions from a URL, a query and a body to what the server must do.

What a URL addresses (`Target`, `resolve`), the body a write stores (`prepare_write`: names and namespaces in the
URL and the body agree, unknown fields handled per `fieldValidation`), and Kubernetes' write options (`dryRun`,
`fieldValidation`, DeleteOptions from a body or the query, preconditions). No I/O and no store: every refusal is a
devplace error naming the field (the query parameter or the body's path) and the reason, raised before anything is
read or written, so a bad request changes nothing. The routes in `resources` and `patches` call these first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from devplace import errors
from devplace.api import KindInfo, lookup_plural, parse_revision, validated
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
    return Target(info, api_version, namespace, name)


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
    """`body` with kind, apiVersion, namespace and name from the URL where it has none; refused where it disagrees."""
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


def check_selectors(kind: str | None, namespace: str | None, query: Mapping[str, str]) -> None:
    """Refuse a list or watch request's bad `labelSelector` (422) or `fieldSelector` before the store is asked.

    A field selector naming a field the kind does not support is a 400 `BadRequest` (Kubernetes' answer, "field
    label not supported"), with the cause naming `fieldSelector`."""
    parse_filters(kind, namespace, query.get("labelSelector") or None, None)
    try:
        parse_filters(kind, namespace, None, query.get("fieldSelector") or None)
    except errors.Invalid as e:
        raise errors.Malformed(e.message, e.fields) from e
