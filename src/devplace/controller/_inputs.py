"""What the controller decides on: Configurations and Instances read once from their wire dicts.

Frozen views over the plain wire dicts the store holds. A Configuration is validated with the API model
(`api.devices.Configuration`), so one that reached the store some other way is not trusted: its `problem` says why,
and the controller creates nothing for it. An Instance is read leniently (the agent wrote it; a missing field takes
its default).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from devplace import errors
from devplace.api import Configuration, controller_reference

RESOURCE_NAME_CONFLICT = "ResourceNameConflict"
"""The per-node condition the agent writes on a Configuration that lost a resource-name clash on that node."""


def seconds_of(timestamp: Any) -> float | None:
    """An RFC 3339 timestamp (`2026-01-01T00:00:00Z`) in seconds since the epoch; None when absent or unreadable."""
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:
        return _dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _generation(value: Any) -> int:
    try:
        return max(1, int(value or 1))
    except (TypeError, ValueError):
        return 1


@dataclass(frozen=True)
class InstanceFacts:
    """An Instance as the planner sees it."""

    namespace: str
    name: str
    uid: str
    api_version: str
    configuration: str
    nodes: tuple[str, ...]
    shared: bool
    capacity: int
    broker_properties: Mapping[str, str] = field(default_factory=dict, compare=False)
    created: float = 0.0
    wire: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> InstanceFacts:
        meta = _meta(obj)
        spec = obj.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        nodes = spec.get("nodes")
        props = spec.get("brokerProperties")
        capacity = spec.get("capacity")
        return cls(
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            api_version=str(obj.get("apiVersion") or "akri.sh/v0"),
            configuration=str(spec.get("configurationName") or ""),
            nodes=tuple(dict.fromkeys(n for n in nodes if isinstance(n, str) and n)) if isinstance(nodes, list) else (),
            shared=bool(spec.get("shared", False)),
            capacity=capacity if isinstance(capacity, int) and capacity >= 1 else 1,
            broker_properties={str(k): str(v) for k, v in props.items()} if isinstance(props, Mapping) else {},
            created=seconds_of(meta.get("creationTimestamp")) or 0.0,
            wire=obj,
        )


@dataclass(frozen=True)
class Member:
    """One member of a group: `count` Instances of a Configuration, or of a ResourceClass."""

    count: int
    configuration: str | None = None
    resource_class: str | None = None


@dataclass(frozen=True)
class ConfigurationFacts:
    """A Configuration as the planner sees it; `problem` is set (and nothing else trusted) when it is invalid.

    `from_wire` never raises: an invalid Configuration must be seen (and flagged), not mistaken for a deleted one
    (which would delete everything it owns)."""

    namespace: str
    name: str
    uid: str
    api_version: str
    generation: int
    strategy: str | None = None
    capacity: int = 1
    pod_spec: Mapping[str, Any] | None = field(default=None, compare=False)
    job_spec: Mapping[str, Any] | None = field(default=None, compare=False)
    instance_service_spec: Mapping[str, Any] | None = field(default=None, compare=False)
    configuration_service_spec: Mapping[str, Any] | None = field(default=None, compare=False)
    replicas: int = 1
    devices_per_pod: int = 1
    pool_size: int = 1
    pool_mode: str = "static"
    pool_timeout: float | None = None
    members: tuple[Member, ...] = ()
    pool_waiting_since: float | None = None
    """Static pools with a timeout: since when leftovers wait (the controller's own `status.pools.waitingSince`)."""
    conflicts: frozenset[str] = frozenset()
    """Nodes where the Configuration lost a resource-name clash (the agent's ResourceNameConflict conditions)."""
    problem: str | None = None
    wire: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> ConfigurationFacts:
        meta = _meta(obj)
        base = cls(
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            api_version=str(obj.get("apiVersion") or "akri.sh/v0"),
            generation=_generation(meta.get("generation")),
            wire=obj,
        )
        try:
            model = Configuration.from_obj(obj)
        except errors.Invalid as e:
            return dataclasses.replace(base, problem=e.message)
        spec = model.spec
        broker = spec.broker_spec
        chosen = spec.broker_strategy
        replicas, per_pod, size, mode, timeout = 1, 1, 1, "static", None
        members: tuple[Member, ...] = ()
        if chosen is not None:
            if chosen.deployment is not None:
                replicas = chosen.deployment.replicas
            if chosen.configuration is not None:
                replicas, per_pod = chosen.configuration.replicas, chosen.configuration.devices_per_pod
            if chosen.pool is not None:
                size, mode, timeout = chosen.pool.size, chosen.pool.mode, chosen.pool.timeout_seconds
            if chosen.group is not None:
                members = tuple(
                    Member(m.count, configuration=m.configuration, resource_class=m.resource_class)
                    for m in chosen.group.members
                )
        status = obj.get("status")
        conditions = status.get("conditions") if isinstance(status, Mapping) else None
        pool_status = status.get("pools") if isinstance(status, Mapping) else None
        waiting_since = seconds_of(pool_status.get("waitingSince")) if isinstance(pool_status, Mapping) else None
        conflicts = frozenset(
            str(c.get("node"))
            for c in (conditions if isinstance(conditions, list) else [])
            if isinstance(c, Mapping) and c.get("type") == RESOURCE_NAME_CONFLICT and c.get("status", "True") == "True"
        )
        return dataclasses.replace(
            base,
            strategy=model.strategy,
            capacity=spec.capacity,
            pod_spec=broker.broker_pod_spec if broker else None,
            job_spec=broker.broker_job_spec if broker else None,
            instance_service_spec=spec.instance_service_spec,
            configuration_service_spec=spec.configuration_service_spec,
            replicas=replicas,
            devices_per_pod=per_pod,
            pool_size=size,
            pool_mode=mode,
            pool_timeout=timeout,
            members=members,
            pool_waiting_since=waiting_since,
            conflicts=conflicts,
        )

    def owner_reference(self) -> dict[str, Any]:
        return controller_reference(self.api_version, "Configuration", self.name, self.uid)


def instance_owner(instance: InstanceFacts) -> dict[str, Any]:
    return controller_reference(instance.api_version, "Instance", instance.name, instance.uid)
