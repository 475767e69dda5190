"""The `udev` handler: local devices selected by Akri's `udevRules`, found through libudev, followed by udev events.

discoveryDetails (YAML, as Akri's): `udevRules: [rule, ...]` (required; `[]` finds nothing, the rule `""` finds every
device), `groupRecursive: false`, `permissions: rwm` (one of r, w, m, rw, rm, wm, rwm: what each device spec grants).
Rules follow Akri's grammar (`devplace.api._udevrules`; a rule it refuses is refused at apply, and here as Invalid
before any list) and Akri's matching (`devplace.discovery._udevmatches`). Devices are not shared; a device's id is
its devpath without `/sys` (so Instance names equal Akri's), its properties `UDEV_DEVPATH` and `UDEV_DEVNODE`, its
device specs the node (`permissions`). discoveryProperties are accepted and ignored.

The shell: a udev monitor is opened first (so nothing between it and the scan is missed), then one enumeration of
every device (in a worker thread: a large /sys takes a while), matched against the rules; after that only events: an
`add`/`change`/`bind`/`move`... re-reads that device and re-matches it and the devices below it (their ATTRS and
SUBSYSTEMS read it), a `remove` drops it and everything below it (a `move` drops its old devpath). Events lost to a
full socket buffer (ENOBUFS) are made up for by a new full scan. No polling: a device appears within one event.
The monitor's socket is read from the event loop (`add_reader`), so a hot-plug reaches the list without a thread.
In a container this needs `/run/udev` (the udev database: ENV{ID_*}, TAG) and `/dev` from the host, and the host's
network namespace for udev's netlink events (deploy/kubernetes/udev-handler.yaml).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devplace import errors
from devplace.api import UdevFilter, parse_udev_rule
from devplace.discovery import _details as d
from devplace.discovery._devices import Device
from devplace.discovery._handlers import ResolvedProperties
from devplace.discovery._udevmatches import Match, UdevLike, devices_of, grouped, matches_rule, node_holder

if TYPE_CHECKING:
    import pyudev  # loaded by the first udev Configuration's discovery: about 1.5 MiB an agent without one never pays

log = logging.getLogger(__name__)

PERMISSIONS = ("r", "w", "m", "rw", "rm", "wm", "rwm")


@dataclass(frozen=True)
class UdevDetails:
    rules: tuple[tuple[UdevFilter, ...], ...]
    group_recursive: bool = False
    permissions: str = "rwm"


def parse_udev_details(text: str) -> UdevDetails:
    """Parse udev's discoveryDetails; `errors.Invalid` naming the field (and the rule) for anything else."""
    raw = d.load_mapping(text)
    d.refuse_unknown(raw, ("udevRules", "groupRecursive", "permissions"))
    path = f"{d.ROOT}.udevRules"
    value: Any = raw.get("udevRules")
    if value is None:
        raise errors.Invalid.field(path, "required: a list of udev rules, e.g. udevRules: ['KERNEL==\"video[0-9]*\"']")
    if not isinstance(value, list):
        raise errors.Invalid.field(path, "must be a list of strings")
    rules: list[tuple[UdevFilter, ...]] = []
    for i, rule in enumerate(value):
        if not isinstance(rule, str):
            raise errors.Invalid.field(f"{path}[{i}]", f"must be a string (quote it), got {rule!r}")
        try:
            rules.append(parse_udev_rule(rule))
        except errors.Invalid as e:
            raise errors.Invalid.field(f"{path}[{i}]", e.message) from e
    permissions = d.optional_str(raw, "permissions")
    if permissions is not None and permissions not in PERMISSIONS:
        raise errors.Invalid.field(
            f"{d.ROOT}.permissions", f"must be one of {', '.join(PERMISSIONS)}, got {permissions!r}"
        )
    return UdevDetails(
        rules=tuple(rules),
        group_recursive=d.optional_bool(raw, "groupRecursive", False),
        permissions=permissions or "rwm",
    )


# -- pyudev devices as the matcher's records ---------------------------------------------------------------------------


class _Attributes(Mapping[str, str]):
    """A device's sysfs attributes, read only when a rule asks for one (each is a file read)."""

    __slots__ = ("_device",)

    def __init__(self, device: pyudev.Device) -> None:
        self._device = device

    def __getitem__(self, key: str) -> str:
        try:
            value: str = self._device.attributes.asstring(key)
        except (KeyError, UnicodeDecodeError, OSError) as e:
            raise KeyError(key) from e
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._device.attributes.available_attributes)

    def __len__(self) -> int:
        return len(self._device.attributes.available_attributes)


class _Properties(Mapping[str, str]):
    __slots__ = ("_properties",)

    def __init__(self, device: pyudev.Device) -> None:
        self._properties = device.properties

    def __getitem__(self, key: str) -> str:
        value: str = self._properties[key]
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._properties)

    def __len__(self) -> int:
        return len(self._properties)


class PyudevRecord:
    """A `UdevLike` over a pyudev device; its parent is looked up only when a rule (or a missing node) needs it."""

    __slots__ = (
        "_device",
        "_parent",
        "attributes",
        "devnode",
        "devpath",
        "driver",
        "properties",
        "subsystem",
        "sysname",
    )

    def __init__(self, device: pyudev.Device) -> None:
        self._device = device
        self._parent: PyudevRecord | bool | None = False  # False: not looked up yet
        self.devpath: str = device.device_path
        self.sysname: str = device.sys_name
        self.subsystem: str | None = device.subsystem
        self.driver: str | None = device.driver
        self.devnode: str | None = device.device_node
        self.properties: Mapping[str, str] = _Properties(device)
        self.attributes: Mapping[str, str] = _Attributes(device)

    @property
    def parent(self) -> PyudevRecord | None:
        if self._parent is False:
            up = self._device.parent
            self._parent = None if up is None else PyudevRecord(up)
        assert self._parent is not True
        return self._parent


# -- the device set one stream follows ---------------------------------------------------------------------------------


class UdevView:
    """The matches of one rule set over the devices seen so far, updated one event at a time."""

    def __init__(self, details: UdevDetails) -> None:
        self.details = details
        self.matches: dict[str, Match] = {}
        """Matching device's devpath -> what it counts as (itself, or its nearest ancestor with a node)."""
        self.known: set[str] = set()
        self._built: dict[tuple[str, tuple[Match, ...]], Device] = {}
        self._last_matches: frozenset[Match] | None = None
        self._last_devices: list[Device] = []

    def _consider(self, record: UdevLike) -> None:
        self.known.add(record.devpath)
        if any(matches_rule(record, rule) for rule in self.details.rules):
            self.matches[record.devpath] = node_holder(record)
        else:
            self.matches.pop(record.devpath, None)

    def scan(self, records: Iterator[UdevLike]) -> None:
        for record in records:
            self._consider(record)

    def changed(self, record: UdevLike, below: Callable[[str], list[UdevLike]]) -> None:
        """`record` was added or changed: match it again, and the known devices below it (read afresh by `below`)."""
        self._consider(record)
        prefix = record.devpath + "/"
        if any(k.startswith(prefix) for k in self.known):
            for child in below(record.devpath):
                self._consider(child)

    def removed(self, devpath: str) -> None:
        prefix = devpath + "/"
        for known in [k for k in self.known if k == devpath or k.startswith(prefix)]:
            self.known.discard(known)
            self.matches.pop(known, None)

    def devices(self) -> list[Device]:
        """The device list; a device whose group did not change since the last call is the same object (an event
        touching one device costs one device, and comparing lists skips the rest by identity)."""
        current = frozenset(self.matches.values())
        if current == self._last_matches:
            return list(self._last_devices)
        built: dict[tuple[str, tuple[Match, ...]], Device] = {}
        for devpath, members in sorted(grouped(current, self.details.group_recursive).items()):
            key = (devpath, tuple(members))
            device = self._built.get(key)
            if device is None:
                [device] = devices_of({devpath: members}, self.details.group_recursive, self.details.permissions)
            built[key] = device
        self._built, self._last_matches, self._last_devices = built, current, list(built.values())
        return list(self._last_devices)


# -- the handler -------------------------------------------------------------------------------------------------------


class UdevHandler:
    """Akri's `udev` handler, in-process or served (`devplace handler udev`); devices are local (not shared)."""

    name = "udev"

    def __init__(self, context: Callable[[], pyudev.Context] | None = None) -> None:
        self._context = context  # None: `pyudev.Context`

    async def discover(
        self, details: str, properties: ResolvedProperties | None = None
    ) -> AsyncGenerator[list[Device], None]:
        """The matching devices now, then the list again after each udev event that changes it."""
        parsed = parse_udev_details(details)
        import pyudev

        context = (self._context or pyudev.Context)()
        monitor = pyudev.Monitor.from_netlink(context)
        monitor.start()
        ready = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_reader(monitor.fileno(), ready.set)
        try:
            view = await _scanned(parsed, context)
            last = view.devices()
            yield last
            while True:
                await ready.wait()
                ready.clear()
                try:
                    while (event := monitor.poll(timeout=0)) is not None:
                        _apply(view, context, event)
                except OSError as e:  # ENOBUFS: events were lost; only a new scan knows what is there now
                    log.warning("udev events were lost (%s); scanning every device again", e)
                    view = await _scanned(parsed, context)
                current = view.devices()
                if current != last:
                    last = current
                    yield current
        finally:
            loop.remove_reader(monitor.fileno())  # the monitor's socket closes when the monitor goes (no close())


async def _scanned(details: UdevDetails, context: pyudev.Context) -> UdevView:
    """Every device matched against `details`, in a worker thread (a large /sys takes a while to read)."""
    view = UdevView(details)
    await asyncio.to_thread(view.scan, (PyudevRecord(x) for x in context.list_devices()))
    return view


def _apply(view: UdevView, context: pyudev.Context, event: pyudev.Device) -> None:
    import pyudev

    action = event.action
    if action == "remove":
        view.removed(event.device_path)
        return
    if action == "move":  # renamed: the old devpath (and all below it) is gone
        old = event.properties.get("DEVPATH_OLD")
        if old:
            view.removed(old)

    def below(devpath: str) -> list[UdevLike]:
        prefix = devpath + "/"
        found: list[UdevLike] = []
        for known in sorted(view.known):
            if known.startswith(prefix):
                try:
                    found.append(PyudevRecord(pyudev.Devices.from_path(context, known)))
                except pyudev.DeviceNotFoundError:
                    view.removed(known)
        return found

    view.changed(PyudevRecord(event), below)
