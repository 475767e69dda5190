"""Seed 001 end to end: ten nodes contend for one shared device of capacity five.

Every intermediate Instance state is recorded through a store watch and checked: a slot never passes from one holder
straight to another. The losers fail cleanly and their kubelets see accurate health again.
"""

from __future__ import annotations

import asyncio

from devplace.sim import Fleet
from devplace.sim._invariants import recording
from tests.e2e.scenarios import configuration, held, il, instances

NODES = [f"node-{i}" for i in range(10)]


async def test_ten_nodes_contending_for_capacity_five_never_share_a_slot():
    async with Fleet(resource_prefix="akri.sh") as fleet:
        for node in NODES:
            fleet.add_node(node)
        fleet.plug("my-resource", nodes=NODES)
        await fleet.apply(configuration("my-resource", capacity=5))
        await fleet.settle()
        [instance] = await instances(fleet)
        resource = il(fleet, instance)
        assert sorted(instance["spec"]["nodes"]) == sorted(NODES)
        assert all(fleet.available(node)[resource] == 5 for node in NODES)

        async with recording(fleet.store) as history:
            # every node asks at once; a loser's pod fails and, like the controller does, is retried while slots
            # are free (each kubelet picks among the slots it sees as free, so racing nodes may pick the same one)
            winners: list[str] = []
            contenders = list(NODES)
            for attempt in range(10):
                pods = await asyncio.gather(
                    *(fleet.run_pod(f"b-{node}-{attempt}", node=node, requests={resource: 1}) for node in contenders)
                )
                for pod in pods:
                    node = pod["spec"]["nodeName"]
                    if pod["status"]["phase"] == "Running":
                        winners.append(node)
                        contenders.remove(node)
                        continue
                    assert pod["status"]["phase"] == "Failed"
                    assert pod["status"]["reason"] in (f"OutOf{resource}", "UnexpectedAdmissionError")
                    assert fleet.kubelet(node).allocations() == {}
                [instance] = await instances(fleet)
                if len(held(instance)) == 5:
                    break
            await fleet.settle()
            assert await history.caught_up(fleet.store)

        assert history.double_bookings() == []
        assert len(history.states[instance["metadata"]["name"]]) > 5
        for states in history.states.values():
            for state in states:
                holders = [h for h in state.values() if h]
                assert len(holders) == len(set(holders)) <= 5, state

        [instance] = await instances(fleet)
        losers = sorted(set(NODES) - set(winners))
        assert len(winners) == 5
        assert sorted(held(instance).values()) == sorted(winners)
        for node in NODES:
            assert fleet.available(node)[resource] == 0, "health is re-advertised: no node sees a free slot"

        # with accurate health, every loser is now refused at admission, before any Allocate
        for node in losers:
            pod = await fleet.run_pod(f"late-{node}", node=node, requests={resource: 1})
            assert pod["status"]["reason"] == f"OutOf{resource}"

        # a winner leaves: its slot is free at once and every other node's kubelet sees exactly one free slot again
        leaving = winners[0]
        await fleet.delete(
            "Pod",
            next(
                p["metadata"]["name"]
                for p in await fleet.list("Pod")
                if p["spec"]["nodeName"] == leaving and p["status"]["phase"] == "Running"
            ),
        )
        await fleet.settle()
        [instance] = await instances(fleet)
        assert len(held(instance)) == 4
        for node in [*losers, leaving]:
            assert fleet.available(node)[resource] == 1
