"""`devplace agent`: run the node agent for one node until SIGTERM or Ctrl-C.

The agent uses the real kubelet layout under `--kubelet-dir` (default /var/lib/kubelet): it serves its device plugins
in `device-plugins/`, registers them with `device-plugins/kubelet.sock`, and lists `pod-resources/kubelet.sock` to
release slots. Discovery handlers: the built-in debugEcho, plus external Akri handlers when `--registration-socket`
is given (they register there, as with Akri's agent). Time is the system clock.

Shutdown: the first SIGTERM/SIGINT stops the agent (plugin sockets removed, store state kept: held slots survive a
restart) and closes the store; the exit code is 0. A loop that fails for good (`await agent.failed()`) stops it the
same way with exit code 1, so its process manager restarts it (`devplace.cli.daemons.serve`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from devplace.api import names
from devplace.cli.daemons import LogLevelOption, configure_logging, serve
from devplace.cli.resources import StoreOption, run, store_url
from devplace.clocks import SystemClock
from devplace.deviceplugin import DEFAULT_KUBELET_DIR

__all__ = ["register"]


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
    log_level: LogLevelOption = "info",
) -> None:
    """Run the node agent: discover devices, keep Instances, serve IL/CL device plugins, release slots."""
    url = store_url(ctx, store)
    configure_logging(log_level)

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
        daemon = Agent(config, st, builtin_registry(node, clock=clock), clock)

        async def stop() -> None:
            try:
                await daemon.stop()
            finally:
                await st.close()

        return await serve(
            "agent",
            start=daemon.start,
            stop=stop,
            failed=daemon.failed,
            banner=f"node {node}, store {url}, kubelet dir {kubelet_dir}, prefix {resource_prefix}",
        )

    run(work)


def register(app: typer.Typer) -> None:
    app.command()(agent)
