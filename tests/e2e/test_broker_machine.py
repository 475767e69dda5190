"""A hypothesis state machine over a simulated fleet running brokers (issue #9): devices come and go, nodes die and
come back, brokers are deleted, the controller restarts; after every step, once the fleet settles:

- the broker objects in the store are exactly what the controller's pure decision wants for the current store state
  (`decisions.decide` has nothing left to create, update or delete, and the broker Pods are its desired ones);
- no slot was ever held by two parties at once (every holder change in the recorded history is a claim of a free
  slot or a release: `devplace.sim._invariants`), and no Instance has more Running brokers than its capacity.

Two Configurations: `cams` (perNode, shared cameras, capacity 2, so with three nodes one broker per camera waits
Pending) and `sensors` (a dynamic pool of 2 over local sensors).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from devplace.controller import _decisions as decisions
from devplace.controller import _inputs as inputs
from devplace.controller import _names as names
from devplace.sim import Fleet
from devplace.sim._invariants import UsageHistory, recording
from tests.e2e.scenarios import PLAIN_BROKER as PLAIN
from tests.e2e.scenarios import broker_configuration as configuration

NODES = ("node-a", "node-b", "node-c")
CAMERAS = ("cam-1", "cam-2", "cam-3")
SENSORS = ("sensor-1", "sensor-2", "sensor-3")
_OWNED = ("Pod", "Job", "Service", "ConfigMap")


async def desired_and_observed(fleet: Fleet) -> list[str]:
    """Differences between what `decisions.decide` wants for the current store state and what the store holds."""
    problems: list[str] = []
    everything = [inputs.InstanceFacts.from_wire(i) for i in await fleet.list("Instance")]
    owned_all = [o for kind in _OWNED for o in await fleet.list(kind)]
    for wire in await fleet.list("Configuration"):
        cfg = inputs.ConfigurationFacts.from_wire(wire)
        existing = [o for o in owned_all if names.labels_of(o).get(names.CONFIGURATION_LABEL) == cfg.name]
        decision = decisions.decide(
            cfg,
            everything,
            existing,
            settings=decisions.Settings(resource_prefix=fleet.resource_prefix, pending_grace=fleet.pending_grace),
            now=fleet.clock.now(),
            class_matches=fleet.classes,
        )
        plan = decision.plan
        if len(plan):
            creates = sorted(o["metadata"]["name"] for o in plan.creates)
            deletes = sorted(d.name for d in plan.deletes)
            updates = sorted(s["metadata"]["name"] for s, _ in plan.updates)
            problems.append(f"{cfg.name}: left to do: create {creates}, delete {deletes}, update {updates}")
        wanted = sorted(d.key[2] for d in decision.brokers.objects if d.key[0] == "Pod")
        observed = sorted(o["metadata"]["name"] for o in existing if o["kind"] == "Pod")
        if wanted != observed:
            problems.append(f"{cfg.name}: brokers {observed} != desired {wanted}")
    return problems


async def over_capacity(fleet: Fleet) -> list[str]:
    """Instances with more Running perNode brokers than slots."""
    running: dict[str, int] = {}
    for pod in await fleet.list("Pod"):
        instance = names.labels_of(pod).get(names.INSTANCE_LABEL)
        if instance and (pod.get("status") or {}).get("phase") == "Running":
            running[instance] = running.get(instance, 0) + 1
    out = []
    for instance in await fleet.list("Instance"):
        name = instance["metadata"]["name"]
        if running.get(name, 0) > instance["spec"]["capacity"]:
            out.append(f"{name}: {running[name]} Running brokers for capacity {instance['spec']['capacity']}")
    return out


class BrokerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.fleet = Fleet()
        self.history: UsageHistory | None = None
        self._recorder: Any = None
        self.plugged: dict[str, set[str]] = {}

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @initialize()
    def start(self) -> None:
        async def go() -> None:
            for node in NODES:
                self.fleet.add_node(node)
            await self.fleet.__aenter__()
            self._recorder = recording(self.fleet.store)
            self.history = await self._recorder.__aenter__()
            await self.fleet.apply(configuration("cams", capacity=2, details="kind: cam"))
            pool = {"pool": {"size": 2, "mode": "dynamic"}}
            await self.fleet.apply(
                configuration("sensors", strategy=pool, pod=PLAIN, details="kind: sensor\nshared: false")
            )
            await self.fleet.settle()

        self.run(go())

    def teardown(self) -> None:
        async def stop() -> None:
            if self._recorder is not None:
                await self._recorder.__aexit__(None, None, None)
            await self.fleet.__aexit__(None, None, None)

        try:
            self.run(stop())
        finally:
            self.loop.close()

    # -- rules -------------------------------------------------------------------------------------------------

    @rule(
        device=st.sampled_from(CAMERAS + SENSORS),
        nodes=st.sets(st.sampled_from(NODES), min_size=1, max_size=3),
    )
    def plug(self, device: str, nodes: set[str]) -> None:
        kind = "cam" if device.startswith("cam") else "sensor"
        where = sorted(nodes) if kind == "cam" else sorted(nodes)[:1]  # a sensor is local to one node
        self.fleet.plug(device, where, {"kind": kind, "url": f"sim://{device}"})
        self.plugged.setdefault(device, set()).update(where)
        self.run(self.fleet.settle())

    @precondition(lambda self: bool(self.plugged))
    @rule(data=st.data())
    def unplug(self, data: st.DataObject) -> None:
        device = data.draw(st.sampled_from(sorted(self.plugged)))
        self.fleet.unplug(device)
        del self.plugged[device]
        self.run(self.fleet.settle())

    @precondition(lambda self: sum(not self.fleet.is_down(n) for n in NODES) > 1)
    @rule(node=st.sampled_from(NODES))
    def node_down(self, node: str) -> None:
        self.run(self.fleet.stop_node(node))
        self.run(self.fleet.settle())

    @precondition(lambda self: any(self.fleet.is_down(n) for n in NODES))
    @rule(data=st.data())
    def node_up(self, data: st.DataObject) -> None:
        node = data.draw(st.sampled_from([n for n in NODES if self.fleet.is_down(n)]))
        self.run(self.fleet.start_node(node))
        self.run(self.fleet.settle())

    @rule(data=st.data())
    def delete_broker(self, data: st.DataObject) -> None:
        async def go() -> None:
            pods = sorted(
                p["metadata"]["name"]
                for p in await self.fleet.list("Pod")
                if names.labels_of(p).get(names.CONTROLLER_LABEL) == names.CONTROLLER_VALUE
            )
            if not pods:
                return
            await self.fleet.delete("Pod", data.draw(st.sampled_from(pods)))
            await self.fleet.settle()

        self.run(go())

    @rule()
    def restart_controller(self) -> None:
        self.run(self.fleet.restart_part("controller"))
        self.run(self.fleet.settle())

    # -- invariants --------------------------------------------------------------------------------------------

    @invariant()
    def brokers_are_what_the_controller_wants(self) -> None:
        assert self.run(desired_and_observed(self.fleet)) == []
        assert self.run(over_capacity(self.fleet)) == []

    @invariant()
    def no_slot_is_ever_held_twice(self) -> None:
        history = self.history
        if history is None:
            return
        assert self.run(history.caught_up(self.fleet.store))
        assert history.double_bookings() == []


TestBrokerMachine = pytest.mark.slow(BrokerMachine.TestCase)
TestBrokerMachine.settings = settings(
    max_examples=40,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
