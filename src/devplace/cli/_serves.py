"""A daemon's life, for every long-running command: start, then wait for SIGTERM/SIGINT or a loop failing for good,
then stop (`serve`). Typer-free: the agent's process runs it without the CLI application (`_agentruns`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable

from devplace.cli._logs import announce
from devplace.cli._probes import Health


async def serve(
    command: str,
    *,
    start: Callable[[], Awaitable[None]],
    stop: Callable[[], Awaitable[None]],
    failed: Callable[[], Awaitable[BaseException]],
    banner: str,
    health: Health | None = None,
) -> int:
    """Start a part, then wait for SIGTERM/SIGINT (0) or `failed()` (1); `stop` runs either way: the part stopped,
    the store closed, and a failure one `error:` line on stderr, so a process manager restarts it (`_daemons`).

    Signal handlers are installed before `start`, so a SIGTERM during start-up is a clean stop too: `start` (which may
    be waiting for its store, `devplace agent`) is cancelled and the exit code is 0. `health` (the `--metrics-port`
    endpoint's) is told when the part has started."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stopping.set)
            installed.append(sig)
    failure: BaseException | None = None
    try:
        if not await _unless_stopped(start(), stopping):
            announce(f"devplace {command}: stopped before it started")
            return 0
        if health is not None:
            health.started = True
        announce(f"devplace {command}: {banner}")
        stop_wait = asyncio.ensure_future(stopping.wait())
        fail_wait = asyncio.ensure_future(failed())
        try:
            done, _ = await asyncio.wait({stop_wait, fail_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_wait.cancel()
            fail_wait.cancel()
        if fail_wait in done:
            failure = fail_wait.result()
    finally:
        try:
            await stop()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
    if failure is not None:
        announce(f"error: devplace {command}: a loop failed for good: {type(failure).__name__}: {failure}", error=True)
        return 1
    announce(f"devplace {command}: stopped")
    return 0


async def _unless_stopped(work: Awaitable[None], stopping: asyncio.Event) -> bool:
    """Run `work` to its end (True; its error raised) unless `stopping` is set first (False: `work` cancelled)."""
    task = asyncio.ensure_future(work)
    stop_wait = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({task, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop_wait.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task.cancelled():
        return False
    task.result()
    return True
