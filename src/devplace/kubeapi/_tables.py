"""The columns an object is shown with: one definition for `devplace get` and the API server's Tables.

Kubernetes lets the server decide what `kubectl get` prints: asked for `application/json;as=Table;g=meta.k8s.io`,
it answers a `meta.k8s.io/v1` `Table` with column definitions and a row of cells per object; kubectl prints the
columns of priority 0, and with `-o wide` those of priority 1 too. `devplace get` prints the same columns from the
same definitions here, so the two cannot drift: the CLI's header is the column's name in upper case (`Used/Capacity`
-> `USED/CAPACITY`, which is what kubectl prints too).

Every table starts with Name and has Age after the kind's priority-0 columns, then the wide (priority-1) columns,
in kubectl's order. devplace's kinds show what their operators look for (an Instance's configuration, nodes and used
slots; a ResourceClass's allocatable and requested slots; a Configuration's handler and brokers); the built-in kinds
get kubectl's familiar columns (Pods: Ready, Status, Restarts; Nodes: Status, Roles, Version; Deployments: Ready,
Up-to-date, Available; ...) computed from the fields devplace stores. Kinds with nothing special show Name and Age.

Cells are plain JSON values (str, int, bool) or None for "no value", which `devplace get` prints as `<none>`; a
Table sends `<none>` in string columns as Kubernetes' printers do (kubectl would print a null as nothing).
Ages read as kubectl's (`duration.HumanDuration`: `45s`, `5m30s`, `3h10m`, `2d4h`). Pure: the time is an argument.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Cell = str | int | float | bool | None
IncludeObject = Literal["None", "Metadata", "Object"]
NONE = "<none>"


@dataclass(frozen=True)
class Column:
    """One column: Kubernetes' `TableColumnDefinition` fields and how to compute a cell from an object."""

    name: str
    value: Callable[[Mapping[str, Any], float], Cell]
    type: str = "string"
    format: str = ""
    description: str = ""
    priority: int = 0

    @property
    def header(self) -> str:
        return self.name.upper()

    def definition(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


# -- reading objects -----------------------------------------------------------------------------------------------


def _dig(obj: Any, *path: str) -> Any:
    cur = obj
    for part in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _joined(values: Iterable[Any]) -> str | None:
    text = ",".join(str(v) for v in values if v not in (None, ""))
    return text or None


def _scalar(value: Any) -> Cell:
    """A stored value as a cell: scalars as they are, lists and maps as kubectl prints them compactly."""
    if value is None or value == "" or value == [] or value == {}:
        return None
    if isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list):
        return _joined(cell_text(_scalar(v)) for v in value)
    if isinstance(value, Mapping):
        return ",".join(f"{k}={cell_text(_scalar(v))}" for k, v in value.items())
    return str(value)


def _at(*path: str, default: Cell = None) -> Callable[[Mapping[str, Any], float], Cell]:
    def get(obj: Mapping[str, Any], now: float) -> Cell:
        value = _scalar(_dig(obj, *path))
        return default if value is None else value

    return get


def _int_at(*path: str, default: int | None = None) -> Callable[[Mapping[str, Any], float], Cell]:
    def get(obj: Mapping[str, Any], now: float) -> Cell:
        value = _dig(obj, *path)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        return default

    return get


def cell_text(value: Cell) -> str:
    """A cell as kubectl prints it: `<none>` for no value, booleans in lower case."""
    if value is None or value == "":
        return NONE
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _timestamp(raw: Any) -> float | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return dt.datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def age(seconds: float) -> str:
    """kubectl's `duration.HumanDuration`: `45s`, `5m30s`, `179m`, `3h10m`, `20h`, `2d4h`, `30d`, `2y10d`."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 3 * 60:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _age(obj: Mapping[str, Any], now: float) -> Cell:
    created = _timestamp(_dig(obj, "metadata", "creationTimestamp"))
    return None if created is None else age(now - created)


def _since(start_path: tuple[str, ...], end_path: tuple[str, ...]) -> Callable[[Mapping[str, Any], float], Cell]:
    def get(obj: Mapping[str, Any], now: float) -> Cell:
        start = _timestamp(_dig(obj, *start_path))
        if start is None:
            return None
        end = _timestamp(_dig(obj, *end_path))
        return age((now if end is None else end) - start)

    return get


# -- devplace kinds ------------------------------------------------------------------------------------------------


def strategy_of(configuration: Mapping[str, Any]) -> str | None:
    """A Configuration's broker strategy: `brokerStrategy`'s key, else Akri's default for its broker spec."""
    strategy = _dig(configuration, "spec", "brokerStrategy")
    if isinstance(strategy, Mapping) and strategy:
        return ",".join(str(k) for k in strategy)
    broker = _dig(configuration, "spec", "brokerSpec")
    if not isinstance(broker, Mapping):
        return None
    if "brokerJobSpec" in broker:
        return "job"
    return "perNode" if "brokerPodSpec" in broker else None


BROKER_COUNTS = ("desired", "running", "pending")


def broker_counts(configuration: Mapping[str, Any]) -> dict[str, int | None]:
    """The controller's broker counts from `status.brokers` (None: not reported yet)."""
    counts = _dig(configuration, "status", "brokers")
    counts = counts if isinstance(counts, Mapping) else {}
    return {
        key: value if isinstance(value := counts.get(key), int) and not isinstance(value, bool) else None
        for key in BROKER_COUNTS
    }


def _broker_count(key: str) -> Callable[[Mapping[str, Any], float], Cell]:
    return lambda obj, now: broker_counts(obj)[key]


def instance_usage(obj: Mapping[str, Any], now: float = 0.0) -> str:
    """An Instance's slots held / capacity: `2/3`."""
    usage = _dig(obj, "spec", "deviceUsage")
    usage = usage if isinstance(usage, Mapping) else {}
    capacity = _dig(obj, "spec", "capacity") or len(usage) or 1
    used = sum(1 for holder in usage.values() if holder)
    return f"{used}/{capacity}"


def _device_kind(obj: Mapping[str, Any], now: float) -> Cell:
    return _scalar(_dig(obj, "spec", "deviceKind")) or _scalar(_dig(obj, "spec", "discoveryHandler", "name"))


def _class_selector(obj: Mapping[str, Any], now: float) -> Cell:
    terms = []
    for term in _list(_dig(obj, "spec", "resourceSelector")):
        exprs = []
        for expr in _list(_dig(term, "matchExpressions")):
            if not isinstance(expr, Mapping):
                continue
            values = [str(v) for v in _list(expr.get("values"))]
            shown = "" if not values else f" {values[0]}" if len(values) == 1 else f" [{', '.join(values)}]"
            exprs.append(f"{expr.get('key')} {expr.get('operator')}{shown}")
        terms.append(" && ".join(exprs) or "(nothing)")
    return " || ".join(terms) or None


# -- built-in kinds ------------------------------------------------------------------------------------------------


def _node_status(obj: Mapping[str, Any], now: float) -> Cell:
    status = "Unknown"
    for cond in _list(_dig(obj, "status", "conditions")):
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            status = "Ready" if cond.get("status") == "True" else "NotReady"
    if _dig(obj, "spec", "unschedulable") is True:
        status += ",SchedulingDisabled"
    return status


_ROLE_PREFIX = "node-role.kubernetes.io/"


def _node_roles(obj: Mapping[str, Any], now: float) -> Cell:
    labels = _dig(obj, "metadata", "labels")
    labels = labels if isinstance(labels, Mapping) else {}
    roles = sorted(k.removeprefix(_ROLE_PREFIX) for k in labels if k.startswith(_ROLE_PREFIX))
    role = labels.get("kubernetes.io/role")
    if isinstance(role, str) and role:
        roles.append(role)
    return _joined(sorted(set(roles)))


def _node_address(kind: str) -> Callable[[Mapping[str, Any], float], Cell]:
    def get(obj: Mapping[str, Any], now: float) -> Cell:
        for address in _list(_dig(obj, "status", "addresses")):
            if isinstance(address, Mapping) and address.get("type") == kind:
                return _scalar(address.get("address"))
        return None

    return get


def _container_statuses(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [s for s in _list(_dig(obj, "status", "containerStatuses")) if isinstance(s, Mapping)]


def _pod_ready(obj: Mapping[str, Any], now: float) -> Cell:
    total = len(_list(_dig(obj, "spec", "containers")))
    ready = sum(1 for s in _container_statuses(obj) if s.get("ready") is True)
    return f"{ready}/{total}"


def _pod_status(obj: Mapping[str, Any], now: float) -> Cell:
    """kubectl's pod status, from what devplace stores: a container's waiting or terminated reason wins over the
    phase, and a pod being deleted is Terminating."""
    reason = _dig(obj, "status", "reason") or _dig(obj, "status", "phase") or "Pending"
    running = False
    for status in reversed(_container_statuses(obj)):
        state = status.get("state")
        state = state if isinstance(state, Mapping) else {}
        waiting, terminated = _dig(state, "waiting", "reason"), state.get("terminated")
        if waiting:
            reason = waiting
        elif isinstance(terminated, Mapping):
            code = terminated.get("exitCode")
            reason = terminated.get("reason") or (f"ExitCode:{code}" if code is not None else reason)
        elif "running" in state and status.get("ready") is True:
            running = True
    if reason == "Completed" and running:
        reason = "Running"
    if _dig(obj, "metadata", "deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _pod_restarts(obj: Mapping[str, Any], now: float) -> Cell:
    counts = (s.get("restartCount") for s in _container_statuses(obj))
    return sum(c for c in counts if isinstance(c, int) and not isinstance(c, bool))


def _service_external_ip(obj: Mapping[str, Any], now: float) -> Cell:
    ips = [str(ip) for ip in _list(_dig(obj, "spec", "externalIPs"))]
    for ingress in _list(_dig(obj, "status", "loadBalancer", "ingress")):
        if isinstance(ingress, Mapping):
            ips.append(str(ingress.get("ip") or ingress.get("hostname") or ""))
    if ips:
        return _joined(ips)
    service_type = _dig(obj, "spec", "type") or "ClusterIP"
    if service_type == "ExternalName":
        return _scalar(_dig(obj, "spec", "externalName"))
    return "<pending>" if service_type == "LoadBalancer" else None


def _service_ports(obj: Mapping[str, Any], now: float) -> Cell:
    shown = []
    for port in _list(_dig(obj, "spec", "ports")):
        if not isinstance(port, Mapping):
            continue
        text = str(port.get("port"))
        if port.get("nodePort"):
            text += f":{port['nodePort']}"
        shown.append(f"{text}/{port.get('protocol') or 'TCP'}")
    return _joined(shown)


def _label_selector(*path: str) -> Callable[[Mapping[str, Any], float], Cell]:
    """A `LabelSelector` (matchLabels, matchExpressions) as kubectl prints it: `app=web,tier in (a,b)`."""

    def get(obj: Mapping[str, Any], now: float) -> Cell:
        selector = _dig(obj, *path)
        if not isinstance(selector, Mapping):
            return None
        labels = selector.get("matchLabels")
        parts = [f"{k}={v}" for k, v in labels.items()] if isinstance(labels, Mapping) else []
        for expr in _list(selector.get("matchExpressions")):
            if isinstance(expr, Mapping):
                values = ",".join(str(v) for v in _list(expr.get("values")))
                operator = str(expr.get("operator") or "").lower()
                parts.append(f"{expr.get('key')} {operator} ({values})" if values else f"{expr.get('key')} {operator}")
        return _joined(parts)

    return get


def _template_containers(field: str) -> Callable[[Mapping[str, Any], float], Cell]:
    def get(obj: Mapping[str, Any], now: float) -> Cell:
        containers = _list(_dig(obj, "spec", "template", "spec", "containers"))
        return _joined(c.get(field) for c in containers if isinstance(c, Mapping))

    return get


def _ratio(done: tuple[str, ...], want: tuple[str, ...], default_want: int = 1) -> Callable[..., Cell]:
    def get(obj: Mapping[str, Any], now: float) -> Cell:
        have, total = _dig(obj, *done), _dig(obj, *want)
        return f"{have or 0}/{default_want if total is None else total}"

    return get


def _role_ref(obj: Mapping[str, Any]) -> Cell:
    kind, name = _dig(obj, "roleRef", "kind"), _dig(obj, "roleRef", "name")
    return f"{kind}/{name}" if kind and name else None


def _data_count(obj: Mapping[str, Any], now: float) -> Cell:
    count = 0
    for field in ("data", "binaryData", "stringData"):
        value = obj.get(field)
        count += len(value) if isinstance(value, Mapping) else 0
    return count


def _claim_state(obj: Mapping[str, Any]) -> str:
    """Kubernetes' STATE of a ResourceClaim: `pending`, else `allocated` and `reserved` as they hold, `deleted`
    while it is being deleted, joined by commas."""
    raw = obj.get("status")
    status: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    states = []
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        states.append("deleted")
    if status.get("allocation") is not None:  # set, even if empty, is allocated (Kubernetes: a non-nil pointer)
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
    return ",".join(states) or "pending"


_NAME = Column(
    "Name",
    lambda obj, now: _scalar(_dig(obj, "metadata", "name")),
    format="name",
    description="Name must be unique within a namespace.",
)
_AGE = Column(
    "Age",
    _age,
    description="CreationTimestamp is a timestamp representing the server time when this object was created.",
)


def _wide(column: Column) -> Column:
    return Column(column.name, column.value, column.type, column.format, column.description, priority=1)


_CONTAINERS = _wide(Column("Containers", _template_containers("name"), description="Names of each container."))
_IMAGES = _wide(Column("Images", _template_containers("image"), description="Images referenced by each container."))
_SELECTOR = _wide(Column("Selector", _label_selector("spec", "selector"), description="The label selector."))

# Per kind: (columns between Name and Age, columns after Age: kubectl's order; the wide ones have priority 1).
_KIND_COLUMNS: dict[str, tuple[list[Column], list[Column]]] = {
    "Configuration": (
        [
            Column("Handler", _at("spec", "discoveryHandler", "name"), description="The discovery handler."),
            Column("Capacity", _int_at("spec", "capacity", default=1), "integer", description="Slots per device."),
            Column("Unique", _at("spec", "uniqueDevices", default=True), "boolean", description="uniqueDevices."),
            Column("Brokers", lambda o, now: strategy_of(o), description="The broker strategy."),
        ],
        [
            _wide(Column("Device-Kind", _device_kind, description="The Kind resource classes select on.")),
            *(
                _wide(Column(key.capitalize(), _broker_count(key), "integer", description=f"Brokers {key}."))
                for key in BROKER_COUNTS
            ),
        ],
    ),
    "Instance": (
        [
            Column("Config", _at("spec", "configurationName"), description="The Configuration that found it."),
            Column("Shared", _at("spec", "shared", default=False), "boolean", description="Seen by several nodes."),
            Column("Nodes", _at("spec", "nodes"), description="Nodes that see the device."),
            Column("Used/Capacity", instance_usage, description="Slots held / capacity."),
        ],
        [_wide(Column("CDI-Name", _at("spec", "cdiName"), description="The device's CDI name."))],
    ),
    "ResourceClass": (
        [
            Column("Allocatable", _at("status", "allocatable"), description="Slots the class matches."),
            Column("Requested", _at("status", "requested"), description="Slots in use."),
            Column("Strategy", _at("spec", "selectionStrategy"), description="How devices are picked."),
        ],
        [_wide(Column("Selector", _class_selector, description="The resource selector."))],
    ),
    # DRA (resource.k8s.io/v1): Kubernetes' own columns (pkg/printers/internalversion); DeviceClass and
    # ResourceClaimTemplate have Name and Age only.
    "ResourceSlice": (
        [
            Column("Node", _at("spec", "nodeName"), description="The node the slice's devices are local to."),
            Column("Driver", _at("spec", "driver"), description="The DRA driver."),
            Column("Pool", _at("spec", "pool", "name"), description="The device pool."),
        ],
        [],
    ),
    "ResourceClaim": (
        [Column("State", lambda obj, now: _claim_state(obj), description="pending, allocated, reserved, deleted.")],
        [],
    ),
    "Node": (
        [
            Column("Status", _node_status, description="The node's Ready condition."),
            Column("Roles", _node_roles, description="node-role.kubernetes.io labels."),
        ],
        [
            Column("Version", _at("status", "nodeInfo", "kubeletVersion"), description="The kubelet's version."),
            _wide(Column("Internal-IP", _node_address("InternalIP"), description="The internal IP.")),
            _wide(Column("External-IP", _node_address("ExternalIP"), description="The external IP.")),
            _wide(Column("OS-Image", _at("status", "nodeInfo", "osImage"), description="The OS image.")),
            _wide(Column("Kernel-Version", _at("status", "nodeInfo", "kernelVersion"), description="The kernel.")),
            _wide(
                Column(
                    "Container-Runtime",
                    _at("status", "nodeInfo", "containerRuntimeVersion"),
                    description="The container runtime.",
                )
            ),
        ],
    ),
    "Pod": (
        [
            Column("Ready", _pod_ready, description="Ready containers / containers."),
            Column("Status", _pod_status, description="The pod's phase or its containers' reason."),
            Column("Restarts", _pod_restarts, "integer", description="Container restarts."),
        ],
        [
            _wide(Column("IP", _at("status", "podIP"), description="The pod's IP.")),
            _wide(Column("Node", _at("spec", "nodeName"), description="The node the pod is bound to.")),
        ],
    ),
    "Service": (
        [
            Column("Type", _at("spec", "type", default="ClusterIP"), description="The service type."),
            Column("Cluster-IP", _at("spec", "clusterIP"), description="The cluster IP."),
            Column("External-IP", _service_external_ip, description="External IPs."),
            Column("Port(s)", _service_ports, description="The service ports."),
        ],
        [_wide(Column("Selector", _at("spec", "selector"), description="The labels of the pods it selects."))],
    ),
    "ConfigMap": ([Column("Data", _data_count, "integer", description="Number of keys.")], []),
    "Namespace": (
        [Column("Status", _at("status", "phase", default="Active"), description="Active or Terminating.")],
        [],
    ),
    "Lease": ([Column("Holder", _at("spec", "holderIdentity"), description="Who holds the lease.")], []),
    "RoleBinding": ([Column("Role", lambda o, now: _role_ref(o), description="The role it binds.")], []),
    "ClusterRoleBinding": ([Column("Role", lambda o, now: _role_ref(o), description="The role it binds.")], []),
    "Secret": (
        [
            Column("Type", _at("type", default="Opaque"), description="The secret type."),
            Column("Data", _data_count, "integer", description="Number of keys."),
        ],
        [],
    ),
    "Job": (
        [
            Column("Completions", _ratio(("status", "succeeded"), ("spec", "completions")), description="Succeeded."),
            Column(
                "Duration",
                _since(("status", "startTime"), ("status", "completionTime")),
                description="How long the job ran.",
            ),
        ],
        [_CONTAINERS, _IMAGES, _SELECTOR],
    ),
    "Deployment": (
        [
            Column("Ready", _ratio(("status", "readyReplicas"), ("spec", "replicas")), description="Ready replicas."),
            Column("Up-to-date", _int_at("status", "updatedReplicas", default=0), "integer", description="Updated."),
            Column("Available", _int_at("status", "availableReplicas", default=0), "integer", description="Available."),
        ],
        [_CONTAINERS, _IMAGES, _SELECTOR],
    ),
}


def _event_last_seen(obj: Mapping[str, Any], now: float) -> Cell:
    for path in (("series", "lastObservedTime"), ("lastTimestamp",), ("eventTime",), ("firstTimestamp",)):
        seen = _timestamp(_dig(obj, *path))
        if seen is not None:
            return age(now - seen)
    return None


def _event_object(obj: Mapping[str, Any], now: float) -> Cell:
    kind, name = _dig(obj, "involvedObject", "kind"), _dig(obj, "involvedObject", "name")
    return f"{str(kind).lower()}/{name}" if kind and name else _scalar(name)


def _event_source(obj: Mapping[str, Any], now: float) -> Cell:
    component = _dig(obj, "source", "component") or _dig(obj, "reportingComponent")
    host = _dig(obj, "source", "host")
    return None if not component else f"{component}, {host}" if host else str(component)


def _event_count(obj: Mapping[str, Any], now: float) -> Cell:
    count = _dig(obj, "series", "count") or _dig(obj, "count")
    return count if isinstance(count, int) and not isinstance(count, bool) else 1


_OWN_LAYOUT: dict[str, list[Column]] = {
    "Event": [
        Column("Last Seen", _event_last_seen, description="When the event was last seen."),
        Column("Type", _at("type"), description="Normal or Warning."),
        Column("Reason", _at("reason"), description="Why the event was emitted."),
        Column("Object", _event_object, description="The object the event is about."),
        _wide(Column("Subobject", _at("involvedObject", "fieldPath"), description="The part of the object.")),
        _wide(Column("Source", _event_source, description="Who emitted the event.")),
        Column("Message", _at("message"), description="What happened."),
        _wide(Column("First Seen", _since(("firstTimestamp",), ("none",)), description="When first seen.")),
        _wide(Column("Count", _event_count, "integer", description="How many times it happened.")),
        _wide(Column("Name", _at("metadata", "name"), description="The event's name.")),
    ],
}
"""Kinds whose table is not Name, own columns, Age (kubectl's Events start with Last Seen, as Kubernetes has them)."""


def columns(kind: str, *, wide: bool = True) -> list[Column]:
    """The columns of `kind` in kubectl's order: Name, the kind's own, Age, more of its own (or the kind's own
    layout, `_OWN_LAYOUT`); without `wide`, only those of priority 0."""
    own = _OWN_LAYOUT.get(kind)
    if own is not None:
        return [c for c in own if wide or c.priority == 0]
    before, after = _KIND_COLUMNS.get(kind, ([], []))
    return [_NAME, *before, _AGE, *(c for c in after if wide or c.priority == 0)]


def partial_metadata(obj: Mapping[str, Any], api_version: str = "meta.k8s.io/v1") -> dict[str, Any]:
    """Kubernetes' `PartialObjectMetadata` of an object (what a Table row carries by default)."""
    meta = obj.get("metadata")
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": dict(meta) if isinstance(meta, Mapping) else {},
    }


def _served(column: Column, value: Cell) -> Cell:
    """A cell as a Table carries it: no value in a string column is `<none>`, as Kubernetes' own printers send it
    (kubectl prints a null cell as nothing); typed columns keep null."""
    return NONE if value is None and column.type == "string" else value


def _row(obj: Mapping[str, Any], cols: Sequence[Column], now: float, include: IncludeObject, gv: str) -> dict[str, Any]:
    row: dict[str, Any] = {"cells": [_served(c, c.value(obj, now)) for c in cols]}
    if include == "Object":
        row["object"] = obj
    elif include == "Metadata":
        row["object"] = partial_metadata(obj, gv)
    return row


def table(
    kind: str,
    objects: Sequence[Mapping[str, Any]],
    *,
    now: float,
    include_object: IncludeObject = "Metadata",
    api_version: str = "meta.k8s.io/v1",
    metadata: Mapping[str, Any] | None = None,
    definitions: bool = True,
) -> dict[str, Any]:
    """A `meta.k8s.io` `Table` of `objects` (of `kind`) with every column, wide ones at priority 1.

    `definitions=False` leaves `columnDefinitions` empty, as Kubernetes does for watch events after the first
    (kubectl keeps the ones it has)."""
    cols = columns(kind)
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": dict(metadata or {}),
        "columnDefinitions": [c.definition() for c in cols] if definitions else [],
        "rows": [_row(obj, cols, now, include_object, api_version) for obj in objects],
    }
