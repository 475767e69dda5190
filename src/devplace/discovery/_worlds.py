"""The simulated device world, and the `sim` discovery handler that reports what is plugged into a node.

A `World` maps device ids to the nodes they are plugged into and their properties (one device on several nodes is a
shared device, e.g. a network camera). `devplace.sim` drives it (plug, unplug) and gives each node's agent
`world.handler(node)`. Every change fires the signal of each node it touches, so only those nodes' streams re-send.

`sim` discoveryDetails: YAML with optional `kind: <value>` (report only devices whose property `kind` equals it;
absent = all) and `shared: true|false` (default true; stamped on every reported device). Bad details raise
`errors.Invalid` from the stream before it yields. discoveryProperties are accepted and ignored (simulated devices
need no credentials).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Iterable, Mapping
from dataclasses import dataclass

from devplace import errors
from devplace.discovery import _details as d
from devplace.discovery._devices import Device, Properties
from devplace.discovery._handlers import ResolvedProperties
from devplace.discovery._signals import Signal

KIND_PROPERTY = "kind"


@dataclass(frozen=True)
class SimDetails:
    kind: str | None = None
    shared: bool = True


def parse_sim_details(text: str) -> SimDetails:
    raw = d.load_mapping(text)
    d.refuse_unknown(raw, ("kind", "shared"))
    return SimDetails(kind=d.optional_str(raw, "kind"), shared=d.optional_bool(raw, "shared", True))


def select_devices(devices: Iterable[Device], details: SimDetails) -> list[Device]:
    """The devices `details` asks for, with `shared` set as the details say (order kept)."""
    return [
        dataclasses.replace(dev, shared=details.shared)
        for dev in devices
        if details.kind is None or dev.properties.get(KIND_PROPERTY) == details.kind
    ]


@dataclass
class _Plugged:
    properties: Properties
    nodes: set[str]


class World:
    """Devices plugged into nodes. Single event loop; not thread-safe."""

    def __init__(self) -> None:
        self._devices: dict[str, _Plugged] = {}
        self._on: dict[str, set[str]] = {}
        """Device ids by node: a node's devices are found without a pass over the world's."""
        self._signals: dict[str, Signal] = {}

    def plug(self, device_id: str, nodes: Iterable[str], properties: Mapping[str, str] | None = None) -> None:
        """Plug `device_id` into `nodes` (added to the nodes it is already in); `properties` replace the old ones."""
        if not device_id:
            raise errors.Invalid.field("device_id", "must not be empty")
        wanted = set(nodes)
        if not wanted or "" in wanted:
            raise errors.Invalid.field("nodes", f"must be a non-empty list of node names, got {sorted(wanted)!r}")
        plugged = self._devices.get(device_id)
        if plugged is None:
            plugged = self._devices[device_id] = _Plugged(Properties(properties), set())
            touched = set(wanted)
        else:
            touched = wanted - plugged.nodes
            if properties is not None and Properties(properties) != plugged.properties:
                plugged.properties = Properties(properties)
                touched |= plugged.nodes
        plugged.nodes |= wanted
        for node in wanted:
            self._on.setdefault(node, set()).add(device_id)
        self._notify(touched)

    def unplug(self, device_id: str, nodes: Iterable[str] | None = None) -> None:
        """Unplug `device_id` from `nodes` (None = every node); the device is forgotten when no node has it."""
        plugged = self._devices.get(device_id)
        if plugged is None:
            raise errors.NotFound(f"device {device_id!r} is not plugged in anywhere")
        touched = set(plugged.nodes) if nodes is None else plugged.nodes & set(nodes)
        plugged.nodes -= touched
        for node in touched:
            ids = self._on.get(node)
            if ids is not None:
                ids.discard(device_id)
                if not ids:
                    del self._on[node]
        if not plugged.nodes:
            del self._devices[device_id]
        self._notify(touched)

    def devices_on(self, node: str) -> list[Device]:
        """Devices plugged into `node`, sorted by id, with the properties they were plugged with."""
        return [
            Device(id=device_id, properties=self._devices[device_id].properties)
            for device_id in sorted(self._on.get(node, ()))
        ]

    def nodes_of(self, device_id: str) -> list[str]:
        """Nodes `device_id` is plugged into, sorted (empty if it is not plugged in)."""
        plugged = self._devices.get(device_id)
        return sorted(plugged.nodes) if plugged else []

    def handler(self, node: str) -> SimHandler:
        return SimHandler(self, node)

    def signal(self, node: str) -> Signal:
        """Fires on every change touching `node`."""
        return self._signals.setdefault(node, Signal())

    def _notify(self, nodes: Iterable[str]) -> None:
        for node in nodes:
            self.signal(node).fire()


class SimHandler:
    """The `sim` discovery handler of one node of a `World`."""

    name = "sim"

    def __init__(self, world: World, node: str) -> None:
        self.world = world
        self.node = node

    async def discover(
        self, details: str, properties: ResolvedProperties | None = None
    ) -> AsyncGenerator[list[Device], None]:
        """The node's devices the details select; `properties` are ignored."""
        parsed = parse_sim_details(details)
        signal = self.world.signal(self.node)
        last: list[Device] | None = None
        while True:
            wake = signal.current()
            current = select_devices(self.world.devices_on(self.node), parsed)
            if current != last:
                yield current
                last = current
            await wake.wait()
