"""Stopping asyncio child processes that a test started, and only those, by their handle (hence their PID).

`returncode is None` does not mean the child is still there: asyncio learns of an exit after the child has been
reaped, so a signal sent in between finds no process. `stop_child` treats that as already stopped.

    async with Daemons(tmp_path) as daemons:                  # every daemon stopped by its PID on exit
        server = await daemons.spawn("server", "server", "--store", url, "--port", str(port))
        await server.kill(); await server.start()             # SIGKILL, then the same command again
        pod = await poll_until(check, "the pod runs", timeout=30, daemons=daemons)

`Daemon` runs `python -m devplace.cli ARGS` with its output in a file (kept across restarts, shown when it dies);
`poll_until` waits for other processes' work with a deadline, failing at once when a daemon exited unasked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from devplace import errors

__all__ = ["Cluster", "Daemon", "Daemons", "poll_until", "stop_child"]

T = TypeVar("T")


async def stop_child(proc: asyncio.subprocess.Process, *, grace: float = 10.0, sig: int = signal.SIGTERM) -> None:
    """Send `sig` (SIGKILL skips the grace period), wait up to `grace` seconds, then kill; return once reaped."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    if sig != signal.SIGKILL:
        try:
            await asyncio.wait_for(proc.wait(), grace)
            return
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    await proc.wait()


# -- devplace daemons as child processes -------------------------------------------------------------------------------


@dataclass
class Daemon:
    """One `python -m devplace.cli ARGS` child (a server, an agent, a kubelet-sim...), its output appended to a file
    across restarts. `start` may be called again after `kill` or `stop`: the same command, a new process."""

    label: str
    args: tuple[str, ...]
    log_path: Path
    proc: asyncio.subprocess.Process | None = None
    starts: int = 0
    ended_by_us: bool = True
    """False while running: an exit we did not ask for (`Daemons.casualties`) is a failure."""

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self) -> None:
        if self.running:
            raise RuntimeError(f"{self.label} is already running (pid {self.pid})")
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            log.write(f"==== start {self.starts + 1}: devplace {' '.join(self.args)}\n".encode())
            log.flush()
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "devplace.cli",
                *self.args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.starts += 1
        self.ended_by_us = False

    async def kill(self) -> None:
        """SIGKILL, as a machine or a process that dies: nothing is cleaned up."""
        await self.stop(sig=signal.SIGKILL)

    async def stop(self, *, grace: float = 10.0, sig: int = signal.SIGTERM) -> int | None:
        """Stop it by its PID (`stop_child`); its exit code (None when it never started)."""
        if self.proc is None:
            return None
        self.ended_by_us = True
        await stop_child(self.proc, grace=grace, sig=sig)
        return self.proc.returncode

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def latest_output(self) -> str:
        """What the current (or last) process wrote, without the earlier ones' output."""
        return self.output().rsplit("==== start ", 1)[-1]

    async def wait_serving(self, daemons: Daemons, timeout: float = 60.0) -> None:
        """Wait until the current process printed its banner (`devplace COMMAND: ...`, after its start-up: a SIGTERM
        from then on is a clean stop)."""
        banner = f"\ndevplace {self.args[0]}: "

        async def serving() -> bool:
            return banner in self.latest_output()

        await poll_until(serving, f"{self.label} started", timeout=timeout, daemons=daemons)

    def cpu_seconds(self) -> float:
        """User plus system CPU time the running process used so far, 0 when it is not running."""
        if not self.running or self.pid is None:
            return 0.0
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15

    def rss_bytes(self) -> int:
        """Resident memory of the running process (VmRSS), 0 when it is not running."""
        if not self.running or self.pid is None:
            return 0
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return 0
        return 0


class Daemons:
    """The daemons a test or benchmark started: each stopped by its PID on exit (SIGTERM, then SIGKILL after the
    grace), concurrently; `casualties` names those that exited without being asked to."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.all: list[Daemon] = []

    async def spawn(self, label: str, *args: str) -> Daemon:
        daemon = Daemon(label, args, self.log_dir / f"{label}.log")
        self.all.append(daemon)
        await daemon.start()
        return daemon

    def casualties(self) -> list[Daemon]:
        return [d for d in self.all if not d.ended_by_us and d.proc is not None and d.proc.returncode is not None]

    def report(self, daemons: Sequence[Daemon] | None = None, tail: int = 4000) -> str:
        """The exit codes and last output of `daemons` (default: the casualties), for a failure message."""
        chosen = self.casualties() if daemons is None else daemons
        return "\n".join(
            f"--- {d.label} (pid {d.pid}, exit {None if d.proc is None else d.proc.returncode}):\n{d.output()[-tail:]}"
            for d in chosen
        )

    async def stop_all(self, grace: float = 10.0) -> None:
        await asyncio.gather(*(d.stop(grace=grace) for d in self.all if d.running))

    async def __aenter__(self) -> Daemons:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_all()


ELECTION = (
    "--leader-elect",
    "--leader-elect-lease-duration",
    "3",
    "--leader-elect-renew-deadline",
    "2",
    "--leader-elect-retry-period",
    "0.3",
)
"""Leader-election flags for daemons under test: a takeover in about lease + retry (3.3 s)."""


async def poll_until(
    check: Callable[[], Awaitable[T | None]],
    what: str,
    *,
    timeout: float,
    daemons: Daemons | None = None,
    interval: float = 0.1,
) -> T:
    """Call `check` until it returns something truthy and return that. A bound on a hang, not a timing assertion:
    past `timeout` seconds, or as soon as a daemon of `daemons` exited unasked, fail naming `what` (and the daemon's
    output). A check that raises a devplace error (a server restarting) counts as not yet."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last = ""
    while True:
        if daemons is not None and daemons.casualties():
            raise AssertionError(f"{what}: a daemon exited meanwhile\n{daemons.report()}")
        try:
            result = await check()
        except errors.DevplaceError as e:
            result, last = None, f" (last error: {e.message})"
        if result:
            return result
        if loop.time() >= deadline:
            raise AssertionError(f"{what}: not within {timeout} s{last}")
        await asyncio.sleep(interval)  # polling other processes' work, bounded by the deadline


@dataclass
class Cluster:
    """A devplace cluster as processes on loopback: one `devplace server` over `backing` (sqlite:///..., etcd://...),
    and, talking to it over HTTP, `devplace controller`, `devplace scheduler` and per node a `devplace kubelet-sim` and
    a `devplace agent` sharing the node's kubelet directory under `root` (keep `root` short: AF_UNIX paths are limited
    to 107 bytes). The `*_args` are appended to each command; every daemon belongs to `daemons`."""

    daemons: Daemons
    backing: str
    root: Path
    port: int = 0
    server_args: tuple[str, ...] = ("--log-level", "warning", "--shutdown-timeout", "0")
    controller_args: tuple[str, ...] = ("--log-level", "warning")
    scheduler_args: tuple[str, ...] = ("--log-level", "warning")
    kubelet_args: tuple[str, ...] = ("--log-level", "warning")
    agent_args: tuple[str, ...] = ("--log-level", "warning")
    server: Daemon | None = None
    controller: Daemon | None = None
    scheduler: Daemon | None = None
    kubelets: dict[str, Daemon] = field(default_factory=dict)
    agents: dict[str, Daemon] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.port:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                self.port = sock.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubelet_dir(self, node: str) -> Path:
        return self.root / node

    async def start_server(self, timeout: float = 60.0) -> None:
        """Start the server (again, after `kill`), and return once it answers /healthz."""
        if self.server is None:
            args = ("server", "--store", self.backing, "--host", "127.0.0.1", "--port", str(self.port))
            self.server = await self.daemons.spawn("server", *args, *self.server_args)
        else:
            await self.server.start()
        server = self.server

        async def healthy() -> bool:
            reader, writer = None, None
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                return (await reader.readline()).startswith(b"HTTP/1.1 200")
            except OSError:
                return False
            finally:
                if writer is not None:
                    writer.close()

        await poll_until(healthy, f"{server.label} answers on {self.url}", timeout=timeout, daemons=self.daemons)

    async def start_control_plane(self) -> None:
        """The controller and the scheduler."""
        self.controller = await self.daemons.spawn(
            "controller", "controller", "--store", self.url, *self.controller_args
        )
        self.scheduler = await self.daemons.spawn("scheduler", "scheduler", "--store", self.url, *self.scheduler_args)

    async def add_node(self, node: str) -> None:
        """A node: its kubelet-sim, then its agent (which waits for the kubelet's socket)."""
        directory = self.kubelet_dir(node)
        common = ("--node", node, "--store", self.url, "--kubelet-dir", str(directory))
        self.kubelets[node] = await self.daemons.spawn(f"kubelet-{node}", "kubelet-sim", *common, *self.kubelet_args)
        own = (  # nothing shared between the agents of one machine
            "--registration-socket",
            str(directory / "agent-registration.sock"),
            "--debug-echo-availability-file",
            str(directory / "debug-echo-availability.txt"),
        )
        self.agents[node] = await self.daemons.spawn(f"agent-{node}", "agent", *common, *own, *self.agent_args)

    def processes(self) -> dict[str, list[Daemon]]:
        """Running daemons by kind: server, controller, scheduler, kubelet-sim, agent."""
        kinds: dict[str, list[Daemon]] = {
            "server": [self.server] if self.server is not None else [],
            "controller": [self.controller] if self.controller is not None else [],
            "scheduler": [self.scheduler] if self.scheduler is not None else [],
            "kubelet-sim": list(self.kubelets.values()),
            "agent": list(self.agents.values()),
        }
        return {kind: [d for d in found if d.running] for kind, found in kinds.items()}
