"""Helpers for reading device streams in tests without sleeping: bounded waits for I/O, FakeClock for time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

from devplace.clocks import FakeClock
from devplace.discovery import HandlerRegistry

__all__ = ["next_of", "pending_next", "registry_until", "result_of", "settle_until_sleeping"]

T = TypeVar("T")


async def next_of(stream: AsyncIterator[T], timeout: float = 10.0) -> T:
    """The stream's next item; the bound only guards against a hung test, it is not a timing assertion."""
    return await asyncio.wait_for(anext(stream), timeout)


async def result_of(task: asyncio.Task[T], timeout: float = 10.0) -> T:
    return await asyncio.wait_for(task, timeout)


async def pending_next(stream: AsyncIterator[T]) -> asyncio.Task[T]:
    """Ask for the next item and let the stream run until it waits."""
    task = asyncio.create_task(anext(stream))  # type: ignore[arg-type]
    for _ in range(20):
        await asyncio.sleep(0)
    return task


async def settle_until_sleeping(clock: FakeClock, sleepers: int = 1) -> None:
    for _ in range(1000):
        if clock.pending_sleepers >= sleepers:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"expected {sleepers} sleeper(s) on the fake clock, found {clock.pending_sleepers}")


async def registry_until(registry: HandlerRegistry, condition: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await registry.changed()
