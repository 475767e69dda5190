"""Discovery handlers for the contract suite, each behind a small driver.

`DRIVERS` maps an implementation's name to a factory: an async context manager that, given a short empty directory
(unix sockets live there) and the test's FakeClock, yields a `Driver` and cleans up after it (stopping any process it
started, by PID). The `driver` fixture runs every contract test once per entry, so adding a handler is adding one
driver class and one entry here.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Protocol

import pytest
import yaml

from devplace.clocks import FakeClock
from devplace.discovery import Device, DiscoveryHandler, HandlerRegistry, RegistrationServer, World
from devplace.discovery._debugecho import OFFLINE, DebugEchoHandler
from tests.processes import stop_child

from .streams import next_of, registry_until

BOUND = 5.0  # seconds a stream may take to answer; guards against a hung test, it is not a timing assertion
START_BOUND = 15.0  # seconds an external handler process may take to start and register

Stream = AsyncIterator[list[Device]]


class Driver(Protocol):
    """How the contract suite works one implementation.

    A driver owns a device world. `start(ids)` makes exactly `ids` present and returns discoveryDetails that discover
    them (and any device `show` later adds); `show(ids)` changes the world so that exactly `ids` are present, for
    every entry of `changes`; `next_list` reads a stream's next list within `BOUND`, moving fake time if the handler
    polls. `bad_details` pairs details the handler must refuse with the start of the `errors.Invalid` message.
    """

    changes: Sequence[tuple[str, ...]]  # worlds `show` can move to, in order, starting from ("a", "b")
    bad_details: Sequence[tuple[str, str]]

    @property
    def handler(self) -> DiscoveryHandler: ...

    async def start(self, ids: Sequence[str]) -> str: ...

    async def start_with_a_repeated_source(self) -> str:
        """Like start(("a", "b")), but with the device source naming `a` twice where it can."""
        ...

    async def show(self, ids: Sequence[str]) -> None: ...

    async def next_list(self, stream: Stream) -> list[Device]: ...


COMMON_BAD_DETAILS = (
    ("colour: red", "discoveryDetails.colour: unknown key"),
    ("[a, b", "discoveryDetails: not valid YAML"),
    ("- a\n- b", "discoveryDetails: must be a YAML mapping, got a list"),
)


class DebugEchoDriver:
    """debugEcho: the details name the devices; the availability file (polled on the FakeClock) hides them all.

    Its only runtime change is all-or-nothing, so `changes` goes dark and comes back. It refuses a repeated
    description as Invalid (tests/discovery/test_debugecho.py), so its source cannot name a device twice.
    """

    changes: Sequence[tuple[str, ...]] = ((), ("a", "b"))
    bad_details: Sequence[tuple[str, str]] = (
        *COMMON_BAD_DETAILS,
        ("descriptions: 7", "discoveryDetails.descriptions: must be a list of strings"),
        ("shared: true", "discoveryDetails.descriptions: required"),
    )
    poll_interval = 10.0

    def __init__(self, directory: Path, clock: FakeClock) -> None:
        self.availability = directory / "availability"
        self.clock = clock
        self._handler = DebugEchoHandler(offline_file=self.availability, clock=clock, poll_interval=self.poll_interval)
        self._described: tuple[str, ...] = ()

    @property
    def handler(self) -> DiscoveryHandler:
        return self._handler

    async def start(self, ids: Sequence[str]) -> str:
        self._described = tuple(ids)
        self.availability.unlink(missing_ok=True)
        return yaml.safe_dump({"descriptions": list(ids)})

    async def start_with_a_repeated_source(self) -> str:
        return await self.start(("a", "b"))

    async def show(self, ids: Sequence[str]) -> None:
        if set(ids) == set(self._described):
            self.availability.write_text("ONLINE\n")
        elif not ids:
            self.availability.write_text(f"{OFFLINE}\n")
        else:
            raise ValueError(f"debugEcho shows all of {self._described} or nothing, not {tuple(ids)}")

    async def next_list(self, stream: Stream) -> list[Device]:
        """Ask for the next list and let fake time pass, one poll at a time, until the stream answers."""
        task = asyncio.ensure_future(anext(stream))
        try:
            async with asyncio.timeout(BOUND):
                while not task.done():
                    if self.clock.pending_sleepers:
                        await self.clock.advance(self.poll_interval)
                    else:
                        await asyncio.sleep(0)
            return task.result()
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)


class SimDriver:
    """`sim` on node-a of a World: devices appear and disappear by plugging and unplugging them."""

    changes: Sequence[tuple[str, ...]] = (("b", "c"), ("b",), (), ("a", "b", "c"))
    bad_details: Sequence[tuple[str, str]] = (
        *COMMON_BAD_DETAILS,
        ("kind: 3", "discoveryDetails.kind: must be a string"),
        ("shared: maybe", "discoveryDetails.shared: must be true or false"),
    )
    node = "node-a"

    def __init__(self, directory: Path, clock: FakeClock) -> None:
        self.world = World()
        self._handler = self.world.handler(self.node)

    @property
    def handler(self) -> DiscoveryHandler:
        return self._handler

    async def start(self, ids: Sequence[str]) -> str:
        await self.show(ids)
        return ""

    async def start_with_a_repeated_source(self) -> str:
        details = await self.start(("a", "b"))
        self.world.plug("a", [self.node, "node-b"])  # plugged again, and now also shared with another node
        return details

    async def show(self, ids: Sequence[str]) -> None:
        present = {d.id for d in self.world.devices_on(self.node)}
        for gone in present - set(ids):
            self.world.unplug(gone, [self.node])
        for new in set(ids) - present:
            self.world.plug(new, [self.node], {"kind": "thing"})

    async def next_list(self, stream: Stream) -> list[Device]:
        return await next_of(stream, BOUND)


class ExternalDriver:
    """An `ExternalHandler` fed by a real `python -m devplace.discovery._echoserver` process.

    The process registers with a RegistrationServer on a unix socket; its device list is a file it re-reads every
    0.05 s (real time: the process has no FakeClock), replaced atomically so it never reads a half-written list.
    """

    changes: Sequence[tuple[str, ...]] = (("b", "c"), ("b",), (), ("a", "b", "c"))
    bad_details: Sequence[tuple[str, str]] = (
        *COMMON_BAD_DETAILS,
        ("only: c", "discoveryDetails.only: must be a list of device ids"),
    )
    name = "echo"

    def __init__(self, directory: Path, clock: FakeClock) -> None:
        self.directory = directory
        self.devices_file = directory / "devices"
        self.registry = HandlerRegistry("node-a")
        self.registration = RegistrationServer(directory / "reg.sock", self.registry)
        self.process: asyncio.subprocess.Process | None = None

    @property
    def handler(self) -> DiscoveryHandler:
        # The process registers again whenever a stream is closed (as Akri's handlers do): always use the newest.
        return self.registry.get(self.name)

    async def start(self, ids: Sequence[str]) -> str:
        assert self.process is None, "one echoserver per test"
        await self.show(ids)
        await self.registration.start()
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "devplace.discovery._echoserver",
            "--name",
            self.name,
            "--socket-dir",
            str(self.directory),
            "--registration",
            str(self.registration.socket_path),
            "--devices",
            ",".join(ids),
            "--devices-file",
            str(self.devices_file),
            "--poll",
            "0.05",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await registry_until(self.registry, lambda: self.name in self.registry.names(), START_BOUND)
        return ""

    async def start_with_a_repeated_source(self) -> str:
        return await self.start(("a", "b", "a"))

    async def show(self, ids: Sequence[str]) -> None:
        scratch = self.devices_file.with_suffix(".new")
        scratch.write_text("\n".join(ids) + "\n")
        os.replace(scratch, self.devices_file)

    async def next_list(self, stream: Stream) -> list[Device]:
        return await next_of(stream, BOUND)

    async def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is not None:
            await stop_child(proc)
        await self.registration.stop()


DriverFactory = Callable[[Path, FakeClock], AbstractAsyncContextManager[Driver]]


@asynccontextmanager
async def debugecho_driver(directory: Path, clock: FakeClock) -> AsyncIterator[Driver]:
    yield DebugEchoDriver(directory, clock)


@asynccontextmanager
async def sim_driver(directory: Path, clock: FakeClock) -> AsyncIterator[Driver]:
    yield SimDriver(directory, clock)


@asynccontextmanager
async def external_driver(directory: Path, clock: FakeClock) -> AsyncIterator[Driver]:
    driver = ExternalDriver(directory, clock)
    try:
        yield driver
    finally:
        await driver.stop()


DRIVERS: dict[str, DriverFactory] = {
    "debugEcho": debugecho_driver,
    "sim": sim_driver,
    "external": external_driver,  # ExternalHandler -> gRPC on a unix socket -> echoserver process
}


@pytest.fixture(params=list(DRIVERS))
async def driver(request: pytest.FixtureRequest, sock_dir: Path, clock: FakeClock) -> AsyncIterator[Driver]:
    async with DRIVERS[request.param](sock_dir, clock) as opened:
        yield opened
