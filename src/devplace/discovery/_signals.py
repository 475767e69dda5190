"""A broadcast "something changed" signal for streams that re-send full state.

Race-free pattern for a stream: take `signal.current()` *before* reading the state, send the state, then wait on the
event taken earlier. A change that happens while the consumer is busy sets that event, so it is never missed; many
changes before the stream looks again collapse into one re-send, which is fine because every message is a full list.
Single event loop only: `fire` is a plain method, call it from the loop's thread.

A `fire` while nobody has taken the current event since the last one (no stream open, or every stream busy sending)
changes nothing: whoever takes it next reads the state after that change anyway. An agent's DRA plugin fires on every
Instance change whether or not a kubelet watches its health, so most of its fires cost no new event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable


class Signal:
    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._taken = False

    def current(self) -> asyncio.Event:
        """The event the next `fire` sets."""
        self._taken = True
        return self._event

    def fire(self) -> None:
        """Wake everyone waiting on the current event and start a fresh one for later waiters (nothing to do when
        nobody took the current one: module docstring)."""
        if not self._taken:
            return
        self._taken = False
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self) -> None:
        """Return at the next `fire` (only for callers that do not need the race-free pattern)."""
        self._taken = True
        await self._event.wait()


async def first_of(*awaitables: Awaitable[object]) -> None:
    """Return as soon as one awaitable finishes; cancel the rest (also when the caller is cancelled)."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # re-raise a failure instead of swallowing it
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # let the losers finish cancelling before returning
