"""Slot decisions for shared devices (DESIGN.md section 4, seeds 000 and 001).

Pure: given an Instance's usage map and a request, decide. No I/O, no clocks, no logging. The shells in
`deviceplugins` and `agents` read an Instance, call one function here and write the result with a compare-and-swap;
on `Conflict` they re-read and call it again, so every rule holds on the freshest state.

Holders travel as strings in `Instance.spec.deviceUsage` and are parsed once, at the agent's boundary, into typed
values by the slot rules of `devplace.api._holders` (the one definition, which the API server enforces too):

| wire                 | holder          | meaning                                                   |
|----------------------|-----------------|-----------------------------------------------------------|
| `""`                 | `FREE`          | nobody holds the slot                                     |
| `"<node>"`           | `IL(node)`      | held through the node's Instance-level plugin             |
| `"C:<vdev>:<node>"`  | `CL(vdev, node)`| held through the node's Configuration-level plugin, vdev  |
| `"D:<ns>/<c>:<node>"`| `DRA(ns, c, node)` | held for the ResourceClaim `<ns>/<c>` prepared on the node (DRA) |
| anything else        | `Unknown(raw)`  | breaks the rules; kept exactly as stored (below)          |

Slots are named `<instance>-<i>` for i in 0..capacity-1 ("canonical"). After a capacity shrink a held slot with
i >= capacity stays ("retiring") until released, then goes. A free slot is claimable only while fewer than
`capacity` slots are held, so capacity is respected at every instant, also while slots retire.

An Instance that breaks the rules (written into the store past the API server, or before it checked them) is not
dropped: one bad slot must not take a device offline. `Usage.read` keeps every slot; what breaks the rules is inert:
- an `Unknown` holder is never claimable, never Healthy and not counted against capacity: no agent writes one, so it
  records no allocation this agent could honour;
- a `DRA` holder is a slot taken through DRA: counted against capacity, Unhealthy to every IL and CL plugin, never
  repaired and never released by the device-plugin release rules (`release_rules` reads only IL and CL holders): only
  the claim's NodeUnprepareResources (`claim_dra`'s inverse, `release_slots`) or the claim's lifecycle frees it;
- a slot whose name is not `<instance>-<i>` ("unnamed") is not advertised, not claimable and not counted: claims take
  only named slots, so no allocation rests on one.
What the node owns it repairs (`repair`, written by the agent's capacity sync): an `Unknown` holder that names it
(`C::node-a`; never one that looks like a DRA holder, `D:...`) becomes its Instance-level hold, which the releaser
frees like any slot the kubelet does not list (so a corrupted record of a running container is not handed out at
once); an unnamed slot it holds goes. `resize` adds
missing slots and drops free ones beyond capacity (unnamed free ones too). An `Unknown` holder naming another node
or none is left alone, as another node's slots are: only the node a slot names writes it (DESIGN.md section 3).

Configuration-level virtual devices ("vdevs"): with `uniqueDevices: true` one per Instance, named like the Instance
(a container can never get two slots of one Instance, because the kubelet never gives one device twice); with
`uniqueDevices: false` `capacity` per Instance, named `<instance>-<i>` like the slots. A vdev is not bound to a
slot: Allocate maps it to any free slot of its Instance (preferring the slot of the same index) and records the
mapping in the holder, so re-offering a vdev finds the same slot again (Akri #843, #450).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from devplace import errors
from devplace.api import CL, DRA, FREE, IL, Free, named_node, parse_holder, slot_name
from devplace.api import format_holder as format_known_holder
from devplace.api import slot_index as parse_slot_index

slot_index = functools.lru_cache(maxsize=8192)(parse_slot_index)
"""`api.slot_index`, remembered: every read of an Instance's usage (each watch event) asks it of every slot several
times (order, held count, readability), and the slot names of the node's Instances are few and fixed."""


@dataclass(frozen=True)
class Unknown:
    """A stored holder that breaks the holder grammar, kept exactly as stored (module docstring)."""

    raw: Any = field(hash=False)

    def __str__(self) -> str:
        return f"an unreadable holder {self.raw!r}"

    def names(self, node: str) -> bool:
        """Whether it names `node` (`api.devices.named_node`: `C::node-a`, `C:a:b:node-a`)."""
        return named_node(self.raw) == node

    def is_dra(self) -> bool:
        """Whether it looks like a DRA holder (`D:...`) the grammar cannot read: never repaired into a device-plugin
        hold, because the device-plugin release rule would then free a slot a ResourceClaim may rest on."""
        return isinstance(self.raw, str) and self.raw.startswith("D:")


Holder = Free | IL | CL | DRA | Unknown


def format_holder(holder: Holder) -> Any:
    """The wire value of `holder` (inverse of `parse_holder`; an `Unknown` one as it was stored)."""
    if isinstance(holder, Unknown):
        return holder.raw
    return format_known_holder(holder)


def initial_usage(instance: str, capacity: int) -> dict[str, str]:
    """The deviceUsage of a new Instance: `capacity` free slots."""
    return {slot_name(instance, i): "" for i in range(capacity)}


@dataclass(frozen=True)
class Usage:
    """An Instance's parsed deviceUsage. Immutable; decisions return new values."""

    instance: str
    capacity: int
    holders: Mapping[str, Holder]
    held: int = field(init=False, repr=False, compare=False)
    """How many slots are held (counted once: `holders` never changes)."""

    def __post_init__(self) -> None:
        held = sum(1 for slot, h in self.holders.items() if _counted(h) and slot_index(self.instance, slot) is not None)
        object.__setattr__(self, "held", held)

    @classmethod
    def parse(cls, instance: str, capacity: int, device_usage: Mapping[str, str]) -> Usage:
        """Parse the wire map; a bad holder raises `errors.Invalid` naming `spec.deviceUsage.<slot>`."""
        holders: dict[str, Holder] = {
            slot: parse_holder(raw, f"spec.deviceUsage.{slot}") for slot, raw in device_usage.items()
        }
        return cls(instance, capacity, _ordered(instance, holders))

    @classmethod
    def read(cls, instance: str, capacity: int, device_usage: Any) -> Usage:
        """What the store holds, whatever it is: a holder that breaks the grammar is read as `Unknown`, a usage that
        is not a map as no slots (module docstring); never raises."""
        holders: dict[str, Holder] = {}
        for slot, raw in device_usage.items() if isinstance(device_usage, Mapping) else ():
            try:
                holders[str(slot)] = parse_holder(raw)
            except errors.Invalid:
                holders[str(slot)] = Unknown(raw)
        return cls(instance, capacity, _ordered(instance, holders))

    def reread(self, device_usage: Any, before: Any) -> Usage:
        """`read(device_usage)`, given that this usage was read from `before` (same Instance and capacity): a slot
        whose wire holder did not change keeps its parsed holder, and the order is kept when the slots are the same,
        so a watch event that moves one slot parses one holder."""
        if (
            not (type(device_usage) is dict or isinstance(device_usage, Mapping))  # a decoded map is a dict
            or not (type(before) is dict or isinstance(before, Mapping))
            or device_usage.keys() != before.keys()
            or self.holders.keys() != before.keys()
        ):
            return Usage.read(self.instance, self.capacity, device_usage)
        holders = dict(self.holders)  # the same slots in the same order: a moved one is replaced in place
        changed: list[tuple[str, Holder, Holder]] = []
        for slot, raw in device_usage.items():
            if raw == before[slot]:
                continue
            try:
                new: Holder = parse_holder(raw)
            except errors.Invalid:
                new = Unknown(raw)
            changed.append((slot, holders[slot], new))
            holders[slot] = new
        return self._successor(holders, changed)

    def _successor(self, holders: dict[str, Holder], changed: Iterable[tuple[str, Holder, Holder]]) -> Usage:
        """The Usage of `holders`: these slots, in this order, where only `changed` (slot, old holder, new holder)
        differs from this one. What this one counted is carried over and corrected for the changed slots alone (a
        watch event moves one or two holders of a dozen): `held`, and `unreadable` and `exact` when no changed holder
        is or was `Unknown` (they depend on the slot names, which are the same, and on which holders are Unknown)."""
        usage: Usage = object.__new__(Usage)
        held = self.held
        carry = True
        for slot, old, new in changed:
            if _counted(old) and slot_index(self.instance, slot) is not None:
                held -= 1
            if _counted(new) and slot_index(self.instance, slot) is not None:
                held += 1
            carry = carry and not isinstance(old, Unknown) and not isinstance(new, Unknown)
        state = usage.__dict__
        state.update(instance=self.instance, capacity=self.capacity, holders=holders, held=held)
        if carry:
            for name in ("unreadable", "exact"):
                if name in self.__dict__:  # functools.cached_property keeps a computed value in the instance's dict
                    state[name] = self.__dict__[name]
        return usage

    def to_wire(self) -> dict[str, Any]:
        return {slot: format_holder(holder) for slot, holder in self.holders.items()}

    @functools.cached_property
    def unreadable(self) -> tuple[str, ...]:
        """The slots that break the naming or holder rules (an unnamed slot or an `Unknown` holder), in order."""
        return tuple(slot for slot, h in self.holders.items() if isinstance(h, Unknown) or self.index(slot) is None)

    @functools.cached_property
    def exact(self) -> bool:
        """Exactly the `capacity` slots `<instance>-0..capacity-1`, every holder readable: then whether one slot can
        be claimed or freed depends on that slot's holder alone (a free slot means fewer than `capacity` held)."""
        return (
            len(self.holders) == self.capacity
            and not self.unreadable
            and all(self.is_canonical(slot) for slot in self.holders)
        )

    def index(self, slot: str) -> int | None:
        return slot_index(self.instance, slot)

    def is_canonical(self, slot: str) -> bool:
        index = self.index(slot)
        return index is not None and index < self.capacity

    def claimable(self, slot: str) -> bool:
        """Free, canonical, and fewer than `capacity` slots held (capacity holds even while slots retire)."""
        return isinstance(self.holders.get(slot), Free) and self.is_canonical(slot) and self.held < self.capacity

    def free_claimable(self) -> list[str]:
        if self.held >= self.capacity:
            return []
        return [slot for slot in self.holders if self.claimable(slot)]

    def slots_held_by(self, holder: Holder) -> list[str]:
        return [slot for slot, h in self.holders.items() if h == holder]

    def with_holders(self, changes: Mapping[str, Holder | None]) -> Usage:
        """A copy with `changes` applied (None removes the slot)."""
        holders = dict(self.holders)
        reorder = False
        for slot, holder in changes.items():
            if holder is None:
                holders.pop(slot, None)
            else:
                reorder = reorder or slot not in holders
                holders[slot] = holder
        # changing who holds an existing slot keeps the order; only a new slot needs its place found
        if reorder or len(holders) != len(self.holders):
            return Usage(self.instance, self.capacity, _ordered(self.instance, holders) if reorder else holders)
        return self._successor(holders, [(slot, self.holders[slot], holders[slot]) for slot in changes])


def _counted(holder: Holder) -> bool:
    """Whether a holder takes one of the Instance's `capacity` (on a named slot): IL, CL and DRA holds."""
    return isinstance(holder, (IL, CL, DRA))


def _ordered(instance: str, holders: Mapping[str, Holder]) -> dict[str, Holder]:
    """Slots by index, foreign names last by name: the order the kubelet sees and the order we prefer."""

    def key(slot: str) -> tuple[int, int, str]:
        index = slot_index(instance, slot)
        return (0, index, "") if index is not None else (1, 0, slot)

    return {slot: holders[slot] for slot in sorted(holders, key=key)}


@dataclass(frozen=True)
class Claim:
    """A granted request: `slots[k]` serves the k-th requested device; `usage` is what to write.

    `new` lists the slots this decision claims (the rest were already held by the asker): only those are released
    again if a later part of the same kubelet request fails.
    """

    slots: tuple[str, ...]
    usage: Usage
    new: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.new)


@dataclass(frozen=True)
class Refusal:
    """A refused request; `reason` is shown to the kubelet (and so in the pod's status) and names the rule."""

    reason: str


def _invisible(usage: Usage, node: str) -> Refusal:
    return Refusal(f"{usage.instance} is no longer visible from {node}")


def claim_slots(usage: Usage, wanted: Sequence[str], node: str, visible: bool) -> Claim | Refusal:
    """Instance-level Allocate: all of `wanted` for `node`'s IL plugin, or nothing.

    A slot already held by this node at instance level is granted again without a write (the kubelet re-offering
    what it owns, after a restart or for another container: Akri #450). A slot held by anyone else, including this
    node's CL plugin, is refused.
    """
    if not visible:
        return _invisible(usage, node)
    if len(set(wanted)) != len(wanted):
        return Refusal(f"the request names a slot of {usage.instance} twice: {', '.join(wanted)}")
    mine = IL(node)
    new: list[str] = []
    for slot in wanted:
        holder = usage.holders.get(slot)
        if holder is None or usage.index(slot) is None:
            return Refusal(f"{slot} is not a slot of {usage.instance}")
        if not isinstance(holder, Free):
            if holder == mine:
                continue
            return Refusal(f"{slot} is held by {holder}")
        held = usage.held + len(new)  # the slots claimed so far in this request count too
        if not usage.is_canonical(slot) or held >= usage.capacity:
            return Refusal(f"{slot} cannot be claimed: {held} of {usage.capacity} slots are held")
        new.append(slot)
    if not new:
        return Claim(tuple(wanted), usage)
    return Claim(tuple(wanted), usage.with_holders(dict.fromkeys(new, mine)), tuple(new))


def claim_dra(usage: Usage, wanted: Sequence[str], count: int, holder: DRA, visible: bool) -> Claim | Refusal:
    """A DRA claim's share of one Instance: the slots `wanted` by name (the N-devices form: device `<name>-<i>` is
    slot i), plus `count` slots of any name (one device standing for the Instance: capacity 1, or the consumable
    form taking `consumedCapacity.slots`), all for `holder`, or nothing.

    Slots `holder` already holds count first (devplace's scheduler took them before writing the allocation, or an
    earlier prepare did: a retried prepare takes nothing more); the rest are taken from the free ones, highest first
    (the Instance-level plugin prefers the lowest, so the two paths rarely reach for one slot at once).
    Refused, naming the holder, when a wanted slot is held by anyone else, or too few slots are free.
    """
    if not visible:
        return _invisible(usage, holder.node)
    if len(set(wanted)) != len(wanted):
        return Refusal(f"the claim names a slot of {usage.instance} twice: {', '.join(wanted)}")
    mine = set(usage.slots_held_by(holder))
    granted: list[str] = []
    new: list[str] = []
    for slot in wanted:
        current = usage.holders.get(slot)
        if current is None or usage.index(slot) is None:
            return Refusal(f"{slot} is not a slot of {usage.instance}")
        if current == holder:
            granted.append(slot)
            continue
        if not isinstance(current, Free):
            return Refusal(f"{slot} is held by {current}, not by claim {holder.namespace}/{holder.claim}")
        held = usage.held + len(new)
        if not usage.is_canonical(slot) or held >= usage.capacity:
            return Refusal(f"{slot} cannot be taken: {held} of {usage.capacity} slots are held")
        granted.append(slot)
        new.append(slot)
    spare = [slot for slot in usage.holders if slot in mine and slot not in granted]
    reuse = spare[:count]
    granted.extend(reuse)
    missing = count - len(reuse)
    if missing > 0:
        current_usage = usage.with_holders(dict.fromkeys(new, holder)) if new else usage
        free = current_usage.free_claimable()
        if len(free) < missing or current_usage.held + missing > usage.capacity:
            others = sorted({str(h) for h in usage.holders.values() if not isinstance(h, Free) and h != holder})
            taken = f" (held by {'; '.join(others)})" if others else ""
            return Refusal(
                f"{usage.instance} has {len(free)} free slot(s), claim {holder.namespace}/{holder.claim} needs "
                f"{missing} more{taken}"
            )
        highest = free[::-1][:missing]  # highest first: the device plugins prefer the lowest (`api.dra_taken`)
        granted.extend(highest)
        new.extend(highest)
    if not new:
        return Claim(tuple(granted), usage)
    return Claim(tuple(granted), usage.with_holders(dict.fromkeys(new, holder)), tuple(new))


def vdev_instance(vdev: str, instances: Iterable[str]) -> str | None:
    """The Instance a vdev belongs to: the Instance itself (unique) or `<instance>-<i>` (per slot)."""
    names = set(instances)
    if vdev in names:
        return vdev
    base, sep, index = vdev.rpartition("-")
    if sep and index.isdigit() and base in names:
        return base
    return None


def claim_vdevs(usage: Usage, vdevs: Sequence[str], node: str, visible: bool) -> Claim | Refusal:
    """Configuration-level Allocate on one Instance: a slot for each of `vdevs` (all of this Instance), or nothing.

    A vdev this node's CL plugin already holds gets its slot again (Akri #843). Otherwise the slot of the vdev's own
    index is preferred when free, else the lowest free one; the caller re-runs this on `Conflict`, which re-maps
    to another free slot. Refused only when the Instance is gone from this node or has no free slot left.
    """
    if not visible:
        return _invisible(usage, node)
    if len(set(vdevs)) != len(vdevs):
        return Refusal(f"the request names a virtual device of {usage.instance} twice: {', '.join(vdevs)}")
    current = usage
    granted: list[str] = []
    new: list[str] = []
    for vdev in vdevs:
        holder = CL(vdev, node)
        held = current.slots_held_by(holder)
        if held:
            granted.append(held[0])
            continue
        free = current.free_claimable()
        if not free:
            return Refusal(
                f"no free slot of {usage.instance} for {vdev}: {current.held} of {usage.capacity} slots are held"
            )
        own = vdev_slot(usage.instance, vdev)
        slot = own if own in free else free[0]
        current = current.with_holders({slot: holder})
        granted.append(slot)
        new.append(slot)
    return Claim(tuple(granted), current, tuple(new))


def vdev_slot(instance: str, vdev: str) -> str | None:
    """The slot a per-slot vdev prefers (`<instance>-<i>` -> the same name); None for a per-Instance vdev."""
    return vdev if slot_index(instance, vdev) is not None else None


def check_unique_request(vdevs: Sequence[str], instance_of: Mapping[str, str], unique: bool) -> Refusal | None:
    """One container's CL request: every vdev known, and with `uniqueDevices` every vdev on a different Instance."""
    unknown = [v for v in vdevs if v not in instance_of]
    if unknown:
        return Refusal(f"unknown virtual device(s) {', '.join(unknown)}: not advertised by this node")
    if unique:
        instances = [instance_of[v] for v in vdevs]
        if len(set(instances)) != len(instances):
            return Refusal(
                f"uniqueDevices: {len(vdevs)} devices requested but only {len(set(instances))} distinct "
                "Instances among them; a container never gets two slots of one Instance"
            )
    return None


def release_slot(usage: Usage, slot: str, holder: Holder) -> Usage | None:
    """Free `slot` if `holder` holds it (else None: only a slot's own holder frees it). Retiring slots go."""
    if isinstance(holder, Free) or usage.holders.get(slot) != holder:
        return None
    return usage.with_holders({slot: FREE if usage.is_canonical(slot) else None})


def release_slots(usage: Usage, held: Iterable[tuple[str, Holder]]) -> Usage | None:
    """Free each `(slot, holder)` whose holder still holds it, all in one new usage (None when none does): one write
    frees every due slot of an Instance; a slot whose holder changed meanwhile is skipped, as `release_slot` would."""
    changes: dict[str, Holder | None] = {}
    for slot, holder in held:
        if not isinstance(holder, Free) and slot not in changes and usage.holders.get(slot) == holder:
            changes[slot] = FREE if usage.is_canonical(slot) else None
    return usage.with_holders(changes) if changes else None


def repair(usage: Usage, node: str) -> Usage:
    """What `node` mends of `usage` (module docstring); `usage` itself when nothing: an `Unknown` holder naming `node`
    becomes `IL(node)` (on a named slot; an unnamed one goes), an unnamed slot `node` holds goes."""
    changes: dict[str, Holder | None] = {}
    for slot in usage.unreadable:
        holder = usage.holders[slot]
        named = usage.index(slot) is not None
        if isinstance(holder, Unknown):
            if holder.names(node) and not holder.is_dra():
                changes[slot] = IL(node) if named else None
        elif isinstance(holder, IL | CL) and holder.node == node:
            changes[slot] = None
    return usage.with_holders(changes) if changes else usage


def resize(usage: Usage, capacity: int) -> Usage:
    """Slots for a new capacity: missing canonical slots are added free; free slots beyond it go; held ones stay."""
    holders: dict[str, Holder | None] = {}
    for i in range(capacity):
        name = slot_name(usage.instance, i)
        if name not in usage.holders:
            holders[name] = FREE
    resized = Usage(usage.instance, capacity, usage.holders)
    for slot, holder in usage.holders.items():
        if isinstance(holder, Free) and not resized.is_canonical(slot):
            holders[slot] = None
    return resized.with_holders(holders)


@dataclass(frozen=True)
class DeviceHealth:
    """One entry of a ListAndWatch list; `instance` is the Instance behind it."""

    id: str
    healthy: bool
    instance: str


def il_health(usage: Usage, node: str, device_healthy: bool = True) -> list[DeviceHealth]:
    """Instance-level devices: every named slot; Healthy iff claimable or held by this node's IL plugin, and the
    device itself is healthy (its handler's `devplace.io/health`): a sick device's slots are all Unhealthy, so the
    kubelet stops offering them (those held stay held: a running container is not evicted by the kubelet)."""
    return [DeviceHealth(slot, healthy, usage.instance) for slot, healthy in il_states(usage, node, device_healthy)]


def il_states(usage: Usage, node: str, device_healthy: bool = True) -> list[tuple[str, bool]]:
    """`il_health` as (slot, healthy) pairs: what a ListAndWatch send of the Instance's plugin is made of, on every
    change of the Instance. An `exact` usage (the common case) needs no per-slot name check: every slot is named
    and canonical, so a free slot is claimable iff fewer than `capacity` are held."""
    if not device_healthy:
        return [(slot, False) for slot in usage.holders if usage.index(slot) is not None]
    if usage.exact:
        room = usage.held < usage.capacity
        return [
            (slot, (room and type(holder) is Free) or (type(holder) is IL and holder.node == node))
            for slot, holder in usage.holders.items()
        ]
    mine = IL(node)
    return [
        (slot, holder == mine or usage.claimable(slot))
        for slot, holder in usage.holders.items()
        if usage.index(slot) is not None  # an unnamed slot is no device (module docstring)
    ]


def cl_health(
    usages: Iterable[Usage], node: str, unique: bool, unhealthy: Collection[str] = frozenset()
) -> list[DeviceHealth]:
    """Configuration-level devices over the Instances visible from `node` (sorted by Instance name).

    unique: one vdev per Instance, Healthy iff this node's CL holds a slot for it or a slot is claimable.
    per slot: `capacity` vdevs per Instance (plus any vdev still held after a shrink); those this node's CL holds
    are Healthy, and of the rest as many as there are claimable slots, so the Healthy count is exact.
    Every vdev of an Instance in `unhealthy` (its device is sick) is Unhealthy, held or not.
    """
    out: list[DeviceHealth] = []
    for usage in sorted(usages, key=lambda u: u.instance):
        out.extend(cl_health_of(usage, node, unique, usage.instance in unhealthy))
    return out


def cl_health_of(usage: Usage, node: str, unique: bool, sick: bool = False) -> list[DeviceHealth]:
    """One Instance's part of `cl_health` (each Instance's part depends on its usage alone, so a caller may keep
    the parts of the Instances that did not change)."""
    return [DeviceHealth(vdev, healthy, usage.instance) for vdev, healthy in cl_states_of(usage, node, unique, sick)]


def cl_states_of(usage: Usage, node: str, unique: bool, sick: bool = False) -> list[tuple[str, bool]]:
    """`cl_health_of` as (vdev, healthy) pairs: what a ListAndWatch send of the Configuration's plugin is made of, on
    every change of one of its Instances. Of an `exact` usage every slot is free or held, so the free ones are
    `capacity - held` without a look at each."""
    free = usage.capacity - usage.held if usage.exact else len(usage.free_claimable())
    if unique:  # healthy while a slot is free or this node's CL holds one: the holders are looked at only when full
        name = usage.instance
        healthy = free > 0 or any(type(h) is CL and h.node == node and h.vdev == name for h in usage.holders.values())
        return [(name, not sick and healthy)]
    held_vdevs = {h.vdev for h in usage.holders.values() if type(h) is CL and h.node == node}
    names = _vdev_names(usage.instance, usage.capacity)
    if held_vdevs:
        canonical = set(names)
        names += sorted(v for v in held_vdevs if v not in canonical and vdev_instance(v, [usage.instance]))
    out: list[tuple[str, bool]] = []
    budget = free
    for name in names:
        if name in held_vdevs:
            out.append((name, not sick))
        elif budget > 0:
            budget -= 1
            out.append((name, not sick))
        else:
            out.append((name, False))
    return out


def _vdev_names(instance: str, capacity: int) -> list[str]:
    """The per-slot vdevs of an Instance, `<instance>-0..capacity-1` (a fresh list, made from a remembered tuple)."""
    return list(_canonical_names(instance, capacity))


@functools.lru_cache(maxsize=4096)
def _canonical_names(instance: str, capacity: int) -> tuple[str, ...]:
    return tuple(slot_name(instance, i) for i in range(capacity))


def cl_advertised(usage: Usage, vdev: str, node: str, unique: bool) -> bool:
    """Whether `vdev` is among `cl_health([usage], node, unique)`, Healthy or not (without building the list)."""
    if unique:
        return vdev == usage.instance
    index = slot_index(usage.instance, vdev)
    if index is not None and index < usage.capacity:
        return True
    if vdev_instance(vdev, [usage.instance]) is None:
        return False
    return any(isinstance(h, CL) and h.node == node and h.vdev == vdev for h in usage.holders.values())


Preference = Literal["spread", "pack"]


def preferred_allocation(
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    instance_of: Mapping[str, str],
    preference: Preference = "spread",
) -> list[str]:
    """GetPreferredAllocation for the CL plugin: `must_include` first, then `size` in all.

    spread: each next device from the Instance with the fewest picked so far (then the most still available),
    so a pod's devices land on different Instances when possible. pack: from the Instance with the most picked so
    far (then the most available), filling one Instance before the next. Ties break by name; advisory only.
    """
    picked: list[str] = []
    for vdev in must_include:
        if vdev not in picked:
            picked.append(vdev)
    pool: dict[str, list[str]] = {}
    for vdev in sorted(set(available) - set(picked)):
        pool.setdefault(instance_of.get(vdev, vdev), []).append(vdev)
    count: dict[str, int] = {}
    for vdev in picked:
        inst = instance_of.get(vdev, vdev)
        count[inst] = count.get(inst, 0) + 1
    while len(picked) < size and any(pool.values()):
        candidates = [inst for inst, left in pool.items() if left]
        if preference == "pack":
            inst = min(candidates, key=lambda i: (-count.get(i, 0), -len(pool[i]), i))
        else:
            inst = min(candidates, key=lambda i: (count.get(i, 0), -len(pool[i]), i))
        picked.append(pool[inst].pop(0))
        count[inst] = count.get(inst, 0) + 1
    return picked
