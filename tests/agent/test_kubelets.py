"""An agent without kubelet.sock: a warning naming the path (and a reminder every `REMIND` seconds while it stays
missing) and a `DevplaceKubeletMissing` condition on its Node, removed when the kubelet comes; never a Node created."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from devplace.agent import _kubelets as kubelets
from devplace.store import Store

from .conftest import MiniKubelet, Nodes, eventually

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-a"},
    "status": {
        "capacity": {"cpu": "8"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    },
}


def warnings_about(caplog: pytest.LogCaptureFixture, path: str) -> list[str]:
    return [r.message for r in caplog.records if r.levelno == logging.WARNING and path in r.message]


async def condition_types(store: Store) -> list[str]:
    node = await store.get("Node", "node-a", "")
    return [c["type"] for c in node["status"]["conditions"]]


async def test_a_missing_kubelet_sock_is_warned_about_reminded_and_reported_on_the_node_until_it_appears(
    nodes: Nodes, caplog: pytest.LogCaptureFixture
) -> None:
    await nodes.store.create(NODE)
    path = str(nodes.root / "node-a" / "device-plugins" / "kubelet.sock")
    with caplog.at_level(logging.INFO, logger="devplace.agent._kubelets"):
        await nodes.add("node-a", kubelet=False)
        await nodes.settle()
        assert len(warnings_about(caplog, path)) == 1
        node = await nodes.store.get("Node", "node-a", "")
        assert node["status"]["capacity"] == {"cpu": "8"}  # only the agent's own entry is written
        ready, missing = node["status"]["conditions"]
        assert ready == NODE["status"]["conditions"][0]
        assert missing["type"] == "DevplaceKubeletMissing"
        assert missing["status"] == "True"
        assert missing["reason"] == "KubeletSocketMissing"
        assert path in missing["message"]
        await nodes.advance(kubelets.REMIND - 5, step=kubelets.REMIND)
        assert len(warnings_about(caplog, path)) == 1  # not more often than every REMIND seconds
        await nodes.advance(5)
        assert len(warnings_about(caplog, path)) == 2  # reminded while it stays missing
        kubelet = MiniKubelet(nodes.root / "node-a")
        nodes.kubelets["node-a"] = kubelet
        await kubelet.start()
        await eventually(lambda: any("is there again" in r.message for r in caplog.records), "the kubelet noticed")
        await nodes.settle()
    assert await condition_types(nodes.store) == ["Ready"]
    await nodes.advance(kubelets.REMIND, step=kubelets.REMIND)
    assert len(warnings_about(caplog, path)) == 2  # no reminder once it is there


async def test_the_agent_never_creates_a_node_and_reports_once_the_kubelet_registered_it(nodes: Nodes) -> None:
    await nodes.add("node-a", kubelet=False)
    await nodes.settle()
    assert (await nodes.store.list("Node")).items == []
    await nodes.store.create(NODE)
    await nodes.advance(kubelets.REMIND, step=kubelets.REMIND)  # the next reminder writes it
    assert await condition_types(nodes.store) == ["Ready", "DevplaceKubeletMissing"]


async def test_an_agent_with_its_kubelet_writes_no_condition(nodes: Nodes, caplog: pytest.LogCaptureFixture) -> None:
    created = await nodes.store.create(NODE)
    with caplog.at_level(logging.WARNING, logger="devplace.agent._kubelets"):
        await nodes.add("node-a")
        await nodes.settle()
    assert await nodes.store.get("Node", "node-a", "") == created  # not written at all
    assert not caplog.records
