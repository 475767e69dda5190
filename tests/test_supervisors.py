"""The supervisor: loops restarted with backoff on the clock or fatal, in-flight work counted exactly."""

from __future__ import annotations

import asyncio
import logging

import pytest

from devplace.clocks import FakeClock
from devplace.supervisors import Supervisor, first_failure


async def _until(predicate: object, rounds: int = 200) -> None:
    for _ in range(rounds):
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


async def test_a_crashing_loop_is_logged_with_its_traceback_and_restarted_after_a_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    sup = Supervisor("part", clock=clock, backoff=(1.0, 8.0))
    runs: list[float] = []

    async def flaky() -> None:
        runs.append(clock.now())
        if len(runs) < 3:
            raise ValueError(f"boom {len(runs)}")
        await asyncio.Event().wait()

    with caplog.at_level(logging.ERROR):
        sup.loop("flaky", flaky)
        await _until(lambda: len(runs) == 1)
        await clock.advance(0.5)
        assert len(runs) == 1  # still backing off
        await clock.advance(0.5)
        await _until(lambda: len(runs) == 2)
        await clock.advance(1.9)
        assert len(runs) == 2  # the second pause is twice the first
        await clock.advance(0.1)
        await _until(lambda: len(runs) == 3)
    assert [r - runs[0] for r in runs] == [0.0, 1.0, 3.0]
    assert sup.restarts == {"flaky": 2}
    assert sup.failure is None
    failures = [r for r in caplog.records if "flaky failed" in r.getMessage()]
    assert len(failures) == 2
    assert failures[0].exc_info is not None
    assert "boom 1" in str(failures[0].exc_info[1])
    await sup.stop()


async def test_a_loop_that_must_not_restart_is_fatal_and_calls_on_fatal() -> None:
    seen: list[tuple[str, str]] = []
    sup = Supervisor("agent", on_fatal=lambda name, e: seen.append((name, str(e))))

    async def broken() -> None:
        raise OSError("cannot bind")

    sup.loop("plugins", broken, restart=False)
    failure = await asyncio.wait_for(sup.failed(), 5)
    assert str(failure) == "cannot bind"
    assert seen == [("plugins", "cannot bind")]
    await sup.stop()


async def test_a_loop_that_returns_counts_as_failed() -> None:
    sup = Supervisor("part")

    async def returns() -> None:
        return None

    sup.loop("short", returns, restart=False)
    failure = await asyncio.wait_for(sup.failed(), 5)
    assert "returned" in str(failure)
    await sup.stop()


async def test_too_many_restarts_in_a_row_become_fatal() -> None:
    clock = FakeClock()
    sup = Supervisor("part", clock=clock, backoff=(0.0, 0.0), max_restarts=2)
    calls = 0

    async def always() -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("again")

    sup.loop("x", always)
    await asyncio.wait_for(sup.failed(), 5)
    assert calls == 3


async def test_spawned_work_is_busy_from_spawn_until_it_ends_even_when_cancelled_before_starting() -> None:
    sup = Supervisor("part")
    gate = asyncio.Event()

    async def work() -> None:
        await gate.wait()

    sup.spawn("w1", work)
    task = sup.spawn("w2", work)
    assert sup.busy == 2
    assert not sup.idle
    task.cancel()
    await _until(lambda: sup.busy == 1)
    waiter = asyncio.create_task(sup.wait_idle())
    await asyncio.sleep(0)
    assert not waiter.done()
    gate.set()
    await asyncio.wait_for(waiter, 5)
    assert sup.idle


async def test_a_failing_piece_of_work_is_logged_and_not_busy_any_more(caplog: pytest.LogCaptureFixture) -> None:
    sup = Supervisor("part")

    async def bad() -> None:
        raise KeyError("slot")

    with caplog.at_level(logging.ERROR):
        await sup.spawn("claim", bad)
    assert sup.idle
    assert any("claim failed" in r.getMessage() for r in caplog.records)


async def test_hold_counts_busy_until_released_once() -> None:
    sup = Supervisor("part")
    release = sup.hold()
    assert sup.busy == 1
    release()
    release()
    assert sup.busy == 0


async def test_stop_cancels_loops_and_work_and_leaves_nothing_running() -> None:
    sup = Supervisor("part")
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    loop_task = sup.loop("forever", forever)
    work = sup.spawn("forever-work", forever)
    await started.wait()
    await sup.stop()
    assert loop_task.done()
    assert work.done()
    assert sup.busy == 0


async def test_first_failure_returns_the_failure_of_whichever_supervisor_fails() -> None:
    healthy, broken = Supervisor("controller"), Supervisor("classes")

    async def forever() -> None:
        await asyncio.Event().wait()

    async def fails() -> None:
        raise OSError("informer gone")

    healthy.loop("reconcile", forever)
    broken.loop("informer", fails, restart=False)
    failure = await asyncio.wait_for(first_failure(healthy, broken), 5)
    assert str(failure) == "informer gone"
    await healthy.stop()
    await broken.stop()
