"""Instance decisions: names, new Instances, joining and leaving `nodes`, offline expiry, capacity sync.

Pure functions over wire dicts and parsed records; the agent (`devplace.agent._agents`) applies each one inside a
compare-and-swap loop, re-running it on the fresh object after every `Conflict`, so several agents racing on one
shared Instance converge: each adds or removes only itself, and a deletion carries the resourceVersion it decided on.

Lifecycle (Akri #650/#760 done right):
- a device seen by this node -> the Instance exists and lists this node (create, or join by CAS);
- a device no longer seen -> this node leaves `nodes` at once; held slots stay until released;
- `nodes` empty -> deleted at once if the device is local (not shared); a shared Instance is stamped with
  `devplace.io/offline-since` and deleted by any agent running its Configuration once `offline_grace` has passed,
  unless a node sees it again first (joining clears the stamp). The stamp lives in the store, so the grace survives
  agent restarts;
- the Configuration deleted -> this node leaves, and an Instance left with no node is deleted at once;
- slots out of step with the Configuration's capacity, or breaking the slot rules where this node owns them
  (`slots.repair`) -> set right by the node's capacity sync; an Instance whose slots break the rules is still read,
  served and joined (its node back in `nodes`), never dropped for it;
- a device whose properties changed under the same id (a udev devnode renumbered, a camera's IP changed) -> its
  Instance's brokerProperties are rewritten (device properties, the Configuration's over them) by the same sync, so
  the next Allocate hands the new values to the container. One node writes them (`writes_properties`): the node of a
  local device; for a shared one the first node in `nodes`, so nodes that see it differently never take turns.

What the agent writes stays valid against Akri's Instance CRD (`api.devices`): `cdiName` is set
(`<group>/<configuration>=<digest>`, added by the sync to an Instance that lacks it) and the spec holds no field of
devplace's own; the offline stamp is an annotation.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devplace import errors
from devplace.agent import _slots as slots
from devplace.agent._configurations import ConfigurationView, check_instance
from devplace.api import cdi_name, controller_reference
from devplace.discovery import Device
from devplace.store import DELETE, Delete

OFFLINE_SINCE = "devplace.io/offline-since"
"""Annotation on a shared Instance that no node sees: when the last node left (RFC 3339, UTC)."""


def device_digest(device_id: str, node: str, shared: bool) -> str:
    """6 hex digits: a 3-byte blake2b of the device id, with the node name appended when the device is local."""
    text = device_id if shared else f"{device_id}{node}"
    return hashlib.blake2b(text.encode(), digest_size=3).hexdigest()


def instance_name(configuration: str, device_id: str, node: str, shared: bool) -> str:
    return f"{configuration}-{device_digest(device_id, node, shared)}"


def timestamp(seconds: float) -> str:
    """RFC 3339 UTC with microseconds (as the offline stamp and condition times are written)."""
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_timestamp(text: str) -> float | None:
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


_WRITE_STAMPS = frozenset({"resourceVersion", "generation", "managedFields"})
"""Metadata every write changes: a claim or release of a slot moves them and nothing else but `spec.deviceUsage`."""


def _checked_before(obj: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether `obj` equals `old` but for `spec.deviceUsage` and the write stamps (`_WRITE_STAMPS`: a string
    `resourceVersion`, an integer `generation`, `managedFields`, which the api model leaves unchecked): what the model
    checks of it is then what it checked of `old`."""
    if type(obj) is dict and type(old) is dict:  # decoded objects: the comparisons are made in C
        return _dicts_checked_before(obj, old)
    return _maps_checked_before(obj, old)


def _maps_checked_before(obj: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """`_checked_before` of any two mappings, key by key."""
    if obj.keys() != old.keys():
        return False
    for key, value in obj.items():
        other = old[key]
        if key == "spec":
            if not _is_map(value) or not _is_map(other) or value.keys() != other.keys():
                return False
            for k, v in value.items():
                if k != "deviceUsage" and v != other[k]:
                    return False
        elif key == "metadata":
            if not _is_map(value) or not _is_map(other):
                return False
            if value.keys() - _WRITE_STAMPS != other.keys() - _WRITE_STAMPS:
                return False
            if type(value.get("resourceVersion", "")) is not str:
                return False
            generation = value.get("generation")
            if generation is not None and type(generation) is not int:
                return False
            for k, v in value.items():
                if k not in _WRITE_STAMPS and v != other[k]:
                    return False
        elif value != other:
            return False
    return True


def _dicts_checked_before(obj: dict[str, Any], old: dict[str, Any]) -> bool:
    """`_checked_before` of two plain dicts (what every watch event decodes to): the parts that may differ are set
    aside in copies, and the rest is compared whole."""
    meta, spec = obj.get("metadata"), obj.get("spec")
    old_meta, old_spec = old.get("metadata"), old.get("spec")
    if not (type(meta) is dict and type(spec) is dict and type(old_meta) is dict and type(old_spec) is dict):
        return _maps_checked_before(obj, old)
    if type(meta.get("resourceVersion", "")) is not str:
        return False
    generation = meta.get("generation")
    if generation is not None and type(generation) is not int:
        return False
    if obj.keys() != old.keys() or spec.keys() != old_spec.keys():
        return False
    rest, old_rest = obj.copy(), old.copy()
    rest["metadata"] = old_rest["metadata"] = rest["spec"] = old_rest["spec"] = None
    if rest != old_rest:
        return False
    spec, old_spec = spec.copy(), old_spec.copy()
    spec["deviceUsage"] = old_spec["deviceUsage"] = None  # both have it or neither (the keys are equal)
    if spec != old_spec:
        return False
    meta, old_meta = meta.copy(), old_meta.copy()
    for stamp in _WRITE_STAMPS:
        meta.pop(stamp, None)
        old_meta.pop(stamp, None)
    return meta == old_meta


def _is_map(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # a decoded object is a dict: no ABC check for it


@dataclass(frozen=True)
class InstanceRecord:
    """An Instance parsed once at the agent's boundary (the wire dict kept alongside)."""

    obj: dict[str, Any]
    name: str
    namespace: str
    configuration: str
    shared: bool
    nodes: tuple[str, ...]
    usage: slots.Usage
    broker_properties: Mapping[str, str]
    offline_since: float | None
    resource_version: int

    @classmethod
    def from_wire(
        cls, obj: Mapping[str, Any], *, validate: bool = True, previous: InstanceRecord | None = None
    ) -> InstanceRecord:
        """Parse a stored Instance (not copied: store results are the caller's own copies).

        `validate`: check it against the api model first, all but `spec.deviceUsage` (`errors.Invalid` names the
        bad field). The usage is read whatever it holds (`slots.Usage.read`): what breaks the slot rules is inert
        and repaired by its owner (`slots.repair`), never a reason to drop the device. Only the agent's own write
        results skip the check: they were built from checked objects by the pure decisions here and in `slots`.
        `previous`: the record this one replaces; parts whose wire form is equal to its are taken over instead of
        parsed again (a watch event usually changes one field, most often only who holds a slot), and an object that
        differs from it only in `spec.deviceUsage` and `metadata.resourceVersion` is not checked again (the check
        leaves the usage out, and `previous` was checked, or built from checked objects).
        """
        if previous is not None and _checked_before(obj, previous.obj):
            return previous._successor(obj)
        if validate:
            check_instance(obj)
        meta = obj["metadata"]
        spec = obj["spec"]
        name = meta["name"]
        capacity = int(spec.get("capacity", 1))
        since_raw = (meta.get("annotations") or {}).get(OFFLINE_SINCE)
        wire_usage = spec.get("deviceUsage") or {}
        wire_props = spec.get("brokerProperties") or {}
        wire_nodes = spec.get("nodes") or ()
        usage: slots.Usage | None = None
        props: Mapping[str, str] | None = None
        nodes: tuple[str, ...] | None = None
        if previous is not None and previous.name == name:
            old_spec = previous.obj["spec"]
            old_usage = old_spec.get("deviceUsage") or {}
            if previous.usage.capacity == capacity:
                usage = previous.usage if old_usage == wire_usage else previous.usage.reread(wire_usage, old_usage)
            if previous.broker_properties == wire_props:
                props = previous.broker_properties
            if previous.nodes == tuple(wire_nodes):
                nodes = previous.nodes
        return cls(
            obj=obj if isinstance(obj, dict) else dict(obj),
            name=name,
            namespace=meta.get("namespace") or "",
            configuration=spec["configurationName"],
            shared=bool(spec.get("shared", False)),
            nodes=tuple(wire_nodes) if nodes is None else nodes,
            usage=slots.Usage.read(name, capacity, wire_usage) if usage is None else usage,
            broker_properties=dict(wire_props) if props is None else props,
            offline_since=_parse_timestamp(since_raw) if since_raw else None,
            resource_version=int(meta.get("resourceVersion") or 0),
        )

    def _successor(self, obj: Mapping[str, Any]) -> InstanceRecord:
        """The record of `obj`, which equals this record's object but for `spec.deviceUsage` and the write stamps
        (`_checked_before`): every field but the usage and the resourceVersion is this record's (a watch event of a
        claim or a release; the usage read again only where a holder changed)."""
        spec = obj["spec"]
        old_usage = self.obj["spec"].get("deviceUsage") or {}
        wire_usage = spec.get("deviceUsage") or {}
        usage = self.usage if old_usage == wire_usage else self.usage.reread(wire_usage, old_usage)
        return self.with_usage(obj if isinstance(obj, dict) else dict(obj), usage)

    def with_usage(self, stored: dict[str, Any], usage: slots.Usage) -> InstanceRecord:
        """The record of `stored`, this agent's write of exactly this record's object with `usage` as deviceUsage
        (nothing else changed, so nothing else is parsed again)."""
        # a field-for-field copy: what `dataclasses.replace` does, minus its per-field checks (Allocate's path)
        record: InstanceRecord = object.__new__(InstanceRecord)
        record.__dict__.update(
            self.__dict__, obj=stored, usage=usage, resource_version=int(stored["metadata"].get("resourceVersion") or 0)
        )
        return record

    @property
    def digest(self) -> str:
        return self.name.rpartition("-")[2]


def new_instance(configuration: Mapping[str, Any], device: Device, node: str) -> dict[str, Any]:
    """The wire form of a new Instance for `device` seen by `node`, owned by `configuration` (a stored wire dict)."""
    cfg = ConfigurationView.from_obj(configuration)
    name = instance_name(cfg.name, device.id, node, device.shared)
    owner = controller_reference(cfg.api_version, "Configuration", cfg.name, cfg.metadata.uid)
    obj: dict[str, Any] = {
        "apiVersion": cfg.api_version,
        "kind": "Instance",
        "metadata": {"name": name, "namespace": cfg.namespace or "default", "ownerReferences": [owner]},
        "spec": {
            "configurationName": cfg.name,
            "cdiName": cdi_name(cfg.api_version, cfg.name, name.rpartition("-")[2]),
            "capacity": cfg.spec.capacity,
            "shared": device.shared,
            "nodes": [node],
            "deviceUsage": slots.initial_usage(name, cfg.spec.capacity),
            "brokerProperties": {**dict(device.properties), **cfg.spec.broker_properties},
        },
    }
    check_instance(obj)  # the boundary check: never write what we would refuse to read
    return obj


def joined(obj: Mapping[str, Any], node: str) -> dict[str, Any] | None:
    """`obj` with `node` in `nodes` and no offline stamp; None if nothing changes."""
    nodes = list(obj["spec"].get("nodes") or [])
    annotations = dict(obj["metadata"].get("annotations") or {})
    if node in nodes and OFFLINE_SINCE not in annotations:
        return None
    out = copy.deepcopy(dict(obj))
    if node not in nodes:
        out["spec"]["nodes"] = [*nodes, node]
    if OFFLINE_SINCE in annotations:
        del annotations[OFFLINE_SINCE]
        out["metadata"]["annotations"] = annotations
    return out


def left(obj: Mapping[str, Any], node: str, now: float, configuration_gone: bool) -> dict[str, Any] | Delete | None:
    """`node` leaves: the updated object, `DELETE` when nobody sees a local device (or its Configuration is gone),
    or None when `node` was not listed. (`store.cas` deletes on the condition that `obj` is still current.)"""
    nodes = list(obj["spec"].get("nodes") or [])
    if node not in nodes:
        return None
    nodes.remove(node)
    if not nodes and (configuration_gone or not obj["spec"].get("shared", False)):
        return DELETE
    out = copy.deepcopy(dict(obj))
    out["spec"]["nodes"] = nodes
    if not nodes:
        annotations = dict(out["metadata"].get("annotations") or {})
        annotations[OFFLINE_SINCE] = timestamp(now)
        out["metadata"]["annotations"] = annotations
    return out


def marked_offline(obj: Mapping[str, Any], now: float) -> dict[str, Any] | None:
    """A shared Instance nobody sees but without a stamp (written by someone else): start its grace now."""
    annotations = dict(obj["metadata"].get("annotations") or {})
    if obj["spec"].get("nodes") or OFFLINE_SINCE in annotations:
        return None
    out = copy.deepcopy(dict(obj))
    annotations[OFFLINE_SINCE] = timestamp(now)
    out["metadata"]["annotations"] = annotations
    return out


def expired(obj: Mapping[str, Any], now: float, grace: float, configuration_gone: bool) -> Delete | None:
    """Delete an Instance no node sees: at once if local or orphaned, after `grace` from the stamp if shared."""
    if obj["spec"].get("nodes"):
        return None
    if configuration_gone or not obj["spec"].get("shared", False):
        return DELETE
    since = _parse_timestamp((obj["metadata"].get("annotations") or {}).get(OFFLINE_SINCE, ""))
    if since is not None and now >= since + grace:
        return DELETE
    return None


def expected_cdi_name(obj: Mapping[str, Any]) -> str:
    """The `cdiName` an Instance should carry (`api.devices.cdi_name`), from its apiVersion, Configuration and name."""
    return cdi_name(
        str(obj.get("apiVersion") or ""), obj["spec"]["configurationName"], obj["metadata"]["name"].rpartition("-")[2]
    )


def writes_properties(shared: bool, nodes: Sequence[str], node: str) -> bool:
    """Whether `node` writes the device properties of an Instance it sees: always for a local device, and for a
    shared one when it is the first node in `nodes` (one writer, so differing views never take turns)."""
    return not shared or (bool(nodes) and nodes[0] == node)


def synced(
    obj: Mapping[str, Any],
    node: str,
    capacity: int,
    broker_properties: Mapping[str, str],
    device_properties: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """Follow the Configuration and the device: repair what `node` owns of the slots (`slots.repair`), resize them
    to `capacity` (held slots are never touched), set `cdiName`, and carry the Configuration's brokerProperties
    (they win over device properties). With `device_properties` (what `node` discovers now) and `node` the writer
    (`writes_properties`), the brokerProperties become exactly the device's with the Configuration's over them;
    otherwise the Configuration's are merged into what is there. None if already in step."""
    spec = obj["spec"]
    name = obj["metadata"]["name"]
    wire_usage = spec.get("deviceUsage")
    usage = slots.Usage.read(name, int(spec.get("capacity", 1)), wire_usage)
    resized = slots.resize(slots.repair(usage, node), capacity)
    props = dict(spec.get("brokerProperties") or {})
    if device_properties is not None and writes_properties(
        bool(spec.get("shared", False)), spec.get("nodes") or (), node
    ):
        wanted_props = {**device_properties, **broker_properties}
    else:
        wanted_props = {**props, **broker_properties}
    wanted_usage = resized.to_wire()
    cdi = expected_cdi_name(obj)
    if (
        resized.capacity == usage.capacity
        and wanted_usage == wire_usage
        and wanted_props == props
        and spec.get("cdiName") == cdi
    ):
        return None
    out = copy.deepcopy(dict(obj))
    out["spec"]["cdiName"] = cdi
    out["spec"]["capacity"] = capacity
    out["spec"]["deviceUsage"] = wanted_usage
    out["spec"]["brokerProperties"] = wanted_props
    return out


@dataclass
class Plan:
    """What this node should do for one Configuration's Instances; each list names Instances."""

    create: list[Device] = field(default_factory=list)
    join: list[str] = field(default_factory=list)
    leave: list[str] = field(default_factory=list)
    sync: list[str] = field(default_factory=list)
    mark_offline: list[str] = field(default_factory=list)
    expire: list[str] = field(default_factory=list)
    next_deadline: float | None = None
    device_properties: dict[str, Mapping[str, str]] = field(default_factory=dict)
    """For Instances in `sync` whose device properties this node writes: the properties it discovers now."""

    @property
    def empty(self) -> bool:
        return not (self.create or self.join or self.leave or self.sync or self.mark_offline or self.expire)


def _needs_sync(
    record: InstanceRecord,
    node: str,
    capacity: int,
    broker_properties: Mapping[str, str],
    device_properties: Mapping[str, str] | None,
) -> bool:
    if record.usage.capacity != capacity:
        return True
    if any(record.broker_properties.get(k) != v for k, v in broker_properties.items()):
        return True
    if device_properties is not None and record.broker_properties != {**device_properties, **broker_properties}:
        return True
    if record.obj["spec"].get("cdiName") != expected_cdi_name(record.obj):
        return True
    if slots.repair(record.usage, node) is not record.usage:
        return True
    wire: Any = record.obj["spec"].get("deviceUsage")
    return bool(slots.resize(record.usage, capacity).to_wire() != wire)


def plan(
    node: str,
    configuration: ConfigurationView | None,
    devices: Sequence[Device] | None,
    instances: Iterable[InstanceRecord],
    now: float,
    offline_grace: float,
    lookup: Callable[[str], InstanceRecord | None] | None = None,
) -> Plan:
    """Decide for one Configuration (None: deleted) from this node's latest device list (None: not known yet).

    `instances` are the Configuration's Instances in its namespace that concern this node: every one that lists it
    or lists no node (the others it neither syncs, leaves nor expires). `lookup(name)` finds one of the others, for
    a device this node discovers whose Instance another node made (joined, not created again). Without a device
    list only capacity sync and offline expiry are decided, so an agent that just started never leaves Instances it
    has not re-discovered yet.
    """
    out = Plan()
    records = {r.name: r for r in instances}
    if configuration is None:
        for record in records.values():
            if node in record.nodes:
                out.leave.append(record.name)
            elif not record.nodes:
                out.expire.append(record.name)
        return out
    capacity = configuration.spec.capacity
    props = configuration.spec.broker_properties
    wanted: dict[str, Device] = {}
    if devices is not None:
        for device in devices:
            wanted.setdefault(instance_name(configuration.name, device.id, node, device.shared), device)
        for name, device in wanted.items():
            found = records.get(name)
            if found is None and lookup is not None:
                found = lookup(name)
            if found is None:
                out.create.append(device)
            elif node not in found.nodes or found.offline_since is not None:
                out.join.append(name)
        for record in records.values():
            if record.name not in wanted and node in record.nodes:
                out.leave.append(record.name)
    for record in records.values():
        if node in record.nodes and record.name not in out.leave:
            seen_device = wanted.get(record.name) if writes_properties(record.shared, record.nodes, node) else None
            seen = None if seen_device is None else seen_device.properties
            if _needs_sync(record, node, capacity, props, seen):
                out.sync.append(record.name)
                if seen is not None:
                    out.device_properties[record.name] = seen
        if record.nodes or record.name in wanted:
            continue
        if not record.shared:
            out.expire.append(record.name)
        elif record.offline_since is None:
            out.mark_offline.append(record.name)  # offline from now: due for expiry a grace later
            deadline = now + offline_grace
            out.next_deadline = deadline if out.next_deadline is None else min(out.next_deadline, deadline)
        elif now >= record.offline_since + offline_grace:
            out.expire.append(record.name)
        else:
            deadline = record.offline_since + offline_grace
            out.next_deadline = deadline if out.next_deadline is None else min(out.next_deadline, deadline)
    return out


def require_record(obj: Mapping[str, Any]) -> InstanceRecord:
    """`InstanceRecord.from_wire`, with the Instance's name in the message."""
    try:
        return InstanceRecord.from_wire(obj)
    except errors.Invalid as e:
        name = (obj.get("metadata") or {}).get("name", "?")
        raise errors.Invalid(f"Instance {name}: {e.message}", e.fields) from e
