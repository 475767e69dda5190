"""Release decisions: which of this node's held slots to free, and when (DESIGN.md section 4, seed 001, Akri #7).

The device-plugin API has no Deallocate, so the agent learns about released devices in two ways:
- a Pod bound to this node is deleted or terminates (Succeeded/Failed): the slots the kubelet's PodResources
  listed for it are freed at once (Akri #849: prompt release, prompt re-advertisement);
- a slot this node holds is absent from every PodResources listing for `release_grace` seconds: freed then.

Everything here is derived from the store (who holds what) plus PodResources (which container uses which device),
never from memory alone, so it works across agent restarts. A kubelet device id is `(resource, id)`: IL slots are
`(<prefix>/<instance>, <slot>)`, CL slots `(<prefix>/<configuration>, <vdev>)` (the vdev is in the holder); the
prefix is the Configuration's (`api.devices.resource_name`, `resource_of`). Only
slots held by THIS node are ever candidates, and the agent frees each by CAS on the exact holder it saw.

Guard against freeing a device that was handed to a new pod in the meantime: a device allocated after the
observation that attributed it to the gone pod, or listed for another pod now, is not freed with the gone pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from devplace.agent._instances import InstanceRecord
from devplace.api import CL, IL, resource_name

DeviceKey = tuple[str, str]
"""(resource name, device id) as the kubelet knows a device."""

PodKey = tuple[str, str]
"""(namespace, name)."""


@dataclass(frozen=True)
class HeldSlot:
    """A slot this node holds: where it is, who holds it (exactly), and the kubelet's id for it."""

    namespace: str
    instance: str
    slot: str
    holder: IL | CL
    device: DeviceKey


def resource_of(
    record: InstanceRecord, name: str, prefix: str | None, api_versions: Mapping[tuple[str, str], str]
) -> str:
    """The extended resource `name` (the Instance's or its Configuration's) has on this node: the prefix is
    `prefix` when set, else the API group of the Configuration (`api_versions`, by (namespace, name)), else of the
    Instance (its Configuration is gone; an Instance is written with its Configuration's apiVersion)."""
    api_version = api_versions.get((record.namespace, record.configuration)) or str(record.obj.get("apiVersion") or "")
    return resource_name(api_version, name, prefix)


def held_by_node(
    records: Iterable[InstanceRecord],
    node: str,
    prefix: str | None,
    api_versions: Mapping[tuple[str, str], str] | None = None,
) -> dict[DeviceKey, HeldSlot]:
    """Every slot `node` holds, by the kubelet's device key, whether or not the Instance still lists `node`.
    `prefix`, `api_versions`: as `resource_of`."""
    versions = api_versions or {}
    out: dict[DeviceKey, HeldSlot] = {}
    for record in records:
        for slot, holder in record.usage.holders.items():
            if type(holder) is IL:
                if holder.node != node:
                    continue
                key = (resource_of(record, record.name, prefix, versions), slot)
            elif type(holder) is CL:
                if holder.node != node:
                    continue
                key = (resource_of(record, record.configuration, prefix, versions), holder.vdev)
            else:
                continue  # free, DRA's or unreadable
            out[key] = HeldSlot(record.namespace, record.name, slot, holder, key)
    return out


def holds_any(records: Iterable[InstanceRecord], node: str) -> bool:
    """Whether `node` holds any slot of `records` through a device plugin (`held_by_node` is not empty)."""
    for record in records:
        for holder in record.usage.holders.values():
            if (type(holder) is IL or type(holder) is CL) and holder.node == node:
                return True
    return False


def absences(
    held: Mapping[DeviceKey, HeldSlot],
    in_use: set[DeviceKey],
    absent_since: Mapping[DeviceKey, float],
    allocated_at: Mapping[DeviceKey, float],
    now: float,
    grace: float,
) -> tuple[dict[DeviceKey, float], list[HeldSlot]]:
    """One PodResources observation at `now`: the new absence record, and the held slots due for release.

    A held device not in use is absent since it was allocated when no listing has shown it in use since
    (`allocated_at`: the caller forgets a device's allocation once a listing shows it, and the kubelet lists a
    device from the moment its Allocate has returned), else since the first observation that missed it, or since it
    was allocated again if that is later. Due once absent for at least `grace`. Devices in use, or no longer held,
    drop out of the record.
    """
    since_out: dict[DeviceKey, float] = {}
    due: list[HeldSlot] = []
    for key, slot in held.items():
        if key in in_use:
            continue
        allocated = allocated_at.get(key)
        since = absent_since.get(key, now if allocated is None else allocated)
        if allocated is not None and allocated > since:
            since = allocated
        since_out[key] = since
        if now - since >= grace:
            due.append(slot)
    return since_out, due


def pod_release(
    devices: Iterable[DeviceKey],
    observed_at: int,
    others_in_use: set[DeviceKey],
    allocated_seq: Mapping[DeviceKey, int],
    held: Mapping[DeviceKey, HeldSlot],
) -> list[HeldSlot]:
    """The held slots to free because the pod that used `devices` (as seen at observation number `observed_at`)
    is gone: those this node still holds, not in use by another pod, and not allocated again since."""
    out: list[HeldSlot] = []
    for key in sorted(set(devices)):
        slot = held.get(key)
        if slot is None or key in others_in_use:
            continue
        if allocated_seq.get(key, -1) > observed_at:
            continue
        out.append(slot)
    return out
