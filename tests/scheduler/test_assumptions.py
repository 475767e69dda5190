from __future__ import annotations

from devplace.scheduler._assumptions import Assumed
from devplace.scheduler._selection import DeviceIndex
from tests.scheduler.builders import device, node, pod, seed_classes

HIGH = "nvidia.high.mem"


def test_an_assumed_pod_adds_its_requests_until_the_binding_is_observed() -> None:
    base = node("node-a", cpu="4")
    assumed = Assumed()
    p = pod("p", cpu="1")
    assumed.assume(p, "node-a", {})
    assert assumed.node(base).requested.cpu == 1000
    assert assumed.node(base) is assumed.node(base)  # cached while the base is unchanged
    assumed.observed_bound(p.key)
    assert assumed.node(base) is base
    assert p.key not in assumed  # nothing left to wait for


def test_device_slots_stay_assumed_until_forgotten_and_usable_counts_follow() -> None:
    index = DeviceIndex([device("gpu-0", ["node-a", "node-b"], memory="32Gi", capacity=2)], seed_classes())
    assumed = Assumed()
    assert assumed.lost(index, "node-a") == {}
    assumed.assume(pod("p", classes={HIGH: 1}), "node-a", {"gpu-0": 1}, index)
    assert assumed.lost(index, "node-b") == {}
    assumed.assume(pod("q", classes={HIGH: 1}), "node-b", {"gpu-0": 1}, index)
    assert assumed.taken == {"gpu-0": 2}
    assert assumed.lost(index, "node-a") == {HIGH: 1}  # a shared device empties for every node that sees it
    assert assumed.lost(index, "node-b") == {HIGH: 1}
    assumed.observed_bound("default/q")
    assert assumed.taken == {"gpu-0": 2}
    assumed.forget("default/q")
    assert assumed.taken == {"gpu-0": 1}
    assert assumed.lost(index, "node-a") == {HIGH: 0}


def test_a_new_snapshot_index_recomputes_what_assumptions_empty() -> None:
    first = DeviceIndex([device("gpu-0", "node-a", memory="32Gi")], seed_classes())
    assumed = Assumed()
    assumed.assume(pod("p", classes={HIGH: 1}), "node-a", {"gpu-0": 1}, first)
    assert assumed.lost(first, "node-a") == {HIGH: 1}
    claimed = DeviceIndex([device("gpu-0", "node-a", memory="32Gi", free=0)], seed_classes())
    assert assumed.lost(claimed, "node-a") == {}  # the snapshot already shows the slot held: not lost twice


def test_slots_promised_on_a_node_are_counted_per_node_until_forgotten() -> None:
    index = DeviceIndex([device("gpu-0", ["node-a", "node-b"], memory="32Gi", capacity=3)], seed_classes())
    assumed = Assumed()
    assumed.assume(pod("p", classes={HIGH: 1}), "node-a", {"gpu-0": 1}, index)
    assumed.assume(pod("q", classes={HIGH: 1}), "node-b", {"gpu-0": 1}, index)
    assumed.assume(pod("r", classes={HIGH: 1}), "node-a", {"gpu-0": 1}, index)
    assert (assumed.taken_on("node-a"), assumed.taken_on("node-b"), assumed.taken) == (
        {"gpu-0": 2},
        {"gpu-0": 1},
        {"gpu-0": 3},
    )
    assumed.forget("default/p")
    assumed.forget("default/q")
    assert (assumed.taken_on("node-a"), assumed.taken_on("node-b")) == ({"gpu-0": 1}, {})
