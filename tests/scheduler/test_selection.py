from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace.scheduler._classes import STRATEGIES, ResolvedClass, Strategy, resolve_classes
from devplace.scheduler._devices import Device
from devplace.scheduler._selection import (
    BatchPod,
    BatchResult,
    DeviceIndex,
    Pick,
    Refusal,
    Selection,
    place_batch,
    select_devices,
)
from tests.scheduler.builders import SEED_CLASSES, device, seed_classes


def gpus(node: str, frees: list[int], capacity: int = 4) -> list[Device]:
    return [device(f"gpu-{i}", node, capacity=capacity, free=f, memory="32Gi") for i, f in enumerate(frees)]


HIGH = "nvidia.high.mem"


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("firstFit", ["gpu-0", "gpu-1"]),  # name order (seed 003)
        ("binpack", ["gpu-2", "gpu-3"]),  # fewest free slots first
        ("optimal", ["gpu-2", "gpu-3"]),  # one pod: like binpack
        ("spread", ["gpu-0", "gpu-1"]),  # most free slots first
    ],
)
def test_each_strategy_orders_the_devices_it_picks(strategy: Strategy, expected: list[str]) -> None:
    index = DeviceIndex(gpus("node-a", [4, 3, 1, 2]), seed_classes())
    decision = select_devices({HIGH: 2}, "node-a", index, strategies=strategy)
    assert isinstance(decision, Selection)
    assert sorted(p.device for p in decision.picks) == sorted(expected)


def test_spread_prefers_the_emptiest_devices() -> None:
    index = DeviceIndex(gpus("node-a", [1, 3, 4, 2]), seed_classes())
    decision = select_devices({HIGH: 2}, "node-a", index, strategies="spread")
    assert isinstance(decision, Selection)
    assert [p.device for p in decision.picks] == ["gpu-1", "gpu-2"]


def test_full_devices_and_slots_taken_by_assumed_pods_are_skipped() -> None:
    index = DeviceIndex(gpus("node-a", [0, 1, 1]), seed_classes())
    decision = select_devices({HIGH: 1}, "node-a", index, taken={"gpu-1": 1})
    assert decision == Selection((Pick(HIGH, "gpu-2"),), 3)


def test_pod_asking_for_eleven_devices_on_a_node_of_ten_is_refused_with_a_reason() -> None:
    index = DeviceIndex(gpus("node-a", [1] * 10, capacity=1), seed_classes())
    decision = select_devices({HIGH: 11}, "node-a", index)
    assert decision == Refusal(f"insufficient devices for class {HIGH}: want 11, 10 free", 10)


def test_a_class_no_device_on_the_node_matches_is_refused_as_such() -> None:
    index = DeviceIndex(gpus("node-a", [1]), seed_classes())
    assert select_devices({"fast.nic": 1}, "node-a", index) == Refusal("no device matches class fast.nic", 0)
    assert select_devices({HIGH: 1}, "node-b", index) == Refusal(f"no device matches class {HIGH}", 0)


def test_a_node_offering_a_device_fewer_slots_than_it_has_free_is_held_to_its_offer() -> None:
    offered = replace(device("gpu-0", "node-a", capacity=3, memory="32Gi"), limits={"node-a": 1})
    index = DeviceIndex([offered, device("gpu-1", "node-b", capacity=3, memory="32Gi")], seed_classes())
    assert select_devices({HIGH: 1}, "node-a", index) == Selection((Pick(HIGH, "gpu-0"),), 1)
    promised = {"gpu-0": 1}  # one slot already promised to a pod assumed on node-a
    refused = select_devices({HIGH: 1}, "node-a", index, taken=promised, here=promised)
    assert refused == Refusal(f"insufficient devices for class {HIGH}: want 1, 0 free", 1)
    elsewhere = select_devices({HIGH: 1}, "node-a", index, taken=promised)  # promised on another node that sees it
    assert elsewhere == Selection((Pick(HIGH, "gpu-0"),), 1)


def test_devices_a_node_lists_but_does_not_offer_are_named_in_the_refusal() -> None:
    unoffered = replace(device("gpu-0", "node-a", memory="32Gi"), nodes=frozenset(), waiting=frozenset({"node-a"}))
    index = DeviceIndex([unoffered, device("gpu-1", "node-a", memory="32Gi", free=0)], seed_classes())
    assert index.usable == {"node-a": {HIGH: 0}}
    assert select_devices({HIGH: 1}, "node-a", index) == Refusal(
        f"insufficient devices for class {HIGH}: want 1, 0 free, 1 not in the node's allocatable", 1
    )
    alone = DeviceIndex([unoffered], seed_classes())
    assert select_devices({HIGH: 1}, "node-a", alone) == Refusal(
        f"insufficient devices for class {HIGH}: want 1, 0 free, 1 not in the node's allocatable", 0
    )
    assert select_devices({HIGH: 1}, "node-b", alone) == Refusal(f"no device matches class {HIGH}", 0)


def test_a_pod_never_gets_two_slots_of_one_device_even_through_two_classes() -> None:
    classes = resolve_classes(
        {**SEED_CLASSES, "gpu": {"resourceSelector": [{"classRef": HIGH}]}}  # same devices as nvidia.high.mem
    )
    index = DeviceIndex(gpus("node-a", [4]), classes)
    assert isinstance(select_devices({HIGH: 1, "gpu": 1}, "node-a", index), Refusal)
    index = DeviceIndex(gpus("node-a", [4, 4]), classes)
    decision = select_devices({HIGH: 1, "gpu": 1}, "node-a", index)
    assert isinstance(decision, Selection)
    assert sorted(p.device for p in decision.picks) == ["gpu-0", "gpu-1"]


def overlapping(wide: str = "wide", narrow: str = "narrow") -> dict[str, ResolvedClass]:
    """`wide` matches every gpu; `narrow` only those with 80Gi."""
    return resolve_classes(
        {
            narrow: {
                "resourceSelector": [{"matchExpressions": [{"key": "memory", "operator": "GtEq", "values": ["80Gi"]}]}]
            },
            wide: {
                "resourceSelector": [
                    {"matchExpressions": [{"key": "Kind", "operator": "In", "values": ["nvidia-gpu"]}]}
                ]
            },
        }
    )


def test_overlapping_classes_are_solved_exactly_where_first_fit_per_class_would_fail() -> None:
    devices = [device("gpu-0", "node-a", memory="80Gi"), device("gpu-1", "node-a", memory="16Gi")]
    index = DeviceIndex(devices, overlapping(wide="gpu", narrow="high"))
    # class by class in name order, first fit would give `gpu` gpu-0 and leave `high` nothing; the flow does not
    decision = select_devices({"gpu": 1, "high": 1}, "node-a", index)
    assert decision == Selection((Pick("gpu", "gpu-1"), Pick("high", "gpu-0")), 3)
    refused = select_devices({"gpu": 1, "high": 2}, "node-a", index)
    assert refused == Refusal("insufficient devices for class high: want 2, 1 free", 3)
    refused = select_devices({"gpu": 2, "high": 1}, "node-a", index)
    assert refused == Refusal("insufficient devices for classes gpu, high: want 3 distinct, 2 free", 3)


def test_no_solution_over_five_hundred_identical_devices_is_refused_after_a_linear_number_of_candidates() -> None:
    index = DeviceIndex(gpus("node-a", [1] * 500, capacity=1), seed_classes())
    decision = select_devices({HIGH: 501}, "node-a", index)
    assert isinstance(decision, Refusal)
    assert decision.examined == 500
    # two classes over the same 500 devices: each class looks at each device once, then a flow over one group
    classes = resolve_classes({**SEED_CLASSES, "gpu": {"resourceSelector": [{"classRef": HIGH}]}})
    index = DeviceIndex(gpus("node-a", [1] * 500, capacity=1), classes)
    decision = select_devices({HIGH: 250, "gpu": 251}, "node-a", index)
    assert decision == Refusal(f"insufficient devices for classes gpu, {HIGH}: want 501 distinct, 500 free", 1000)


# ---------------------------------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------------------------------


def test_optimal_places_more_than_a_greedy_first_fit_on_a_fragmented_batch() -> None:
    classes = overlapping()
    devices = [device("gpu-0", "node-a", memory="80Gi"), device("gpu-1", "node-b", memory="16Gi")]
    index = DeviceIndex(devices, classes)
    pods = [
        BatchPod("p-wide", {"wide": 1}, ("node-a", "node-b")),
        BatchPod("p-narrow", {"narrow": 1}, ("node-a", "node-b")),
    ]
    greedy = place_batch(pods, index, "firstFit")
    assert greedy.count == 1
    assert (
        greedy.refused["p-narrow"]
        == "0/2 nodes are available: 1 insufficient devices for class narrow: want 1, 0 free, "
        "1 no device matches class narrow."
    )
    best = place_batch(pods, index, "optimal")
    assert best.count == 2
    assert best.placed["p-wide"].node == "node-b"


CLASS_NAMES = ("high", "low", "any")


def batch_classes() -> dict[str, ResolvedClass]:
    return resolve_classes(
        {
            "high": {
                "resourceSelector": [{"matchExpressions": [{"key": "memory", "operator": "GtEq", "values": ["30G"]}]}]
            },
            "low": {
                "resourceSelector": [{"matchExpressions": [{"key": "memory", "operator": "Lt", "values": ["30G"]}]}]
            },
            "any": {"resourceSelector": [{"classRef": "high"}, {"classRef": "low"}]},
        }
    )


@st.composite
def batches(draw: st.DrawFn, max_want: int = 1) -> tuple[DeviceIndex, list[BatchPod]]:
    nodes = [f"n{i}" for i in range(draw(st.integers(1, 4)))]
    devices = []
    for i in range(draw(st.integers(0, 10))):
        seen = draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=2, unique=True))
        capacity = draw(st.integers(1, 3))
        memory = draw(st.sampled_from(["16Gi", "32Gi", "80Gi"]))
        devices.append(device(f"d{i}", seen, capacity=capacity, free=draw(st.integers(0, capacity)), memory=memory))
    pods = []
    for p in range(draw(st.integers(0, 12))):
        wants = draw(
            st.dictionaries(
                st.sampled_from(CLASS_NAMES), st.integers(1, max_want), min_size=1, max_size=1 if max_want == 1 else 2
            )
        )
        candidates = draw(st.lists(st.sampled_from(nodes), min_size=1, unique=True))
        pods.append(BatchPod(f"p{p:02d}", wants, tuple(candidates)))
    return DeviceIndex(devices, batch_classes()), pods


def assert_respects_capacity_and_selectors(index: DeviceIndex, pods: list[BatchPod], result: BatchResult) -> None:
    used: dict[str, int] = {}
    by_key = {p.key: p for p in pods}
    for key, placement in result.placed.items():
        pod = by_key[key]
        assert placement.node in pod.nodes
        picked = [p.device for p in placement.selection.picks]
        assert len(picked) == len(set(picked)), "a pod got two slots of one device"
        got: dict[str, int] = {}
        for pick in placement.selection.picks:
            dev = index.devices[pick.device]
            assert placement.node in dev.nodes
            assert index.classes[pick.cls].matches(dev.attributes)
            got[pick.cls] = got.get(pick.cls, 0) + pick.count
            used[pick.device] = used.get(pick.device, 0) + pick.count
        assert got == {c: n for c, n in pod.requests.items() if n}
    for name, n in used.items():
        assert n <= index.free[name], f"{name} double-booked"
    assert set(result.placed) | set(result.refused) == set(by_key)
    assert not set(result.placed) & set(result.refused)


@given(batches(max_want=3))
def test_every_batch_placement_respects_capacity_and_class_selectors(batch: tuple[DeviceIndex, list[BatchPod]]) -> None:
    index, pods = batch
    for strategy in STRATEGIES:
        assert_respects_capacity_and_selectors(index, pods, place_batch(pods, index, strategy))


@given(batches())
def test_optimal_never_places_fewer_one_device_pods_than_any_greedy_strategy(
    batch: tuple[DeviceIndex, list[BatchPod]],
) -> None:
    index, pods = batch
    best = place_batch(pods, index, "optimal").count
    for strategy in ("firstFit", "binpack", "spread"):
        assert best >= place_batch(pods, index, strategy).count


@given(batches(max_want=3))
def test_optimal_never_places_fewer_pods_than_any_greedy_strategy_with_multi_device_pods(
    batch: tuple[DeviceIndex, list[BatchPod]],
) -> None:
    index, pods = batch
    best = place_batch(pods, index, "optimal").count
    for strategy in ("firstFit", "binpack", "spread"):
        assert best >= place_batch(pods, index, strategy).count


@given(batches(max_want=2))
def test_batch_placement_is_deterministic(batch: tuple[DeviceIndex, list[BatchPod]]) -> None:
    index, pods = batch
    for strategy in STRATEGIES:
        assert place_batch(pods, index, strategy) == place_batch(pods, index, strategy)


def test_optimal_fills_every_slot_of_a_cluster_and_refuses_the_rest_of_many_identical_pods() -> None:
    devices = [device(f"gpu-{n:03d}-{i}", f"node-{n:03d}", memory="32Gi") for n in range(50) for i in range(10)]
    index = DeviceIndex(devices, seed_classes())
    nodes = tuple(f"node-{n:03d}" for n in range(50))
    pods = [BatchPod(f"p{i:04d}", {HIGH: 1}, nodes) for i in range(600)]
    result = place_batch(pods, index, "optimal")
    assert result.count == 500
    assert len(result.refused) == 100
    assert_respects_capacity_and_selectors(index, pods, result)
