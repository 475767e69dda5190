"""The authorization rules as tables: roles, request actions, request decisions and object decisions (pure).

Every refusal rule of `devplace.server._authz` has a row here; the agent's and the simulated kubelet's own writes,
produced by their own pure functions, are admitted (the node rules allow what they do).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from devplace.agent import _conditions as conditions
from devplace.agent import _instances as instances
from devplace.agent import _properties as agent_properties
from devplace.agent import _slots as slots
from devplace.discovery import Device
from devplace.server import _authz as authz
from devplace.server._authz import Action, Allowed, Denied, Identity, Role
from devplace.sim import _nodes as sim_nodes

A = Role("node", "node-a")
ADMIN = Role("admin")
READER = Role("reader")
NOBODY = Role("none")
NOW = 1_767_225_600.0


# -- roles ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("user", "groups", "expected"),
    [
        ("system:node:node-a", ("system:nodes",), A),
        ("system:node:node-a", (), A),
        ("node:node-a", (), A),
        ("system:node:node-a", ("admin",), A),  # a node name wins: a node never gets more than its share
        ("alice", ("admin",), ADMIN),
        ("alice", ("system:masters",), ADMIN),
        ("alice", ("reader", "admin"), ADMIN),
        ("bob", ("reader",), READER),
        ("carol", ("developers",), NOBODY),
        ("admin", (), NOBODY),  # roles come from groups, not user names
        ("system:node:", ("system:nodes",), NOBODY),
    ],
)
def test_roles_follow_the_one_rule(user: str, groups: tuple[str, ...], expected: Role) -> None:
    assert authz.role_of(Identity(user, groups)) == expected


# -- actions ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/healthz", "", Action("get", "public", "/healthz")),
        ("GET", "/version", "", Action("get", "public", "/version")),
        ("GET", "/api", "", Action("get", "discovery", "/api")),
        ("GET", "/apis/devplace.io/v1alpha1", "", Action("get", "discovery", "/apis/devplace.io/v1alpha1")),
        ("GET", "/openapi/v2", "", Action("get", "discovery", "/openapi/v2")),
        ("GET", "/api/v1/nodes", "", Action("list", "resource", "/api/v1/nodes", "Node", "nodes")),
        (
            "GET",
            "/api/v1/pods",
            "watch=1&fieldSelector=spec.nodeName%3Dnode-a",
            Action("watch", "resource", "/api/v1/pods", "Pod", "pods", fields="spec.nodeName=node-a"),
        ),
        (
            "PUT",
            "/apis/devplace.io/v1alpha1/namespaces/default/instances/x",
            "dryRun=All",
            Action(
                "update",
                "resource",
                "/apis/devplace.io/v1alpha1/namespaces/default/instances/x",
                "Instance",
                "instances",
                "default",
                "x",
                dry_run=True,
            ),
        ),
        (
            "PUT",
            "/api/v1/namespaces/default/pods/p/status",
            "",
            Action(
                "update",
                "resource",
                "/api/v1/namespaces/default/pods/p/status",
                "Pod",
                "pods",
                "default",
                "p",
                "status",
            ),
        ),
        (
            "DELETE",
            "/apis/akri.sh/v0/namespaces/default/instances",
            "",
            Action(
                "deletecollection",
                "resource",
                "/apis/akri.sh/v0/namespaces/default/instances",
                "Instance",
                "instances",
                "default",
            ),
        ),
        ("PATCH", "/api/v1/nodes/n", "", Action("patch", "resource", "/api/v1/nodes/n", "Node", "nodes", None, "n")),
        (
            "GET",
            "/api/v1/namespaces/default",
            "",
            Action("get", "resource", "/api/v1/namespaces/default", "Namespace", "namespaces", None, "default"),
        ),
        ("GET", "/api/v1/widgets", "", Action("list", "resource", "/api/v1/widgets", None, "widgets")),
        ("GET", "/store/revision", "", Action("get", "store", "/store/revision", name="revision")),
        ("GET", "/store/watch", "kind=Pod", Action("watch", "store", "/store/watch", name="watch")),
        ("POST", "/store/compact", "", Action("create", "store", "/store/compact", name="compact")),
        ("POST", "/v2/projects", "", Action("create", "fleet", "/v2/projects")),
        ("GET", "/v2/projects", "", Action("get", "fleet", "/v2/projects")),
        ("GET", "/elsewhere", "", Action("get", "other", "/elsewhere")),
    ],
)
def test_requests_are_read_as_actions(method: str, path: str, query: str, expected: Action) -> None:
    assert authz.action_of(method, path, query) == expected


# -- requests ---------------------------------------------------------------------------------------------------------


def act(method: str, path: str, query: str = "") -> Action:
    return authz.action_of(method, path, query)


INSTANCES = "/apis/devplace.io/v1alpha1/namespaces/default/instances"
CONFIGURATIONS = "/apis/devplace.io/v1alpha1/namespaces/default/configurations"
SECRET = ("Secret", "default", "cam-password")


@pytest.mark.parametrize(
    ("role", "action", "rule"),
    [
        # everyone: public paths and discovery (discovery only for authenticated identities, which these are)
        (NOBODY, act("GET", "/healthz"), None),
        (NOBODY, act("GET", "/apis"), None),
        (NOBODY, act("GET", "/api/v1/nodes"), "no-role"),
        (NOBODY, act("POST", "/api/v1/nodes"), "no-role"),
        (NOBODY, act("GET", "/v2/projects"), "no-role"),
        # admin: anything
        (ADMIN, act("POST", "/store/compact"), None),
        (ADMIN, act("DELETE", INSTANCES), None),
        (ADMIN, act("POST", "/v2/projects"), None),
        # reader: reads, also /v2 GETs and the store's revision and watch
        (READER, act("GET", "/api/v1/secrets"), None),
        (READER, act("GET", "/api/v1/pods", "watch=true"), None),
        (READER, act("GET", "/v2/projects"), None),
        (READER, act("GET", "/store/revision"), None),
        (READER, act("GET", "/store/watch"), None),
        (READER, act("POST", INSTANCES), "reader-read-only"),
        (READER, act("PATCH", f"{INSTANCES}/x"), "reader-read-only"),
        (READER, act("DELETE", "/api/v1/nodes/n"), "reader-read-only"),
        (READER, act("POST", "/v2/projects"), "reader-read-only"),
        (READER, act("POST", "/store/compact"), "reader-read-only"),
        # node: the store's revision only
        (A, act("GET", "/store/revision"), None),
        (A, act("GET", "/store/watch"), "store-admin-only"),
        (A, act("POST", "/store/compact"), "store-admin-only"),
        (A, act("GET", "/v2/projects"), "node-no-fleet"),
        (A, act("GET", "/elsewhere"), "node-kinds"),
        # node reads
        (A, act("GET", CONFIGURATIONS, "watch=1"), None),
        (A, act("GET", "/apis/devplace.io/v1alpha1/instances"), None),
        (A, act("GET", "/api/v1/nodes/node-b"), None),
        (A, act("GET", "/api/v1/services"), "node-kinds"),
        (A, act("GET", "/apis/devplace.io/v1alpha1/resourceclasses"), "node-kinds"),
        (A, act("GET", "/api/v1/widgets"), "node-kinds"),
        (A, act("GET", "/api/v1/pods", "fieldSelector=spec.nodeName%3Dnode-a"), None),
        (A, act("GET", "/api/v1/pods", "watch=1&fieldSelector=status.phase%3DRunning,spec.nodeName%3D%3Dnode-a"), None),
        (A, act("GET", "/api/v1/namespaces/default/pods/p"), None),  # the object decides (admit "get")
        (A, act("GET", "/api/v1/pods"), "node-own-pods"),
        (A, act("GET", "/api/v1/pods", "fieldSelector=spec.nodeName%3Dnode-b"), "node-own-pods"),
        (A, act("GET", "/api/v1/pods", "fieldSelector=spec.nodeName!%3Dnode-a"), "node-own-pods"),
        (A, act("GET", "/api/v1/namespaces/default/secrets/cam-password"), None),
        (A, act("GET", "/api/v1/namespaces/default/secrets", "fieldSelector=metadata.name%3Dcam-password"), None),
        (
            A,
            act("GET", "/api/v1/namespaces/default/secrets", "watch=1&fieldSelector=metadata.name%3Dcam-password"),
            None,
        ),
        (A, act("GET", "/api/v1/namespaces/default/secrets/other"), "node-referenced-sources"),
        (A, act("GET", "/api/v1/namespaces/default/configmaps/cam-password"), "node-referenced-sources"),
        (A, act("GET", "/api/v1/namespaces/kube-system/secrets/cam-password"), "node-referenced-sources"),
        (A, act("GET", "/api/v1/namespaces/default/secrets"), "node-referenced-sources"),
        (A, act("GET", "/api/v1/secrets", "fieldSelector=metadata.name%3Dcam-password"), "node-referenced-sources"),
        # node writes: allowed here, the objects decide (admit)
        (A, act("POST", INSTANCES), None),
        (A, act("PUT", f"{INSTANCES}/x"), None),
        (A, act("PATCH", f"{INSTANCES}/x"), None),
        (A, act("DELETE", f"{INSTANCES}/x"), None),
        (A, act("PUT", f"{CONFIGURATIONS}/cams"), None),
        (A, act("PUT", f"{CONFIGURATIONS}/cams/status"), None),
        (A, act("POST", "/api/v1/nodes"), None),
        (A, act("PUT", "/api/v1/nodes/node-a/status"), None),
        (A, act("PUT", "/api/v1/namespaces/default/pods/p/status"), None),
        (A, act("PATCH", "/api/v1/namespaces/default/pods/p"), None),
        # node writes refused outright
        (A, act("PUT", f"{INSTANCES}/x", "dryRun=All"), "node-no-dry-run"),
        (A, act("POST", INSTANCES, "dryRun=All"), "node-no-dry-run"),
        (A, act("DELETE", INSTANCES), "node-kinds"),
        (A, act("PUT", f"{INSTANCES}/x/status"), "node-kinds"),
        (A, act("PUT", "/api/v1/nodes/node-b"), "node-own-node"),
        (A, act("PATCH", "/api/v1/nodes/node-b/status"), "node-own-node"),
        (A, act("DELETE", "/api/v1/nodes/node-b"), "node-own-node"),
        (A, act("DELETE", "/api/v1/nodes"), "node-kinds"),
        (A, act("POST", CONFIGURATIONS), "node-configuration-conditions"),
        (A, act("DELETE", f"{CONFIGURATIONS}/cams"), "node-configuration-conditions"),
        (A, act("POST", "/api/v1/namespaces/default/pods"), "node-pod-status"),
        (A, act("DELETE", "/api/v1/namespaces/default/pods/p"), "node-pod-status"),
        (A, act("POST", "/api/v1/namespaces/default/secrets"), "node-kinds"),
        (A, act("PUT", "/api/v1/namespaces/default/secrets/cam-password"), "node-kinds"),
        (A, act("POST", "/apis/apps/v1/namespaces/default/deployments"), "node-kinds"),
        (A, act("PUT", "/apis/apps/v1/namespaces/default/deployments/d/scale"), "node-kinds"),
    ],
)
def test_requests_are_authorized_by_role(role: Role, action: Action, rule: str | None) -> None:
    decision = authz.authorize(role, action, frozenset({SECRET}))
    if rule is None:
        assert decision == Allowed(), decision
    else:
        assert isinstance(decision, Denied), decision
        assert decision.rule == rule, decision


def test_only_a_node_reading_configmaps_or_secrets_needs_the_referenced_sources() -> None:
    secrets = act("GET", "/api/v1/namespaces/default/secrets/x")
    assert authz.needs_sources(A, secrets)
    assert authz.needs_sources(A, act("GET", "/api/v1/namespaces/default/configmaps", "watch=1"))
    assert not authz.needs_sources(ADMIN, secrets)
    assert not authz.needs_sources(A, act("GET", "/api/v1/pods"))
    assert not authz.needs_sources(A, act("PUT", "/api/v1/namespaces/default/secrets/x"))


def test_a_refusal_message_names_the_user_the_object_and_the_rule() -> None:
    denied = Denied("node-instance-slots", "slot x-0 is held by node-b")
    message = authz.forbidden_message(Identity("system:node:node-a"), "update", "Instance default/x", denied)
    assert message == (
        'Instance default/x is forbidden: User "system:node:node-a" cannot update it: rule node-instance-slots: '
        "slot x-0 is held by node-b"
    )


# -- objects: the agent's and the kubelet's own writes are admitted ---------------------------------------------------


def configuration(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": "cams", "namespace": "default", "uid": "u-1", "resourceVersion": "3"},
        "spec": {"discoveryHandler": {"name": "sim", "discoveryDetails": ""}, "capacity": 2, **spec},
    }


def stored(obj: dict[str, Any], rv: int = 7) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].update(resourceVersion=str(rv), uid="i-1", generation=1, creationTimestamp="2026-01-01T00:00:00Z")
    return out


def new_instance(node: str = "node-a", shared: bool = True) -> dict[str, Any]:
    return instances.new_instance(configuration(), Device("cam-1", {"ip": "10.0.0.1"}, shared), node)


def instance(nodes: list[str], usage: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    obj = stored(new_instance(nodes[0] if nodes else "node-a"))
    obj["spec"]["nodes"] = list(nodes)
    if usage is not None:
        name = obj["metadata"]["name"]
        obj["spec"]["deviceUsage"] = {f"{name}-{i}": holder for i, holder in usage.items()}
    obj["metadata"].update(meta)
    return obj


def usage_of(obj: dict[str, Any]) -> slots.Usage:
    return slots.Usage.read(obj["metadata"]["name"], int(obj["spec"]["capacity"]), obj["spec"]["deviceUsage"])


def with_usage(obj: dict[str, Any], usage: slots.Usage) -> dict[str, Any]:
    return {**obj, "spec": {**obj["spec"], "deviceUsage": usage.to_wire()}}


def admitted(role: Role, op: authz.Op, kind: str, before: Any, after: Any, cfg: Any = None) -> bool:
    return authz.admit(role, op, kind, before, after, configuration=cfg) == Allowed()


def test_the_agent_creating_an_instance_it_sees_is_admitted() -> None:
    assert admitted(A, "create", "Instance", None, new_instance(), stored(configuration()))


def test_the_agent_joining_leaving_and_marking_offline_is_admitted() -> None:
    theirs = instance(["node-b"])
    joined = instances.joined(theirs, "node-a")
    assert admitted(A, "update", "Instance", theirs, joined)
    both = instance(["node-b", "node-a"])
    left = instances.left(both, "node-a", NOW, configuration_gone=False)
    assert isinstance(left, dict)
    assert admitted(A, "update", "Instance", both, left)
    last = instance(["node-a"])
    gone = instances.left(last, "node-a", NOW, configuration_gone=False)  # shared: stays, stamped offline
    assert isinstance(gone, dict)
    assert admitted(A, "update", "Instance", last, gone)
    nobody = instance([])
    marked = instances.marked_offline(nobody, NOW)
    assert marked is not None
    assert admitted(A, "update", "Instance", nobody, marked)
    assert admitted(A, "update", "Instance", gone, instances.joined(gone, "node-a"))


def test_the_agent_deleting_an_instance_nobody_else_lists_is_admitted() -> None:
    assert admitted(A, "delete", "Instance", instance(["node-a"]), None)
    assert admitted(A, "delete", "Instance", instance([]), None)


def test_the_agent_claiming_and_releasing_its_slots_is_admitted() -> None:
    before = instance(["node-a", "node-b"], {0: "", 1: "node-b"})
    usage = usage_of(before)
    claim = slots.claim_slots(usage, [f"{before['metadata']['name']}-0"], "node-a", visible=True)
    assert isinstance(claim, slots.Claim)
    claimed = with_usage(before, claim.usage)
    assert admitted(A, "update", "Instance", before, claimed)
    released = slots.release_slot(claim.usage, claim.slots[0], slots.IL("node-a"))
    assert released is not None
    assert admitted(A, "update", "Instance", claimed, with_usage(claimed, released))
    cl = slots.claim_vdevs(usage, [before["metadata"]["name"]], "node-a", visible=True)
    assert isinstance(cl, slots.Claim)
    assert admitted(A, "update", "Instance", before, with_usage(before, cl.usage))


def test_the_agent_following_the_configuration_capacity_is_admitted() -> None:
    before = instance(["node-a"], {0: "node-a", 1: "", 2: ""})
    before["spec"]["capacity"] = 3
    shrunk = instances.synced(before, "node-a", 1, {"RES": "720p"})
    assert shrunk is not None
    assert admitted(A, "update", "Instance", before, shrunk, stored(configuration(capacity=1)))
    grown = instances.synced(before, "node-a", 5, {})
    assert grown is not None
    assert admitted(A, "update", "Instance", before, grown, stored(configuration(capacity=5)))
    shared = instance(["node-b", "node-a"], {0: "node-b", 1: ""})  # a shared Instance other nodes list too
    resized = instances.synced(shared, "node-a", 4, {})
    assert resized is not None
    assert admitted(A, "update", "Instance", shared, resized, stored(configuration(capacity=4)))


def test_the_agent_writing_its_own_conditions_is_admitted() -> None:
    cfg = stored(configuration())
    theirs = conditions.with_condition(cfg, "node-b", conditions.Failure("X", "b failed"), "2026-01-01T00:00:00Z")
    assert theirs is not None
    mine = conditions.with_condition(theirs, "node-a", conditions.Failure("Y", "a failed"), "2026-01-01T00:00:01Z")
    assert mine is not None
    assert admitted(A, "update", "Configuration", theirs, mine)
    cleared = conditions.with_condition(mine, "node-a", None, "2026-01-01T00:00:02Z")
    assert admitted(A, "update", "Configuration", mine, cleared)
    node = stored(sim_nodes.new_node("node-a", {}, {}, "2026-01-01T00:00:00Z"))
    marked = conditions.with_node_condition(
        node, conditions.KUBELET_MISSING, conditions.Failure("KubeletSocketMissing", "gone"), "2026-01-01T00:00:03Z"
    )
    assert admitted(A, "update", "Node", node, marked)


def test_the_kubelet_registering_its_node_and_writing_pod_status_is_admitted() -> None:
    node = sim_nodes.new_node("node-a", {"devplace.io/cams": 2}, {"devplace.io/cams": 2}, "2026-01-01T00:00:00Z")
    assert admitted(A, "create", "Node", None, node)
    grown = sim_nodes.with_extended_resources(stored(node), {"devplace.io/cams": 3}, {"devplace.io/cams": 3})
    assert admitted(A, "update", "Node", stored(node), grown)
    pod = stored(_pod("node-a"))
    assert admitted(A, "get", "Pod", pod, None)
    assert admitted(A, "update", "Pod", pod, {**pod, "status": {"phase": "Running"}})


def _pod(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"app": "x"}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x"}]},
        "status": {"phase": "Pending"},
    }


# -- objects: every refusal -------------------------------------------------------------------------------------------


def _changed(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    *parents, last = path.split(".")
    node = out
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return out


MINE = instance(["node-a", "node-b"], {0: "node-a", 1: "node-b"})
NAME = MINE["metadata"]["name"]


@pytest.mark.parametrize(
    ("op", "kind", "before", "after", "rule"),
    [
        ("create", "Node", None, sim_nodes.new_node("node-b", {}, {}, "t"), "node-own-node"),
        ("update", "Node", stored(sim_nodes.new_node("node-b", {}, {}, "t")), None, "node-own-node"),
        ("delete", "Node", stored(sim_nodes.new_node("node-b", {}, {}, "t")), None, "node-own-node"),
        ("get", "Pod", stored(_pod("node-b")), None, "node-own-pods"),
        ("update", "Pod", stored(_pod("node-b")), stored(_pod("node-b")), "node-own-pods"),
        ("update", "Pod", stored(_pod("")), _changed(stored(_pod("")), "spec.nodeName", "node-a"), "node-own-pods"),
        (
            "update",
            "Pod",
            stored(_pod("node-a")),
            _changed(stored(_pod("node-a")), "spec.nodeName", "node-b"),
            "node-pod-status",
        ),
        (
            "update",
            "Pod",
            stored(_pod("node-a")),
            _changed(stored(_pod("node-a")), "metadata.labels", {}),
            "node-pod-status",
        ),
        ("create", "Pod", None, _pod("node-a"), "node-kinds"),
        ("delete", "Pod", stored(_pod("node-a")), None, "node-kinds"),
        ("create", "Configuration", None, configuration(), "node-kinds"),
        ("delete", "Configuration", stored(configuration()), None, "node-kinds"),
        (
            "update",
            "Configuration",
            stored(configuration()),
            _changed(stored(configuration()), "spec.capacity", 9),
            "node-configuration-conditions",
        ),
        (
            "update",
            "Configuration",
            _changed(stored(configuration()), "status.conditions", [{"type": "DiscoveryFailed", "node": "node-b"}]),
            _changed(stored(configuration()), "status.conditions", []),
            "node-configuration-conditions",
        ),
        (
            "update",
            "Configuration",
            stored(configuration()),
            _changed(stored(configuration()), "status.conditions", [{"type": "DiscoveryFailed", "node": "node-b"}]),
            "node-configuration-conditions",
        ),
        (
            "update",
            "Configuration",
            stored(configuration()),
            _changed(stored(configuration()), "status.brokers", 3),
            "node-configuration-conditions",
        ),
        ("create", "Instance", None, _changed(new_instance(), "spec.nodes", ["node-b"]), "node-instance-create"),
        (
            "create",
            "Instance",
            None,
            _changed(new_instance(), "spec.nodes", ["node-a", "node-b"]),
            "node-instance-create",
        ),
        ("create", "Instance", None, instance(["node-a"], {0: "node-a", 1: ""}), "node-instance-create"),
        ("update", "Instance", MINE, _changed(MINE, "spec.nodes", ["node-a"]), "node-instance-nodes"),
        (
            "update",
            "Instance",
            MINE,
            _changed(MINE, "spec.nodes", ["node-a", "node-b", "node-c"]),
            "node-instance-nodes",
        ),
        (
            "update",
            "Instance",
            MINE,
            _changed(MINE, "spec.nodes", ["node-a", "node-b", "node-a"]),
            "node-instance-nodes",
        ),
        (
            "update",
            "Instance",
            MINE,
            _changed(MINE, "spec.deviceUsage", {f"{NAME}-0": "node-a", f"{NAME}-1": "node-a"}),
            "node-instance-slots",
        ),
        (
            "update",
            "Instance",
            MINE,
            _changed(MINE, "spec.deviceUsage", {f"{NAME}-0": "node-a", f"{NAME}-1": ""}),
            "node-instance-slots",
        ),
        (
            "update",
            "Instance",
            MINE,
            _changed(MINE, "spec.deviceUsage", {f"{NAME}-0": "node-b", f"{NAME}-1": "node-b"}),
            "node-instance-slots",
        ),
        (
            "update",
            "Instance",
            MINE,
            _changed(MINE, "spec.deviceUsage", {f"{NAME}-0": "node-a", f"{NAME}-1": "C:vdev:node-b"}),
            "node-instance-slots",
        ),
        (
            "update",
            "Instance",
            MINE,
            _changed(MINE, "spec.deviceUsage", {f"{NAME}-0": "node-a"}),  # removing another node's slot
            "node-instance-slots",
        ),
        (
            "update",
            "Instance",
            instance(["node-b"], {0: "", 1: ""}),
            _changed(instance(["node-b"], {0: "", 1: ""}), "spec.deviceUsage", {f"{NAME}-0": ""}),
            "node-instance-slots",  # a resize by a node that is not listed
        ),
        (
            "update",
            "Instance",
            instance(["node-b"]),
            _changed(instance(["node-b"]), "spec.capacity", 5),
            "node-instance-fields",
        ),
        (
            "update",
            "Instance",
            instance(["node-b"]),
            _changed(instance(["node-b"]), "spec.brokerProperties", {"ip": "6.6.6.6"}),
            "node-instance-fields",
        ),
        ("update", "Instance", MINE, _changed(MINE, "spec.configurationName", "other"), "node-instance-fields"),
        ("update", "Instance", MINE, _changed(MINE, "spec.shared", False), "node-instance-fields"),
        ("update", "Instance", MINE, _changed(MINE, "metadata.labels", {"stolen": "yes"}), "node-instance-fields"),
        ("update", "Instance", MINE, _changed(MINE, "metadata.ownerReferences", []), "node-instance-fields"),
        ("update", "Instance", MINE, _changed(MINE, "status", {"x": 1}), "node-instance-fields"),
        ("delete", "Instance", MINE, None, "node-instance-delete"),
        ("delete", "Instance", instance(["node-b"]), None, "node-instance-delete"),
        ("update", "Service", {"kind": "Service"}, {"kind": "Service"}, "node-kinds"),
        ("create", "Secret", None, {"kind": "Secret"}, "node-kinds"),
    ],
)
def test_a_node_writing_beyond_its_share_is_refused_naming_the_rule(
    op: authz.Op, kind: str, before: Any, after: Any, rule: str
) -> None:
    decision = authz.admit(A, op, kind, before, after)
    assert isinstance(decision, Denied), decision
    assert decision.rule == rule, decision


# -- objects: an Instance's size is its Configuration's; a node claims only where it is listed -----------------------


def _claimed(obj: dict[str, Any], slot: int, holder: str = "node-a") -> dict[str, Any]:
    return _changed(obj, f"spec.deviceUsage.{obj['metadata']['name']}-{slot}", holder)


def _sized(obj: dict[str, Any], capacity: int) -> dict[str, Any]:
    """`obj` resized to `capacity` exactly as the agent's capacity sync resizes (free slots added or dropped)."""
    out = instances.synced(obj, "node-a", capacity, {})
    assert out is not None
    return out


SHARED = instance(["node-b", "node-a"], {0: "", 1: "node-b"})  # capacity 2, as configuration() says
THEIRS = instance(["node-b"], {0: "", 1: "node-b"})
CFG = stored(configuration())


@pytest.mark.parametrize(
    ("op", "before", "after", "cfg", "says"),
    [
        ("update", SHARED, _sized(SHARED, 1024), CFG, "its Configuration's capacity (2), not 1024"),
        ("update", SHARED, _sized(SHARED, 3), CFG, "its Configuration's capacity (2), not 3"),
        ("update", SHARED, _sized(SHARED, 1), CFG, "its Configuration's capacity (2), not 1"),
        ("update", SHARED, _sized(SHARED, 3), None, "default/cams does not exist"),
        ("update", SHARED, _changed(SHARED, "spec.capacity", 3), CFG, "not 3"),  # capacity without slots
        (
            "update",
            SHARED,
            _changed(SHARED, "spec.deviceUsage", {f"{NAME}-1": "node-b"}),  # the free slot dropped: a shrink
            CFG,
            f"free slot {NAME}-0 is below capacity 2",
        ),
        ("create", None, _sized(new_instance(), 1024), CFG, "its Configuration's capacity (2), not 1024"),
        ("create", None, new_instance(), stored(configuration(capacity=3)), "capacity (3), not 2"),
        ("create", None, new_instance(), None, "default/cams does not exist"),
    ],
)
def test_a_node_sizing_an_instance_other_than_its_configuration_is_refused(
    op: authz.Op, before: Any, after: Any, cfg: Any, says: str
) -> None:
    decision = authz.admit(A, op, "Instance", before, after, configuration=cfg)
    assert isinstance(decision, Denied), decision
    assert decision.rule == "node-instance-capacity", decision
    assert says in decision.reason, decision


@pytest.mark.parametrize(
    ("before", "after", "says"),
    [
        (THEIRS, _claimed(instances.joined(THEIRS, "node-a") or {}, 0), "node-a does not list it yet"),
        (SHARED, _claimed(_changed(SHARED, "spec.nodes", ["node-b"]), 0), "node-a leaves it in the same write"),
        (THEIRS, _claimed(THEIRS, 0), "node-a does not list it yet"),
    ],
)
def test_a_node_claiming_a_slot_of_an_instance_it_is_not_listed_on_is_refused(
    before: dict[str, Any], after: dict[str, Any], says: str
) -> None:
    decision = authz.admit(A, "update", "Instance", before, after, configuration=CFG)
    assert isinstance(decision, Denied), decision
    assert (decision.rule, says in decision.reason) == ("node-instance-claim", True), decision


def test_joining_then_claiming_in_two_writes_is_admitted_and_releasing_after_leaving_too() -> None:
    joined = instances.joined(THEIRS, "node-a")
    assert joined is not None
    assert admitted(A, "update", "Instance", THEIRS, joined)
    claimed = _claimed(joined, 0)
    assert admitted(A, "update", "Instance", joined, claimed)
    left = _changed(claimed, "spec.nodes", ["node-b"])
    assert admitted(A, "update", "Instance", claimed, left)
    assert admitted(A, "update", "Instance", left, _claimed(left, 0, ""))  # its slot stays its to release


def test_only_a_node_creating_or_resizing_an_instance_needs_its_configuration() -> None:
    assert authz.needs_configuration(A, "create", "Instance", None, new_instance())
    assert authz.needs_configuration(A, "update", "Instance", SHARED, _sized(SHARED, 3))
    assert not authz.needs_configuration(A, "update", "Instance", SHARED, _claimed(SHARED, 0))
    assert not authz.needs_configuration(A, "update", "Instance", SHARED, _changed(SHARED, "spec.nodes", ["node-b"]))
    assert not authz.needs_configuration(ADMIN, "update", "Instance", SHARED, _sized(SHARED, 3))
    assert not authz.needs_configuration(A, "update", "Configuration", CFG, CFG)


def test_server_managed_metadata_is_not_a_node_change() -> None:
    after = copy.deepcopy(MINE)
    after["metadata"].update(resourceVersion="99", generation=7, managedFields=[{"manager": "agent"}])
    assert admitted(A, "update", "Instance", MINE, after)


@pytest.mark.parametrize("role", [READER, NOBODY])
@pytest.mark.parametrize("op", ["create", "update", "delete"])
def test_readers_and_identities_without_a_role_write_nothing(role: Role, op: authz.Op) -> None:
    decision = authz.admit(role, op, "Instance", MINE if op != "create" else None, MINE if op != "delete" else None)
    assert isinstance(decision, Denied)
    assert decision.rule == ("reader-read-only" if role == READER else "no-role")
    assert authz.admit(role, "get", "Instance", MINE, None) == Allowed()


def test_an_admin_may_do_anything() -> None:
    assert authz.admit(ADMIN, "update", "Instance", MINE, _changed(MINE, "spec.nodes", [])) == Allowed()
    assert authz.admit(ADMIN, "delete", "Service", {"kind": "Service"}, None) == Allowed()


def test_the_offline_annotation_is_the_agents() -> None:
    assert authz.OFFLINE_SINCE == instances.OFFLINE_SINCE


def test_the_agent_reads_sources_as_the_node_rule_expects() -> None:
    """The agent reads a ConfigMap or Secret in a namespace by `metadata.name` (`agent.caches.Sources`), which is
    what `node-referenced-sources` allows; and `agent.properties.references` is what the server asks."""
    assert tuple(sorted(authz.SOURCE_KINDS)) == agent_properties.SOURCE_KINDS


# -- ResourceSlices: a node writes only its own (Kubernetes' NodeRestriction) -----------------------------------------

SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def _slice(node: str | None) -> dict[str, Any]:
    where: dict[str, Any] = {"nodeName": node} if node else {"allNodes": True}
    return {"kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": {"driver": "devplace.io", **where}}


@pytest.mark.parametrize(
    ("method", "query", "rule"),
    [
        ("GET", "", None),
        ("GET", "fieldSelector=spec.nodeName%3Dnode-b", None),
        ("POST", "", None),  # the object decides (admit)
        ("POST", "dryRun=All", "node-no-dry-run"),
        ("DELETE", "", "node-kinds"),  # deletecollection
    ],
)
def test_a_node_reads_resource_slices_and_writes_them_one_by_one(method: str, query: str, rule: str | None) -> None:
    decision = authz.authorize(A, act(method, SLICES, query))
    if rule is None:
        assert decision == Allowed(), decision
    else:
        assert isinstance(decision, Denied), decision
        assert decision.rule == rule, decision


@pytest.mark.parametrize(
    ("op", "before", "after", "allowed"),
    [
        ("create", None, _slice("node-a"), True),
        ("update", _slice("node-a"), _slice("node-a"), True),
        ("delete", _slice("node-a"), None, True),
        ("create", None, _slice("node-b"), False),
        ("update", _slice("node-b"), _slice("node-b"), False),
        ("update", _slice("node-a"), _slice("node-b"), False),
        ("delete", _slice("node-b"), None, False),
        ("create", None, _slice(None), False),  # a nodeSelector or allNodes slice is the controller's
    ],
)
def test_a_node_writes_only_resource_slices_with_its_own_node_name(
    op: authz.Op, before: Any, after: Any, allowed: bool
) -> None:
    decision = authz.admit(A, op, "ResourceSlice", before, after)
    if allowed:
        assert decision == Allowed(), decision
    else:
        assert isinstance(decision, Denied), decision
        assert decision.rule == "node-own-slices", decision


# -- ResourceClaims: a node reads the claims allocated for it, one at a time (node-own-claims) -----------------------


def test_a_node_reads_a_claim_allocated_for_it_and_no_other_and_lists_none() -> None:
    node = authz.Role("node", "node-a")

    def claim(selector: dict[str, Any] | None, allocated: bool = True) -> dict[str, Any]:
        allocation: dict[str, Any] = {"devices": {"results": []}}
        if selector is not None:
            allocation["nodeSelector"] = selector
        return {"kind": "ResourceClaim", "status": {"allocation": allocation} if allocated else {}}

    def on(name: str) -> dict[str, Any]:
        return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]}

    assert authz.admit(node, "get", "ResourceClaim", claim(on("node-a")), None) == authz.ALLOWED
    assert authz.admit(node, "get", "ResourceClaim", claim(None), None) == authz.ALLOWED  # any node may use it
    refused = authz.admit(node, "get", "ResourceClaim", claim(on("node-b")), None)
    assert isinstance(refused, authz.Denied)
    assert refused.rule == "node-own-claims"
    unallocated = authz.admit(node, "get", "ResourceClaim", claim(on("node-a"), allocated=False), None)
    assert isinstance(unallocated, authz.Denied)
    assert unallocated.rule == "node-own-claims"
    listing = authz.authorize(
        node, authz.action_of("GET", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims")
    )
    assert isinstance(listing, authz.Denied)
    assert listing.rule == "node-own-claims"
    one = authz.authorize(node, authz.action_of("GET", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c"))
    assert one == authz.ALLOWED
