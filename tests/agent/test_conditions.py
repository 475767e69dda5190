"""Per-node conditions on a Configuration: DiscoveryFailed and ResourceNameConflict."""

from __future__ import annotations

from typing import Any

from devplace.agent import _conditions as conditions
from devplace.agent._conditions import Failure

BAD = Failure(conditions.INVALID_DETAILS, "descriptions: required")
T0 = "2026-01-01T00:00:00.000000Z"
T1 = "2026-01-01T00:01:00.000000Z"


def cfg(status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"kind": "Configuration", "metadata": {"name": "c", "resourceVersion": "4"}, "spec": {}}
    if status is not None:
        obj["status"] = status
    return obj


def test_a_failure_adds_this_nodes_condition() -> None:
    out = conditions.with_condition(cfg(), "node-a", BAD, T0)
    assert out is not None
    assert out["status"]["conditions"] == [
        {
            "type": "DiscoveryFailed",
            "status": "True",
            "reason": "InvalidDiscoveryDetails",
            "message": "descriptions: required",
            "node": "node-a",
            "lastTransitionTime": T0,
        }
    ]


def test_the_same_failure_again_writes_nothing() -> None:
    once = conditions.with_condition(cfg(), "node-a", BAD, T0)
    assert once is not None
    assert conditions.with_condition(once, "node-a", BAD, T1) is None


def test_each_node_owns_only_its_condition() -> None:
    a = conditions.with_condition(cfg(), "node-a", BAD, T0)
    assert a is not None
    both = conditions.with_condition(a, "node-b", Failure(conditions.HANDLER_NOT_FOUND, "no handler"), T1)
    assert both is not None
    assert [c["node"] for c in both["status"]["conditions"]] == ["node-a", "node-b"]
    cleared = conditions.with_condition(both, "node-a", None, T1)
    assert cleared is not None
    assert [c["node"] for c in cleared["status"]["conditions"]] == ["node-b"]


def test_clearing_when_there_is_nothing_writes_nothing_and_other_conditions_stay() -> None:
    other = {"type": "Ready", "status": "True"}
    assert conditions.with_condition(cfg({"conditions": [other]}), "node-a", None, T0) is None
    out = conditions.with_condition(cfg({"conditions": [other]}), "node-a", BAD, T0)
    assert out is not None
    assert out["status"]["conditions"][0] == other


def test_each_condition_type_is_its_own_entry_so_two_writers_never_overwrite_each_other() -> None:
    taken = Failure(conditions.RESOURCE_NAME_TAKEN, "resource devplace.io/cams is served for a/cams")
    failed = conditions.with_condition(cfg(), "node-a", BAD, T0)
    assert failed is not None
    both = conditions.with_condition(failed, "node-a", taken, T1, conditions.RESOURCE_NAME_CONFLICT)
    assert both is not None
    assert [(c["type"], c["reason"]) for c in both["status"]["conditions"]] == [
        ("DiscoveryFailed", "InvalidDiscoveryDetails"),
        ("ResourceNameConflict", "ResourceNameTaken"),
    ]
    assert conditions.with_condition(both, "node-a", BAD, T1) is None
    assert conditions.with_condition(both, "node-a", taken, T1, conditions.RESOURCE_NAME_CONFLICT) is None
    cleared = conditions.with_condition(both, "node-a", None, T1, conditions.RESOURCE_NAME_CONFLICT)
    assert cleared is not None
    assert [c["type"] for c in cleared["status"]["conditions"]] == ["DiscoveryFailed"]


# -- the one condition on the agent's Node: DevplaceKubeletMissing ---------------------------------------------------

MISSING = Failure(conditions.KUBELET_SOCKET_MISSING, "/var/lib/kubelet/device-plugins/kubelet.sock does not exist")
READY = {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": T0}


def node(*entries: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-a", "resourceVersion": "3"},
        "status": {"capacity": {"cpu": "8"}, "conditions": list(entries)},
    }


def test_a_missing_kubelet_adds_one_node_condition_and_keeps_everything_else() -> None:
    out = conditions.with_node_condition(node(READY), conditions.KUBELET_MISSING, MISSING, T0)
    assert out is not None
    assert out["status"] == {
        "capacity": {"cpu": "8"},
        "conditions": [
            READY,
            {
                "type": "DevplaceKubeletMissing",
                "status": "True",
                "reason": "KubeletSocketMissing",
                "message": MISSING.message,
                "lastHeartbeatTime": T0,
                "lastTransitionTime": T0,
            },
        ],
    }
    assert conditions.with_node_condition(out, conditions.KUBELET_MISSING, MISSING, T1) is None  # already says so
    cleared = conditions.with_node_condition(out, conditions.KUBELET_MISSING, None, T1)
    assert cleared == node(READY)
    assert conditions.with_node_condition(node(READY), conditions.KUBELET_MISSING, None, T1) is None


def test_the_node_condition_tolerates_a_node_without_status() -> None:
    bare = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}
    out = conditions.with_node_condition(bare, conditions.KUBELET_MISSING, MISSING, T0)
    assert out is not None
    assert [c["type"] for c in out["status"]["conditions"]] == ["DevplaceKubeletMissing"]
    assert conditions.with_node_condition(bare, conditions.KUBELET_MISSING, None, T0) is None
