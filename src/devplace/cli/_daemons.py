"""`devplace scheduler` and `devplace controller`: the cluster-level parts as daemons.

Each daemon opens the store, starts its part and runs until the first SIGTERM/SIGINT (the part stopped, the store
closed, exit code 0) or until its supervisor reports a fatal failure (a loop that cannot be restarted, DESIGN.md
section 3): the part is stopped the same way, the failure is one `error:` line on stderr and the exit code is 1, so
a process manager (systemd, a Kubernetes Deployment) restarts it (`_serves.serve`, every daemon command's run loop,
`devplace agent`'s too). Time is the system clock; logs go to stderr, as text or JSON (`--log-format`,
`devplace.cli._logs`). `--metrics-port` serves `/metrics`, `/livez` and `/readyz` (`devplace.cli._probes`; the agent
has it too).

With `--leader-elect` (off by default) several copies may run: each campaigns for the Lease
`<namespace>/devplace-scheduler` (or `devplace-controller`; namespace `--leader-elect-namespace`, default `devplace`,
where the deploy manifests run) as `<hostname>_<pid>` (`store.LeaderElector`). A copy that does not lead waits
without starting its part; once it leads it starts the part over a `store.FencedStore`, which refuses its writes
as soon as its last renew is older than the renew deadline. Losing the lease is fatal, as in kube-scheduler: the part
is stopped (its writes already refused), one `error:` line, exit code 1, and the process manager restarts it as a
candidate. A clean stop (SIGTERM) releases the lease, so another copy takes over at once.

    devplace scheduler --store sqlite:///var/lib/devplace/devplace.db --strategy binpack
    devplace controller --store http://devplace-api:8080
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from devplace import errors
from devplace.api import SELECTION_STRATEGIES as STRATEGIES
from devplace.api import DevicePaths, require_dns1123_subdomain
from devplace.cli._logs import announce
from devplace.cli._logs import configure_logging as configure_logging
from devplace.cli._options import LogFormatOption as LogFormatOption  # re-exported: every daemon command's options
from devplace.cli._options import LogLevelOption as LogLevelOption
from devplace.cli._options import MetricsAddressOption, MetricsPortOption
from devplace.cli._probes import Health, maybe_open
from devplace.cli._resources import StoreOption, open_cli_store, run, store_url
from devplace.cli._serves import serve
from devplace.clocks import Clock, SystemClock

if TYPE_CHECKING:
    from devplace.store import Store

LeaderElectOption = Annotated[
    bool, typer.Option("--leader-elect", help="Run as one of several copies: only the Lease holder decides")
]
LeaseDurationOption = Annotated[
    float,
    typer.Option("--leader-elect-lease-duration", help="Seconds a candidate waits before taking an unrenewed lease"),
]
RenewDeadlineOption = Annotated[
    float, typer.Option("--leader-elect-renew-deadline", help="Seconds the leader may go without renewing")
]
RetryPeriodOption = Annotated[
    float, typer.Option("--leader-elect-retry-period", help="Seconds between tries to acquire or renew")
]
LeaseNamespaceOption = Annotated[
    str, typer.Option("--leader-elect-namespace", help="Namespace of the Lease (devplace-<command>)")
]
DevicePathsOption = Annotated[
    DevicePaths,
    typer.Option(
        "--device-paths",
        help="How a Configuration without the devplace.io/device-paths annotation is served: its device plugins, "
        "DRA or both (both is safe under devplace's scheduler only: a stock kube-scheduler cannot see device-plugin "
        "slots)",
    ),
]
"""`--device-paths` of `devplace agent` and `devplace controller` (`api.device_paths`)."""


_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class Election:
    """The `--leader-elect*` options of one daemon command (module docstring)."""

    enabled: bool
    lease_duration: float
    renew_deadline: float
    retry_period: float
    namespace: str

    def check(self) -> None:
        """Refuse bad options as usage errors naming the option (before anything starts)."""
        if not self.enabled:
            return
        if not _DNS1123_LABEL.fullmatch(self.namespace):
            raise typer.BadParameter(
                f"{self.namespace!r} is not a namespace name (a DNS-1123 label)", param_hint="--leader-elect-namespace"
            )
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise typer.BadParameter(
                f"needs 0 < retry period ({self.retry_period}) < renew deadline ({self.renew_deadline}) "
                f"< lease duration ({self.lease_duration})",
                param_hint="--leader-elect-renew-deadline",
            )


async def elected(
    command: str,
    election: Election,
    store: Store,
    clock: Clock,
    *,
    start: Callable[[Store], Awaitable[None]],
    stop: Callable[[], Awaitable[None]],
    failed: Callable[[], Awaitable[BaseException]],
    health: Health | None = None,
) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]], Callable[[], Awaitable[BaseException]]]:
    """`serve`'s start, stop and failed for a part started by `start(store)`: as given without `--leader-elect`;
    with it, `start` waits to lead and starts the part over a `FencedStore`, and losing the lease is a failure
    (`health` is a standby while it waits)."""
    if not election.enabled:
        return (lambda: start(store)), stop, failed
    from devplace.store import FencedStore, LeaderElector

    identity = f"{socket.gethostname()}_{os.getpid()}"
    elector = LeaderElector(
        store,
        f"devplace-{command}",
        election.namespace,
        identity,
        clock,
        lease_duration=election.lease_duration,
        renew_deadline=election.renew_deadline,
        retry_period=election.retry_period,
    )
    campaign: list[asyncio.Task[None]] = []
    started = asyncio.Event()

    async def start_elected() -> None:
        campaign.append(asyncio.ensure_future(elector.run()))
        announce(f"devplace {command}: {identity} waiting to lead lease {election.namespace}/{elector.name}")
        if health is not None:
            health.standby = True
        await elector.leading.wait()
        announce(f"devplace {command}: {identity} leads")
        if health is not None:
            health.standby = False
        await start(FencedStore(store, elector))
        started.set()

    async def stop_elected() -> None:
        try:
            if started.is_set():
                await stop()
        finally:
            for task in campaign:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await elector.release()

    async def failed_elected() -> BaseException:
        lost = asyncio.ensure_future(elector.lost.wait())
        part = asyncio.ensure_future(failed())
        try:
            done, _ = await asyncio.wait({lost, part}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            part.cancel()
        if part in done:
            return part.result()
        return errors.Refused(f"{identity} lost lease {election.namespace}/{elector.name}")

    return start_elected, stop_elected, failed_elected


DraOption = Annotated[
    bool,
    typer.Option(
        "--dra/--no-dra",
        help="Serve DRA's ResourceClaims (resource.k8s.io/v1); --no-dra for a cluster that does not serve them",
    ),
]


def scheduler(
    ctx: typer.Context,
    store: StoreOption = None,
    name: Annotated[
        str, typer.Option("--name", help="This scheduler's name: it binds pods whose spec.schedulerName is unset or it")
    ] = "devplace-scheduler",
    strategy: Annotated[
        str,
        typer.Option("--strategy", help="Device selection for classes that name none: " + ", ".join(STRATEGIES)),
    ] = "firstFit",
    dra: DraOption = True,
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
    leader_elect: LeaderElectOption = False,
    lease_duration: LeaseDurationOption = 15.0,
    renew_deadline: RenewDeadlineOption = 10.0,
    retry_period: RetryPeriodOption = 2.0,
    lease_namespace: LeaseNamespaceOption = "devplace",
    metrics_port: MetricsPortOption = None,
    metrics_address: MetricsAddressOption = "127.0.0.1",
) -> None:
    """Run the resource-class scheduler: bind pending pods to nodes and devices, keep ResourceClass status."""
    url = store_url(ctx, store)
    configure_logging(log_level, log_format)
    election = Election(leader_elect, lease_duration, renew_deadline, retry_period, lease_namespace)
    election.check()
    if strategy not in STRATEGIES:
        raise typer.BadParameter(f"{strategy!r} is not one of {', '.join(STRATEGIES)}", param_hint="--strategy")
    if not name.strip():
        raise typer.BadParameter("must not be empty", param_hint="--name")

    async def work() -> int:
        from devplace.scheduler import Scheduler
        from devplace.store import EventRecorder

        clock = SystemClock()
        st = open_cli_store(ctx, url, clock=clock)
        parts: list[Scheduler] = []
        health = Health(st)

        async def start_part(writes: Store) -> None:
            health.readers.append(writes)
            events = EventRecorder(writes, "devplace-scheduler", clock, instance=name)
            # strategy: checked above
            parts.append(Scheduler(writes, clock, name=name, strategy=strategy, events=events, dra=dra))
            await parts[0].start()

        async def stop_part() -> None:
            for part in parts:
                await part.stop()

        async def part_failed() -> BaseException:
            return await parts[0].supervisor.failed()

        start, stop_elected, failed = await elected(
            "scheduler", election, st, clock, start=start_part, stop=stop_part, failed=part_failed, health=health
        )
        endpoint = await maybe_open(metrics_address, metrics_port, health, "scheduler")

        async def stop() -> None:
            try:
                await stop_elected()
            finally:
                try:
                    if endpoint is not None:
                        await endpoint.close()
                finally:
                    await st.close()

        return await serve(
            "scheduler",
            start=start,
            stop=stop,
            failed=failed,
            banner=f"name {name}, strategy {strategy}, store {url}",
            health=health,
        )

    run(work)


def controller(
    ctx: typer.Context,
    store: StoreOption = None,
    resource_prefix: Annotated[
        str | None,
        typer.Option(
            "--resource-prefix",
            help="Extended resource prefix for every Configuration [default: each Configuration's API group]",
        ),
    ] = None,
    node_grace: Annotated[
        float, typer.Option("--node-grace", help="Seconds a NotReady node keeps its slots", min=0)
    ] = 300.0,
    pending_grace: Annotated[
        float, typer.Option("--pending-grace", help="Seconds before a Pending broker is recreated", min=0)
    ] = 300.0,
    dra: DraOption = True,
    device_paths: DevicePathsOption = "both",
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
    leader_elect: LeaderElectOption = False,
    lease_duration: LeaseDurationOption = 15.0,
    renew_deadline: RenewDeadlineOption = 10.0,
    retry_period: RetryPeriodOption = 2.0,
    lease_namespace: LeaseNamespaceOption = "devplace",
    metrics_port: MetricsPortOption = None,
    metrics_address: MetricsAddressOption = "127.0.0.1",
) -> None:
    """Run the broker controller: broker Pods/Jobs, Services and ConfigMaps per Configuration; node cleanup; the
    ResourceClaim lifecycle (claims from templates, released when their pods go)."""
    url = store_url(ctx, store)
    configure_logging(log_level, log_format)
    election = Election(leader_elect, lease_duration, renew_deadline, retry_period, lease_namespace)
    election.check()

    async def work() -> int:
        from devplace.controller import ClassMatcher, Controller
        from devplace.store import EventRecorder
        from devplace.supervisors import first_failure

        if resource_prefix is not None:
            require_dns1123_subdomain("--resource-prefix", resource_prefix)
        clock = SystemClock()
        st = open_cli_store(ctx, url, clock=clock)
        parts: list[tuple[Controller, ClassMatcher]] = []
        health = Health(st)

        async def start_part(writes: Store) -> None:
            health.readers.append(writes)
            matcher = ClassMatcher(writes, clock)  # group members named by ResourceClass
            part = Controller(
                writes,
                clock,
                resource_prefix=resource_prefix,
                node_grace=node_grace,
                pending_grace=pending_grace,
                class_matches=matcher,
                events=EventRecorder(writes, "devplace-controller", clock),
                dra=dra,
                dra_slices=None if dra else False,  # shared Instances' ResourceSlices, where the store keeps them
                device_paths=device_paths,
            )
            matcher.bind(part)
            parts.append((part, matcher))
            await matcher.start()
            part.start()

        async def stop_part() -> None:
            for part, matcher in parts:
                await part.stop()
                await matcher.stop()

        async def part_failed() -> BaseException:
            part, matcher = parts[0]
            lifecycle = () if part.claim_lifecycle is None else (part.claim_lifecycle.supervisor,)
            return await first_failure(part.supervisor, matcher.supervisor, *lifecycle)

        start, stop_elected, failed = await elected(
            "controller", election, st, clock, start=start_part, stop=stop_part, failed=part_failed, health=health
        )
        endpoint = await maybe_open(metrics_address, metrics_port, health, "controller")

        async def stop() -> None:
            try:
                await stop_elected()
            finally:
                try:
                    if endpoint is not None:
                        await endpoint.close()
                finally:
                    await st.close()

        return await serve(
            "controller",
            start=start,
            stop=stop,
            failed=failed,
            banner=f"prefix {resource_prefix or 'per Configuration group'}, store {url}",
            health=health,
        )

    run(work)


def register(app: typer.Typer) -> None:
    app.command()(scheduler)
    app.command()(controller)
