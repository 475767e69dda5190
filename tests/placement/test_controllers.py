"""Running placement controllers: concurrently, each under its own timeout (on the injected clock)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from devplace.clocks import FakeClock
from devplace.placement import _controllers as controllers
from devplace.placement._candidates import Candidate
from devplace.placement._controllers import (
    GenericPlacement,
    HpaPlacement,
    PlacementContext,
    default_controllers,
    register,
    run_controllers,
)

CONTEXT = PlacementContext(apps=("web",), clusters=())


@dataclass(frozen=True)
class Stuck:
    name: str = "stuck"
    timeout: float = 2.0

    async def candidates(self, context: PlacementContext) -> Mapping[str, Candidate]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class Broken:
    name: str = "broken"
    timeout: float = 2.0

    async def candidates(self, context: PlacementContext) -> Mapping[str, Candidate]:
        raise RuntimeError("no inventory")


@dataclass(frozen=True)
class Fixed:
    name: str = "fixed"
    timeout: float = 2.0

    async def candidates(self, context: PlacementContext) -> Mapping[str, Candidate]:
        return {"web": Candidate("web", 1, deny=frozenset())}


async def test_a_controller_past_its_timeout_is_reported_and_the_others_still_answer(clock: FakeClock) -> None:
    task = asyncio.create_task(run_controllers([Fixed(), Stuck()], CONTEXT, clock))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()
    await clock.advance(1.9)
    assert not task.done()
    await clock.advance(0.2)
    fixed, stuck = await task
    assert fixed.error is None
    assert fixed.candidates == {"web": Candidate("web", 1, deny=frozenset())}
    assert stuck.error == "timed out after 2 s"


async def test_a_controller_that_raises_is_reported_with_its_error(clock: FakeClock) -> None:
    (outcome,) = await run_controllers([Broken()], CONTEXT, clock)
    assert (outcome.controller, outcome.error) == ("broken", "RuntimeError: no inventory")


async def test_the_builtin_controllers_run_in_worker_threads(clock: FakeClock) -> None:
    generic, hpa = await run_controllers([GenericPlacement(), HpaPlacement()], CONTEXT, clock)
    assert (generic.error, hpa.error) == (None, None)
    assert (dict(generic.candidates), dict(hpa.candidates)) == ({}, {})


def test_more_controllers_can_register() -> None:
    register(Fixed())
    try:
        assert [c.name for c in default_controllers()] == ["generic", "hpa", "fixed"]
        register(Fixed(timeout=5.0))
        assert [c.timeout for c in default_controllers() if c.name == "fixed"] == [5.0]
    finally:
        controllers._REGISTERED.clear()
    assert [c.name for c in default_controllers()] == ["generic", "hpa"]
