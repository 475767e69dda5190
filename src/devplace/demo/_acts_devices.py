"""Acts 2 and 3 of `devplace demo`: device sharing on simulated nodes (seeds 000 and 001).

Both acts run `devplace.sim.Fleet` over the tour's store (the embedded SQLite file by default): real agents with
their Instance- and Configuration-level device plugins, and simulated kubelets speaking the kubelet's gRPC protocols
on unix sockets. Time is the fleet's fake clock; it never moves here, so every release the acts show happens at once,
not after a grace period.

- Act 2 (seed 000) walks the seed's two-node, two-camera example step by step and checks every capacity the seed
  prints (`2/2/2`, `0/1/1`, ...) against what each node's kubelet sees, plus the refused three-camera pod.
- Act 3 (seed 001) lets ten nodes ask for one device of capacity five at once and checks, from a watch of every
  Instance state, that no slot ever passed from one holder to another and that the losers failed holding nothing.

The pure parts (the `x/y/z` view, holder labels, double-booking detection) are functions over plain data. Each act
deletes the objects it created (pods, Instances, its Configuration, Nodes) when it ends, so acts and re-runs on a
persistent `--store` start from the same place.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devplace.agent import instance_name
from devplace.demo._tours import Tour, delete_all
from devplace.sim import Fleet, recording
from devplace.store import Store

PREFIX = "akri.sh"
NAMESPACE = "default"
_CATCH_UP = 5.0


# -- pure helpers ----------------------------------------------------------------------------------------------------


def view(available: Mapping[str, int], resources: Sequence[str]) -> str:
    """The seed's compact capacity view: free devices per resource, `/`-joined in `resources` order (`0/1/1`)."""
    return "/".join(str(available.get(r, 0)) for r in resources)


def holder_label(holder: str) -> str:
    """A deviceUsage value as a reader wants it: free, `<node> (IL)`, or `<node> (CL)` for `C:<vdev>:<node>`."""
    if not holder:
        return "free"
    if holder.startswith("C:") and holder.count(":") >= 2:
        return f"{holder.rsplit(':', 1)[1]} (CL)"
    return f"{holder} (IL)"


# -- shared plumbing -------------------------------------------------------------------------------------------------


def _configuration(name: str, capacity: int, kind: str) -> str:
    return f"""\
apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
  discoveryHandler:
    name: sim                   # the simulated device world; devices with property kind={kind}
    discoveryDetails: "kind: {kind}"
  capacity: {capacity}
  uniqueDevices: true
"""


def _usage(instance: Mapping[str, Any]) -> dict[str, str]:
    return dict((instance.get("spec") or {}).get("deviceUsage") or {})


def _held(instance: Mapping[str, Any]) -> dict[str, str]:
    return {slot: holder for slot, holder in _usage(instance).items() if holder}


async def _instances(fleet: Fleet, configuration: str) -> dict[str, dict[str, Any]]:
    return {
        i["metadata"]["name"]: i
        for i in await fleet.list("Instance")
        if i["spec"]["configurationName"] == configuration
    }


def _phase(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    out = str(status.get("phase", "Pending"))
    if status.get("reason"):
        out += f" ({status['reason']})"
    return out


async def _remove(store: Store, configuration: str, nodes: Sequence[str]) -> int:
    """Delete the act's pods (on its nodes), its Instances, its Configuration and its Nodes; NotFound is fine."""
    doomed: list[tuple[str, str, str]] = []
    for pod in (await store.list("Pod", NAMESPACE)).items:
        if (pod.get("spec") or {}).get("nodeName") in nodes:
            doomed.append(("Pod", pod["metadata"]["name"], NAMESPACE))
    for inst in (await store.list("Instance", NAMESPACE)).items:
        if inst["spec"].get("configurationName") == configuration:
            doomed.append(("Instance", inst["metadata"]["name"], NAMESPACE))
    doomed.append(("Configuration", configuration, NAMESPACE))
    doomed += [("Node", node, "") for node in nodes]
    return await delete_all(store, doomed)


# -- act 2: seed 000 -------------------------------------------------------------------------------------------------

_CONFIG = "akri-onvif"
_CL = f"{PREFIX}/{_CONFIG}"
_NODES = ("node-a", "node-b")
_CAMERAS = ("cam-1", "cam-2")


@dataclass(frozen=True)
class _Cameras:
    """The seed-000 resources in the seed's order: the CL resource, then each camera's IL resource."""

    instances: tuple[str, str]

    @property
    def resources(self) -> list[str]:
        return [_CL, *(f"{PREFIX}/{name}" for name in self.instances)]

    def il(self, index: int) -> str:
        return f"{PREFIX}/{self.instances[index]}"


def _capacity_table(tour: Tour, fleet: Fleet, cams: _Cameras) -> dict[str, str]:
    headers = [
        "NODE",
        f"{_CONFIG} (CL)",
        *(f"{name} (IL, {cam})" for name, cam in zip(cams.instances, _CAMERAS, strict=True)),
        "CL/IL/IL",
    ]
    views = {}
    rows = []
    for node in _NODES:
        available = fleet.available(node)
        views[node] = view(available, cams.resources)
        rows.append([node, *(str(available.get(r, 0)) for r in cams.resources), views[node]])
    tour.table(headers, rows)
    return views


def _usage_listing(tour: Tour, instances: Mapping[str, Mapping[str, Any]], cams: _Cameras) -> None:
    lines = []
    for name, cam in zip(cams.instances, _CAMERAS, strict=True):
        lines.append(f"{name}:   # {cam}")
        lines.append("  deviceUsage:")
        for slot, holder in sorted(_usage(instances.get(name, {})).items()):
            lines.append(f'    {slot}: "{holder}"' + ("" if not holder else f"   # {holder_label(holder)}"))
    tour.code("\n".join(lines))


def _expect_views(
    tour: Tour, views: Mapping[str, str], wanted: Mapping[str, str], because: Mapping[str, str] | None = None
) -> None:
    for node, want in wanted.items():
        got = views.get(node, "?")
        tour.expect(got == want, f"{node}'s kubelet sees {got}", want, because=(because or {}).get(node, ""))


async def sharing_act(tour: Tour, store: Store) -> None:
    """Act 2: seed 000's walk-through on two simulated nodes over `store`."""
    tour.act(
        2,
        "device sharing between Configuration- and Instance-level resources",
        "seed 000 (Configuration-level resources): two nodes, two cameras, capacity 2, uniqueDevices true, "
        f"resource prefix {PREFIX}",
    )
    try:
        async with Fleet(store=store, resource_prefix=PREFIX) as fleet:
            await _sharing_steps(tour, fleet)
    finally:
        removed = await _remove(store, _CONFIG, _NODES)
        tour.note(f"(cleanup: the nodes stopped; {removed} objects of this act deleted)")


async def _sharing_steps(tour: Tour, fleet: Fleet) -> None:
    names = tuple(instance_name(_CONFIG, cam, "", shared=True) for cam in _CAMERAS)
    cams = _Cameras((names[0], names[1]))
    il2 = cams.il(1)

    tour.step(
        "node-a and node-b both see cam-1 and cam-2; apply the Configuration",
        "one Instance per camera, 2 free deviceUsage slots each; every node's capacity is "
        f"{_CONFIG}: 2 and 2 per camera (2/2/2)",
    )
    for node in _NODES:
        fleet.add_node(node)
    for cam in _CAMERAS:
        fleet.plug(cam, nodes=list(_NODES), properties={"kind": "camera"})
    config = _configuration(_CONFIG, capacity=2, kind="camera")
    tour.code(config)
    await fleet.apply(config)
    await fleet.settle()
    instances = await _instances(fleet, _CONFIG)
    seen = [
        f"{name} on {','.join(sorted(i['spec']['nodes']))} with {len(_usage(i)) - len(_held(i))} free slots"
        for name, i in sorted(instances.items())
    ]
    tour.expect(
        sorted(instances) == sorted(cams.instances)
        and all(sorted(i["spec"]["nodes"]) == list(_NODES) for i in instances.values())
        and all(len(_usage(i)) == 2 and not _held(i) for i in instances.values()),
        "Instances: " + ("; ".join(seen) or "none"),
        f"{', '.join(cams.instances)} (<configuration>-<blake2b of the camera id>), each on both nodes, 2 free slots",
    )
    views = _capacity_table(tour, fleet, cams)
    _expect_views(tour, views, dict.fromkeys(_NODES, "2/2/2"))

    tour.step(
        f"node-a runs pod onvif-broker asking for 2 cameras through the CL resource ({_CL}: 2)",
        "2 slots are reserved, one on each camera; node-a's capacity becomes 0/1/1",
    )
    pod = await fleet.run_pod("onvif-broker", node="node-a", requests={_CL: 2})
    tour.expect(pod["status"].get("phase") == "Running", f"pod onvif-broker on node-a: {_phase(pod)}", "Running")
    instances = await _instances(fleet, _CONFIG)
    _usage_listing(tour, instances, cams)
    holders = [sorted(holder_label(h) for h in _held(instances.get(n, {})).values()) for n in cams.instances]
    tour.expect(
        holders == [["node-a (CL)"], ["node-a (CL)"]],
        "; ".join(f"{cam}: {', '.join(h) or 'nothing'} held" for cam, h in zip(_CAMERAS, holders, strict=True)),
        "one slot of each camera, held by node-a's CL plugin",
    )
    views = _capacity_table(tour, fleet, cams)
    _expect_views(
        tour,
        views,
        {"node-a": "0/1/1", "node-b": "2/1/1"},
        {"node-b": "its 2 CL devices can still map to a free slot on each camera"},
    )

    tour.step(
        f"node-b runs pod il-broker asking for 1 slot of cam-2 through its IL resource ({il2}: 1)",
        "node-b's IL plugin takes cam-2's other slot; node-a's capacity becomes 0/1/0, one slot is still free",
    )
    pod = await fleet.run_pod("il-broker", node="node-b", requests={il2: 1})
    tour.expect(pod["status"].get("phase") == "Running", f"pod il-broker on node-b: {_phase(pod)}", "Running")
    instances = await _instances(fleet, _CONFIG)
    _usage_listing(tour, instances, cams)
    second = sorted(holder_label(h) for h in _held(instances.get(cams.instances[1], {})).values())
    first_free = [s for s, h in _usage(instances.get(cams.instances[0], {})).items() if not h]
    tour.expect(
        second == ["node-a (CL)", "node-b (IL)"] and len(first_free) == 1,
        f"cam-2 held by {' and '.join(second) or 'nobody'}; cam-1 has {len(first_free)} free slot",
        "cam-2: node-a (CL) and node-b (IL); cam-1: 1 free slot",
    )
    views = _capacity_table(tour, fleet, cams)
    _expect_views(tour, views, {"node-a": "0/1/0", "node-b": "1/1/0"})

    tour.step(
        f"node-b runs pod greedy asking for 3 cameras ({_CL}: 3) when only 2 exist",
        "refused rather than given two slots of one camera: the pod fails (UnexpectedAdmissionError in the seed) "
        "and holds nothing",
    )
    before = {name: _usage(i) for name, i in instances.items()}
    pod = await fleet.run_pod("greedy", node="node-b", requests={_CL: 3})
    status = pod.get("status") or {}
    tour.say(f"pod greedy: {_phase(pod)}: {status.get('message', '')}")
    after = {name: _usage(i) for name, i in (await _instances(fleet, _CONFIG)).items()}
    cl_capacity = fleet.capacity("node-b").get(_CL)
    tour.expect(
        status.get("phase") == "Failed"
        and status.get("reason") in (f"OutOf{_CL}", "UnexpectedAdmissionError")
        and after == before,
        f"pod greedy {_phase(pod)}; deviceUsage {'unchanged' if after == before else 'changed'}",
        "Failed, nothing held",
    )
    tour.expect(
        cl_capacity == 2,
        f"node-b advertises {_CL} capacity {cl_capacity}",
        "capacity 2",
        because="one device per camera, so 3 can never be admitted",
    )

    tour.step(
        "Delete node-a's pod onvif-broker",
        "its slots are released when the workload goes away; devplace frees them at once on deletion",
    )
    now = fleet.clock.now()
    await fleet.delete("Pod", "onvif-broker")
    await fleet.settle()
    instances = await _instances(fleet, _CONFIG)
    _usage_listing(tour, instances, cams)
    left = sorted(holder_label(h) for i in instances.values() for h in _held(i).values())
    waited = fleet.clock.now() - now
    tour.expect(
        left == ["node-b (IL)"] and waited == 0,
        f"held now: {', '.join(left) or 'nothing'}; fake time passed: {waited:g} s",
        "only node-b (IL) held, no time passed",
        because="released at once, no grace period",
    )
    views = _capacity_table(tour, fleet, cams)
    _expect_views(tour, views, {"node-a": "2/2/1", "node-b": "2/2/1"})


# -- act 3: seed 001 -------------------------------------------------------------------------------------------------

_SHARED = "my-resource"
_CONTENDERS = tuple(f"node-{i}" for i in range(10))
_CAPACITY = 5
_ROUNDS = 10


async def contention_act(tour: Tour, store: Store) -> None:
    """Act 3: seed 001's ten nodes contending for one device of capacity five, over `store`."""
    tour.act(
        3,
        "contention for a shared device",
        f"seed 001 (Akri device sharing): capacity {_CAPACITY}, {len(_CONTENDERS)} nodes that can all reach the device",
    )
    try:
        async with Fleet(store=store, resource_prefix=PREFIX) as fleet:
            await _contention_steps(tour, fleet)
    finally:
        removed = await _remove(store, _SHARED, _CONTENDERS)
        tour.note(f"(cleanup: the nodes stopped; {removed} objects of this act deleted)")


def _slots_of(fleet: Fleet, node: str, resource: str) -> set[str]:
    return {slot for pod in fleet.kubelet(node).allocations().values() for slot in pod.devices(resource)}


async def _contention_steps(tour: Tour, fleet: Fleet) -> None:
    name = instance_name(_SHARED, _SHARED, "", shared=True)
    resource = f"{PREFIX}/{name}"
    tour.step(
        f"{len(_CONTENDERS)} nodes see one device; apply a Configuration with capacity {_CAPACITY}",
        f"deviceUsage gets {_CAPACITY} slots <instance>-0..{_CAPACITY - 1}, all free, "
        f"and every node's kubelet sees {_CAPACITY} Healthy slots",
    )
    for node in _CONTENDERS:
        fleet.add_node(node)
    fleet.plug(_SHARED, nodes=list(_CONTENDERS), properties={"kind": "shared-resource"})
    await fleet.apply(_configuration(_SHARED, capacity=_CAPACITY, kind="shared-resource"))
    await fleet.settle()
    instance = (await _instances(fleet, _SHARED)).get(name, {})
    usage = _usage(instance)
    nodes = sorted((instance.get("spec") or {}).get("nodes") or [])
    tour.expect(
        nodes == sorted(_CONTENDERS) and usage == {f"{name}-{i}": "" for i in range(_CAPACITY)},
        f"Instance {name or '?'}: seen by {len(nodes)} nodes, {len(usage)} slots, "
        f"{sum(1 for h in usage.values() if not h)} free",
        f"seen by {len(_CONTENDERS)} nodes, {_CAPACITY} free slots",
    )
    free = sorted({fleet.available(node).get(resource, 0) for node in _CONTENDERS})
    tour.expect(free == [_CAPACITY], f"every kubelet sees {free} free of {resource}", f"[{_CAPACITY}]")

    tour.step(
        f"All {len(_CONTENDERS)} nodes run a pod asking for it ({resource}: 1) at the same moment; "
        "a loser tries again while slots are free (as the controller re-creates a failed broker)",
        f"only {_CAPACITY} run; the Instance is the truth: a slot another node claimed first is refused to the "
        "kubelet, the pod does not run, and accurate health is re-sent at once",
    )
    running: dict[str, str] = {}
    lost: dict[str, tuple[str, str]] = {}
    async with recording(fleet.store) as history:
        contenders = list(_CONTENDERS)
        for round_ in range(1, _ROUNDS + 1):
            pods = await asyncio.gather(
                *(fleet.run_pod(f"broker-{node}-{round_}", node=node, requests={resource: 1}) for node in contenders)
            )
            reasons: Counter[str] = Counter()
            for pod in pods:
                node = pod["spec"]["nodeName"]
                status = pod.get("status") or {}
                if status.get("phase") == "Running":
                    running[node] = pod["metadata"]["name"]
                    contenders.remove(node)
                    lost.pop(node, None)
                else:
                    reason = str(status.get("reason") or status.get("phase"))
                    reasons[reason] += 1
                    lost[node] = (reason, str(status.get("message") or ""))
            failed = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
            tour.say(
                f"round {round_}: {len(pods)} asked, {len(pods) - sum(reasons.values())} ran"
                + (f", {sum(reasons.values())} failed ({failed})" if reasons else "")
                + f"; {len(running)} running in all"
            )
            held = _held((await _instances(fleet, _SHARED)).get(name, {}))
            if len(held) >= _CAPACITY or not contenders:
                break
        synced = await history.caught_up(fleet.store, _CATCH_UP)

    instance = (await _instances(fleet, _SHARED)).get(name, {})
    usage = _usage(instance)
    rows = []
    for node in _CONTENDERS:
        slots = sorted(_slots_of(fleet, node, resource))
        if node in running:
            rows.append([node, running[node], "Running", ", ".join(slots)])
        else:
            reason, message = lost.get(node, ("?", ""))
            rows.append([node, "-", f"Failed ({reason})", message])
    tour.table(["NODE", "POD", "RESULT", "SLOT / WHY NOT"], rows)

    tour.expect(
        len(running) == _CAPACITY,
        f"{len(running)} of {len(_CONTENDERS)} nodes run their pod",
        f"exactly {_CAPACITY} (the capacity)",
    )
    allocated = {node: _slots_of(fleet, node, resource) for node in _CONTENDERS}
    owners = Counter(slot for slots in allocated.values() for slot in slots)
    agree = all(usage.get(slot) == node for node, slots in allocated.items() for slot in slots)
    shared = sorted(slot for slot, count in owners.items() if count > 1)
    holders = sorted(h for h in usage.values() if h)
    tour.expect(
        not shared and agree and holders == sorted(running),
        f"{len(owners)} slots allocated by kubelets, {len(shared)} of them by more than one; deviceUsage "
        f"{'names' if agree else 'does not name'} the allocating node; holders {', '.join(holders) or 'none'}",
        "every slot allocated by at most one node, matching deviceUsage",
        because="no slot has two holders",
    )
    states = sum(len(seq) for seq in history.states.values())
    bookings = history.double_bookings()
    tour.expect(
        synced and not bookings and states >= 1 + _CAPACITY,
        f"{states} Instance states watched{'' if synced else ' (the watch fell behind)'}, "
        f"{len(bookings)} slot(s) passed straight from one holder to another"
        + (f": {'; '.join(bookings)}" if bookings else ""),
        "every change a claim of a free slot or a release, each seen",
        because="every change was a claim of a free slot or a release",
    )
    losers = [node for node in _CONTENDERS if node not in running]
    lost_reasons = {node: lost.get(node, ("?", ""))[0] for node in losers}
    holding = sorted(node for node in losers if allocated[node])
    allowed = (f"OutOf{resource}", "UnexpectedAdmissionError")
    why = Counter(lost_reasons.values())
    tour.expect(
        not holding and all(reason in allowed for reason in lost_reasons.values()),
        f"{len(losers)} losers failed ({', '.join(f'{n} {r}' for r, n in sorted(why.items()))}); "
        f"losers whose kubelet holds a slot: {', '.join(holding) or 'none'}",
        "refused at admission or by Allocate, nothing held",
        because="they failed cleanly",
    )
    free = sorted({fleet.available(node).get(resource, 0) for node in _CONTENDERS})
    tour.expect(free == [0], f"every kubelet now sees {free} free", "[0]", because="health was re-advertised")

    if not running or not losers:
        return
    leaving, taker = sorted(running)[0], losers[0]
    tour.step(
        f"A running broker stops (delete {leaving}'s pod); {taker} tries again",
        "if a running workload stops, one of the waiting ones takes its slot",
    )
    now = fleet.clock.now()
    await fleet.delete("Pod", running.pop(leaving))
    await fleet.settle()
    free_now = fleet.available(taker).get(resource, 0)
    pod = await fleet.run_pod(f"broker-{taker}-takeover", node=taker, requests={resource: 1})
    holders = sorted(h for h in _usage((await _instances(fleet, _SHARED)).get(name, {})).values() if h)
    waited = fleet.clock.now() - now
    tour.expect(
        free_now == 1 and waited == 0,
        f"{taker} saw {free_now} free slot after {waited:g} s of fake time",
        "1 free slot without waiting",
        because=f"{leaving}'s slot was released at once",
    )
    tour.expect(
        pod["status"].get("phase") == "Running"
        and taker in holders
        and leaving not in holders
        and len(holders) == _CAPACITY,
        f"{taker}'s pod: {_phase(pod)}; holders now {', '.join(holders)}",
        f"Running, {taker} among {_CAPACITY} holders",
    )
