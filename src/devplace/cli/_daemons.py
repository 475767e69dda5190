"""`devplace scheduler` and `devplace controller`: the cluster-level parts as daemons, and the run loop every daemon
command shares (`devplace agent` too).

Each daemon opens the store, starts its part and runs until the first SIGTERM/SIGINT (the part stopped, the store
closed, exit code 0) or until its supervisor reports a fatal failure (a loop that cannot be restarted, DESIGN.md
section 3): the part is stopped the same way, the failure is one `error:` line on stderr and the exit code is 1, so a
process manager (systemd, a Kubernetes Deployment) restarts it. Time is the system clock; logs go to stderr.

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
import logging
import os
import re
import signal
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from devplace import errors
from devplace.api import SELECTION_STRATEGIES as STRATEGIES
from devplace.api import require_dns1123_subdomain
from devplace.cli._resources import StoreOption, open_cli_store, run, store_url
from devplace.clocks import Clock, SystemClock

if TYPE_CHECKING:
    from devplace.store import Store

LogLevelOption = Annotated[str, typer.Option("--log-level", help="critical, error, warning, info or debug")]
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
) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]], Callable[[], Awaitable[BaseException]]]:
    """`serve`'s start, stop and failed for a part started by `start(store)`: as given without `--leader-elect`;
    with it, `start` waits to lead and starts the part over a `FencedStore`, and losing the lease is a failure."""
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
        typer.echo(
            f"devplace {command}: {identity} waiting to lead lease {election.namespace}/{elector.name}", err=True
        )
        await elector.leading.wait()
        typer.echo(f"devplace {command}: {identity} leads", err=True)
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


def configure_logging(log_level: str) -> None:
    """Log to stderr at `log_level` (a bad name is a usage error naming --log-level)."""
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise typer.BadParameter(
            f"{log_level!r} is not one of critical, error, warning, info, debug", param_hint="--log-level"
        )
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


async def serve(
    command: str,
    *,
    start: Callable[[], Awaitable[None]],
    stop: Callable[[], Awaitable[None]],
    failed: Callable[[], Awaitable[BaseException]],
    banner: str,
) -> int:
    """Start a part, then wait for SIGTERM/SIGINT (0) or `failed()` (1); `stop` runs either way (module docstring).

    Signal handlers are installed before `start`, so a SIGTERM during start-up is a clean stop too: `start` (which may
    be waiting for its store, `devplace agent`) is cancelled and the exit code is 0."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stopping.set)
            installed.append(sig)
    failure: BaseException | None = None
    try:
        if not await _unless_stopped(start(), stopping):
            typer.echo(f"devplace {command}: stopped before it started", err=True)
            return 0
        typer.echo(f"devplace {command}: {banner}", err=True)
        stop_wait = asyncio.ensure_future(stopping.wait())
        fail_wait = asyncio.ensure_future(failed())
        try:
            done, _ = await asyncio.wait({stop_wait, fail_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_wait.cancel()
            fail_wait.cancel()
        if fail_wait in done:
            failure = fail_wait.result()
    finally:
        try:
            await stop()
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
    if failure is not None:
        typer.echo(f"error: devplace {command}: a loop failed for good: {type(failure).__name__}: {failure}", err=True)
        return 1
    typer.echo(f"devplace {command}: stopped", err=True)
    return 0


async def _unless_stopped(work: Awaitable[None], stopping: asyncio.Event) -> bool:
    """Run `work` to its end (True; its error raised) unless `stopping` is set first (False: `work` cancelled)."""
    task = asyncio.ensure_future(work)
    stop_wait = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({task, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop_wait.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task.cancelled():
        return False
    task.result()
    return True


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
    log_level: LogLevelOption = "info",
    leader_elect: LeaderElectOption = False,
    lease_duration: LeaseDurationOption = 15.0,
    renew_deadline: RenewDeadlineOption = 10.0,
    retry_period: RetryPeriodOption = 2.0,
    lease_namespace: LeaseNamespaceOption = "devplace",
) -> None:
    """Run the resource-class scheduler: bind pending pods to nodes and devices, keep ResourceClass status."""
    url = store_url(ctx, store)
    configure_logging(log_level)
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

        async def start_part(writes: Store) -> None:
            events = EventRecorder(writes, "devplace-scheduler", clock, instance=name)
            parts.append(Scheduler(writes, clock, name=name, strategy=strategy, events=events))  # strategy: checked
            await parts[0].start()

        async def stop_part() -> None:
            for part in parts:
                await part.stop()

        async def part_failed() -> BaseException:
            return await parts[0].supervisor.failed()

        start, stop_elected, failed = await elected(
            "scheduler", election, st, clock, start=start_part, stop=stop_part, failed=part_failed
        )

        async def stop() -> None:
            try:
                await stop_elected()
            finally:
                await st.close()

        return await serve(
            "scheduler",
            start=start,
            stop=stop,
            failed=failed,
            banner=f"name {name}, strategy {strategy}, store {url}",
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
    log_level: LogLevelOption = "info",
    leader_elect: LeaderElectOption = False,
    lease_duration: LeaseDurationOption = 15.0,
    renew_deadline: RenewDeadlineOption = 10.0,
    retry_period: RetryPeriodOption = 2.0,
    lease_namespace: LeaseNamespaceOption = "devplace",
) -> None:
    """Run the broker controller: broker Pods/Jobs, Services and ConfigMaps per Configuration; node cleanup."""
    url = store_url(ctx, store)
    configure_logging(log_level)
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

        async def start_part(writes: Store) -> None:
            matcher = ClassMatcher(writes, clock)  # group members named by ResourceClass
            part = Controller(
                writes,
                clock,
                resource_prefix=resource_prefix,
                node_grace=node_grace,
                pending_grace=pending_grace,
                class_matches=matcher,
                events=EventRecorder(writes, "devplace-controller", clock),
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
            return await first_failure(part.supervisor, matcher.supervisor)

        start, stop_elected, failed = await elected(
            "controller", election, st, clock, start=start_part, stop=stop_part, failed=part_failed
        )

        async def stop() -> None:
            try:
                await stop_elected()
            finally:
                await st.close()

        return await serve(
            "controller",
            start=start,
            stop=stop,
            failed=failed,
            banner=f"prefix {resource_prefix or 'per Configuration group'}, store {url}",
        )

    run(work)


def register(app: typer.Typer) -> None:
    app.command()(scheduler)
    app.command()(controller)
