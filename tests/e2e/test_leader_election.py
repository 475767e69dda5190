"""Leader election between `devplace scheduler --leader-elect` processes on one `devplace server` (issue #25 item 7).

Two candidates with short durations (lease 3 s, renew deadline 2 s, retry 0.3 s: margin for loaded cores): exactly
one holds the Lease `devplace/devplace-scheduler` (`kubectl get leases` names it). SIGKILL the holder: the other takes
over. Start the killed one again (a new identity), SIGSTOP the leader past its lease: the restarted one takes over.
SIGCONT: the paused one writes nothing more (every Lease revision after the takeover, read through a watch, is the new
holder's) and exits with code 1, as kube-scheduler exits when it loses its lease. Waits poll with deadlines (bounds on
a hang, never timing assertions); every process is stopped by its PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from pathlib import Path
from typing import Any

import pytest

from devplace import errors
from devplace.store import Store, open_store
from tests.e2e.kubeclients import KUBECTL, Kubectl
from tests.processes import ELECTION, Cluster, Daemon, Daemons, poll_until

pytestmark = pytest.mark.slow

WAIT = 30.0
"""Seconds any one wait may take before the test fails as hung (the takeovers need about lease + retry, 3.3 s)."""


def identity(daemon: Daemon) -> str:
    return f"{socket.gethostname()}_{daemon.pid}"


async def lease(store: Store) -> dict[str, Any] | None:
    with contextlib.suppress(errors.NotFound):
        return await store.get("Lease", "devplace-scheduler", "devplace")
    return None


async def held_by(store: Store, *candidates: Daemon) -> tuple[Daemon, dict[str, Any]] | None:
    found = await lease(store)
    holder = ((found or {}).get("spec") or {}).get("holderIdentity")
    for daemon in candidates:
        if daemon.running and holder == identity(daemon):
            assert found is not None
            return daemon, found
    return None


async def test_one_scheduler_leads_a_killed_leader_is_replaced_and_a_paused_one_writes_nothing_after_it_resumes(
    tmp_path: Path,
) -> None:
    async with Daemons(tmp_path) as daemons:
        config = tmp_path / "kubeconfig"
        cluster = Cluster(daemons, f"sqlite:///{tmp_path / 'devplace.db'}", tmp_path)
        cluster.server_args = (*cluster.server_args, "--write-kubeconfig", str(config))
        await cluster.start_server()
        store = open_store(cluster.url)
        try:
            with contextlib.suppress(errors.AlreadyExists):
                await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "devplace"}})
            args = ("scheduler", "--store", cluster.url, "--log-level", "info", *ELECTION)
            a = await daemons.spawn("scheduler-a", *args)
            b = await daemons.spawn("scheduler-b", *args)

            first, _ = await poll_until(lambda: held_by(store, a, b), "one scheduler holds the lease", timeout=WAIT)
            other = b if first is a else a
            assert "leads" not in other.output()
            listed = Kubectl(KUBECTL, config, tmp_path / "home")("get", "leases", "-n", "devplace").stdout.split()
            assert listed[:4] == ["NAME", "HOLDER", "AGE", "devplace-scheduler"]
            assert listed[4] == identity(first)

            await first.kill()
            second, taken = await poll_until(
                lambda: held_by(store, other), "the other scheduler takes over", timeout=WAIT, daemons=daemons
            )
            assert taken["spec"]["leaseTransitions"] == 1
            assert f"{identity(second)} leads" in second.output()

            await first.start()  # again: a new process, a new identity
            assert second.proc is not None
            assert first.pid is not None
            os.kill(second.proc.pid, signal.SIGSTOP)
            second.ended_by_us = True  # it is to exit by itself after SIGCONT
            try:
                third, took = await poll_until(
                    lambda: held_by(store, first), "the restarted scheduler takes over", timeout=WAIT
                )
                takeover = int(took["metadata"]["resourceVersion"])
                assert took["spec"]["leaseTransitions"] == 2
            finally:
                os.kill(second.proc.pid, signal.SIGCONT)
            assert await asyncio.wait_for(second.proc.wait(), WAIT) == 1
            assert "lost lease devplace/devplace-scheduler" in second.latest_output()

            # every Lease write after the takeover is the new holder's: the paused one renewed nothing on resuming
            after_exit = await lease(store)
            assert after_exit is not None
            mark = int(after_exit["metadata"]["resourceVersion"])
            holders = set()
            async with store.watch("Lease", "devplace", since=takeover) as events:
                while True:
                    event = await asyncio.wait_for(anext(events), WAIT)
                    holders.add(event.object["spec"]["holderIdentity"])
                    if event.revision >= mark:
                        break
            assert holders == {identity(third)}
        finally:
            await store.close()
