"""The kind registry: apiVersion/kind -> typed model, plural, scope.

Every kind devplace stores is registered here by the module that defines it. The store keys objects by kind
(not group), so `akri.sh/v0` and `devplace.io/v1alpha1` Configurations are one kind and an Akri user's manifests
load unchanged. `normalize` is the single boundary check used by the API server, the CLI and the simulation harness:
it resolves the kind, refuses an apiVersion the kind does not speak, validates the body strictly (JSON types as a
CRD's structural schema has them, `api.meta`) and defaults the namespace; `conformed` is the body as it is stored
(an integer sent as `1e2` or `2.0` written as the integer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from devplace import errors
from devplace.api._meta import Resource

DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True)
class KindInfo:
    kind: str
    plural: str
    namespaced: bool
    group_versions: tuple[str, ...]
    model: type[Resource]

    @property
    def preferred_api_version(self) -> str:
        return self.group_versions[0]


R = TypeVar("R", bound=type[Resource])

_BY_KIND: dict[str, KindInfo] = {}
_BY_PLURAL: dict[str, KindInfo] = {}


def register(model: R) -> R:
    """Class decorator: make a Resource subclass known by kind and plural."""
    info = KindInfo(model.KIND, model.PLURAL, model.NAMESPACED, model.GROUP_VERSIONS, model)
    _BY_KIND[info.kind] = info
    _BY_PLURAL[info.plural] = info
    return model


def kinds() -> list[KindInfo]:
    return sorted(_BY_KIND.values(), key=lambda k: k.kind)


def lookup(kind: str) -> KindInfo:
    """By kind (`Instance`), plural (`instances`) or lowercase kind (`instance`), as `kubectl get` accepts."""
    info = _BY_KIND.get(kind) or _BY_PLURAL.get(kind.lower())
    if info is None:
        lowered = kind.lower()
        info = next((k for k in _BY_KIND.values() if k.kind.lower() == lowered), None)
    if info is None:
        known = ", ".join(sorted(_BY_KIND))
        raise errors.Invalid.field("kind", f"unknown kind {kind!r} (known: {known})")
    return info


def lookup_plural(plural: str) -> KindInfo:
    info = _BY_PLURAL.get(plural)
    if info is None:
        raise errors.NotFound(f"the server could not find the requested resource {plural!r}")
    return info


def normalize(obj: Any) -> dict[str, Any]:
    """Validate one manifest and return its wire form with the namespace defaulted (or cleared for cluster scope)."""
    if not isinstance(obj, dict):
        raise errors.Invalid.field("", f"an object must be a mapping, not {type(obj).__name__}")
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise errors.Invalid.field("kind", "required")
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str) or not api_version:
        raise errors.Invalid.field("apiVersion", "required")
    info = _BY_KIND.get(kind)
    if info is None:
        known = ", ".join(sorted(_BY_KIND))
        raise errors.Invalid.field("kind", f"unknown kind {kind!r} (known: {known})")
    if api_version not in info.group_versions:
        allowed = ", ".join(info.group_versions)
        raise errors.Invalid.field("apiVersion", f"{kind} is served as {allowed}, not {api_version!r}")
    model = info.model.from_obj(obj, strict=True)
    wire = model.to_wire()
    meta = wire["metadata"]
    for empty in ("labels", "annotations", "ownerReferences", "finalizers"):
        if not meta.get(empty):
            meta.pop(empty, None)
    if info.namespaced:
        meta["namespace"] = meta.get("namespace") or DEFAULT_NAMESPACE
    elif meta.get("namespace"):
        raise errors.Invalid.field("metadata.namespace", f"{kind} is cluster-scoped and takes no namespace")
    else:
        meta.pop("namespace", None)
    return wire


def conformed(obj: Any) -> Any:
    """`obj` as the write boundary stores it: each float with no fraction in a field its kind types as an integer
    written as that integer (`Resource.conformed`); `obj` itself for anything else (`normalize` refuses what is
    not a known kind)."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    info = _BY_KIND.get(kind) if isinstance(kind, str) else None
    return obj if info is None else info.model.conformed(obj)
