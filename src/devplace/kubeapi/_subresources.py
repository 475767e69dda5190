"""The `/status` and `/scale` subresources as pure functions over wire dicts.

Kubernetes splits an object's writes: the main resource carries what users declare (`spec`, labels, ...), the
`status` subresource what controllers observe, and `scale` is a small `autoscaling/v1` `Scale` view of a workload's
replica count (what `kubectl scale` and HorizontalPodAutoscalers read and write). The API server routes PUT and PATCH
on `.../{name}/status` and `.../deployments/{name}/scale` through these functions; the store then writes the result
with the usual compare-and-swap, so the subresources obey the one concurrency rule like every other write.

- `has_status(kind)`: which kinds serve `/status`: those whose model declares a `status` field (ConfigMap and
  Secret have none, as in Kubernetes).
- `with_status(stored, incoming)`: the stored object with incoming's `status` and nothing else changed (an incoming
  object without `status` clears it, as a status PUT does in Kubernetes).
- `scale_of(deployment)` / `with_scale(deployment, scale)`: the `Scale` view and its write-back (`spec.replicas`
  only). `Scale.status.selector` is the Deployment's label selector in its canonical string form.

Preconditions are the caller's: the functions keep the stored `metadata.resourceVersion`, and the server decides
whether an incoming resourceVersion must match it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from devplace import errors
from devplace.api import LabelSelector, lookup

SCALE_KINDS = frozenset({"Deployment"})
"""Kinds that serve `/scale` (Kubernetes also serves it on ReplicaSets and StatefulSets, which devplace lacks)."""

_SCALE_META = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")


def has_status(kind: str) -> bool:
    """True when `kind` is registered and its model has a `status` field (so it serves `/status`)."""
    try:
        info = lookup(kind)
    except errors.Invalid:
        return False
    return "status" in info.model.model_fields


def with_status(stored: Mapping[str, Any], incoming: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of `stored` whose `status` is incoming's (absent in incoming: absent in the result)."""
    out = copy.deepcopy(dict(stored))
    status = incoming.get("status")
    if status is None:
        out.pop("status", None)
    else:
        out["status"] = copy.deepcopy(status)
    return out


def _replicas(value: Any, field: str, default: int | None = None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.Invalid.field(field, f"must be an integer, not {type(value).__name__}")
    if value < 0:
        raise errors.Invalid.field(field, f"must be greater than or equal to 0, not {value}")
    return value


def scale_of(deployment: Mapping[str, Any]) -> dict[str, Any]:
    """The `autoscaling/v1` `Scale` of a Deployment (spec.replicas defaults to 1, as Kubernetes defaults it)."""
    meta = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    selector = spec.get("selector")
    selector_text = str(LabelSelector.from_dict(selector, "spec.selector")) if isinstance(selector, Mapping) else ""
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in _SCALE_META if meta.get(k) not in (None, "")},
        "spec": {"replicas": _replicas(spec.get("replicas"), "spec.replicas", default=1)},
        "status": {
            "replicas": _replicas(status.get("replicas"), "status.replicas", default=0),
            "selector": selector_text,
        },
    }


def with_scale(deployment: Mapping[str, Any], scale: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of `deployment` with `spec.replicas` from `scale`; a Scale naming another object is refused."""
    if scale.get("kind") not in (None, "Scale"):
        raise errors.Invalid.field("kind", f"must be Scale, not {scale.get('kind')!r}")
    meta = deployment.get("metadata") or {}
    scale_meta = scale.get("metadata") or {}
    if not isinstance(scale_meta, Mapping):
        raise errors.Invalid.field("metadata", "must be an object")
    for key in ("name", "namespace"):
        given = scale_meta.get(key)
        if given not in (None, "") and given != meta.get(key):
            raise errors.Invalid.field(f"metadata.{key}", f"{given!r} does not match the object ({meta.get(key)!r})")
    spec = scale.get("spec")
    if not isinstance(spec, Mapping):
        raise errors.Invalid.field("spec", "required: a Scale needs spec.replicas")
    replicas = _replicas(spec.get("replicas"), "spec.replicas", default=0)
    out = copy.deepcopy(dict(deployment))
    out["spec"] = {**(out.get("spec") or {}), "replicas": replicas}
    return out
