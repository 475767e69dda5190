"""The simulated kubelet's DRA side against the real agent's DRA plugin: a pod's claim is prepared before it runs
(the slot held for the claim, the CDI id resolved) and unprepared after it goes (the slot free again)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devplace.agent import Agent, AgentConfig, instance_name
from devplace.api import dra_device
from devplace.clocks import FakeClock
from devplace.discovery import World, builtin_registry
from devplace.sim import Fleet, SimKubelet
from devplace.sim._drakubelets import DraFailure, claim_names, resolve_cdi
from devplace.store import MemoryStore, Store

from .test_kubelets import eventually

NAME = instance_name("cams", "cam-1", "node-a", True)
DEVICE = dra_device(NAME, {}).name
HOLDER = "D:default/cam-claim:node-a"


@dataclass
class DraWorld:
    store: Store
    kubelet: SimKubelet
    agent: Agent
    cdi: Path

    async def usage(self) -> dict[str, str]:
        return dict((await self.store.get("Instance", NAME, "default"))["spec"]["deviceUsage"])

    async def run_pod(self, name: str = "p", reserve: bool = True) -> dict[str, Any]:
        """Create a claim allocated to the camera and a pod using it; bind the pod once the claim is reserved."""
        claim = await self.store.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "cam-claim", "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "cam", "exactly": {"deviceClassName": "cams"}}]}},
            }
        )
        pod = await self.store.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "containers": [{"name": "main", "image": "sim", "resources": {"claims": [{"name": "cam"}]}}],
                    "resourceClaims": [{"name": "cam", "resourceClaimName": "cam-claim"}],
                },
            }
        )
        result = {"request": "cam", "driver": "devplace.io", "pool": "node-a", "device": DEVICE}
        claim["status"] = {"allocation": {"devices": {"results": [result]}}}
        if reserve:
            claim["status"]["reservedFor"] = [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]
        await self.store.update(claim)
        pod["spec"]["nodeName"] = "node-a"
        await self.store.update(pod)

        async def decided() -> bool:
            phase = ((await self.store.get("Pod", name, "default")).get("status") or {}).get("phase")
            return phase in ("Running", "Failed")

        await eventually(decided)
        return await self.store.get("Pod", name, "default")


@pytest.fixture
async def dra_world(
    memory_store: MemoryStore, clock: FakeClock, sock_dir: Path, tmp_path: Path
) -> AsyncIterator[DraWorld]:
    cdi = tmp_path / "cdi"
    kubelet = SimKubelet("node-a", sock_dir, memory_store, clock, cdi_dirs=[cdi])
    await kubelet.start()
    world = World()
    world.plug("cam-1", ["node-a"], {"RESOLUTION": "1080p"})
    agent = Agent(
        AgentConfig(node="node-a", kubelet_dir=sock_dir, resource_prefix="devplace.io", dra=True, cdi_dir=cdi),
        memory_store,
        builtin_registry("node-a", world=world),
        clock,
    )
    await agent.start()
    await memory_store.create(
        {
            "apiVersion": "devplace.io/v1alpha1",
            "kind": "Configuration",
            "metadata": {"name": "cams", "namespace": "default"},
            "spec": {"discoveryHandler": {"name": "sim", "discoveryDetails": ""}, "capacity": 1},
        }
    )
    await eventually(lambda: agent.cache.instance("default", NAME) is not None)
    yield DraWorld(memory_store, kubelet, agent, cdi)
    await agent.stop()
    await kubelet.stop()


async def test_a_pod_runs_once_its_claim_is_prepared_and_its_slot_is_freed_after_the_pod_goes(
    dra_world: DraWorld,
) -> None:
    pod = await dra_world.run_pod()
    assert pod["status"]["phase"] == "Running"
    assert dra_world.kubelet.dra is not None
    [claim] = dra_world.kubelet.dra.claims.values()
    assert claim.cdi_ids == (f"devplace.io/cams={claim.uid}-{DEVICE}",)
    assert "RESOLUTION=1080p" in claim.edits[0]["env"]
    assert await dra_world.usage() == {f"{NAME}-0": HOLDER}
    await dra_world.store.delete("Pod", "p", "default")

    async def freed() -> bool:
        return await dra_world.usage() == {f"{NAME}-0": ""}

    await eventually(freed)
    await eventually(dra_world.kubelet.is_idle)  # the unprepare call has come back
    assert dra_world.kubelet.dra.claims == {}
    assert list(dra_world.cdi.iterdir()) == []


async def test_a_pod_whose_claim_is_not_reserved_for_it_fails_and_takes_no_slot(dra_world: DraWorld) -> None:
    pod = await dra_world.run_pod(reserve=False)
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["reason"] == "UnexpectedAdmissionError"
    assert pod["status"]["message"] == "ResourceClaim default/cam-claim is not reserved for this pod"
    assert await dra_world.usage() == {f"{NAME}-0": ""}


async def test_a_claim_on_a_slot_the_device_plugin_path_holds_fails_the_pod_naming_the_holder(
    dra_world: DraWorld,
) -> None:
    inst = await dra_world.store.get("Instance", NAME, "default")
    inst["spec"]["deviceUsage"] = {f"{NAME}-0": "node-a"}
    await dra_world.store.update(inst)
    await asyncio.sleep(0)
    pod = await dra_world.run_pod()
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["message"].startswith(
        "devplace.io could not prepare claim default/cam-claim: "
        f"{NAME} has 0 free slot(s), claim default/cam-claim needs 1 more (held by node-a (instance level))"
    )


def test_a_templates_claim_is_named_by_the_pods_status_and_missing_it_is_a_failure() -> None:
    pod = {
        "spec": {
            "resourceClaims": [{"name": "a", "resourceClaimName": "x"}, {"name": "b", "resourceClaimTemplateName": "t"}]
        },
        "status": {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "p-b-7x2k"}]},
    }
    assert claim_names(pod) == [("a", "x"), ("b", "p-b-7x2k")]
    with pytest.raises(DraFailure, match="claim 'b' of the pod has no ResourceClaim yet"):
        claim_names({"spec": pod["spec"]})


def test_resolve_cdi_finds_a_device_by_kind_and_name_the_later_directory_winning(tmp_path: Path) -> None:
    etc, run = tmp_path / "etc", tmp_path / "run"
    for directory, env in ((etc, "A=etc"), (run, "A=run")):
        directory.mkdir()
        (directory / "x.json").write_text(
            '{"cdiVersion": "0.5.0", "kind": "example.com/cam", "devices": '
            f'[{{"name": "c0", "containerEdits": {{"env": ["{env}"]}}}}]}}'
        )
    assert resolve_cdi("example.com/cam=c0", [etc, run]) == {"env": ["A=run"]}
    assert resolve_cdi("example.com/cam=c1", [etc, run]) is None
    assert resolve_cdi("example.com/cam", [etc, run]) is None


async def test_a_fleet_with_dra_runs_a_claimed_pod_through_the_agents_plugin_and_frees_the_slot_after_it() -> None:
    async with Fleet(dra=True, scheduler=False, controller=False, resource_prefix="devplace.io") as fleet:
        fleet.add_node("node-a")
        fleet.world.plug("cam-1", ["node-a"], {"RESOLUTION": "1080p"})
        await fleet.apply(
            {
                "apiVersion": "devplace.io/v1alpha1",
                "kind": "Configuration",
                "metadata": {"name": "cams", "namespace": "default"},
                "spec": {"discoveryHandler": {"name": "sim", "discoveryDetails": ""}, "capacity": 1},
            }
        )
        await fleet.settle()
        world = DraWorld(fleet.store, fleet.kubelet("node-a"), fleet.agent("node-a"), Path())
        pod = await world.run_pod()
        assert pod["status"]["phase"] == "Running"
        assert await world.usage() == {f"{NAME}-0": HOLDER}
        await fleet.store.delete("Pod", "p", "default")
        await fleet.settle()
        assert await world.usage() == {f"{NAME}-0": ""}


def _slice(name: str, node: str, driver: str = "devplace.io") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 0, "resourceSliceCount": 1}},
    }


async def _slices(store: Store) -> list[str]:
    return sorted(s["metadata"]["name"] for s in (await store.list("ResourceSlice")).items)


async def test_the_kubelet_starts_by_deleting_its_nodes_slices(
    memory_store: MemoryStore, clock: FakeClock, sock_dir: Path, tmp_path: Path
) -> None:
    for name, node in (("node-a-devplace.io-0", "node-a"), ("node-b-devplace.io-0", "node-b")):
        await memory_store.create({**_slice(name, node), "spec": {**_slice(name, node)["spec"], "devices": []}})
    kubelet = SimKubelet("node-a", sock_dir, memory_store, clock, cdi_dirs=[tmp_path])
    await kubelet.start()
    try:
        assert await _slices(memory_store) == ["node-b-devplace.io-0"]
    finally:
        await kubelet.stop()


async def test_a_driver_gone_from_the_registry_loses_its_slices_of_the_node_after_30_seconds(
    dra_world: DraWorld, clock: FakeClock
) -> None:
    dra = dra_world.kubelet.dra
    assert dra is not None
    await dra.check_registry(clock.now())
    assert list(dra.plugins) == ["devplace.io"]
    await dra_world.agent.stop()  # its registry socket goes (and its slice publisher with it)
    for name, driver in (("node-a-devplace.io-0", "devplace.io"), ("node-a-gpu-0", "gpu.example.com")):
        body = _slice(name, "node-a", driver)
        await dra_world.store.create({**body, "spec": {**body["spec"], "devices": []}})
    start = clock.now()
    await dra.check_registry(start)
    assert dra.plugins == {}
    await dra.check_registry(start + 29.0)
    assert await _slices(dra_world.store) == ["node-a-devplace.io-0", "node-a-gpu-0"]
    await dra.check_registry(start + 30.0)
    assert await _slices(dra_world.store) == ["node-a-gpu-0"]
