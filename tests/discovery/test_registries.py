"""A node starts with debugEcho, plus `sim` when it lives in a simulated world."""

from __future__ import annotations

from pathlib import Path

from devplace.clocks import FakeClock
from devplace.discovery import Device, World, builtin_registry
from devplace.discovery._debugecho import DebugEchoHandler
from devplace.discovery._worlds import SimHandler

from .streams import next_of


def test_builtin_registry_without_world_has_only_debug_echo(tmp_path: Path, clock: FakeClock) -> None:
    registry = builtin_registry("node-a", offline_file=tmp_path / "avail", clock=clock)
    assert registry.names() == ["debugEcho"]
    handler = registry.get("debugEcho")
    assert isinstance(handler, DebugEchoHandler)
    assert handler.offline_file == tmp_path / "avail"


async def test_builtin_registry_with_world_serves_that_nodes_devices() -> None:
    world = World()
    world.plug("cam-1", ["node-b"], {"kind": "camera"})
    registry = builtin_registry("node-b", world=world)
    assert registry.names() == ["debugEcho", "sim"]
    sim = registry.get("sim")
    assert isinstance(sim, SimHandler)
    stream = sim.discover("")
    assert await next_of(stream) == [Device("cam-1", {"kind": "camera"})]
    await stream.aclose()
