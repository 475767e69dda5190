"""Akri's udev matching over plain records: what umockdev cannot fake (TAG, udev-database properties such as ENV{ID_*}),
the regex and glob traps, the devnode stand-in and groupRecursive; globs checked against the C library's fnmatch."""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace.api import parse_udev_rule
from devplace.discovery._udevmatches import UdevRecord, glob_match, matches_rule, regex_match, udev_devices

USB = UdevRecord(
    devpath="/devices/usb1/1-2",
    sysname="1-2",
    subsystem="usb",
    driver="usb",
    devnode="/dev/bus/usb/001/002",
    properties={"DEVTYPE": "usb_device", "ID_SERIAL": "046d_0825_ABC", "TAGS": ":seat:uaccess:"},
    attributes={"idVendor": "046d", "idProduct": "0825", "product": "HD Webcam C270"},
)
INTERFACE = UdevRecord(
    devpath="/devices/usb1/1-2/1-2:1.0",
    sysname="1-2:1.0",
    subsystem="usb",
    driver="uvcvideo",
    properties={"DEVTYPE": "usb_interface"},
    parent=USB,
)
VIDEO = UdevRecord(
    devpath="/devices/usb1/1-2/1-2:1.0/video4linux/video0",
    sysname="video0",
    subsystem="video4linux",
    devnode="/dev/video0",
    properties={
        "ID_SERIAL": "046d_0825_ABC",
        "ID_V4L_CAPABILITIES": ":capture:",
        "ID_MODEL": "HD_Webcam|C270",
        "TAGS": ":uaccess:seat:systemd:",
    },
    attributes={"name": "HD Webcam C270", "index": "0"},
    parent=INTERFACE,
)
ORPHAN = UdevRecord(devpath="/devices/virtual/misc/thing", sysname="thing", subsystem="misc")


def passes(rule: str, record: UdevRecord = VIDEO) -> bool:
    return matches_rule(record, parse_udev_rule(rule))


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        # TAG== is libudev's exact tag match; TAG!= a regex over each tag; TAGS walks the parents
        ('TAG=="uaccess"', True),
        ('TAG=="uacc*"', False),  # exact, not a glob
        ('TAG=="uaccess", TAG=="nope"', False),  # every TAG== must hold
        ('TAG!="sys.*"', False),
        ('TAG!="nope"', True),
        ('TAGS=="seat"', True),
        ('TAGS!="seat"', False),
        # ENV{k}== is a libudev glob (key too); several are any-of; ENV{k}!= a regex that keeps a missing key
        ('ENV{ID_SERIAL}=="046d_*"', True),
        ('ENV{ID_SERIAL}=="046d"', False),
        ('ENV{ID_SER*}=="046d_0825_ABC"', True),
        ('ENV{ID_SERIAL}=="nope", ENV{ID_MODEL}=="HD_Webcam*"', True),
        ('ENV{ID_MODEL}=="HD_Webcam\\|C270"', True),  # `\|` is a literal bar in a glob
        ('ENV{ID_SERIAL}!="046d_.*"', False),
        ('ENV{ID_PATH}!="anything"', True),
        # whole-value regexes: leftmost-first, then the span must cover the value
        ('KERNELS=="1-2"', True),
        ('KERNELS=="1-"', False),
        ('ATTRS{product}=="HD|HD Webcam C270"', False),  # leftmost-first stops at "HD"
        ('ATTRS{product}=="HD Webcam C270|HD"', True),
        ('ATTRS{idVendor}=="046[a-f]"', True),
        ('ATTRS{idVendor}=="046d", ATTRS{idProduct}=="0825"', True),
        ('ATTRS{missing}!="x"', True),
        ('DRIVER=="uvcvideo"', False),  # the device's own driver only
        ('DRIVERS=="uvcvideo"', True),
        ('DRIVER!="uvcvideo"', True),  # no driver: != holds
        ('SUBSYSTEMS=="usb"', True),
        ('SUBSYSTEMS!="usb"', False),
        ('KERNEL!="video[0-9]*"', False),
        ('KERNEL!="video"', True),
        ('DEVPATH!="/devices/usb1/.*"', False),
        ('DEVPATH=="/nothing/like/it"', True),  # libudev's add_syspath filters nothing
        ("", True),
    ],
)
def test_each_filter_follows_akris_matcher(rule: str, expected: bool) -> None:
    assert passes(rule) is expected


def test_a_glob_in_a_regex_filter_means_the_regex() -> None:
    # `ttyUSB*` as a regex is "ttyUS" then any number of B: not ttyUSB0
    tty = UdevRecord(devpath="/devices/x/ttyUSB0", sysname="ttyUSB0", subsystem="tty", parent=INTERFACE)
    assert (passes('KERNELS=="ttyUSB*"', tty), passes('KERNEL=="ttyUSB*"', tty)) == (False, True)


def test_a_match_without_a_node_counts_as_its_nearest_ancestor_with_one() -> None:
    devices = udev_devices([USB, INTERFACE, VIDEO, ORPHAN], [parse_udev_rule('DRIVER=="uvcvideo"')])
    orphan = udev_devices([ORPHAN], [parse_udev_rule('SUBSYSTEM=="misc"')])
    assert [(d.id, dict(d.properties), len(d.device_specs)) for d in devices + orphan] == [
        (USB.devpath, {"UDEV_DEVPATH": USB.devpath, "UDEV_DEVNODE": "/dev/bus/usb/001/002"}, 1),
        (ORPHAN.devpath, {"UDEV_DEVPATH": ORPHAN.devpath}, 0),
    ]


def test_group_recursive_joins_by_string_prefix_as_akri_does() -> None:
    one = UdevRecord(devpath="/devices/usb1/1-1", sysname="1-1", subsystem="usb", devnode="/dev/bus/usb/001/004")
    ten = UdevRecord(devpath="/devices/usb1/1-10", sysname="1-10", subsystem="usb", devnode="/dev/bus/usb/001/005")
    rules = [parse_udev_rule('SUBSYSTEM=="usb"')]
    grouped = udev_devices([ten, one], rules, group_recursive=True, permissions="r")
    alone = udev_devices([ten, one], rules)
    assert [(d.id, dict(d.properties), [s.permissions for s in d.device_specs]) for d in grouped] == [
        (
            one.devpath,
            {"UDEV_DEVPATH": one.devpath, "UDEV_DEVNODE_0": one.devnode, "UDEV_DEVNODE_1": ten.devnode},
            ["r", "r"],
        )
    ]
    assert [d.id for d in alone] == [one.devpath, ten.devpath]


def test_devices_are_local_and_reported_once_however_many_rules_match() -> None:
    rules = [parse_udev_rule('KERNEL=="video0"'), parse_udev_rule('SUBSYSTEM=="video4linux"'), parse_udev_rule("")]
    devices = udev_devices([VIDEO], rules)
    assert [(d.id, d.shared) for d in devices] == [(VIDEO.devpath, False)]


def test_akris_leftmost_first_span_rule_differs_from_fullmatch() -> None:
    assert (regex_match("a|ab", "ab"), regex_match("ab|a", "ab"), regex_match("video[0-9]*", "blahvideo0")) == (
        False,
        True,
        False,
    )


_LIBC = ctypes.CDLL(ctypes.util.find_library("c"))
_LIBC.fnmatch.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]

GLOB_CHARS = st.sampled_from(list("ab01*?[]!^-\\|/."))
VALUE_CHARS = st.sampled_from(list("ab01-|/.\\[]"))


@given(st.text(GLOB_CHARS, max_size=8), st.text(VALUE_CHARS, max_size=8))
def test_globs_match_exactly_what_the_c_librarys_fnmatch_matches(glob: str, value: str) -> None:
    assert glob_match(glob, value) == (_LIBC.fnmatch(glob.encode(), value.encode(), 0) == 0)
