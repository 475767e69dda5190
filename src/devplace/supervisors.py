"""Supervised tasks: one owner for a part's long-running loops and its in-flight work.

A loop that dies silently is the worst failure a daemon can have: the process stays up, health checks pass, and the
work it should do never happens (a device plugged in never becomes an Instance). So no part creates a bare task:

- `loop(name, make)` runs `make()` for the life of the part. When it raises (or returns) it is logged with its
  traceback and, when `restart=True` (the loop is safe to re-run from scratch: an informer relists, a poller polls
  again), started again after a backoff on the `Clock` that grows while it keeps failing and resets once a run lasted
  `healthy_after` seconds. When `restart=False`, or after `max_restarts` restarts in a row, the failure is fatal:
  `failure` is set, `failed()` returns it and `on_fatal` is called. The daemons (`devplace agent`, ...) exit non-zero
  on it, so systemd or Kubernetes restart the process; a simulation raises it from `settle`.
- `spawn(name, make)` runs one piece of in-flight work (a claim, a release, a registration). It is counted in `busy`
  from the instant `spawn` returns until it ends, even if it is cancelled before it starts, so `idle` is exact and a
  waiter (`wait_idle`) is woken by events, never by polling. An error is logged; the work is not retried here (the
  caller's level-triggered state marks it again).
- `stop()` cancels everything and waits for it; nothing outlives its part.

Cancellation is never a failure: `CancelledError` passes through untouched.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from devplace.clocks import Clock, SystemClock

__all__ = ["Supervisor", "first_failure"]

log = logging.getLogger(__name__)

Make = Callable[[], Awaitable[Any]]


class Supervisor:
    """The tasks of one part (see the module docstring)."""

    def __init__(
        self,
        name: str,
        *,
        clock: Clock | None = None,
        backoff: tuple[float, float] = (0.1, 30.0),
        healthy_after: float = 60.0,
        max_restarts: int | None = None,
        on_fatal: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self.name = name
        self.clock = clock or SystemClock()
        self._backoff = backoff
        self._healthy_after = healthy_after
        self._max_restarts = max_restarts
        self._on_fatal = on_fatal
        self._loops: dict[str, asyncio.Task[None]] = {}
        self._work: set[asyncio.Task[Any]] = set()
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._failed: asyncio.Future[BaseException] | None = None
        self.failure: BaseException | None = None
        self.restarts: dict[str, int] = {}

    # -- loops -------------------------------------------------------------------------------------------------

    def loop(self, name: str, make: Make, *, restart: bool = True) -> asyncio.Task[None]:
        """Run `make()` for the life of the part, restarted after failures when `restart` (module docstring)."""
        if name in self._loops and not self._loops[name].done():
            raise RuntimeError(f"{self.name}: loop {name!r} is already running")
        task = asyncio.create_task(self._run_loop(name, make, restart), name=f"{self.name}:{name}")
        self._loops[name] = task
        return task

    async def _run_loop(self, name: str, make: Make, restart: bool) -> None:
        pause = self._backoff[0]
        in_a_row = 0
        while True:
            started = self.clock.now()
            try:
                await make()
                error: BaseException = RuntimeError(f"loop {name!r} returned; it must run until cancelled")
            except asyncio.CancelledError:
                raise
            except Exception as e:
                error = e
            log.error("%s: %s failed", self.name, name, exc_info=error)
            if self.clock.now() - started >= self._healthy_after:
                pause, in_a_row = self._backoff[0], 0
            in_a_row += 1
            self.restarts[name] = self.restarts.get(name, 0) + 1
            if not restart or (self._max_restarts is not None and in_a_row > self._max_restarts):
                self._fatal(name, error)
                return
            log.warning("%s: restarting %s in %.2fs", self.name, name, pause)
            await self.clock.sleep(pause)
            pause = min(pause * 2, self._backoff[1])

    def _fatal(self, name: str, error: BaseException) -> None:
        if self.failure is None:
            self.failure = error
            log.critical("%s: %s failed and cannot be restarted: stopping", self.name, name)
            if self._failed is not None and not self._failed.done():
                self._failed.set_result(error)
            if self._on_fatal is not None:
                self._on_fatal(name, error)

    async def failed(self) -> BaseException:
        """Wait until a loop fails for good; returns its error."""
        if self.failure is not None:
            return self.failure
        if self._failed is None:
            self._failed = asyncio.get_running_loop().create_future()
        return await asyncio.shield(self._failed)

    # -- in-flight work ------------------------------------------------------------------------------------------

    def spawn(self, name: str, make: Make) -> asyncio.Task[Any]:
        """Run one piece of work, counted busy from now until it ends; its error is logged (module docstring)."""
        self._busy += 1
        self._idle.clear()

        async def run() -> Any:
            try:
                return await make()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: %s failed", self.name, name)
                return None

        task = asyncio.create_task(run(), name=f"{self.name}:{name}")
        self._work.add(task)
        task.add_done_callback(self._work_done)
        return task

    def _work_done(self, task: asyncio.Task[Any]) -> None:
        if task not in self._work:
            return
        self._work.discard(task)
        self._busy -= 1
        if self._busy == 0:
            self._idle.set()

    def hold(self) -> Callable[[], None]:
        """Count as busy until the returned function is called (once; later calls do nothing)."""
        self._busy += 1
        self._idle.clear()
        done = False

        def release() -> None:
            nonlocal done
            if done:
                return
            done = True
            self._busy -= 1
            if self._busy == 0:
                self._idle.set()

        return release

    @property
    def busy(self) -> int:
        """Pieces of work in flight (spawned and not ended, or held)."""
        return self._busy

    @property
    def idle(self) -> bool:
        return self._busy == 0

    async def wait_idle(self) -> None:
        """Return once no work is in flight (at once when none is)."""
        while self._busy:
            await self._idle.wait()

    # -- lifecycle -----------------------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Cancel every loop and piece of work and wait until they have ended."""
        tasks = [*self._loops.values(), *self._work]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loops.clear()
        for task in list(self._work):
            self._work_done(task)


async def first_failure(*supervisors: Supervisor) -> BaseException:
    """Wait until any of `supervisors` fails for good; returns that failure (a process of several parts exits on it)."""
    waits = [asyncio.ensure_future(s.failed()) for s in supervisors]
    try:
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        return next(iter(done)).result()
    finally:
        for waiter in waits:
            waiter.cancel()
