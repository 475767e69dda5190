"""Request bodies as Kubernetes reads them (issue 20, item 4), against a real uvicorn on 127.0.0.1: the media types
each verb takes (415 for any other), server-side apply's apiVersion, kind and name, the validity of every patch's
result, and /store/watch's parameters. Every refusal is a `Status` naming what was wrong, and stores nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.servers import serve_app

PODS = "/api/v1/namespaces/default/pods"
CONFIGS = "/apis/devplace.io/v1alpha1/namespaces/default/configurations"
CAMS = f"{CONFIGS}/cams"
ACCEPTED = "accepted media types include: application/json, application/yaml"


def pod(name: str = "p") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "x"}]},
    }


def configuration(capacity: int = 2, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": "cams", **meta},
        "spec": {"discoveryHandler": {"name": "debugEcho", "discoveryDetails": ""}, "capacity": capacity},
    }


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    app = create_app(memory_store, fleet_api=False)
    async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=30) as client:
        yield client


def assert_status(response: httpx2.Response, code: int, reason: str) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    assert (body["kind"], body["status"], body["code"], body["reason"]) == ("Status", "Failure", code, reason)
    return body


def causes(body: dict[str, Any]) -> list[str]:
    return [c["field"] for c in (body.get("details") or {}).get("causes", [])]


# -- media types: POST, PUT, DELETE ---------------------------------------------------------------------------------


UNSUPPORTED = [
    "text/plain",
    "application/xml",
    "application/merge-patch+json",
    "application/x-www-form-urlencoded",
]


@pytest.mark.parametrize("content_type", UNSUPPORTED)
async def test_a_create_in_another_media_type_is_415_and_stores_nothing(
    api: httpx2.AsyncClient, memory_store: MemoryStore, content_type: str
) -> None:
    response = await api.post(PODS, content=json.dumps(pod()), headers={"content-type": content_type})
    body = assert_status(response, 415, "UnsupportedMediaType")
    assert body["message"] == f"the body of the request was in an unknown format - {ACCEPTED}"
    assert await memory_store.revision() == 0


@pytest.mark.parametrize("content_type", UNSUPPORTED)
async def test_a_replace_or_a_delete_with_options_in_another_media_type_is_415_and_changes_nothing(
    api: httpx2.AsyncClient, memory_store: MemoryStore, content_type: str
) -> None:
    stored = (await api.post(PODS, json=pod())).json()
    changed = {**stored, "metadata": {**stored["metadata"], "labels": {"a": "b"}}}
    headers = {"content-type": content_type}
    assert_status(await api.put(f"{PODS}/p", content=json.dumps(changed), headers=headers), 415, "UnsupportedMediaType")
    options = json.dumps({"kind": "DeleteOptions", "apiVersion": "v1"})
    response = await api.request("DELETE", f"{PODS}/p", content=options, headers=headers)
    assert_status(response, 415, "UnsupportedMediaType")
    assert await memory_store.get("Pod", "p", "default") == stored


async def test_json_and_yaml_are_taken_with_parameters_and_in_any_case(api: httpx2.AsyncClient) -> None:
    headers = {"content-type": "Application/JSON; charset=utf-8"}
    assert (await api.post(PODS, content=json.dumps(pod("a")), headers=headers)).status_code == 201
    text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: b\nspec:\n  containers: [{name: main, image: x}]\n"
    assert (await api.post(PODS, content=text, headers={"content-type": "application/yaml"})).status_code == 201


async def test_a_body_without_a_content_type_is_read_as_json_as_kubernetes_does(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    assert (await api.post(PODS, content=json.dumps(pod("a")))).status_code == 201
    text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: b\nspec:\n  containers: [{name: main, image: x}]\n"
    body = assert_status(await api.post(PODS, content=text), 400, "BadRequest")
    assert "not valid JSON" in body["message"]
    assert [obj["metadata"]["name"] for obj in (await memory_store.list("Pod")).items] == ["a"]


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/json"])
async def test_a_patch_in_no_patch_type_is_415_before_its_body_is_read(
    api: httpx2.AsyncClient, memory_store: MemoryStore, content_type: str | None
) -> None:
    await api.post(CONFIGS, json=configuration())
    before = await memory_store.revision()
    headers = {"content-type": content_type} if content_type else {}
    body = assert_status(await api.patch(CAMS, content=b"{not json", headers=headers), 415, "UnsupportedMediaType")
    assert body["message"].endswith(
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )
    assert await memory_store.revision() == before


# -- server-side apply: the body names the object the URL names ----------------------------------------------------


def apply(api: httpx2.AsyncClient, path: str, body: Any, **params: str) -> Any:
    return api.patch(
        path,
        content=json.dumps(body),
        headers={"content-type": "application/apply-patch+yaml"},
        params={"fieldManager": "m", **params},
    )


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"apiVersion": None}, "apiVersion", "an apply patch names its apiVersion"),
        ({"kind": None}, "kind", "an apply patch names its kind"),
        ({"apiVersion": "akri.sh/v0"}, "apiVersion", "does not match the URL's devplace.io/v1alpha1"),
        ({"apiVersion": "v1"}, "apiVersion", "does not match the URL's devplace.io/v1alpha1"),
        ({"kind": "Instance"}, "kind", "does not match the URL's Configuration"),
        ({"metadata": {"name": "other"}}, "metadata.name", "the name of the object (other) does not match the name"),
        ({"metadata": {"name": "cams", "namespace": "kube-system"}}, "metadata.namespace", "does not match"),
    ],
)
@pytest.mark.parametrize("existing", [True, False])
async def test_an_apply_that_does_not_name_the_urls_object_is_400_and_changes_nothing(
    api: httpx2.AsyncClient, memory_store: MemoryStore, change: dict[str, Any], field: str, says: str, existing: bool
) -> None:
    if existing:
        await api.post(CONFIGS, json=configuration())
    before = await memory_store.revision()
    body = {k: v for k, v in {**configuration(capacity=5), **change}.items() if v is not None}
    refused = assert_status(await apply(api, CAMS, body, force="true"), 400, "BadRequest")
    assert causes(refused) == [field]
    assert says in refused["message"]
    assert await memory_store.revision() == before
    if existing:
        assert (await memory_store.get("Configuration", "cams", "default"))["spec"]["capacity"] == 2


async def test_an_apply_that_names_the_urls_object_still_applies(api: httpx2.AsyncClient) -> None:
    assert (await apply(api, CAMS, configuration())).status_code == 201
    body = {**configuration(capacity=3), "metadata": {"name": "cams", "namespace": "default"}}
    applied = await apply(api, CAMS, body)
    assert applied.status_code == 200, applied.text
    assert applied.json()["spec"]["capacity"] == 3
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": 2}}
    deployment = "/apis/apps/v1/namespaces/default/deployments/web"
    wrong = assert_status(await apply(api, f"{deployment}/scale", {**scale, "kind": "Deployment"}), 400, "BadRequest")
    assert causes(wrong) == ["kind"]


# -- the result of every patch is what a PUT of it would have to be ---------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "patch"),
    [
        ("application/strategic-merge-patch+json", {"spec": None}),
        ("application/merge-patch+json", {"spec": None}),
        ("application/json-patch+json", [{"op": "remove", "path": "/spec"}]),
        ("application/strategic-merge-patch+json", {"spec": {"containers": None}}),
        ("application/json-patch+json", [{"op": "replace", "path": "/spec/containers", "value": []}]),
    ],
)
async def test_a_patch_that_leaves_a_pod_without_containers_is_422_and_changes_nothing(
    api: httpx2.AsyncClient, memory_store: MemoryStore, content_type: str, patch: Any
) -> None:
    stored = (await api.post(PODS, json=pod())).json()
    response = await api.patch(f"{PODS}/p", content=json.dumps(patch), headers={"content-type": content_type})
    body = assert_status(response, 422, "Invalid")
    assert causes(body) == ["spec.containers"]
    assert await memory_store.get("Pod", "p", "default") == stored


async def test_a_pod_without_containers_is_refused_by_put_and_post_alike(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    stored = (await api.post(PODS, json=pod())).json()
    emptied = {**stored, "spec": {}}
    assert causes(assert_status(await api.put(f"{PODS}/p", json=emptied), 422, "Invalid")) == ["spec.containers"]
    bare = {k: v for k, v in pod("q").items() if k != "spec"}
    assert causes(assert_status(await api.post(PODS, json=bare), 422, "Invalid")) == ["spec.containers"]
    assert [obj["metadata"]["name"] for obj in (await memory_store.list("Pod")).items] == ["p"]


# -- /store/watch takes only its own parameters ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [({"revision": "abc"}, "revision"), ({"revision": "3"}, "revision"), ({"kind": "Pod", "since": "1"}, "since")],
)
async def test_a_store_watch_parameter_it_does_not_take_is_400_naming_it(
    api: httpx2.AsyncClient, params: dict[str, str], field: str
) -> None:
    body = assert_status(await api.get("/store/watch", params=params), 400, "BadRequest")
    assert causes(body) == [field]
    if field == "revision":
        assert "resourceVersion" in body["message"]


async def test_a_store_watch_with_its_own_parameters_still_streams(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    await memory_store.create(pod())
    params = {"kind": "Pod", "namespace": "default", "resourceVersion": "0", "timeoutSeconds": "1"}
    params |= {"labelSelector": "", "fieldSelector": "metadata.name=p", "allowWatchBookmarks": "true"}
    async with api.stream("GET", "/store/watch", params=params) as response:
        assert response.status_code == 200
        first = json.loads(await anext(response.aiter_lines()))
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "p")
