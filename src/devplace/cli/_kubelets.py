"""`devplace kubelet-sim`: the simulated kubelet of one node as its own process, so every part of a cluster can run
as a separate daemon against one API server (`devplace server`, `controller`, `scheduler`, and per node `agent` +
`kubelet-sim`), as on real machines.

It is `devplace.sim.SimKubelet` over the system clock: it serves the kubelet's sockets under `--kubelet-dir`
(`device-plugins/kubelet.sock` for plugin Registration, `pod-resources/kubelet.sock` for PodResources), keeps its
Node in the store (capacity and allocatable of the plugins registered now, written at most every
`--node-status-interval` seconds), watches the Pods bound to it (`spec.nodeName`, filtered on the server) and admits
them: Allocate on the plugins they ask for, then `Running` or `Failed` with the kubelet's reason. Point `devplace
agent --kubelet-dir` at the same directory.

What other processes can audit: a Running pod's `status.containerStatuses[].allocatedResourcesStatus` names, per
resource, the device IDs Allocate succeeded for (for an Instance-level resource, the slot names), written by CAS with
the Running phase. Pair it with the Instances' `deviceUsage` history: every slot a Running pod names was claimed by its
node. A restarted kubelet-sim takes those devices back from the pods' status (a real kubelet reads its checkpoint
file), so agents do not release slots still held by running pods.

Shutdown as the other daemons (`devplace.cli._serves.serve`): the first SIGTERM/SIGINT stops serving (both sockets
removed; the Node and pod statuses are left in the store) and exits 0; a loop that fails for good exits 1. A node
whose kubelet died is not marked NotReady by anyone here: that is the node lifecycle controller's job, which devplace
does not run (mark it, or delete the Node, to let the controller fail its brokers over).

    devplace kubelet-sim --node node-a --kubelet-dir /tmp/node-a --store http://127.0.0.1:8080
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from devplace.api import require_dns1123_subdomain
from devplace.cli._daemons import LogFormatOption, LogLevelOption, configure_logging
from devplace.cli._resources import StoreOption, open_cli_store, run, store_url
from devplace.cli._serves import serve
from devplace.clocks import SystemClock
from devplace.deviceplugin import DEFAULT_KUBELET_DIR

DEVICE_ORDERS = ("random", "sorted")


def kubelet_sim(
    ctx: typer.Context,
    node: Annotated[str, typer.Option("--node", help="This node's name (its Node object)", envvar="NODE_NAME")],
    store: StoreOption = None,
    kubelet_dir: Annotated[
        Path, typer.Option("--kubelet-dir", help="Where to serve device-plugins/ and pod-resources/ sockets")
    ] = Path(DEFAULT_KUBELET_DIR),
    node_status_interval: Annotated[
        float,
        typer.Option("--node-status-interval", help="Least seconds between two writes of the Node's status", min=0),
    ] = 1.0,
    device_order: Annotated[
        str,
        typer.Option("--device-order", help="Free devices offered without a plugin preference: random or sorted"),
    ] = "random",
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
) -> None:
    """Run a simulated kubelet: device plugin Registration and PodResources, its Node, and admission of its Pods."""
    url = store_url(ctx, store)
    configure_logging(log_level, log_format)
    if device_order not in DEVICE_ORDERS:
        raise typer.BadParameter(
            f"{device_order!r} is not one of {', '.join(DEVICE_ORDERS)}", param_hint="--device-order"
        )

    async def work() -> int:
        from devplace.sim import SimKubelet

        require_dns1123_subdomain("--node", node)
        clock = SystemClock()
        st = open_cli_store(ctx, url, clock=clock)
        kubelet = SimKubelet(
            node,
            kubelet_dir,
            st,
            clock,
            device_order="sorted" if device_order == "sorted" else "random",
            node_status_interval=node_status_interval,
            recover=True,  # a restarted process takes its Running pods' devices back from their status
        )

        async def stop() -> None:
            try:
                await kubelet.stop()
            finally:
                await st.close()

        return await serve(
            "kubelet-sim",
            start=kubelet.start,
            stop=stop,
            failed=kubelet.supervisor.failed,
            banner=f"node {node}, store {url}, kubelet dir {kubelet_dir}",
        )

    run(work)


def register(app: typer.Typer) -> None:
    app.command("kubelet-sim")(kubelet_sim)
