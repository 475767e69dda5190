import asyncio

from devplace.clocks import FakeClock


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
