"""The DiscoveryHandler contract (devplace.discovery._handlers), run against every handler in conftest.DRIVERS.

Each test states one promise of the protocol: a stream yields the full current device list on start and on every
change (consumers replace, never merge), ids are unique within a list, discoveryProperties are accepted, and bad
details raise `errors.Invalid` before anything is yielded. Lists are compared by their sorted ids: the contract says
which devices, not in what order. Every read of a stream is bounded (conftest.BOUND), so a handler that never answers
fails instead of hanging.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

import pytest

from devplace import errors
from devplace.discovery import Device

from .conftest import BOUND, Driver


def ids(devices: list[Device]) -> list[str]:
    """The sorted ids of a yielded list, which must be a list of Devices with no id twice."""
    assert isinstance(devices, list), f"a handler yields lists, got {type(devices).__name__}"
    assert all(isinstance(d, Device) for d in devices), devices
    repeated = sorted(i for i, n in Counter(d.id for d in devices).items() if n > 1)
    assert not repeated, f"ids {repeated} appear more than once in {devices}"
    return sorted(d.id for d in devices)


def expected(world: Sequence[str]) -> list[str]:
    return sorted(world)


def discover(driver: Driver, details: str) -> AsyncGenerator[list[Device], None]:
    """`driver.handler.discover(details)`, which must be closable: consumers stop a stream with `aclose`."""
    stream = driver.handler.discover(details)
    assert isinstance(stream, AsyncGenerator), f"discover returned {type(stream).__name__}, which has no aclose"
    return stream


async def test_the_handler_name_is_a_non_empty_string(driver: Driver) -> None:
    await driver.start(("a", "b"))
    assert isinstance(driver.handler.name, str)
    assert driver.handler.name.strip()


async def test_the_first_list_is_every_device_present_now(driver: Driver) -> None:
    details = await driver.start(("a", "b"))
    async with aclosing(discover(driver, details)) as stream:
        assert ids(await driver.next_list(stream)) == ["a", "b"]


async def test_after_each_change_the_next_list_is_the_full_new_list_not_a_delta(driver: Driver) -> None:
    details = await driver.start(("a", "b"))
    async with aclosing(discover(driver, details)) as stream:
        assert ids(await driver.next_list(stream)) == ["a", "b"]
        before: Sequence[str] = ("a", "b")
        for world in driver.changes:
            await driver.show(world)
            assert ids(await driver.next_list(stream)) == expected(world), f"after {before} became {world}"
            before = world


async def test_device_ids_are_unique_within_a_list_even_when_the_source_names_one_twice(driver: Driver) -> None:
    details = await driver.start_with_a_repeated_source()
    async with aclosing(discover(driver, details)) as stream:
        assert ids(await driver.next_list(stream)) == ["a", "b"]


async def test_discovery_properties_are_accepted_and_the_stream_works_as_without_them(driver: Driver) -> None:
    details = await driver.start(("a", "b"))
    stream = driver.handler.discover(details, {"username": b"admin", "password": b"\x00\xff", "empty": b""})
    assert isinstance(stream, AsyncGenerator)
    async with aclosing(stream):
        assert ids(await driver.next_list(stream)) == ["a", "b"]
    async with aclosing(driver.handler.discover(details, {})) as no_properties:
        assert ids(await driver.next_list(no_properties)) == ["a", "b"]


async def test_an_empty_world_yields_an_empty_list_rather_than_nothing(driver: Driver) -> None:
    details = await driver.start(())
    async with aclosing(discover(driver, details)) as stream:
        assert ids(await driver.next_list(stream)) == []


async def test_bad_details_raise_invalid_naming_the_problem_before_any_list(driver: Driver) -> None:
    await driver.start(("a", "b"))  # devices are present: a handler that yields first would be caught
    for text, message in driver.bad_details:
        stream = discover(driver, text)
        with pytest.raises(errors.Invalid) as info:
            await asyncio.wait_for(anext(stream), BOUND)
        assert info.value.message.startswith(message), f"details {text!r}: {info.value.message!r}"
        with pytest.raises(StopAsyncIteration):  # the stream is over, it does not go on to yield
            await asyncio.wait_for(anext(stream), BOUND)


async def test_closing_a_stream_stops_it_cleanly_and_other_discover_calls_carry_on(driver: Driver) -> None:
    details = await driver.start(("a", "b"))
    async with aclosing(discover(driver, details)) as other:
        closed = discover(driver, details)
        assert ids(await driver.next_list(closed)) == ["a", "b"]
        assert ids(await driver.next_list(other)) == ["a", "b"]

        await asyncio.wait_for(closed.aclose(), BOUND)
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(anext(closed), BOUND)

        await driver.show(())
        assert ids(await driver.next_list(other)) == []
        async with aclosing(discover(driver, details)) as again:
            assert ids(await driver.next_list(again)) == []
