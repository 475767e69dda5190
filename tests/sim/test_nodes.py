"""The Node object a simulated kubelet keeps: extended resources exactly as registered, everything else kept."""

from __future__ import annotations

from devplace.api import _registry as registry
from devplace.sim import _nodes as nodes


def test_a_new_node_is_ready_and_offers_base_resources_and_devices():
    node = nodes.new_node("node-a", {"x.io/d": 3}, {"x.io/d": 2}, "2026-01-01T00:00:00Z")
    assert registry.normalize(node)["metadata"]["name"] == "node-a"
    assert node["status"]["capacity"] == {"cpu": "8", "memory": "32Gi", "pods": "110", "x.io/d": "3"}
    assert node["status"]["allocatable"] == {"cpu": "8", "memory": "32Gi", "pods": "110", "x.io/d": "2"}
    assert node["status"]["conditions"][0]["type"] == "Ready"
    assert node["metadata"]["labels"] == {"kubernetes.io/hostname": "node-a"}


def test_extended_resources_are_replaced_and_stale_ones_removed():
    node = nodes.new_node("node-a", {"x.io/d": 3, "y.io/gone": 1}, {"x.io/d": 3, "y.io/gone": 1}, "t")
    node["metadata"]["labels"]["zone"] = "z1"
    updated = nodes.with_extended_resources(node, {"x.io/d": 3, "z.io/new": 2}, {"x.io/d": 1, "z.io/new": 2})
    assert updated is not None
    assert updated["status"]["capacity"] == {
        "cpu": "8",
        "memory": "32Gi",
        "pods": "110",
        "x.io/d": "3",
        "z.io/new": "2",
    }
    assert updated["status"]["allocatable"]["x.io/d"] == "1"
    assert "y.io/gone" not in updated["status"]["allocatable"]
    assert updated["metadata"]["labels"]["zone"] == "z1"
    assert node["status"]["capacity"]["y.io/gone"] == "1"  # the input is not mutated


def test_no_change_means_no_write():
    node = nodes.new_node("node-a", {"x.io/d": 3}, {"x.io/d": 2}, "t")
    assert nodes.with_extended_resources(node, {"x.io/d": 3}, {"x.io/d": 2}) is None


def test_a_node_without_status_gets_one():
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "spec": {}}
    updated = nodes.with_extended_resources(node, {"x.io/d": 1}, {"x.io/d": 1})
    assert updated is not None
    assert updated["status"] == {"capacity": {"x.io/d": "1"}, "allocatable": {"x.io/d": "1"}}
