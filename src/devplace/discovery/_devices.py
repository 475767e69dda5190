"""What a discovery handler reports: devices, with the mounts and device nodes a container needs to use them.

Plain frozen values, equal and hashable by content, so a stream consumer can compare a new full list with the last
one and act only on the difference. `Device.properties` is stored as a `Properties` (an immutable mapping); any
mapping passed in is copied, so a caller mutating its dict afterwards changes nothing.

Reserved properties. Akri's protocol carries a device as id, properties, mounts and device nodes, nothing else; what
else a handler must tell the agent travels as properties under names of ours, which the agent reads (they reach the
Instance's brokerProperties like any property, so the cluster sees them) and never passes to a container as env:
- `devplace.io/health`: `Healthy` or `Unhealthy` (absent: Healthy). The agent's ListAndWatch reports every device id of
  an Unhealthy device Unhealthy to the kubelet; `devplace.io/health-reason` says why, for people.
- `devplace.io/cdi-devices`: fully qualified CDI device names (`nvidia.com/gpu=GPU-...`), comma-separated, that
  Allocate hands the kubelet in `cdi_devices`.
`JOINED_ENVS` are env vars whose values from several devices of one container join with commas instead of the last
one winning (NVIDIA's container runtime reads a list in `NVIDIA_VISIBLE_DEVICES`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

HEALTH = "devplace.io/health"
HEALTH_REASON = "devplace.io/health-reason"
CDI_DEVICES = "devplace.io/cdi-devices"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
RESERVED = frozenset({HEALTH, HEALTH_REASON, CDI_DEVICES})
"""Properties the agent reads and never exports as container env vars."""
JOINED_ENVS = frozenset({"NVIDIA_VISIBLE_DEVICES"})


def device_healthy(properties: Mapping[str, str]) -> bool:
    """Whether a device with these properties (or an Instance with these brokerProperties) is Healthy."""
    return properties.get(HEALTH, HEALTHY) != UNHEALTHY


def cdi_devices(properties: Mapping[str, str]) -> tuple[str, ...]:
    """The CDI device names in `devplace.io/cdi-devices`, in order, blanks dropped."""
    return tuple(x for x in (part.strip() for part in properties.get(CDI_DEVICES, "").split(",")) if x)


class Properties(Mapping[str, str]):
    """An immutable str -> str mapping, equal to any mapping with the same items, hashable, ordered by key."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | None = None) -> None:
        self._items: dict[str, str] = dict(sorted((items or {}).items()))

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._items == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __repr__(self) -> str:
        return f"Properties({self._items!r})"


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool = False


@dataclass(frozen=True)
class DeviceSpec:
    """A device node to expose in the container; permissions is a combination of "r", "w", "m"."""

    container_path: str
    host_path: str
    permissions: str = "rwm"


@dataclass(frozen=True)
class Device:
    """One discovered device. `id` is unique within a handler's list; `shared` means several nodes may see it."""

    id: str
    properties: Mapping[str, str] = field(default_factory=Properties)
    shared: bool = True
    mounts: tuple[Mount, ...] = ()
    device_specs: tuple[DeviceSpec, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.properties, Properties):
            object.__setattr__(self, "properties", Properties(self.properties))
        for name in ("mounts", "device_specs"):
            value: Any = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
