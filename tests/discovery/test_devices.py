"""Devices are frozen values, equal and hashable by content, whatever mapping their properties came from."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace.discovery import Device
from devplace.discovery._devices import DeviceSpec, Mount, Properties


def test_properties_equal_any_mapping_with_the_same_items_and_hash_by_content() -> None:
    a = Properties({"b": "2", "a": "1"})
    assert a == {"a": "1", "b": "2"}
    assert a != {"a": "1"}
    assert hash(a) == hash(Properties({"a": "1", "b": "2"}))
    assert list(a) == ["a", "b"]
    assert repr(a) == "Properties({'a': '1', 'b': '2'})"


def test_properties_cannot_be_changed_in_place() -> None:
    props = Properties({"a": "1"})
    with pytest.raises(TypeError):
        props["a"] = "2"  # type: ignore[index]


def test_device_copies_its_properties_so_later_changes_to_the_input_do_nothing() -> None:
    source = {"kind": "camera"}
    device = Device("cam-1", source)
    source["kind"] = "gpu"
    assert device.properties == {"kind": "camera"}
    assert isinstance(device.properties, Properties)


def test_devices_with_equal_content_are_equal_and_usable_in_sets() -> None:
    one = Device("d", {"k": "v"}, mounts=(Mount("/c", "/h", True),), device_specs=(DeviceSpec("/dev/a", "/dev/a"),))
    two = Device("d", {"k": "v"}, mounts=(Mount("/c", "/h", True),), device_specs=(DeviceSpec("/dev/a", "/dev/a"),))
    assert one == two
    assert len({one, two}) == 1
    assert one != Device("d", {"k": "v"}, shared=False)
    assert DeviceSpec("/dev/a", "/dev/a").permissions == "rwm"


def test_lists_given_for_mounts_become_tuples() -> None:
    device = Device("d", {}, mounts=[Mount("/c", "/h")])  # type: ignore[arg-type]
    assert device.mounts == (Mount("/c", "/h"),)
    assert hash(device) == hash(Device("d", {}, mounts=(Mount("/c", "/h"),)))


@given(st.dictionaries(st.text(), st.text()))
def test_properties_round_trip_any_string_mapping(items: dict[str, str]) -> None:
    props = Properties(items)
    assert dict(props) == items
    assert props == Properties(dict(reversed(list(items.items()))))
    assert hash(props) == hash(Properties(dict(reversed(list(items.items())))))
