"""Deprecated shim (removed once no caller is left): `mutate` is `cas` returning the object."""

from __future__ import annotations

from typing import Any

from devplace.clocks import Clock
from devplace.store.base import Store
from devplace.store.cas import Decide, cas

__all__ = ["mutate"]


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
    return (
        await cas(store, kind, name, namespace, decide, attempts=attempts, clock=clock, base_delay=base_delay)
    ).object
