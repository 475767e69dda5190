"""Devices as the scheduler sees them: an Instance reduced to its name, attributes, visibility and free slots.

Pure: `device_of` reads an Instance wire dict once, at the boundary (a malformed field raises `errors.Invalid` naming
it), and everything after works on the frozen `Device`.

Rules (DESIGN.md sections 4 and 6):
- A device is an Instance. Its slots are `<instance>-<i>` for i < capacity; a slot is free when its holder is `""`.
  Slots held by anybody (an Instance-level plugin `"<node>"`, a Configuration-level one `"C:<vdev>:<node>"`) are not
  free, and never more than `capacity - held` slots count as free (a slot beyond capacity, left over by a resize,
  is not offered).
- Its attributes are the Instance's `brokerProperties` plus the well-known keys, which win over a property of the
  same name: `Kind` (the Configuration's `deviceKind`, else its discovery handler's name), `configuration`, and
  `node` for a device that is not shared (seen from exactly one node). The rules are the object model's
  (`api.instance_properties`), the one definition the controller's class matcher and the DRA mapping share.
- A device is visible from the nodes its Instance lists; a shared device is one device however many nodes see it,
  so its slots are counted once, not once per node.

The scheduler reasons in counts of free slots, not slot ids: the binding annotation names a device and a quantity
(seed 003) and the kubelet's Allocate picks the slots, so identical free slots are interchangeable by design.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from devplace import errors
from devplace.api import instance_properties, usage_problems


@dataclass(frozen=True)
class Device:
    """One Instance: `free_slots` are the slot ids nobody holds (in slot order), `free` how many."""

    name: str
    namespace: str = "default"
    configuration: str = ""
    attributes: Mapping[str, str] = field(default_factory=dict, hash=False)
    nodes: frozenset[str] = frozenset()
    shared: bool = False
    capacity: int = 1
    free_slots: tuple[str, ...] = ()
    limits: Mapping[str, int] = field(default_factory=dict, hash=False)
    """Node -> how many slots the node offers, where fewer than `free` (the scheduler's shell sets it: Node
    allocatable less what is bound there); a node of `nodes` not in it offers every free slot."""
    waiting: frozenset[str] = frozenset()
    """Nodes the Instance lists that offer none of it yet (no plugin registered, or none free in allocatable):
    not in `nodes`, kept to say why a pod waits."""

    @property
    def free(self) -> int:
        return len(self.free_slots)

    @property
    def held(self) -> int:
        return self.capacity - len(self.free_slots)


def _mapping(obj: Any, path: str) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise errors.Invalid.field(path, f"must be a mapping, not {type(obj).__name__}")
    return obj


def _string_map(obj: Any, path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in _mapping(obj, path).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise errors.Invalid.field(f"{path}.{key}", "keys and values must be strings")
        out[key] = value
    return out


def _nodes(spec: Mapping[str, Any]) -> list[str]:
    nodes = spec.get("nodes")
    if nodes is None:
        return []
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        raise errors.Invalid.field("spec.nodes", "must be a list of node names")
    return nodes


def device_of(
    instance: Mapping[str, Any], configuration: Mapping[str, Any] | None = None, handler_name: str | None = None
) -> Device:
    """The `Device` of an Instance wire dict; `errors.Invalid` naming the field for a malformed one."""
    metadata = _mapping(instance.get("metadata"), "metadata")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise errors.Invalid.field("metadata.name", "required, a non-empty string")
    namespace = metadata.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise errors.Invalid.field("metadata.namespace", "must be a string")
    spec = _mapping(instance.get("spec"), "spec")
    shared = spec.get("shared", False)
    if not isinstance(shared, bool):
        raise errors.Invalid.field("spec.shared", "must be a boolean")
    capacity = spec.get("capacity", 1)
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise errors.Invalid.field("spec.capacity", f"must be a positive integer, not {capacity!r}")
    usage = _string_map(spec.get("deviceUsage"), "spec.deviceUsage")
    for problem in usage_problems(name, capacity, usage):  # the slot rules' one definition (api.devices)
        raise errors.Invalid(str(problem), [problem])
    canonical = [f"{name}-{i}" for i in range(capacity)]
    held = sum(1 for holder in usage.values() if holder != "")
    free = [slot for slot in canonical if usage.get(slot, "") == ""][: max(0, capacity - held)]
    attrs = instance_properties(instance, configuration, handler_name)
    return Device(
        name=name,
        namespace=namespace,
        configuration=attrs["configuration"],
        attributes=attrs,
        nodes=frozenset(_nodes(spec)),
        shared=shared,
        capacity=capacity,
        free_slots=tuple(free),
    )
