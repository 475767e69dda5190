"""Devices in DRA terms: the one mapping from a devplace device (an Instance, its attributes, a handler's typed
properties) to a DRA device of a ResourceSlice (`resource.k8s.io/v1`), used by every part that speaks DRA: the
compiled ResourceClasses (`api.compiles`), the agent as a DRA driver and the scheduler's allocation (part 2).

Driver and domain: devplace publishes as one DRA driver, `DRIVER` (`devplace.io`), and every attribute and capacity
sits under that domain, written bare in a slice (a bare name is under the driver's domain). A selector reads them as
`device.attributes["devplace.io"].<id>` / `device.capacity["devplace.io"].<id>`.

Values (a device's seed attributes are strings; DESIGN.md section 6 compares them as quantities, then versions, then
strings): each value becomes exactly one of
- an int attribute: a decimal integer within int64 (`4`, `-1`, `34359738368`): a quantity (and a version) to the seed;
- a capacity quantity: any other Kubernetes quantity (`32Gi`, `30G`, `1.5`, `100m`);
- a bool attribute: `true` or `false` (a string to the seed);
- a version attribute: a version the seed orders (`1.2.10`, `v2`, `9.0`, `1-rc.1`), written as strict semver with the
  same order (`v` dropped, leading zeros dropped, minor and patch filled in, build metadata dropped);
- a string attribute: everything else, a quantity with a unit (`40GBPS`) included. A string over 64 characters (Akri's
  `UDEV_DEVPATH` often is) is cut to its first 64 (Kubernetes refuses longer values), so an exact match on such a value
  cannot hold; `cut` lists the names cut.
Typed properties from a handler (`typed`) keep their type: a Python int or bool is an int or bool attribute, a
`Quantity` a capacity, a tuple of non-negative ints a version (`(9, 0)`: a CUDA compute capability, `9.0.0` as NVIDIA's
DRA driver publishes it), a string is read as above.

Names: an attribute or capacity id is a C identifier of at most 32 characters (`attribute_id`): characters outside
`[A-Za-z0-9_]` become `_`, a leading digit gets a `_` before it, and a longer name keeps its first 23 characters plus
`_` and 8 hex digits of its blake2b digest (so two long names stay apart). Different keys may collide (`a-b`, `a_b`);
the first in name order wins. The well-known keys (`Kind`, `configuration`, `node`) are ids already.
A device's name is a DNS label (`device_name`): the Instance name lower-cased, other characters as `-`, and one
longer than 63 characters cut with a digest. At most 32 attributes and capacities per device (Kubernetes' limit): the
well-known keys first, then by name; `dropped` lists what did not fit.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from devplace import errors
from devplace.api._cel import MAX_ID_LENGTH, MAX_KEYS, MAX_VALUE_LENGTH
from devplace.api._quantity import Quantity, is_quantity

GROUP_VERSION = "resource.k8s.io/v1"
"""DRA's API group and version (`api.dra`'s kinds)."""
MAX_DEVICES = 128
"""Kubernetes' limit on the devices of one ResourceSlice."""
MAX_DEVICES_WITH_EXTRAS = 64
"""Kubernetes' limit on a ResourceSlice's devices when any carries taints, counters or binding conditions."""

DRIVER = "devplace.io"
"""The DRA driver devplace publishes devices as, and the domain of their attributes."""

KIND = "Kind"
WELL_KNOWN = (KIND, "configuration", "node")
"""Attribute keys devplace sets itself (`instance_properties`); a broker property of the same name is overridden."""

_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_SEED_VERSION = re.compile(
    r"v?(?P<major>[0-9]+)(?:\.(?P<minor>[0-9]+))?(?:\.(?P<patch>[0-9]+))?"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)
_INT64 = (-(2**63), 2**63 - 1)


def _digest(text: str, size: int = 4) -> str:
    return hashlib.blake2b(text.encode(), digest_size=size).hexdigest()


def attribute_id(key: str) -> str:
    """The C identifier (<= 32 characters) a seed attribute key is published as (module docstring)."""
    if _ID.fullmatch(key) and len(key) <= MAX_ID_LENGTH:
        return key
    name = re.sub(r"[^A-Za-z0-9_]", "_", key) or "_"
    if name[0].isdigit():
        name = "_" + name
    if len(name) > MAX_ID_LENGTH:
        name = f"{name[:23]}_{_digest(key)}"
    return name


def device_name(instance: str) -> str:
    """A DNS label for an Instance's device (module docstring)."""
    name = re.sub(r"[^a-z0-9-]", "-", instance.lower()).strip("-") or "device"
    if len(name) > 63:
        name = f"{name[:54].rstrip('-')}-{_digest(instance)}"
    return name


def semver_text(value: str) -> str | None:
    """A seed version (`v1.2`, `1.2.10`, `1-rc.01`) as strict semver with the same order, or None for a text the
    seed does not read as a version."""
    match = _SEED_VERSION.fullmatch(value)
    if match is None:
        return None
    text = f"{int(match['major'])}.{int(match['minor'] or 0)}.{int(match['patch'] or 0)}"
    if match["pre"]:
        text += "-" + ".".join(str(int(p)) if p.isdigit() else p for p in match["pre"].split("."))
    return text


def wire_value(value: Any) -> tuple[str, dict[str, Any]]:
    """(`attribute` or `capacity`, the slice's wire value) for one value (module docstring)."""
    if isinstance(value, bool):
        return "attribute", {"bool": value}
    if isinstance(value, int):
        return "attribute", {"int": value}
    if isinstance(value, Quantity):
        return "capacity", {"value": str(value)}
    if isinstance(value, tuple) and value and all(isinstance(v, int) and v >= 0 for v in value):
        return "attribute", {"version": ".".join(map(str, (*value, 0, 0)[: max(3, len(value))][:3]))}
    text = str(value)
    if _INTEGER.fullmatch(text) and _INT64[0] <= int(text) <= _INT64[1]:
        return "attribute", {"int": int(text)}
    if is_quantity(text):
        return "capacity", {"value": text}
    if text in ("true", "false"):
        return "attribute", {"bool": text == "true"}
    version = semver_text(text)
    if version is not None:
        return "attribute", {"version": version}
    return "attribute", {"string": text[:MAX_VALUE_LENGTH]}


@dataclass(frozen=True)
class DraDevice:
    """A device as a ResourceSlice lists it (`wire`), with what the mapping had to cut or leave out."""

    name: str
    attributes: Mapping[str, Mapping[str, Any]]
    capacity: Mapping[str, Mapping[str, Any]]
    cut: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    allow_multiple_allocations: bool | None = field(default=None)

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name}
        if self.attributes:
            wire["attributes"] = {k: dict(v) for k, v in self.attributes.items()}
        if self.capacity:
            wire["capacity"] = {k: dict(v) for k, v in self.capacity.items()}
        if self.allow_multiple_allocations is not None:
            wire["allowMultipleAllocations"] = self.allow_multiple_allocations
        return wire


def dra_device(name: str, properties: Mapping[str, Any], typed: Mapping[str, Any] | None = None) -> DraDevice:
    """The DRA device of one devplace device: `properties` are its seed attributes (strings: brokerProperties plus
    the well-known keys), `typed` a handler's typed properties (they win over a string of the same key)."""
    merged: dict[str, Any] = {**properties, **(typed or {})}
    order = [k for k in WELL_KNOWN if k in merged] + sorted(k for k in merged if k not in WELL_KNOWN)
    attributes: dict[str, dict[str, Any]] = {}
    capacity: dict[str, dict[str, Any]] = {}
    cut: list[str] = []
    dropped: list[str] = []
    for key in order:
        ident = attribute_id(key)
        if ident in attributes or ident in capacity:
            dropped.append(key)
            continue
        if len(attributes) + len(capacity) >= MAX_KEYS:
            dropped.append(key)
            continue
        where, value = wire_value(merged[key])
        if "string" in value and len(str(merged[key])) > MAX_VALUE_LENGTH:
            cut.append(key)
        (attributes if where == "attribute" else capacity)[ident] = value
    return DraDevice(device_name(name), attributes, capacity, tuple(cut), tuple(dropped))


def _mapping(obj: Any, path: str) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise errors.Invalid.field(path, f"must be a mapping, not {type(obj).__name__}")
    return obj


def instance_properties(
    instance: Mapping[str, Any], configuration: Mapping[str, Any] | None = None, handler_name: str | None = None
) -> dict[str, str]:
    """An Instance's attributes, the ones resource classes select on (DESIGN.md section 6); the one definition the
    scheduler's devices, the controller's class matcher and the DRA mapping (`instance_device`) all read.

    Its `brokerProperties`, plus the well-known keys, which win over a property of the same name: `Kind` (the
    Configuration's `deviceKind`, else its discovery handler's name, else `handler_name`; absent when none is known),
    `configuration` (its `configurationName`), and `node` for a device that is not shared and seen from exactly one
    node. `configuration` is the Instance's Configuration wire dict when known. A malformed field (a property that is
    not a string, an empty `configurationName`, `nodes` that are not names) is `errors.Invalid` naming it."""
    spec = _mapping(instance.get("spec"), "spec")
    properties = _mapping(spec.get("brokerProperties"), "spec.brokerProperties")
    attrs: dict[str, str] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise errors.Invalid.field(f"spec.brokerProperties.{key}", "keys and values must be strings")
        attrs[key] = value
    cfg_spec = _mapping((configuration or {}).get("spec"), "configuration.spec")
    kind = cfg_spec.get("deviceKind")
    if kind is None:
        handler = _mapping(cfg_spec.get("discoveryHandler"), "configuration.spec.discoveryHandler").get("name")
        kind = handler if handler is not None else handler_name
    attrs.pop(KIND, None)
    if kind is not None:
        if not isinstance(kind, str) or not kind:
            raise errors.Invalid.field("configuration.spec.deviceKind", "must be a non-empty string")
        attrs[KIND] = kind
    configuration_name = spec.get("configurationName")
    if not isinstance(configuration_name, str) or not configuration_name:
        raise errors.Invalid.field("spec.configurationName", "required, a non-empty string")
    attrs["configuration"] = configuration_name
    nodes = spec.get("nodes")
    nodes = [] if nodes is None else nodes
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        raise errors.Invalid.field("spec.nodes", "must be a list of node names")
    attrs.pop("node", None)
    if not spec.get("shared", False) and len(nodes) == 1:
        attrs["node"] = nodes[0]
    return attrs


def instance_device(
    instance: Mapping[str, Any],
    configuration: Mapping[str, Any] | None = None,
    *,
    handler_name: str | None = None,
    typed: Mapping[str, Any] | None = None,
) -> DraDevice:
    """The DRA device of an Instance wire dict (`instance_properties`, then `dra_device`)."""
    name = str((instance.get("metadata") or {}).get("name") or "")
    return dra_device(name, instance_properties(instance, configuration, handler_name), typed)
