"""Controller benchmark: brokers for 10,000 Instances over 1,000 nodes, from scratch, then single device changes.

The planner (`devplace.controller._incremental.Decider`, which decides exactly what `decide` decides from scratch) runs
over plain data and its plan is applied to a `MemoryStore`, the
way the controller's shell applies it (creates, CAS updates, CAS deletes, a CAS status write), with the objects
kept in dicts as the informers would keep them. The fleet: one perNode Configuration with instance and configuration
Services; 10,000 Instances, 9,000 local (one node each) and 1,000 shared by two nodes, so 11,000 broker Pods; every
broker Running, so 10,000 instance Services and one configuration Service.

Reported:
- `scratch`: wall time of the first full reconcile (decide + writes), its `writes`, and the decide time alone.
- `change_*`: one device change each (a local device unplugged; a shared device unplugged; a new shared device
  plugged in and its brokers Running): `writes` and wall time (`decide_s` is the pure part, `write_s` the store).
- `writes_per_change_over_fleet_brokers`: the goal is writes proportional to the changed device's own brokers, not
  to the fleet; the ratio of a change's writes to the fleet's broker count says how far from "fleet" it is, and
  `writes_per_own_broker` how close to "own".
- `shell`: the same fleet (without Running brokers, so no Services) through the real `Controller` (informers,
  reconcile queue, CAS writes) on a MemoryStore: `scratch_s` until every broker exists, then one local device
  unplugged: `change_writes` (the controller's own store writes), `change_passes` (reconciles run) and `change_s`
  (until it is idle again; polled every 10 ms, so the figure includes up to ~40 ms of polling).
Decide time: the planner is still level-triggered (it is handed the whole Configuration's Instances and objects every
pass), but recomputes only the brokers, Services and plan entries of what changed since its last pass; what is left
per change is a C-speed identity scan of its inputs (milliseconds at this size). `scratch` is from scratch.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Mapping
from typing import Any

from devplace.api import normalize
from devplace.clocks import FakeClock
from devplace.controller import Controller
from devplace.controller import _incremental as incremental
from devplace.controller import _inputs as inputs
from devplace.controller import _plans as plans
from devplace.store._memory import MemoryStore

__all__ = ["run"]

POD_SPEC = {
    "containers": [
        {
            "name": "broker",
            "image": "ghcr.io/project-akri/akri/onvif-video-broker:latest",
            "resources": {"limits": {"{{PLACEHOLDER}}": "1"}},
        }
    ]
}


def _configuration() -> dict[str, Any]:
    return normalize(
        {
            "apiVersion": "akri.sh/v0",
            "kind": "Configuration",
            "metadata": {"name": "akri-onvif"},
            "spec": {
                "discoveryHandler": {"name": "onvif"},
                "capacity": 2,
                "brokerSpec": {"brokerPodSpec": POD_SPEC},
                "instanceServiceSpec": {"ports": [{"port": 80}]},
                "configurationServiceSpec": {"ports": [{"port": 80}]},
            },
        }
    )


def _instance(i: int, nodes: list[str]) -> dict[str, Any]:
    name = f"akri-onvif-{i:06x}"
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "configurationName": "akri-onvif",
            "shared": len(nodes) > 1,
            "nodes": nodes,
            "capacity": 2,
            "deviceUsage": {f"{name}-0": "", f"{name}-1": ""},
            "brokerProperties": {"ID": str(i)},
        },
    }


class _World:
    """The store plus the caches the controller's informers would hold."""

    def __init__(self, store: MemoryStore, clock: FakeClock) -> None:
        self.store = store
        self.clock = clock
        self.configuration: dict[str, Any] = {}
        self.instances: dict[str, inputs.InstanceFacts] = {}
        self.owned: dict[plans.Key, dict[str, Any]] = {}
        self.writes = 0
        self.decider = incremental.Decider()

    async def reconcile(self) -> dict[str, float]:
        started = time.perf_counter()
        decision = self.decider.decide(
            ("default", "akri-onvif"),
            inputs.ConfigurationFacts.from_wire(self.configuration),
            self.instances.values(),
            list(self.owned.values()),
            now=self.clock.now(),
        )
        decided = time.perf_counter()
        before = self.writes
        await self.apply(decision.plan)
        status = decision.status
        if status is not None:
            self.configuration = await self.store.update(status)
            self.writes += 1
        done = time.perf_counter()
        return {
            "decide_s": round(decided - started, 4),
            "write_s": round(done - decided, 4),
            "wall_s": round(done - started, 4),
            "writes": self.writes - before,
        }

    async def apply(self, plan: plans.Plan) -> None:
        for deletion in plan.deletes:
            await self.store.delete(deletion.kind, deletion.name, deletion.namespace)
            self.owned.pop(deletion.key, None)
            self.writes += 1
        for stored, want in plan.updates:
            written = await self.store.update(plans.merged(stored, want))
            self.owned[plans.key_of(written)] = written
            self.writes += 1
        for body in plan.creates:
            written = await self.store.create(body)
            self.owned[plans.key_of(written)] = written
            self.writes += 1

    async def run_brokers(self) -> None:
        """The kubelets: every Pod not Running yet becomes Running (not counted as controller writes)."""
        for key, obj in list(self.owned.items()):
            if key[0] == "Pod" and (obj.get("status") or {}).get("phase") != "Running":
                obj = copy.deepcopy(obj)
                obj["status"] = {"phase": "Running"}
                self.owned[key] = await self.store.update(obj)

    async def put_instance(self, body: Mapping[str, Any]) -> None:
        written = await self.store.create(body)
        self.instances[written["metadata"]["name"]] = inputs.InstanceFacts.from_wire(written)

    async def drop_instance(self, name: str) -> None:
        await self.store.delete("Instance", name, "default")
        del self.instances[name]

    async def settle(self) -> dict[str, float]:
        """Reconcile until nothing changes (brokers run in between); the totals."""
        total = {"decide_s": 0.0, "write_s": 0.0, "wall_s": 0.0, "writes": 0, "passes": 0}
        for _ in range(4):
            step = await self.reconcile()
            for k in ("decide_s", "write_s", "wall_s", "writes"):
                total[k] = round(total[k] + step[k], 4)
            total["passes"] += 1
            if not step["writes"]:
                break
            await self.run_brokers()
        return total


async def _run(n_instances: int, n_nodes: int) -> dict[str, Any]:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    world = _World(store, clock)
    world.configuration = await store.create(_configuration())
    shared = n_instances // 10
    for i in range(n_instances):
        nodes = [f"node-{i % n_nodes:04d}"]
        if i < shared:
            nodes.append(f"node-{(i + 1) % n_nodes:04d}")
        await world.put_instance(_instance(i, nodes))
    brokers = n_instances + shared
    scratch = await world.settle()
    pods = sum(1 for k in world.owned if k[0] == "Pod")
    services = sum(1 for k in world.owned if k[0] == "Service")
    out: dict[str, Any] = {
        "instances": n_instances,
        "nodes": n_nodes,
        "broker_pods": pods,
        "services": services,
        "scratch": scratch,
    }
    assert pods == brokers, (pods, brokers)

    # one local device unplugged: its broker and its Service go (+ the status counts)
    local = f"akri-onvif-{n_instances - 1:06x}"
    await world.drop_instance(local)
    out["change_unplug_local"] = {**await world.settle(), "own_brokers": 1}
    # one shared device unplugged: its two brokers and its Service go
    await world.drop_instance("akri-onvif-000000")
    out["change_unplug_shared"] = {**await world.settle(), "own_brokers": 2}
    # a new shared device plugged in: two brokers, they run, then its Service
    await world.put_instance(_instance(n_instances + 1, ["node-0000", "node-0001"]))
    out["change_plug_shared"] = {**await world.settle(), "own_brokers": 2}
    for key in ("change_unplug_local", "change_unplug_shared", "change_plug_shared"):
        change = out[key]
        change["writes_per_own_broker"] = round(change["writes"] / change["own_brokers"], 2)
        change["writes_per_change_over_fleet_brokers"] = round(change["writes"] / brokers, 6)
    await store.close()
    return out


async def _pods(store: MemoryStore) -> int:
    return len((await store.list("Pod", "default")).items)


async def _until(controller: Controller, store: MemoryStore, pods: int) -> None:
    """Poll the controller's own Pod cache (listing 11,000 Pods from the store would dominate the timing), then
    check the store once."""
    calm = 0
    while calm < 3:
        await asyncio.sleep(0.01)
        calm = calm + 1 if controller.is_idle() and len(controller.owned["Pod"]) == pods else 0
    assert await _pods(store) == pods


async def _shell(n_instances: int, n_nodes: int) -> dict[str, Any]:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    await store.create(_configuration())
    shared = n_instances // 10
    for i in range(n_instances):
        nodes = [f"node-{i % n_nodes:04d}"]
        if i < shared:
            nodes.append(f"node-{(i + 1) % n_nodes:04d}")
        await store.create(_instance(i, nodes))
    for j in range(n_nodes):
        ready = {"conditions": [{"type": "Ready", "status": "True"}]}
        await store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{j:04d}"}, "status": ready})
    controller = Controller(store, clock)
    started = time.perf_counter()
    controller.start()
    try:
        await _until(controller, store, n_instances + shared)
        scratch = time.perf_counter() - started
        scratch_writes, scratch_passes = controller.writes, controller.passes
        started = time.perf_counter()
        await store.delete("Instance", f"akri-onvif-{n_instances - 1:06x}", "default")
        await _until(controller, store, n_instances + shared - 1)
        change = time.perf_counter() - started
    finally:
        await controller.stop()
        await store.close()
    return {
        "scratch_s": round(scratch, 3),
        "scratch_writes": scratch_writes,
        "change_s": round(change, 3),
        "change_writes": controller.writes - scratch_writes,
        "change_passes": controller.passes - scratch_passes,
    }


def run(quick: bool = False) -> dict[str, Any]:
    n_instances, n_nodes = (1_000, 100) if quick else (10_000, 1_000)
    out = asyncio.run(_run(n_instances, n_nodes))
    out["shell"] = asyncio.run(_shell(n_instances, n_nodes))
    return out


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
