"""Seed 000's walk-through (tests/e2e/test_configuration_level_resources.py) with DRA claims instead of the
Configuration-level and Instance-level pods (issue #26, one truth for both paths).

Two nodes see two cameras, capacity 2, `uniqueDevices: true`. The seed's steps, each pod placed by devplace's
scheduler on the node the seed names (a nodeSelector) and prepared by that node's DRA plugin:
1. a pod on node-a with one claim for two cameras of the Configuration's DeviceClass (the CL pod's
   `akri.sh/akri-onvif: 2`): one slot of each camera is held for the claim on node-a;
2. a pod on node-b with a claim for the second camera by name (the IL pod's `akri.sh/akri-onvif-<hash>: 1`, a CEL
   selector on the device's `instance` attribute): the second camera's other slot is held for it on node-b.
It ends in the seed's deviceUsage: the first camera one slot held (node-a) and one free, the second both held (node-a,
node-b), the holders of the `D:<namespace>/<claim>:<node>` form; and the device plugins of both nodes see what is
left: one slot of the first camera, none of the second.
"""

from __future__ import annotations

from typing import Any

from devplace import api
from devplace.sim import Fleet
from tests.e2e.scenarios import held, il, instances

CL = "akri.sh/akri-onvif"
ONVIF = {
    "apiVersion": "akri.sh/v0",
    "kind": "Configuration",
    "metadata": {"name": "akri-onvif", "namespace": "default"},
    "spec": {"discoveryHandler": {"name": "sim", "discoveryDetails": ""}, "capacity": 2, "uniqueDevices": True},
}
DEVICE_CLASS = "akri-onvif.akri.sh"


def claim(name: str, *, count: int = 1, instance: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": DEVICE_CLASS, "count": count}
    if instance is not None:
        exactly["selectors"] = [{"cel": {"expression": f'device.attributes["{api.DRIVER}"].instance == "{instance}"'}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "cams", "exactly": exactly}]}},
    }


def pod(name: str, node: str, claim_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{"name": "main", "image": "sim", "resources": {"claims": [{"name": "cams"}]}}],
            "resourceClaims": [{"name": "cams", "resourceClaimName": claim_name}],
        },
    }


def holder_nodes(instance: dict[str, Any]) -> list[str]:
    """The nodes the DRA holders of an Instance's held slots name (any other holder fails the walk-through)."""
    out = []
    for holder in held(instance).values():
        parsed = api.parse_holder(holder)
        assert isinstance(parsed, api.DRA), holder
        out.append(parsed.node)
    return sorted(out)


async def run(fleet: Fleet, name: str, node: str, claim_spec: dict[str, Any]) -> dict[str, Any]:
    await fleet.apply([claim_spec, pod(name, node, claim_spec["metadata"]["name"])])
    await fleet.settle()
    found = await fleet.get("Pod", name)
    assert found is not None
    assert (found["spec"].get("nodeName"), found["status"].get("phase")) == (node, "Running"), found["status"]
    return found


async def test_seed_000_walkthrough_with_dra_claims_ends_in_the_seeds_device_usage() -> None:
    async with Fleet(resource_prefix="akri.sh", dra=True) as fleet:
        fleet.add_node("node-a")
        fleet.add_node("node-b")
        fleet.plug("cam-1", nodes=["node-a", "node-b"], properties={"model": "x"})
        fleet.plug("cam-2", nodes=["node-a", "node-b"], properties={"model": "x"})
        await fleet.apply([ONVIF, api.compile_configuration(ONVIF, prefix="akri.sh")])
        await fleet.settle()
        first, second = await instances(fleet, "akri-onvif")
        il1, il2 = il(fleet, first), il(fleet, second)
        for node in ("node-a", "node-b"):
            assert fleet.available(node) == {CL: 2, il1: 2, il2: 2}

        await run(fleet, "onvif-broker", "node-a", claim("two-cameras", count=2))
        first, second = await instances(fleet, "akri-onvif")
        assert [holder_nodes(first), holder_nodes(second)] == [["node-a"], ["node-a"]]
        assert set(held(first).values()) == set(held(second).values()) == {"D:default/two-cameras:node-a"}

        await run(fleet, "il-broker", "node-b", claim("second-camera", instance=second["metadata"]["name"]))
        first, second = await instances(fleet, "akri-onvif")
        # the seed's end: the first camera one slot held by node-a and one free, the second held by node-a and node-b
        assert [holder_nodes(first), holder_nodes(second)] == [["node-a"], ["node-a", "node-b"]]
        assert sorted(held(second).values()) == ["D:default/second-camera:node-b", "D:default/two-cameras:node-a"]
        assert len(first["spec"]["deviceUsage"]) == len(second["spec"]["deviceUsage"]) == 2
        for node in ("node-a", "node-b"):
            assert {r: fleet.available(node)[r] for r in (il1, il2)} == {il1: 1, il2: 0}, node
