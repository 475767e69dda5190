"""Placement controllers and how the scheduler runs them: all at once, each under its own timeout (seed 004).

A controller is anything with a `name`, a `timeout` (seconds) and `async candidates(context) -> {app: Candidate}`.
The built-ins (generic, hpa) wrap the pure functions of `generic` and `hpa` and run them in a worker thread, so a slow
one cannot stall the event loop and its timeout can fire; a timed-out thread finishes in the background and its result
is dropped. More controllers register with `register` (or are passed to the service explicitly).

Timeouts go through the injected `Clock`, so tests decide when a controller is late. Failure semantics: an exception
or a timeout becomes an `Outcome` with `error` set, and the combiner then fails the whole decision naming the
controller - never a silent plan from the controllers that happened to answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from devplace.clocks import Clock
from devplace.placement._candidates import Candidate
from devplace.placement._combiner import Outcome
from devplace.placement._generic import AppIntent, generic_candidates
from devplace.placement._hpa import Consumer, hpa_candidates
from devplace.placement._inventory import ClusterInventory
from devplace.queues import wait_event_until


@dataclass(frozen=True)
class PlacementContext:
    """What every controller sees: the apps, the fleet's inventories, and the intents of the deployment intent group."""

    apps: tuple[str, ...]
    clusters: tuple[ClusterInventory, ...]
    app_intents: tuple[AppIntent, ...] = ()
    consumers: tuple[Consumer, ...] = ()
    manifests: Mapping[str, tuple[dict[str, Any], ...]] = field(default_factory=dict)


class PlacementController(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def timeout(self) -> float: ...

    async def candidates(self, context: PlacementContext) -> Mapping[str, Candidate]: ...


@dataclass(frozen=True)
class GenericPlacement:
    name: str = "generic"
    timeout: float = 10.0

    async def candidates(self, context: PlacementContext) -> Mapping[str, Candidate]:
        return await asyncio.to_thread(generic_candidates, context.app_intents, context.clusters)


@dataclass(frozen=True)
class HpaPlacement:
    name: str = "hpa"
    timeout: float = 10.0

    async def candidates(self, context: PlacementContext) -> Mapping[str, Candidate]:
        return await asyncio.to_thread(hpa_candidates, context.consumers, context.clusters)


_REGISTERED: list[PlacementController] = []


def register(controller: PlacementController) -> None:
    """Add a controller to those `default_controllers` returns (replacing one of the same name)."""
    _REGISTERED[:] = [c for c in _REGISTERED if c.name != controller.name]
    _REGISTERED.append(controller)


def default_controllers() -> list[PlacementController]:
    builtin: list[PlacementController] = [GenericPlacement(), HpaPlacement()]
    names = {c.name for c in _REGISTERED}
    return [c for c in builtin if c.name not in names] + list(_REGISTERED)


async def _run_one(controller: PlacementController, context: PlacementContext, clock: Clock) -> Outcome:
    deadline = clock.now() + controller.timeout
    work = asyncio.ensure_future(controller.candidates(context))
    finished = asyncio.Event()
    work.add_done_callback(lambda _: finished.set())
    try:
        await wait_event_until(finished, clock, deadline)
    except asyncio.CancelledError:
        work.cancel()
        raise
    if not work.done():
        work.cancel()
        return Outcome(controller.name, error=f"timed out after {controller.timeout:g} s")
    if work.cancelled():
        return Outcome(controller.name, error="cancelled")
    exc = work.exception()
    if exc is not None:
        return Outcome(controller.name, error=f"{type(exc).__name__}: {exc}")
    return Outcome(controller.name, dict(work.result()))


async def run_controllers(
    controllers: Sequence[PlacementController], context: PlacementContext, clock: Clock
) -> list[Outcome]:
    """Every controller concurrently; outcomes in the controllers' order."""
    return list(await asyncio.gather(*(_run_one(c, context, clock) for c in controllers)))
