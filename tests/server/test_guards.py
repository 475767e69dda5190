"""Node identities over HTTP: each write of a node passes the object rules on exactly the object it replaces, and real
agents on the remote backend with node tokens do their work while being refused another node's slot."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from devplace import errors
from devplace.agent import Agent, AgentConfig
from devplace.agent import _instances as instances
from devplace.clocks import FakeClock, SystemClock
from devplace.discovery import World, builtin_registry
from devplace.server._app import create_app
from devplace.server._authn import Auth, Tokens
from devplace.store import MemoryStore, Store
from devplace.store._remote import RemoteStore
from devplace.store._restclients import Credentials
from tests.agent.conftest import PREFIX, MiniKubelet, configuration, pod, secret
from tests.servers import serve_app

TOKENS = """\
admin-token,alice,1,admin
node-a-token,system:node:node-a,2,system:nodes
node-b-token,node:node-b,3
"""
BOUND = 10.0
INSTANCES = "/apis/devplace.io/v1alpha1/namespaces/default/instances"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll another party's work (agents over HTTP), bounded; never a timed assertion."""
    for _ in range(int(BOUND * 100)):
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
async def backing(clock: FakeClock) -> AsyncIterator[MemoryStore]:
    store = MemoryStore(clock=clock)
    yield store
    await store.close()


@pytest.fixture
async def url(backing: MemoryStore, clock: FakeClock) -> AsyncIterator[str]:
    app = create_app(backing, fleet_api=False, clock=clock, auth=Auth(Tokens.parse(TOKENS)))
    async with serve_app(app) as base_url:
        yield base_url


@pytest.fixture
async def api(url: str) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(base_url=url, timeout=BOUND, headers=bearer("node-a-token")) as client:
        yield client


def shared_instance(nodes: list[str], holders: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": "cams-abcdef", "namespace": "default"},
        "spec": {
            "configurationName": "cams",
            "shared": True,
            "nodes": nodes,
            "capacity": len(holders),
            "deviceUsage": {f"cams-abcdef-{i}": h for i, h in enumerate(holders)},
        },
    }


async def test_a_node_taking_another_nodes_slot_is_403_and_nothing_changes(
    api: httpx2.AsyncClient, backing: MemoryStore
) -> None:
    stored = await backing.create(shared_instance(["node-a", "node-b"], ["", "node-b"]))
    stolen = copy.deepcopy(stored)
    stolen["spec"]["deviceUsage"]["cams-abcdef-1"] = "node-a"
    response = await api.put(f"{INSTANCES}/cams-abcdef", json=stolen)
    assert response.status_code == 403, response.text
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Forbidden", 403)
    assert "rule node-instance-slots" in status["message"]
    assert "cams-abcdef-1 is held by node-b" in status["message"]
    patch = {"spec": {"deviceUsage": {"cams-abcdef-1": ""}}}
    patched = await api.patch(
        f"{INSTANCES}/cams-abcdef", json=patch, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert patched.status_code == 403
    assert "rule node-instance-slots" in patched.json()["message"]
    assert await backing.get("Instance", "cams-abcdef", "default") == stored


async def test_a_node_claiming_a_free_slot_by_put_and_by_patch_is_admitted(
    api: httpx2.AsyncClient, backing: MemoryStore
) -> None:
    stored = await backing.create(shared_instance(["node-a", "node-b"], ["", "", "node-b"]))
    claim = copy.deepcopy(stored)
    claim["spec"]["deviceUsage"]["cams-abcdef-0"] = "node-a"
    assert (await api.put(f"{INSTANCES}/cams-abcdef", json=claim)).status_code == 200
    patch = {"spec": {"deviceUsage": {"cams-abcdef-1": "C:cams-abcdef:node-a"}}}
    patched = await api.patch(
        f"{INSTANCES}/cams-abcdef", json=patch, headers={"Content-Type": "application/merge-patch+json"}
    )
    assert patched.status_code == 200, patched.text
    usage = (await backing.get("Instance", "cams-abcdef", "default"))["spec"]["deviceUsage"]
    assert usage == {"cams-abcdef-0": "node-a", "cams-abcdef-1": "C:cams-abcdef:node-a", "cams-abcdef-2": "node-b"}


async def test_a_node_write_on_a_stale_revision_is_a_conflict_not_checked_against_the_new_object(
    api: httpx2.AsyncClient, backing: MemoryStore
) -> None:
    stored = await backing.create(shared_instance(["node-a", "node-b"], ["", ""]))
    newer = copy.deepcopy(stored)
    newer["spec"]["deviceUsage"]["cams-abcdef-0"] = "node-b"
    await backing.update(newer)
    claim = copy.deepcopy(stored)  # decided on the old revision, where slot 0 was free
    claim["spec"]["deviceUsage"]["cams-abcdef-0"] = "node-a"
    response = await api.put(f"{INSTANCES}/cams-abcdef", json=claim)
    assert response.status_code == 409
    assert response.json()["reason"] == "Conflict"


MERGE = {"Content-Type": "application/merge-patch+json"}


def forbidden(response: httpx2.Response, rule: str) -> str:
    assert response.status_code == 403, response.text[:500]
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Forbidden", 403)
    assert f"rule {rule}:" in status["message"]
    message: str = status["message"]
    return message


async def test_a_node_sizing_a_shared_instance_other_than_its_configuration_is_403_and_nothing_changes(
    api: httpx2.AsyncClient, backing: MemoryStore
) -> None:
    cfg = await backing.create(configuration(capacity=3))
    stored = await backing.create(shared_instance(["node-a", "node-b"], ["", "", ""]))
    grown = copy.deepcopy(stored)
    grown["spec"]["capacity"] = 1024
    grown["spec"]["deviceUsage"].update({f"cams-abcdef-{i}": "" for i in range(3, 1024)})
    said = forbidden(await api.put(f"{INSTANCES}/cams-abcdef", json=grown), "node-instance-capacity")
    assert "its Configuration's capacity (3), not 1024" in said
    spec = {k: grown["spec"][k] for k in ("capacity", "deviceUsage")}
    patched = await api.patch(f"{INSTANCES}/cams-abcdef", json={"spec": spec}, headers=MERGE)
    forbidden(patched, "node-instance-capacity")
    shrink = {"spec": {"capacity": 1, "deviceUsage": {"cams-abcdef-1": None, "cams-abcdef-2": None}}}
    forbidden(await api.patch(f"{INSTANCES}/cams-abcdef", json=shrink, headers=MERGE), "node-instance-capacity")
    emptied = {"spec": {"deviceUsage": {f"cams-abcdef-{i}": None for i in range(3)}}}  # no slots: "not yet written"
    said = forbidden(await api.patch(f"{INSTANCES}/cams-abcdef", json=emptied, headers=MERGE), "node-instance-capacity")
    assert "free slot cams-abcdef-0 is below capacity 3" in said
    assert await backing.get("Instance", "cams-abcdef", "default") == stored
    await backing.update({**cfg, "spec": {**cfg["spec"], "capacity": 4}})  # an admin changes the Configuration
    follow = {"spec": {"capacity": 4, "deviceUsage": {"cams-abcdef-3": ""}}}
    followed = await api.patch(f"{INSTANCES}/cams-abcdef", json=follow, headers=MERGE)
    assert followed.status_code == 200, followed.text
    assert len((await backing.get("Instance", "cams-abcdef", "default"))["spec"]["deviceUsage"]) == 4


async def test_a_node_joining_and_claiming_in_one_write_is_403_and_joining_first_is_admitted(
    api: httpx2.AsyncClient, backing: MemoryStore
) -> None:
    stored = await backing.create(shared_instance(["node-b"], ["", "node-b"]))
    both = {"spec": {"nodes": ["node-b", "node-a"], "deviceUsage": {"cams-abcdef-0": "node-a"}}}
    said = forbidden(await api.patch(f"{INSTANCES}/cams-abcdef", json=both, headers=MERGE), "node-instance-claim")
    assert "node-a claims slot cams-abcdef-0 of an Instance node-a does not list it yet" in said
    unlisted = copy.deepcopy(stored)
    unlisted["spec"]["deviceUsage"]["cams-abcdef-0"] = "node-a"
    forbidden(await api.put(f"{INSTANCES}/cams-abcdef", json=unlisted), "node-instance-claim")
    assert await backing.get("Instance", "cams-abcdef", "default") == stored
    join = {"spec": {"nodes": ["node-b", "node-a"]}}
    assert (await api.patch(f"{INSTANCES}/cams-abcdef", json=join, headers=MERGE)).status_code == 200
    claim = {"spec": {"deviceUsage": {"cams-abcdef-0": "node-a"}}}
    assert (await api.patch(f"{INSTANCES}/cams-abcdef", json=claim, headers=MERGE)).status_code == 200
    after = (await backing.get("Instance", "cams-abcdef", "default"))["spec"]
    assert (after["nodes"], after["deviceUsage"]) == (
        ["node-b", "node-a"],
        {"cams-abcdef-0": "node-a", "cams-abcdef-1": "node-b"},
    )


async def test_a_node_deleting_an_instance_another_node_lists_is_403(
    api: httpx2.AsyncClient, backing: MemoryStore
) -> None:
    await backing.create(shared_instance(["node-a", "node-b"], [""]))
    response = await api.delete(f"{INSTANCES}/cams-abcdef")
    assert response.status_code == 403
    assert "rule node-instance-delete" in response.json()["message"]
    assert await backing.get("Instance", "cams-abcdef", "default")


async def test_a_node_dry_run_is_403(api: httpx2.AsyncClient, backing: MemoryStore) -> None:
    stored = await backing.create(shared_instance(["node-a"], [""]))
    response = await api.put(f"{INSTANCES}/cams-abcdef", params={"dryRun": "All"}, json=stored)
    assert response.status_code == 403
    assert "rule node-no-dry-run" in response.json()["message"]


async def test_a_node_reads_only_its_pods(api: httpx2.AsyncClient, backing: MemoryStore) -> None:
    await backing.create(pod("mine", "node-a"))
    await backing.create(pod("theirs", "node-b"))
    assert (await api.get("/api/v1/namespaces/default/pods/mine")).status_code == 200
    refused = await api.get("/api/v1/namespaces/default/pods/theirs")
    assert refused.status_code == 403
    assert "rule node-own-pods" in refused.json()["message"]
    listed = await api.get("/api/v1/pods", params={"fieldSelector": "spec.nodeName=node-a"})
    assert [p["metadata"]["name"] for p in listed.json()["items"]] == ["mine"]
    assert (await api.get("/api/v1/pods")).status_code == 403
    status = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "theirs"}, "status": {"phase": "Failed"}}
    current = await backing.get("Pod", "theirs", "default")
    status["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    written = await api.put("/api/v1/namespaces/default/pods/theirs/status", json=status)
    assert written.status_code == 403
    assert "rule node-own-pods" in written.json()["message"]


async def test_a_node_reads_a_secret_only_while_a_configuration_names_it(
    api: httpx2.AsyncClient, backing: MemoryStore
) -> None:
    await backing.create(secret("cam-password", {"pw": b"x"}))
    path = "/api/v1/namespaces/default/secrets"
    by_name = {"fieldSelector": "metadata.name=cam-password"}
    refused = await api.get(path, params=by_name)
    assert refused.status_code == 403
    assert "rule node-referenced-sources" in refused.json()["message"]
    reference = {"name": "pw", "valueFrom": {"secretKeyRef": {"name": "cam-password", "key": "pw"}}}
    await backing.create(configuration(discovery_properties=[reference]))
    assert (await api.get(path, params=by_name)).status_code == 200
    assert (await api.get(f"{path}/cam-password")).status_code == 200
    assert (await api.get(path)).status_code == 403


# -- agents on the remote backend with node tokens --------------------------------------------------------------------


def remote(url: str, token: str) -> RemoteStore:
    return RemoteStore(url, clock=SystemClock(), credentials=Credentials(token=token))


async def test_agents_with_node_tokens_do_their_work_and_are_refused_another_nodes_slot(
    url: str, clock: FakeClock, sock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="devplace.server._guards")
    world = World()
    admin = remote(url, "admin-token")
    stores: dict[str, Store] = {}
    agents: dict[str, Agent] = {}
    kubelets: dict[str, MiniKubelet] = {}
    try:
        for node in ("node-a", "node-b"):
            kubelets[node] = MiniKubelet(sock_dir / node)
            await kubelets[node].start()
            stores[node] = remote(url, f"{node}-token")
            agents[node] = Agent(
                AgentConfig(node=node, kubelet_dir=sock_dir / node, resource_prefix=PREFIX),
                stores[node],
                builtin_registry(node, world=world),
                clock,
            )
            await agents[node].start()
        world.plug("cam-1", ["node-a", "node-b"], {"ip": "10.0.0.1"})
        world.plug("usb-1", ["node-a"])
        await admin.create(secret("cam-password", {"pw": b"s3cret"}))
        reference = {"name": "pw", "valueFrom": {"secretKeyRef": {"name": "cam-password", "key": "pw"}}}
        await admin.create(configuration(capacity=2, discovery_properties=[reference]))
        name = instances.instance_name("cams", "cam-1", "node-a", True)

        async def both_listed() -> bool:
            try:
                obj = await admin.get("Instance", name, "default")
            except errors.NotFound:
                return False
            return sorted(obj["spec"]["nodes"]) == ["node-a", "node-b"]

        await until(both_listed, "one Instance listing both nodes")
        missing = {"name": "pw", "valueFrom": {"secretKeyRef": {"name": "no-such-secret", "key": "pw"}}}
        await admin.create(configuration("broken", discovery_properties=[missing]))

        async def both_failed() -> bool:
            obj = await admin.get("Configuration", "broken", "default")
            return sorted(c.get("node") for c in obj.get("status", {}).get("conditions", [])) == ["node-a", "node-b"]

        await until(both_failed, "each node's DiscoveryFailed condition on the broken Configuration")
        kubelet = kubelets["node-a"]
        await until(lambda: _true(kubelet.registered(f"{PREFIX}/{name}")), "node-a's IL plugin")
        plugin = kubelet.client(f"{PREFIX}/{name}")
        try:
            await plugin.allocate([f"{name}-0"])  # node-a's agent claims through its node token
        finally:
            await plugin.close()
        claimed = await admin.get("Instance", name, "default")
        assert claimed["spec"]["deviceUsage"][f"{name}-0"] == "node-a"

        cfg = await admin.get("Configuration", "cams", "default")
        await admin.update({**cfg, "spec": {**cfg["spec"], "capacity": 3}})

        async def resized() -> bool:  # the agents' capacity sync, through their node tokens
            spec = (await admin.get("Instance", name, "default"))["spec"]
            return spec["capacity"] == 3 and sorted(spec["deviceUsage"]) == [f"{name}-{i}" for i in range(3)]

        await until(resized, "the shared Instance following its Configuration's capacity")
        claimed = await admin.get("Instance", name, "default")
        assert claimed["spec"]["deviceUsage"][f"{name}-0"] == "node-a"

        stolen = copy.deepcopy(claimed)
        stolen["spec"]["deviceUsage"][f"{name}-0"] = "node-b"
        with pytest.raises(errors.Forbidden, match="rule node-instance-slots"):
            await stores["node-b"].update(stolen)
        freed = copy.deepcopy(claimed)
        freed["spec"]["deviceUsage"][f"{name}-0"] = ""
        with pytest.raises(errors.Forbidden, match="rule node-instance-slots"):
            await stores["node-b"].update(freed)
        assert (await admin.get("Instance", name, "default"))["spec"]["deviceUsage"][f"{name}-0"] == "node-a"

        world.unplug("cam-1", ["node-a"])

        async def only_b() -> bool:
            return (await admin.get("Instance", name, "default"))["spec"]["nodes"] == ["node-b"]

        await until(only_b, "node-a leaving the shared Instance")
        world.unplug("usb-1", ["node-a"])
        alone = instances.instance_name("cams", "usb-1", "node-a", True)

        async def offline() -> bool:
            obj = await admin.get("Instance", alone, "default")
            return obj["spec"]["nodes"] == [] and instances.OFFLINE_SINCE in obj["metadata"].get("annotations", {})

        await until(offline, "node-a leaving the Instance only it saw, marking it offline")
        await clock.advance(301.0)  # past the offline grace

        async def deleted() -> bool:
            try:
                await admin.get("Instance", alone, "default")
            except errors.NotFound:
                return True
            return False

        await until(deleted, "node-a deleting the Instance nobody sees")
    finally:
        for agent in agents.values():
            await agent.stop()
        for kubelet in kubelets.values():
            await kubelet.stop()
        for store in (*stores.values(), admin):
            await store.close()
    refusals = [r.getMessage() for r in caplog.records if r.name == "devplace.server._guards"]
    assert len(refusals) == 2, refusals  # the two writes the test made; none of the agents' own
    assert all("node:node-b" in message for message in refusals)


async def _true(value: bool) -> bool:
    return value
