"""API discovery: the aggregated form kubectl asks for first and the legacy form, which must say the same things
(kinds, verbs, short names, categories, subresources); pure functions first, then over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace import errors
from devplace.api import _registry as registry
from devplace.kubeapi import _openapis as openapis
from devplace.server import _discoveries as discoveries
from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.servers import serve_app

KUBECTL_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
KUBECTL_1_27_ACCEPT = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"


@pytest.mark.parametrize(
    ("accept", "wanted"),
    [
        (KUBECTL_ACCEPT, "v2"),
        (KUBECTL_1_27_ACCEPT, "v2beta1"),
        ("application/json", None),
        (None, None),
        ("*/*", None),
        ("application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", None),
        ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json", None),
        ("application/json;g=example.com;v=v2;as=APIGroupDiscoveryList", None),
        ("application/json; g=apidiscovery.k8s.io; v=v2; as=APIGroupDiscoveryList", "v2"),
    ],
)
def test_the_aggregated_form_is_given_when_asked_for_before_plain_json(accept: str | None, wanted: str | None) -> None:
    assert discoveries.wanted_discovery(accept) == wanted


def _legacy_resources() -> dict[tuple[str, str], dict[str, Any]]:
    """(groupVersion, name) -> entry of every legacy APIResourceList."""
    out = {}
    reviews = ["authorization.k8s.io/v1", "authentication.k8s.io/v1", "authentication.k8s.io/v1beta1"]
    for gv in [*openapis.group_versions(), *reviews]:
        for entry in discoveries.api_resource_list(gv)["resources"]:
            out[(gv, entry["name"])] = entry
    return out


def _aggregated_resources() -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for core in (True, False):
        for item in discoveries.aggregated_discovery(core)["items"]:
            group = item["metadata"]["name"]
            for version in item["versions"]:
                gv = f"{group}/{version['version']}" if group else version["version"]
                for entry in version["resources"]:
                    out[(gv, entry["resource"])] = entry
                    for sub in entry.get("subresources", []):
                        out[(gv, f"{entry['resource']}/{sub['subresource']}")] = sub
    return out


def test_every_registered_kind_is_discoverable_at_each_of_its_group_versions_in_both_forms() -> None:
    legacy, aggregated = _legacy_resources(), _aggregated_resources()
    expected = {(gv, info.plural) for info in registry.kinds() for gv in info.group_versions}
    reviews = {(gv, plural) for gv, plural in legacy if plural.startswith("selfsubject")}
    assert {k for k in legacy if "/" not in k[1]} == expected | reviews
    assert set(legacy) == set(aggregated)
    for key, entry in legacy.items():
        if "/" in key[1]:
            assert aggregated[key]["verbs"] == entry["verbs"] == ["get", "patch", "update"]
            continue
        if key in reviews:
            assert aggregated[key]["verbs"] == entry["verbs"] == ["create"]
            continue
        agg = aggregated[key]
        info = registry.lookup_plural(key[1])
        assert entry["kind"] == agg["responseKind"]["kind"] == info.kind
        assert entry["namespaced"] == (agg["scope"] == "Namespaced") == info.namespaced
        assert entry["singularName"] == agg["singularResource"] == info.kind.lower()
        assert entry["verbs"] == agg["verbs"]
        assert entry.get("shortNames") == agg.get("shortNames")
        assert entry.get("categories") == agg.get("categories")


def test_the_self_reviews_are_discoverable_for_kubectl_auth() -> None:
    legacy = _legacy_resources()
    access = legacy[("authorization.k8s.io/v1", "selfsubjectaccessreviews")]
    assert (access["kind"], access["namespaced"], access["verbs"]) == ("SelfSubjectAccessReview", False, ["create"])
    assert legacy[("authentication.k8s.io/v1beta1", "selfsubjectreviews")]["kind"] == "SelfSubjectReview"


def test_the_verbs_are_those_the_server_serves_without_deletecollection() -> None:
    entry = _legacy_resources()[("akri.sh/v0", "configurations")]
    assert entry["verbs"] == ["create", "delete", "get", "list", "patch", "update", "watch"]


@pytest.mark.parametrize(
    ("gv", "plural", "short", "categories"),
    [
        ("akri.sh/v0", "configurations", ["akric"], ["all", "akri", "devplace"]),
        ("akri.sh/v0", "instances", ["akrii"], ["all", "akri", "devplace"]),
        ("devplace.io/v1alpha1", "instances", None, ["devplace"]),  # no short name two resources share
        ("devplace.io/v1alpha1", "configurations", None, ["devplace"]),
        ("devplace.io/v1alpha1", "resourceclasses", None, ["devplace"]),
        ("v1", "pods", ["po"], ["all"]),
        ("v1", "configmaps", ["cm"], None),
        ("apps/v1", "deployments", ["deploy"], ["all"]),
        ("fleet.devplace.io/v1alpha1", "projects", None, ["fleet"]),
    ],
)
def test_short_names_and_categories(gv: str, plural: str, short: Any, categories: Any) -> None:
    entry = _legacy_resources()[(gv, plural)]
    assert entry.get("shortNames") == short
    assert entry.get("categories") == categories


def test_subresources_are_status_for_kinds_with_a_status_and_scale_for_deployments() -> None:
    legacy = _legacy_resources()
    assert ("akri.sh/v0", "instances/status") in legacy
    assert ("v1", "configmaps/status") not in legacy
    scale = legacy[("apps/v1", "deployments/scale")]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    aggregated = _aggregated_resources()[("apps/v1", "deployments/scale")]
    assert aggregated["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}


def test_a_group_lists_its_versions_and_an_unknown_one_is_not_found() -> None:
    group = discoveries.api_group("akri.sh")
    assert group["preferredVersion"] == {"groupVersion": "akri.sh/v0", "version": "v0"}
    with pytest.raises(errors.NotFound):
        discoveries.api_group("example.com")
    with pytest.raises(errors.NotFound):
        discoveries.api_resource_list("example.com/v1")


# -- over HTTP --------------------------------------------------------------------------------------------------


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    async with (
        serve_app(create_app(memory_store, fleet_api=False)) as url,
        httpx2.AsyncClient(base_url=url, timeout=10) as client,
    ):
        yield client


@pytest.mark.parametrize(("accept", "version"), [(KUBECTL_ACCEPT, "v2"), (KUBECTL_1_27_ACCEPT, "v2beta1")])
async def test_kubectl_gets_aggregated_discovery_with_the_media_type_it_asked_for(
    api: httpx2.AsyncClient, accept: str, version: str
) -> None:
    for path, core in (("/api", True), ("/apis", False)):
        response = await api.get(path, headers={"Accept": accept})
        assert response.status_code == 200
        media = response.headers["content-type"].replace(" ", "")
        assert media == f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
        body = response.json()
        assert (body["kind"], body["apiVersion"]) == ("APIGroupDiscoveryList", f"apidiscovery.k8s.io/{version}")
        names = [item["metadata"]["name"] for item in body["items"]]
        reviews = {"authentication.k8s.io", "authorization.k8s.io"}  # the self reviews (`kubectl auth can-i`)
        assert names == ([""] if core else sorted({s.group for s in openapis.served() if s.group} | reviews))


async def test_other_clients_get_legacy_discovery(api: httpx2.AsyncClient) -> None:
    assert (await api.get("/api")).json() == {"kind": "APIVersions", "versions": ["v1"]}
    groups = (await api.get("/apis")).json()
    assert groups["kind"] == "APIGroupList"
    assert {"akri.sh", "devplace.io", "apps", "batch"} <= {g["name"] for g in groups["groups"]}
    assert (await api.get("/apis/akri.sh")).json()["kind"] == "APIGroup"
    resources = (await api.get("/apis/akri.sh/v0")).json()
    assert resources == discoveries.api_resource_list("akri.sh/v0")
    missing = await api.get("/apis/example.com/v1")
    assert (missing.status_code, missing.json()["reason"]) == (404, "NotFound")
    assert (await api.get("/apis/example.com")).status_code == 404
