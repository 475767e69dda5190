"""`devplace agent` once its options are parsed and checked: the node agent's process, without the CLI application.

`devplace agent` (`_agents`) parses and checks its options with typer; when it is the process's program (`devplace
agent`, `python -m devplace.cli agent`: `_app.main`), it then replaces itself (exec: same PID, same descriptors and
environment) with `python -m devplace.cli._agentruns`, handing the checked options over in `$DEVPLACE_AGENT_RUN`
(JSON, `AgentRun`), which the new image takes out of `os.environ` (its children do not inherit it). The agent so
runs for its whole life in a process that never built typer's option parsers (typer 0.29 builds a pydantic
TypeAdapter for each of the command's thirty options) nor loaded the other commands, and that imports nothing that
loads pydantic (`devplace.api`'s plain modules, the agent's own parse of what it reads: `agent._configurations`).
`bench/footprint.py`, an idle agent with three devices: 62.7-62.8 MiB parsed in place, 46.5-46.6 MiB re-executed (stop
41; uvloop, the default loop since stop 42, adds 1.7 MiB).

Interpreter options (`-X`, `-W`) are not carried over; the environment is. Called from Python (tests through
typer's CliRunner), the command runs the agent in the calling process (`serve_agent`) and nothing is executed.
A `$DEVPLACE_AGENT_RUN` that is missing or not an `AgentRun` (this module run by hand) is refused in one `error:`
line naming the field, exit code 2, before anything starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

from devplace import errors
from devplace.api import DEVICE_PATHS, DevicePaths
from devplace.cli._logs import announce, configure_logging
from devplace.cli._probes import Health, maybe_open
from devplace.cli._serves import serve
from devplace.clocks import SystemClock

RUN_VARIABLE = "DEVPLACE_AGENT_RUN"

EventLoop = Literal["uvloop", "asyncio"]
"""The event loop the agent's process runs on (`--event-loop`): uvloop (libuv), or the standard library's."""

EVENT_LOOPS: tuple[EventLoop, ...] = ("uvloop", "asyncio")


@dataclass(frozen=True)
class AgentRun:
    """What `devplace agent` decided from its flags, environment and config file: everything the agent needs."""

    store: str
    node: str
    kubelet_dir: str
    resource_prefix: str | None
    release_grace: float
    offline_grace: float
    podresources_poll: float
    registration_socket: str | None
    """Where external handlers register; None: nowhere (a default path that cannot be served)."""
    dra: bool | None
    cdi_dir: str
    device_paths: DevicePaths
    nvml: bool
    udev: bool
    opcua: bool
    opcua_interval: float
    onvif: bool
    debug_echo_availability_file: str
    debug_echo_shared: bool
    log_level: str
    log_format: str
    metrics_port: int | None
    metrics_address: str
    event_loop: EventLoop

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AgentRun:
        """Parse what `to_json` wrote; `errors.Invalid` names the first field that is missing or of the wrong type."""
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise errors.Invalid.field(RUN_VARIABLE, f"not JSON: {e}") from e
        if not isinstance(raw, dict):
            raise errors.Invalid.field(RUN_VARIABLE, "not a JSON object")
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            if field.name not in raw:
                raise errors.Invalid.field(f"{RUN_VARIABLE}.{field.name}", "required")
            value = raw[field.name]
            if not _typed(value, str(field.type)):
                raise errors.Invalid.field(f"{RUN_VARIABLE}.{field.name}", f"{value!r} is not a {field.type}")
            values[field.name] = float(value) if str(field.type) == "float" else value
        unknown = sorted(set(raw) - set(values))
        if unknown:
            raise errors.Invalid.field(f"{RUN_VARIABLE}.{unknown[0]}", "unknown field")
        return cls(**values)


def _typed(value: Any, annotation: str) -> bool:
    """Whether a JSON value fits a field annotated `annotation` (the annotations `AgentRun` uses)."""
    if value is None:
        return annotation.endswith("| None")
    base = annotation.removesuffix(" | None")
    if base == "bool":
        return isinstance(value, bool)
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if base == "DevicePaths":
        return value in DEVICE_PATHS
    if base == "EventLoop":
        return value in EVENT_LOOPS
    return base == "str" and isinstance(value, str)


def reexec(run: AgentRun) -> NoReturn:
    """Become `python -m devplace.cli._agentruns` running `run` (module docstring); returns only by raising OSError."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", __name__], {**os.environ, RUN_VARIABLE: run.to_json()})


async def serve_agent(run: AgentRun) -> int:
    """Run the agent `run` describes until SIGTERM/SIGINT (0) or a loop failing for good (1): `_serves.serve`."""
    from devplace.agent import Agent, AgentConfig
    from devplace.discovery import (
        GpuHandler,
        OnvifHandler,
        OpcuaHandler,
        Pynvml,
        UdevHandler,
        builtin_registry,
        xid_policy,
    )
    from devplace.store import open_store

    policy = xid_policy(dict(os.environ))  # checked by the command already: the same environment
    serving = None if run.registration_socket is None else Path(run.registration_socket)
    config = AgentConfig(
        node=run.node,
        kubelet_dir=Path(run.kubelet_dir),
        resource_prefix=run.resource_prefix,
        release_grace=run.release_grace,
        offline_grace=run.offline_grace,
        podresources_poll=run.podresources_poll,
        registration_socket=serving,
        dra=run.dra,
        cdi_dir=Path(run.cdi_dir),
        device_paths=run.device_paths,
    )
    clock = SystemClock()
    st = open_store(run.store, clock=clock)
    gpus = GpuHandler(Pynvml(), policy=policy) if run.nvml else None
    udevs = UdevHandler() if run.udev else None
    opcuas = OpcuaHandler(clock=clock, interval=run.opcua_interval) if run.opcua else None
    cameras = OnvifHandler(clock=clock) if run.onvif else None
    registry = builtin_registry(
        run.node,
        offline_file=Path(run.debug_echo_availability_file),
        clock=clock,
        debug_echo_shared=run.debug_echo_shared,
        gpus=gpus,
        udev=udevs,
        opcua=opcuas,
        onvif=cameras,
    )
    daemon = Agent(config, st, registry, clock)
    health = Health(st, [st])
    endpoint = await maybe_open(run.metrics_address, run.metrics_port, health, "agent")

    async def stop() -> None:
        try:
            await daemon.stop()
            if endpoint is not None:
                await endpoint.close()
        finally:
            try:
                if gpus is not None:
                    await gpus.close()
            finally:
                await st.close()

    prefix = run.resource_prefix or "each Configuration's group"
    dra = "auto" if run.dra is None else "on" if run.dra else "off"
    return await serve(
        "agent",
        start=daemon.start,
        stop=stop,
        failed=daemon.failed,
        health=health,
        banner=f"node {run.node}, store {run.store}, kubelet dir {run.kubelet_dir}, prefix {prefix}, "
        f"handlers register at {run.registration_socket or 'nowhere'}, nvml {_on(run.nvml)}, "
        f"udev {_on(run.udev)}, opcua {_on(run.opcua)}, onvif {_on(run.onvif)}, DRA {dra}, "
        f"device paths {run.device_paths}",
    )


def loop_factory(name: EventLoop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """What makes the agent process's event loop (None: the standard library's).

    uvloop by default: an agent's work is many small wake-ups (a watch event of every Instance it sees, a
    ListAndWatch send, a gRPC completion), and uvloop's transports, callbacks and timers cost less of each.
    `bench/distributed.py` (10 agents, 100 claims/s): 0.426 ms of agent CPU per Instance change on asyncio's loop,
    0.405 on uvloop's, interleaved on the 2-core machine (2026-11-27)."""
    if name == "uvloop":
        import uvloop  # only here: the in-place agent of tests and the other daemons keep asyncio's loop

        return uvloop.new_event_loop
    return None


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def main() -> None:
    """The re-executed image's entry: read `$DEVPLACE_AGENT_RUN`, run the agent, exit with its code."""
    text = os.environ.pop(RUN_VARIABLE, None)
    try:
        if text is None:
            raise errors.Invalid.field(RUN_VARIABLE, "required (this module is what `devplace agent` becomes)")
        run = AgentRun.from_json(text)
    except errors.Invalid as e:
        announce(f"error: {e.message}", error=True)
        sys.exit(2)
    configure_logging(run.log_level, run.log_format)
    try:
        with asyncio.Runner(loop_factory=loop_factory(run.event_loop)) as runner:
            code = runner.run(serve_agent(run))
    except errors.DevplaceError as e:
        announce(f"error: {e.message}", error=True)
        code = 1
    except OSError as e:
        announce(f"error: {e}", error=True)
        code = 1
    except KeyboardInterrupt:
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    main()
