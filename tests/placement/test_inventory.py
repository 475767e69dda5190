"""Cluster inventories: static, and live from a member devplace API server (real uvicorn on loopback)."""

from __future__ import annotations

import httpx2
import pytest

from devplace.placement._inventory import (
    ClusterInventory,
    ClusterRef,
    NodeInventory,
    inventory_from_objects,
    live_inventory,
    milli,
    pod_requests,
    static_inventory,
)
from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.placement.samples import node_obj, pod_obj
from tests.servers import serve_app

REF = ClusterRef("edge", "member")


def test_pod_requests_follow_the_scheduler() -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "1"}}},
            ],
            "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2", "memory": "100Mi"}}}],
        }
    }
    assert pod_requests(pod) == {"cpu": 2000, "memory": milli("1Gi"), "pods": 1000}


def test_free_is_allocatable_minus_bound_unfinished_pods() -> None:
    nodes = [
        node_obj("a", {"zone": "x"}, cpu="8", memory="16Gi", pods="110"),
        node_obj("b", cpu="4"),
        node_obj("cordoned", unschedulable=True, cpu="64"),
    ]
    pods = [
        pod_obj("p1", "a", cpu="2", memory="1Gi"),
        pod_obj("p2", "a", cpu="1"),
        pod_obj("done", "a", phase="Succeeded", cpu="4"),
        pod_obj("pending", None, cpu="4"),
        pod_obj("over", "b", cpu="6"),
    ]
    inv = inventory_from_objects(REF, {"tier": "edge"}, nodes, pods)
    assert inv.nodes == (
        NodeInventory("a", {"cpu": 5000, "memory": milli("15Gi"), "pods": 108_000}, {"zone": "x"}),
        NodeInventory("b", {"cpu": 0}, {}),
    )
    assert inv.maxima == {"cpu": 5000, "memory": milli("15Gi"), "pods": 108_000}
    assert inv.labels == {"tier": "edge"}


def test_static_inventories_and_their_indexes() -> None:
    inv = static_inventory(
        REF,
        {"gpu": "true"},
        [
            {"name": "n1", "allocatable": {"cpu": "8", "nvidia.com/gpu": "1"}, "labels": {"zone": "a"}},
            {"name": "n2", "allocatable": {"cpu": "16", "nvidia.com/gpu": "0"}, "labels": {"zone": "b"}},
        ],
    )
    assert inv.maxima == {"cpu": 16000, "nvidia.com/gpu": 1000}
    assert inv.holders == {"cpu": (0, 1), "nvidia.com/gpu": (0,)}
    assert inv.label_values == {"zone": frozenset({"a", "b"})}
    assert inv.label_holders == {("zone", "a"): (0,), ("zone", "b"): (1,)}


@pytest.mark.parametrize(
    ("selector", "matches"), [("gpu", True), ("gpu=true", True), ("gpu=false", False), ("fpga", False)]
)
def test_cluster_labels_match_by_key_or_key_value(selector: str, matches: bool) -> None:
    assert ClusterInventory(REF, {"gpu": "true"}).has_label(selector) is matches


async def test_live_inventory_reads_a_member_control_plane_afresh_each_time() -> None:
    member = MemoryStore()
    await member.create(node_obj("n1", {"feature.node.kubernetes.io/cpu-avx512": "true"}, cpu="8", memory="16Gi"))
    await member.create(pod_obj("web", "n1", cpu="3"))
    async with serve_app(create_app(member)) as url, httpx2.AsyncClient() as client:
        first = await live_inventory(client, REF, {}, url, 5.0)
        assert first.problem is None
        assert first.nodes[0].free == {"cpu": 5000, "memory": milli("16Gi")}
        assert first.nodes[0].labels == {"feature.node.kubernetes.io/cpu-avx512": "true"}
        node = await member.get("Node", "n1")
        node["metadata"]["labels"] = {"feature.node.kubernetes.io/cpu-avx512": "false"}
        await member.update(node)
        await member.delete("Pod", "web", "default")
        second = await live_inventory(client, REF, {}, url, 5.0)
        assert second.nodes[0].labels == {"feature.node.kubernetes.io/cpu-avx512": "false"}  # never stale
        assert second.nodes[0].free["cpu"] == 8000


async def test_an_unreachable_member_is_an_inventory_with_a_problem() -> None:
    async with serve_app(create_app(MemoryStore())) as url:
        pass  # the server is gone now: its port refuses connections
    async with httpx2.AsyncClient() as client:
        inv = await live_inventory(client, REF, {"a": "b"}, url, 2.0)
    assert inv.nodes == ()
    assert inv.problem is not None
    assert inv.problem.startswith(url)
    assert inv.labels == {"a": "b"}


async def test_a_member_answering_an_error_is_a_problem() -> None:
    async with serve_app(create_app(MemoryStore())) as url, httpx2.AsyncClient() as client:
        inv = await live_inventory(client, REF, {}, url + "/nope", 2.0)
    assert inv.problem is not None
    assert "answered 404" in inv.problem
