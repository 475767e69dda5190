"""Columns: one definition for `devplace get` and the server's Tables; kubectl's ages, order and cells."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace.api import _registry as registry
from devplace.cli import _output as output
from devplace.kubeapi import _tables as tables

NOW = 1_767_225_600.0 + 3600  # an hour after 2026-01-01T00:00:00Z
CREATED = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (330, "5m30s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 600, "3h10m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (52 * 3600, "2d4h"),
        (8 * 86400, "8d"),
        (730 * 86400, "2y"),
        (740 * 86400, "2y10d"),
        (9 * 365 * 86400, "9y"),
        (-1, "0s"),
        (-5, "<invalid>"),
    ],
)
def test_age_reads_like_kubectls_human_duration(seconds: float, text: str) -> None:
    assert tables.age(seconds) == text


def headers(kind: str, *, wide: bool = True) -> list[str]:
    return [c.header for c in tables.columns(kind, wide=wide)]


@pytest.mark.parametrize(
    ("kind", "narrow", "wide"),
    [
        ("Instance", ["NAME", "CONFIG", "SHARED", "NODES", "USED/CAPACITY", "AGE"], ["CDI-NAME"]),
        ("ResourceClass", ["NAME", "ALLOCATABLE", "REQUESTED", "STRATEGY", "AGE"], ["SELECTOR"]),
        (
            "Configuration",
            ["NAME", "HANDLER", "CAPACITY", "UNIQUE", "BROKERS", "AGE"],
            ["DEVICE-KIND", "DESIRED", "RUNNING", "PENDING"],
        ),
        ("Pod", ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], ["IP", "NODE"]),
        (
            "Node",
            ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
            ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"],
        ),
        ("Deployment", ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], ["CONTAINERS", "IMAGES", "SELECTOR"]),
        ("Service", ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"], ["SELECTOR"]),
        ("Job", ["NAME", "COMPLETIONS", "DURATION", "AGE"], ["CONTAINERS", "IMAGES", "SELECTOR"]),
        ("ConfigMap", ["NAME", "DATA", "AGE"], []),
        ("Secret", ["NAME", "TYPE", "DATA", "AGE"], []),
        ("Project", ["NAME", "AGE"], []),
        ("DeviceClass", ["NAME", "AGE"], []),
        ("ResourceSlice", ["NAME", "NODE", "DRIVER", "POOL", "AGE"], []),
        ("ResourceClaim", ["NAME", "STATE", "AGE"], []),
        ("ResourceClaimTemplate", ["NAME", "AGE"], []),
    ],
)
def test_each_kind_has_kubectls_column_order_and_wide_columns_at_priority_one(
    kind: str, narrow: list[str], wide: list[str]
) -> None:
    assert headers(kind, wide=False) == narrow
    assert headers(kind) == narrow + wide
    assert [c.priority for c in tables.columns(kind)] == [0] * len(narrow) + [1] * len(wide)


@pytest.mark.parametrize(
    ("metadata", "status", "state"),
    [
        ({}, {}, "pending"),
        ({}, {"allocation": {"devices": {"results": []}}}, "allocated"),
        ({}, {"allocation": {}, "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}, "allocated,reserved"),
        ({"deletionTimestamp": "2026-01-01T00:00:00Z"}, {}, "deleted"),
        ({"deletionTimestamp": "2026-01-01T00:00:00Z"}, {"allocation": {}}, "deleted,allocated"),
    ],
)
def test_a_resource_claims_state_reads_as_kubernetes_prints_it(
    metadata: dict[str, Any], status: dict[str, Any], state: str
) -> None:
    claim = {"kind": "ResourceClaim", "metadata": {"name": "c", **metadata}, "spec": {}, "status": status}
    assert [c.value(claim, NOW) for c in tables.columns("ResourceClaim")][1] == state


def test_every_registered_kind_has_name_first_and_age_but_events_which_start_with_last_seen() -> None:
    for info in registry.kinds():
        cols = tables.columns(info.kind)
        if info.kind == "Event":  # kubectl's columns: Last Seen, Type, Reason, Object, Message
            assert [c.name for c in tables.columns("Event", wide=False)] == [
                "Last Seen",
                "Type",
                "Reason",
                "Object",
                "Message",
            ]
            continue
        assert (cols[0].name, cols[0].format) == ("Name", "name")
        assert "Age" in [c.name for c in cols]


def test_an_events_row_says_when_what_why_and_about_which_object() -> None:
    event = {
        "kind": "Event",
        "metadata": {"name": "p.1", "namespace": "default", "creationTimestamp": CREATED},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "FailedScheduling",
        "message": "0/3 nodes",
        "type": "Warning",
        "lastTimestamp": CREATED,
        "count": 4,
    }
    row = tables.table("Event", [event], now=NOW)["rows"][0]["cells"]
    assert row[:4] == ["60m", "Warning", "FailedScheduling", "pod/p"]
    assert row[6] == "0/3 nodes"
    assert row[8] == 4


def test_a_namespace_shows_its_phase() -> None:
    ns = {
        "kind": "Namespace",
        "metadata": {"name": "x", "creationTimestamp": CREATED},
        "status": {"phase": "Terminating"},
    }
    assert tables.table("Namespace", [ns], now=NOW)["rows"][0]["cells"][:2] == ["x", "Terminating"]


def instance(**spec: Any) -> dict[str, Any]:
    return {
        "kind": "Instance",
        "metadata": {"name": "cam-abc123", "namespace": "default", "creationTimestamp": CREATED},
        "spec": {"configurationName": "cam", **spec},
    }


def cells(kind: str, obj: dict[str, Any]) -> dict[str, tables.Cell]:
    return {c.header: c.value(obj, NOW) for c in tables.columns(kind)}


def test_an_instance_shows_its_configuration_nodes_and_held_slots() -> None:
    usage = {"cam-abc123-0": "node-a", "cam-abc123-1": "", "cam-abc123-2": "C:v0:node-b"}
    shown = cells("Instance", instance(shared=True, nodes=["node-a", "node-b"], capacity=3, deviceUsage=usage))
    assert shown == {
        "NAME": "cam-abc123",
        "CONFIG": "cam",
        "SHARED": True,
        "NODES": "node-a,node-b",
        "USED/CAPACITY": "2/3",
        "AGE": "60m",
        "CDI-NAME": None,
    }


def test_a_configuration_shows_its_broker_strategy_and_the_controllers_counts_when_wide() -> None:
    config = {
        "kind": "Configuration",
        "metadata": {"name": "cam"},
        "spec": {"discoveryHandler": {"name": "udev"}, "brokerSpec": {"brokerPodSpec": {}}},
        "status": {"brokers": {"desired": 3, "running": 2, "pending": 1}},
    }
    shown = cells("Configuration", config)
    assert (shown["BROKERS"], shown["CAPACITY"], shown["UNIQUE"], shown["DEVICE-KIND"]) == ("perNode", 1, True, "udev")
    assert (shown["DESIRED"], shown["RUNNING"], shown["PENDING"]) == (3, 2, 1)


def test_a_resource_class_shows_its_slots_and_selector() -> None:
    rc = {
        "kind": "ResourceClass",
        "metadata": {"name": "gpu"},
        "spec": {
            "resourceSelector": [
                {"matchExpressions": [{"key": "Kind", "operator": "In", "values": ["gpu", "npu"]}]},
                {"matchExpressions": [{"key": "memory", "operator": "GtEq", "values": ["30G"]}]},
            ]
        },
        "status": {"allocatable": "4", "requested": "1"},
    }
    shown = cells("ResourceClass", rc)
    assert (shown["ALLOCATABLE"], shown["REQUESTED"], shown["STRATEGY"]) == ("4", "1", None)
    assert shown["SELECTOR"] == "Kind In [gpu, npu] || memory GtEq 30G"


@pytest.mark.parametrize(
    ("status", "meta", "expected"),
    [
        ({}, {}, ("0/2", "Pending", 0)),
        ({"phase": "Running", "containerStatuses": [{"ready": True, "restartCount": 3, "state": {"running": {}}}]},
         {}, ("1/2", "Running", 3)),
        ({"phase": "Pending", "containerStatuses": [{"state": {"waiting": {"reason": "ImagePullBackOff"}}}]},
         {}, ("0/2", "ImagePullBackOff", 0)),
        ({"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 2}}}]},
         {}, ("0/2", "ExitCode:2", 0)),
        ({"phase": "Running"}, {"deletionTimestamp": CREATED}, ("0/2", "Terminating", 0)),
    ],
)  # fmt: skip
def test_a_pod_shows_ready_containers_status_and_restarts_as_kubectl_does(
    status: dict[str, Any], meta: dict[str, Any], expected: tuple[str, str, int]
) -> None:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p", **meta},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        "status": status,
    }
    shown = cells("Pod", pod)
    assert (shown["READY"], shown["STATUS"], shown["RESTARTS"]) == expected


def test_a_node_shows_readiness_roles_version_and_addresses() -> None:
    node = {
        "kind": "Node",
        "metadata": {"name": "n", "labels": {"node-role.kubernetes.io/control-plane": "", "x": "y"}},
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.32.0"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
        },
    }
    shown = cells("Node", node)
    assert shown["STATUS"] == "Ready,SchedulingDisabled"
    assert (shown["ROLES"], shown["VERSION"], shown["INTERNAL-IP"], shown["EXTERNAL-IP"]) == (
        "control-plane",
        "v1.32.0",
        "10.0.0.5",
        None,
    )


def test_a_deployment_and_a_service_show_kubectls_columns() -> None:
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "t", "operator": "In", "values": ["a"]}],
            },
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx:1"}, {"name": "s", "image": "envoy"}]}},
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    shown = cells("Deployment", deployment)
    assert [shown[h] for h in ("READY", "UP-TO-DATE", "AVAILABLE", "CONTAINERS", "IMAGES", "SELECTOR")] == [
        "2/3",
        3,
        2,
        "c,s",
        "nginx:1,envoy",
        "app=web,t in (a)",
    ]
    service = {
        "kind": "Service",
        "metadata": {"name": "svc"},
        "spec": {
            "type": "NodePort",
            "clusterIP": "10.96.0.9",
            "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}],
            "selector": {"app": "web"},
        },
    }
    shown = cells("Service", service)
    assert [shown[h] for h in ("TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "SELECTOR")] == [
        "NodePort",
        "10.96.0.9",
        None,
        "80:30080/TCP,53/UDP",
        "app=web",
    ]


def test_a_table_has_kubernetes_shape_and_none_reads_as_none_in_string_columns() -> None:
    obj = instance(nodes=[], capacity=2)
    obj["metadata"]["labels"] = {"a": "b"}
    table = tables.table("Instance", [obj], now=NOW, metadata={"resourceVersion": "7"})
    assert (table["kind"], table["apiVersion"], table["metadata"]) == (
        "Table",
        "meta.k8s.io/v1",
        {"resourceVersion": "7"},
    )
    names = [d["name"] for d in table["columnDefinitions"]]
    assert names == ["Name", "Config", "Shared", "Nodes", "Used/Capacity", "Age", "CDI-Name"]
    assert set(table["columnDefinitions"][0]) == {"name", "type", "format", "description", "priority"}
    (row,) = table["rows"]
    assert row["cells"] == ["cam-abc123", "cam", False, "<none>", "0/2", "60m", "<none>"]
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }


@pytest.mark.parametrize(("include", "has_object"), [("None", False), ("Object", True)])
def test_include_object_leaves_the_object_out_or_puts_it_whole_in_each_row(include: Any, has_object: bool) -> None:
    obj = instance()
    (row,) = tables.table("Instance", [obj], now=NOW, include_object=include)["rows"]
    assert ("object" in row) == has_object
    if has_object:
        assert row["object"] == obj


def test_a_table_without_definitions_keeps_its_rows() -> None:
    table = tables.table("Instance", [instance()], now=NOW, definitions=False)
    assert (table["columnDefinitions"], len(table["rows"])) == ([], 1)


def test_the_cli_prints_the_columns_the_server_serves() -> None:
    obj = instance(nodes=["node-a"], capacity=1)
    served = tables.table("Instance", [obj], now=NOW)
    wide_headers, wide_rows = output.table("Instance", [obj], namespaced=True, now=NOW, wide=True)
    assert wide_headers == ["NAMESPACE"] + [d["name"].upper() for d in served["columnDefinitions"]]
    assert wide_rows[0][1:] == [tables.cell_text(c) for c in served["rows"][0]["cells"]]


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=12,
    )
)
def test_cells_never_fail_whatever_an_object_holds(value: Any) -> None:
    for info in registry.kinds():
        obj = {"kind": info.kind, "metadata": {"name": "x", "creationTimestamp": value}, "spec": value, "status": value}
        for column in tables.columns(info.kind):
            cell = column.value(obj, NOW)
            assert cell is None or isinstance(cell, str | int | float | bool)
