"""Random plug/unplug/run pod/delete pod/restart agent sequences over a whole simulated fleet (hypothesis stateful).

Invariants after every step, once the fleet settled:
- no slot ever passed from one holder straight to another (every Instance state is recorded through a store watch);
- no slot is given to two live containers, and a live container's slot is held by its own node at its level;
Teardown: when every pod is gone and the grace periods have passed, no slot is held anywhere (no leak).

The fleet runs on one event loop owned by the machine (`asyncio.Runner`); each rule runs to completion on it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from devplace.sim import Fleet
from devplace.sim._invariants import UsageHistory
from tests.e2e.scenarios import configuration, held, usage

NODES = ["node-a", "node-b", "node-c"]
DEVICES = ["cam-1", "cam-2", "cam-3"]
CL = "akri.sh/cams"
GRACE = 60.0
POLL = 20.0


class SlotSharing(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.fleet = Fleet(resource_prefix="akri.sh", release_grace=GRACE, offline_grace=GRACE, podresources_poll=POLL)
        self.history = UsageHistory()
        self.pods: dict[str, str] = {}
        self.serial = 0
        self.run(self._start())

    def run(self, coro: Any) -> Any:
        return self.runner.run(coro)

    async def _start(self) -> None:
        for node in NODES:
            self.fleet.add_node(node)
        await self.fleet.__aenter__()
        listed = await self.fleet.store.list("Instance")
        assert listed.items == []
        self._watch = asyncio.create_task(self.history.follow(self.fleet.store, listed.revision))
        self.fleet.plug("cam-1", nodes=NODES)
        self.fleet.plug("cam-2", nodes=NODES[:2])
        await self.fleet.apply(configuration("cams", capacity=2, unique=True))
        await self.fleet.settle()

    # -- rules -----------------------------------------------------------------------------------------------------

    @rule(device=st.sampled_from(DEVICES), nodes=st.sets(st.sampled_from(NODES), min_size=1))
    def plug(self, device: str, nodes: set[str]) -> None:
        self.fleet.plug(device, nodes=sorted(nodes))
        self.run(self.fleet.settle())

    @rule(device=st.sampled_from(DEVICES), nodes=st.sets(st.sampled_from(NODES), min_size=1))
    def unplug(self, device: str, nodes: set[str]) -> None:
        if self.fleet.world.nodes_of(device):
            self.fleet.unplug(device, nodes=sorted(nodes))
            self.run(self.fleet.settle())

    @rule(node=st.sampled_from(NODES), pick=st.integers(0, 3), count=st.integers(1, 2))
    def run_pod(self, node: str, pick: int, count: int) -> None:
        async def go() -> None:
            names = sorted(i["metadata"]["name"] for i in await self.fleet.list("Instance"))
            resource = CL if pick == len(names) or not names else f"akri.sh/{names[pick % len(names)]}"
            self.serial += 1
            name = f"p{self.serial}"
            pod = await self.fleet.run_pod(name, node=node, requests={resource: count})
            assert pod["status"]["phase"] in ("Running", "Failed")
            event(f"pod {pod['status']['phase']} {pod['status'].get('reason', '')}".strip())
            if pod["status"]["phase"] == "Failed":
                assert pod["status"]["reason"] in (f"OutOf{resource}", "UnexpectedAdmissionError"), pod["status"]
            self.pods[name] = node

        self.run(go())

    @precondition(lambda self: bool(self.pods))
    @rule(data=st.data())
    def delete_pod(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.pods)))
        del self.pods[name]

        async def go() -> None:
            await self.fleet.delete("Pod", name)
            await self.fleet.settle()

        self.run(go())

    @rule(node=st.sampled_from(NODES))
    def restart_agent(self, node: str) -> None:
        async def go() -> None:
            await self.fleet.restart_agent(node)
            await self.fleet.settle()

        self.run(go())

    # -- invariants ------------------------------------------------------------------------------------------------

    @invariant()
    def no_slot_ever_passes_between_holders(self) -> None:
        assert self.run(self.history.caught_up(self.fleet.store))
        assert self.history.double_bookings() == []

    @invariant()
    def no_slot_is_given_to_two_live_containers(self) -> None:
        self.run(self._check_containers())

    async def _check_containers(self) -> None:
        instances = {i["metadata"]["name"]: i for i in await self.fleet.list("Instance")}
        users: Counter[str] = Counter()
        for node in NODES:
            for allocation in self.fleet.kubelet(node).allocations().values():
                for container in allocation.containers:
                    for resource, ids in container.devices.items():
                        for device in ids:
                            if resource == CL:
                                slots = [
                                    slot
                                    for instance in instances.values()
                                    if node in instance["spec"]["nodes"]
                                    for slot, holder in usage(instance).items()
                                    if holder == f"C:{device}:{node}"
                                ]
                                assert len(slots) <= 1, (node, device, slots)
                                users.update(slots)
                                continue
                            instance = instances.get(resource.split("/", 1)[1])
                            if instance is None or node not in instance["spec"]["nodes"]:
                                continue
                            assert usage(instance).get(device) == node, (node, device, usage(instance))
                            users[device] += 1
        assert [slot for slot, n in users.items() if n > 1] == []

    def teardown(self) -> None:
        async def drain() -> None:
            for name in sorted(self.pods):
                await self.fleet.delete("Pod", name)
            self.pods.clear()
            await self.fleet.settle()
            await self.fleet.advance(GRACE + 3 * POLL, step=POLL)
            leaked = {i["metadata"]["name"]: held(i) for i in await self.fleet.list("Instance") if held(i)}
            assert leaked == {}
            assert await self.history.caught_up(self.fleet.store)
            assert self.history.double_bookings() == []

        try:
            self.run(drain())
        finally:
            self.run(self._stop())
            self.runner.close()

    async def _stop(self) -> None:
        self._watch.cancel()
        await asyncio.gather(self._watch, return_exceptions=True)
        await self.fleet.__aexit__(None, None, None)


SlotSharing.TestCase.settings = settings(
    max_examples=12,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_random_sharing_never_double_books_nor_leaks_a_slot = SlotSharing.TestCase
