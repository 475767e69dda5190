"""The API server over HTTP: a real uvicorn on 127.0.0.1 serving a memory store, driven with httpx2."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace import __version__
from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.servers import serve_app

CONFIGS = "/apis/devplace.io/v1alpha1/namespaces/default/configurations"
AKRI_CONFIGS = "/apis/akri.sh/v0/namespaces/default/configurations"
NODES = "/api/v1/nodes"


def config(
    name: str = "cam", capacity: int = 2, api_version: str = "devplace.io/v1alpha1", **meta: Any
) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "Configuration",
        "metadata": {"name": name, **meta},
        "spec": {"discoveryHandler": {"name": "debugEcho"}, "capacity": capacity},
    }


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    app = create_app(memory_store, fleet_api=False)  # the /v2 routes have their own tests; this starts faster
    async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=10) as client:
        yield client


def assert_status(response: httpx2.Response, code: int, reason: str) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    assert (body["kind"], body["status"], body["code"], body["reason"]) == ("Status", "Failure", code, reason)
    return body


# -- the verbs --------------------------------------------------------------------------------------------------


async def test_create_answers_201_with_the_stored_object(api: httpx2.AsyncClient) -> None:
    response = await api.post(CONFIGS, json=config())
    assert response.status_code == 201
    body = response.json()
    assert body["metadata"]["resourceVersion"] == "1"
    assert body["metadata"]["namespace"] == "default"
    assert body["metadata"]["uid"]
    assert body["spec"]["capacity"] == 2


async def test_akri_and_devplace_groups_each_show_only_their_own_objects(api: httpx2.AsyncClient) -> None:
    await api.post(AKRI_CONFIGS, json=config("akri-cam", api_version="akri.sh/v0"))
    await api.post(CONFIGS, json=config("our-cam"))
    listed = (await api.get("/apis/devplace.io/v1alpha1/configurations")).json()
    assert (listed["kind"], listed["apiVersion"]) == ("ConfigurationList", "devplace.io/v1alpha1")
    assert [o["metadata"]["name"] for o in listed["items"]] == ["our-cam"]
    akri = (await api.get("/apis/akri.sh/v0/configurations")).json()
    assert [(o["metadata"]["name"], o["apiVersion"]) for o in akri["items"]] == [("akri-cam", "akri.sh/v0")]
    missing = assert_status(await api.get(f"{CONFIGS}/akri-cam"), 404, "NotFound")
    assert missing["message"] == 'configurations.devplace.io "akri-cam" not found (it is a akri.sh/v0 Configuration)'
    assert_status(await api.delete(f"{CONFIGS}/akri-cam"), 404, "NotFound")
    assert (await api.get(f"{AKRI_CONFIGS}/akri-cam")).status_code == 200


async def test_a_name_another_groups_object_holds_is_409_naming_that_group(api: httpx2.AsyncClient) -> None:
    await api.post(AKRI_CONFIGS, json=config("cam", api_version="akri.sh/v0"))
    body = assert_status(await api.post(CONFIGS, json=config("cam")), 409, "AlreadyExists")
    assert body["message"] == (
        'configurations.devplace.io "cam" already exists as a akri.sh/v0 Configuration '
        "(devplace keeps one name per kind across its groups)"
    )


async def test_a_body_of_another_group_than_the_url_is_400(api: httpx2.AsyncClient, memory_store: MemoryStore) -> None:
    body = assert_status(await api.post(CONFIGS, json=config(api_version="akri.sh/v0")), 400, "BadRequest")
    assert body["message"] == (
        "apiVersion: the API version in the data (akri.sh/v0) does not match the expected API version "
        "(devplace.io/v1alpha1)"
    )
    assert await memory_store.revision() == 0


async def test_list_at_the_cluster_path_spans_namespaces_and_at_a_namespace_only_it(api: httpx2.AsyncClient) -> None:
    await api.post(CONFIGS, json=config("a"))
    await api.post("/apis/devplace.io/v1alpha1/namespaces/team/configurations", json=config("b"))
    everywhere = (await api.get("/apis/devplace.io/v1alpha1/configurations")).json()
    in_team = (await api.get("/apis/devplace.io/v1alpha1/namespaces/team/configurations")).json()
    assert sorted(o["metadata"]["name"] for o in everywhere["items"]) == ["a", "b"]
    assert [o["metadata"]["name"] for o in in_team["items"]] == ["b"]
    assert everywhere["metadata"]["resourceVersion"] == "2"


async def test_list_filters_by_label_selector(api: httpx2.AsyncClient) -> None:
    await api.post(NODES, json=node("a", zone="z1"))
    await api.post(NODES, json=node("b", zone="z2"))
    listed = (await api.get(NODES, params={"labelSelector": "zone=z2"})).json()
    assert [o["metadata"]["name"] for o in listed["items"]] == ["b"]


async def test_a_bad_label_selector_is_422(api: httpx2.AsyncClient) -> None:
    assert_status(await api.get(NODES, params={"labelSelector": "zone in (a"}), 422, "Invalid")


async def test_update_with_the_current_resource_version_lands_and_bumps_generation(api: httpx2.AsyncClient) -> None:
    created = (await api.post(CONFIGS, json=config())).json()
    created["spec"]["capacity"] = 3
    response = await api.put(f"{CONFIGS}/cam", json=created)
    assert response.status_code == 200
    assert response.json()["metadata"]["resourceVersion"] == "2"
    assert response.json()["metadata"]["generation"] == 2


async def test_update_with_a_stale_resource_version_is_409_conflict_and_changes_nothing(
    api: httpx2.AsyncClient,
) -> None:
    created = (await api.post(CONFIGS, json=config())).json()
    first = {**created, "spec": {**created["spec"], "capacity": 3}}
    second = {**created, "spec": {**created["spec"], "capacity": 5}}
    assert (await api.put(f"{CONFIGS}/cam", json=first)).status_code == 200
    body = assert_status(await api.put(f"{CONFIGS}/cam", json=second), 409, "Conflict")
    assert "resourceVersion 1 is stale" in body["message"]
    assert (await api.get(f"{CONFIGS}/cam")).json()["spec"]["capacity"] == 3


async def test_update_without_a_resource_version_is_422_naming_the_field(api: httpx2.AsyncClient) -> None:
    await api.post(CONFIGS, json=config())
    body = assert_status(await api.put(f"{CONFIGS}/cam", json=config(capacity=4)), 422, "Invalid")
    assert [c["field"] for c in body["details"]["causes"]] == ["metadata.resourceVersion"]


async def test_create_of_an_existing_name_is_409_already_exists(api: httpx2.AsyncClient) -> None:
    await api.post(CONFIGS, json=config())
    assert_status(await api.post(CONFIGS, json=config(capacity=7)), 409, "AlreadyExists")
    assert (await api.get(f"{CONFIGS}/cam")).json()["spec"]["capacity"] == 2


async def test_delete_of_a_custom_resource_returns_the_object_and_then_it_is_404(api: httpx2.AsyncClient) -> None:
    await api.post(CONFIGS, json=config())
    response = await api.delete(f"{CONFIGS}/cam")
    assert response.status_code == 200
    assert response.json()["metadata"]["name"] == "cam"
    assert response.json()["metadata"]["resourceVersion"] == "2"
    assert_status(await api.get(f"{CONFIGS}/cam"), 404, "NotFound")
    assert_status(await api.delete(f"{CONFIGS}/cam"), 404, "NotFound")


async def test_delete_of_a_built_in_kind_answers_a_success_status_as_kubernetes_does(api: httpx2.AsyncClient) -> None:
    uid = (await api.post(NODES, json=node("a"))).json()["metadata"]["uid"]
    response = await api.delete(f"{NODES}/a")
    assert response.status_code == 200
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "a", "kind": "nodes", "uid": uid},
    }
    assert_status(await api.get(f"{NODES}/a"), 404, "NotFound")


async def test_delete_of_a_pod_answers_the_pod_as_kubernetes_does(api: httpx2.AsyncClient) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    await api.post("/api/v1/namespaces/default/pods", json=pod)
    gone = (await api.delete("/api/v1/namespaces/default/pods/p")).json()
    assert (gone["kind"], gone["metadata"]["name"]) == ("Pod", "p")


async def test_the_remote_store_gets_the_deleted_object_of_a_built_in_kind(api: httpx2.AsyncClient) -> None:
    await api.post(NODES, json=node("a"))
    gone = (await api.delete(f"{NODES}/a", headers={"X-Devplace-Store": "kinds"})).json()
    assert (gone["kind"], gone["metadata"]["name"], gone["metadata"]["resourceVersion"]) == ("Node", "a", "2")


async def test_delete_honours_a_resource_version_precondition_in_the_body_or_query(api: httpx2.AsyncClient) -> None:
    await api.post(NODES, json=node("a"))
    stale = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": "9"}}
    assert_status(await api.request("DELETE", f"{NODES}/a", json=stale), 409, "Conflict")
    assert_status(await api.delete(f"{NODES}/a", params={"resourceVersion": "9"}), 409, "Conflict")
    assert (await api.delete(f"{NODES}/a", params={"resourceVersion": "1"})).status_code == 200


async def test_delete_honours_a_uid_precondition(api: httpx2.AsyncClient) -> None:
    uid = (await api.post(NODES, json=node("a"))).json()["metadata"]["uid"]
    wrong = {"preconditions": {"uid": "not-" + uid}}
    assert_status(await api.request("DELETE", f"{NODES}/a", json=wrong), 409, "Conflict")
    right = {"preconditions": {"uid": uid}}
    assert (await api.request("DELETE", f"{NODES}/a", json=right)).status_code == 200


async def test_a_yaml_body_is_accepted(api: httpx2.AsyncClient) -> None:
    text = "apiVersion: v1\nkind: Node\nmetadata:\n  name: from-yaml\n"
    response = await api.post(NODES, content=text, headers={"content-type": "application/yaml"})
    assert response.status_code == 201
    assert response.json()["metadata"]["name"] == "from-yaml"


# -- bad input: a specific status, nothing changed -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "fields"),
    [
        (CONFIGS, config(capacity=0), ["spec.capacity"]),
        (CONFIGS, config("Bad_Name"), ["metadata.name"]),
        (CONFIGS, {**config(), "kind": "Gadget"}, ["kind"]),
        (CONFIGS, config(namespace="elsewhere"), ["metadata.namespace"]),
        (CONFIGS, {**config(), "spec": {"capacity": 1}}, ["spec.discoveryHandler"]),
    ],
)
async def test_an_invalid_object_is_422_with_field_causes_and_changes_nothing(
    api: httpx2.AsyncClient, memory_store: MemoryStore, path: str, body: dict[str, Any], fields: list[str]
) -> None:
    status = assert_status(await api.post(path, json=body), 422, "Invalid")
    assert [c["field"] for c in status["details"]["causes"]] == fields
    assert await memory_store.revision() == 0


async def test_a_cluster_scoped_objects_namespace_is_dropped_as_kubernetes_drops_it(api: httpx2.AsyncClient) -> None:
    created = await api.post(NODES, json={**node("a"), "metadata": {"name": "a", "namespace": "default"}})
    assert created.status_code == 201
    assert "namespace" not in created.json()["metadata"]


async def test_a_name_in_the_body_that_differs_from_the_url_is_422(api: httpx2.AsyncClient) -> None:
    created = (await api.post(CONFIGS, json=config("cam"))).json()
    body = assert_status(await api.put(f"{CONFIGS}/dog", json=created), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/apis/devplace.io/v1alpha1/widgets"),
        ("GET", "/apis/apps/v1/namespaces/default/configurations"),
        ("GET", "/api/v1/namespaces/default/nodes/a"),
        ("GET", "/apis/devplace.io/v1alpha1/configurations/cam"),
        ("POST", "/api/v1/pods"),
        ("GET", "/no/such/route"),
        ("GET", "/apis/example.com/v1"),
    ],
)
async def test_paths_outside_the_registry_or_the_kinds_scope_are_404_status(
    api: httpx2.AsyncClient, method: str, path: str
) -> None:
    body = json.dumps(node("a")) if method == "POST" else None
    assert_status(await api.request(method, path, content=body), 404, "NotFound")


async def test_an_unsupported_method_is_405_status(api: httpx2.AsyncClient) -> None:
    assert_status(await api.post(f"{NODES}/a", json={}), 405, "MethodNotAllowed")


@pytest.mark.parametrize(
    ("content", "content_type"),
    [(b"{oops", "application/json"), (b"a: [", "application/yaml"), (b"", "application/json"), (b"[1]", None)],
)
async def test_a_body_that_is_not_a_json_or_yaml_object_is_400(
    api: httpx2.AsyncClient, memory_store: MemoryStore, content: bytes, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    assert_status(await api.post(NODES, content=content, headers=headers), 400, "BadRequest")
    assert await memory_store.revision() == 0


async def test_a_ten_megabyte_body_is_413_and_nothing_is_stored(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    huge = {**node("a"), "spec": {"blob": "x" * (10 * 1024 * 1024)}}
    body = assert_status(await api.post(NODES, json=huge), 413, "RequestEntityTooLarge")
    assert "3145728 bytes" in body["message"]
    assert await memory_store.revision() == 0


async def test_a_streamed_body_over_the_limit_is_413_too(memory_store: MemoryStore) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}, "spec": {"blob": "'
        for _ in range(64):
            yield b"y" * 1024
        yield b'"}}'

    app = create_app(memory_store, max_body_bytes=16 * 1024)
    async with serve_app(app) as url, httpx2.AsyncClient(base_url=url) as client:
        response = await client.post(NODES, content=chunks(), headers={"content-type": "application/json"})
    assert_status(response, 413, "RequestEntityTooLarge")
    assert await memory_store.revision() == 0


async def test_a_pod_requesting_a_malformed_quantity_is_422_naming_it(api: httpx2.AsyncClient) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1K"}}}]},
    }
    body = assert_status(await api.post("/api/v1/namespaces/default/pods", json=pod), 422, "Invalid")
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.containers[0].resources.requests.cpu"]
    assert "1K" in body["message"]
    assert (await api.get("/api/v1/namespaces/default/pods")).json()["items"] == []


# -- watch --------------------------------------------------------------------------------------------------------


async def read_events(api: httpx2.AsyncClient, path: str, params: dict[str, str], count: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    # devplace's NDJSON watch: exactly the events after resourceVersion (Kubernetes' JSON form lists first)
    headers = {"Accept": "application/x-ndjson"}
    async with api.stream("GET", path, params={"watch": "1", **params}, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        async for line in response.aiter_lines():
            events.append(json.loads(line))
            if len(events) == count:
                break
    return events


async def test_watch_streams_every_change_after_the_resource_version_as_ndjson(api: httpx2.AsyncClient) -> None:
    created = (await api.post(NODES, json=node("a"))).json()
    await api.put(f"{NODES}/a", json={**created, "metadata": {**created["metadata"], "labels": {"x": "y"}}})
    await api.delete(f"{NODES}/a")
    events = await asyncio.wait_for(read_events(api, NODES, {"resourceVersion": "0"}, 3), 10)
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == [
        ("ADDED", "1"),
        ("MODIFIED", "2"),
        ("DELETED", "3"),
    ]


async def test_watch_without_a_resource_version_starts_when_the_response_starts(api: httpx2.AsyncClient) -> None:
    await api.post(NODES, json=node("old"))
    ndjson = {"Accept": "application/x-ndjson"}  # Kubernetes' JSON form would list "old" first
    async with api.stream("GET", NODES, params={"watch": "true"}, headers=ndjson) as response:
        assert response.status_code == 200  # the store watch is registered before the status is sent
        await api.post(NODES, json=node("new"))
        line = await asyncio.wait_for(anext(response.aiter_lines()), 10)
    event = json.loads(line)
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "new")


@pytest.mark.parametrize(
    ("accept", "media_type"),
    [
        ("application/json", "application/json;stream=watch"),  # kubectl
        ("application/json, */*", "application/json;stream=watch"),
        ("application/x-ndjson", "application/x-ndjson"),
        ("*/*", "application/json;stream=watch"),
    ],
)
async def test_watch_answers_json_stream_watch_unless_ndjson_is_asked_for(
    api: httpx2.AsyncClient, accept: str, media_type: str
) -> None:
    await api.post(NODES, json=node("a"))
    params = {"watch": "1", "resourceVersion": "0"}
    async with api.stream("GET", NODES, params=params, headers={"Accept": accept}) as response:
        assert response.headers["content-type"] == media_type
        event = json.loads(await asyncio.wait_for(anext(response.aiter_lines()), 10))
    assert event["object"]["metadata"]["name"] == "a"


POD_PATH = "/api/v1/namespaces/default/pods"


def pod(name: str, node_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node_name, "containers": [{"name": "main", "image": "x"}]},
    }


async def test_list_and_watch_filter_by_field_selector(api: httpx2.AsyncClient) -> None:
    for name, node_name in [("a", "node-a"), ("b", "node-b"), ("c", "node-a")]:
        assert (await api.post(POD_PATH, json=pod(name, node_name))).status_code == 201
    listed = (await api.get(POD_PATH, params={"fieldSelector": "spec.nodeName=node-a"})).json()
    assert [o["metadata"]["name"] for o in listed["items"]] == ["a", "c"]
    by_name = (await api.get("/api/v1/pods", params={"fieldSelector": "metadata.name=b"})).json()
    assert [o["metadata"]["name"] for o in by_name["items"]] == ["b"]
    params = {"resourceVersion": "0", "fieldSelector": "spec.nodeName=node-b"}
    events = await asyncio.wait_for(read_events(api, POD_PATH, params, 1), 10)
    assert [e["object"]["metadata"]["name"] for e in events] == ["b"]
    store_params = {"resourceVersion": "0", "kind": "Pod", "fieldSelector": "metadata.name=c"}
    events = await asyncio.wait_for(read_events(api, "/store/watch", store_params, 1), 10)
    assert [e["object"]["metadata"]["name"] for e in events] == ["c"]


@pytest.mark.parametrize(
    ("path", "params"),
    [
        (POD_PATH, {"fieldSelector": "spec.hostname=x"}),
        (POD_PATH, {"fieldSelector": "spec.hostname=x", "watch": "1"}),
        (NODES, {"fieldSelector": "spec.nodeName=node-a", "watch": "1"}),
        (CONFIGS, {"fieldSelector": "status.phase=Running"}),
        ("/store/watch", {"kind": "Pod", "fieldSelector": "spec.hostname=x"}),
    ],
)
async def test_an_unsupported_field_selector_is_400_naming_field_selector(
    api: httpx2.AsyncClient, memory_store: MemoryStore, path: str, params: dict[str, str]
) -> None:
    body = assert_status(await api.get(path, params=params), 400, "BadRequest")
    assert [c["field"] for c in body["details"]["causes"]] == ["fieldSelector"]
    assert "field label not supported" in body["message"]
    assert len(memory_store._watchers) == 0


async def test_watch_in_a_namespace_sees_only_that_namespace(api: httpx2.AsyncClient) -> None:
    await api.post("/apis/devplace.io/v1alpha1/namespaces/team/configurations", json=config("other"))
    await api.post(CONFIGS, json=config("mine"))
    events = await asyncio.wait_for(read_events(api, CONFIGS, {"resourceVersion": "0"}, 1), 10)
    assert events[0]["object"]["metadata"]["name"] == "mine"


async def test_watch_from_a_compacted_revision_is_410_before_streaming(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    for name in ("a", "b", "c"):
        await api.post(NODES, json=node(name))
    await memory_store.compact(2)
    ndjson = {"Accept": "application/x-ndjson"}  # Kubernetes' JSON form sends 200, then an ERROR event
    response = await api.get(NODES, params={"watch": "1", "resourceVersion": "1"}, headers=ndjson)
    body = assert_status(response, 410, "Expired")
    assert "compacted" in body["message"]
    assert len(memory_store._watchers) == 0
    events = await asyncio.wait_for(read_events(api, NODES, {"resourceVersion": "2"}, 1), 10)
    assert events[0]["object"]["metadata"]["name"] == "c"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"watch": "maybe"}, "watch"),
        ({"watch": "1", "resourceVersion": "x"}, "resourceVersion"),
        ({"watch": "1", "timeoutSeconds": "-3"}, "timeoutSeconds"),
    ],
)
async def test_malformed_watch_parameters_are_422_naming_them(
    api: httpx2.AsyncClient, params: dict[str, str], field: str
) -> None:
    body = assert_status(await api.get(NODES, params=params), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == field


async def test_watch_with_timeout_seconds_ends_the_stream(api: httpx2.AsyncClient) -> None:
    await api.post(NODES, json=node("a"))
    params = {"watch": "1", "resourceVersion": "0", "timeoutSeconds": "1"}
    async with api.stream("GET", NODES, params=params) as response:
        lines = await asyncio.wait_for(_all_lines(response), 10)
    assert [json.loads(line)["type"] for line in lines] == ["ADDED"]


async def _all_lines(response: httpx2.Response) -> list[str]:
    return [line async for line in response.aiter_lines()]


async def test_a_client_leaving_an_idle_watch_exits_the_store_watch(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    async with api.stream("GET", NODES, params={"watch": "1"}) as response:
        assert response.status_code == 200
        assert len(memory_store._watchers) == 1  # no event was ever sent: only the disconnect can end it
    for _ in range(200):  # the server notices the disconnect asynchronously; bounded poll
        if not memory_store._watchers:
            break
        await asyncio.sleep(0.01)
    assert len(memory_store._watchers) == 0


# -- store paths, health, discovery -------------------------------------------------------------------------------


async def test_store_paths_report_the_revision_compact_and_watch_every_kind(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    await api.post(NODES, json=node("a"))
    await api.post(CONFIGS, json=config())
    assert (await api.get("/store/revision")).json() == {"revision": 2}
    events = await asyncio.wait_for(read_events(api, "/store/watch", {"resourceVersion": "0"}, 2), 10)
    assert [e["object"]["kind"] for e in events] == ["Node", "Configuration"]
    assert (await api.post("/store/compact", json={"revision": 1})).json() == {"revision": 1}
    assert_status(await api.get("/store/watch", params={"resourceVersion": "0"}), 410, "Expired")
    assert_status(await api.post("/store/compact", json={"revision": "one"}), 422, "Invalid")


async def test_healthz_version_and_discovery_answer(api: httpx2.AsyncClient) -> None:
    assert (await api.get("/healthz")).text == "ok"
    assert (await api.get("/version")).json()["devplace"] == __version__
    assert (await api.get("/api")).json()["versions"] == ["v1"]
    groups = {g["name"] for g in (await api.get("/apis")).json()["groups"]}
    assert {"devplace.io", "akri.sh", "apps", "batch"} <= groups
    resources = (await api.get("/apis/akri.sh/v0")).json()["resources"]
    kinds = {(r["name"], r["namespaced"]) for r in resources if "/" not in r["name"]}  # not the subresources
    assert kinds == {("configurations", True), ("instances", True)}
    core = {r["name"] for r in (await api.get("/api/v1")).json()["resources"]}
    assert {"nodes", "pods", "services", "configmaps"} <= core


async def test_the_app_serves_the_fleet_api_under_v2_unless_asked_not_to(memory_store: MemoryStore) -> None:
    async def get_projects(app: Any) -> httpx2.Response:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://test") as client:
            return await client.get("/v2/projects")

    assert (await get_projects(create_app(memory_store))).status_code == 200
    missing = await get_projects(create_app(memory_store, fleet_api=False))
    assert_status(missing, 404, "NotFound")


async def test_openapi_documents_the_resource_routes(api: httpx2.AsyncClient) -> None:
    schema = (await api.get("/openapi.json")).json()
    assert "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}" in schema["paths"]
    assert "/api/{version}/{plural}" in schema["paths"]
    assert "Status" in json.dumps(schema["components"]["schemas"]["KubeStatus"])
