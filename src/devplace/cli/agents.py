"""`devplace agent`: run the node agent for one node until SIGTERM or Ctrl-C.

The agent uses the real kubelet layout under `--kubelet-dir` (default /var/lib/kubelet): it serves its device plugins
in `device-plugins/`, registers them with `device-plugins/kubelet.sock`, and lists `pod-resources/kubelet.sock` to
release slots. Discovery handlers: the built-in debugEcho, plus external Akri handlers when `--registration-socket`
is given (they register there, as with Akri's agent). Time is the system clock.

Shutdown: the first SIGTERM/SIGINT stops the agent (plugin sockets removed, store state kept: held slots survive a
restart) and closes the store; the exit code is 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path
from typing import Annotated

import typer

from devplace.api import names
from devplace.cli.resources import StoreOption, run, store_url
from devplace.clocks import SystemClock
from devplace.deviceplugin import DEFAULT_KUBELET_DIR

__all__ = ["agent", "register"]


def agent(
    ctx: typer.Context,
    node: Annotated[str, typer.Option("--node", help="This node's name (as in Pod spec.nodeName)", envvar="NODE_NAME")],
    store: StoreOption = None,
    kubelet_dir: Annotated[
        Path, typer.Option("--kubelet-dir", help="The kubelet's directory (device-plugins/, pod-resources/)")
    ] = Path(DEFAULT_KUBELET_DIR),
    resource_prefix: Annotated[
        str, typer.Option("--resource-prefix", help="Extended resource prefix (akri.sh for Akri compatibility)")
    ] = "devplace.io",
    release_grace: Annotated[
        float, typer.Option("--release-grace", help="Seconds a held slot may be absent from PodResources", min=0)
    ] = 300.0,
    offline_grace: Annotated[
        float, typer.Option("--offline-grace", help="Seconds a shared Instance nobody sees is kept", min=0)
    ] = 300.0,
    podresources_poll: Annotated[
        float, typer.Option("--podresources-poll", help="Seconds between PodResources listings", min=0.1)
    ] = 10.0,
    registration_socket: Annotated[
        Path | None,
        typer.Option("--registration-socket", help="Serve Akri's discovery-handler Registration on this socket"),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="critical, error, warning, info or debug")] = "info",
) -> None:
    """Run the node agent: discover devices, keep Instances, serve IL/CL device plugins, release slots."""
    url = store_url(ctx, store)
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise typer.BadParameter(
            f"{log_level!r} is not one of critical, error, warning, info, debug", param_hint="--log-level"
        )
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def work() -> int:
        from devplace.agent import Agent, AgentConfig  # the agent and gRPC load only for this command
        from devplace.discovery import builtin_registry
        from devplace.store import open_store

        names.require_dns1123_subdomain("--node", node)
        names.require_dns1123_subdomain("--resource-prefix", resource_prefix)
        config = AgentConfig(
            node=node,
            kubelet_dir=kubelet_dir,
            resource_prefix=resource_prefix,
            release_grace=release_grace,
            offline_grace=offline_grace,
            podresources_poll=podresources_poll,
            registration_socket=registration_socket,
        )
        clock = SystemClock()
        st = open_store(url, clock=clock)
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stopping.set)
        daemon = Agent(config, st, builtin_registry(node, clock=clock), clock)
        try:
            await daemon.start()
            typer.echo(
                f"devplace agent: node {node}, store {url}, kubelet dir {kubelet_dir}, prefix {resource_prefix}",
                err=True,
            )
            await stopping.wait()
        finally:
            await daemon.stop()
            await st.close()
        typer.echo("devplace agent: stopped", err=True)
        return 0

    run(work)


def register(app: typer.Typer) -> None:
    app.command()(agent)
