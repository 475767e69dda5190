"""Every part as its own process (issue #13 item 2): `devplace server` over sqlite or etcd and, talking to it over
loopback HTTP, `devplace controller`, `devplace scheduler` and per node a `devplace agent` and a `devplace kubelet-sim`
sharing a kubelet directory, with the built-in debugEcho discovery handler.

One run per store, on NODES nodes:
1. Seed 001's contention: one shared device of capacity 5 that every node sees. Every node runs a pod asking one
   slot, bound to the node, so only kubelets and agents decide; a pod that loses fails, and its node tries again until
   5 pods run. While the first pods are admitted, the API server and the agent of a node holding a slot are SIGKILLed,
   then started again.
2. Broker failover (seed 002, perNode brokers): a device of capacity 5 that every node sees gets a broker per node,
   5 Running and the others Pending. A node running a broker (and holding a shared slot, when one does) dies: its
   agent and kubelet-sim are SIGKILLed and its Node marked NotReady, as Kubernetes' node lifecycle controller would
   (devplace runs none). The controller drops the node from the Instances and frees its slots; a Pending broker
   elsewhere takes the freed broker slot, and a live node's pod the freed shared one.

Audited from outside the processes, through the server:
- no slot was ever held by two holders at once: every Instance revision since revision 0, from a watch opened before
  the run and resumed from the last revision it saw whenever the server went away (`devplace.sim._invariants`);
- nothing committed was lost: every write the server acknowledged to the test (ledger ConfigMaps updated by CAS all
  along, the pods it created) is in that history and still present or superseded; every Allocate a kubelet
  acknowledged (a Running pod's `allocatedResourcesStatus`) is in the history as that slot claimed by that node; and
  at the end the shared device's slots are held by exactly the nodes whose pods run.

Waits poll the server with deadlines (bounds on a hang, never timing assertions). Every process is stopped by its PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from devplace import errors
from devplace.sim._invariants import UsageHistory
from devplace.sim._kubelets import recorded_allocation
from devplace.store import Store, cas, open_store
from devplace.store._base import rfc3339
from tests.etcds import running_etcd
from tests.processes import Cluster, Daemons, poll_until

pytestmark = pytest.mark.slow

NODES = [f"node-{i}" for i in range(10)]
"""Seed 001's ten nodes: 23 Python processes, about 30 s per store on two loaded cores."""
SHARED_CAPACITY = 5
BROKER_CAPACITY = 5
"""Half the nodes run a broker and half hold a shared slot: the node that dies is one with both (but in 1 run of
252, when the two halves do not meet)."""
PREFIX = "akri.sh"
WAIT = 60.0
"""Seconds any one wait may take before the test fails as hung."""


def debug_echo(name: str, description: str, capacity: int, brokers: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "discoveryHandler": {"name": "debugEcho", "discoveryDetails": f"descriptions: [{description}]"},
        "capacity": capacity,
    }
    if brokers:
        broker = {"name": "broker", "image": "nginx", "resources": {"limits": {"{{PLACEHOLDER}}": "1"}}}
        spec["brokerSpec"] = {"brokerPodSpec": {"containers": [broker]}}
    return {"apiVersion": "akri.sh/v0", "kind": "Configuration", "metadata": {"name": name}, "spec": spec}


def slot_pod(name: str, node: str, resource: str) -> dict[str, Any]:
    limits = {resource: "1"}
    container = {"name": "main", "image": "app", "resources": {"requests": limits, "limits": limits}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "contender"}},
        "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [container]},
    }


def phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


@dataclass
class Audit:
    """What a watch of every kind from revision 0 saw: each object revision, Instance states and Allocates."""

    usage: UsageHistory = field(default_factory=UsageHistory)
    revisions: set[tuple[str, str, int]] = field(default_factory=set)
    """(kind, name, revision) of every event."""
    claims: set[tuple[str, str]] = field(default_factory=set)
    """(slot, holder) of every slot holder any Instance state showed."""
    allocations: set[tuple[str, str, str]] = field(default_factory=set)
    """(pod, node, device) of every Allocate a kubelet acknowledged in a Running pod's status."""
    revision: int = 0
    error: str = ""
    """Why the watch ended for good (a `Gone`: the history it needs was compacted)."""

    def record(self, kind: str, event_type: str, obj: dict[str, Any], revision: int) -> None:
        self.revisions.add((kind, obj["metadata"]["name"], revision))
        if kind == "Instance":
            self.usage.record(event_type, obj)
            self.claims.update((slot, holder) for slot, holder in self.usage.latest()[obj["metadata"]["name"]].items())
        elif kind == "Pod" and event_type != "DELETED" and phase(obj) == "Running":
            allocation = recorded_allocation(obj)
            for container in allocation.containers if allocation is not None else []:
                for ids in container.devices.values():
                    self.allocations.update((obj["metadata"]["name"], obj["spec"]["nodeName"], d) for d in ids)

    async def follow(self, store: Store) -> None:
        """Record every event from revision 0 on; when the server goes away, open the watch again from the last
        revision seen (polling a restarting server)."""
        while True:
            try:
                async with store.watch(since=self.revision) as events:
                    async for event in events:
                        self.record(event.object["kind"], event.type, event.object, event.revision)
                        self.revision = event.revision
            except errors.Unavailable:
                await asyncio.sleep(0.2)  # the server is restarting: try again, from where the history stopped
            except errors.DevplaceError as e:
                self.error = f"{type(e).__name__}: {e.message}"
                return


@dataclass
class Ledger:
    """Writes the server acknowledged: ConfigMaps updated by CAS in a loop through the server, before, during and
    after its restart. A write that raised was not acknowledged (it may or may not have landed)."""

    store: Store
    names: tuple[str, ...] = ("ledger-0", "ledger-1", "ledger-2")
    acks: list[tuple[str, int, int]] = field(default_factory=list)
    """(name, resourceVersion, value) of every acknowledged write."""

    async def run(self) -> None:
        for name in self.names:
            made = await self.store.create(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
            )
            self.acks.append((name, int(made["metadata"]["resourceVersion"]), 0))
        value = 0
        while True:
            value += 1
            name = self.names[value % len(self.names)]

            def bump(current: dict[str, Any], value: int = value) -> dict[str, Any]:
                return {**current, "data": {"value": str(value)}}

            try:
                written = await cas(self.store, "ConfigMap", name, "default", bump)
            except errors.Unavailable:
                await asyncio.sleep(0.1)  # the server is restarting
                continue
            self.acks.append((name, int(written.object["metadata"]["resourceVersion"]), value))
            await asyncio.sleep(0.02)  # a steady trickle of writes, not a flood


@contextlib.contextmanager
def backing_store(kind: str, directory: Path) -> Iterator[str]:
    """The store the server opens: a sqlite file, or a fresh etcd on loopback (stopped by PID)."""
    if kind == "sqlite":
        yield f"sqlite:///{directory}/devplace.db"
        return
    with running_etcd(directory / "etcd") as etcd:
        yield etcd.url


@contextlib.asynccontextmanager
async def tasks(*coroutines: Any) -> AsyncIterator[list[asyncio.Task[Any]]]:
    running = [asyncio.ensure_future(c) for c in coroutines]
    try:
        yield running
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)


class Run:
    """The test's view of the cluster, all through the server."""

    def __init__(self, cluster: Cluster, store: Store) -> None:
        self.cluster = cluster
        self.store = store
        self.daemons = cluster.daemons
        self.created: list[tuple[str, int]] = []
        """(pod, resourceVersion) of every pod create the server acknowledged."""

    async def wait(self, check: Callable[[], Awaitable[Any]], what: str) -> Any:
        return await poll_until(check, what, timeout=WAIT, daemons=self.daemons, interval=0.2)

    async def instance(self, configuration: str) -> dict[str, Any] | None:
        items = (await self.store.list("Instance", "default")).items
        return next((i for i in items if i["spec"]["configurationName"] == configuration), None)

    async def pods(self, label: str | None = None) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in (await self.store.list("Pod", "default", label)).items}

    async def brokers(self) -> dict[str, tuple[str, str]]:
        """Broker pod -> (phase, node)."""
        pods = await self.pods("akri.sh/configuration=cams")
        return {name: (phase(p), p["spec"].get("nodeName") or "") for name, p in pods.items()}

    async def create_pod(self, name: str, node: str, resource: str) -> None:
        made = await self.store.create(slot_pod(name, node, resource))
        self.created.append((name, int(made["metadata"]["resourceVersion"])))

    async def contend(
        self,
        nodes: list[str],
        resource: str,
        running: dict[str, str],
        label: str,
        *,
        chaos: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Every node of `nodes` without a Running pod in `running` (node -> pod) runs one asking a slot of
        `resource`, again and again while it loses, until SHARED_CAPACITY pods run. `chaos()` runs once, as soon
        as the first round's first pod runs."""
        for attempt in range(40):
            if len(running) >= SHARED_CAPACITY:
                return
            round_ = {node: f"{label}-{node}-{attempt}" for node in nodes if node not in running}
            for node, name in round_.items():
                await self.create_pod(name, node, resource)
            if chaos is not None and attempt == 0:

                async def one_runs(names: dict[str, str] = round_) -> bool:
                    pods = await self.pods("app=contender")
                    return any(phase(pods[name]) == "Running" for name in names.values() if name in pods)

                await self.wait(one_runs, "a first contender runs")
                await chaos()

            async def decided(names: dict[str, str] = round_) -> dict[str, dict[str, Any]] | None:
                pods = await self.pods("app=contender")
                if all(phase(pods[name]) in ("Running", "Failed") for name in names.values()):
                    return pods
                return None

            pods = await self.wait(decided, f"every pod of {label} round {attempt} has the kubelet's verdict")
            for node, name in round_.items():
                if phase(pods[name]) == "Running":
                    running[node] = name
                else:
                    assert pods[name]["status"]["reason"] in (f"OutOf{resource}", "UnexpectedAdmissionError")
        raise AssertionError(f"{label}: {len(running)} pods run after 40 rounds: {running}")

    async def mark_not_ready(self, node: str) -> None:
        """What Kubernetes' node lifecycle controller does when a kubelet stops posting status."""

        def not_ready(current: dict[str, Any]) -> dict[str, Any]:
            status = dict(current.get("status") or {})
            kept = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
            ready = {
                "type": "Ready",
                "status": "Unknown",
                "reason": "NodeStatusUnknown",
                "message": "Kubelet stopped posting node status.",
                "lastTransitionTime": rfc3339(time.time()),
            }
            return {**current, "status": {**status, "conditions": [*kept, ready]}}

        await cas(self.store, "Node", node, "", not_ready)


@pytest.mark.parametrize("backing", ["sqlite", "etcd"])
async def test_every_part_as_a_process_shares_slots_fails_brokers_over_and_survives_sigkills(
    backing: str, sock_dir: Path
) -> None:
    """`sock_dir` is short: it holds every node's kubelet directory (AF_UNIX socket paths are limited to 107 bytes)."""
    with backing_store(backing, sock_dir) as backing_url:
        async with Daemons(sock_dir) as daemons:
            cluster = Cluster(
                daemons,
                backing_url,
                sock_dir,
                controller_args=("--log-level", "warning", "--resource-prefix", PREFIX, "--node-grace", "1"),
                kubelet_args=("--log-level", "warning", "--node-status-interval", "0.2"),
                agent_args=(
                    "--log-level",
                    "warning",
                    "--resource-prefix",
                    PREFIX,
                    "--release-grace",
                    "3",
                    "--podresources-poll",
                    "0.5",
                ),
            )
            await cluster.start_server()
            store = open_store(cluster.url)
            audit = Audit()
            try:
                async with tasks(audit.follow(store)):
                    await run_scenario(Run(cluster, store), audit)
            except BaseException:
                print(daemons.report(daemons.all, tail=3000))  # shown by pytest with the failure
                raise
            finally:
                await store.close()
            running = [d for d in daemons.all if d.running]
            codes = await asyncio.gather(*(d.stop() for d in running))
            unclean = [d for d, code in zip(running, codes, strict=True) if code != 0]
            assert not unclean, f"SIGTERM should stop every part with exit code 0\n{daemons.report(unclean)}"


async def run_scenario(run: Run, audit: Audit) -> None:
    cluster, store = run.cluster, run.store
    await cluster.start_control_plane()
    for node in NODES:
        await cluster.add_node(node)
    await store.create(debug_echo("shared", "my-resource", SHARED_CAPACITY))
    await store.create(debug_echo("cams", "cam", BROKER_CAPACITY, brokers=True))

    async def shared_everywhere() -> dict[str, Any] | None:
        instance = await run.instance("shared")
        if instance is None or sorted(instance["spec"]["nodes"]) != NODES:
            return None
        resource = f"{PREFIX}/{instance['metadata']['name']}"
        for node in (await store.list("Node")).items:
            if node["status"]["allocatable"].get(resource) != str(SHARED_CAPACITY):
                return None
        return instance

    shared = await run.wait(shared_everywhere, "every node advertises the shared device's 5 slots")
    resource = f"{PREFIX}/{shared['metadata']['name']}"

    async def brokers_run() -> bool:
        found = await run.brokers()
        return len(found) == len(NODES) and sorted(p for p, _ in found.values()).count("Running") == BROKER_CAPACITY

    await run.wait(brokers_run, f"a broker per node, {BROKER_CAPACITY} of them Running")

    # 1. seed 001's contention, with the API server and an agent holding a slot SIGKILLed and restarted meanwhile
    ledger = Ledger(store)

    async def chaos() -> None:
        pods = await run.pods("app=contender")
        holder = next(p["spec"]["nodeName"] for p in pods.values() if phase(p) == "Running")
        assert cluster.server is not None
        await asyncio.gather(cluster.server.kill(), cluster.agents[holder].kill())
        await cluster.start_server()
        await cluster.agents[holder].start()  # the slot its node holds survives (checked at the end)
        await cluster.agents[holder].wait_serving(cluster.daemons)

    running: dict[str, str] = {}
    async with tasks(ledger.run()):
        await run.contend(NODES, resource, running, "contend", chaos=chaos)

        # 2. broker failover: a node running a broker dies and is marked NotReady
        found = await run.brokers()
        victim = sorted((node not in running, node) for p, node in found.values() if p == "Running")[0][1]
        await asyncio.gather(cluster.agents[victim].kill(), cluster.kubelets[victim].kill())
        await run.mark_not_ready(victim)
        live = [n for n in NODES if n != victim]

        async def failed_over() -> bool:
            found = await run.brokers()
            on = sorted(node for p, node in found.values() if p == "Running")
            cams, shared_now = await run.instance("cams"), await run.instance("shared")
            return (
                len(on) == BROKER_CAPACITY
                and victim not in on
                and cams is not None
                and shared_now is not None
                and victim not in cams["spec"]["nodes"] + shared_now["spec"]["nodes"]
                and victim not in cams["spec"]["deviceUsage"].values()
                and victim not in shared_now["spec"]["deviceUsage"].values()
            )

        await run.wait(failed_over, f"brokers fail over from {victim} and its slots are freed")
        running.pop(victim, None)
        await run.contend(live, resource, running, "retake")
    assert len(ledger.acks) > len(ledger.names)

    # the audit: the watch caught up with everything the store did
    head = await store.revision()

    async def caught_up() -> bool:
        assert not audit.error, f"the audit watch ended: {audit.error}"
        return audit.revision >= head

    await run.wait(caught_up, "the audit watch reached the store's revision")
    assert audit.usage.double_bookings() == []
    for name, revision, _ in ledger.acks:
        assert ("ConfigMap", name, revision) in audit.revisions, f"acknowledged write {name}@{revision} is lost"
    for name in ledger.names:
        [*_, (_, revision, value)] = [a for a in ledger.acks if a[0] == name]
        current = await store.get("ConfigMap", name, "default")
        assert int(current["metadata"]["resourceVersion"]) >= revision
        assert int(current["data"]["value"]) >= value  # that write, or a later one (maybe not acknowledged)
    for name, revision in run.created:
        assert ("Pod", name, revision) in audit.revisions, f"acknowledged create of pod {name} is lost"
    assert audit.allocations, "kubelets recorded their Allocates"
    for pod, node, slot in audit.allocations:
        assert (slot, node) in audit.claims, f"{pod} runs on {node} with {slot}, which {node} never held"

    # the end state: the shared device's slots are held by exactly the live nodes whose pods run
    instance = await run.instance("shared")
    assert instance is not None
    held = {slot: holder for slot, holder in instance["spec"]["deviceUsage"].items() if holder}
    assert sorted(held.values()) == sorted(running)
    pods = await run.pods("app=contender")
    for node, name in running.items():
        assert phase(pods[name]) == "Running"
        allocation = recorded_allocation(pods[name])
        assert allocation is not None
        [slot] = allocation.containers[0].devices[resource]
        assert held[slot] == node
    assert len(audit.usage.states[instance["metadata"]["name"]]) > SHARED_CAPACITY
