"""EMCO's bodies (`devplace.placement._bodies`): every release's spelling is accepted, and the rules that span
fields hold."""

from __future__ import annotations

from typing import Any

import pytest

from devplace import errors
from devplace.placement import _levels as levels
from devplace.placement._bodies import AppBody, ClusterBody, ClusterLabelBody, GenericAppIntentBody, HpaIntentBody


def test_intents_accept_app_or_app_name() -> None:
    for key in ("app", "appName", "app-name"):
        assert HpaIntentBody.parse({"metadata": {"name": "i"}, "spec": {key: "fwall"}}).spec.app == "fwall"


def test_app_manifests_come_as_objects_or_yaml_text() -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: b}\n"
    )
    body = AppBody.parse({"metadata": {"name": "app"}, "spec": {"manifests": text}})
    assert [m["kind"] for m in body.spec.manifests] == ["ConfigMap", "Service"]
    with pytest.raises(errors.Invalid, match="document 2: duplicate ConfigMap 'a'"):
        AppBody.parse(
            {
                "metadata": {"name": "app"},
                "spec": {"manifests": text.replace("Service", "ConfigMap").replace("name: b", "name: a")},
            }
        )
    with pytest.raises(errors.Invalid, match=r"document 1: metadata\.name: required"):
        AppBody.parse({"metadata": {"name": "app"}, "spec": {"manifests": [{"apiVersion": "v1", "kind": "Pod"}]}})


def test_cluster_bodies_take_a_label_list_and_name_each_bad_field() -> None:
    body = ClusterBody.parse(
        {
            "metadata": {"name": "c1", "labels": ["edge"]},
            "spec": {"nodes": [{"name": "n", "allocatable": {"cpu": "8", "memory": 1024}}]},
        }
    )
    assert body.metadata.labels == {"edge": ""}
    for bad, field in [
        ({"nodes": [{"name": "n", "allocatable": {"cpu": "1K"}}]}, "spec.nodes[0].allocatable"),
        ({"nodes": [{"name": "n", "allocatable": {"cpu": "-1"}}]}, "spec.nodes[0].allocatable"),
        ({"nodes": [{"name": "N", "allocatable": {}}]}, "spec.nodes[0].name"),
        ({"nodes": [{"name": "n"}, {"name": "n"}]}, "spec.nodes[1].name"),
        ({"endpoint": "ftp://x"}, "spec.endpoint"),
    ]:
        with pytest.raises(errors.Invalid) as info:
            ClusterBody.parse({"metadata": {"name": "c1"}, "spec": bad})
        assert info.value.fields[0].path == field


def test_selectors_need_exactly_one_target() -> None:
    base = {"metadata": {"name": "ai"}, "spec": {"app": "web", "intent": {}}}
    with pytest.raises(errors.Invalid, match="allOf or anyOf must list"):
        GenericAppIntentBody.parse(base)
    both = {"clusterProvider": "p", "cluster": "c", "clusterLabel": "l"}
    with pytest.raises(errors.Invalid, match="exactly one of cluster and clusterLabel"):
        GenericAppIntentBody.parse({**base, "spec": {"app": "web", "intent": {"allOf": [both]}}})
    old = {"provider-name": "p", "cluster-name": "c"}  # EMCO 21.03 spelling
    body = GenericAppIntentBody.parse({**base, "spec": {"app-name": "web", "intent": {"anyOf": [old]}}})
    assert body.spec.intent.any_of[0].cluster == "c"


APP_INTENT = ("web", "p", "edge")


def _target(b: Any) -> tuple[str, str, str | None]:
    return (b.spec.app, b.spec.intent.all_of[0].cluster_provider, b.spec.intent.all_of[0].cluster_label)


@pytest.mark.parametrize(
    ("level", "body", "read", "expected"),
    [
        (levels.HPA_INTENT, {"spec": {"app": "fwall"}}, lambda b: b.spec.app, "fwall"),
        (levels.HPA_INTENT, {"spec": {"appName": "fwall"}}, lambda b: b.spec.app, "fwall"),
        (levels.HPA_INTENT, {"spec": {"app-name": "fwall"}}, lambda b: b.spec.app, "fwall"),
        (levels.COMPOSITE_APP, {"spec": {"compositeAppVersion": "v1"}}, lambda b: b.version, "v1"),
        (levels.COMPOSITE_APP, {"spec": {"version": "v1"}}, lambda b: b.version, "v1"),
        (
            levels.GENERIC_APP_INTENT,
            {"spec": {"app": "web", "intent": {"allOf": [{"clusterProvider": "p", "clusterLabel": "edge"}]}}},
            _target,
            APP_INTENT,
        ),
        (
            levels.GENERIC_APP_INTENT,
            {"spec": {"app-name": "web", "intent": {"allOf": [{"provider-name": "p", "cluster-label-name": "edge"}]}}},
            _target,
            APP_INTENT,
        ),
        (levels.CLUSTER, {"spec": {"gitOps": {"gitOpsType": "azureArc"}}}, lambda b: (b.nodes, b.endpoint), ([], None)),
        (levels.CLUSTER, {}, lambda b: (b.nodes, b.endpoint), ([], None)),
        (
            levels.DEPLOYMENT_INTENT,
            {"spec": {"intent": {"genericPlacementIntent": "gpi"}}},
            lambda b: b.spec.intent,
            {"genericPlacementIntent": "gpi"},
        ),
    ],
)
def test_other_bodies_accept_every_release_spelling(
    level: levels.Level, body: dict[str, Any], read: Any, expected: Any
) -> None:
    assert read(level.body.parse({"metadata": {"name": "x"}, **body})) == expected


@pytest.mark.parametrize(
    "body",
    [{"clusterLabel": "edge"}, {"label-name": "edge"}, {"metadata": {"name": ""}, "clusterLabel": "edge"}],
)
def test_cluster_label_bodies_of_every_release_name_the_label(body: dict[str, Any]) -> None:
    assert ClusterLabelBody.model_validate(body).cluster_label == "edge"
