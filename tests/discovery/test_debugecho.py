"""debugEcho: Akri's details and devices, `shared`, and the per-node OFFLINE switch (file and property)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.clocks import FakeClock
from devplace.discovery import Device
from devplace.discovery._debugecho import (
    DEBUG_ECHO_DESCRIPTION,
    DebugEchoDetails,
    DebugEchoHandler,
    echo_devices,
    parse_details,
)

from .streams import next_of, pending_next, result_of, settle_until_sleeping

FOO = "descriptions: [foo0, foo1]"


def _devices(*names: str, shared: bool = True) -> list[Device]:
    return [Device(n, {DEBUG_ECHO_DESCRIPTION: n}, shared=shared) for n in names]


def test_akri_details_parse_with_shared_defaulting_to_true() -> None:
    assert parse_details("descriptions:\n- foo0\n- foo1\n") == DebugEchoDetails(("foo0", "foo1"), shared=True)
    assert parse_details("descriptions: []") == DebugEchoDetails((), shared=True)


@pytest.mark.parametrize(("text", "shared"), [("shared: false", False), ("shared: true", True)])
def test_shared_in_details_overrides_the_default(text: str, shared: bool) -> None:
    parsed = parse_details(f"{FOO}\n{text}")
    assert parsed.shared is shared
    assert echo_devices(parsed) == _devices("foo0", "foo1", shared=shared)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "discoveryDetails.descriptions: required: a list of device descriptions, e.g. descriptions: [foo0, foo1]"),
        ("shared: true", "discoveryDetails.descriptions: required"),
        ("descriptions: foo0", "discoveryDetails.descriptions: must be a list of strings"),
        ("descriptions: [foo0, 3]", "discoveryDetails.descriptions[1]: must be a non-empty string, got 3"),
        ("descriptions: [foo0, '']", "discoveryDetails.descriptions[1]: must be a non-empty string"),
        ("descriptions: [a, b, a]", "discoveryDetails.descriptions[2]: duplicate description 'a'"),
        (f"{FOO}\nshared: maybe", "discoveryDetails.shared: must be true or false"),
        (f"{FOO}\ncount: 2", "discoveryDetails.count: unknown key (allowed: descriptions, shared)"),
        ("descriptions: [foo0", "discoveryDetails: not valid YAML"),
    ],
)
def test_bad_details_are_invalid_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        parse_details(text)
    assert info.value.message.startswith(message)


@given(st.lists(st.text(min_size=1), unique=True))
def test_every_description_becomes_one_device_in_order(descriptions: list[str]) -> None:
    text = yaml.safe_dump({"descriptions": descriptions})
    assert echo_devices(parse_details(text)) == _devices(*descriptions)


async def test_stream_raises_invalid_before_yielding_for_bad_details() -> None:
    stream = DebugEchoHandler().discover("descriptions: 7")
    with pytest.raises(errors.Invalid, match="descriptions"):
        await next_of(stream)


async def test_offline_property_empties_the_list_at_once_and_back() -> None:
    handler = DebugEchoHandler()
    stream = handler.discover(FOO)
    assert await next_of(stream) == _devices("foo0", "foo1")
    waiting = await pending_next(stream)
    assert not waiting.done()
    handler.offline = True
    assert await waiting == []
    assert handler.offline is True
    handler.offline = False
    assert await next_of(stream) == _devices("foo0", "foo1")
    await stream.aclose()


async def test_setting_offline_to_its_current_value_sends_nothing() -> None:
    handler = DebugEchoHandler()
    stream = handler.discover(FOO)
    await next_of(stream)
    waiting = await pending_next(stream)
    handler.offline = False
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done()
    waiting.cancel()


async def test_the_handlers_shared_default_applies_where_the_details_do_not_say() -> None:
    """Akri's agent takes `shared` from DEBUG_ECHO_INSTANCES_SHARED; `devplace agent` passes it as the default."""
    local = DebugEchoHandler(shared=False)
    assert await next_of(local.discover(FOO)) == _devices("foo0", "foo1", shared=False)
    assert await next_of(local.discover(f"{FOO}\nshared: true")) == _devices("foo0", "foo1", shared=True)


async def test_offline_file_is_noticed_at_the_next_poll(tmp_path: Path, clock: FakeClock) -> None:
    availability = tmp_path / "availability"
    handler = DebugEchoHandler(offline_file=availability, clock=clock)
    stream = handler.discover(FOO)
    assert await next_of(stream) == _devices("foo0", "foo1")  # no file: online

    waiting = await pending_next(stream)
    await settle_until_sleeping(clock)
    availability.write_text("OFFLINE\n")
    await clock.advance(9.9)
    assert not waiting.done()  # not polled yet
    await clock.advance(0.1)
    assert await result_of(waiting) == []

    waiting = await pending_next(stream)
    await settle_until_sleeping(clock)
    await clock.advance(10)
    assert not waiting.done()  # still OFFLINE: nothing new to send
    availability.write_text("ONLINE")
    await settle_until_sleeping(clock)
    await clock.advance(10)
    assert await result_of(waiting) == _devices("foo0", "foo1")
    await stream.aclose()


async def test_offline_file_at_start_reports_no_devices(tmp_path: Path, clock: FakeClock) -> None:
    availability = tmp_path / "availability"
    availability.write_text("node is OFFLINE for maintenance")
    stream = DebugEchoHandler(offline_file=availability, clock=clock).discover(FOO)
    assert await next_of(stream) == []
    await stream.aclose()


async def test_property_wakes_a_stream_that_polls_a_file(tmp_path: Path, clock: FakeClock) -> None:
    handler = DebugEchoHandler(offline_file=tmp_path / "missing", clock=clock)
    stream = handler.discover(FOO)
    await next_of(stream)
    waiting = await pending_next(stream)
    handler.offline = True
    assert await result_of(waiting) == []
    await stream.aclose()
