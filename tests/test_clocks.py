"""The Clock contract, run against every implementation, plus FakeClock's own controls.

A driver per implementation moves time: FakeClock by `advance`, SystemClock by really waiting (tiny amounts).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from devplace.clocks import Clock, FakeClock, SystemClock


@dataclass
class Driver:
    clock: Clock
    elapse: Callable[[float], Awaitable[None]]  # let at least this much of the clock's time pass


def fake_driver() -> Driver:
    clock = FakeClock()
    return Driver(clock, clock.advance)


def system_driver() -> Driver:
    return Driver(SystemClock(), lambda seconds: asyncio.sleep(seconds * 1.5 + 0.005))


@pytest.fixture(params=["fake", "system"])
def driver(request: pytest.FixtureRequest) -> Driver:
    return fake_driver() if request.param == "fake" else system_driver()


async def test_now_never_goes_backwards(driver: Driver) -> None:
    readings = [driver.clock.now()]
    for _ in range(3):
        await driver.elapse(0.001)
        readings.append(driver.clock.now())
    assert readings == sorted(readings)
    assert readings[-1] > readings[0]


async def test_a_sleep_ends_only_after_its_time_has_passed_on_that_clock(driver: Driver) -> None:
    start = driver.clock.now()
    task = asyncio.create_task(driver.clock.sleep(0.02))
    await asyncio.sleep(0)
    assert not task.done()
    await driver.elapse(0.02)
    await asyncio.wait_for(task, timeout=5)
    assert driver.clock.now() - start >= 0.02 - 1e-6


async def test_a_sleep_of_zero_or_less_returns_at_once(driver: Driver) -> None:
    await asyncio.wait_for(driver.clock.sleep(0), timeout=1)
    await asyncio.wait_for(driver.clock.sleep(-1), timeout=1)


async def test_a_cancelled_sleep_raises_cancelled_error(driver: Driver) -> None:
    task = asyncio.create_task(driver.clock.sleep(60))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# -- FakeClock's controls ---------------------------------------------------------------------------------------


async def test_fake_clock_wakes_sleepers_in_deadline_order_when_advanced() -> None:
    clock = FakeClock(start=100.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.now()))

    tasks = [asyncio.create_task(sleeper("late", 30)), asyncio.create_task(sleeper("early", 10))]
    await asyncio.sleep(0)
    await clock.advance(5)
    assert woke == []
    await clock.advance(25)
    assert woke == [("early", 110.0), ("late", 130.0)]
    assert clock.now() == 130.0
    await asyncio.gather(*tasks)


async def test_fake_clock_does_not_wake_a_sleeper_before_its_deadline() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(300))
    await asyncio.sleep(0)
    await clock.advance(299.5)
    assert not task.done()
    assert clock.pending_sleepers == 1
    await clock.advance(0.5)
    assert task.done()
    assert clock.pending_sleepers == 0


async def test_fake_clock_sleep_of_zero_returns_without_advancing() -> None:
    clock = FakeClock(start=5.0)
    await clock.sleep(0)
    assert clock.now() == 5.0
