"""The status and scale subresources as pure functions: a status write changes only status, a scale only replicas."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.kubeapi import _subresources as subresources


def deployment(wanted: Any = 2, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "uid": "u-1",
            "resourceVersion": "7",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web"},
        },
        "spec": {
            "replicas": wanted,
            "selector": {"matchLabels": {"tier": "front", "app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}},
        },
        "status": status,
    }


@pytest.mark.parametrize(
    ("kind", "served"),
    [
        ("Configuration", True),
        ("Instance", True),
        ("ResourceClass", True),
        ("Pod", True),
        ("Node", True),
        ("Deployment", True),
        ("ConfigMap", False),
        ("Secret", False),
        ("NoSuchKind", False),
    ],
)
def test_kinds_whose_model_has_a_status_serve_the_status_subresource(kind: str, served: bool) -> None:
    assert subresources.has_status(kind) is served


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)


@given(stored_status=JSON, incoming=st.dictionaries(st.sampled_from(["spec", "metadata", "status", "x"]), JSON))
def test_with_status_takes_only_the_incoming_status(stored_status: Any, incoming: dict[str, Any]) -> None:
    stored = deployment(readyReplicas=1)
    stored["status"] = stored_status
    before = copy.deepcopy(stored)
    result = subresources.with_status(stored, incoming)
    assert stored == before  # the stored object is not changed
    assert {k: v for k, v in result.items() if k != "status"} == {k: v for k, v in stored.items() if k != "status"}
    if incoming.get("status") is None:
        assert "status" not in result
    else:
        assert result["status"] == incoming["status"]


def test_the_scale_of_a_deployment_carries_its_identity_replicas_and_selector_text() -> None:
    assert subresources.scale_of(deployment(3, replicas=2)) == {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "uid": "u-1",
            "resourceVersion": "7",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"replicas": 3},
        "status": {"replicas": 2, "selector": "app=web,tier=front"},
    }


def test_a_deployment_without_replicas_scales_from_kubernetes_default_of_one() -> None:
    obj = deployment()
    del obj["spec"]["replicas"]
    scale = subresources.scale_of(obj)
    assert (scale["spec"]["replicas"], scale["status"]["replicas"]) == (1, 0)


def test_with_scale_sets_only_spec_replicas() -> None:
    obj = deployment(2)
    scaled = subresources.with_scale(obj, {"kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": 5}})
    assert scaled["spec"] == {**obj["spec"], "replicas": 5}
    assert {k: v for k, v in scaled.items() if k != "spec"} == {k: v for k, v in obj.items() if k != "spec"}
    assert obj["spec"]["replicas"] == 2


@pytest.mark.parametrize(
    ("scale", "field"),
    [
        ({"spec": {"replicas": -1}}, "spec.replicas"),
        ({"spec": {"replicas": "3"}}, "spec.replicas"),
        ({"spec": {"replicas": True}}, "spec.replicas"),
        ({}, "spec"),
        ({"kind": "Deployment", "spec": {"replicas": 1}}, "kind"),
        ({"metadata": {"name": "other"}, "spec": {"replicas": 1}}, "metadata.name"),
        ({"metadata": {"namespace": "team"}, "spec": {"replicas": 1}}, "metadata.namespace"),
    ],
)
def test_with_scale_refuses_a_bad_scale_naming_the_field(scale: dict[str, Any], field: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        subresources.with_scale(deployment(), scale)
    assert caught.value.fields[0].path == field
