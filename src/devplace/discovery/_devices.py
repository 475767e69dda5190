"""What a discovery handler reports: devices, with the mounts and device nodes a container needs to use them.

Plain frozen values, equal and hashable by content, so a stream consumer can compare a new full list with the last
one and act only on the difference. `Device.properties` is stored as a `Properties` (an immutable mapping); any
mapping passed in is copied, so a caller mutating its dict afterwards changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


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
