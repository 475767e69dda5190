"""The /v2 fleet API over HTTP (httpx2 against the app): EMCO's paths, bodies and status codes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.placement.samples import chart_archive, manifests_text, workload

P = "/v2/projects/p"
CA = f"{P}/composite-apps/ca/v1"
DIG = f"{CA}/deployment-intent-groups/dig"
GPI = f"{DIG}/generic-placement-intents/gpi"
INTENT = f"{DIG}/hpa-intents/i"
CONSUMER = f"{INTENT}/hpa-resource-consumers/c"
CP = "/v2/cluster-providers/cp"

BODIES: list[tuple[str, dict[str, Any]]] = [
    ("/v2/projects", {"metadata": {"name": "p"}}),
    (f"{P}/composite-apps", {"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}}),
    (f"{CA}/apps", {"metadata": {"name": "web"}, "spec": {"manifests": []}}),
    (f"{CA}/deployment-intent-groups", {"metadata": {"name": "dig"}, "spec": {"profile": "p1", "version": "r1"}}),
    (f"{DIG}/generic-placement-intents", {"metadata": {"name": "gpi"}, "spec": {}}),
    (
        f"{GPI}/app-intents",
        {
            "metadata": {"name": "ai"},
            "spec": {"app": "web", "intent": {"allOf": [{"clusterProvider": "cp", "cluster": "c1"}]}},
        },
    ),
    (f"{DIG}/hpa-intents", {"metadata": {"name": "i"}, "spec": {"app": "web"}}),
    (
        f"{INTENT}/hpa-resource-consumers",
        {
            "metadata": {"name": "c"},
            "spec": {
                "consumer": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "container-name": "main"}
            },
        },
    ),
    (f"{CONSUMER}/resource-requirements", {"metadata": {"name": "r"}, "spec": {"name": "cpu", "requests": 1}}),
    (f"{DIG}/intents", {"metadata": {"name": "di"}, "spec": {"intent": {"genericPlacementIntent": "gpi"}}}),
    ("/v2/cluster-providers", {"metadata": {"name": "cp"}}),
    (
        f"{CP}/clusters",
        {
            "metadata": {"name": "c1", "labels": {"gpu": "true"}},
            "spec": {"nodes": [{"name": "n", "allocatable": {"cpu": "8"}}]},
        },
    ),
]


def item_url(collection: str, body: dict[str, Any]) -> str:
    url = f"{collection}/{body['metadata']['name']}"
    if collection.endswith("/composite-apps"):
        url += f"/{body['spec']['compositeAppVersion']}"
    return url


class Swappable:
    """A store whose backend each test replaces: one app (building ~70 routes is slow) serves every test."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


_STORE = Swappable()
_APP = create_app(_STORE)  # type: ignore[arg-type]


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    _STORE.inner = MemoryStore()
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=_APP), base_url="http://fleet") as c:
        yield c


async def populate(client: httpx2.AsyncClient) -> None:
    for collection, body in BODIES:
        r = await client.post(collection, json=body)
        assert r.status_code == 201, (collection, r.text)


async def test_every_collection_supports_the_five_verbs(client: httpx2.AsyncClient) -> None:
    await populate(client)
    for collection, body in reversed(BODIES):  # children first, so deletes are allowed
        item = item_url(collection, body)
        listed = await client.get(collection)
        assert listed.status_code == 200
        assert [b["metadata"]["name"] for b in listed.json()] == [body["metadata"]["name"]]
        got = await client.get(item)
        assert got.status_code == 200
        assert got.json() == body  # exactly what was sent: no defaults added
        changed = {**body, "metadata": {**body["metadata"], "description": "changed"}}
        put = await client.put(item, json=changed)
        assert (put.status_code, put.json()) == (200, changed), put.text
        assert (await client.get(item)).json() == changed
        deleted = await client.delete(item)
        assert (deleted.status_code, deleted.content) == (204, b"")
        assert (await client.get(item)).status_code == 404


async def test_put_creates_a_missing_object_and_answers_200_as_emco(client: httpx2.AsyncClient) -> None:
    r = await client.put("/v2/projects/fresh", json={"metadata": {"name": "fresh"}})
    assert r.status_code == 200
    assert (await client.get("/v2/projects/fresh")).status_code == 200


REQUIREMENT = {"metadata": {"name": "x"}, "spec": {"name": "memory", "requests": 1}}


@pytest.mark.parametrize(
    ("method", "url", "body", "message"),
    [
        ("GET", "/v2/projects/nope", None, 'project "nope" not found'),
        ("GET", "/v2/projects/nope/composite-apps", None, 'project "nope" not found'),
        ("GET", f"{P}/composite-apps/nope/v1", None, 'composite app "nope" version "v1" not found'),
        ("GET", f"{P}/composite-apps/ca/v9/apps", None, 'composite app "ca" version "v9" not found'),
        ("GET", f"{CA}/apps/nope", None, 'app "nope" not found'),
        ("GET", f"{CA}/deployment-intent-groups/nope", None, 'deployment intent group "nope" not found'),
        ("GET", f"{CA}/deployment-intent-groups/nope/hpa-intents", None, 'deployment intent group "nope" not found'),
        ("GET", f"{DIG}/generic-placement-intents/nope", None, 'generic placement intent "nope" not found'),
        ("GET", f"{GPI}/app-intents/nope", None, 'app intent "nope" not found'),
        ("GET", f"{DIG}/hpa-intents/nope", None, 'hpa intent "nope" not found'),
        ("GET", f"{DIG}/hpa-intents/nope/hpa-resource-consumers/c", None, 'hpa intent "nope" not found'),
        ("GET", f"{INTENT}/hpa-resource-consumers/nope", None, 'hpa resource consumer "nope" not found'),
        ("GET", f"{CONSUMER}/resource-requirements/nope", None, 'resource requirement "nope" not found'),
        ("GET", "/v2/cluster-providers/nope", None, 'cluster provider "nope" not found'),
        ("GET", "/v2/cluster-providers/nope/clusters/c1", None, 'cluster provider "nope" not found'),
        ("GET", f"{CP}/clusters/nope", None, 'cluster "nope" not found'),
        ("DELETE", f"{DIG}/hpa-intents/nope", None, 'hpa intent "nope" not found'),
        (
            "PUT",
            f"{INTENT}/hpa-resource-consumers/nope/resource-requirements/x",
            REQUIREMENT,
            'hpa resource consumer "nope" not found',
        ),
        ("POST", "/v2/projects/nope/composite-apps", BODIES[1][1], 'project "nope" not found'),
        (
            "POST",
            f"{CA}/deployment-intent-groups/nope/hpa-intents",
            BODIES[6][1],
            'deployment intent group "nope" not found',
        ),
        ("POST", f"{CA}/deployment-intent-groups/nope/plan", {}, 'deployment intent group "nope" not found'),
        ("POST", f"{CA}/deployment-intent-groups/nope/instantiate", {}, 'deployment intent group "nope" not found'),
        ("GET", f"{CA}/deployment-intent-groups/nope/status", None, 'deployment intent group "nope" not found'),
    ],
)
async def test_missing_levels_are_404_naming_the_level(
    client: httpx2.AsyncClient, method: str, url: str, body: dict[str, Any] | None, message: str
) -> None:
    await populate(client)
    r = await client.request(method, url, json=body)
    assert r.status_code == 404, r.text
    status = r.json()
    assert (status["kind"], status["reason"], status["code"], status["message"]) == ("Status", "NotFound", 404, message)


EMCO_DUPLICATES = [  # EMCO's answer to each collection's duplicate, word for word (its handlers' apiErrors tables)
    "Project already exists",
    "CompositeApp already exists",
    "App already exists",
    "DeploymentIntent already exists",
    "Intent already exists",
    "AppIntent already exists",
    "Intent already exists",
    "Consumer already exists",
    "Resource already exists",
    "Intent already exists",
    "ClusterProvider already exists",
    "Cluster already exists",
]


@pytest.mark.parametrize(
    ("collection", "body", "message"),
    [(c, b, m) for (c, b), m in zip(BODIES, EMCO_DUPLICATES, strict=True)],
    ids=[b["metadata"]["name"] for _, b in BODIES],
)
async def test_duplicates_are_409_with_emcos_text(
    client: httpx2.AsyncClient, collection: str, body: dict[str, Any], message: str
) -> None:
    await populate(client)
    r = await client.post(collection, json=body)
    assert r.status_code == 409
    status = r.json()
    assert (status["kind"], status["reason"], status["code"], status["message"]) == (
        "Status",
        "AlreadyExists",
        409,
        message,
    )


@pytest.mark.parametrize(
    ("url", "child"),
    [
        (P, "composite apps"),
        (CA, "apps"),  # apps come first among a composite app's children
        (DIG, "generic placement intents"),
        (GPI, "app intents"),
        (INTENT, "hpa resource consumers"),
        (CONSUMER, "resource requirements"),
        (CP, "clusters"),
    ],
)
async def test_parents_with_children_refuse_put_and_delete(client: httpx2.AsyncClient, url: str, child: str) -> None:
    await populate(client)
    body = (await client.get(url)).json()
    for method, kw in (("PUT", {"json": body}), ("DELETE", {})):
        r = await client.request(method, url, **kw)
        assert r.status_code == 409, (method, url, r.text)
        assert r.json()["reason"] == "Refused"
        assert f"while it has {child}" in r.json()["message"]
    assert (await client.get(url)).json() == body


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/v2/projects", {"spec": {}}, "metadata"),
        ("/v2/projects", {"metadata": {"name": "bad name"}}, "metadata.name"),
        ("/v2/projects", {"metadata": {"name": "p2", "description": "x" * 1025}}, "metadata.description"),
        ("/v2/projects", {"metadata": {"name": "p2"}, "unknown": 1}, "unknown"),
        (f"{P}/composite-apps", {"metadata": {"name": "ca2"}}, "spec"),
        (f"{CA}/apps", {"metadata": {"name": "a"}, "spec": {"manifests": [{"kind": "Pod"}]}}, "spec.manifests"),
        (
            f"{CONSUMER}/resource-requirements",
            {"metadata": {"name": "w"}, "spec": {"name": "gpu", "requests": 1, "weight": 11}},
            "spec.weight",
        ),
        (
            f"{CONSUMER}/resource-requirements",
            {"metadata": {"name": "r2"}, "spec": {"name": "memory", "requests": 2, "limits": 1}},
            "spec.requests",
        ),
        (
            f"{CONSUMER}/resource-requirements",
            {"metadata": {"name": "r3"}, "spec": {"name": "cpu", "requests": 2}},
            "spec.name",
        ),
        (
            f"{INTENT}/hpa-resource-consumers",
            {"metadata": {"name": "c2"}, "spec": {"consumer": {"apiVersion": "v1", "kind": "Service", "name": "s"}}},
            "spec.consumer.kind",
        ),
        (f"{GPI}/app-intents", {"metadata": {"name": "a2"}, "spec": {"app": "web", "intent": {}}}, "spec.intent"),
        (
            f"{CP}/clusters",
            {"metadata": {"name": "c2"}, "spec": {"nodes": [{"name": "n", "allocatable": {"cpu": "1K"}}]}},
            "spec.nodes[0].allocatable",
        ),
    ],
)
async def test_schema_violations_are_400_naming_the_field(
    client: httpx2.AsyncClient, url: str, body: dict[str, Any], field: str
) -> None:
    await populate(client)
    r = await client.post(url, json=body)
    assert r.status_code == 400, r.text
    status = r.json()
    assert status["message"].startswith("Invalid Input: ")
    assert field in [c["field"] for c in status["details"]["causes"]]


async def test_an_allocatable_requirement_without_a_container_is_400(client: httpx2.AsyncClient) -> None:
    await populate(client)
    bare = {
        "metadata": {"name": "bare"},
        "spec": {"consumer": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
    }
    assert (await client.post(f"{INTENT}/hpa-resource-consumers", json=bare)).status_code == 201
    r = await client.post(
        f"{INTENT}/hpa-resource-consumers/bare/resource-requirements",
        json={"metadata": {"name": "r"}, "spec": {"name": "cpu", "requests": 1}},
    )
    assert r.status_code == 400
    assert "has no container, which is required once an allocatable requirement exists" in r.json()["message"]


@pytest.mark.parametrize(
    ("method", "url"),
    [("POST", "/v2/projects"), ("PUT", P), ("POST", f"{CONSUMER}/resource-requirements"), ("POST", f"{DIG}/plan")],
)
async def test_unparsable_json_is_422(client: httpx2.AsyncClient, method: str, url: str) -> None:
    await populate(client)
    r = await client.request(method, url, content=b'{"metadata": ', headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["kind"] == "Status"


@pytest.mark.parametrize(
    ("url", "message"),
    [(P, "metadata.name: must match the URL (p)"), (CA, "spec.compositeAppVersion: must match the URL (ca/v1)")],
)
async def test_put_with_another_name_than_the_url_is_400(client: httpx2.AsyncClient, url: str, message: str) -> None:
    await populate(client)
    body = (await client.get(url)).json()
    body["metadata"]["name"] = "other" if url == P else body["metadata"]["name"]
    if url == CA:
        body["spec"]["compositeAppVersion"] = "v2"
    r = await client.put(url, json=body)
    assert r.status_code == 400
    assert r.json()["message"] == f"Invalid Input: {message}"


async def test_an_empty_body_is_400(client: httpx2.AsyncClient) -> None:
    r = await client.post("/v2/projects", content=b"", headers={"content-type": "application/json"})
    assert r.status_code == 400


async def test_plan_and_instantiate_accept_an_empty_body(client: httpx2.AsyncClient) -> None:
    await populate(client)
    assert (await client.post(f"{DIG}/plan")).status_code == 200
    assert (await client.post(f"{DIG}/plan", json={})).status_code == 200
    bare = f"{CA}/deployment-intent-groups/bare"  # no intents: the app goes to the one cluster
    assert (await client.post(f"{CA}/deployment-intent-groups", json={"metadata": {"name": "bare"}})).status_code == 201
    assert (await client.post(f"{bare}/approve")).status_code == 202
    r = await client.post(f"{bare}/instantiate")
    assert r.status_code == 202, r.text
    assert [(a["name"], [c["cluster"] for c in a["clusters"]]) for a in r.json()["apps"]] == [("web", ["c1"])]


async def test_the_openapi_document_describes_the_fleet_api(client: httpx2.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    paths = doc["paths"]
    assert set(paths[CA.replace("/p/", "/{project}/").replace("/ca/v1", "/{compositeApp}/{version}")]) == {
        "get",
        "put",
        "delete",
    }
    capp = "/v2/projects/{project}/composite-apps/{compositeApp}/{version}"
    dig = f"{capp}/deployment-intent-groups/{{deploymentIntentGroup}}"
    for verb in ("plan", "instantiate", "approve", "terminate"):
        assert "post" in paths[f"{dig}/{verb}"]
    assert "get" in paths[f"{dig}/status"]
    requirement = paths[f"{dig}/hpa-intents/{{hpaIntent}}/hpa-resource-consumers/{{consumer}}/resource-requirements"][
        "post"
    ]
    assert set(requirement["responses"]) >= {"201", "400", "404", "409", "422"}
    assert "PlacementStatus" in doc["components"]["schemas"]


# -- cluster labels (EMCO's /labels sub-resource) -------------------------------------------------------------------

LABELS = f"{CP}/clusters/c1/labels"


async def labels_listed(client: httpx2.AsyncClient, cluster: str = "c1") -> list[str]:
    r = await client.get(f"{CP}/clusters/{cluster}/labels")
    assert r.status_code == 200, r.text
    return [x["clusterLabel"] for x in r.json()]


async def test_cluster_labels_are_added_listed_read_and_removed(client: httpx2.AsyncClient) -> None:
    await populate(client)
    assert await labels_listed(client) == ["gpu=true"]  # the label given with the cluster
    for body, echoed in [
        ({"clusterLabel": "edge"}, "edge"),
        ({"label-name": "zone=east"}, "zone=east"),  # EMCO 21.x's field name
        ({"clusterLabel": "example.com/qat"}, "example.com/qat"),
    ]:
        r = await client.post(LABELS, json=body)
        assert (r.status_code, r.json()) == (201, {"clusterLabel": echoed})
    assert await labels_listed(client) == ["edge", "example.com/qat", "gpu=true", "zone=east"]
    cluster = (await client.get(f"{CP}/clusters/c1")).json()
    assert cluster == BODIES[-1][1]  # the cluster's body stays as it was sent; its labels live beside it

    assert (await client.get(f"{LABELS}/zone")).json() == {"clusterLabel": "zone=east"}  # the key, any value
    assert (await client.get(f"{LABELS}/zone=east")).json() == {"clusterLabel": "zone=east"}
    assert (await client.get(f"{LABELS}/example.com/qat")).json() == {"clusterLabel": "example.com/qat"}
    missing = await client.get(f"{LABELS}/zone=west")
    assert (missing.status_code, missing.json()["message"]) == (404, 'cluster "c1" has no label "zone=west"')

    for label in ("example.com/qat", "zone=east", "gpu"):
        r = await client.delete(f"{LABELS}/{label}")
        assert (r.status_code, r.content) == (204, b"")
    assert await labels_listed(client) == ["edge"]
    again = await client.delete(f"{LABELS}/gpu")
    assert (again.status_code, again.json()["message"]) == (404, 'cluster "c1" has no label "gpu"')


@pytest.mark.parametrize(
    ("label", "message"),
    [
        ("gpu=true", "Cluster Label already exists"),  # EMCO's text
        ("gpu", 'cluster "c1" already has label "gpu=true" for gpu'),
        ("gpu=false", 'cluster "c1" already has label "gpu=true" for gpu'),
    ],
)
async def test_a_label_whose_key_the_cluster_has_is_409_and_changes_nothing(
    client: httpx2.AsyncClient, label: str, message: str
) -> None:
    await populate(client)
    r = await client.post(LABELS, json={"clusterLabel": label})
    assert (r.status_code, r.json()["message"]) == (409, message)
    assert await labels_listed(client) == ["gpu=true"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"clusterLabel": "bad label"}, "clusterLabel"),
        ({"clusterLabel": "zone=not ok"}, "clusterLabel"),
        ({"clusterLabel": ""}, "clusterLabel"),
        ({}, "clusterLabel"),
        ({"clusterLabel": 7}, "clusterLabel"),
    ],
)
async def test_a_bad_cluster_label_is_400_naming_the_field(
    client: httpx2.AsyncClient, body: dict[str, Any], field: str
) -> None:
    await populate(client)
    r = await client.post(LABELS, json=body)
    assert r.status_code == 400, r.text
    assert r.json()["message"].startswith(f"Invalid Input: {field}"), r.json()["message"]
    assert await labels_listed(client) == ["gpu=true"]


@pytest.mark.parametrize(
    ("method", "url", "missing"),
    [
        ("GET", "/v2/cluster-providers/nope/clusters/c1/labels", 'cluster provider "nope"'),
        ("GET", f"{CP}/clusters/nope/labels", 'cluster "nope"'),
        ("POST", f"{CP}/clusters/nope/labels", 'cluster "nope"'),
        ("GET", f"{CP}/clusters/nope/labels/gpu", 'cluster "nope"'),
        ("DELETE", f"{CP}/clusters/nope/labels/gpu", 'cluster "nope"'),
    ],
)
async def test_labels_of_a_missing_cluster_are_404_naming_the_level(
    client: httpx2.AsyncClient, method: str, url: str, missing: str
) -> None:
    await populate(client)
    r = await client.request(method, url, json={"clusterLabel": "edge"} if method == "POST" else None)
    assert (r.status_code, r.json()["message"]) == (404, f"{missing} not found")


async def test_a_label_added_over_the_api_is_what_the_next_plan_selects_by(client: httpx2.AsyncClient) -> None:
    await populate(client)
    node = {"name": "n", "allocatable": {"cpu": "8"}}
    r = await client.post(f"{CP}/clusters", json={"metadata": {"name": "c2"}, "spec": {"nodes": [node]}})
    assert r.status_code == 201
    edge = f"{CA}/deployment-intent-groups/edge"
    await client.post(f"{CA}/deployment-intent-groups", json={"metadata": {"name": "edge"}})
    await client.post(f"{edge}/generic-placement-intents", json={"metadata": {"name": "g"}})
    intent = {"app": "web", "intent": {"allOf": [{"clusterProvider": "cp", "clusterLabel": "edge"}]}}
    r = await client.post(
        f"{edge}/generic-placement-intents/g/app-intents", json={"metadata": {"name": "a"}, "spec": intent}
    )
    assert r.status_code == 201, r.text

    before = (await client.post(f"{edge}/plan")).json()
    assert before["state"] == "Failed"
    assert (await client.post(f"{CP}/clusters/c2/labels", json={"clusterLabel": "edge"})).status_code == 201
    after = (await client.post(f"{edge}/plan")).json()
    assert after["state"] == "Planned", after
    assert [c["cluster"] for c in after["apps"][0]["clusters"]] == ["c2"]


# -- EMCO's other routes ------------------------------------------------------------------------------------------


async def test_a_collection_delete_deletes_nothing_while_any_member_has_children(client: httpx2.AsyncClient) -> None:
    await populate(client)
    await client.post(f"{DIG}/hpa-intents", json={"metadata": {"name": "i2"}, "spec": {"app": "web"}})
    refused = await client.delete(f"{DIG}/hpa-intents")
    assert refused.status_code == 409
    assert "cannot be deleted while it has hpa resource consumers ('c')" in refused.json()["message"]
    assert [b["metadata"]["name"] for b in (await client.get(f"{DIG}/hpa-intents")).json()] == ["i", "i2"]
    assert (await client.delete(f"{INTENT}/hpa-resource-consumers/c/resource-requirements")).status_code == 204
    assert (await client.delete(f"{INTENT}/hpa-resource-consumers")).status_code == 204
    assert (await client.delete(f"{DIG}/hpa-intents")).status_code == 204
    assert (await client.get(f"{DIG}/hpa-intents")).json() == []
    missing = await client.delete(f"{CA}/deployment-intent-groups/nope/hpa-intents")
    assert (missing.status_code, missing.json()["message"]) == (404, 'deployment intent group "nope" not found')


async def test_a_cluster_label_put_sets_it_and_must_name_the_url_label(client: httpx2.AsyncClient) -> None:
    await populate(client)
    r = await client.put(f"{LABELS}/zone=east", json={"clusterLabel": "zone=east"})
    assert (r.status_code, r.json()) == (200, {"clusterLabel": "zone=east"})
    r = await client.put(f"{LABELS}/zone=west", json={"metadata": {"name": ""}, "clusterLabel": "zone=west"})
    assert r.status_code == 200
    assert await labels_listed(client) == ["gpu=true", "zone=west"]  # one value per key
    wrong = await client.put(f"{LABELS}/zone=east", json={"clusterLabel": "edge"})
    assert (wrong.status_code, wrong.json()["message"]) == (
        400,
        "Invalid Input: clusterLabel: must match the URL (zone=east)",
    )


async def test_clusters_are_found_by_label(client: httpx2.AsyncClient) -> None:
    await populate(client)
    await client.post(f"{CP}/clusters", json={"metadata": {"name": "c2"}})
    assert (await client.get(f"{CP}/clusters", params={"label": "gpu"})).json() == ["c1"]
    assert (await client.get(f"{CP}/clusters", params={"label": "gpu=false"})).json() == []
    listed = (await client.get(f"{CP}/clusters", params={"withLabels": "true"})).json()
    assert listed == [
        {"metadata": {"name": "c1", "labels": {"gpu": "true"}}, "labels": [{"clusterLabel": "gpu=true"}]},
        {"metadata": {"name": "c2"}, "labels": []},
    ]
    bad = await client.get(f"{CP}/clusters", params={"withLabels": "maybe"})
    assert (bad.status_code, bad.json()["message"]) == (
        400,
        "Invalid Input: withLabels: 'maybe' is not one of true, false",
    )


APP_BODY = {"metadata": {"name": "chart-app"}}


def form(body: dict[str, Any], filename: str | None = None, data: bytes = b"") -> dict[str, Any]:
    out: dict[str, Any] = {"data": {"metadata": json.dumps(body)}}
    if filename is not None:
        out["files"] = {"file": (filename, data)}
    return out


@pytest.mark.parametrize(
    ("url", "request_kw", "code", "message"),
    [
        (
            f"{CA}/apps",
            form(APP_BODY, "c.tgz", chart_archive("c", {"d.yaml": "metadata:\n  name: {{ .Release.Name }}\n"})),
            400,
            "Invalid Input: file: c/templates/d.yaml needs Helm's template engine ('{{' on line 2)",
        ),
        (
            f"{CA}/apps",
            form(
                {**APP_BODY, "spec": {"manifests": [workload("Pod", "p", "c")]}},
                "c.tgz",
                chart_archive("c", {"d.yaml": manifests_text(workload("Pod", "p", "c"))}),
            ),
            400,
            "Invalid Input: spec.manifests: give the app's manifests or a chart archive, not both",
        ),
        (
            "/v2/projects",
            form({"metadata": {"name": "p2"}}, "x", b"x"),
            400,
            "Invalid Input: file: a project takes no file",
        ),
        (
            f"{CP}/clusters",
            {"data": {"other": "x"}, "files": {"file": ("k", b"x")}},
            400,
            "Invalid Input: metadata: required",
        ),
        (f"{CP}/clusters", {"data": {"metadata": "{"}}, 422, "the metadata part is not valid JSON"),
        (
            f"{CP}/clusters",
            form({"metadata": {"name": "c3"}}, "kubeconfig", b"clusters: []"),
            400,
            "Invalid Input: file: kubeconfig: no current-context, and not exactly one cluster to choose",
        ),
    ],
)
async def test_bad_multipart_registrations_are_refused_and_change_nothing(
    client: httpx2.AsyncClient, url: str, request_kw: dict[str, Any], code: int, message: str
) -> None:
    await populate(client)
    before = (await client.get(url)).json()
    r = await client.post(url, **request_kw)
    assert r.status_code == code, r.text
    assert r.json()["message"].startswith(message), r.json()["message"]
    assert (await client.get(url)).json() == before


async def test_an_app_registered_with_a_chart_is_placed_from_its_templates(client: httpx2.AsyncClient) -> None:
    await populate(client)
    chart = chart_archive("c", {"web.yaml": manifests_text(workload("Deployment", "chart-web", "main"))})
    r = await client.post(f"{CA}/apps", **form(APP_BODY, "c.tgz", chart))
    assert (r.status_code, r.json()) == (201, APP_BODY)
    assert (await client.get(f"{CA}/apps/chart-app")).json() == APP_BODY  # the body, not the chart
    await client.post(f"{CA}/deployment-intent-groups", json={"metadata": {"name": "plain"}})
    plan = (await client.post(f"{CA}/deployment-intent-groups/plain/plan")).json()
    app = next(a for a in plan["apps"] if a["name"] == "chart-app")
    assert [r["manifest"]["metadata"]["name"] for r in app["resources"]] == ["chart-web"]
