"""The agent publishes its node's local Instances as ResourceSlices, through a real devplace API server where each agent
is its node's identity (NodeRestriction): on by default where the store serves slices, one slice write per device
change, never another node's slice."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from devplace import api, errors
from devplace.agent import Agent, AgentConfig
from devplace.clocks import FakeClock
from devplace.discovery import World, builtin_registry
from devplace.server._app import create_app
from devplace.server._authn import Auth, Tokens
from devplace.store import MemoryStore, Store
from devplace.store._remote import RemoteStore
from devplace.store._restclients import Credentials
from tests.agent.conftest import configuration, settle
from tests.servers import serve_app

TOKENS = """\
admin-token,alice,1,"admin"
node-a-token,system:node:node-a,2,"system:nodes"
node-b-token,system:node:node-b,3,"system:nodes"
"""


class Cluster:
    """A devplace server with token auth; an admin client; agents, each with its node's token."""

    def __init__(self, url: str, clock: FakeClock, root: Path) -> None:
        self.url = url
        self.clock = clock
        self.root = root
        self.world = World()
        self.stores: list[Store] = []
        self.admin = self.client("admin-token")
        self.agents: dict[str, Agent] = {}

    def client(self, token: str) -> RemoteStore:
        store = RemoteStore(self.url, clock=self.clock, credentials=Credentials(token=token))
        self.stores.append(store)
        return store

    async def agent(self, node: str, dra: bool | None = None, **config_fields: Any) -> Agent:
        config = AgentConfig(
            node=node, kubelet_dir=self.root / node, resource_prefix="devplace.io", dra=dra, **config_fields
        )
        agent = Agent(config, self.client(f"{node}-token"), builtin_registry(node, world=self.world), self.clock)
        await agent.start()
        self.agents[node] = agent
        return agent

    async def settle(self) -> None:
        await settle(*self.agents.values())

    async def slices(self) -> dict[str, dict[str, Any]]:
        return {s["metadata"]["name"]: s for s in (await self.admin.list("ResourceSlice")).items}

    async def close(self) -> None:
        for agent in self.agents.values():
            await agent.stop()
        for store in self.stores:
            await store.close()


@pytest.fixture
async def cluster(clock: FakeClock, sock_dir: Path) -> AsyncIterator[Cluster]:
    backing = MemoryStore(clock=clock)
    app = create_app(backing, fleet_api=False, clock=clock, auth=Auth(Tokens.parse(TOKENS)))
    async with serve_app(app) as url:
        found = Cluster(url, clock, sock_dir)
        try:
            yield found
        finally:
            await found.close()
    await backing.close()


LOCAL = configuration("cams", capacity=2, details="shared: false", broker_properties={"site": "lab"})


async def two_nodes(cluster: Cluster, dra: bool | None = None, **config_fields: Any) -> None:
    await cluster.admin.create(LOCAL)
    cluster.world.plug("cam-1", ["node-a"], {"ip": "10.0.0.1"})
    cluster.world.plug("cam-2", ["node-b"], {"ip": "10.0.0.2"})
    await cluster.agent("node-a", dra, **config_fields)
    await cluster.agent("node-b", dra, **config_fields)
    await cluster.settle()


async def test_a_local_instance_is_a_device_of_its_nodes_slice_that_the_configurations_device_class_selects(
    cluster: Cluster,
) -> None:
    await two_nodes(cluster)  # dra=None: on, since the server serves ResourceSlices
    slices = await cluster.slices()
    assert sorted(slices) == ["node-a-devplace.io-0", "node-b-devplace.io-0"]  # the probe slices are gone
    item = slices["node-a-devplace.io-0"]
    assert item["spec"]["nodeName"] == "node-a"
    assert item["spec"]["pool"] == {"name": "node-a", "generation": 1, "resourceSliceCount": 1}
    [instance] = [i for i in (await cluster.admin.list("Instance")).items if i["spec"]["nodes"] == ["node-a"]]
    [device] = item["spec"]["devices"]
    assert device["name"] == api.device_name(instance["metadata"]["name"])
    assert device["attributes"]["instance"] == {"string": instance["metadata"]["name"]}
    assert device["attributes"]["ip"] == {"string": "10.0.0.1"}
    assert device["allowMultipleAllocations"] is True  # devplace's server keeps consumable capacity
    assert device["capacity"]["slots"]["value"] == "2"

    device_class = await cluster.admin.create(api.compile_configuration(LOCAL))
    [selector] = device_class["spec"]["selectors"]
    compiled = api.compile_selector(selector["cel"]["expression"])
    for name in slices:
        [each] = slices[name]["spec"]["devices"]
        assert compiled.matches(api.DeviceInput(api.DRIVER, each)), name


async def test_off_publishes_nothing(cluster: Cluster) -> None:
    await two_nodes(cluster, dra=False)
    assert await cluster.slices() == {}


async def test_a_node_never_writes_another_nodes_slice(cluster: Cluster) -> None:
    await two_nodes(cluster)
    theirs = (await cluster.slices())["node-b-devplace.io-0"]
    as_node_a = cluster.client("node-a-token")
    with pytest.raises(errors.Forbidden, match="node-own-slices"):
        await as_node_a.update({**theirs, "spec": {**theirs["spec"], "devices": []}})
    with pytest.raises(errors.Forbidden, match="node-own-slices"):
        await as_node_a.delete("ResourceSlice", "node-b-devplace.io-0")
    forged = api.probe_slice("forged", "node-b")
    with pytest.raises(errors.Forbidden, match="node-own-slices"):
        await as_node_a.create(forged)
    shared = {**forged, "spec": {**{k: v for k, v in forged["spec"].items() if k != "nodeName"}, "allNodes": True}}
    with pytest.raises(errors.Forbidden, match="node-own-slices"):
        await as_node_a.create(shared)
    assert (await cluster.slices())["node-b-devplace.io-0"] == theirs


async def test_a_change_of_one_device_rewrites_only_its_slice_and_a_device_gone_is_dropped(cluster: Cluster) -> None:
    await two_nodes(cluster)
    before = await cluster.slices()
    writes = {node: agent.slices.writes for node, agent in cluster.agents.items()}

    cluster.world.plug("cam-1", ["node-a"], {"ip": "10.0.0.9"})
    await cluster.settle()
    after = await cluster.slices()
    assert after["node-b-devplace.io-0"] == before["node-b-devplace.io-0"]
    [device] = after["node-a-devplace.io-0"]["spec"]["devices"]
    assert device["attributes"]["ip"] == {"string": "10.0.0.9"}
    assert after["node-a-devplace.io-0"]["spec"]["pool"]["generation"] == 1  # one write: no bump needed
    assert cluster.agents["node-a"].slices.writes == writes["node-a"] + 1
    assert cluster.agents["node-b"].slices.writes == writes["node-b"]

    cluster.world.unplug("cam-1")
    await cluster.settle()
    final = await cluster.slices()
    assert sorted(final) == ["node-b-devplace.io-0"]
    assert final["node-b-devplace.io-0"] == before["node-b-devplace.io-0"]


async def test_a_device_its_handler_reports_unhealthy_is_tainted_in_its_slice(cluster: Cluster) -> None:
    await two_nodes(cluster)
    cluster.world.plug("cam-1", ["node-a"], {"ip": "10.0.0.1", "devplace.io/health": "Unhealthy"})
    await cluster.settle()
    [device] = (await cluster.slices())["node-a-devplace.io-0"]["spec"]["devices"]
    assert device["taints"] == [{"key": api.UNHEALTHY_TAINT, "effect": "NoSchedule"}]
    cluster.world.plug("cam-1", ["node-a"], {"ip": "10.0.0.1"})  # healthy again: the taint goes
    await cluster.settle()
    [device] = (await cluster.slices())["node-a-devplace.io-0"]["spec"]["devices"]
    assert "taints" not in device


async def test_a_slice_deleted_behind_the_agents_back_comes_back(cluster: Cluster) -> None:
    await two_nodes(cluster)
    await cluster.admin.delete("ResourceSlice", "node-a-devplace.io-0")
    await cluster.settle()
    assert sorted(await cluster.slices()) == ["node-a-devplace.io-0", "node-b-devplace.io-0"]


# -- device paths (issue #26 item 2): a Configuration served through device plugins only is in no slice ------------


async def annotate(cluster: Cluster, paths: str | None) -> None:
    """Set (None: remove) the cams Configuration's device-paths annotation, by CAS as every write."""
    stored = await cluster.admin.get("Configuration", "cams", "default")
    annotations = dict(stored["metadata"].get("annotations") or {})
    annotations.pop(api.DEVICE_PATHS_ANNOTATION, None)
    if paths is not None:
        annotations[api.DEVICE_PATHS_ANNOTATION] = paths
    await cluster.admin.update({**stored, "metadata": {**stored["metadata"], "annotations": annotations}})
    await cluster.settle()


async def test_an_annotation_for_device_plugins_only_empties_the_slices_and_one_for_dra_brings_them_back(
    cluster: Cluster,
) -> None:
    await two_nodes(cluster)  # the agents' default: both
    before = await cluster.slices()
    assert sorted(before) == ["node-a-devplace.io-0", "node-b-devplace.io-0"]

    await annotate(cluster, "device-plugins")
    assert await cluster.slices() == {}  # nothing allocates the cams through DRA

    await annotate(cluster, "dra")
    after = await cluster.slices()
    assert sorted(after) == sorted(before)
    for name, item in after.items():
        assert item["spec"]["devices"] == before[name]["spec"]["devices"]


async def test_the_agents_default_paths_hold_for_a_configuration_without_the_annotation_which_overrides_them(
    cluster: Cluster,
) -> None:
    await two_nodes(cluster, device_paths="device-plugins")
    assert await cluster.slices() == {}
    await annotate(cluster, "both")
    assert sorted(await cluster.slices()) == ["node-a-devplace.io-0", "node-b-devplace.io-0"]
    await annotate(cluster, None)
    assert await cluster.slices() == {}


async def test_a_device_paths_annotation_that_names_no_path_is_refused_at_apply_with_a_422_and_changes_nothing(
    cluster: Cluster,
) -> None:
    await two_nodes(cluster)
    stored = await cluster.admin.get("Configuration", "cams", "default")
    bad = {
        **LOCAL,
        "metadata": {**LOCAL["metadata"], "name": "cams2", "annotations": {api.DEVICE_PATHS_ANNOTATION: "DRA"}},
    }
    collection = "/apis/devplace.io/v1alpha1/namespaces/default/configurations"
    async with httpx2.AsyncClient(base_url=cluster.url, headers={"Authorization": "Bearer admin-token"}) as http:
        created = await http.post(collection, json=bad)
        patched = await http.patch(
            f"{collection}/cams",
            content=json.dumps({"metadata": {"annotations": {api.DEVICE_PATHS_ANNOTATION: "classic"}}}),
            headers={"Content-Type": "application/merge-patch+json"},
        )
    for refused, value in ((created, "DRA"), (patched, "classic")):
        assert refused.status_code == 422, refused.text
        [cause] = refused.json()["details"]["causes"]
        assert cause["field"] == 'metadata.annotations["devplace.io/device-paths"]'
        assert cause["message"] == f"{value!r} is not one of device-plugins, dra, both"
    assert await cluster.admin.get("Configuration", "cams", "default") == stored
    with pytest.raises(errors.NotFound):
        await cluster.admin.get("Configuration", "cams2", "default")
