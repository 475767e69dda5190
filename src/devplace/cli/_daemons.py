"""`devplace scheduler` and `devplace controller`: the cluster-level parts as daemons, and the run loop every daemon
command shares (`devplace agent` too).

Each daemon opens the store, starts its part and runs until the first SIGTERM/SIGINT (the part stopped, the store
closed, exit code 0) or until its supervisor reports a fatal failure (a loop that cannot be restarted, DESIGN.md
section 3): the part is stopped the same way, the failure is one `error:` line on stderr and the exit code is 1, so a
process manager (systemd, a Kubernetes Deployment) restarts it. Time is the system clock; logs go to stderr.

    devplace scheduler --store sqlite:///var/lib/devplace/devplace.db --strategy binpack
    devplace controller --store http://devplace-api:8080
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Annotated

import typer

from devplace.api import SELECTION_STRATEGIES as STRATEGIES
from devplace.api import require_dns1123_subdomain
from devplace.cli._resources import StoreOption, open_cli_store, run, store_url
from devplace.clocks import SystemClock

LogLevelOption = Annotated[str, typer.Option("--log-level", help="critical, error, warning, info or debug")]


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
) -> None:
    """Run the resource-class scheduler: bind pending pods to nodes and devices, keep ResourceClass status."""
    url = store_url(ctx, store)
    configure_logging(log_level)
    if strategy not in STRATEGIES:
        raise typer.BadParameter(f"{strategy!r} is not one of {', '.join(STRATEGIES)}", param_hint="--strategy")
    if not name.strip():
        raise typer.BadParameter("must not be empty", param_hint="--name")

    async def work() -> int:
        from devplace.scheduler import Scheduler
        from devplace.store import EventRecorder

        clock = SystemClock()
        st = open_cli_store(ctx, url, clock=clock)
        events = EventRecorder(st, "devplace-scheduler", clock, instance=name)
        part = Scheduler(st, clock, name=name, strategy=strategy, events=events)  # strategy: checked above

        async def stop() -> None:
            try:
                await part.stop()
            finally:
                await st.close()

        return await serve(
            "scheduler",
            start=part.start,
            stop=stop,
            failed=part.supervisor.failed,
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
) -> None:
    """Run the broker controller: broker Pods/Jobs, Services and ConfigMaps per Configuration; node cleanup."""
    url = store_url(ctx, store)
    configure_logging(log_level)

    async def work() -> int:
        from devplace.controller import ClassMatcher, Controller
        from devplace.store import EventRecorder
        from devplace.supervisors import first_failure

        if resource_prefix is not None:
            require_dns1123_subdomain("--resource-prefix", resource_prefix)
        clock = SystemClock()
        st = open_cli_store(ctx, url, clock=clock)
        matcher = ClassMatcher(st, clock)  # group members named by ResourceClass
        part = Controller(
            st,
            clock,
            resource_prefix=resource_prefix,
            node_grace=node_grace,
            pending_grace=pending_grace,
            class_matches=matcher,
            events=EventRecorder(st, "devplace-controller", clock),
        )
        matcher.bind(part)

        async def start() -> None:
            await matcher.start()
            part.start()

        async def stop() -> None:
            try:
                await part.stop()
                await matcher.stop()
            finally:
                await st.close()

        async def failed() -> BaseException:
            return await first_failure(part.supervisor, matcher.supervisor)

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
