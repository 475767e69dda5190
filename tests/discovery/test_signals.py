"""The broadcast signal: a stream that takes the current event before reading the state never misses a change."""

from __future__ import annotations

import asyncio

from devplace.discovery._signals import Signal


async def test_a_fire_sets_the_event_a_stream_took_and_the_next_one_is_fresh() -> None:
    signal = Signal()
    taken = signal.current()

    signal.fire()

    assert taken.is_set()
    assert not signal.current().is_set()


async def test_a_fire_nobody_took_the_event_for_makes_no_new_one_and_the_next_taker_still_wakes() -> None:
    signal = Signal()
    idle = signal._event  # nobody took it

    signal.fire()
    signal.fire()

    assert signal._event is idle
    assert not idle.is_set()
    taken = signal.current()  # a stream taking it now reads the state after both changes
    assert taken is idle
    signal.fire()
    assert taken.is_set()
    assert signal._event is not idle


async def test_wait_returns_at_the_next_fire() -> None:
    signal = Signal()
    waiter = asyncio.ensure_future(signal.wait())
    await asyncio.sleep(0)
    assert not waiter.done()

    signal.fire()

    await asyncio.wait_for(waiter, 1.0)
