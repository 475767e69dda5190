"""Pods as the scheduler sees them, and the order pending pods are decided in.

Pure: `pod_info` reads a Pod wire dict once; a bad quantity, selector or class request raises `errors.Invalid`
naming the field. What it keeps:
- `requests`: Kubernetes' effective request per resource, max(sum over containers, max over init containers), plus
  `spec.overhead`; a limit without a request implies the request (cpu in millicores, the rest in whole units).
  Class requests (`rc.devplace.io/<class>`) are not node resources and go to `classes` instead.
- `node_selector` (`spec.nodeSelector`) and the required node affinity
  (`requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`, parsed by `devplace.api._selectors`).
- `tolerations` (`spec.tolerations`, checked as Kubernetes validates them: `taints.pod_tolerations`);
- `priority` (`spec.priority`, set by admission from the priority class; 0 when absent) and `created`
  (`metadata.creationTimestamp`, RFC 3339).

`pending_order`: priority descending, then creation time (oldest first; a pod without one goes last), then
namespace/name: a total order, so the same pending set is always decided in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from devplace import errors
from devplace.api import NodeSelector
from devplace.scheduler._classes import RESOURCE_PREFIX, class_requests
from devplace.scheduler._nodes import Resources, resources_of
from devplace.scheduler._taints import Toleration, pod_tolerations

_NEVER = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class PodInfo:
    """What scheduling one pod needs to know about it."""

    name: str
    namespace: str = "default"
    requests: Resources = field(default_factory=lambda: Resources(pods=1))
    classes: Mapping[str, int] = field(default_factory=dict, hash=False)
    node_selector: Mapping[str, str] = field(default_factory=dict, hash=False)
    affinity: NodeSelector | None = None
    tolerations: tuple[Toleration, ...] = ()
    priority: int = 0
    created: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _container_requests(container: Mapping[str, Any], path: str) -> Resources:
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise errors.Invalid.field(f"{path}.resources", "must be a mapping")
    requests = resources_of(resources.get("requests"), f"{path}.resources.requests", skip_prefix=RESOURCE_PREFIX)
    limits = resources_of(resources.get("limits"), f"{path}.resources.limits", skip_prefix=RESOURCE_PREFIX)
    raw_requests = resources.get("requests") or {}
    extended = {**limits.extended, **requests.extended}
    return Resources(
        cpu=requests.cpu if "cpu" in raw_requests else limits.cpu,
        memory=requests.memory if "memory" in raw_requests else limits.memory,
        extended=extended,
    )


def _max(a: Resources, b: Resources) -> Resources:
    extended = dict(a.extended)
    for name, amount in b.extended.items():
        extended[name] = max(extended.get(name, 0), amount)
    return Resources(max(a.cpu, b.cpu), max(a.memory, b.memory), max(a.pods, b.pods), extended)


def _created(metadata: Mapping[str, Any]) -> datetime | None:
    raw = metadata.get("creationTimestamp")
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise errors.Invalid.field("metadata.creationTimestamp", "must be an RFC 3339 timestamp")
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as e:
        raise errors.Invalid.field("metadata.creationTimestamp", f"not an RFC 3339 timestamp: {raw!r}") from e
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def pod_info(pod: Mapping[str, Any]) -> PodInfo:
    """The `PodInfo` of a Pod wire dict (see the module docstring)."""
    metadata = pod.get("metadata") or {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise errors.Invalid.field("metadata.name", "required, a non-empty string")
    spec = pod.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise errors.Invalid.field("spec", "must be a mapping")
    total = Resources()
    for group in ("containers", "initContainers"):
        containers = spec.get(group) or []
        if not isinstance(containers, list):
            raise errors.Invalid.field(f"spec.{group}", "must be a list")
        for i, container in enumerate(containers):
            if not isinstance(container, Mapping):
                raise errors.Invalid.field(f"spec.{group}[{i}]", "a container must be a mapping")
            one = _container_requests(container, f"spec.{group}[{i}]")
            total = total + one if group == "containers" else _max(total, one)
    total = total + resources_of(spec.get("overhead"), "spec.overhead") + Resources(pods=1)
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in selector.items()
    ):
        raise errors.Invalid.field("spec.nodeSelector", "must be a mapping of label keys to values")
    affinity: NodeSelector | None = None
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is not None:
        path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        affinity = NodeSelector.from_wire(required.get("nodeSelectorTerms"), path)
    priority = spec.get("priority", 0) or 0
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise errors.Invalid.field("spec.priority", "must be an integer")
    return PodInfo(
        name=name,
        namespace=metadata.get("namespace") or "default",
        requests=total,
        classes=class_requests(pod),
        node_selector=dict(selector),
        affinity=affinity,
        tolerations=pod_tolerations(pod),
        priority=priority,
        created=_created(metadata),
    )


def pending_key(pod: PodInfo) -> tuple[int, datetime, str, str]:
    """The order pending pods are decided in: priority descending, then oldest first (no timestamp last), then
    namespace, then name."""
    return (-pod.priority, pod.created or _NEVER, pod.namespace, pod.name)


def pending_order(pods: Iterable[PodInfo]) -> list[PodInfo]:
    """`pods` in `pending_key` order."""
    return sorted(pods, key=pending_key)
