"""The registry a node starts with: its built-in handlers (debugEcho; `sim` when the node lives in a World; `nvml`
when the agent runs it, `devplace agent` unless `--no-nvml`; `udev` likewise, unless `--no-udev`; `opcua`, unless
`--no-opcua`; `onvif`, unless `--no-onvif`)."""

from __future__ import annotations

from pathlib import Path

from devplace.clocks import Clock
from devplace.discovery._debugecho import DebugEchoHandler
from devplace.discovery._handlers import DiscoveryHandler, HandlerRegistry
from devplace.discovery._worlds import World


def builtin_registry(
    node: str,
    *,
    world: World | None = None,
    offline_file: Path | None = None,
    clock: Clock | None = None,
    debug_echo_shared: bool = True,
    gpus: DiscoveryHandler | None = None,
    udev: DiscoveryHandler | None = None,
    opcua: DiscoveryHandler | None = None,
    onvif: DiscoveryHandler | None = None,
) -> HandlerRegistry:
    """A registry for `node` holding debugEcho (OFFLINE switch: `offline_file`, polled through `clock`; its devices
    shared unless the details say otherwise when `debug_echo_shared`) and, if `world` is given, the `sim` handler
    reporting the devices plugged into `node`, and `gpus` (the `nvml` handler, `GpuHandler`) and `udev` (`UdevHandler`)
    and `opcua` (`OpcuaHandler`) and `onvif` (`OnvifHandler`) when given."""
    registry = HandlerRegistry(node)
    registry.add(DebugEchoHandler(offline_file=offline_file, clock=clock, shared=debug_echo_shared))
    if world is not None:
        registry.add(world.handler(node))
    if gpus is not None:
        registry.add(gpus)
    if udev is not None:
        registry.add(udev)
    if opcua is not None:
        registry.add(opcua)
    if onvif is not None:
        registry.add(onvif)
    return registry
