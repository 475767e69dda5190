"""Pods with ResourceClaims scheduled by two `devplace scheduler --leader-elect` processes while the leader is
SIGKILLed, then SIGSTOPped past its lease and resumed (issue #25, item 7 and its last test): no device is ever
allocated twice, audited over a watch.

One `devplace server` (SQLite), one `devplace controller --leader-elect` (the claim lifecycle: a claim per pod from
a ResourceClaimTemplate, deleted with its pod, its Instance slots freed) and two schedulers with short leases (3 s,
renew deadline 2 s, retry 0.3 s). Four nodes with two GPUs each (Instances of capacity 1 and their ResourceSlices,
written through the store as the agent would), so 8 devices, and more pods than devices, created in waves while pods
are deleted: some wait, Pending with a reason, and get a device when an earlier pod goes. Each leader is stopped as
it takes a slot (`Auditor.arm`), between the slot write and the claim write of a commit, while pods are deleted: the
next leader may then allocate that claim another device, and must free the slot the stopped one took for it (the
scheduler's `_release_slots` after the claim write; without it the device stayed held and pods waited for good).

The `Auditor` follows one store watch of every kind from before anything is written, in revision order, and checks
at every Instance and ResourceClaim event:
- no Instance slot passes straight from one claim's holder (`D:<ns>/<claim>:<node>`) to another's: a slot is freed
  before it is taken again;
- no device (pool, device of `status.allocation.devices.results`) is in two claims' allocations at once;
- a claim's allocation names only devices whose slot that claim holds on that node (the scheduler takes the slot
  before it writes the allocation, the claim lifecycle deallocates or deletes the claim before it frees the slot, so
  this holds at every revision; a slot held for a claim not yet allocated is allowed);
- a free slot is taken only for a claim not allocated yet (or whose allocation names it): a scheduler that decided
  before another allocated the claim, a leader writing after it lost its lease, takes one for a claim allocated
  elsewhere.
At the end (a poll with a deadline, a bound on a hang, never a timing assertion): the pods are those created less
those deleted, every pod is bound or Pending with a reason, as many are bound as there are devices or pods, every
allocated claim is reserved for its pod, on its pod's node, and no slot is held for a claim that does not name it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from devplace import errors
from devplace.api import DeviceSelector, Requirement, compile_class
from devplace.store import Event, Store, open_store
from tests.processes import ELECTION, Cluster, Daemon, Daemons, poll_until
from tests.scheduler.builders import claim_pod_object, gpu_instance_object, gpu_slice, node_object

WAIT = 45.0
"""Seconds any one wait may take before the test fails as hung (a takeover needs about lease + retry, 3.3 s)."""
NODES = ("node-a", "node-b", "node-c", "node-d")
GPUS_PER_NODE = 2
DEVICES = len(NODES) * GPUS_PER_NODE
CLASS = "gpus"
TEMPLATE = "one-gpu"

# -- the cluster's objects (the shapes of tests/scheduler/test_claim_scheduling.py) --------------------------------


def template() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": TEMPLATE, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}},
    }


def instance_name(node_name: str, i: int) -> str:
    return f"gpu-{node_name.removeprefix('node-')}{i}"


async def seed(store: Store) -> dict[tuple[str, str], str]:
    """The nodes, their GPUs and slices, the DeviceClass and the template; the map device (pool, name) -> its slot."""
    slots: dict[tuple[str, str], str] = {}
    for where in NODES:
        await store.create(node_object(where))
        instances = [gpu_instance_object(instance_name(where, i), where, "80G") for i in range(GPUS_PER_NODE)]
        for inst in instances:
            await store.create(inst)
            slots[(where, inst["metadata"]["name"])] = f"{inst['metadata']['name']}-0"
        await store.create(gpu_slice(where, instances))
    await store.create(compile_class(CLASS, DeviceSelector([[Requirement("Kind", "In", ("nvidia-gpu",))]])))
    await store.create(template())
    return slots


# -- the auditor ---------------------------------------------------------------------------------------------------


def allocated_devices(claim: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(pool, device) of each result of a claim's `status.allocation`."""
    allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
    return [
        (str(r.get("pool")), str(r.get("device")))
        for r in (allocation.get("devices") or {}).get("results") or ()
        if isinstance(r, Mapping)
    ]


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name')}"


@dataclass
class Auditor:
    """The invariants of the module docstring, checked at every event of one watch in revision order.

    `slots` maps each device (pool, device) to the Instance slot it is (`<instance>-0` here); `violations` collects
    each broken rule with the revision it broke at."""

    slots: Mapping[tuple[str, str], str]
    usage: dict[str, dict[str, str]] = field(default_factory=dict)
    """Instance name -> its deviceUsage as last seen."""
    allocations: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Claim `namespace/name` -> the devices its allocation names (allocated claims only)."""
    revision: int = 0
    events: int = 0
    violations: list[str] = field(default_factory=list)
    taken: int = 0
    """Free slots taken for a claim so far (the first write of the scheduler's commit)."""
    slot_taken: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once `taken` reaches the mark `arm` set: the moment to stop the leader between a slot write and the
    claim write that follows it."""
    _mark: int = 1
    _reported: set[str] = field(default_factory=set)

    def arm(self, slots: int) -> None:
        """Set `slot_taken` once `slots` more free slots have been taken."""
        self._mark = self.taken + slots
        self.slot_taken.clear()

    async def reached(self, revision: int) -> bool:
        return self.revision >= revision

    def holder(self, device: tuple[str, str]) -> str | None:
        slot = self.slots.get(device)
        if slot is None:
            return None
        return self.usage.get(slot.rsplit("-", 1)[0], {}).get(slot)

    def see(self, event: Event) -> None:
        self.revision = max(self.revision, event.revision)
        kind = event.object.get("kind")
        if kind not in ("Instance", "ResourceClaim"):
            return
        self.events += 1
        gone = event.type == "DELETED"
        if kind == "Instance":
            self._instance(event.object, gone, event.revision)
        else:
            self._claim(event.object, gone, event.revision)
        self._consistent(event.revision)

    def _instance(self, obj: Mapping[str, Any], gone: bool, revision: int) -> None:
        name = str((obj.get("metadata") or {}).get("name"))
        before = self.usage.get(name, {})
        after: dict[str, str] = {} if gone else dict((obj.get("spec") or {}).get("deviceUsage") or {})
        for slot in sorted(set(before) | set(after)):
            old, new = before.get(slot, ""), after.get(slot, "")
            if old.startswith("D:") and new.startswith("D:") and old != new:
                self.violations.append(f"r{revision}: slot {slot} passed from {old!r} straight to {new!r}")
            if not old and new.startswith("D:"):
                claim = new[2:].rpartition(":")[0]
                named = [d for d in self.allocations.get(claim, ()) if self.slots.get(d) == slot]
                if claim in self.allocations and not named:
                    self.violations.append(
                        f"r{revision}: slot {slot} taken for {claim}, allocated {self.allocations[claim]} already"
                    )
                self.taken += 1
                if self.taken >= self._mark:
                    self.slot_taken.set()
        self.usage[name] = after

    def _claim(self, obj: Mapping[str, Any], gone: bool, revision: int) -> None:
        key = _key(obj)
        devices = [] if gone else allocated_devices(obj)
        if devices:
            for other, theirs in self.allocations.items():
                for device in sorted(set(devices) & set(theirs)):
                    if other != key:
                        self.violations.append(f"r{revision}: device {device} allocated to {key} and to {other}")
            self.allocations[key] = devices
        else:
            self.allocations.pop(key, None)

    def _consistent(self, revision: int) -> None:
        for key, devices in self.allocations.items():
            for device in devices:
                held = self.holder(device)
                broken = f"claim {key} is allocated {device} but its slot is held by {held!r}"
                if held != f"D:{key}:{device[0]}" and broken not in self._reported:
                    self._reported.add(broken)  # once, not again at every later event
                    self.violations.append(f"r{revision}: {broken}")

    async def follow(self, store: Store, ready: asyncio.Event) -> None:
        """Every event of the store from now on (`ready` is set once the watch is registered)."""
        async with store.watch() as events:
            self.revision = events.revision
            ready.set()
            async for event in events:
                self.see(event)


# -- the processes ---------------------------------------------------------------------------------------------------


def identity(daemon: Daemon) -> str:
    return f"{socket.gethostname()}_{daemon.pid}"


async def lease_holder(store: Store) -> str | None:
    with contextlib.suppress(errors.NotFound):
        found = await store.get("Lease", "devplace-scheduler", "devplace")
        return str((found.get("spec") or {}).get("holderIdentity") or "") or None
    return None


async def leader(store: Store, *candidates: Daemon) -> Daemon | None:
    holder = await lease_holder(store)
    return next((d for d in candidates if d.running and holder == identity(d)), None)


def scheduled(p: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((c for c in (p.get("status") or {}).get("conditions") or () if c.get("type") == "PodScheduled"), None)


@dataclass
class Workload:
    """The pods this test made and deleted, by name."""

    store: Store
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    async def wave(self, count: int) -> list[str]:
        names = [f"job-{len(self.created) + i:02d}" for i in range(count)]
        self.created.extend(names)
        await asyncio.gather(*(self.store.create(claim_pod_object(n, template=TEMPLATE)) for n in names))
        return names

    async def pods(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in (await self.store.list("Pod", "default")).items}

    async def delete_bound(self, count: int) -> list[str]:
        """Delete `count` of the bound pods (the oldest first), once that many are bound: after a takeover the new
        leader may not have bound the last wave yet (on a loaded machine), and deleting fewer would leave the next
        wave short of the free devices it is counted on."""

        async def chosen() -> list[str] | None:
            bound = [n for n, p in sorted((await self.pods()).items()) if p["spec"].get("nodeName")]
            return bound[:count] if len(bound) >= count else None

        return await self.delete(await poll_until(chosen, f"{count} pods bound", timeout=WAIT))

    async def delete(self, names: Iterable[str]) -> list[str]:
        chosen = list(names)
        for name in chosen:
            await self.store.delete("Pod", name, "default")
            self.deleted.append(name)
        return chosen

    async def any_bound(self, names: Iterable[str]) -> bool:
        pods = await self.pods()
        return any((pods.get(n) or {}).get("spec", {}).get("nodeName") for n in names)


async def settled(store: Store, work: Workload, slots: Mapping[tuple[str, str], str]) -> str | None:
    """None once the cluster is as the module docstring's end state says; else what is not yet so."""
    pods = await work.pods()
    want = sorted(set(work.created) - set(work.deleted))
    if sorted(pods) != want:
        return f"pods {sorted(pods)}, want {want}"
    claims = {c["metadata"]["name"]: c for c in (await store.list("ResourceClaim", "default")).items}
    bound = 0
    bound_claims: set[str] = set()
    for name, p in pods.items():
        statuses = (p.get("status") or {}).get("resourceClaimStatuses") or ()
        claim = claims.get(statuses[0]["resourceClaimName"]) if statuses else None
        where = p["spec"].get("nodeName")
        if where:
            bound += 1
            if claim is None or [d[0] for d in allocated_devices(claim)] != [where]:
                return f"bound pod {name} on {where}: its claim is {claim}"
            bound_claims.add(claim["metadata"]["name"])
            reserved = [(e["name"], e["uid"]) for e in claim["status"].get("reservedFor") or ()]
            if reserved != [(name, p["metadata"]["uid"])]:
                return f"bound pod {name}: its claim is reserved for {reserved}"
        else:
            condition = scheduled(p)
            if condition is None or condition.get("status") != "False" or not condition.get("message"):
                return f"pending pod {name} has no reason: {condition}"
    if bound != min(len(pods), DEVICES):
        return f"{bound} pods bound, {len(pods)} pods and {DEVICES} devices"
    allocated = {n for n, c in claims.items() if allocated_devices(c)}
    if allocated != bound_claims:
        return f"claims {sorted(allocated - bound_claims)} are allocated for no bound pod"
    named = {slots[d]: f"D:default/{n}:{d[0]}" for n, c in claims.items() for d in allocated_devices(c)}
    for inst in (await store.list("Instance", "default")).items:
        for slot, holder in inst["spec"]["deviceUsage"].items():
            if holder != named.get(slot, ""):
                return f"slot {slot} is held by {holder!r}, the allocations name {named.get(slot, 'nobody')}"
    return None


# -- the auditor's rules, on events made here (fast) -----------------------------------------------------------------

SLOTS = {("node-a", "gpu-a0"): "gpu-a0-0", ("node-a", "gpu-a1"): "gpu-a1-0"}


def instance_event(revision: int, usage: Mapping[str, str], name: str = "gpu-a0") -> Event:
    obj = {"kind": "Instance", "metadata": {"name": name, "namespace": "default"}, "spec": {"deviceUsage": usage}}
    return Event("MODIFIED", obj, revision)


def claim_event(revision: int, claim: str, device: str | None, *, gone: bool = False) -> Event:
    status = {}
    if device is not None:
        result = {"request": "gpu", "driver": "devplace.io", "pool": "node-a", "device": device}
        status = {"allocation": {"devices": {"results": [result]}}}
    obj = {"kind": "ResourceClaim", "metadata": {"name": claim, "namespace": "default"}, "status": status}
    return Event("DELETED" if gone else "MODIFIED", obj, revision)


def held(claim: str) -> str:
    return f"D:default/{claim}:node-a"


def test_the_auditor_accepts_the_commit_order_slot_then_claim_and_claim_then_slot_on_release() -> None:
    auditor = Auditor(SLOTS)
    for event in (
        instance_event(1, {"gpu-a0-0": ""}),
        instance_event(2, {"gpu-a0-0": held("one")}),  # the scheduler takes the slot...
        claim_event(3, "one", "gpu-a0"),  # ...then writes the allocation
        claim_event(4, "one", "gpu-a0", gone=True),  # the lifecycle deletes the claim...
        instance_event(5, {"gpu-a0-0": ""}),  # ...then frees the slot
        instance_event(6, {"gpu-a0-0": held("two")}),
        claim_event(7, "two", "gpu-a0"),
    ):
        auditor.see(event)
    assert auditor.violations == []
    assert (auditor.events, auditor.revision) == (7, 7)


def test_the_auditor_names_a_slot_passed_straight_from_one_claim_to_another() -> None:
    auditor = Auditor(SLOTS)
    auditor.see(instance_event(1, {"gpu-a0-0": held("one")}))
    auditor.see(instance_event(2, {"gpu-a0-0": held("two")}))
    assert auditor.violations == [
        "r2: slot gpu-a0-0 passed from 'D:default/one:node-a' straight to 'D:default/two:node-a'"
    ]


def test_the_auditor_names_a_device_allocated_to_two_claims_and_an_allocation_without_its_slot() -> None:
    auditor = Auditor(SLOTS)
    auditor.see(instance_event(1, {"gpu-a0-0": held("one")}))
    auditor.see(claim_event(2, "one", "gpu-a0"))
    auditor.see(claim_event(3, "two", "gpu-a0"))
    assert auditor.violations == [
        "r3: device ('node-a', 'gpu-a0') allocated to default/two and to default/one",
        "r3: claim default/two is allocated ('node-a', 'gpu-a0') but its slot is held by 'D:default/one:node-a'",
    ]


def test_the_auditor_names_a_slot_taken_for_a_claim_allocated_another_device() -> None:
    auditor = Auditor(SLOTS)
    auditor.see(instance_event(1, {"gpu-a0-0": held("one")}))
    auditor.see(claim_event(2, "one", "gpu-a0"))
    auditor.see(instance_event(3, {"gpu-a1-0": held("one")}, name="gpu-a1"))
    assert auditor.violations == ["r3: slot gpu-a1-0 taken for default/one, allocated [('node-a', 'gpu-a0')] already"]


def test_the_auditor_names_a_slot_freed_while_its_claim_is_still_allocated() -> None:
    auditor = Auditor(SLOTS)
    auditor.see(instance_event(1, {"gpu-a0-0": held("one")}))
    auditor.see(claim_event(2, "one", "gpu-a0"))
    auditor.see(instance_event(3, {"gpu-a0-0": ""}))
    assert auditor.violations == ["r3: claim default/one is allocated ('node-a', 'gpu-a0') but its slot is held by ''"]


# -- the processes' test -------------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_two_schedulers_with_a_killed_and_a_paused_leader_never_allocate_a_device_twice(tmp_path: Path) -> None:
    async with Daemons(tmp_path) as daemons:
        cluster = Cluster(daemons, f"sqlite:///{tmp_path / 'devplace.db'}", tmp_path)
        await cluster.start_server()
        store = open_store(cluster.url)
        follower: asyncio.Task[None] | None = None
        try:
            await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "devplace"}})
            slots = {
                (where, instance_name(where, i)): f"{instance_name(where, i)}-0" for where in NODES for i in (0, 1)
            }
            auditor = Auditor(slots)
            watching = asyncio.Event()
            follower = asyncio.create_task(auditor.follow(store, watching))
            await asyncio.wait_for(watching.wait(), WAIT)
            assert await seed(store) == slots

            await daemons.spawn("controller", "controller", "--store", cluster.url, "--log-level", "warning", *ELECTION)
            args = ("scheduler", "--store", cluster.url, "--log-level", "info", *ELECTION)
            a = await daemons.spawn("scheduler-a", *args)
            b = await daemons.spawn("scheduler-b", *args)
            first = await poll_until(lambda: leader(store, a, b), "a scheduler leads", timeout=WAIT, daemons=daemons)
            other = b if first is a else a
            work = Workload(store)

            # wave 1: 6 pods; the leader is SIGKILLed as soon as it has taken a third slot (that claim's write may be
            # in flight or not yet sent: the next leader may then choose the claim another device)
            auditor.arm(3)
            await work.wave(6)
            await asyncio.wait_for(auditor.slot_taken.wait(), WAIT)
            await first.kill()
            await poll_until(lambda: leader(store, other), "the other takes over", timeout=WAIT, daemons=daemons)
            second = other
            await first.start()  # a new process, a new identity: the candidate for the next takeover

            # wave 2: two bound pods go and 6 come (10 pods, 8 devices); the leader is SIGSTOPped as soon as it has
            # taken a third slot; while it is paused two more bound pods go (devices the next leader's first fit
            # prefers) and 4 more come
            await work.delete_bound(2)
            auditor.arm(3)
            await work.wave(6)
            await asyncio.wait_for(auditor.slot_taken.wait(), WAIT)
            assert second.proc is not None
            os.kill(second.proc.pid, signal.SIGSTOP)
            second.ended_by_us = True  # it is to exit by itself after SIGCONT
            try:
                await work.delete_bound(2)
                await work.wave(4)
                await poll_until(lambda: leader(store, first), "the restarted one takes over", timeout=WAIT)
            finally:
                os.kill(second.proc.pid, signal.SIGCONT)
            assert await asyncio.wait_for(second.proc.wait(), WAIT) == 1
            assert "lost lease devplace/devplace-scheduler" in second.latest_output()

            # wave 3: a pending pod and two bound ones go, 4 come: 13 pods for 8 devices
            pending = [n for n, p in sorted((await work.pods()).items()) if not p["spec"].get("nodeName")]
            await work.delete(pending[:1])
            await work.delete_bound(2)
            await work.wave(4)

            async def done() -> bool:
                assert auditor.violations == [], "the auditor saw a broken rule"  # fail at once, not at the deadline
                return await settled(store, work, slots) is None

            try:
                await poll_until(done, "the pods settle", timeout=WAIT, daemons=daemons)
            except AssertionError as e:
                state = await settled(store, work, slots)
                logs = daemons.report(daemons.all, tail=1500)
                raise AssertionError(f"{e}: {state}; the auditor saw {auditor.violations}\n{logs}") from None
            mark = await store.revision()
            await poll_until(lambda: auditor.reached(mark), "the auditor catches up", timeout=WAIT)
            assert not follower.done()
            assert auditor.violations == []
            assert len(work.created) == 20
            assert auditor.events > 0
        finally:
            if follower is not None:
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower
            await store.close()
