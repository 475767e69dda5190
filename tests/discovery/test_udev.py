"""The `udev` handler against real libudev: `devplace handler udev` in a umockdev testbed (a USB webcam and a USB serial
adapter), registered with a RegistrationServer, asked over Akri's protocol like an agent asks it; and its details."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from devplace import errors
from devplace.discovery import DiscoveryHandler, HandlerRegistry, RegistrationServer, UdevHandler
from devplace.discovery._udev import UdevView, parse_udev_details
from devplace.discovery._udevmatches import UdevRecord
from tests.processes import stop_child

from .streams import next_of, registry_until
from .umockdevs import (
    SERIAL,
    TTYUSB0,
    VIDEO0,
    WEBCAM,
    Umockdev,
    add_serial,
    add_webcam,
    udev_handler_process,
)

BOUND = 30.0  # a hung process fails the test; not a timing assertion


@dataclass
class Served:
    testbed: Umockdev
    registry: HandlerRegistry

    @property
    def handler(self) -> DiscoveryHandler:
        return self.registry.get("udev")


@pytest.fixture
async def served(sock_dir: Path, tmp_path: Path) -> AsyncIterator[Served]:
    """A testbed with the webcam and the serial adapter, and `devplace handler udev` seeing it, registered."""
    testbed = await Umockdev.start()
    await add_webcam(testbed)
    await add_serial(testbed)
    registry = HandlerRegistry("node-a")
    registration = RegistrationServer(sock_dir / "reg.sock", registry)
    await registration.start()
    proc = await udev_handler_process(testbed, registration.socket_path, sock_dir / "h", tmp_path / "udev.log")
    try:
        await registry_until(registry, lambda: "udev" in registry.names(), BOUND)
        yield Served(testbed, registry)
    finally:
        await stop_child(proc)
        await registration.stop()
        await testbed.close()


def details(*rules: str, **more: object) -> str:
    return yaml.safe_dump({"udevRules": list(rules), **more})


async def ids_for(handler: DiscoveryHandler, *rules: str) -> list[str]:
    stream = handler.discover(details(*rules))
    try:
        return [d.id for d in await next_of(stream, BOUND)]
    finally:
        await stream.aclose()


USB1 = "/devices/pci0000:00/0000:00:14.0/usb1"
PCI = "/devices/pci0000:00/0000:00:14.0"

RULES: list[tuple[str, list[str]]] = [
    # libudev's enumerator: globs
    ('KERNEL=="video[0-9]*"', [VIDEO0]),
    ('KERNEL=="tty*"', [TTYUSB0]),
    ('KERNEL=="sd*"', []),
    ('SUBSYSTEM=="video4linux"', [VIDEO0]),
    ('SUBSYSTEM=="v4l"', []),
    ('KERNEL=="*0", SUBSYSTEM!="usb", SUBSYSTEM!="pci"', [VIDEO0, TTYUSB0]),
    ('KERNEL=="*0", SUBSYSTEM!="usb", SUBSYSTEM!="pci", SUBSYSTEM!="video4linux"', [TTYUSB0]),
    ('ATTR{idVendor}=="04?d"', [WEBCAM]),
    ('ATTR{idVendor}=="046e"', []),
    ('SUBSYSTEM=="usb", ATTR{idVendor}!="1d6b"', [WEBCAM, SERIAL]),  # the interfaces count as their usb_device
    ('ENV{ID_V4L_CAPABILITIES}==":capture:"', [VIDEO0]),
    ('ENV{ID_BUS}=="pci"', []),
    ('DEVPATH=="/devices/none"', [PCI, USB1, WEBCAM, VIDEO0, SERIAL, TTYUSB0]),  # filters nothing on libudev 252
    # whole-value regular expressions
    ('SUBSYSTEM=="tty", DRIVERS=="ftdi_sio"', [TTYUSB0]),
    ('SUBSYSTEM=="tty", DRIVERS=="ftdi"', []),
    ('SUBSYSTEM=="video4linux", ATTRS{idVendor}=="046d"', [VIDEO0]),
    ('SUBSYSTEM=="video4linux", ATTRS{idVendor}=="04"', []),  # must cover the whole value
    ('SUBSYSTEM=="tty", ATTRS{idProduct}!="6001"', []),
    ('KERNELS=="1-3", SUBSYSTEM=="tty"', [TTYUSB0]),
    ('SUBSYSTEMS=="pci", KERNEL=="video0"', [VIDEO0]),
    ('SUBSYSTEMS=="scsi"', []),
    ('DRIVER=="uvcvideo"', [WEBCAM]),  # the interface has the driver, and no node: its usb_device stands in
    ('DRIVER!="usb", SUBSYSTEM=="usb"', [WEBCAM, SERIAL]),
    ('KERNEL!="video0", SUBSYSTEM=="video4linux"', []),
    ('DEVPATH!=".*/1-2/.*", SUBSYSTEMS=="usb", SUBSYSTEM!="usb"', [TTYUSB0]),
    ('ENV{ID_BUS}!="usb", SUBSYSTEM=="tty"', []),
    ('ENV{ID_BUS}!="usb", SUBSYSTEM=="video4linux"', [VIDEO0]),  # lacking the property keeps it
]


async def test_each_filter_kind_matches_and_misses_through_real_libudev(served: Served) -> None:
    found = {rule: await ids_for(served.handler, rule) for rule, _ in RULES}
    assert found == {rule: sorted(ids) for rule, ids in RULES}


async def test_the_empty_rule_finds_every_device_and_rules_are_a_union(served: Served) -> None:
    assert await ids_for(served.handler, "") == [PCI, USB1, WEBCAM, VIDEO0, SERIAL, TTYUSB0]
    assert await ids_for(served.handler, 'KERNEL=="video0"', 'KERNEL=="ttyUSB0"', 'KERNEL=="video*"') == [
        VIDEO0,
        TTYUSB0,
    ]


async def test_a_device_has_akris_id_properties_and_a_device_spec_for_its_node(served: Served) -> None:
    stream = served.handler.discover(details('SUBSYSTEM=="video4linux"', permissions="rw"))
    try:
        [device] = await next_of(stream, BOUND)
    finally:
        await stream.aclose()
    assert (
        device.id,
        device.shared,
        dict(device.properties),
        [(s.host_path, s.container_path, s.permissions) for s in device.device_specs],
    ) == (
        VIDEO0,
        False,
        {"UDEV_DEVNODE": "/dev/video0", "UDEV_DEVPATH": VIDEO0},
        [("/dev/video0", "/dev/video0", "rw")],
    )


async def test_group_recursive_folds_a_usb_devices_matches_into_one_device(served: Served) -> None:
    stream = served.handler.discover(details('SUBSYSTEMS=="usb", ATTRS{idVendor}=="046d"', groupRecursive=True))
    try:
        [device] = await next_of(stream, BOUND)
    finally:
        await stream.aclose()
    assert (device.id, dict(device.properties), [s.host_path for s in device.device_specs]) == (
        WEBCAM,
        {"UDEV_DEVPATH": WEBCAM, "UDEV_DEVNODE_0": "/dev/bus/usb/001/002", "UDEV_DEVNODE_1": "/dev/video0"},
        ["/dev/bus/usb/001/002", "/dev/video0"],
    )


async def test_add_and_remove_uevents_change_the_list_without_polling(served: Served) -> None:
    stream = served.handler.discover(details('SUBSYSTEM=="tty", ATTRS{idVendor}=="0403"'))
    try:
        assert [d.id for d in await next_of(stream, BOUND)] == [TTYUSB0]
        second = await add_serial(served.testbed, port="1-4", index=1)
        assert [d.id for d in await next_of(stream, BOUND)] == [TTYUSB0, second]
        await served.testbed.remove(TTYUSB0)
        assert [d.id for d in await next_of(stream, BOUND)] == [second]
    finally:
        await stream.aclose()


async def test_a_change_uevent_on_a_parent_rematches_the_devices_below_it(served: Served) -> None:
    stream = served.handler.discover(details('SUBSYSTEM=="tty", ATTRS{product}=="Adapter B"'))
    try:
        assert [d.id for d in await next_of(stream, BOUND)] == []
        await served.testbed.change(SERIAL, product="Adapter B")  # the usb_device, two levels above the tty
        assert [d.id for d in await next_of(stream, BOUND)] == [TTYUSB0]
    finally:
        await stream.aclose()


async def test_a_rule_akri_cannot_parse_is_invalid_argument_naming_the_rule(served: Served) -> None:
    stream = served.handler.discover(details('KERNEL=="video*"', 'KERNEL="video0"'))
    with pytest.raises(errors.Invalid) as caught:
        await next_of(stream, BOUND)
    assert caught.value.message.startswith(
        "discoveryDetails.udevRules[1]: udev rule 'KERNEL=\"video0\"' at character 7: unsupported action operation '='"
    )


# -- details, in process ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "discoveryDetails.udevRules: required"),
        ("udevRules: 'KERNEL==\"x\"'", "discoveryDetails.udevRules: must be a list of strings"),
        ("udevRules: [3]", "discoveryDetails.udevRules[0]: must be a string"),
        ("udevRules: []\npermissions: x", "discoveryDetails.permissions: must be one of r, w, m, rw, rm, wm, rwm"),
        ("udevRules: []\ngroupRecursive: yes please", "discoveryDetails.groupRecursive: must be true or false"),
        ("udevRules: []\nudevRule: []", "discoveryDetails.udevRule: unknown key"),
        ("udevRules: ['TAG==\"a\" ']", "discoveryDetails.udevRules[0]: udev rule 'TAG==\"a\" ' at character 9"),
    ],
)
def test_bad_details_are_invalid_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        parse_udev_details(text)
    assert caught.value.message.startswith(message)


def test_details_default_as_akris_do() -> None:
    parsed = parse_udev_details("udevRules: ['']")
    assert (parsed.rules, parsed.group_recursive, parsed.permissions) == (((),), False, "rwm")


async def test_bad_details_fail_the_stream_before_libudev_is_opened() -> None:
    opened: list[int] = []

    def context() -> object:
        opened.append(1)
        raise AssertionError("libudev opened")

    stream = UdevHandler(context=context).discover("udevRules: [7]")  # type: ignore[arg-type]
    with pytest.raises(errors.Invalid):
        await anext(stream)
    assert opened == []


def test_a_view_drops_everything_below_a_removed_parent_and_reuses_unchanged_devices() -> None:
    hub = UdevRecord("/devices/usb1/1-2", "1-2", "usb", devnode="/dev/bus/usb/001/002")
    tty = UdevRecord("/devices/usb1/1-2/1-2:1.0/ttyUSB0", "ttyUSB0", "tty", devnode="/dev/ttyUSB0", parent=hub)
    other = UdevRecord("/devices/usb1/1-20/ttyUSB1", "ttyUSB1", "tty", devnode="/dev/ttyUSB1")
    view = UdevView(parse_udev_details("udevRules: ['SUBSYSTEM==\"tty\"']"))
    view.scan(iter([hub, tty, other]))
    first = view.devices()
    view.removed("/devices/usb1/1-2")  # the hub went: its tty with it, not 1-20's (a string prefix, not a parent)
    second = view.devices()
    assert ([d.id for d in first], [d.id for d in second], second[0] is first[1]) == (
        [tty.devpath, other.devpath],
        [other.devpath],
        True,
    )
