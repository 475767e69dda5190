from __future__ import annotations

import pytest

from devplace import errors
from devplace.scheduler._nodes import Resources
from devplace.scheduler._pods import pending_order, pod_info
from tests.scheduler.builders import pod


def test_requests_are_kubernetes_effective_requests_and_classes_are_kept_apart() -> None:
    info = pod_info(
        {
            "metadata": {"name": "p"},
            "spec": {
                "containers": [
                    {"resources": {"requests": {"cpu": "500m", "memory": "1Gi", "rc.devplace.io/fast.nic": "1"}}},
                    {"resources": {"limits": {"cpu": "1", "example.com/fpga": "1"}}},  # a limit implies the request
                ],
                "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
                "overhead": {"memory": "64Mi"},
            },
        }
    )
    assert info.requests == Resources(cpu=2000, memory=2**30 + 64 * 2**20, pods=1, extended={"example.com/fpga": 1})
    assert info.classes == {"fast.nic": 1}


def test_pending_order_is_priority_then_age_then_namespace_and_name() -> None:
    pods = [
        pod("young", created="2024-01-02T00:00:00Z"),
        pod("undated"),
        pod("b-old", created="2024-01-01T00:00:00Z"),
        pod("a-old", created="2024-01-01T00:00:00Z"),
        pod("urgent", priority=1000, created="2024-06-01T00:00:00Z"),
    ]
    assert [p.name for p in pending_order(pods)] == ["urgent", "a-old", "b-old", "young", "undated"]


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"containers": [{"resources": {"requests": {"cpu": "1K"}}}]}, "spec.containers[0].resources.requests[cpu]"),
        ({"nodeSelector": {"a": 1}}, "spec.nodeSelector"),
        ({"priority": "high"}, "spec.priority"),
        (
            {
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": {}}}
                }
            },
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
        ),
    ],
)
def test_a_malformed_pod_is_refused_naming_the_field(spec: dict[str, object], path: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        pod_info({"metadata": {"name": "p"}, "spec": spec})
    assert caught.value.fields[0].path == path
