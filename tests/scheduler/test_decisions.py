from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace.scheduler._assumptions import Assumed
from devplace.scheduler._decisions import (
    Binding,
    Config,
    NodeVerdict,
    Snapshot,
    Unschedulable,
    nodes_to_find,
    schedule_burst,
    schedule_one,
)
from devplace.scheduler._pods import PodInfo, pending_order
from tests.scheduler.builders import device, gpu_cluster, node, pod, seed_classes

HIGH = "nvidia.high.mem"


def test_unschedulable_counts_reasons_per_node_like_kubernetes() -> None:
    nodes = [node(f"cpu-{i:02d}", cpu="1") for i in range(5)] + [node(f"gpu-{i:02d}", cpu="8") for i in range(7)]
    devices = [device(f"gpu-{i:02d}-0", f"gpu-{i:02d}", memory="16Gi") for i in range(7)]  # too small for the class
    cluster = Snapshot.build(nodes, devices, seed_classes())
    decision = schedule_one(pod("p", cpu="2", classes={HIGH: 1}), cluster, Assumed())
    assert isinstance(decision, Unschedulable)
    assert (
        decision.message == "0/12 nodes are available: 7 no device matches class nvidia.high.mem, 5 insufficient cpu."
    )
    assert decision.verdicts[0] == NodeVerdict("cpu-00", "insufficient cpu")
    assert len(decision.verdicts) == 12


def test_pod_asking_for_eleven_devices_on_nodes_of_ten_is_refused_with_a_reason() -> None:
    cluster = gpu_cluster(3, 10)
    decision = schedule_one(pod("p", classes={HIGH: 11}), cluster, Assumed())
    assert isinstance(decision, Unschedulable)
    assert (
        decision.message
        == "0/3 nodes are available: 3 insufficient devices for class nvidia.high.mem: want 11, 10 free."
    )


def test_a_binding_names_the_node_and_annotates_each_device_as_seed_003_does() -> None:
    cluster = gpu_cluster(2, 2)
    decision = schedule_one(pod("p", cpu="1", classes={HIGH: 2}), cluster, Assumed())
    assert isinstance(decision, Binding)
    assert decision.node == "node-000"
    assert decision.annotations == {
        "scheduler.alpha.kubernetes.io/resClass_nvidia.high.mem_gpu-000-00": "1",
        "scheduler.alpha.kubernetes.io/resClass_nvidia.high.mem_gpu-000-01": "1",
    }
    assert decision.to_wire() == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "default", "annotations": dict(decision.annotations)},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-000"},
    }


def test_an_unknown_class_is_reported_before_any_node_is_evaluated() -> None:
    decision = schedule_one(pod("p", classes={"nope": 1}), gpu_cluster(2, 1), Assumed())
    assert decision == Unschedulable("default/p", 'resource class "nope" not found')


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"node_selector": {"zone": "b"}}, "node(s) didn't match node selector"),
        (
            {"affinity_terms": [{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}]},
            "node(s) didn't match node selector",
        ),
        ({"cpu": "9"}, "insufficient cpu"),
        ({"memory": "33Gi"}, "insufficient memory"),
        ({"extra": {"example.com/fpga": "1"}}, "insufficient example.com/fpga"),
        ({"classes": {"fast.nic": 1}}, "no device matches class fast.nic"),
    ],
)
def test_each_filter_says_why_a_node_is_refused(kwargs: dict[str, object], reason: str) -> None:
    cluster = Snapshot.build([node("node-a", zone="a")], [device("gpu-0", "node-a", memory="32Gi")], seed_classes())
    decision = schedule_one(pod("p", **kwargs), cluster, Assumed())  # type: ignore[arg-type]
    assert isinstance(decision, Unschedulable)
    assert decision.message == f"0/1 nodes are available: 1 {reason}."


def test_affinity_operators_select_nodes() -> None:
    cluster = Snapshot.build([node("node-a", gen="3"), node("node-b", gen="5")], [], seed_classes())
    terms = [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]}]
    decision = schedule_one(pod("p", affinity_terms=terms), cluster, Assumed())
    assert isinstance(decision, Binding)
    assert decision.node == "node-b"


def test_cordoned_nodes_and_full_nodes_are_refused() -> None:
    full = node("node-b", pods=0)
    cordoned = replace(node("node-a"), unschedulable=True)
    decision = schedule_one(pod("p"), Snapshot.build([cordoned, full], [], {}), Assumed())
    assert isinstance(decision, Unschedulable)
    assert decision.message == "0/2 nodes are available: 1 node(s) were unschedulable, 1 too many pods."


def test_least_allocated_prefers_the_emptier_node_and_ties_go_to_the_first_name() -> None:
    nodes = [node("node-b", cpu="8"), node("node-a", cpu="8"), node("node-c", cpu="16")]
    cluster = Snapshot.build(nodes, [], {})
    decision = schedule_one(pod("p", cpu="1", memory="1Gi"), cluster, Assumed())
    assert isinstance(decision, Binding)
    assert decision.node == "node-c"
    cluster = Snapshot.build(nodes[:2], [], {})
    decision = schedule_one(pod("p", cpu="1", memory="1Gi"), cluster, Assumed())
    assert isinstance(decision, Binding)
    assert decision.node == "node-a"


def test_binpack_class_fills_a_node_before_the_next_and_spread_does_not() -> None:
    classes = seed_classes()
    devices = [device(f"gpu-{n}-{i}", f"node-{n}", memory="32Gi") for n in "ab" for i in range(3)]
    nodes = [node("node-a"), node("node-b")]
    for strategy, expected in (("binpack", ["node-a", "node-a", "node-a"]), ("spread", ["node-a", "node-b", "node-a"])):
        cluster = Snapshot.build(nodes, devices, classes)
        pods = [pod(f"p{i}", classes={HIGH: 1}, created=f"2024-01-01T00:00:0{i}Z") for i in range(3)]
        decisions = schedule_burst(pods, cluster, Assumed(), Config(strategy=strategy))  # type: ignore[arg-type]
        assert [d.node for d in decisions if isinstance(d, Binding)] == expected


def test_a_burst_never_double_books_a_device_slot_or_node_capacity() -> None:
    cluster = gpu_cluster(2, 3, cpu="3")
    pods = [pod(f"p{i}", cpu="1", classes={HIGH: 1}) for i in range(8)]
    decisions = schedule_burst(pods, cluster, Assumed())
    bound = [d for d in decisions if isinstance(d, Binding)]
    assert len(bound) == 6
    devices = [pick.device for d in bound for pick in d.picks]
    assert len(devices) == len(set(devices)) == 6
    refused = [d for d in decisions if isinstance(d, Unschedulable)]
    assert refused[0].message == "0/2 nodes are available: 2 insufficient cpu."


@pytest.mark.parametrize(
    ("total", "wanted"), [(50, 50), (100, 100), (500, 230), (1000, 420), (5000, 500), (20000, 1000)]
)
def test_nodes_to_find_follows_kube_schedulers_adaptive_percentage(total: int, wanted: int) -> None:
    assert nodes_to_find(total) == wanted
    assert nodes_to_find(total, 100) == total


def test_filtering_stops_once_enough_feasible_nodes_are_found_and_rotates_the_start() -> None:
    cluster = gpu_cluster(500, 1)
    first = schedule_one(pod("p", classes={HIGH: 1}), cluster, Assumed())
    assert isinstance(first, Binding)
    assert (first.evaluated, first.feasible, first.next_start) == (230, 230, 230)
    second = schedule_one(pod("q", classes={HIGH: 1}), cluster, Assumed(), start=first.next_start)
    assert isinstance(second, Binding)
    assert second.node >= "node-230"
    everything = schedule_one(pod("p", classes={HIGH: 1}), cluster, Assumed(), Config(percentage_of_nodes_to_score=100))
    assert isinstance(everything, Binding)
    assert everything.evaluated == 500


@st.composite
def bursts(draw: st.DrawFn) -> tuple[Snapshot, list[PodInfo]]:
    nodes = [node(f"n{i}", cpu=str(draw(st.integers(1, 4)))) for i in range(draw(st.integers(1, 4)))]
    devices = []
    for i in range(draw(st.integers(0, 8))):
        seen = draw(st.lists(st.sampled_from([n.name for n in nodes]), min_size=1, max_size=2, unique=True))
        capacity = draw(st.integers(1, 3))
        memory = draw(st.sampled_from(["16Gi", "32Gi"]))
        kind = draw(st.sampled_from(["nvidia-gpu", "nic"]))
        devices.append(
            device(
                f"d{i}",
                seen,
                kind,
                capacity=capacity,
                free=draw(st.integers(0, capacity)),
                memory=memory,
                speed="40GBPS",
            )
        )
    pods = [
        pod(
            f"p{i:02d}",
            cpu=draw(st.sampled_from([None, "500m", "1"])),
            classes=draw(st.dictionaries(st.sampled_from([HIGH, "fast.nic"]), st.integers(1, 2), max_size=2)),
            priority=draw(st.integers(0, 2)),
        )
        for i in range(draw(st.integers(0, 10)))
    ]
    return Snapshot.build(nodes, devices, seed_classes()), pods


@given(bursts())
def test_every_binding_of_a_burst_respects_capacity_and_class_selectors(burst: tuple[Snapshot, list[PodInfo]]) -> None:
    cluster, pods = burst
    decisions = schedule_burst(pods, cluster, Assumed())
    by_key = {p.key: p for p in pods}
    slots: dict[str, int] = {}
    cpu: dict[str, int] = {}
    for decision in decisions:
        if not isinstance(decision, Binding):
            continue
        p = by_key[decision.pod]
        cpu[decision.node] = cpu.get(decision.node, 0) + p.requests.cpu
        devices = [pick.device for pick in decision.picks]
        assert len(devices) == len(set(devices))
        for pick in decision.picks:
            dev = cluster.devices.devices[pick.device]
            assert decision.node in dev.nodes
            assert cluster.classes[pick.cls].matches(dev.attributes)
            slots[pick.device] = slots.get(pick.device, 0) + pick.count
    for name, n in slots.items():
        assert n <= cluster.devices.free[name]
    for n in cluster.nodes:
        assert cpu.get(n.name, 0) <= n.allocatable.cpu
    assert schedule_burst(pods, cluster, Assumed()) == decisions  # deterministic


@given(bursts())
def test_a_burst_remembering_node_verdicts_decides_exactly_as_deciding_each_pod_afresh(
    burst: tuple[Snapshot, list[PodInfo]],
) -> None:
    cluster, pods = burst
    pods = [*pods, *pods[:3]]  # repeated asks: the memo's hits
    pods = [replace(p, name=f"{p.name}-{i}") for i, p in enumerate(pods)]
    remembered = schedule_burst(pods, cluster, Assumed())
    assumed, start, afresh = Assumed(), 0, []
    for p in pending_order(pods):
        decision = schedule_one(p, cluster, assumed, start=start)
        start = decision.next_start
        if isinstance(decision, Binding):
            assumed.assume(p, decision.node, decision.slots(), cluster.devices)
        afresh.append(decision)
    assert remembered == afresh


def test_identical_pods_of_a_burst_are_decided_exactly_as_without_the_memo_on_a_large_cluster() -> None:
    cluster = gpu_cluster(150, 2)
    pods = [pod(f"p{i:03d}", cpu="1", classes={HIGH: 1}) for i in range(320)]
    remembered = schedule_burst(pods, cluster, Assumed())
    assumed, start, afresh = Assumed(), 0, []
    for p in pending_order(pods):
        decision = schedule_one(p, cluster, assumed, start=start)
        start = decision.next_start
        if isinstance(decision, Binding):
            assumed.assume(p, decision.node, decision.slots(), cluster.devices)
        afresh.append(decision)
    assert remembered == afresh
    assert sum(isinstance(d, Binding) for d in remembered) == 300


def test_a_node_held_to_fewer_slots_than_free_is_passed_over_once_its_offer_is_promised() -> None:
    offered_once = replace(device("gpu-0", "node-a", capacity=3, memory="32Gi"), limits={"node-a": 1})
    cluster = Snapshot.build(
        [node("node-a"), node("node-b")], [offered_once, device("gpu-1", "node-b", memory="32Gi")], seed_classes()
    )
    decisions = schedule_burst([pod(f"p{i}", classes={HIGH: 1}) for i in range(3)], cluster, Assumed())
    assert [(d.pod, d.node) for d in decisions if isinstance(d, Binding)] == [
        ("default/p0", "node-a"),
        ("default/p1", "node-b"),
    ]
    [refused] = [d for d in decisions if isinstance(d, Unschedulable)]
    assert (
        refused.message == "0/2 nodes are available: 2 insufficient devices for class nvidia.high.mem: want 1, 0 free."
    )
