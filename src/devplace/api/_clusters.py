"""Kubernetes' cluster-administration kinds a user's manifests carry: Namespace, Event, ServiceAccount, RBAC, Lease.

- `Namespace` (`v1`, cluster-scoped): `status.phase` is `Active`, or `Terminating` while its objects are deleted
  (the API server keeps it: `server.namespaces`).
- `Event` (`v1`, and `events.k8s.io/v1`, two views of the same objects as in Kubernetes; stored in the `v1` form,
  `kubeapi.events` converts): what happened to an object (`involvedObject`), why (`reason`), a `message`, its `type`
  (`Normal` or `Warning`, checked as Kubernetes checks it), when (`firstTimestamp`, `lastTimestamp`, `eventTime`) and
  how often (`count`, `series`). `store.EventRecorder` writes them.
- `ServiceAccount` (`v1`), `Role`, `RoleBinding` (namespaced), `ClusterRole`, `ClusterRoleBinding` (cluster-scoped),
  all `rbac.authorization.k8s.io/v1`: stored and listed, so installers such as Akri's Helm chart apply whole, but not
  enforced. devplace's own authorization (`server.authz`: roles admin, reader and node) decides every request; a
  binding changes nothing. A binding must name its role (`roleRef.kind`, `roleRef.name`), as Kubernetes requires,
  and a rule's fields are lists of strings.
- `Lease` (`coordination.k8s.io/v1`, namespaced): a leader-election record (`store.LeaderElector` writes it):
  `spec.holderIdentity`, `leaseDurationSeconds` (> 0), `acquireTime` and `renewTime` (MicroTime strings),
  `leaseTransitions` (>= 0). Checked for types only; who holds it is decided by compare-and-swap, not here.

Like the other built-in kinds (`api.workloads`), fields devplace does not read are kept as written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from pydantic import ConfigDict

from devplace import errors
from devplace.api._meta import Resource
from devplace.api._registry import register

EVENT_TYPES = ("Normal", "Warning")
"""The types an Event may have (Kubernetes refuses any other)."""

RBAC = "rbac.authorization.k8s.io/v1"
COORDINATION = "coordination.k8s.io/v1"


class _Open(Resource):
    """A built-in kind whose fields devplace keeps as written (`api.workloads`)."""

    model_config = ConfigDict(extra="allow")


@register
class Namespace(_Open):
    KIND: ClassVar[str] = "Namespace"
    PLURAL: ClassVar[str] = "namespaces"
    NAMESPACED: ClassVar[bool] = False
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("v1",)
    spec: dict[str, Any] | None = None
    status: dict[str, Any] | None = None

    def problems(self) -> Iterator[errors.FieldError]:
        phase = (self.status or {}).get("phase")
        if phase not in (None, "Active", "Terminating"):
            yield errors.FieldError("status.phase", f"must be Active or Terminating, not {phase!r}")


@register
class Event(_Open):
    KIND: ClassVar[str] = "Event"
    PLURAL: ClassVar[str] = "events"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("v1", "events.k8s.io/v1")
    involved_object: dict[str, Any] | None = None
    reason: str | None = None
    message: str | None = None
    type: str | None = None
    count: int | None = None

    def problems(self) -> Iterator[errors.FieldError]:
        if self.type is not None and self.type not in EVENT_TYPES:
            yield errors.FieldError("type", f"must be Normal or Warning, not {self.type!r}")
        if not self.involved_object:
            yield errors.FieldError("involvedObject", "Required value: the object the event is about")


def _strings(path: str, value: Any) -> Iterator[errors.FieldError]:
    if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
        yield errors.FieldError(path, "must be a list of strings")


def _rule_problems(rules: Any) -> Iterator[errors.FieldError]:
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        if not isinstance(rule, Mapping):
            yield errors.FieldError(f"rules[{i}]", "must be an object")
            continue
        for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            yield from _strings(f"rules[{i}].{field}", rule.get(field))


@register
class ServiceAccount(_Open):
    KIND: ClassVar[str] = "ServiceAccount"
    PLURAL: ClassVar[str] = "serviceaccounts"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("v1",)


@register
class Role(_Open):
    KIND: ClassVar[str] = "Role"
    PLURAL: ClassVar[str] = "roles"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = (RBAC,)
    rules: list[Any] | None = None

    def problems(self) -> Iterator[errors.FieldError]:
        return _rule_problems(self.rules)


@register
class ClusterRole(_Open):
    KIND: ClassVar[str] = "ClusterRole"
    PLURAL: ClassVar[str] = "clusterroles"
    NAMESPACED: ClassVar[bool] = False
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = (RBAC,)
    rules: list[Any] | None = None

    def problems(self) -> Iterator[errors.FieldError]:
        return _rule_problems(self.rules)


def _binding_problems(role_ref: Mapping[str, Any], subjects: Any) -> Iterator[errors.FieldError]:
    for field in ("kind", "name"):
        if not isinstance(role_ref.get(field), str) or not role_ref.get(field):
            yield errors.FieldError(f"roleRef.{field}", "Required value: the role the binding grants")
    for i, subject in enumerate(subjects if isinstance(subjects, list) else []):
        if not isinstance(subject, Mapping) or not subject.get("kind") or not subject.get("name"):
            yield errors.FieldError(f"subjects[{i}]", "Required value: a subject's kind and name")


@register
class RoleBinding(_Open):
    KIND: ClassVar[str] = "RoleBinding"
    PLURAL: ClassVar[str] = "rolebindings"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = (RBAC,)
    role_ref: dict[str, Any] | None = None
    subjects: list[Any] | None = None

    def problems(self) -> Iterator[errors.FieldError]:
        return _binding_problems(self.role_ref or {}, self.subjects)


@register
class ClusterRoleBinding(_Open):
    KIND: ClassVar[str] = "ClusterRoleBinding"
    PLURAL: ClassVar[str] = "clusterrolebindings"
    NAMESPACED: ClassVar[bool] = False
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = (RBAC,)
    role_ref: dict[str, Any] | None = None
    subjects: list[Any] | None = None

    def problems(self) -> Iterator[errors.FieldError]:
        return _binding_problems(self.role_ref or {}, self.subjects)


_LEASE_FIELDS: dict[str, tuple[type, str]] = {
    "holderIdentity": (str, "a string"),
    "acquireTime": (str, "a MicroTime string"),
    "renewTime": (str, "a MicroTime string"),
    "leaseDurationSeconds": (int, "a positive integer"),
    "leaseTransitions": (int, "a non-negative integer"),
}


@register
class Lease(_Open):
    KIND: ClassVar[str] = "Lease"
    PLURAL: ClassVar[str] = "leases"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = (COORDINATION,)
    spec: dict[str, Any] | None = None

    def problems(self) -> Iterator[errors.FieldError]:
        for field, (typ, what) in _LEASE_FIELDS.items():
            value = (self.spec or {}).get(field)
            if value is None:
                continue
            wrong_type = not isinstance(value, typ) or isinstance(value, bool)
            if wrong_type or (isinstance(value, int) and value < (1 if field == "leaseDurationSeconds" else 0)):
                yield errors.FieldError(f"spec.{field}", f"must be {what}, not {value!r}")
