"""Work queues: the one dirty-set / timer / wake-up machine every control loop uses.

A control loop is an informer set, a `WorkQueue` and a pure decision (STYLE.md). Change handlers `mark` keys; one
worker takes them (`get`, `get_batch` or `async for`), decides, writes, and calls `done`. The queue is what client-go's
workqueue is to a Go controller, with its timers on the injected `Clock` so a simulation or test runs them instantly.

Invariants:

- Coalescing: a key is queued at most once. Marking a queued key again does nothing (an `urgent` mark moves it to the
  urgent tier, which is handed out before the ordinary one, each in marking order).
- Never twice at once: a key handed out is `processing` until `done(key)`. Marking it meanwhile does not queue it; it
  is remembered (dirty) and queued by `done`, so the change the mark announced is seen by a pass that starts after
  it. The worker must call `done` for every key it took, also when the pass fails (`finally`), or the key stays
  processing for ever.
- Timers are deferred marks: `mark_at(key, when)` marks `key` once `clock.now() >= when`. One deadline is kept per
  key, the EARLIEST: a later deadline for a key that already has an earlier one is dropped (the earlier pass will
  decide again when it is next due), an earlier one replaces it. Handing a key out drops its pending deadline: the
  pass that follows decides afresh when the key is next due and sets it again. `forget(key)` drops everything.
- Timers fire only through a waiting `get`: the queue owns no task, so there is nothing to start or stop. A due
  timer that no getter has promoted yet still counts as work: `idle` is false while anything is queued, processing
  or due; a deadline in the future is not work (the loop is idle until then).
- Cancellation safety: a `get` cancelled while it waits takes nothing; a key is taken and returned in one step, so a
  cancelled worker never loses a key it was not handed.

A queue given a `name` reports client-go's work queue metrics under it (`devplace.metrics`: depth sampled at scrape
time, adds, time queued, time processing, measured on the monotonic clock, not the queue's `Clock`: they describe
real work, also in a simulation); an unnamed queue reports nothing and pays nothing.

`wait_event_until(event, clock, deadline)` is the sleep-or-event race, written once: the deadline is absolute and
the clock is read in the same step the sleep registers, so a `FakeClock` advanced at any moment cannot strand it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from devplace import metrics
from devplace.clocks import Clock

__all__ = ["WorkQueue", "wait_event_until"]

K = TypeVar("K", bound=Hashable)


async def _sleep_until(clock: Clock, deadline: float) -> None:
    await clock.sleep(deadline - clock.now())  # read and registered in one step: no advance can slip between


async def wait_event_until(event: asyncio.Event, clock: Clock, deadline: float | None) -> bool:
    """Wait until `event` is set (True, at once when it already is) or `clock.now() >= deadline` (False); `None`
    waits for the event only. Cancelling the caller cancels both waits; nothing is left running."""
    while True:
        if event.is_set():
            return True
        if deadline is None:
            await event.wait()
            return True
        if clock.now() >= deadline:
            return False
        waiter = asyncio.ensure_future(event.wait())
        sleeper = asyncio.ensure_future(_sleep_until(clock, deadline))
        try:
            await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            sleeper.cancel()


class WorkQueue(Generic[K]):
    """Keys to process: coalesced, never handed out twice at once, with timers on the clock (module docstring)."""

    def __init__(self, clock: Clock, *, name: str | None = None) -> None:
        self.clock = clock
        self.name = name
        self._urgent: dict[K, None] = {}
        self._queued: dict[K, None] = {}
        self._processing: set[K] = set()
        self._dirty: dict[K, bool] = {}
        """Keys marked while processing -> whether a mark was urgent; queued by `done`."""
        self._deadlines: dict[K, float] = {}
        self._heap: list[tuple[float, int, K]] = []
        """(deadline, seq, key); an entry is stale unless `_deadlines[key]` is its deadline."""
        self._seq = itertools.count()
        self._changed = asyncio.Event()
        self._measured: _Measured[K] | None = None
        if name is not None:
            self._measured = _Measured(name)
            metrics.WORKQUEUE_DEPTH.add(self, lambda queue: {(name,): len(queue)})

    # -- marking ---------------------------------------------------------------------------------------------------

    def mark(self, key: K, *, urgent: bool = False) -> None:
        """Queue `key` (coalesced); re-queued after `done` when it is being processed now."""
        if key in self._processing:
            self._dirty[key] = self._dirty.get(key, False) or urgent
            return
        if key in self._urgent:
            return
        if urgent:
            self._queued.pop(key, None)
            self._urgent[key] = None
        elif key not in self._queued:
            self._queued[key] = None
        else:
            return
        if self._measured is not None:
            self._measured.added(key)
        self._changed.set()

    def mark_at(self, key: K, when: float) -> None:
        """Mark `key` once `clock.now() >= when`; the earliest pending deadline per key wins."""
        if when <= self.clock.now():
            self.mark(key)
            return
        current = self._deadlines.get(key)
        if current is not None and current <= when:
            return
        self._deadlines[key] = when
        heapq.heappush(self._heap, (when, next(self._seq), key))
        self._changed.set()

    def forget(self, key: K) -> None:
        """Drop `key` from the queue, its re-queue after `done` and its deadline (it is gone or out of scope)."""
        if self._measured is not None and key in self:
            self._measured.queued.pop(key, None)
        self._urgent.pop(key, None)
        self._queued.pop(key, None)
        self._dirty.pop(key, None)
        self._deadlines.pop(key, None)

    # -- state -----------------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys queued now (not counting processing ones or timers)."""
        return len(self._urgent) + len(self._queued)

    def __contains__(self, key: object) -> bool:
        return key in self._urgent or key in self._queued

    @property
    def processing(self) -> bool:
        return bool(self._processing)

    def deadline(self, key: K) -> float | None:
        """The pending deadline of `key`, if any."""
        return self._deadlines.get(key)

    @property
    def idle(self) -> bool:
        """Nothing queued, nothing processing, no timer due."""
        if self._urgent or self._queued or self._processing:
            return False
        due = self._next_deadline()
        return due is None or due > self.clock.now()

    def _next_deadline(self) -> float | None:
        while self._heap:
            when, _, key = self._heap[0]
            if self._deadlines.get(key) == when:
                return when
            heapq.heappop(self._heap)
        return None

    def _promote(self) -> None:
        now = self.clock.now()
        while (when := self._next_deadline()) is not None and when <= now:
            _, _, key = heapq.heappop(self._heap)
            del self._deadlines[key]
            self.mark(key)

    # -- taking work -----------------------------------------------------------------------------------------------

    def _take(self, key: K) -> K:
        self._urgent.pop(key, None)
        self._queued.pop(key, None)
        self._deadlines.pop(key, None)
        self._processing.add(key)
        if self._measured is not None:
            self._measured.taken(key)
        return key

    async def _wait_ready(self) -> None:
        while True:
            self._promote()
            if self._urgent or self._queued:
                return
            self._changed.clear()
            await wait_event_until(self._changed, self.clock, self._next_deadline())

    async def get(self) -> K:
        """The next key (urgent ones first, then in marking order), now processing; waits for one."""
        await self._wait_ready()
        return self._take(next(iter(self._urgent or self._queued)))

    async def get_batch(self, limit: int | None = None, order: Callable[[K], Any] | None = None) -> list[K]:
        """Up to `limit` queued keys (all by default), now processing; waits for at least one. Urgent keys come
        first, the rest in marking order; when more are queued than fit, `order` (if given) picks the smallest."""
        await self._wait_ready()
        urgent = list(self._urgent)[:limit]
        room = None if limit is None else limit - len(urgent)
        if order is None or room is None or len(self._queued) <= room:
            rest = list(self._queued)[:room]
        else:
            rest = heapq.nsmallest(room, self._queued, key=order)
        return [self._take(key) for key in urgent + rest]

    def done(self, key: K) -> None:
        """`key`'s pass ended; a mark made during it queues it again now."""
        self._processing.discard(key)
        if self._measured is not None:
            self._measured.done(key)
        if key in self._dirty:
            self.mark(key, urgent=self._dirty.pop(key))

    def __aiter__(self) -> WorkQueue[K]:
        return self

    async def __anext__(self) -> K:
        return await self.get()


class _Measured(Generic[K]):
    """A named queue's metrics: when each queued key was queued and each processing key was handed out."""

    def __init__(self, name: str) -> None:
        self.adds = metrics.WORKQUEUE_ADDS.labels(name)
        self.queue_duration = metrics.WORKQUEUE_QUEUE_DURATION.labels(name)
        self.work_duration = metrics.WORKQUEUE_WORK_DURATION.labels(name)
        self.queued: dict[K, float] = {}
        self.processing: dict[K, float] = {}

    def added(self, key: K) -> None:
        if key not in self.queued:  # an urgent mark of a queued key moves it; it is not added again
            self.adds.inc()
            self.queued[key] = time.perf_counter()

    def taken(self, key: K) -> None:
        now = time.perf_counter()
        since = self.queued.pop(key, None)
        if since is not None:
            self.queue_duration.observe(now - since)
        self.processing[key] = now

    def done(self, key: K) -> None:
        since = self.processing.pop(key, None)
        if since is not None:
            self.work_duration.observe(time.perf_counter() - since)
