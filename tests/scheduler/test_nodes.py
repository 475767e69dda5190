from __future__ import annotations

from devplace.scheduler._nodes import DEFAULT_MAX_PODS, Resources, availability_message, node_info


def test_node_info_reads_allocatable_and_sums_bound_pods() -> None:
    info = node_info(
        {
            "metadata": {"name": "n", "labels": {"zone": "a"}},
            "spec": {"unschedulable": True},
            "status": {"allocatable": {"cpu": "3500m", "memory": "8Gi", "hugepages-1Gi": "2Gi", "nvidia.com/gpu": "4"}},
        },
        [Resources(cpu=500, pods=1), Resources(memory=1024, pods=1, extended={"nvidia.com/gpu": 1})],
    )
    assert info.allocatable == Resources(
        3500, 8 * 2**30, DEFAULT_MAX_PODS, {"hugepages-1Gi": 2 * 2**30, "nvidia.com/gpu": 4}
    )
    assert info.requested == Resources(500, 1024, 2, {"nvidia.com/gpu": 1})
    assert info.unschedulable


def test_the_message_sorts_by_count_then_reason() -> None:
    assert availability_message(4, ["b", "a", "b", "c"]) == "0/4 nodes are available: 2 b, 1 a, 1 c."
    assert availability_message(0, []) == "0/0 nodes are available."
