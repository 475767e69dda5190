"""Taints and tolerations, as Kubernetes decides them: the tables are the cases of Kubernetes' own tests, carried as
data (k8s.io/api core/v1 toleration_test.go; kube-scheduler's tainttoleration/taint_toleration_test.go and
nodeunschedulable/node_unschedulable_test.go), with devplace's reason words (kube-scheduler 1.25-1.33's:
`node(s) had untolerated taint {<key>: <value>}`) and the node lifecycle taints devplace derives from conditions."""

from __future__ import annotations

from typing import Any

import pytest

from devplace import errors
from devplace.scheduler._assumptions import Assumed
from devplace.scheduler._decisions import Binding, Snapshot, Unschedulable, schedule_one
from devplace.scheduler._filters import EVERY_EFFECT, Context, TaintToleration
from devplace.scheduler._nodes import node_info
from devplace.scheduler._pods import pod_info
from devplace.scheduler._scores import TaintToleration as TaintTolerationScore
from devplace.scheduler._selection import DeviceIndex
from devplace.scheduler._taints import Taint, Toleration, node_taints, pod_tolerations, tolerates


def wire_node(name: str = "nodeA", taints: list[dict[str, str]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": name}, "spec": dict(spec)}
    if taints is not None:
        body["spec"]["taints"] = taints
    return body


def wire_pod(tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": "pod1", "namespace": "default"}, "spec": spec}


CONTEXT = Context(DeviceIndex([], {}), Assumed(), {}, EVERY_EFFECT)


# -- k8s.io/api core/v1 toleration_test.go: TestTolerationToleratesTaint ----------------------------------------------

TOLERATES = [
    # (toleration, taint, tolerated with the comparison operators on)
    ({"key": "foo", "operator": "Exists", "effect": "NoSchedule"}, {"key": "foo", "effect": "NoSchedule"}, True),
    (
        {"key": "foo", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "foo", "value": "bar", "effect": "NoSchedule"},
        True,
    ),
    (
        {"key": "", "operator": "Exists", "effect": "NoSchedule"},  # empty key with Exists: every key
        {"key": "foo", "value": "bar", "effect": "NoSchedule"},
        True,
    ),
    (
        {"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"},
        {"key": "foo", "value": "bar", "effect": "NoSchedule"},
        True,
    ),
    (
        {"key": "foo", "operator": "Equal", "value": "value1", "effect": "NoSchedule"},
        {"key": "foo", "value": "value2", "effect": "NoSchedule"},
        False,
    ),
    (
        {"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"},
        {"key": "foo", "value": "bar", "effect": "NoExecute"},
        False,
    ),
    (
        {"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/sla", "value": "800", "effect": "NoSchedule"},
        False,
    ),
    (
        {"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"},
        True,
    ),
    (
        {"key": "node.kubernetes.io/sla", "operator": "Lt", "value": "800", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"},
        False,
    ),
    (
        {"key": "node.kubernetes.io/sla", "operator": "Lt", "value": "950", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/sla", "value": "800", "effect": "NoSchedule"},
        True,
    ),
    (
        {"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"},
        False,
    ),
    (
        {"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/sla", "value": "high", "effect": "NoSchedule"},
        False,
    ),
    (
        {"key": "test-key", "operator": "Gt", "value": "-100", "effect": "NoSchedule"},
        {"key": "test-key", "value": "-200", "effect": "NoSchedule"},
        False,
    ),
    (
        {"key": "test-key", "operator": "Gt", "value": "9223372036854775806", "effect": "NoSchedule"},
        {"key": "test-key", "value": "100", "effect": "NoSchedule"},
        False,
    ),
    # the rules the brief states outright: Exists with no key and no effect tolerates everything; no effect: all
    ({"operator": "Exists"}, {"key": "nvidia.com/gpu", "value": "x", "effect": "NoExecute"}, True),
    ({"key": "foo", "value": "bar"}, {"key": "foo", "value": "bar", "effect": "PreferNoSchedule"}, True),
    ({"key": "foo", "operator": "Exists", "tolerationSeconds": 30}, {"key": "foo", "effect": "NoExecute"}, True),
]


def _taint(wire: dict[str, str]) -> Taint:
    return Taint(wire["key"], wire.get("value", ""), wire["effect"])


@pytest.mark.parametrize(("toleration", "taint", "expected"), TOLERATES)
def test_a_toleration_tolerates_a_taint_as_kubernetes_decides(
    toleration: dict[str, Any], taint: dict[str, str], expected: bool
) -> None:
    [parsed] = pod_tolerations(wire_pod([toleration]))
    assert tolerates(parsed, _taint(taint), comparisons=True) is expected


@pytest.mark.parametrize(
    ("operator", "threshold", "value"), [("Gt", "750", "950"), ("Lt", "950", "800")], ids=["Gt", "Lt"]
)
def test_lt_and_gt_tolerate_nothing_without_kubernetes_alpha_gate(operator: str, threshold: str, value: str) -> None:
    toleration = Toleration("node.kubernetes.io/sla", operator, threshold, "NoSchedule")
    taint = Taint("node.kubernetes.io/sla", value, "NoSchedule")
    assert tolerates(toleration, taint, comparisons=True) is True
    assert tolerates(toleration, taint) is False


# -- tainttoleration: TestTaintTolerationFilter (and ...WithFeatureGate, the gate off) ---------------------------------

FILTER = [
    # (pod tolerations, node taints, the reason the node is refused or None)
    ([], [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}], "{dedicated: user1}"),
    (
        [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        None,
    ),
    (
        [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
        [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        "{dedicated: user1}",
    ),
    (
        [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
        [{"key": "foo", "value": "bar", "effect": "NoSchedule"}],
        None,
    ),
    (
        [
            {"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"},
            {"key": "foo", "operator": "Exists", "effect": "NoSchedule"},
        ],
        [
            {"key": "dedicated", "value": "user2", "effect": "NoSchedule"},
            {"key": "foo", "value": "bar", "effect": "NoSchedule"},
        ],
        None,
    ),
    (
        [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
        [{"key": "foo", "value": "bar", "effect": "NoSchedule"}],
        "{foo: bar}",
    ),
    (
        [{"key": "foo", "operator": "Equal", "value": "bar"}],
        [{"key": "foo", "value": "bar", "effect": "NoSchedule"}],
        None,
    ),
    (
        [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
        [{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}],
        None,
    ),
    ([], [{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}], None),
    (
        [{"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"}],
        [{"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"}],
        "{node.kubernetes.io/sla: 950}",
    ),
    (
        [{"key": "node.kubernetes.io/sla", "operator": "Lt", "value": "950", "effect": "NoSchedule"}],
        [{"key": "node.kubernetes.io/sla", "value": "800", "effect": "NoSchedule"}],
        "{node.kubernetes.io/sla: 800}",
    ),
    (
        [
            {"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"},
        ],
        [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        None,
    ),
    (
        [
            {"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"},
        ],
        [
            {"key": "dedicated", "value": "user1", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/sla", "value": "950", "effect": "NoSchedule"},
        ],
        "{node.kubernetes.io/sla: 950}",
    ),
    # NoExecute filters as NoSchedule does; the GPU operator's usual taint
    ([], [{"key": "foo", "value": "bar", "effect": "NoExecute"}], "{foo: bar}"),
    ([], [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}], "{nvidia.com/gpu: }"),
]


@pytest.mark.parametrize(("tolerations", "taints", "untolerated"), FILTER)
def test_the_taint_filter_refuses_a_node_for_its_first_untolerated_no_schedule_or_no_execute_taint(
    tolerations: list[dict[str, Any]], taints: list[dict[str, str]], untolerated: str | None
) -> None:
    check = TaintToleration().prepare(pod_info(wire_pod(tolerations)), CONTEXT)
    assert check is not None
    expected = None if untolerated is None else f"node(s) had untolerated taint {untolerated}"
    assert check(node_info(wire_node(taints=taints))) == expected


# -- tainttoleration: TestTaintTolerationScore (the comparison-operator rows need the alpha gate: left out) -----------

ARM = {"key": "cpu-type", "value": "arm64", "effect": "PreferNoSchedule"}
SSD = {"key": "disk-type", "value": "ssd", "effect": "PreferNoSchedule"}
SCORE = [
    # (pod tolerations, node -> taints, node -> kube-scheduler's normalized score)
    (
        [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
        {
            "nodeA": [{"key": "foo", "value": "bar", "effect": "PreferNoSchedule"}],
            "nodeB": [{"key": "foo", "value": "blah", "effect": "PreferNoSchedule"}],
        },
        {"nodeA": 100, "nodeB": 0},
    ),
    (
        [
            {"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": "PreferNoSchedule"},
            {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": "PreferNoSchedule"},
        ],
        {"nodeA": [], "nodeB": [ARM], "nodeC": [ARM, SSD]},
        {"nodeA": 100, "nodeB": 100, "nodeC": 100},
    ),
    (
        [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
        {"nodeA": [], "nodeB": [ARM], "nodeC": [ARM, SSD]},
        {"nodeA": 100, "nodeB": 50, "nodeC": 0},
    ),
    (
        [
            {"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"},
            {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": "NoSchedule"},
        ],
        {"nodeA": [], "nodeB": [{**ARM, "effect": "NoSchedule"}], "nodeC": [ARM, SSD]},
        {"nodeA": 100, "nodeB": 100, "nodeC": 0},
    ),
    ([], {"nodeA": [], "nodeB": [ARM]}, {"nodeA": 100, "nodeB": 0}),
]


def _sign(n: int) -> int:
    return (n > 0) - (n < 0)


@pytest.mark.parametrize(("tolerations", "nodes", "kubernetes"), SCORE)
def test_prefer_no_schedule_taints_rank_nodes_as_kube_scheduler_does(
    tolerations: list[dict[str, Any]], nodes: dict[str, list[dict[str, str]]], kubernetes: dict[str, int]
) -> None:
    score = TaintTolerationScore().prepare(pod_info(wire_pod(tolerations)), CONTEXT)
    assert score is not None
    ours = {name: score(node_info(wire_node(name, taints=taints))) for name, taints in nodes.items()}
    assert ours["nodeA"] == 100  # kube-scheduler's maximum where nothing is intolerable
    for a in nodes:  # kube-scheduler normalizes over the nodes; a node's own score keeps the same order and ties
        for b in nodes:
            assert _sign(ours[a] - ours[b]) == _sign(kubernetes[a] - kubernetes[b]), (a, b, ours)


# -- nodeunschedulable: TestNodeUnschedulable, through the whole filter chain ---------------------------------------


@pytest.mark.parametrize(
    ("unschedulable", "tolerations", "expected"),
    [
        (True, None, "0/1 nodes are available: 1 node(s) were unschedulable."),
        (False, None, None),
        (True, [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}], None),
    ],
)
def test_a_cordoned_node_takes_only_pods_tolerating_the_unschedulable_taint(
    unschedulable: bool, tolerations: list[dict[str, Any]] | None, expected: str | None
) -> None:
    cluster = Snapshot.build([node_info(wire_node(unschedulable=unschedulable))], [], {})
    decision = schedule_one(pod_info(wire_pod(tolerations)), cluster, Assumed())
    if expected is None:
        assert isinstance(decision, Binding)
        assert decision.node == "nodeA"
    else:
        assert isinstance(decision, Unschedulable)
        assert decision.message == expected


# -- the node lifecycle taints devplace derives from conditions ------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "spec", "expected"),
    [
        ([{"type": "Ready", "status": "False"}], {}, [("node.kubernetes.io/not-ready", "NoSchedule")]),
        ([{"type": "Ready", "status": "Unknown"}], {}, [("node.kubernetes.io/unreachable", "NoSchedule")]),
        ([{"type": "Ready", "status": "True"}], {}, []),
        ([], {}, []),  # no Ready condition: not known to be unready
        (
            [
                {"type": "Ready", "status": "True"},
                {"type": "MemoryPressure", "status": "True"},
                {"type": "DiskPressure", "status": "True"},
                {"type": "PIDPressure", "status": "True"},
                {"type": "NetworkUnavailable", "status": "True"},
            ],
            {},
            [
                ("node.kubernetes.io/memory-pressure", "NoSchedule"),
                ("node.kubernetes.io/disk-pressure", "NoSchedule"),
                ("node.kubernetes.io/pid-pressure", "NoSchedule"),
                ("node.kubernetes.io/network-unavailable", "NoSchedule"),
            ],
        ),
        ([{"type": "MemoryPressure", "status": "False"}], {}, []),
        ([], {"unschedulable": True}, [("node.kubernetes.io/unschedulable", "NoSchedule")]),
        (  # the controller's own taint is not doubled; its NoExecute one stays, and the NoSchedule one is derived
            [{"type": "Ready", "status": "False"}],
            {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]},
            [("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/not-ready", "NoSchedule")],
        ),
        (
            [{"type": "Ready", "status": "False"}],
            {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
            [("node.kubernetes.io/not-ready", "NoSchedule")],
        ),
        (  # a taint of the node's own first, then the derived ones
            [{"type": "DiskPressure", "status": "True"}],
            {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
            [("nvidia.com/gpu", "NoSchedule"), ("node.kubernetes.io/disk-pressure", "NoSchedule")],
        ),
    ],
)
def test_a_node_carries_the_taints_the_node_lifecycle_controller_keeps_for_its_conditions(
    conditions: list[dict[str, str]], spec: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    node = {"metadata": {"name": "n"}, "spec": spec, "status": {"conditions": conditions}}
    assert [(t.key, t.effect) for t in node_taints(node)] == expected


# -- bad input ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toleration", "message"),
    [
        ({"key": "a", "operator": "In"}, "spec.tolerations[0].operator: must be Equal, Exists, Lt or Gt, not 'In'"),
        (
            {"key": "a", "effect": "Never"},
            "spec.tolerations[0].effect: must be empty or one of NoSchedule, PreferNoSchedule, NoExecute",
        ),
        (
            {"key": "a", "operator": "Exists", "value": "b"},
            "spec.tolerations[0].value: must be empty when operator is Exists",
        ),
        ({"value": "b"}, "spec.tolerations[0].operator: must be Exists when key is empty"),
        ({"key": 3}, "spec.tolerations[0].key: must be a string, not int"),
        ({"key": "a", "tolerationSeconds": "30"}, "spec.tolerations[0].tolerationSeconds: must be an integer"),
    ],
)
def test_a_bad_toleration_is_refused_naming_the_field(toleration: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        pod_tolerations(wire_pod([toleration]))
    assert caught.value.message == message


@pytest.mark.parametrize(
    ("taints", "message"),
    [
        (
            [{"key": "a", "effect": "Sometimes"}],
            "spec.taints[0].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute, not 'Sometimes'",
        ),
        ([{"effect": "NoSchedule"}], "spec.taints[0].key: required"),
        ("a=b:NoSchedule", "spec.taints: must be a list, not str"),
    ],
)
def test_a_bad_taint_is_refused_naming_the_field(taints: Any, message: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        node_taints({"metadata": {"name": "n"}, "spec": {"taints": taints}})
    assert caught.value.message == message
