"""Issue #26: one device served by both paths through devplace's scheduler.

One camera of capacity 2 on node-a, published both to the Instance-level device plugin (pods ask for
`<prefix>/<instance>` directly, or for a ResourceClass `rc.devplace.io/cam`: the two variants) and as a DRA device (a
ResourceSlice of node-a's pool, selected by the Configuration's DeviceClass through a ResourceClaimTemplate). Pods of
both kinds are created and deleted in waves (pod churn): each wave creates 0-3 pods of each kind, the fleet settles,
running pods finish (phase Succeeded) or are deleted, finished and pending ones are deleted at random (seeded).
devplace's scheduler places every pod: the DRA ones by allocating their claims (taking the slot in `deviceUsage` with
holder `D:<namespace>/<claim>:<node>` before it writes the allocation), the device-path ones against what the node's
plugins advertise. (One node: with the device shared by two nodes, device-path pods of the two nodes race each other
as in seed 001, which is not what this test is about.)

An auditor follows every Pod and Instance change through one store watch and checks, at every revision:
- the Instance has exactly its capacity's slots, and no slot passes straight from one holder to another;
- a claim holds at most one slot (each asks for one);
- every Running pod is backed by a slot: a DRA pod's claim holds one with its node, and the node's Running
  device-path pods are no more than the slots its node holder (`<node>`) has. So at no moment do more pods run on the
  device than it has slots (no over-commit).
At the end: no DRA pod failed (no prepare error), every other pod is Running, Succeeded or Pending with the
scheduler's reason, every held slot belongs to a running pod and every running pod has its slot.

Every pod the scheduler binds is admitted (no prepare failure, no Allocate refused). Three races broke that and are
closed: a burst takes its claims' slots before it binds device-path pods; the Instance-level plugin's
GetPreferredAllocation reads the Instance from the store when DRA serves the device; and DRA takes none of a device's
slots while a device-path pod asking it is bound but not yet admitted (its kubelet picks a slot from a list that may
still show one free which DRA would take: the test failed at the 26th pod of the first wave before).

Each of the two variants makes 500 pod starts (1,000 in all; about 10 s each on the 2-core machine);
`DEVPLACE_DRA_CHURN_STARTS` sets the number per variant (1,000 each: about 20 s each).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from devplace import api
from devplace.sim import Fleet
from tests.e2e.scenarios import il, instances

STARTS = int(os.environ.get("DEVPLACE_DRA_CHURN_STARTS", "500"))
NODES = ["node-a"]
CAPACITY = 2
CAMS = {
    "apiVersion": "devplace.io/v1alpha1",
    "kind": "Configuration",
    "metadata": {"name": "cams", "namespace": "default"},
    "spec": {"discoveryHandler": {"name": "sim", "discoveryDetails": "{kind: cam}"}, "capacity": CAPACITY},
}
CLASS = {
    "apiVersion": "devplace.io/v1alpha1",
    "kind": "ResourceClass",
    "metadata": {"name": "cam"},
    "spec": {"resourceSelector": [{"matchExpressions": [{"key": "kind", "operator": "In", "values": ["cam"]}]}]},
}
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "cam", "namespace": "default"},
    "spec": {"spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": "cams.devplace.io"}}]}}},
}


def dra_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"path": "dra"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "sim", "resources": {"claims": [{"name": "dev"}]}}],
            "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": "cam"}],
        },
    }


def device_pod(name: str, resource: str) -> dict[str, Any]:
    asks = {resource: "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"path": "device-plugin"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "sim", "resources": {"requests": asks, "limits": asks}}],
        },
    }


def is_dra(pod: Mapping[str, Any]) -> bool:
    return bool(pod["spec"].get("resourceClaims"))


def claim_of(pod: Mapping[str, Any]) -> str | None:
    """The ResourceClaim made for a DRA pod (from `status.resourceClaimStatuses`), once made."""
    statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    return statuses[0].get("resourceClaimName") if statuses else None


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def holder_of(pod: Mapping[str, Any], claim: str | None) -> str:
    """The holder a running pod's slot has: its node (device plugins), `D:<namespace>/<claim>:<node>` (DRA)."""
    node = str(pod["spec"]["nodeName"])
    return api.format_holder(api.DRA("default", str(claim), node)) if is_dra(pod) else node


def backing_problems(
    usage: Mapping[str, str], pods: Mapping[str, Mapping[str, Any]], claims: Mapping[str, str]
) -> list[str]:
    """Running pods not backed by a slot of `usage` (module docstring), and claims holding more than one slot;
    `claims`: pod -> its ResourceClaim."""
    problems: list[str] = []
    holders = Counter(h for h in usage.values() if h)
    problems += [f"{h} holds {n} slots" for h, n in holders.items() if h.startswith("D:") and n > 1]
    running = [p for p in pods.values() if phase(p) == "Running"]
    for pod in running:
        if is_dra(pod):
            holder = holder_of(pod, claims.get(pod["metadata"]["name"]))
            if holders[holder] != 1:
                problems.append(f"running pod {pod['metadata']['name']} has no slot held by {holder}")
    for node in NODES:
        n = sum(1 for p in running if not is_dra(p) and p["spec"]["nodeName"] == node)
        if n > holders[node]:
            problems.append(f"{n} device-plugin pods run on {node}, its node holds {holders[node]} slots")
    return problems


@dataclass
class Auditor:
    """Checks every Pod and Instance state a store watch delivers (module docstring)."""

    instance: str
    slots: frozenset[str]
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    usage: dict[str, str] = field(default_factory=dict)
    claims: dict[str, str] = field(default_factory=dict)
    """Pod -> the ResourceClaim made for it (kept: the pod's last state, its deletion, no longer names it)."""
    violations: list[str] = field(default_factory=list)
    starts: Counter[str] = field(default_factory=Counter)
    states: int = 0
    revision: int = 0
    _moved: asyncio.Event = field(default_factory=asyncio.Event)

    def see(self, kind: str, type_: str, obj: dict[str, Any], revision: int) -> None:
        name = obj["metadata"]["name"]
        if kind == "Instance" and name == self.instance:
            usage = dict(obj["spec"].get("deviceUsage") or {})
            if set(usage) != self.slots:
                self.violations.append(f"@{revision} slots {sorted(usage)}")
            for slot, old in self.usage.items():
                new = usage.get(slot, "")
                if old and new and old != new:
                    self.violations.append(f"@{revision} {slot} passed from {old} to {new}")
            self.usage = usage
        elif kind == "Pod":
            if type_ == "DELETED":
                self.pods.pop(name, None)
            else:
                before = self.pods.get(name)
                if phase(obj) == "Running" and (before is None or phase(before) != "Running"):
                    self.starts["dra" if is_dra(obj) else "device-plugin"] += 1
                self.pods[name] = obj
                claim = claim_of(obj)
                if claim is not None:
                    self.claims[name] = claim
        else:
            return
        self.states += 1
        self.violations += [f"@{revision} {p}" for p in backing_problems(self.usage, self.pods, self.claims)]

    async def follow(self, fleet: Fleet, since: int) -> None:
        self.revision = since
        async with fleet.store.watch(since=since) as events:
            async for event in events:
                kind = str(event.object.get("kind"))
                self.see(kind, event.type, event.object, event.revision)
                self.revision = event.revision
                self._moved.set()

    async def caught_up(self, fleet: Fleet) -> None:
        async with asyncio.timeout(10):
            while self.revision < await fleet.store.revision():
                self._moved.clear()
                await self._moved.wait()


async def finish(fleet: Fleet, name: str) -> None:
    """The pod's containers exited: phase Succeeded, as the kubelet would write it."""
    pod = await fleet.get("Pod", name)
    assert pod is not None
    await fleet.store.update({**pod, "status": {**pod["status"], "phase": "Succeeded"}})


@dataclass
class Churn:
    """What a churn run saw: the auditor, the pods that failed (name -> pod), the fleet's pods, the Instance's
    deviceUsage and the ResourceClaims at the end."""

    auditor: Auditor
    failed: dict[str, dict[str, Any]]
    pods: dict[str, dict[str, Any]]
    usage: dict[str, str]
    claims: dict[str, dict[str, Any]]


async def churn(device_path: str, starts: int) -> Churn:
    """Waves of pods of both kinds (module docstring) until `starts` pods started; every step settles the fleet, time
    is the fleet's fake clock."""
    rng = random.Random(26)
    async with Fleet(dra=True) as fleet:
        for node in NODES:
            fleet.add_node(node)
        await fleet.apply([CAMS, api.compile_configuration(CAMS), CLASS, TEMPLATE])
        fleet.plug("cam-1", ["node-a"], {"kind": "cam"})
        await fleet.settle()
        [instance] = await instances(fleet, "cams")
        resource = "rc.devplace.io/cam" if device_path == "class" else il(fleet, instance)
        auditor = Auditor(instance["metadata"]["name"], frozenset(instance["spec"]["deviceUsage"]))
        auditor.see("Instance", "ADDED", instance, 0)
        follow = asyncio.create_task(auditor.follow(fleet, await fleet.store.revision()))
        failed: dict[str, dict[str, Any]] = {}
        try:
            serial = 0
            finished: set[str] = set()
            while sum(auditor.starts.values()) < starts:
                wave = []
                for _ in range(rng.randint(0, 3)):
                    serial += 1
                    wave.append(dra_pod(f"d{serial}"))
                for _ in range(rng.randint(0, 3)):
                    serial += 1
                    wave.append(device_pod(f"p{serial}", resource))
                rng.shuffle(wave)
                await fleet.apply(wave)
                await fleet.settle()
                await auditor.caught_up(fleet)
                assert auditor.violations == []
                assert len([p for p in auditor.pods.values() if phase(p) == "Running"]) <= CAPACITY
                failed.update({n: p for n, p in auditor.pods.items() if phase(p) == "Failed"})
                for pod_name in sorted(n for n, p in auditor.pods.items() if phase(p) in ("Running", "Failed")):
                    if rng.random() < 0.4 and phase(auditor.pods[pod_name]) == "Running":
                        await finish(fleet, pod_name)
                        finished.add(pod_name)
                    elif rng.random() < 0.6:
                        await fleet.delete("Pod", pod_name)
                for pod_name in sorted(finished):
                    if rng.random() < 0.5 and pod_name in auditor.pods:
                        await fleet.delete("Pod", pod_name)  # a finished pod is cleaned up later
                        finished.discard(pod_name)
                for pod_name in sorted(n for n, p in auditor.pods.items() if phase(p) in ("", "Pending")):
                    if rng.random() < 0.2:
                        await fleet.delete("Pod", pod_name)
                await fleet.settle()
            await fleet.settle()
            await auditor.caught_up(fleet)
        finally:
            follow.cancel()
            await asyncio.gather(follow, return_exceptions=True)
        [instance] = await instances(fleet, "cams")
        return Churn(
            auditor,
            failed,
            {p["metadata"]["name"]: p for p in await fleet.list("Pod")},
            dict(instance["spec"]["deviceUsage"]),
            {c["metadata"]["name"]: c for c in await fleet.list("ResourceClaim")},
        )


OUT_OF = "OutOfdevplace.io/cams-5f2ef0"


@pytest.mark.parametrize("device_path", ["class", "instance"])
async def test_pods_of_both_paths_contending_for_one_device_never_over_commit_it(device_path: str) -> None:
    run = await churn(device_path, STARTS)

    assert run.auditor.violations == []
    assert sum(run.auditor.starts.values()) >= STARTS
    assert min(run.auditor.starts.values()) >= STARTS // 10, run.auditor.starts  # both paths really ran
    # every pod the scheduler bound was admitted: no claim failed to prepare, no device-path pod failed Allocate
    assert {n: p["status"] for n, p in run.failed.items()} == {}
    for pod_name, pod in run.pods.items():
        if phase(pod) in ("Running", "Succeeded", "Failed"):
            continue
        assert phase(pod) in ("", "Pending"), (pod_name, pod["status"])
        [condition] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert (condition["status"], condition["reason"]) == ("False", "Unschedulable"), (pod_name, condition)
        assert condition["message"].startswith(f"0/{len(NODES)} nodes are available: "), condition
    running = [p for p in run.pods.values() if phase(p) == "Running"]
    # every held slot is a running pod's, and no running pod lacks one (so a free slot has no running pod)
    claim = run.auditor.claims
    assert sorted(h for h in run.usage.values() if h) == sorted(
        holder_of(p, claim.get(p["metadata"]["name"])) for p in running
    )
    for pod in running:
        if is_dra(pod):
            reserved = run.claims[claim[pod["metadata"]["name"]]]["status"]["reservedFor"]
            assert [r["uid"] for r in reserved] == [pod["metadata"]["uid"]]


async def one_wave(fleet: Fleet, pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The camera on node-a, then `pods` created at once and the fleet settled: every pod, by name."""
    await fleet.apply([CAMS, api.compile_configuration(CAMS), CLASS, TEMPLATE])
    fleet.add_node("node-a")
    fleet.plug("cam-1", ["node-a"], {"kind": "cam"})
    await fleet.settle()
    await fleet.apply(pods)
    await fleet.settle()
    return {p["metadata"]["name"]: p for p in await fleet.list("Pod")}


async def test_a_device_plugin_pod_bound_beside_a_dra_claim_gets_the_slot_the_claim_left_free() -> None:
    async with Fleet(dra=True) as fleet:
        pods = await one_wave(fleet, [dra_pod("d1"), device_pod("p2", "rc.devplace.io/cam")])

        assert {n: (phase(p), p["status"].get("message")) for n, p in pods.items()} == {
            "d1": ("Running", None),
            "p2": ("Running", None),
        }


@pytest.mark.parametrize("device_path", ["class", "instance"])
async def test_the_scheduler_binds_no_more_pods_of_both_paths_than_the_device_has_slots(device_path: str) -> None:
    async with Fleet(dra=True) as fleet:
        resource = "rc.devplace.io/cam" if device_path == "class" else "devplace.io/cams-5f2ef0"
        wave = [dra_pod("d1"), dra_pod("d2"), device_pod("p3", resource), device_pod("p4", resource)]
        pods = await one_wave(fleet, wave)
        [instance] = await instances(fleet, "cams")
        assert il(fleet, instance) == "devplace.io/cams-5f2ef0"

        bound = sorted(n for n, p in pods.items() if p["spec"].get("nodeName"))
        assert len(bound) == CAPACITY, bound
        assert sorted(n for n, p in pods.items() if phase(p) == "Failed" and p["status"]["reason"] == OUT_OF) == []
