"""The action controller: manifests patched for a cluster, valid for Kubernetes 1.37 (strict)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from devplace.placement._actions import patch_manifests, replicas_of, target_problems, warnings, workload_replicas
from devplace.placement._hpa import Consumer, Requirement
from devplace.placement._inventory import ClusterInventory, ClusterRef, NodeInventory, milli
from tests.placement.samples import label, need, workload


def valid(obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, "1.37.0", strict=True)


def cluster(**free: str) -> ClusterInventory:
    names = {"gpu": "nvidia.com/gpu"}
    node = NodeInventory("n", {names.get(k, k): milli(v) for k, v in free.items()}, {"turbo": "on"})
    return ClusterInventory(ClusterRef("edge", "c"), {}, (node,))


def consumer(kind: str, *reqs: Requirement, set_replicas: int | None = None, **kw: Any) -> Consumer:
    return Consumer(
        "app",
        "worker",
        kind=kind,
        workload="worker",
        container="main",
        requirements=reqs,
        set_replicas=set_replicas,
        replicas=set_replicas or 1,
        intent="intent",
        **kw,
    )


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]


KINDS = ["Deployment", "StatefulSet", "DaemonSet", "Job", "Pod"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_workload_kind_gets_resources_and_node_selection(kind: str) -> None:
    manifests = [workload(kind, "worker", "main", "sidecar"), workload("Deployment", "other", "x")]
    c = consumer(
        kind,
        need("cpu", "4", "4"),
        need("memory", "1G", "1G"),
        need("intel.com/qat", "1"),
        label("feature.node.kubernetes.io/cpu-pstate.turbo", "true"),
    )
    out = patch_manifests(manifests, [c], cluster(cpu="8"))
    for obj in out:
        valid(obj)
    spec = pod_spec(out[0])
    assert spec["containers"][0]["resources"] == {
        "requests": {"cpu": "4", "memory": "1G", "intel.com/qat": "1"},
        "limits": {"cpu": "4", "memory": "1G", "intel.com/qat": "1"},  # an extended resource gets limits too
    }
    assert "resources" not in spec["containers"][1]
    assert spec["nodeSelector"] == {"feature.node.kubernetes.io/cpu-pstate.turbo": "true"}
    assert out[1] == manifests[1]
    assert manifests[0] == workload(kind, "worker", "main", "sidecar")  # inputs are not changed


def test_requests_without_limits_stay_so() -> None:
    out = patch_manifests(
        [workload("StatefulSet", "worker", "main")], [consumer("StatefulSet", need("cpu", "2"))], cluster()
    )
    valid(out[0])
    assert pod_spec(out[0])["containers"][0]["resources"] == {"requests": {"cpu": "2"}}


def test_a_manifest_limit_below_the_new_request_is_raised() -> None:
    obj = workload("Deployment", "worker", "main")
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "1"},
        "requests": {"memory": "5G"},
    }
    out = patch_manifests([obj], [consumer("Deployment", need("cpu", "2"), need("memory", None, "1G"))], cluster())
    valid(out[0])
    assert pod_spec(out[0])["containers"][0]["resources"] == {
        "limits": {"cpu": "2", "memory": "1G"},
        "requests": {"memory": "1G", "cpu": "2"},
    }


def test_several_values_for_one_label_become_node_affinity() -> None:
    obj = workload("Deployment", "worker", "main")
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "x", "disk": "ssd"}
    obj["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["amd64"]}]},
                    {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["arm64"]}]},
                ]
            }
        }
    }
    c = consumer("Deployment", label("zone", "a"), label("zone", "b"))
    out = patch_manifests([obj], [c], cluster())
    valid(out[0])
    spec = pod_spec(out[0])
    assert spec["nodeSelector"] == {"disk": "ssd"}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    zone = {"key": "zone", "operator": "In", "values": ["a", "b"]}
    assert [t["matchExpressions"] for t in terms] == [
        [{"key": "arch", "operator": "In", "values": ["amd64"]}, zone],
        [{"key": "arch", "operator": "In", "values": ["arm64"]}, zone],
    ]


def test_multi_valued_labels_alone_create_a_term() -> None:
    out = patch_manifests(
        [workload("Pod", "worker", "main")], [consumer("Pod", label("zone", "a"), label("zone", "b"))], cluster()
    )
    valid(out[0])
    assert "nodeSelector" not in pod_spec(out[0])
    terms = pod_spec(out[0])["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]
    }


def test_optional_requirements_are_added_only_where_the_cluster_meets_them() -> None:
    c = consumer(
        "Deployment",
        need("cpu", "1"),
        need("nvidia.com/gpu", None, "1", mandatory=False, weight=9),
        label("turbo", "on", mandatory=False, weight=3),
        label("fpga", "yes", mandatory=False),
    )
    with_gpu = patch_manifests([workload("Deployment", "worker", "main")], [c], cluster(cpu="4", gpu="1"))[0]
    without = patch_manifests([workload("Deployment", "worker", "main")], [c], cluster(cpu="4"))[0]
    valid(with_gpu)
    valid(without)
    assert pod_spec(with_gpu)["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    assert pod_spec(without)["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
    preferred = pod_spec(without)["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred == [
        {"weight": 30, "preference": {"matchExpressions": [{"key": "turbo", "operator": "In", "values": ["on"]}]}}
    ]


@pytest.mark.parametrize(
    ("kind", "field"), [("Deployment", "replicas"), ("StatefulSet", "replicas"), ("Job", "parallelism")]
)
def test_the_intents_replicas_are_written(kind: str, field: str) -> None:
    out = patch_manifests(
        [workload(kind, "worker", "main")], [consumer(kind, need("cpu", "1"), set_replicas=3)], cluster(cpu="8")
    )
    valid(out[0])
    assert out[0]["spec"][field] == 3
    assert replicas_of(out) == 3


def test_replicas_counting() -> None:
    manifests = [
        workload("Deployment", "a", "c", replicas=2),
        workload("StatefulSet", "b", "c"),
        workload("DaemonSet", "d", "c"),
        workload("Pod", "p", "c"),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
    ]
    assert replicas_of(manifests) == 4
    assert workload_replicas(manifests, "Deployment", "a") == 2
    assert workload_replicas(manifests, "DaemonSet", "d") == 1
    assert workload_replicas(manifests, "Deployment", "missing") == 1


def test_target_problems_name_the_missing_piece() -> None:
    manifests = {
        "app": [
            workload("Deployment", "worker", "main"),
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"}},
        ]
    }
    consumers = [
        Consumer("ghost", "a", intent="i1", workload="worker"),
        Consumer("app", "b", kind="StatefulSet", workload="worker", intent="i2"),
        Consumer("app", "c", workload="worker", container="nope", intent="i3"),
        Consumer("app", "d", workload="worker", intent="i4", requirements=(need("cpu", "1"),)),
        Consumer("app", "e", kind="Pod", workload="bare", intent="i5"),
        Consumer("app", "f", workload="worker", container="main", intent="i6", requirements=(need("cpu", "1"),)),
    ]
    assert target_problems(consumers, manifests) == [
        "hpa intent i1: app 'ghost' is not an app of the composite app",
        "hpa resource consumer i2/b: app app has no StatefulSet 'worker'",
        "hpa resource consumer i3/c: Deployment worker has no container 'nope'",
        "hpa resource consumer i4/d: container-name is required once an allocatable requirement exists",
        "hpa resource consumer i5/e: Pod bare has no pod spec",
    ]


@pytest.mark.parametrize(
    ("reqs", "explicit", "expected"),
    [
        ((need("cpu", "4", "4"), need("memory", "1G", "1G")), False, []),  # seed 004's core-fwall: fine
        ((need("cpu", "1", "2"), need("memory", "200M")), False, []),  # not asking
        ((need("cpu", None, "4"), need("memory", None, "1G")), True, []),  # limits alone: requests default to them
        ((need("cpu", "1", "2"), need("memory", "1G", "1G")), True, ["cpu requests (1) != limits (2)"]),
        ((need("cpu", "1500m", "1500m"), need("memory", "1G", "1G")), False, ["cpu 1500m is fractional"]),
        ((need("cpu", "2", "2"), need("memory", "1G", "2G")), False, ["memory requests (1G) != limits (2G)"]),
        ((need("cpu", "2", "2"), need("memory", "1G")), False, ["memory requests (1G) != limits (None)"]),
        ((need("cpu", "2", "2"),), False, ["has no memory requirement"]),
        ((need("memory", "1G", "1G"),), True, ["has no mandatory cpu requirement"]),
    ],
)
def test_exclusive_cpu_warnings(reqs: tuple[Requirement, ...], explicit: bool, expected: list[str]) -> None:
    got = warnings(consumer("Deployment", *reqs, exclusive_cpus=explicit))
    assert len(got) == len(expected)
    for line, fragment in zip(got, expected, strict=True):
        assert line.startswith("hpa resource consumer intent/worker asks for exclusive CPUs but")
        assert fragment in line
