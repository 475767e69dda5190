"""Stopping asyncio child processes that a test started, and only those, by their handle (hence their PID).

`returncode is None` does not mean the child is still there: asyncio learns of an exit after the child has been
reaped, so a signal sent in between finds no process. `stop_child` treats that as already stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

__all__ = ["stop_child"]


async def stop_child(proc: asyncio.subprocess.Process, *, grace: float = 10.0, sig: int = signal.SIGTERM) -> None:
    """Send `sig` (SIGKILL skips the grace period), wait up to `grace` seconds, then kill; return once reaped."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    if sig != signal.SIGKILL:
        try:
            await asyncio.wait_for(proc.wait(), grace)
            return
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    await proc.wait()
