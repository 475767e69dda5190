"""The whole DRA path over devplace's own slices: the agents and the controller publish Instances as ResourceSlices,
devplace's scheduler allocates a claim from them with the Configuration's DeviceClass, and the node's kubelet has the
agent's DRA plugin prepare it; the slot is held for the claim in the Instance's deviceUsage."""

from __future__ import annotations

from typing import Any

from devplace import api
from devplace.sim import Fleet

CAMS = {
    "apiVersion": "devplace.io/v1alpha1",
    "kind": "Configuration",
    "metadata": {"name": "cams", "namespace": "default"},
    "spec": {"discoveryHandler": {"name": "sim", "discoveryDetails": "{kind: cam, shared: false}"}, "capacity": 2},
}
SHARED = {
    "apiVersion": "devplace.io/v1alpha1",
    "kind": "Configuration",
    "metadata": {"name": "screens", "namespace": "default"},
    "spec": {"discoveryHandler": {"name": "sim", "discoveryDetails": "{kind: screen, shared: true}"}, "capacity": 1},
}


def claim_and_pod(name: str, device_class: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": device_class}}]}},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "sim", "resources": {"claims": [{"name": "dev"}]}}],
                "resourceClaims": [{"name": "dev", "resourceClaimName": name}],
            },
        },
    ]


async def test_a_claim_is_allocated_from_the_published_slices_and_prepared_on_the_node_that_publishes_it() -> None:
    async with Fleet(dra=True) as fleet:
        for node in ("node-a", "node-b"):
            fleet.add_node(node)
        await fleet.apply([CAMS, SHARED, api.compile_configuration(CAMS), api.compile_configuration(SHARED)])
        fleet.plug("cam-1", ["node-b"], {"ip": "10.0.0.1", "kind": "cam"})
        fleet.plug("screen-1", ["node-a", "node-b"], {"kind": "screen"})
        await fleet.settle()
        slices = {s["metadata"]["name"]: s for s in await fleet.list("ResourceSlice")}
        assert "node-b-devplace.io-0" in slices
        assert [s["spec"]["nodeSelector"] for s in slices.values() if "nodeSelector" in s["spec"]] == [
            api.shared_pool(["node-a", "node-b"]).placement["nodeSelector"]
        ]

        await fleet.apply(claim_and_pod("cam", "cams.devplace.io"))
        await fleet.settle()
        pod = await fleet.get("Pod", "cam", "default")
        assert pod is not None
        assert (pod["spec"].get("nodeName"), pod["status"]["phase"]) == ("node-b", "Running")
        [instance] = [i for i in await fleet.list("Instance") if i["spec"]["configurationName"] == "cams"]
        assert sorted(instance["spec"]["deviceUsage"].values()) == ["", "D:default/cam:node-b"]

        await fleet.apply(claim_and_pod("screen", "screens.devplace.io"))
        await fleet.settle()
        pod = await fleet.get("Pod", "screen", "default")
        assert pod is not None
        assert pod["status"]["phase"] == "Running"
        [screen] = [i for i in await fleet.list("Instance") if i["spec"]["configurationName"] == "screens"]
        assert list(screen["spec"]["deviceUsage"].values()) == [f"D:default/screen:{pod['spec']['nodeName']}"]
