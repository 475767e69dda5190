"""The kind registry: apiVersion/kind -> typed model, plural, scope.

Every kind devplace stores is named here (`_BUILTIN`: kind, plural, scope, apiVersions and the module that defines
its model) and its model is registered by that module (`register`); EMCO's fleet kinds register themselves when
`devplace.placement` is imported. A kind is known without its model: `lookup` answers from the table, and
`KindInfo.model` imports the defining module on first use, so a process that only names kinds (the agent's store
client: plurals and scopes for its URLs) never loads the models. tests/api/test_registry.py pins the table to what
each model says of itself. The store keys objects by kind (not group), so `akri.sh/v0` and `devplace.io/v1alpha1`
Configurations are one kind and an Akri user's manifests load unchanged. `normalize` is the single boundary check used
by the API server, the CLI and the simulation harness: it resolves the kind, refuses an apiVersion the kind does not
speak, validates the body strictly (JSON types as a CRD's structural schema has them, `api.meta`) and defaults the
namespace; `conformed` is the body as it is stored (an integer sent as `1e2` or `2.0` written as the integer).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from devplace import errors

if TYPE_CHECKING:
    from devplace.api._meta import Resource

DEFAULT_NAMESPACE = "default"

SERVER_OWNED_METADATA = (
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
)
"""Metadata only the server writes; a client's body never sets it (the one list: API boundary, store, CLI apply).

- `api.manifests.validated`, the boundary every client write passes, drops all of it except `resourceVersion`,
  which an update carries as its compare-and-swap precondition (never as the value stored).
- The store stamps `resourceVersion`, `uid`, `generation` and `creationTimestamp` on every write (an update keeps the
  stored identity) and never stores `deletionTimestamp`, `deletionGracePeriodSeconds` or `selfLink` from a caller:
  devplace has no graceful deletion, so an object is never born "being deleted", and an update keeps the stored
  value (none). `selfLink` went out of Kubernetes in 1.20.
- `managedFields` is the API server's field manager's (server-side apply): it computes them after the boundary and
  hands them to the store, which passes them through. A client may write them as Kubernetes allows (an empty list
  resets them; kubectl moves client-side apply's fields so): the field manager reads them from the body before this
  boundary drops them (`kubeapi.managedfields`).
- The CLI's apply plan (`api.applies`) writes none of it from a manifest and keeps the stored values on update.
"""


@dataclass(frozen=True)
class KindInfo:
    kind: str
    plural: str
    namespaced: bool
    group_versions: tuple[str, ...]
    module: str
    """The module that defines the kind's model (and registers it when imported)."""

    @property
    def preferred_api_version(self) -> str:
        return self.group_versions[0]

    @property
    def model(self) -> type[Resource]:
        """The kind's model, its module imported on first use."""
        found = _MODELS.get(self.kind)
        if found is None:
            importlib.import_module(self.module)
            found = _MODELS[self.kind]
        return found


R = TypeVar("R", bound="type[Resource]")

_CORE = ("v1",)
_RBAC = ("rbac.authorization.k8s.io/v1",)
_DRA = ("resource.k8s.io/v1",)
_AKRI = ("devplace.io/v1alpha1", "akri.sh/v0")
_BUILTIN = (
    KindInfo("ClusterRole", "clusterroles", False, _RBAC, "devplace.api._clusters"),
    KindInfo("ClusterRoleBinding", "clusterrolebindings", False, _RBAC, "devplace.api._clusters"),
    KindInfo("ConfigMap", "configmaps", True, _CORE, "devplace.api._workloads"),
    KindInfo("Configuration", "configurations", True, _AKRI, "devplace.api._devices"),
    KindInfo("Deployment", "deployments", True, ("apps/v1",), "devplace.api._workloads"),
    KindInfo("DeviceClass", "deviceclasses", False, _DRA, "devplace.api._dra"),
    KindInfo("Event", "events", True, ("v1", "events.k8s.io/v1"), "devplace.api._clusters"),
    KindInfo("Instance", "instances", True, _AKRI, "devplace.api._devices"),
    KindInfo("Job", "jobs", True, ("batch/v1",), "devplace.api._workloads"),
    KindInfo("Lease", "leases", True, ("coordination.k8s.io/v1",), "devplace.api._clusters"),
    KindInfo("Namespace", "namespaces", False, _CORE, "devplace.api._clusters"),
    KindInfo("Node", "nodes", False, _CORE, "devplace.api._workloads"),
    KindInfo("Pod", "pods", True, _CORE, "devplace.api._workloads"),
    KindInfo("ResourceClaim", "resourceclaims", True, _DRA, "devplace.api._dra"),
    KindInfo("ResourceClaimTemplate", "resourceclaimtemplates", True, _DRA, "devplace.api._dra"),
    KindInfo("ResourceClass", "resourceclasses", False, ("devplace.io/v1alpha1",), "devplace.api._devices"),
    KindInfo("ResourceSlice", "resourceslices", False, _DRA, "devplace.api._dra"),
    KindInfo("Role", "roles", True, _RBAC, "devplace.api._clusters"),
    KindInfo("RoleBinding", "rolebindings", True, _RBAC, "devplace.api._clusters"),
    KindInfo("Secret", "secrets", True, _CORE, "devplace.api._workloads"),
    KindInfo("Service", "services", True, _CORE, "devplace.api._workloads"),
    KindInfo("ServiceAccount", "serviceaccounts", True, _CORE, "devplace.api._clusters"),
)
"""devplace's own kinds, known before their models are loaded."""

_BY_KIND: dict[str, KindInfo] = {info.kind: info for info in _BUILTIN}
_BY_PLURAL: dict[str, KindInfo] = {info.plural: info for info in _BUILTIN}
_MODELS: dict[str, type[Resource]] = {}


def register(model: R) -> R:
    """Class decorator: the model of a kind. A kind of the table keeps its entry (the model must agree with it:
    tests/api/test_registry.py); any other kind (EMCO's) becomes known by kind and plural."""
    _MODELS[model.KIND] = model
    if model.KIND not in _BY_KIND:
        info = KindInfo(model.KIND, model.PLURAL, model.NAMESPACED, model.GROUP_VERSIONS, model.__module__)
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
