"""The plugin set under failure: a server that cannot start is retried and stops nothing; a crashed kubelet loop is
restarted and still notices a kubelet restart."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from devplace import errors
from devplace.agent import _instances as instances
from devplace.agent._pluginsets import PluginSet
from devplace.agent._servers import PluginServer

from .conftest import PREFIX, Nodes, configuration, eventually


async def test_a_plugin_that_fails_to_start_is_retried_and_reconciliation_goes_on(
    nodes: Nodes, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    start = PluginServer.start
    failures: list[str] = []

    async def start_failing_once(self: PluginServer) -> None:
        if not failures:
            failures.append(self.resource_name)
            raise OSError("cannot bind the socket")
        await start(self)

    monkeypatch.setattr(PluginServer, "start", start_failing_once)
    await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    with caplog.at_level(logging.WARNING, logger="devplace.agent._pluginsets"):
        await nodes.store.create(configuration(capacity=1))
        await nodes.settle()
    first = instances.instance_name("cams", "cam-1", "node-a", True)
    kubelet = nodes.kubelets["node-a"]
    assert failures == [f"{PREFIX}/cams"]  # plugins start in key order: "cl" first
    assert any("serving" in r.message and "cannot bind the socket" in r.message for r in caplog.records)
    assert {f"{PREFIX}/cams", f"{PREFIX}/{first}"} <= set(kubelet.endpoints)  # served after the retry
    nodes.world.plug("cam-2", ["node-a"])  # reconciliation still runs: a new device becomes an Instance
    await nodes.settle()
    second = instances.instance_name("cams", "cam-2", "node-a", True)
    assert sorted(i["metadata"]["name"] for i in (await nodes.store.list("Instance")).items) == sorted([first, second])
    await eventually(lambda: kubelet.registered(f"{PREFIX}/{second}"), "the new Instance's plugin registered")


async def test_a_crashed_kubelet_loop_is_logged_and_restarted(
    nodes: Nodes, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    kubelet_pass = PluginSet.kubelet_pass
    crashes: list[int] = []

    async def crashing_once(self: PluginSet) -> Any:
        if not crashes:
            crashes.append(1)
            raise RuntimeError("a bug in the kubelet loop")
        return await kubelet_pass(self)

    monkeypatch.setattr(PluginSet, "kubelet_pass", crashing_once)
    with caplog.at_level(logging.ERROR, logger="devplace.supervisors"):
        agent = await nodes.add("node-a")
        nodes.world.plug("cam-1", ["node-a"])
        await nodes.store.create(configuration(capacity=1))
        await nodes.settle()
        await eventually(lambda: agent.supervisor.restarts.get("kubelet") == 1, "the kubelet loop restarted")
    assert any(r.exc_info and "a bug in the kubelet loop" in str(r.exc_info[1]) for r in caplog.records)
    kubelet = nodes.kubelets["node-a"]
    await kubelet.restart()  # the restarted loop still notices a new kubelet
    await eventually(lambda: kubelet.registered(f"{PREFIX}/cams"), "registration with the new kubelet")
    assert agent.supervisor.failure is None


async def test_a_plugin_waiting_to_retry_its_registration_keeps_the_agent_busy(
    nodes: Nodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    register = PluginServer.register
    refused: list[str] = []

    async def refused_once(self: PluginServer, *args: Any, **kwargs: Any) -> None:
        if not refused:
            refused.append(self.resource_name)
            raise errors.Unavailable("the kubelet did not answer")
        await register(self, *args, **kwargs)

    monkeypatch.setattr(PluginServer, "register", refused_once)
    agent = await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration(capacity=1))
    await eventually(lambda: bool(refused), "a registration refused")
    # until the retry has registered the plugin, a settled fleet would be missing it: the agent is not idle
    await eventually(lambda: not agent.is_idle() or nodes.kubelets["node-a"].registered(refused[0]), "busy or done")
    await nodes.settle()
    assert nodes.kubelets["node-a"].registered(refused[0])
    assert agent.is_idle()


# -- device paths (issue #26 item 2): a Configuration served through DRA only gets no device plugin ----------------


def served_resources(agent: Any) -> list[str]:
    return sorted(server.resource_name for server in agent.plugins.servers.values())


async def annotate(nodes: Nodes, paths: str | None) -> None:
    stored = await nodes.store.get("Configuration", "cams", "default")
    annotations = {} if paths is None else {"devplace.io/device-paths": paths}
    await nodes.store.update({**stored, "metadata": {**stored["metadata"], "annotations": annotations}})
    await nodes.settle()


async def test_a_configuration_served_through_dra_only_gets_no_plugin_and_a_change_starts_and_stops_them(
    nodes: Nodes,
) -> None:
    agent = await nodes.add("node-a")
    nodes.world.plug("cam-1", ["node-a"])
    await nodes.store.create(configuration(capacity=1, annotations={"devplace.io/device-paths": "dra"}))
    await nodes.settle()
    instance = instances.instance_name("cams", "cam-1", "node-a", True)
    assert [i["metadata"]["name"] for i in (await nodes.store.list("Instance")).items] == [instance]  # discovered
    assert served_resources(agent) == []

    await annotate(nodes, "device-plugins")
    assert served_resources(agent) == [f"{PREFIX}/cams", f"{PREFIX}/{instance}"]
    kubelet = nodes.kubelets["node-a"]
    await eventually(lambda: kubelet.registered(f"{PREFIX}/{instance}"), "the IL plugin registered")

    await annotate(nodes, "dra")
    assert served_resources(agent) == []
    # the plugins' sockets are gone: the kubelet drops their resources
    assert sorted(p.name for p in kubelet.plugin_dir.glob("*.sock")) == ["kubelet.sock"]


@pytest.mark.parametrize(("default", "annotation", "plugins"), [("dra", None, False), ("dra", "both", True)])
async def test_the_agents_default_paths_hold_unless_the_configuration_says(
    nodes: Nodes, default: str, annotation: str | None, plugins: bool
) -> None:
    agent = await nodes.add("node-a", device_paths=default)
    nodes.world.plug("cam-1", ["node-a"])
    annotations = None if annotation is None else {"devplace.io/device-paths": annotation}
    await nodes.store.create(configuration(capacity=1, annotations=annotations))
    await nodes.settle()
    assert bool(served_resources(agent)) is plugins
