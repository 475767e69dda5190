"""The pure parts of act 4: loading a fleet example (every bad field named), where a created object lives, and the
excerpt of a patched manifest the act prints."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.demo._acts_fleets import FleetRequest, inventory_rows, item_path, load_fleet_example, manifest_excerpt
from devplace.demo._runs import FLEET_EXAMPLE, example_path


def test_the_shipped_fleet_example_holds_the_seeds_intents() -> None:
    example = load_fleet_example(example_path(*FLEET_EXAMPLE).read_text())
    assert example.plan == "/v2/projects/my-proj1/composite-apps/my-capp1/v1.0/deployment-intent-groups/my-dig1"
    names = {(r.collection, r.name) for r in example.requests}
    for requirement in (
        "core-fwall-cpu-requirement",
        "core-fwall-RAM-needs",
        "core-fwall-gpu-needs",
        "api-server-cpu-needs",
        "api-server-ram-needs",
        "ai-model-cpu-requirement",
        "logger-cpu-needs",
    ):
        assert ("resource-requirements", requirement) in names
    assert [r[0] for r in inventory_rows(example.requests)] == [
        "edge/cluster-1",
        "edge/cluster-1",
        "edge/cluster-2",
        "edge/cluster-3",
        "edge/cluster-4",
        "edge/cluster-7",
    ]


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("[1, 2]", ""),
        ("plan: /v1/x\nrequests: [{post: /v2/a, body: {metadata: {name: a}}}]", "plan"),
        ("plan: /v2/x\nrequests: []", "requests"),
        ("plan: /v2/x\nrequests: [3]", "requests[0]"),
        ("plan: /v2/x\nrequests: [{post: /v2/a, body: {metadata: {name: a}}, put: x}]", "requests[0].put"),
        ("plan: /v2/x\nrequests: [{post: v2/a, body: {metadata: {name: a}}}]", "requests[0].post"),
        ("plan: /v2/x\nrequests: [{post: /v2/a, body: []}]", "requests[0].body"),
        ("plan: /v2/x\nrequests: [{post: /v2/a, body: {metadata: {}}}]", "requests[0].body.metadata.name"),
        ("plan: /v2/x\nrequests: {{", ""),
    ],
)
def test_a_bad_fleet_example_names_the_field(text: str, path: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        load_fleet_example(text)
    assert [f.path for f in caught.value.fields] == [path]


@given(st.text(max_size=200))
def test_loading_any_text_as_a_fleet_example_succeeds_or_is_invalid(text: str) -> None:
    try:
        example = load_fleet_example(text)
    except errors.Invalid:
        return
    assert example.plan.startswith("/v2/")
    assert example.requests


def test_item_path_is_where_the_created_object_lives() -> None:
    base = "/v2/projects/p/composite-apps"
    assert item_path(FleetRequest("/v2/projects", {"metadata": {"name": "p"}})) == "/v2/projects/p"
    capp = FleetRequest(base, {"metadata": {"name": "c"}, "spec": {"compositeAppVersion": "v1"}})
    assert item_path(capp) == f"{base}/c/v1"


def test_manifest_excerpt_keeps_what_the_action_controller_writes() -> None:
    resources = {"requests": {"cpu": "1"}}
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "replicas": 2,
            "selector": {},
            "template": {
                "spec": {
                    "containers": [{"name": "c", "image": "i", "resources": resources}],
                    "nodeSelector": {"k": "v"},
                }
            },
        },
    }
    assert manifest_excerpt(deployment) == {
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "c", "resources": resources}], "nodeSelector": {"k": "v"}}},
        }
    }
    pod = {"kind": "Pod", "spec": {"containers": [{"name": "c", "image": "i"}]}}
    assert manifest_excerpt(pod) == {"spec": {"containers": [{"name": "c", "resources": {}}]}}
