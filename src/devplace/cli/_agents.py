"""`devplace agent`: run the node agent for one node until SIGTERM or Ctrl-C.

It runs in Akri's agent DaemonSet unchanged (deploy/kubernetes): it reads what Akri's agent reads, and needs no flag
of devplace's own there.
- The node is `$AGENT_NODE_NAME` (Akri's; the DaemonSet sets it from `spec.nodeName`), else `$NODE_NAME`, else
  `--node`.
- External discovery handlers register at `$DISCOVERY_HANDLERS_DIRECTORY/agent-registration.sock` (default
  `/var/lib/akri`, as Akri's), served always; `--registration-socket` overrides the path. A default path that cannot
  be served (no permission to create `/var/lib/akri`, say) is logged and the agent runs without external handlers;
  a path asked for (the variable or the flag) that cannot be served is an error.
- Extended resources are named `<group>/<instance>` and `<group>/<configuration>` after each Configuration's API
  group (`akri.sh` for `akri.sh/v0`, `devplace.io` for `devplace.io/v1alpha1`), as the controller and scheduler name
  them; `--resource-prefix` overrides the prefix for every Configuration (then give the controller the same).
- The built-in debugEcho always runs (Akri's `ENABLE_DEBUG_ECHO` is accepted and changes nothing): its devices are
  shared unless `$DEBUG_ECHO_INSTANCES_SHARED` is false (Akri's variable) or the details say otherwise, and Akri's
  availability file `/tmp/debug-echo-availability.txt` (`--debug-echo-availability-file`) takes every device away
  while it contains `OFFLINE`. An external debugEcho handler registering too is merged with it, as Akri merges
  handlers of one name.
- The built-in `nvml` handler (NVIDIA GPUs through NVML, `devplace.discovery._gpus`) runs unless `--no-nvml`: it
  touches NVML only when a Configuration names it, and on a node without the library or without GPUs reports none,
  in one log line. `DP_DISABLE_HEALTHCHECKS` / `DP_ENABLE_HEALTHCHECKS` tune which XIDs make a GPU Unhealthy, as for
  NVIDIA's device plugin; an Unhealthy GPU stays so until the agent restarts (NVML cannot clear an XID). Where
  `devplace handler nvml` runs as its own process (deploy/kubernetes/gpu-handler.yaml), pass `--no-nvml`.
- The built-in `udev` handler (Akri's `udevRules` over libudev, `devplace.discovery._udev`) runs unless `--no-udev`:
  it opens libudev only when a Configuration names it, and follows udev's events from then on. Where
  `devplace handler udev` runs as its own process, pass `--no-udev`.
- The built-in `opcua` handler (OPC UA servers through FindServers, `devplace.discovery._opcua`) runs unless
  `--no-opcua`: it asks the discovery URLs a Configuration names every `--opcua-interval` seconds (10, as Akri's).
  Where `devplace handler opcua` runs as its own process, pass `--no-opcua`.
- The built-in `onvif` handler (ONVIF cameras by WS-Discovery, `devplace.discovery._onvif`) runs unless `--no-onvif`:
  it probes only for a Configuration that names it, every 10 s as Akri's; its multicast probe needs the node's
  network (hostNetwork in a pod). Where `devplace handler onvif` runs as its own process, pass `--no-onvif`.
- Accepted and ignored: `HOST_CRICTL_PATH`, `HOST_RUNTIME_ENDPOINT`, `HOST_IMAGE_ENDPOINT` (Akri used crictl to find
  which slots are in use; devplace asks the kubelet's PodResources API instead).
The store is `--store`/`$DEVPLACE_STORE` (on a cluster: the API server devplace runs against).
`--device-paths` (default `both`) says how a Configuration without the `devplace.io/device-paths` annotation is
served (`api.device_paths`): a real cluster's pods go through kube-scheduler, which cannot see device-plugin slots,
so deploy/kubernetes runs the agent and the controller with `device-plugins` (`both` is for devplace's scheduler).

The agent uses the real kubelet layout under `--kubelet-dir` (`$DEVPLACE_KUBELET_DIR`, default /var/lib/kubelet, the
DaemonSet mounts its `device-plugins/` and `pod-resources/`): it serves its device plugins in `device-plugins/`,
registers them with `device-plugins/kubelet.sock`, and lists `pod-resources/kubelet.sock` to release slots. Time is
the system clock.

A store that does not answer at start (an API server not up yet, answering 5xx) is waited for: the agent retries its
first listing with backoff and logs each failure (`devplace.agent._agents`). A store that is misconfigured fails at
once, exit code 1 and one `error:` line: an unsupported URL, an SQLite file that cannot be opened (a missing
directory, no permission), a server that answers but is not a devplace API (404).

Shutdown: the first SIGTERM/SIGINT (also while waiting for the store) stops the agent (plugin sockets removed, store
state kept: held slots survive a restart) and closes the store; the exit code is 0. A loop that fails for good
(`await agent.failed()`) stops it the same way with exit code 1, so its process manager restarts it
(`devplace.cli._serves.serve`).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from devplace import errors
from devplace.api import require_dns1123_subdomain
from devplace.cli._agentruns import AgentRun, EventLoop, reexec, serve_agent
from devplace.cli._daemons import DevicePathsOption, configure_logging
from devplace.cli._options import LogFormatOption, LogLevelOption, MetricsAddressOption, MetricsPortOption
from devplace.cli._resources import StoreOption, fail, is_program, run, store_url
from devplace.deviceplugin import DEFAULT_KUBELET_DIR

log = logging.getLogger(__name__)

DISCOVERY_HANDLERS_DIRECTORY = "DISCOVERY_HANDLERS_DIRECTORY"
DEFAULT_DISCOVERY_HANDLERS_DIRECTORY = Path("/var/lib/akri")
REGISTRATION_SOCKET_NAME = "agent-registration.sock"
DEBUG_ECHO_SHARED = "DEBUG_ECHO_INSTANCES_SHARED"


def registration_socket_path(flag: Path | None, environ: dict[str, str]) -> tuple[Path, bool]:
    """Where external handlers register, and whether that path was asked for (flag or variable) or is the default."""
    if flag is not None:
        return flag, True
    directory = environ.get(DISCOVERY_HANDLERS_DIRECTORY)
    if directory:
        return Path(directory) / REGISTRATION_SOCKET_NAME, True
    return DEFAULT_DISCOVERY_HANDLERS_DIRECTORY / REGISTRATION_SOCKET_NAME, False


def debug_echo_shared(environ: dict[str, str]) -> bool:
    """`DEBUG_ECHO_INSTANCES_SHARED` as Akri's Helm chart writes it ("true"/"false"); unset: shared."""
    value = environ.get(DEBUG_ECHO_SHARED, "").strip().lower()
    if value in ("", "true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise typer.BadParameter(f"{DEBUG_ECHO_SHARED}={value!r} is neither true nor false", param_hint=DEBUG_ECHO_SHARED)


def usable_socket_dir(path: Path) -> str | None:
    """Why `path`'s directory cannot hold the registration socket (None: it can; it is created when missing)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"cannot create {path.parent}: {e.strerror}"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return f"cannot write to {path.parent}"
    return None


def agent(
    ctx: typer.Context,
    node: Annotated[
        str,
        typer.Option(
            "--node", help="This node's name (as in Pod spec.nodeName)", envvar=["AGENT_NODE_NAME", "NODE_NAME"]
        ),
    ],
    store: StoreOption = None,
    kubelet_dir: Annotated[
        Path,
        typer.Option(
            "--kubelet-dir",
            help="The kubelet's directory (device-plugins/, pod-resources/)",
            envvar="DEVPLACE_KUBELET_DIR",
        ),
    ] = Path(DEFAULT_KUBELET_DIR),
    resource_prefix: Annotated[
        str | None,
        typer.Option(
            "--resource-prefix",
            help="Extended resource prefix for every Configuration [default: each Configuration's API group]",
        ),
    ] = None,
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
        typer.Option(
            "--registration-socket",
            help="Serve Akri's discovery-handler Registration on this socket "
            "[default: $DISCOVERY_HANDLERS_DIRECTORY/agent-registration.sock, /var/lib/akri/...]",
        ),
    ] = None,
    debug_echo_availability_file: Annotated[
        Path,
        typer.Option("--debug-echo-availability-file", help="debugEcho reports nothing while this file says OFFLINE"),
    ] = Path("/tmp/debug-echo-availability.txt"),  # Akri's fixed path
    nvml: Annotated[
        bool,
        typer.Option("--nvml/--no-nvml", help="Run the built-in nvml handler (NVIDIA GPUs through NVML)"),
    ] = True,
    udev: Annotated[
        bool,
        typer.Option("--udev/--no-udev", help="Run the built-in udev handler (Akri's udevRules over libudev)"),
    ] = True,
    opcua: Annotated[
        bool,
        typer.Option("--opcua/--no-opcua", help="Run the built-in opcua handler (OPC UA servers through FindServers)"),
    ] = True,
    opcua_interval: Annotated[
        float,
        typer.Option("--opcua-interval", help="Seconds between the opcua handler's FindServers rounds", min=0.1),
    ] = 10.0,
    onvif: Annotated[
        bool,
        typer.Option("--onvif/--no-onvif", help="Run the built-in onvif handler (ONVIF cameras by WS-Discovery)"),
    ] = True,
    dra: Annotated[
        bool | None,
        typer.Option(
            "--dra/--no-dra",
            help="Serve the kubelet's DRA plugin API as driver devplace.io and publish this node's ResourceSlices "
            "[default: on when the store serves resource.k8s.io/v1]",
        ),
    ] = None,
    cdi_dir: Annotated[
        Path,
        typer.Option("--cdi-dir", help="Where the DRA plugin writes CDI spec files", envvar="DEVPLACE_CDI_DIR"),
    ] = Path("/var/run/cdi"),
    device_paths: DevicePathsOption = "both",
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
    metrics_port: MetricsPortOption = None,
    metrics_address: MetricsAddressOption = "127.0.0.1",
    event_loop: Annotated[
        EventLoop,
        typer.Option(
            "--event-loop",
            envvar="DEVPLACE_EVENT_LOOP",
            help="The event loop of the agent's process: uvloop, or asyncio (the standard library's)",
        ),
    ] = "uvloop",
) -> None:
    """Run the node agent: discover devices, keep Instances, serve IL/CL device plugins, release slots."""
    url = store_url(ctx, store)
    configure_logging(log_level, log_format)
    environ = dict(os.environ)
    shared = debug_echo_shared(environ)
    socket, asked = registration_socket_path(registration_socket, environ)
    from devplace.discovery import xid_policy

    try:
        xid_policy(environ)
        require_dns1123_subdomain("--node", node)
        if resource_prefix is not None:
            require_dns1123_subdomain("--resource-prefix", resource_prefix)
    except errors.Invalid as e:
        raise fail(e.message) from None
    problem = usable_socket_dir(socket)
    serving: Path | None = socket
    if problem is not None:
        if asked:
            raise fail(f"the discovery-handler registration socket {socket}: {problem}")
        log.warning("external discovery handlers cannot register at %s (%s); running without them", socket, problem)
        serving = None
    spec = AgentRun(
        store=url,
        node=node,
        kubelet_dir=str(kubelet_dir),
        resource_prefix=resource_prefix,
        release_grace=release_grace,
        offline_grace=offline_grace,
        podresources_poll=podresources_poll,
        registration_socket=None if serving is None else str(serving),
        dra=dra,
        cdi_dir=str(cdi_dir),
        device_paths=device_paths,
        nvml=nvml,
        udev=udev,
        opcua=opcua,
        opcua_interval=opcua_interval,
        onvif=onvif,
        debug_echo_availability_file=str(debug_echo_availability_file),
        debug_echo_shared=shared,
        log_level=log_level,
        log_format=log_format,
        metrics_port=metrics_port,
        metrics_address=metrics_address,
        event_loop=event_loop,
    )
    if is_program(ctx) and sys.executable:
        reexec(spec)  # `_agentruns`: the agent runs on without the CLI application
    run(lambda: serve_agent(spec))


def register(app: typer.Typer) -> None:
    app.command()(agent)
