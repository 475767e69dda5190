"""Read-decide-write with compare-and-swap: the one way parts change an existing object.

`mutate` re-reads on `Conflict` and re-runs the (pure) decision on the fresh object, with bounded, jittered
backoff through the injected clock. The decision returns the new object, or None for "nothing to change";
it may raise to abort (e.g. `errors.Refused`), and then nothing is written.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from devplace import errors
from devplace.clocks import Clock, SystemClock
from devplace.store.base import Store

__all__ = ["mutate"]

Decide = Callable[[dict[str, Any]], dict[str, Any] | None]


async def mutate(
    store: Store,
    kind: str,
    name: str,
    namespace: str,
    decide: Decide,
    *,
    attempts: int = 16,
    clock: Clock | None = None,
    base_delay: float = 0.002,
) -> dict[str, Any]:
    """Apply `decide` to the current object until a CAS write lands; returns the stored result.

    Raises `Conflict` after `attempts` lost races, and whatever `decide` or the store raises otherwise.
    """
    if attempts < 1:
        raise errors.Invalid.field("attempts", f"must be at least 1 (got {attempts})")
    clock = clock or SystemClock()
    for attempt in range(attempts):
        current = await store.get(kind, name, namespace)
        wanted = decide(current)
        if wanted is None:
            return current
        try:
            return await store.update(wanted)
        except errors.Conflict:
            if attempt == attempts - 1:
                raise
            delay = base_delay * (2 ** min(attempt, 6)) * random.uniform(0.5, 1.5)
            await clock.sleep(delay)
    raise AssertionError("unreachable: the last attempt returns or raises")
