"""Whether the kubelet is there: a warning, and a condition on the agent's Node, while its socket is missing.

Without `device-plugins/kubelet.sock` the agent serves its plugins but cannot register them, so the node never offers
its devices and pods that need them stay Pending with no word why (a wrong `--kubelet-dir`, a missing host mount).
It must not stay silent, so while the socket is missing the agent says so where people look:
- its log: a warning naming the path when the socket is found missing (at start, or when it goes), again every
  `REMIND` seconds (the injected clock) while it stays missing, and an info line when it appears;
- its Node: a `DevplaceKubeletMissing` condition (reason `KubeletSocketMissing`, the path in the message), removed
  when the socket appears. The write is a compare-and-swap on the Node as stored that changes only that entry
  (`conditions.with_node_condition`; the kubelet owns the rest), and only when the Node exists: the kubelet registers
  its Node, the agent never creates one. A Node that does not exist yet, or a write that failed (the store did not
  answer), is tried again at the next reminder.

The plugin set (`pluginsets`) reports every look at the socket (`observe`); this part keeps one writer in flight
(counted busy on the supervisor, so a simulation settles only once the Node says what is true) and one reminder
loop, which costs nothing while the socket is there.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from devplace import errors
from devplace.agent import _conditions as conditions
from devplace.agent import _instances as instances
from devplace.clocks import Clock
from devplace.store import Store, cas
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

REMIND = 300.0
"""Seconds (injected clock) between warnings while kubelet.sock stays missing."""


class KubeletPresence:
    """Warnings and the Node condition while kubelet.sock is missing (see the module docstring)."""

    def __init__(
        self, node: str, socket: Path, store: Store, supervisor: Supervisor, clock: Clock, contention: Clock
    ) -> None:
        self.node = node
        self.socket = socket
        self.store = store
        self.supervisor = supervisor
        self.clock = clock
        self.contention = contention
        self.missing: bool | None = None
        """None until the socket was first looked at."""
        self._warned_at: float | None = None
        self._writing = False
        self._again = False
        self._owed = False
        """A write did not land (no Node yet, or a store error): the reminder loop tries again."""
        self._changed = asyncio.Event()

    @property
    def message(self) -> str:
        return (
            f"{self.socket} does not exist: the kubelet is not running or its device-plugins directory is not this "
            f"agent's (--kubelet-dir); device plugins of {self.node} cannot register"
        )

    def observe(self, present: bool) -> None:
        """One look at the socket (synchronous: it only logs and starts the writer on a change)."""
        missing = not present
        if missing == self.missing:
            return
        first = self.missing is None
        self.missing = missing
        self._changed.set()
        if missing:
            self._warn(reminder=False)
        elif not first:
            log.info("%s: %s is there again: registering device plugins", self.node, self.socket)
        self._write()

    async def run(self) -> None:
        """Remind while the socket stays missing, until cancelled (a supervised loop)."""
        while True:
            self._changed.clear()
            if not (self.missing or self._owed):
                await self._changed.wait()
                continue
            await self.clock.sleep(REMIND)
            if self.missing:
                self._warn(reminder=True)
            if self.missing or self._owed:
                self._write()

    def _warn(self, reminder: bool) -> None:
        """Log the warning: always when the socket is found missing, as a reminder at most every `REMIND` seconds."""
        now = self.clock.now()
        if reminder and self._warned_at is not None and now - self._warned_at < REMIND:
            return
        self._warned_at = now
        log.warning("%s: %s", self.node, self.message)

    def _write(self) -> None:
        if self._writing:
            self._again = True  # the writer in flight reads `missing` again before it ends
            return
        self._writing = True
        self.supervisor.spawn(f"kubelet condition of {self.node}", self._write_until_current)

    async def _write_until_current(self) -> None:
        try:
            while True:
                self._again = False
                await self._write_once(bool(self.missing))
                if not self._again:
                    return
        finally:
            self._writing = False

    async def _write_once(self, missing: bool) -> None:
        failure = conditions.Failure(conditions.KUBELET_SOCKET_MISSING, self.message) if missing else None
        now = instances.timestamp(self.clock.now())
        try:
            await cas(
                self.store,
                "Node",
                self.node,
                "",
                lambda obj: conditions.with_node_condition(obj, conditions.KUBELET_MISSING, failure, now),
                clock=self.contention,
            )
        except errors.NotFound:
            self._owed = missing
            if missing:
                log.info(
                    "%s: no Node %s in the store yet: the %s condition waits for it",
                    self.node,
                    self.node,
                    conditions.KUBELET_MISSING,
                )
            return
        except errors.DevplaceError as e:
            self._owed = True
            self._changed.set()
            log.warning(
                "%s: writing the %s condition of Node %s failed (%s); trying again in %.0fs",
                self.node,
                conditions.KUBELET_MISSING,
                self.node,
                e.message,
                REMIND,
            )
            return
        self._owed = False
