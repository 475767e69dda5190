"""`devplace handler nvml`: the `nvml` discovery handler as its own process, speaking Akri's discovery protocol.

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
from typing import Annotated

import typer

from devplace.cli._agents import registration_socket_path
from devplace.cli._daemons import LogLevelOption, configure_logging, serve
from devplace.cli._resources import fail, run

handler_app = typer.Typer(
    name="handler",
    help="Run a built-in discovery handler as its own process (Akri's discovery-handler protocol).",
    no_args_is_help=True,
)


@handler_app.command("nvml")
def nvml(
    registration_socket: Annotated[
        Path | None,
        typer.Option(
            "--registration-socket",
            help="The agent's Registration socket "
            "[default: $DISCOVERY_HANDLERS_DIRECTORY/agent-registration.sock, /var/lib/akri/...]",
        ),
    ] = None,
    socket_dir: Annotated[
        Path | None,
        typer.Option("--socket-dir", help="Serve on <DIR>/nvml.sock [default: the registration socket's directory]"),
    ] = None,
    fake_nvml: Annotated[
        Path | None,
        typer.Option("--fake-nvml", help="Answer from this NVML capture (nvml.json) instead of the library"),
    ] = None,
    wait_timeout: Annotated[
        float, typer.Option("--wait-timeout", help="Seconds each NVML event wait blocks", min=0.01, max=60)
    ] = 1.0,
    log_level: LogLevelOption = "info",
) -> None:
    """Discover NVIDIA GPUs through NVML and serve them to an agent over Akri's discovery protocol."""
    configure_logging(log_level)
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


def register(app: typer.Typer) -> None:
    app.add_typer(handler_app)
