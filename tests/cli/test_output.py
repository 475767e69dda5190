"""Rendering: kubectl-shaped tables, ages, describe text, watch lines; pure functions of objects and the time."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from devplace.cli import _output as output

NOW = 1_767_225_600.0 + 3600  # an hour after the fake clock's epoch (2026-01-01T00:00:00Z)


def instance(used: int = 1) -> dict[str, Any]:
    usage = {f"cam-abc123-{i}": ("node-a" if i < used else "") for i in range(3)}
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": {"name": "cam-abc123", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "configurationName": "cam",
            "shared": True,
            "nodes": ["node-a", "node-b"],
            "capacity": 3,
            "deviceUsage": usage,
        },
    }


def test_an_instance_row_shows_its_configuration_nodes_and_used_slots() -> None:
    headers, rows = output.table("Instance", [instance(used=2)], namespaced=True, now=NOW)
    assert headers == ["NAMESPACE", "NAME", "CONFIG", "SHARED", "NODES", "USED/CAPACITY", "AGE"]
    assert rows == [["default", "cam-abc123", "cam", "true", "node-a,node-b", "2/3", "60m"]]


def test_a_configuration_row_shows_handler_capacity_uniqueness_and_broker_kind() -> None:
    config = {
        "kind": "Configuration",
        "metadata": {"name": "cam", "namespace": "default"},
        "spec": {"discoveryHandler": {"name": "udev"}, "brokerSpec": {"brokerJobSpec": {}}},
    }
    headers, rows = output.table("Configuration", [config], namespaced=True, now=NOW)
    assert dict(zip(headers, rows[0], strict=True)) == {
        "NAMESPACE": "default",
        "NAME": "cam",
        "HANDLER": "udev",
        "CAPACITY": "1",
        "UNIQUE": "true",
        "BROKERS": "job",
        "AGE": "<none>",
    }


@pytest.mark.parametrize(
    ("conditions", "status"),
    [
        ([{"type": "Ready", "status": "True"}], "Ready"),
        ([{"type": "Ready", "status": "False"}], "NotReady"),
        ([], "Unknown"),
    ],
)
def test_a_node_row_shows_its_ready_condition(conditions: list[dict[str, str]], status: str) -> None:
    node = {"kind": "Node", "metadata": {"name": "n"}, "status": {"conditions": conditions}}
    headers, rows = output.table("Node", [node], namespaced=False, now=NOW)
    assert headers == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert rows[0][1] == status


def test_wide_adds_the_priority_one_columns_after_age_as_kubectl_does() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.7"},
    }
    narrow, _ = output.table("Pod", [pod], namespaced=True, now=NOW)
    headers, rows = output.table("Pod", [pod], namespaced=True, now=NOW, wide=True)
    assert narrow == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert headers == [*narrow, "IP", "NODE"]
    assert rows == [["default", "p", "0/1", "Running", "0", "<none>", "10.0.0.7", "node-a"]]


def test_a_kind_without_special_columns_gets_name_and_age() -> None:
    headers, _ = output.table("Project", [{"metadata": {"name": "p"}}], namespaced=False, now=NOW)
    assert headers == ["NAME", "AGE"]


def test_plain_table_aligns_columns_with_three_spaces_and_no_trailing_blanks() -> None:
    text = output.plain_table(["NAME", "AGE"], [["a", "1s"], ["longer-name", "20m"]])
    assert text.splitlines() == ["NAME          AGE", "a             1s", "longer-name   20m"]


def test_rich_table_has_every_header_and_row() -> None:
    table = output.rich_table(["NAME", "AGE"], [["a", "1s"], ["b", "2s"]])
    assert [c.header for c in table.columns] == ["NAME", "AGE"]
    assert table.row_count == 2


def test_json_and_yaml_round_trip_and_a_list_is_a_kubectl_list() -> None:
    obj = instance()
    assert json.loads(output.to_json(obj)) == obj
    assert yaml.safe_load(output.to_yaml(obj)) == obj
    assert json.loads(output.json_line(obj)) == obj
    assert "\n" not in output.json_line(obj)
    assert output.list_document([obj], 7) == {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": "7"},
        "items": [obj],
    }


@pytest.mark.parametrize(
    ("obj", "label"),
    [
        ({"kind": "Configuration", "metadata": {"name": "x", "namespace": "default"}}, "Configuration default/x"),
        ({"kind": "Node", "metadata": {"name": "n"}}, "Node n"),
        ({"metadata": {}}, "object <unnamed>"),
    ],
)
def test_label_of_names_an_object_like_every_cli_message(obj: dict[str, Any], label: str) -> None:
    assert output.label_of(obj) == label


def test_describe_shows_identity_then_spec_and_status_as_yaml() -> None:
    obj = instance(used=1)
    obj["metadata"].update(labels={"a": "b"}, resourceVersion="4", uid="u-1", generation=1)
    obj["status"] = {}
    text = output.describe(obj, now=NOW)
    lines = text.splitlines()
    assert lines[0].split() == ["Name:", "cam-abc123"]
    assert "Labels:           a=b" in lines
    assert "Annotations:      <none>" in lines
    assert "Created:          2026-01-01T00:00:00Z (60m ago)" in lines
    assert "Slots:            1/3 used" in lines
    assert lines[lines.index("Spec:") + 1] == "  configurationName: cam"
    assert lines[-2:] == ["Status:", "  <none>"]


def test_event_line_names_the_event_object_and_revision() -> None:
    assert output.event_line("MODIFIED", instance(), 9) == "MODIFIED  Instance default/cam-abc123  (revision 9)"
