"""What a ResourceClaim's allocation asks of this node: pure readings for NodePrepareResources.

The kubelet names a claim by namespace, name and UID; the plugin reads the stored claim and takes from
`status.allocation.devices.results` the results of its driver (`api.DRIVER`). Each result names a device of a
ResourceSlice, and the slice convention (shared by the slice publishers, the scheduler and this plugin) maps it back:

- `<device_name(instance)>`: the Instance's device (capacity 1, or the consumable form: the result's
  `consumedCapacity.slots`, default 1, is how many of its slots the claim takes, any of them);
- `<device_name(<instance>-<i>)>`: slot i of the Instance (the N-devices form of capacity N).

Device names are computed here from the Instances this agent caches (`device_index`); a name two Instances share
(the same Instance name in two namespaces) is refused rather than guessed. Everything wrong with a claim is a
`ClaimProblem` whose text the kubelet shows in the pod's events: a claim not found, a UID that differs from the
stored claim's (the claim was deleted and created again), no allocation yet, a device no Instance stands for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devplace import errors
from devplace.agent._instances import InstanceRecord
from devplace.api import DRIVER, Quantity, dra_device, slot_name

InstanceKey = tuple[str, str]
"""(namespace, name) of an Instance."""


class ClaimProblem(Exception):
    """Why a claim cannot be prepared (the message is the kubelet's per-claim error)."""


@dataclass(frozen=True)
class Result:
    """One allocation result of this driver, mapped to its Instance."""

    request: str
    pool: str
    device: str
    instance: InstanceKey
    slot: str | None
    """The slot the device stands for (N-devices form), else None: `count` slots of any name."""
    count: int
    share_id: str | None = None


@dataclass(frozen=True)
class Want:
    """A claim's share of one Instance: slots by name, plus `count` of any name."""

    slots: tuple[str, ...] = ()
    count: int = 0


@dataclass(frozen=True)
class Plan:
    results: tuple[Result, ...]
    wants: Mapping[InstanceKey, Want] = field(default_factory=dict)


def device_name(name: str) -> str:
    """The DRA device name of an Instance or slot name (`api.dra_device`'s naming rule)."""
    return dra_device(name, {}).name


def device_index(records: Iterable[InstanceRecord]) -> dict[str, list[tuple[InstanceKey, str | None]]]:
    """Device name -> the (Instance, slot or None) it stands for, over `records` (several: ambiguous)."""
    index: dict[str, list[tuple[InstanceKey, str | None]]] = {}
    for record in records:
        key = (record.namespace, record.name)
        index.setdefault(device_name(record.name), []).append((key, None))
        if record.usage.capacity > 1:
            for i in range(record.usage.capacity):
                slot = slot_name(record.name, i)
                index.setdefault(device_name(slot), []).append((key, slot))
    return index


def check_claim(claim: Mapping[str, Any], namespace: str, name: str, uid: str) -> None:
    """The stored claim is the one the kubelet means (same UID) and is allocated."""
    stored = (claim.get("metadata") or {}).get("uid")
    if stored != uid:
        raise ClaimProblem(
            f"ResourceClaim {namespace}/{name} has UID {stored}, not {uid}: it was deleted and created again"
        )
    if not ((claim.get("status") or {}).get("allocation") or {}):
        raise ClaimProblem(f"ResourceClaim {namespace}/{name} is not allocated (status.allocation is empty)")


def _consumed(result: Mapping[str, Any], where: str) -> int:
    consumed = result.get("consumedCapacity")
    if consumed is None:
        return 1
    if not isinstance(consumed, Mapping):
        raise ClaimProblem(f"{where}.consumedCapacity: a map of capacity name to quantity, not {consumed!r}")
    raw = consumed.get("slots")
    if raw is None:
        return 1
    try:
        value = Quantity.parse(str(raw)).as_fraction()
    except errors.Invalid as e:
        raise ClaimProblem(f"{where}.consumedCapacity.slots: {raw!r} is not a quantity") from e
    if value.denominator != 1 or value < 1:
        raise ClaimProblem(f"{where}.consumedCapacity.slots: {raw!r} is not a whole number of slots >= 1")
    return int(value)


def plan(
    claim: Mapping[str, Any], index: Mapping[str, list[tuple[InstanceKey, str | None]]], driver: str = DRIVER
) -> Plan:
    """The results of `driver` in the claim's allocation, mapped to Instances, and what each Instance must give."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    devices = allocation.get("devices") if isinstance(allocation, Mapping) else None
    results_raw = devices.get("results") if isinstance(devices, Mapping) else None
    if not isinstance(results_raw, list):
        raise ClaimProblem("status.allocation.devices.results: a list of allocation results is required")
    results: list[Result] = []
    wants: dict[InstanceKey, Want] = {}
    for i, raw in enumerate(results_raw):
        if not isinstance(raw, Mapping) or raw.get("driver") != driver:
            continue
        where = f"status.allocation.devices.results[{i}]"
        device = str(raw.get("device") or "")
        found = index.get(device, [])
        if not found:
            raise ClaimProblem(f"{where}: device {device!r} of pool {raw.get('pool')!r} is no Instance this node sees")
        if len(found) > 1:
            names = ", ".join(sorted(f"{ns}/{n}" for (ns, n), _ in found))
            raise ClaimProblem(f"{where}: device {device!r} stands for several Instances ({names})")
        instance, slot = found[0]
        count = 0 if slot is not None else _consumed(raw, where)
        share = raw.get("shareID")
        results.append(
            Result(
                str(raw.get("request") or ""),
                str(raw.get("pool") or ""),
                device,
                instance,
                slot,
                count,
                str(share) if share else None,
            )
        )
        want = wants.get(instance, Want())
        if slot is not None:
            if slot in want.slots:
                raise ClaimProblem(f"{where}: device {device!r} is allocated twice in one claim")
            wants[instance] = Want((*want.slots, slot), want.count)
        else:
            wants[instance] = Want(want.slots, want.count + count)
    return Plan(tuple(results), wants)
