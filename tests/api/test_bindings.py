"""`api.bound_pod`: what pods/binding does to a Pod, and what it refuses (changing nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from devplace import errors
from devplace.api import binding, bound_pod

NOW = "2026-11-26T18:00:00Z"


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u-1", "annotations": {"keep": "me"}},
        "spec": {"containers": [{"name": "c", "image": "i"}], **spec},
    }


def test_a_binding_sets_the_node_merges_annotations_and_marks_the_pod_scheduled() -> None:
    out = bound_pod(pod(), binding("default", "p", "node-a", {"scheduler.alpha.kubernetes.io/x": "1"}), NOW)
    assert out["spec"]["nodeName"] == "node-a"
    assert out["metadata"]["annotations"] == {"keep": "me", "scheduler.alpha.kubernetes.io/x": "1"}
    assert out["status"]["conditions"] == [{"type": "PodScheduled", "status": "True", "lastTransitionTime": NOW}]


def test_a_pod_already_bound_is_a_conflict_naming_its_node() -> None:
    with pytest.raises(errors.Conflict, match='already assigned to node "node-a"'):
        bound_pod(pod(nodeName="node-a"), binding("default", "p", "node-a"), NOW)


def test_a_binding_for_another_uid_or_a_pod_being_deleted_is_a_conflict() -> None:
    body = binding("default", "p", "node-a")
    body["metadata"]["uid"] = "u-2"
    with pytest.raises(errors.Conflict, match="uid u-2"):
        bound_pod(pod(), body, NOW)
    deleting = pod()
    deleting["metadata"]["deletionTimestamp"] = NOW
    with pytest.raises(errors.Conflict, match="being deleted"):
        bound_pod(deleting, binding("default", "p", "node-a"), NOW)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"target": {"kind": "Node"}}, "target.name"),
        ({"target": {"kind": "Service", "name": "x"}}, "target.kind"),
        ({}, "target"),
        ({"metadata": [], "target": {"name": "n"}}, "metadata"),
        ({"metadata": {"annotations": {"a": 1}}, "target": {"name": "n"}}, "metadata.annotations"),
    ],
)
def test_a_malformed_binding_is_refused_naming_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(errors.Invalid) as refused:
        bound_pod(pod(), body, NOW)
    assert [f.path for f in refused.value.fields] == [field]
