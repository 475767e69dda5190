"""`devplace handler nvml|udev|opcua|onvif`: a built-in discovery handler as its own process, over Akri's protocol.

`devplace handler udev` serves the `udev` handler (`devplace.discovery._udev`: Akri's udevRules over libudev, udev
events for hot-plug), registered as `udev`, not shared, with the same options as below but `--fake-nvml` and
`--wait-timeout`. It needs the host's `/sys`, `/dev`, `/run/udev` and network namespace (udev's netlink events).

`devplace handler opcua` serves the `opcua` handler (`devplace.discovery._opcua`: OPC UA servers through FindServers,
Akri's standard discovery), registered as `opcua`, shared, with `--registration-socket` and `--socket-dir` as below,
`--interval` (seconds between FindServers rounds, 10 as Akri's) and `--timeout` (seconds each discovery URL's exchange
may take, 5). It needs to reach the discovery URLs (host network for `opc.tcp://localhost:4840/`).

`devplace handler onvif` serves the `onvif` handler (`devplace.discovery._onvif`: ONVIF cameras by WS-Discovery, as
Akri's ONVIF handler finds them), registered as `onvif`, shared, with `--registration-socket` and `--socket-dir` as
below and `--interval` (seconds between probes, 10 as Akri's). Its multicast probe needs the node's network: on
Kubernetes `deploy/kubernetes/onvif-handler.yaml` (hostNetwork), and the agent with `--no-onvif`.

The same code as the handler `devplace agent` runs in-process (`devplace.discovery._gpus`), served over Akri's
protocol (`devplace.discovery._serving`): it registers with an agent's Registration socket (devplace's, or Akri's)
as `nvml`, not shared, and streams the node's GPUs to every Discover. Run it where the NVIDIA driver is (on
Kubernetes: `deploy/kubernetes/gpu-handler.yaml`, with NVIDIA's runtime class), and the agent with `--no-nvml`.

- `--registration-socket` defaults to `$DISCOVERY_HANDLERS_DIRECTORY/agent-registration.sock` (Akri's variable;
  /var/lib/akri when unset); the handler serves on `<--socket-dir>/nvml.sock`, the same directory by default.
- NVML is read once at start, in one log line (the GPUs, or why there are none: no library, no driver, no GPU; the
  process then serves an empty list rather than exit, so nothing restarts it in a loop); then only watched.
- Health: `DP_DISABLE_HEALTHCHECKS` / `DP_ENABLE_HEALTHCHECKS` as for NVIDIA's device plugin. An Unhealthy GPU stays
  so until SIGHUP (after the operator reset the GPU): NVML is read afresh and every GPU starts Healthy again.
- `--fake-nvml CAPTURE` answers from an NVML capture (`nvml.json`) instead of the library (tests, dry runs).
SIGTERM/SIGINT stop it (socket removed), exit code 0.

    devplace handler nvml --registration-socket /var/lib/akri/agent-registration.sock
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from devplace.cli._agents import registration_socket_path
from devplace.cli._daemons import LogFormatOption, LogLevelOption, configure_logging
from devplace.cli._resources import fail, run
from devplace.cli._serves import serve

if TYPE_CHECKING:
    from devplace.discovery import HandlerServer

handler_app = typer.Typer(
    name="handler",
    help="Run a built-in discovery handler as its own process (Akri's discovery-handler protocol).",
    no_args_is_help=True,
)


RegistrationSocketOption = Annotated[
    Path | None,
    typer.Option(
        "--registration-socket",
        help="The agent's Registration socket "
        "[default: $DISCOVERY_HANDLERS_DIRECTORY/agent-registration.sock, /var/lib/akri/...]",
    ),
]
SocketDirOption = Annotated[
    Path | None,
    typer.Option("--socket-dir", help="Serve on <DIR>/<handler>.sock [default: the registration socket's directory]"),
]


@handler_app.command("nvml")
def nvml(
    registration_socket: RegistrationSocketOption = None,
    socket_dir: SocketDirOption = None,
    fake_nvml: Annotated[
        Path | None,
        typer.Option("--fake-nvml", help="Answer from this NVML capture (nvml.json) instead of the library"),
    ] = None,
    wait_timeout: Annotated[
        float, typer.Option("--wait-timeout", help="Seconds each NVML event wait blocks", min=0.01, max=60)
    ] = 1.0,
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
) -> None:
    """Discover NVIDIA GPUs through NVML and serve them to an agent over Akri's discovery protocol."""
    configure_logging(log_level, log_format)
    environ = dict(os.environ)
    socket, _ = registration_socket_path(registration_socket, environ)
    directory = socket_dir or socket.parent

    from devplace import errors
    from devplace.discovery import xid_policy

    try:
        policy = xid_policy(environ)
    except errors.Invalid as e:
        raise fail(e.message) from None

    async def work() -> int:
        from devplace.discovery import FakeNvml, GpuHandler, HandlerServer, Nvml, Pynvml

        library: Nvml = Pynvml() if fake_nvml is None else FakeNvml.from_file(fake_nvml)
        handler = GpuHandler(library, policy=policy, wait_timeout=wait_timeout)
        server = HandlerServer(handler, directory, socket, shared=False)
        stopping = asyncio.Event()
        failure: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
        serving: asyncio.Task[None] | None = None
        loop = asyncio.get_running_loop()

        resets: set[asyncio.Task[None]] = set()

        def reset() -> None:
            task = loop.create_task(handler.reset(), name="nvml-reset")
            resets.add(task)
            task.add_done_callback(resets.discard)

        def ended(task: asyncio.Task[None]) -> None:
            if not task.cancelled() and task.exception() is not None and not failure.done():
                failure.set_result(task.exception() or RuntimeError("stopped"))

        async def start() -> None:
            nonlocal serving
            await handler.start()
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signal.SIGHUP, reset)
            serving = asyncio.create_task(server.run(stopping), name="nvml-serve")
            serving.add_done_callback(ended)

        async def stop() -> None:
            stopping.set()
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGHUP)
            if serving is not None:
                with contextlib.suppress(Exception):
                    await serving
            await handler.close()

        async def failed() -> BaseException:
            return await failure

        where = "NVML" if fake_nvml is None else f"the capture {fake_nvml}"
        return await serve(
            "handler nvml",
            start=start,
            stop=stop,
            failed=failed,
            banner=f"GPUs from {where}, serving {server.socket_path}, registering at {socket}",
        )

    run(work)


async def _serve_handler(command: str, server: HandlerServer, banner: str) -> int:
    """Serve one discovery handler over Akri's protocol until a signal, or until its server fails."""
    stopping = asyncio.Event()
    serving: asyncio.Task[None] | None = None
    failure: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()

    def ended(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None and not failure.done():
            failure.set_result(task.exception() or RuntimeError("stopped"))

    async def start() -> None:
        nonlocal serving
        serving = asyncio.create_task(server.run(stopping), name=f"{command}-serve")
        serving.add_done_callback(ended)

    async def stop() -> None:
        stopping.set()
        if serving is not None:
            with contextlib.suppress(Exception):
                await serving

    async def failed() -> BaseException:
        return await failure

    return await serve(f"handler {command}", start=start, stop=stop, failed=failed, banner=banner)


@handler_app.command("udev")
def udev(
    registration_socket: RegistrationSocketOption = None,
    socket_dir: SocketDirOption = None,
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
) -> None:
    """Discover local devices by Akri's udevRules through libudev and serve them over Akri's discovery protocol."""
    configure_logging(log_level, log_format)
    socket, _ = registration_socket_path(registration_socket, dict(os.environ))
    directory = socket_dir or socket.parent

    async def work() -> int:
        from devplace.discovery import HandlerServer, UdevHandler

        server = HandlerServer(UdevHandler(), directory, socket, shared=False)
        banner = f"udev devices, serving {server.socket_path}, registering at {socket}"
        return await _serve_handler("udev", server, banner)

    run(work)


@handler_app.command("opcua")
def opcua(
    registration_socket: RegistrationSocketOption = None,
    socket_dir: SocketDirOption = None,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between FindServers rounds (Akri's: 10)", min=0.05)
    ] = 10.0,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds each discovery URL's FindServers exchange may take", min=0.1)
    ] = 5.0,
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
) -> None:
    """Discover OPC UA servers through FindServers and serve them to an agent over Akri's discovery protocol."""
    configure_logging(log_level, log_format)
    socket, _ = registration_socket_path(registration_socket, dict(os.environ))
    directory = socket_dir or socket.parent

    async def work() -> int:
        from devplace.discovery import HandlerServer, OpcuaHandler

        server = HandlerServer(OpcuaHandler(interval=interval, timeout=timeout), directory, socket, shared=True)
        banner = f"OPC UA servers every {interval:g} s, serving {server.socket_path}, registering at {socket}"
        return await _serve_handler("opcua", server, banner)

    run(work)


@handler_app.command("onvif")
def onvif(
    registration_socket: RegistrationSocketOption = None,
    socket_dir: SocketDirOption = None,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between WS-Discovery probes (Akri's: 10)", min=0.05)
    ] = 10.0,
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
) -> None:
    """Discover ONVIF cameras by WS-Discovery and serve them to an agent over Akri's discovery protocol."""
    configure_logging(log_level, log_format)
    socket, _ = registration_socket_path(registration_socket, dict(os.environ))
    directory = socket_dir or socket.parent

    async def work() -> int:
        from devplace.discovery import HandlerServer, OnvifHandler

        server = HandlerServer(OnvifHandler(interval=interval), directory, socket, shared=True)
        banner = f"ONVIF cameras every {interval:g} s, serving {server.socket_path}, registering at {socket}"
        return await _serve_handler("onvif", server, banner)

    run(work)


def register(app: typer.Typer) -> None:
    app.add_typer(handler_app)
