"""deploy/kubernetes/rbac.yaml grants each part exactly what it needs, and the parts need no more than that.

`NEEDS` lists, per part, the Kubernetes requests its store calls become through the `kube` store; each ClusterRole
must grant exactly those (nothing more: no wildcard, no verb a part never uses). Then the real agent, controller and
scheduler run a scenario that takes them through their write paths (brokers of every kind, services, dynamic pools,
discovery properties from a Secret and a ConfigMap, a failing discovery, a class-scheduled pod, a device whose
properties change, devices unplugged, a node gone, a Configuration deleted, a kubelet missing) over a store that
records who asked for what (`tests.deploy.recordings`), and every request they made must be in their `NEEDS`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from devplace.api import compile_configuration
from devplace.clocks import FakeClock
from devplace.sim import Fleet
from devplace.store import InformerSet, MemoryStore
from tests.agent.conftest import Nodes
from tests.deploy.recordings import Recording, Request
from tests.e2e.scenarios import BROKER, SERVICE

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "rbac.yaml"
GROUPS = {"Configuration": "akri.sh", "Instance": "akri.sh"}
"""Where the kube store reads these kinds with `kube://?group=akri.sh`, as the manifests run it."""

AKRI, CORE, BATCH, DEVPLACE = "akri.sh", "", "batch", "devplace.io"
RESOURCE, COORDINATION = "resource.k8s.io", "coordination.k8s.io"


def _all(group: str, resource: str, *verbs: str) -> set[Request]:
    return {(verb, group, resource) for verb in verbs}


EVENTS = _all(CORE, "events", "get", "list", "create", "update", "delete")
"""Every part's Events (store.EventRecorder): created, a repeat's count updated by compare-and-swap (get after a lost
one), this component's old ones listed and deleted by the sweep."""

LEASES = _all(COORDINATION, "leases", "get", "create", "update")
"""`--leader-elect` (store.LeaderElector): the Lease read, created once, renewed or taken by compare-and-swap."""

NEEDS: dict[str, set[Request]] = {
    "agent": (
        # Instances: its node's share of each (create, update, delete when no node sees a device; a slot claimed or
        # freed by a JSON patch testing it); get after a lost write; an informer lists and watches them
        _all(AKRI, "instances", "get", "list", "watch", "create", "update", "patch", "delete")
        # Configurations: watched; its per-node conditions (DiscoveryFailed, ResourceNameConflict) on their status
        | _all(AKRI, "configurations", "get", "list", "watch", "update")
        | _all(AKRI, "configurations/status", "update")
        # its Node: the DevplaceKubeletMissing condition (agent/_kubelets.py), by compare-and-swap
        | _all(CORE, "nodes", "get", "update")
        | _all(CORE, "nodes/status", "update")
        # its node's Pods (slot release); the Secrets and ConfigMaps discoveryProperties name
        | _all(CORE, "pods", "list", "watch")
        | _all(CORE, "secrets", "list", "watch")
        | _all(CORE, "configmaps", "list", "watch")
        # DRA: its node's local pool of ResourceSlices (a probe slice created and deleted at start; slices created,
        # updated and deleted by compare-and-swap; an informer lists and watches its node's)
        | _all(RESOURCE, "resourceslices", "list", "watch", "create", "update", "delete")
        # DRA: the kubelet's plugin reads the claim it prepares (its allocation; the slots it holds are Instances')
        | _all(RESOURCE, "resourceclaims", "get")
        | EVENTS
    ),
    "controller": (
        # what it deploys: broker Pods and Jobs, their Services, dynamic pools' ConfigMaps; get when a create finds
        # one already there, or after a lost compare-and-swap
        _all(CORE, "pods", "get", "list", "watch", "create", "update", "delete")
        | _all(CORE, "services", "get", "list", "watch", "create", "update", "delete")
        | _all(CORE, "configmaps", "get", "list", "watch", "create", "update", "delete")
        | _all(BATCH, "jobs", "get", "list", "watch", "create", "update", "delete")
        # broker counts on Configurations' status
        | _all(AKRI, "configurations", "get", "list", "watch", "update")
        | _all(AKRI, "configurations/status", "update")
        # the slots and nodes entries of nodes that are gone (an Instance no node sees any more goes)
        | _all(AKRI, "instances", "get", "list", "watch", "update", "delete")
        | _all(CORE, "nodes", "list", "watch")
        | _all(DEVPLACE, "resourceclasses", "list", "watch")
        # the ResourceClaim lifecycle: claims made from templates for pods (recorded in the pods' status), consumers
        # that went removed, claims reserved for nobody deallocated, a template's claim deleted with its pod
        | _all(RESOURCE, "resourceclaims", "get", "list", "watch", "create", "update", "delete")
        | _all(RESOURCE, "resourceclaims/status", "update")
        | _all(RESOURCE, "resourceclaimtemplates", "list", "watch")
        | _all(CORE, "pods/status", "update")
        # DRA: shared Instances' ResourceSlices (nodeSelector), as the agent writes its local ones
        | _all(RESOURCE, "resourceslices", "list", "watch", "create", "update", "delete")
        | EVENTS
        | LEASES
    ),
    "scheduler": (
        # binding (nodeName and device annotations) by compare-and-swap; PodScheduled=False with the reasons
        _all(CORE, "pods", "get", "list", "watch", "update")
        | _all(CORE, "pods/status", "update")
        | _all(CORE, "nodes", "list", "watch")
        | _all(AKRI, "configurations", "list", "watch")
        | _all(AKRI, "instances", "list", "watch")
        # ResourceClass status (allocatable, requested)
        | _all(DEVPLACE, "resourceclasses", "get", "list", "watch", "update")
        | _all(DEVPLACE, "resourceclasses/status", "update")
        # DRA: claims allocated (finalizer, status.allocation, reservedFor) from slices and DeviceClasses; the
        # Instance slots devplace's devices give a claim; the binding itself through pods/binding
        | _all(RESOURCE, "resourceclaims", "get", "list", "watch", "update")
        | _all(RESOURCE, "resourceclaims/status", "update")
        | _all(RESOURCE, "resourceslices", "list", "watch")
        | _all(RESOURCE, "deviceclasses", "list", "watch")
        | _all(AKRI, "instances", "get", "update")
        | _all(CORE, "pods/binding", "create")
        | EVENTS
        | LEASES
    ),
}


def granted(role: str) -> set[Request]:
    [rules] = [
        d["rules"]
        for d in yaml.safe_load_all(RBAC.read_text())
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == f"devplace-{role}"
    ]
    out: set[Request] = set()
    for rule in rules:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule  # no resourceNames, no nonResourceURLs
        out |= {(v, g, r) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


@pytest.mark.parametrize("part", sorted(NEEDS))
def test_each_role_grants_exactly_what_its_part_needs(part):
    have = granted(part)
    assert sorted(have - NEEDS[part]) == [], "granted but not needed"
    assert sorted(NEEDS[part] - have) == [], "needed but not granted"


def test_no_role_grants_wildcards_or_powers_over_rbac_itself():
    for part in NEEDS:
        for verb, group, resource in granted(part):
            assert "*" not in (verb, group, resource)
            assert verb not in ("escalate", "bind", "impersonate", "deletecollection")
            assert group != "rbac.authorization.k8s.io"


def test_only_the_agent_patches_and_only_instances():
    """Every write is a compare-and-swap; the one PATCH is the agent's slot write, a JSON patch whose `test`
    operations are its compare (agent/_writes.py), which the API server applies by its own compare-and-swap."""
    patches = {(part, group, resource) for part in NEEDS for verb, group, resource in granted(part) if verb == "patch"}
    assert patches == {("agent", AKRI, "instances")}


def test_only_the_agent_reads_secrets_and_nobody_writes_them():
    readers = {part for part in NEEDS if any(r[2] == "secrets" for r in granted(part))}
    assert readers == {"agent"}
    assert {v for v, _, r in granted("agent") if r == "secrets"} == {"list", "watch"}


# -- the parts ask for no more than NEEDS ----------------------------------------------------------------------------


def _configuration(name: str, **spec: Any) -> dict[str, Any]:
    body = {"discoveryHandler": {"name": "sim", "discoveryDetails": ""}, "capacity": 2, **spec}
    return {"apiVersion": "akri.sh/v0", "kind": "Configuration", "metadata": {"name": name}, "spec": body}


_PROPERTIES = [
    {"name": "user", "valueFrom": {"secretKeyRef": {"name": "cam-auth", "key": "user"}}},
    {"name": "realm", "valueFrom": {"configMapKeyRef": {"name": "cam-conf", "key": "realm"}}},
]


async def _fleet_scenario(recording: Recording, clock: FakeClock) -> None:
    async with Fleet(recording, clock=clock) as fleet:
        for node in ("node-a", "node-b"):
            fleet.add_node(node)
        await fleet.settle()
        await fleet.apply(
            [
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cam-auth"}, "stringData": {"user": "u"}},
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cam-conf"}, "data": {"realm": "r"}},
            ]
        )
        fleet.plug("cam-1", ["node-a", "node-b"], {"ip": "10.0.0.1"})
        fleet.plug("usb-1", ["node-a"], {"devnode": "/dev/video0"})
        handler = {"name": "sim", "discoveryDetails": "", "discoveryProperties": _PROPERTIES}
        services = {"instanceServiceSpec": SERVICE, "configurationServiceSpec": SERVICE}
        job = {"template": {"spec": {**BROKER, "restartPolicy": "Never"}}}
        plain = {"containers": [{"name": "b", "image": "example.org/b:1"}]}
        await fleet.apply(
            _configuration("cams", discoveryHandler=handler, brokerSpec={"brokerPodSpec": BROKER}, **services)
        )
        await fleet.apply(_configuration("jobs", brokerSpec={"brokerJobSpec": job}))
        dynamic = {"pool": {"size": 2, "mode": "dynamic"}}
        await fleet.apply(_configuration("pools", brokerSpec={"brokerPodSpec": plain}, brokerStrategy=dynamic))
        await fleet.apply(_configuration("nowhere", discoveryHandler={"name": "no-such-handler"}))
        await fleet.apply(
            {
                "apiVersion": "devplace.io/v1alpha1",
                "kind": "ResourceClass",
                "metadata": {"name": "cams"},
                "spec": {
                    "resourceSelector": [
                        {"matchExpressions": [{"key": "configuration", "operator": "In", "values": ["cams"]}]}
                    ]
                },
            }
        )
        await fleet.settle()
        await fleet.run_pod("user", requests={"rc.devplace.io/cams": 1})
        await fleet.run_pod("too-many", requests={"rc.devplace.io/cams": 99})  # stays Pending, with the reasons
        await fleet.delete("Pod", "user")
        fleet.plug("usb-1", ["node-a"], {"devnode": "/dev/video1"})  # its properties change
        await fleet.settle()
        await fleet.stop_node("node-b")  # the controller frees its slots and drops it from cam-1's Instances
        await fleet.advance(400)
        fleet.unplug("cam-1")
        await fleet.advance(400)
        await fleet.delete("Configuration", "cams")
        await fleet.advance(400)


async def _kubelet_missing_scenario(recording: Recording, clock: FakeClock, root: Path) -> None:
    await recording.inner.create(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}, "status": {"conditions": []}}
    )
    nodes = Nodes(recording, clock, root)
    await nodes.add("node-a", kubelet=False)
    try:
        await nodes.settle()
    finally:
        for agent in nodes.agents.values():
            await agent.stop()
    node = await recording.inner.get("Node", "node-a", "")
    assert [c["type"] for c in node["status"]["conditions"]] == ["DevplaceKubeletMissing"]


async def _dra_scenario(recording: Recording, clock: FakeClock) -> None:
    """DRA end to end: the agents publish their local pools and the controller the shared ones (created, changed,
    dropped); the scheduler allocates claims from them and the agents' DRA plugins prepare them."""
    local = _configuration("usbs", discoveryHandler={"name": "sim", "discoveryDetails": "{kind: usb, shared: false}"})
    shared = _configuration("cams", discoveryHandler={"name": "sim", "discoveryDetails": "{kind: cam}"})
    async with Fleet(recording, clock=clock, dra=True) as fleet:
        for node in ("node-a", "node-b"):
            fleet.add_node(node)
        await fleet.apply([local, shared, compile_configuration(local), compile_configuration(shared)])
        fleet.plug("usb-1", ["node-a"], {"kind": "usb"})
        fleet.plug("cam-1", ["node-a", "node-b"], {"kind": "cam"})
        await fleet.settle()
        for name, device_class in (("usb", "usbs.akri.sh"), ("cam", "cams.akri.sh")):
            await fleet.apply(
                [
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceClaim",
                        "metadata": {"name": name},
                        "spec": {
                            "devices": {"requests": [{"name": "d", "exactly": {"deviceClassName": device_class}}]}
                        },
                    },
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {"name": name},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "sim", "resources": {"claims": [{"name": "d"}]}}],
                            "resourceClaims": [{"name": "d", "resourceClaimName": name}],
                        },
                    },
                ]
            )
            await fleet.settle()
        fleet.plug("usb-1", ["node-a"], {"kind": "usb", "devnode": "/dev/video1"})  # its slice is updated
        fleet.plug("cam-1", ["node-a", "node-b"], {"kind": "cam", "ip": "10.0.0.2"})  # its shared slice is updated
        await fleet.settle()
        fleet.unplug("cam-1", ["node-b"])  # the shared device moves to another pool
        await fleet.settle()
        for name in ("usb", "cam"):
            await fleet.delete("Pod", name)
        fleet.unplug("usb-1")  # node-a's slice goes
        await fleet.advance(400)


async def test_the_parts_ask_the_cluster_for_nothing_their_roles_do_not_grant(tmp_path):
    clock = FakeClock()
    recording = Recording(MemoryStore(clock=clock), GROUPS)
    InformerSet.of(recording, shared=False)  # each part asks for what it reads, as alone in its own process
    await _fleet_scenario(recording, clock)
    alone = Recording(MemoryStore(clock=clock), GROUPS)
    InformerSet.of(alone, shared=False)
    await _kubelet_missing_scenario(alone, clock, tmp_path)
    for part, requests in alone.requests.items():
        recording.requests.setdefault(part, set()).update(requests)
    dra = Recording(MemoryStore(clock=clock), GROUPS)
    InformerSet.of(dra, shared=False)
    await _dra_scenario(dra, clock)
    for part, requests in dra.requests.items():
        recording.requests.setdefault(part, set()).update(requests)
    parts = set(recording.requests) - {"harness", "kubelet"}  # the test's own calls; the simulated kubelets
    assert parts == {"agent", "controller", "scheduler"}  # every call was attributed to a part
    for part in sorted(parts):
        assert sorted(recording.requests[part] - NEEDS[part]) == [], f"{part} asked for more than it is granted"
    # the scenario reached the write paths the roles grant (so the check above is not vacuous)
    assert {("update", AKRI, "configurations/status"), ("update", CORE, "nodes/status")} <= recording.requests["agent"]
    assert ("delete", AKRI, "instances") in recording.requests["agent"]
    assert ("patch", AKRI, "instances") in recording.requests["agent"]  # slot claims and releases
    assert {("update", CORE, "configmaps"), ("create", BATCH, "jobs")} <= recording.requests["controller"]
    assert ("update", AKRI, "instances") in recording.requests["controller"]
    slice_writes = {(verb, RESOURCE, "resourceslices") for verb in ("create", "update", "delete")}
    assert slice_writes <= recording.requests["agent"]
    assert slice_writes <= recording.requests["controller"]
    assert ("get", RESOURCE, "resourceclaims") in recording.requests["agent"]  # a claim was prepared
    assert {("update", CORE, "pods"), ("update", DEVPLACE, "resourceclasses/status")} <= recording.requests["scheduler"]
