"""EMCO's status query and its readiness rules (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from devplace import errors
from devplace.placement._reports import StatusQuery, parse_status_query, readiness


@pytest.mark.parametrize(
    ("params", "query"),
    [
        ({}, StatusQuery()),
        ({"type": ["cluster"]}, StatusQuery(kind="cluster")),
        ({"type": ["cluster"], "status": ["deployed"]}, StatusQuery(kind="deployed")),  # status wins over type
        ({"status": ["ready"], "output": ["summary"]}, StatusQuery(kind="ready", output="summary")),
        ({"apps": [""]}, StatusQuery(list_apps=True)),
        ({"clusters": [""], "app": ["a", "b"]}, StatusQuery(list_clusters=True, apps=("a", "b"))),
        ({"resources": [""], "cluster": ["p+c"]}, StatusQuery(list_resources=True, clusters=(("p", "c"),))),
        ({"resource": ["web"], "instance": ["3"]}, StatusQuery(resources=("web",), instance="3")),
        ({"unknown": ["x"]}, StatusQuery()),  # EMCO ignores parameters it does not know
    ],
)
def test_emco_status_parameters_are_read_as_emco_reads_them(params: dict[str, list[str]], query: StatusQuery) -> None:
    assert parse_status_query(params) == query


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"type": ["deployed"]}, "type"),
        ({"status": ["rsync"]}, "status"),
        ({"output": ["full"]}, "output"),
        ({"cluster": ["c"]}, "cluster"),
        ({"cluster": ["p+c+d"]}, "cluster"),
        ({"app": ["bad name"]}, "app"),
        ({"resource": ["-x"]}, "resource"),
        ({"instance": [""]}, "instance"),
    ],
)
def test_an_unknown_status_value_is_refused_naming_the_parameter(params: dict[str, list[str]], field: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        parse_status_query(params)
    assert info.value.fields[0].path == field


@pytest.mark.parametrize(
    ("kind", "obj", "ready"),
    [
        ("Deployment", None, "NotPresent"),
        ("Deployment", "unreachable", "NotReady"),
        ("Deployment", {"spec": {"replicas": 2}, "status": {"readyReplicas": 2}}, "Ready"),
        ("Deployment", {"spec": {"replicas": 2}, "status": {"readyReplicas": 1}}, "NotReady"),
        ("StatefulSet", {"spec": {}, "status": {}}, "NotReady"),  # one replica by default
        ("DaemonSet", {"status": {"desiredNumberScheduled": 3, "numberReady": 3}}, "Ready"),
        ("Job", {"spec": {"completions": 2}, "status": {"succeeded": 1}}, "NotReady"),
        ("Pod", {"status": {"phase": "Running"}}, "Ready"),
        ("Pod", {"status": {"phase": "Pending"}}, "NotReady"),
        ("ConfigMap", {"data": {}}, "Ready"),
    ],
)
def test_readiness_follows_each_kinds_status(kind: str, obj: Any, ready: str) -> None:
    assert readiness(kind, obj) == ready
