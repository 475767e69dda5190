"""What the simulated kubelet decides when a Pod arrives: pure functions over plain data.

The kubelet, not the plugin or the scheduler, picks which device IDs a container gets. These functions hold every
rule the simulated kubelet applies to extended resources, so they are table-tested without gRPC or a store:

- A resource is *extended* when its name has a domain prefix outside `kubernetes.io` (`akri.sh/akri-onvif`).
  Extended resources are whole numbers, never overcommitted, never shared between containers.
- A container's need for a resource is its limit, else its request (Kubernetes defaults the request to the limit and
  requires both to match for extended resources).
- The pod's effective need is `max(largest init container need, sum of app container needs)`, per resource, as the
  scheduler and kubelet compute it; admission refuses the pod with `OutOf<resource>` when the node has fewer Healthy
  free devices than that.
- Devices allocated to init containers are offered again to later containers of the same pod (the kubelet reuses
  them): that re-offer is what Akri issue #843 stumbled on.
- Resource classes (seed 003): a request for `rc.devplace.io/<class>` is a request for the devices the scheduler chose
  and wrote on the pod as annotations `scheduler.alpha.kubernetes.io/resClass_<class>_<device>=<qty>`; the kubelet
  turns it into requests on the plugins serving those devices (`<prefix>/<device>`), container by container.
- Picking: devices to reuse first, then the plugin's preferred allocation when it is valid, then candidates in the
  order the kubelet offers them. A real kubelet takes them from an unordered set, so several nodes racing for one
  shared device rarely all pick the same slot; the simulated kubelet shuffles with a seeded generator to match.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devplace import errors
from devplace.api import label_key_problem

_WHOLE = re.compile(r"^\+?[0-9]+$")

RESOURCE_CLASS_PREFIX = "rc.devplace.io"
"""Extended resources under this domain name a ResourceClass, not a device plugin."""

RESOURCE_CLASS_ANNOTATION = "scheduler.alpha.kubernetes.io/resClass_"
"""Prefix of the scheduler's device choice: `<prefix><class>_<device>` = quantity."""


@dataclass(frozen=True)
class ContainerNeed:
    """Extended resources one container asks for; `init` containers run (and allocate) before app containers."""

    name: str
    resources: Mapping[str, int] = field(default_factory=dict)
    init: bool = False


@dataclass(frozen=True)
class Shortfall:
    """Why a pod does not fit: the first resource (by name) with fewer free Healthy devices than the pod needs."""

    resource: str
    requested: int
    free: int
    capacity: int

    @property
    def reason(self) -> str:
        return out_of_reason(self.resource)

    @property
    def message(self) -> str:
        return (
            f"Pod was rejected: Node didn't have enough resource: {self.resource}, "
            f"requested: {self.requested}, free: {self.free}, capacity: {self.capacity}"
        )


def is_extended_resource(name: str) -> bool:
    """`example.com/foo` yes; `cpu`, `kubernetes.io/x`, `requests.x` no."""
    prefix, sep, _ = name.partition("/")
    if not sep:
        return False
    if prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        return False
    return label_key_problem(name) is None


def out_of_reason(resource: str) -> str:
    """The pod status reason the kubelet writes when a resource does not fit: `OutOf` + the resource name."""
    return f"OutOf{resource}"


def _whole_number(value: Any, path: str) -> int:
    if isinstance(value, bool):
        raise errors.Invalid.field(path, f"{value!r} is not a whole number")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _WHOLE.match(value.strip()):
        number = int(value.strip())
    else:
        raise errors.Invalid.field(path, f"{value!r} is not a whole number (extended resources are integers)")
    if number < 0:
        raise errors.Invalid.field(path, f"{value!r} must not be negative")
    return number


def _container_need(container: Any, path: str, init: bool) -> ContainerNeed:
    if not isinstance(container, Mapping):
        raise errors.Invalid.field(path, "a container must be a mapping")
    name = container.get("name")
    if not isinstance(name, str) or not name:
        raise errors.Invalid.field(f"{path}.name", "required")
    resources = container.get("resources")
    resources = {} if resources is None else resources
    if not isinstance(resources, Mapping):
        raise errors.Invalid.field(f"{path}.resources", "must be a mapping")
    parsed: dict[str, dict[str, int]] = {}
    for part in ("requests", "limits"):
        values = resources.get(part)
        values = {} if values is None else values
        if not isinstance(values, Mapping):
            raise errors.Invalid.field(f"{path}.resources.{part}", "must be a mapping")
        parsed[part] = {
            str(key): _whole_number(value, f"{path}.resources.{part}.{key}")
            for key, value in values.items()
            if is_extended_resource(str(key))
        }
    requests, limits = parsed["requests"], parsed["limits"]
    for key in sorted(set(requests) & set(limits)):
        if requests[key] != limits[key]:
            raise errors.Invalid.field(
                f"{path}.resources.requests.{key}",
                f"must equal the limit for an extended resource ({requests[key]} != {limits[key]})",
            )
    needs = {**requests, **limits}
    return ContainerNeed(name, {k: v for k, v in sorted(needs.items()) if v > 0}, init)


def pod_needs(pod: Mapping[str, Any]) -> list[ContainerNeed]:
    """Every container's extended-resource needs, init containers first; `Invalid` names the bad field."""
    spec = pod.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise errors.Invalid.field("spec", "must be a mapping")
    out: list[ContainerNeed] = []
    for part, init in (("initContainers", True), ("containers", False)):
        containers = spec.get(part) or []
        if not isinstance(containers, list):
            raise errors.Invalid.field(f"spec.{part}", "must be a list")
        out.extend(_container_need(c, f"spec.{part}[{i}]", init) for i, c in enumerate(containers))
    return out


def effective_needs(needs: Iterable[ContainerNeed]) -> dict[str, int]:
    """Per resource: max(largest init container need, sum over app containers), the way Kubernetes sizes a pod."""
    init_max: dict[str, int] = {}
    app_sum: dict[str, int] = {}
    for need in needs:
        for resource, count in need.resources.items():
            if need.init:
                init_max[resource] = max(init_max.get(resource, 0), count)
            else:
                app_sum[resource] = app_sum.get(resource, 0) + count
    return {r: max(init_max.get(r, 0), app_sum.get(r, 0)) for r in sorted(set(init_max) | set(app_sum))}


def class_selections(annotations: Mapping[str, str]) -> dict[str, list[tuple[str, int]]]:
    """The scheduler's device choices per resource class, devices sorted by name; `Invalid` names a bad annotation.

    Class and device names are DNS names (no `_`), so the first `_` after the prefix separates them.
    """
    out: dict[str, list[tuple[str, int]]] = {}
    for key, value in sorted(annotations.items()):
        if not key.startswith(RESOURCE_CLASS_ANNOTATION):
            continue
        path = f"metadata.annotations.{key}"
        cls, sep, device = key[len(RESOURCE_CLASS_ANNOTATION) :].partition("_")
        if not cls or not sep or not device:
            raise errors.Invalid.field(path, "expected scheduler.alpha.kubernetes.io/resClass_<class>_<device>")
        out.setdefault(cls, []).append((device, _whole_number(value, path)))
    return out


def expand_resource_classes(
    needs: Sequence[ContainerNeed],
    selections: Mapping[str, Sequence[tuple[str, int]]],
    resource_of: Mapping[str, str],
    class_prefix: str = RESOURCE_CLASS_PREFIX,
) -> list[ContainerNeed]:
    """Replace each container's resource-class requests by requests on the chosen devices' plugins.

    App containers consume the class's chosen units in order (devices are never shared between containers); init
    containers draw from the full choice, since they run before the app containers and the kubelet reuses their
    devices. `resource_of` maps a device name to its registered resource; units that cannot be mapped (no choice
    left, or no plugin for the device) stay as class requests, so admission refuses them as `OutOf<class resource>`.
    """
    remaining = {cls: dict(chosen) for cls, chosen in selections.items()}
    out: list[ContainerNeed] = []
    for need in needs:
        resources: dict[str, int] = {}
        for resource, count in need.resources.items():
            prefix, _, cls = resource.partition("/")
            if prefix != class_prefix:
                resources[resource] = resources.get(resource, 0) + count
                continue
            pool = dict(selections.get(cls, ())) if need.init else remaining.setdefault(cls, {})
            left = count
            for device, qty in pool.items():
                target = resource_of.get(device)
                if left == 0 or qty == 0 or target is None:
                    continue
                take = min(left, qty)
                resources[target] = resources.get(target, 0) + take
                pool[device] = qty - take
                left -= take
            if left:
                resources[resource] = resources.get(resource, 0) + left
        out.append(ContainerNeed(need.name, dict(sorted(resources.items())), need.init))
    return out


def unserved_classes(
    needs: Sequence[ContainerNeed],
    selections: Mapping[str, Sequence[tuple[str, int]]],
    node: str,
    class_prefix: str = RESOURCE_CLASS_PREFIX,
) -> str | None:
    """Why class requests left after `expand_resource_classes` cannot be served, or None when none are left.

    A class is never an extended resource a plugin serves, so what is left is an error of the binding, not a shortage
    on the node: no device chosen for the class (the pod did not go through the devplace scheduler), too few units
    chosen, or chosen devices without a plugin on this node. The kubelet fails such a pod `UnexpectedAdmissionError`.
    """
    left = {
        resource.partition("/")[2]: count
        for resource, count in effective_needs(needs).items()
        if resource.partition("/")[0] == class_prefix and count
    }
    if not left:
        return None
    cls = min(left)
    chosen = selections.get(cls, ())
    if not chosen:
        return (
            f"resource class {class_prefix}/{cls} requested but no device was chosen for it "
            f"(no {RESOURCE_CLASS_ANNOTATION}{cls}_<device> annotation): resource classes are served only to pods "
            "bound by the devplace scheduler"
        )
    devices = ", ".join(f"{device}={qty}" for device, qty in chosen)
    return (
        f"resource class {class_prefix}/{cls}: {left[cls]} more device(s) requested than the scheduler's choice "
        f"({devices}) can serve on node {node} (a chosen device has no device plugin here, or too few were chosen)"
    )


def free_devices(devices: Mapping[str, str], allocated: Iterable[str], healthy: str = "Healthy") -> list[str]:
    """Device IDs that are Healthy and not allocated to any container, sorted."""
    taken = set(allocated)
    return sorted(d for d, health in devices.items() if health == healthy and d not in taken)


def shortfall(
    needs: Mapping[str, int], free: Mapping[str, Sequence[str]], capacity: Mapping[str, int]
) -> Shortfall | None:
    """The first resource the node cannot satisfy, or None when the pod fits. Unknown resources have 0 free."""
    for resource in sorted(needs):
        have = len(free.get(resource, ()))
        if needs[resource] > have:
            return Shortfall(resource, needs[resource], have, capacity.get(resource, 0))
    return None


def pick_devices(
    candidates: Sequence[str],
    count: int,
    *,
    reuse: Sequence[str] = (),
    preferred: Sequence[str] | None = None,
) -> list[str]:
    """Choose `count` device IDs for one container.

    `reuse` (devices the pod's init containers already hold) go first; then the plugin's `preferred` answer if it is
    a valid choice (the right size, only candidates or reused devices, no duplicates); otherwise the first remaining
    candidates in the given order. Raises `Refused` if there are not enough devices (admission rules that out).
    """
    chosen = list(dict.fromkeys(reuse))[:count]
    if len(chosen) == count:
        return chosen
    pool = [c for c in candidates if c not in chosen]
    if preferred is not None:
        allowed = set(pool) | set(chosen)
        wanted = list(dict.fromkeys(preferred))
        if len(wanted) == len(preferred) == count and set(chosen) <= set(wanted) and set(wanted) <= allowed:
            return wanted
    missing = count - len(chosen)
    if len(pool) < missing:
        raise errors.Refused(f"requested {count} devices, only {len(pool) + len(chosen)} free")
    return chosen + pool[:missing]


def running_status(containers: Sequence[str], now: str) -> dict[str, Any]:
    """The status a kubelet writes once every container of the pod started."""
    return {
        "phase": "Running",
        "startTime": now,
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        "containerStatuses": [
            {"name": name, "ready": True, "restartCount": 0, "state": {"running": {"startedAt": now}}}
            for name in containers
        ],
    }


def failed_status(reason: str, message: str, now: str) -> dict[str, Any]:
    """The status of a pod the kubelet rejected at admission: Failed, with Kubernetes' reason and message."""
    return {"phase": "Failed", "reason": reason, "message": message, "startTime": now}


OTHERS_STATUS_FIELDS = ("resourceClaimStatuses", "extendedResourceClaimStatus", "nominatedNodeName")
"""Pod status fields other parts own (the claim controller, the scheduler): a kubelet's status write keeps them."""


def merged_status(current: Mapping[str, Any] | None, status: Mapping[str, Any]) -> dict[str, Any]:
    """The kubelet's `status` over the pod's current one: its fields replace the old, conditions of other types
    (the scheduler's `PodScheduled`) are kept, ahead of the kubelet's own, and so are the fields other parts own
    (`OTHERS_STATUS_FIELDS`: the claims made for the pod)."""
    mine = list(status.get("conditions") or [])
    types = {c.get("type") for c in mine}
    kept = [c for c in (current or {}).get("conditions") or [] if isinstance(c, Mapping) and c.get("type") not in types]
    out = {k: v for k, v in (current or {}).items() if k in OTHERS_STATUS_FIELDS}
    out.update(status)
    if kept or mine:
        out["conditions"] = [*kept, *mine]
    return out
