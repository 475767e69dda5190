"""ResourceSlices from Instances: the pure half of devplace as a DRA driver's publisher (DESIGN.md section 6a,
shared/reference/dra.md sections 1 and 3). The agent (local devices) and the controller (shared devices) read their
Instances, call `instance_devices` and `plan_pool`, and write what the plan says by compare-and-swap.

Devices (the convention between the scheduler, the kubelet plugin and this publisher): an Instance's device is
`instance_device` plus the string attribute `instance` (the Instance's name, as the scheduler reads it back; cut at 64
characters as every string is) so any part maps a device back to its Instance. Capacity 1 is one device. Capacity N > 1
is, where the cluster keeps the fields (`SliceSupport.consumable`), one device with `allowMultipleAllocations` and a
consumable capacity `slots` of N (default 1 per allocation, any whole number 1..N); elsewhere N devices `<device>-<i>`,
each with the int attribute `slot: i`. A device its handler reports unhealthy or no longer reports (`unhealthy`) carries
the taint `devplace.io/unhealthy` (NoSchedule) where the cluster keeps device taints (`SliceSupport.taints`), and is
left out where it does not, so the scheduler stops choosing it either way. Keys over Kubernetes' 32 per device drop the
last broker properties by name.

Pools (`PoolSpec`): a node's local devices are one pool named after the node, in slices `<node>-devplace.io-<k>` with
`spec.nodeName`; shared devices are one pool per set of nodes that see them (`shared-<digest>`, slices
`devplace.io-shared-<digest>-<k>`) with a `nodeSelector` naming those nodes (one slice has one selector, so devices
seen by different node sets cannot share a slice; a pool per node set keeps a change to one shared device from
touching the slices of another). The selector's one term is `matchFields metadata.name In [node]` for one node; for
several it is `matchExpressions kubernetes.io/hostname In [nodes]`, because Kubernetes refuses a field requirement
with more than one value: the kubelet labels each node with its hostname, which is its name unless the cloud
provider names nodes otherwise (then such a device is reachable from no node, and says so by never being allocated).

`plan_pool` is the rule, as Kubernetes' own resourceslice controller (k8s.io/dynamic-resource-allocation) applies it:
- a slice holds at most 128 devices, 64 when one of them has taints; a pool spans `resourceSliceCount` slices;
- only slices of the pool's highest generation count; others (and slices whose names are not the pool's) are deleted;
- placement is sticky: a device stays in the slice it is in, a new one goes to the first slice with room, so a change
  to one device touches one slice; the pool is packed afresh (sorted by name) only when that layout is wasteful
  (more slices than packing needs, or an empty or over-full slice);
- the generation is kept when the change is at most one slice update and no new slice (one write is atomic: no reader
  sees a half-changed pool), and bumped otherwise, every slice then rewritten at the new generation;
- nothing changed, nothing written (taints compare without `timeAdded`, which an API server may set; a stored
  `timeAdded` is kept).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from devplace.api._cel import MAX_KEYS, MAX_VALUE_LENGTH
from devplace.api._dradevices import (
    DRIVER,
    GROUP_VERSION,
    MAX_DEVICES,
    MAX_DEVICES_WITH_EXTRAS,
    WELL_KNOWN,
    device_name,
    instance_device,
)

UNHEALTHY_TAINT = "devplace.io/unhealthy"
"""The key of the taint on a device its handler reports unhealthy (effect NoSchedule)."""
PUBLISHER_LABEL = "devplace.io/slice-publisher"
"""On every slice devplace writes: `agent` (a node's local pool) or `controller` (shared pools)."""
INSTANCE_ATTRIBUTE = "instance"
SLOT_ATTRIBUTE = "slot"
SLOTS_CAPACITY = "slots"
PROBE_DRIVER = "probe.devplace.io"
"""The driver of the probe slice (`probe_slice`): no DeviceClass selects it, so nothing allocates its device."""
_RESERVED = (INSTANCE_ATTRIBUTE, SLOT_ATTRIBUTE, SLOTS_CAPACITY)
_MAX_NAME = 253


@dataclass(frozen=True)
class SliceSupport:
    """What the cluster keeps of a slice (read from a probe write, `support_of`)."""

    consumable: bool
    """`allowMultipleAllocations` and a capacity's `requestPolicy` survive (DRAConsumableCapacity)."""
    taints: bool
    """Device `taints` survive (DRADeviceTaints)."""


FULL_SUPPORT = SliceSupport(consumable=True, taints=True)


def _digest(text: str, size: int = 6) -> str:
    return hashlib.blake2b(text.encode(), digest_size=size).hexdigest()


def _cut_name(prefix: str, room: int) -> str:
    """`prefix` as the start of a DNS subdomain name with `room` characters left for a suffix."""
    limit = _MAX_NAME - room
    return prefix if len(prefix) <= limit else f"{prefix[: limit - 13].rstrip('-.')}-{_digest(prefix)}"


# -- probing ------------------------------------------------------------------------------------------------------


def probe_slice(name: str, node: str | None) -> dict[str, Any]:
    """A slice with one device that uses every optional field the publisher may write (`support_of` reads what a
    create kept). `node`: the prober's node (a node may write only slices with its nodeName); None: allNodes."""
    device = {
        "name": "probe",
        "allowMultipleAllocations": True,
        "capacity": {SLOTS_CAPACITY: _slots_capacity(2)},
        "taints": [{"key": UNHEALTHY_TAINT, "effect": "NoSchedule"}],
    }
    placement: dict[str, Any] = {"nodeName": node} if node else {"allNodes": True}
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": name, "labels": {PUBLISHER_LABEL: "probe"}},
        "spec": {
            "driver": PROBE_DRIVER,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            **placement,
            "devices": [device],
        },
    }


def support_of(stored: Mapping[str, Any]) -> SliceSupport:
    """What a stored probe slice (`probe_slice`, as the create answered it) says the cluster keeps."""
    devices = (stored.get("spec") or {}).get("devices") or [{}]
    device = devices[0] if isinstance(devices[0], Mapping) else {}
    slots = (device.get("capacity") or {}).get(SLOTS_CAPACITY) or {}
    consumable = device.get("allowMultipleAllocations") is True and bool(slots.get("requestPolicy"))
    return SliceSupport(consumable=consumable, taints=bool(device.get("taints")))


# -- devices --------------------------------------------------------------------------------------------------------


def _slots_capacity(n: int) -> dict[str, Any]:
    return {
        "value": str(n),
        "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": str(n), "step": "1"}},
    }


def _fit_keys(device: dict[str, Any]) -> None:
    """At most `MAX_KEYS` attributes and capacities: the last broker properties by name give way (module docstring)."""
    attrs: dict[str, Any] = device.get("attributes") or {}
    capacity: dict[str, Any] = device.get("capacity") or {}
    spare = sorted(k for k in (*attrs, *capacity) if k not in _RESERVED and k not in WELL_KNOWN)
    while len(attrs) + len(capacity) > MAX_KEYS and spare:
        key = spare.pop()
        attrs.pop(key, None)
        capacity.pop(key, None)
    for key in ("attributes", "capacity"):
        if not device.get(key):
            device.pop(key, None)


def instance_devices(
    instance: Mapping[str, Any],
    configuration: Mapping[str, Any] | None = None,
    *,
    support: SliceSupport,
    unhealthy: bool = False,
    handler_name: str | None = None,
) -> list[dict[str, Any]]:
    """The slice devices (wire dicts) of one Instance wire dict (module docstring); `errors.Invalid` naming the
    field for an Instance `instance_device` cannot read."""
    if unhealthy and not support.taints:
        return []
    base = instance_device(instance, configuration, handler_name=handler_name).to_wire()
    meta = instance.get("metadata") or {}
    full = str(meta.get("name") or "")[:MAX_VALUE_LENGTH]
    capacity = int((instance.get("spec") or {}).get("capacity", 1) or 1)
    attrs: dict[str, Any] = {k: v for k, v in (base.get("attributes") or {}).items() if k not in _RESERVED}
    caps: dict[str, Any] = {k: v for k, v in (base.get("capacity") or {}).items() if k not in _RESERVED}
    attrs[INSTANCE_ATTRIBUTE] = {"string": full}
    taints = [{"key": UNHEALTHY_TAINT, "effect": "NoSchedule"}] if unhealthy else []

    def one(name: str, extra_attrs: Mapping[str, Any], extra_caps: Mapping[str, Any], shared: bool) -> dict[str, Any]:
        device: dict[str, Any] = {
            "name": name,
            "attributes": {**attrs, **extra_attrs},
            "capacity": {**caps, **extra_caps},
        }
        if shared:
            device["allowMultipleAllocations"] = True
        if taints:
            device["taints"] = [dict(t) for t in taints]
        _fit_keys(device)
        return device

    if capacity <= 1:
        return [one(base["name"], {}, {}, False)]
    if support.consumable:
        return [one(base["name"], {}, {SLOTS_CAPACITY: _slots_capacity(capacity)}, True)]
    name = str(meta.get("name") or "")
    return [one(device_name(f"{name}-{i}"), {SLOT_ATTRIBUTE: {"int": i}}, {}, False) for i in range(capacity)]


# -- pools ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolSpec:
    """Where a pool is published: its name, its slices' name prefix and placement, the labels they carry."""

    pool: str
    prefix: str
    placement: Mapping[str, Any]
    labels: Mapping[str, str] = field(default_factory=dict)

    def slice_name(self, index: int) -> str:
        return f"{self.prefix}-{index}"

    def index_of(self, name: str) -> int | None:
        head, sep, tail = name.rpartition("-")
        if not sep or head != self.prefix or not tail.isdigit() or (tail != "0" and tail.startswith("0")):
            return None
        return int(tail)


def local_pool(node: str) -> PoolSpec:
    """A node's pool of local devices: named after the node, `spec.nodeName` the node."""
    return PoolSpec(node, _cut_name(f"{node}-{DRIVER}", 8), {"nodeName": node}, {PUBLISHER_LABEL: "agent"})


HOSTNAME_LABEL = "kubernetes.io/hostname"


def node_selector(nodes: Iterable[str]) -> dict[str, Any]:
    """One term selecting `nodes` (module docstring): one node by its name (`matchFields metadata.name`), several by
    the hostname label the kubelet puts on every node (Kubernetes allows exactly one value for a field requirement)."""
    names = sorted(set(nodes))
    if len(names) == 1:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": names}]}
    else:
        term = {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": names}]}
    return {"nodeSelectorTerms": [term]}


def shared_pool(nodes: Iterable[str]) -> PoolSpec:
    """The pool of the shared devices seen by exactly `nodes` (module docstring)."""
    names = sorted(set(nodes))
    digest = _digest("\n".join(names))
    return PoolSpec(
        f"shared-{digest}",
        f"{DRIVER}-shared-{digest}",
        {"nodeSelector": node_selector(names)},
        {PUBLISHER_LABEL: "controller"},
    )


@dataclass(frozen=True)
class SliceWrite:
    """One write of a plan: create `body`, update `body` (it carries the stored resourceVersion), or delete the
    stored slice `body` (by name, with its resourceVersion as precondition)."""

    op: Literal["create", "update", "delete"]
    body: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])


def _limit(devices: Sequence[Mapping[str, Any]]) -> int:
    return MAX_DEVICES_WITH_EXTRAS if any(d.get("taints") for d in devices) else MAX_DEVICES


def _packed(devices: Sequence[dict[str, Any]], max_devices: int) -> list[list[dict[str, Any]]]:
    chunks: list[list[dict[str, Any]]] = []
    for device in devices:
        if chunks and len(chunks[-1]) < min(max_devices, _limit([*chunks[-1], device])):
            chunks[-1].append(device)
        else:
            chunks.append([device])
    return chunks


def _comparable(devices: Any) -> list[Any]:
    out = []
    for device in devices or []:
        if isinstance(device, Mapping) and device.get("taints"):
            device = {**device, "taints": [{k: v for k, v in t.items() if k != "timeAdded"} for t in device["taints"]]}
        out.append(device)
    return out


def _keep_time_added(stored: Sequence[Mapping[str, Any]], devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    before = {d.get("name"): d for d in stored if isinstance(d, Mapping)}
    out = []
    for device in devices:
        old = before.get(device["name"])
        if old and device.get("taints") and old.get("taints"):
            taints = []
            for taint in device["taints"]:
                match = next(
                    (
                        t
                        for t in old["taints"]
                        if t.get("key") == taint.get("key")
                        and t.get("value") == taint.get("value")
                        and t.get("effect") == taint.get("effect")
                        and t.get("timeAdded")
                    ),
                    None,
                )
                kept = match is not None and "timeAdded" not in taint
                taints.append({**taint, "timeAdded": match["timeAdded"]} if kept and match else taint)
            device = {**device, "taints": taints}
        out.append(device)
    return out


def plan_pool(
    spec: PoolSpec,
    devices: Iterable[dict[str, Any]],
    previous: Iterable[Mapping[str, Any]],
    *,
    max_devices: int = MAX_DEVICES,
) -> list[SliceWrite]:
    """The writes that make the stored slices of `spec`'s pool (`previous`: every stored slice of the pool) list
    exactly `devices` (module docstring): deletes first, then updates, then creates. Devices with the same name: the
    first wins. Empty when nothing is to change."""
    wanted: dict[str, dict[str, Any]] = {}
    for device in devices:
        wanted.setdefault(device["name"], device)
    stored = [s for s in previous if ((s.get("spec") or {}).get("pool") or {}).get("name") == spec.pool]
    generation = max((int(s["spec"]["pool"].get("generation") or 0) for s in stored), default=0)
    current: dict[int, Mapping[str, Any]] = {}
    obsolete: list[Mapping[str, Any]] = []
    for item in sorted(stored, key=lambda s: str(s["metadata"]["name"])):
        index = spec.index_of(str(item["metadata"]["name"]))
        if int(item["spec"]["pool"].get("generation") or 0) < generation or index is None or index in current:
            obsolete.append(item)
        else:
            current[index] = item
    if not wanted:
        return [SliceWrite("delete", dict(s)) for s in (*obsolete, *current.values())]

    layout = _sticky(current, wanted, max_devices)
    packed = _packed([wanted[n] for n in sorted(wanted)], max_devices)
    if layout is None or len(layout) > len(packed):
        layout = packed
    obsolete += [current.pop(i) for i in sorted(current) if i >= len(layout)]
    count = len(layout)

    def body(index: int, generation: int) -> dict[str, Any]:
        old = current.get(index)
        devices = layout[index] if old is None else _keep_time_added(old["spec"].get("devices") or [], layout[index])
        meta: dict[str, Any] = {"name": spec.slice_name(index)}
        if spec.labels:
            meta["labels"] = dict(spec.labels)
        if old is not None:
            meta = {**old["metadata"], **meta}
        return {
            "apiVersion": GROUP_VERSION,
            "kind": "ResourceSlice",
            "metadata": meta,
            "spec": {
                "driver": DRIVER,
                "pool": {"name": spec.pool, "generation": generation, "resourceSliceCount": count},
                **spec.placement,
                "devices": devices,
            },
        }

    changed = [i for i, old in current.items() if _differs(old, body(i, generation), spec)]
    new = [i for i in range(count) if i not in current]
    if new or len(changed) > 1:
        generation += 1
        changed = sorted(current)
    writes = [SliceWrite("delete", dict(s)) for s in obsolete]
    writes += [SliceWrite("update", body(i, generation)) for i in sorted(changed)]
    writes += [SliceWrite("create", body(i, generation)) for i in new]
    return writes


def _differs(old: Mapping[str, Any], new: Mapping[str, Any], spec: PoolSpec) -> bool:
    old_spec, new_spec = old.get("spec") or {}, new["spec"]
    if old_spec.get("pool") != new_spec["pool"] or old_spec.get("driver") != DRIVER:
        return True
    if any(old_spec.get(k) != v for k, v in spec.placement.items()):
        return True
    if ((old.get("metadata") or {}).get("labels") or {}) != new["metadata"].get("labels", {}):
        return True
    return _comparable(old_spec.get("devices")) != _comparable(new_spec["devices"])


def _sticky(
    current: Mapping[int, Mapping[str, Any]], wanted: Mapping[str, dict[str, Any]], max_devices: int
) -> list[list[dict[str, Any]]] | None:
    """Every wanted device where it is now, new ones in the first slice with room; None when that layout is not
    valid (a gap in the slice indexes, an empty or over-full slice)."""
    if sorted(current) != list(range(len(current))):
        return None
    layout: list[list[dict[str, Any]]] = []
    placed: set[str] = set()
    for index in range(len(current)):
        names = [d.get("name") for d in current[index]["spec"].get("devices") or [] if isinstance(d, Mapping)]
        chosen = [n for n in names if isinstance(n, str) and n in wanted and n not in placed]
        placed.update(chosen)
        layout.append([wanted[n] for n in chosen])
    for name in sorted(n for n in wanted if n not in placed):
        device = wanted[name]
        for chunk in layout:
            if len(chunk) < min(max_devices, _limit([*chunk, device])):
                chunk.append(device)
                break
        else:
            layout.append([device])
    if any(not chunk or len(chunk) > min(max_devices, _limit(chunk)) for chunk in layout):
        return None
    return layout
