"""An Instance's slots and holders, and the extended-resource and CDI names of devices, as plain data: the rules
`api.devices`' docstring states (slot names `<instance>-<i>`, holders `""`, `<node>`, `C:<vdev>:<node>` and
`D:<namespace>/<claim>:<node>`, the capacity rule, resource prefixes). Kept apart from the models, which check an
Instance's `deviceUsage` with `usage_problems`, so a process that reads Instances as plain data (the node agent) runs
them without loading pydantic.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from devplace import errors

DEVICE_GROUPS = ("devplace.io/v1alpha1", "akri.sh/v0")

MAX_DEVICE_ID = 63
"""The kubelet's limit on a device ID; slot IDs are `<configuration>-<6 hex>-<index>`."""

MAX_CAPACITY = 1024
"""The largest `capacity` of a Configuration or Instance, so slot indexes stay below it."""

RESOURCE_PREFIXES = tuple(gv.partition("/")[0] for gv in DEVICE_GROUPS)
"""The extended-resource prefixes devices get without an override: the API groups of the device kinds."""


def resource_prefix(api_version: str, override: str | None = None) -> str:
    """The extended-resource prefix of a Configuration's devices (module docstring): `override` when one is set,
    else the API group of the Configuration's `apiVersion` (`akri.sh/v0` -> `akri.sh`)."""
    if override:
        return override
    group, sep, _ = api_version.partition("/")
    return group if sep and group else RESOURCE_PREFIXES[0]


def resource_name(api_version: str, name: str, override: str | None = None) -> str:
    """The extended resource of an Instance (`<prefix>/<instance>`, Instance level) or of a Configuration
    (`<prefix>/<configuration>`, Configuration level); `api_version` is the Configuration's."""
    return f"{resource_prefix(api_version, override)}/{name}"


def cdi_name(api_version: str, configuration: str, digest: str) -> str:
    """An Instance's `spec.cdiName`, its device's CDI name: `<group>/<configuration>=<digest>` (Akri's
    `akri.sh/<configuration>=<digest>`, the digest being the 6 hex of the Instance name). Never overridden: every
    agent writing a shared Instance must agree on it whatever its flags."""
    return f"{resource_prefix(api_version)}/{configuration}={digest}"


# -- deviceUsage: slot names, holders and the capacity rule (module docstring) -------------------------------------

_CL_PREFIX = "C:"
_DRA_PREFIX = "D:"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@dataclass(frozen=True)
class Free:
    """Nobody holds the slot."""

    def __str__(self) -> str:
        return "nobody"


FREE = Free()


@dataclass(frozen=True)
class IL:
    """Held through `node`'s Instance-level plugin."""

    node: str

    def __str__(self) -> str:
        return f"{self.node} (instance level)"


@dataclass(frozen=True)
class CL:
    """Held through `node`'s Configuration-level plugin for its virtual device `vdev`."""

    vdev: str
    node: str

    def __str__(self) -> str:
        return f"{self.node} (configuration level, {self.vdev})"


@dataclass(frozen=True)
class DRA:
    """Held for the ResourceClaim `namespace`/`claim`, allocated for a pod on `node` through DRA."""

    namespace: str
    claim: str
    node: str

    def __str__(self) -> str:
        return f"{self.node} (DRA claim {self.namespace}/{self.claim})"


Holder = Free | IL | CL | DRA


_PARSED_MAX = 4096
_parsed: dict[str, Holder] = {}
"""Holders already parsed, by wire value (they are immutable, so one value is shared): a watch event moves one slot
to a holder the process has most often seen before."""


def parse_holder(raw: Any, path: str = "holder") -> Holder:
    """The typed holder of a wire value; `errors.Invalid` naming `path` for anything else."""
    if type(raw) is str:
        found = _parsed.get(raw)
        if found is None:
            found = _parse_holder(raw, path)
            if len(_parsed) >= _PARSED_MAX:
                _parsed.clear()
            _parsed[raw] = found
        return found
    return _parse_holder(raw, path)


def _parse_holder(raw: Any, path: str) -> Holder:
    if not isinstance(raw, str):
        raise errors.Invalid.field(path, f"a holder is a string, not {type(raw).__name__} {raw!r}")
    if raw == "":
        return FREE
    if raw.startswith(_DRA_PREFIX):
        claim_ref, sep, node = raw[len(_DRA_PREFIX) :].rpartition(":")
        namespace, slash, claim = claim_ref.partition("/")
        if not sep or not slash or not _NAME.match(namespace) or not _NAME.match(claim) or not _NAME.match(node):
            raise errors.Invalid.field(path, f"{raw!r} is not a DRA holder 'D:<namespace>/<claim>:<node>'")
        return DRA(namespace, claim, node)
    if raw.startswith(_CL_PREFIX):
        vdev, sep, node = raw[len(_CL_PREFIX) :].partition(":")
        if not sep or not _NAME.match(vdev) or not _NAME.match(node):
            raise errors.Invalid.field(path, f"{raw!r} is not a configuration-level holder 'C:<vdev>:<node>'")
        return CL(vdev, node)
    if not _NAME.match(raw):
        raise errors.Invalid.field(
            path, f"{raw!r} is neither empty, a node name, 'C:<vdev>:<node>' nor 'D:<namespace>/<claim>:<node>'"
        )
    return IL(raw)


def format_holder(holder: Holder) -> str:
    """The wire value of `holder` (inverse of `parse_holder`)."""
    if isinstance(holder, IL):
        return holder.node
    if isinstance(holder, CL):
        return f"{_CL_PREFIX}{holder.vdev}:{holder.node}"
    if isinstance(holder, DRA):
        return f"{_DRA_PREFIX}{holder.namespace}/{holder.claim}:{holder.node}"
    return ""


def named_node(raw: Any) -> str | None:
    """The node a stored holder names: an IL or CL holder's node; for a string that breaks the grammar its last
    `:`-separated part (`C::node-a` names node-a), so that node, or cleanup after it, can still set the slot right.
    None for a free slot or a value naming nothing."""
    if not isinstance(raw, str) or not raw:
        return None
    try:
        holder = parse_holder(raw)
    except errors.Invalid:
        return raw.rpartition(":")[2] or None
    return holder.node if isinstance(holder, IL | CL | DRA) else None


def released(instance: str, capacity: int, device_usage: Mapping[str, Any], nodes: frozenset[str]) -> dict[str, Any]:
    """`device_usage` with every slot a node of `nodes` holds (`named_node`) released: free again, or gone when it is
    beyond `capacity` or not a slot name (a retiring slot goes when released, as the agent releases its own)."""
    out: dict[str, Any] = {}
    for slot, raw in device_usage.items():
        if named_node(raw) in nodes:
            index = slot_index(instance, slot)
            if index is None or index >= capacity:
                continue
            raw = ""
        out[slot] = raw
    return out


def slot_name(instance: str, index: int) -> str:
    return f"{instance}-{index}"


@functools.lru_cache(maxsize=8192)
def slot_index(instance: str, slot: str) -> int | None:
    """`i` for a slot named `<instance>-<i>` (decimal, no leading zeros, below `MAX_CAPACITY`), else None
    (remembered: every change of an Instance asks it of the slots that moved)."""
    prefix = f"{instance}-"
    if not slot.startswith(prefix):
        return None
    rest = slot[len(prefix) :]
    if not (rest.isascii() and rest.isdigit()) or (len(rest) > 1 and rest.startswith("0")) or len(rest) > 4:
        return None
    index = int(rest)
    return index if index < MAX_CAPACITY else None


def usage_problems(instance: str, capacity: int, device_usage: Any) -> Iterator[errors.FieldError]:
    """Every way `device_usage` breaks the slot rules (module docstring), each naming its slot and the reason."""
    if not isinstance(device_usage, Mapping):
        yield errors.FieldError("spec.deviceUsage", f"a map of slot to holder, not {type(device_usage).__name__}")
        return
    for slot, raw in device_usage.items():
        path = f"spec.deviceUsage.{slot}"
        index = slot_index(instance, str(slot))
        if index is None:
            yield errors.FieldError(
                path,
                f"not a slot of {instance}: slots are named '{instance}-<i>' for i = 0 .. {MAX_CAPACITY - 1} "
                "(decimal, no leading zeros)",
            )
            continue
        try:
            holder = parse_holder(raw, path)
        except errors.Invalid as e:
            yield from e.fields
            continue
        if index >= capacity and isinstance(holder, Free):
            yield errors.FieldError(
                path,
                f"free, and beyond capacity {capacity}: a slot with i >= capacity exists only while held "
                "(it retires after a capacity shrink and goes when released)",
            )
    if device_usage:
        missing = [slot_name(instance, i) for i in range(capacity) if slot_name(instance, i) not in device_usage]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            yield errors.FieldError(
                f"spec.deviceUsage.{missing[0]}",
                f"missing{more}: an Instance of capacity {capacity} has the slots {slot_name(instance, 0)} .. "
                f"{slot_name(instance, capacity - 1)}",
            )


SelectionStrategy = Literal["firstFit", "binpack", "spread", "optimal"]
"""`ResourceClass.spec.selectionStrategy`: how the scheduler picks devices of the class (DESIGN.md section 6)."""

SELECTION_STRATEGIES: tuple[SelectionStrategy, ...] = get_args(SelectionStrategy)


def dra_taken(
    instance: str, device_usage: Mapping[str, Any], holder: DRA, *, slot: int | None = None, count: int = 1
) -> dict[str, Any]:
    """`device_usage` with `holder` holding slot `slot` (a device of the N-devices form), or `count` slots in all
    (a share of a device with consumable capacity; those it holds already count; free slots taken highest first,
    while the device plugins prefer the lowest): the rule devplace's scheduler takes slots by before it writes an
    allocation (the node's DRA plugin takes them by the same rule, `agent._slots.claim_dra`).

    `errors.Conflict` naming the slot's holder when the slot is someone else's, or when fewer slots are free than
    wanted; nothing changes then."""
    wire = format_holder(holder)
    out = dict(device_usage)
    if slot is not None:
        name = slot_name(instance, slot)
        current = out.get(name)
        if current is None:
            raise errors.Conflict(f"Instance {instance} has no slot {name}")
        if current not in ("", wire):
            raise errors.Conflict(f"slot {name} is held by {current!r}, not free for {wire!r}")
        out[name] = wire
        return out
    held = sum(1 for v in out.values() if v == wire)
    free = sorted(  # highest first: a device plugin's kubelet prefers the lowest free slots (`GetPreferredAllocation`),
        (s for s, v in out.items() if v == "" and slot_index(instance, s) is not None),  # so the paths rarely race
        key=lambda s: -(slot_index(instance, s) or 0),
    )
    want = count - held
    if want > len(free):
        raise errors.Conflict(
            f"Instance {instance} has {len(free)} free slot(s), {wire!r} needs {want} more (holds {held} of {count})"
        )
    for name in free[: max(want, 0)]:
        out[name] = wire
    return out


def dra_released(device_usage: Mapping[str, Any], namespace: str, claim: str) -> dict[str, Any]:
    """`device_usage` with every slot held for claim `namespace/claim` (on any node) free again."""
    prefix = f"{_DRA_PREFIX}{namespace}/{claim}:"
    return {s: ("" if isinstance(v, str) and v.startswith(prefix) else v) for s, v in device_usage.items()}


def instance_without_claims(instance: Mapping[str, Any], claims: Iterable[tuple[str, str]]) -> dict[str, Any] | None:
    """`instance` (a stored wire dict) with every slot held for these `(namespace, claim)`s free again, or None when
    it holds none of them (no write): the one decision behind every release of DRA slots, for a compare-and-swap."""
    spec = dict(instance.get("spec") or {})
    usage = spec.get("deviceUsage") or {}
    out = dict(usage)
    for namespace, claim in claims:
        out = dra_released(out, namespace, claim)
    return None if out == usage else {**instance, "spec": {**spec, "deviceUsage": out}}
