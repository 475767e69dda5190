"""debugEcho: Akri's test discovery handler, built in.

discoveryDetails is YAML `descriptions: [foo0, foo1]` (plus optional `shared: true|false`). Each description is one
device whose id is the description and whose only property is `DEBUG_ECHO_DESCRIPTION=<description>`; no mounts, no
device nodes. Whether the devices are shared: the details' `shared` when given, else the handler's default, which
Akri takes from the agent's environment (`DEBUG_ECHO_INSTANCES_SHARED`, read by `devplace agent`; default true).

Per-node OFFLINE switch, as in Akri: while the node's availability file contains `OFFLINE`, or while the `offline`
property is true, the node reports no devices; anything else in the file (or no file) brings them back. Akri's file is
`/tmp/debug-echo-availability.txt` (`AVAILABILITY_FILE`, which `devplace agent` watches; Akri's end-to-end tests
`echo OFFLINE >` it). Setting the property wakes every stream at once; the file is polled through the injected clock
every `poll_interval` seconds (10, as Akri's; tests advance a FakeClock instead of sleeping). A stream re-sends only
when its list actually changes. discoveryProperties are accepted and ignored (debugEcho needs none).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devplace import errors
from devplace.clocks import Clock, SystemClock
from devplace.discovery import _details as d
from devplace.discovery._devices import Device
from devplace.discovery._handlers import ResolvedProperties
from devplace.discovery._signals import Signal, first_of

DEBUG_ECHO_DESCRIPTION = "DEBUG_ECHO_DESCRIPTION"
OFFLINE = "OFFLINE"
AVAILABILITY_FILE = Path("/tmp/debug-echo-availability.txt")
"""Akri's debugEcho availability file (`DEBUG_ECHO_AVAILABILITY_CHECK_PATH`)."""


@dataclass(frozen=True)
class DebugEchoDetails:
    descriptions: tuple[str, ...]
    shared: bool = True


def parse_details(text: str, shared: bool = True) -> DebugEchoDetails:
    """Parse debugEcho's discoveryDetails (`shared`: the default when they do not say); raise `errors.Invalid`
    naming the field for anything else."""
    raw = d.load_mapping(text)
    d.refuse_unknown(raw, ("descriptions", "shared"))
    path = f"{d.ROOT}.descriptions"
    value: Any = raw.get("descriptions")
    if value is None:
        raise errors.Invalid.field(path, "required: a list of device descriptions, e.g. descriptions: [foo0, foo1]")
    if not isinstance(value, list):
        raise errors.Invalid.field(path, "must be a list of strings")
    seen: set[str] = set()
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise errors.Invalid.field(f"{path}[{i}]", f"must be a non-empty string, got {item!r}")
        if item in seen:
            raise errors.Invalid.field(f"{path}[{i}]", f"duplicate description {item!r}")
        seen.add(item)
    return DebugEchoDetails(descriptions=tuple(value), shared=d.optional_bool(raw, "shared", shared))


def echo_devices(details: DebugEchoDetails) -> list[Device]:
    """The devices debugEcho reports for `details` while online, in description order."""
    return [Device(id=x, properties={DEBUG_ECHO_DESCRIPTION: x}, shared=details.shared) for x in details.descriptions]


class DebugEchoHandler:
    name = "debugEcho"

    def __init__(
        self,
        *,
        offline_file: Path | None = None,
        clock: Clock | None = None,
        poll_interval: float = 10.0,
        shared: bool = True,
    ) -> None:
        self.offline_file = offline_file
        self.poll_interval = poll_interval
        self.shared = shared
        self._clock: Clock = clock or SystemClock()
        self._offline = False
        self._changed = Signal()

    @property
    def offline(self) -> bool:
        """The in-process switch (the availability file is a second, independent switch)."""
        return self._offline

    @offline.setter
    def offline(self, value: bool) -> None:
        if value != self._offline:
            self._offline = value
            self._changed.fire()

    def _is_offline(self) -> bool:
        if self._offline:
            return True
        if self.offline_file is None:
            return False
        try:  # a tiny local file read at most once per poll: not worth a thread
            return OFFLINE in self.offline_file.read_text(errors="replace")
        except FileNotFoundError:
            return False

    async def discover(
        self, details: str, properties: ResolvedProperties | None = None
    ) -> AsyncGenerator[list[Device], None]:
        """The echo devices while online; `properties` are ignored (debugEcho takes no credentials)."""
        parsed = parse_details(details, self.shared)
        last: list[Device] | None = None
        while True:
            wake = self._changed.current()
            current = [] if self._is_offline() else echo_devices(parsed)
            if current != last:
                yield current
                last = current
            if self.offline_file is None:
                await wake.wait()
            else:
                await first_of(wake.wait(), self._clock.sleep(self.poll_interval))
