"""EMCO's own negative cases and query answers, replayed over HTTP against a real uvicorn on 127.0.0.1.

The objects are those of EMCO's integration suite (its `test_list.py` flows: project `proj1`, composite app
`monitor-composite-app` v1, app `monitor`, placement intent `collection-placement-intent` placing `monitor` on clusters
labelled `edge-cluster` of `provider1`, cluster `cluster1`) plus the hpa objects of its curl flow; each case states
what EMCO answers there, read from its handlers and routes (facts, not EMCO's files). EMCO's router tries its routes in
order: a collection's GET comes before its look-up route, so a GET with `?resource=` lists, and only the method QUERY
(which EMCO's curl examples use) reaches the look-up; the app look-up route is `app-intents/` (with the slash) and needs
`app`. Where EMCO's answer is a text, devplace's `Status` carries it as `message`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.servers import serve_app

Obj = dict[str, Any]

CA = "/v2/projects/proj1/composite-apps/monitor-composite-app/v1"
DIG = f"{CA}/deployment-intent-groups/collection-deployment-intent-group"
GPI = f"{DIG}/generic-placement-intents/collection-placement-intent"
CONSUMER = f"{DIG}/hpa-intents/hpa-intent-1/hpa-resource-consumers/hpa-consumer-1"
RESOURCES = f"{CONSUMER}/resource-requirements"
CLUSTERS = "/v2/cluster-providers/provider1/clusters"

APP_INTENT_SPEC = {
    "app": "monitor",
    "intent": {"allOf": [{"clusterProvider": "provider1", "clusterLabel": "edge-cluster"}]},
}
CPU = {
    "metadata": {"name": "hpa-alloc-resource-1"},
    "spec": {"allocatable": True, "mandatory": True, "weight": 1, "resource": {"name": "cpu", "requests": 1}},
}
SETUP: list[tuple[str, Obj]] = [
    ("/v2/projects", {"metadata": {"name": "proj1"}}),
    ("/v2/projects/proj1/composite-apps", {"metadata": {"name": "monitor-composite-app"}, "spec": {"version": "v1"}}),
    (f"{CA}/apps", {"metadata": {"name": "monitor"}, "spec": {"manifests": []}}),
    (f"{CA}/deployment-intent-groups", {"metadata": {"name": "collection-deployment-intent-group"}, "spec": {}}),
    (f"{DIG}/generic-placement-intents", {"metadata": {"name": "collection-placement-intent"}, "spec": {}}),
    (f"{GPI}/app-intents", {"metadata": {"name": "monitor-placement"}, "spec": APP_INTENT_SPEC}),
    (f"{DIG}/hpa-intents", {"metadata": {"name": "hpa-intent-1"}, "spec": {"app-name": "monitor"}}),
    (
        f"{DIG}/hpa-intents/hpa-intent-1/hpa-resource-consumers",
        {
            "metadata": {"name": "hpa-consumer-1"},
            "spec": {"api-version": "v19", "kind": "Deployment", "name": "monitor", "container-name": "main"},
        },
    ),
    (RESOURCES, CPU),
    ("/v2/cluster-providers", {"metadata": {"name": "provider1"}}),
    (CLUSTERS, {"metadata": {"name": "cluster1"}}),
    (f"{CLUSTERS}/cluster1/labels", {"clusterLabel": "edge-cluster"}),
]


@pytest.fixture
async def fleet() -> AsyncIterator[httpx2.AsyncClient]:
    async with (
        serve_app(create_app(MemoryStore())) as url,
        httpx2.AsyncClient(base_url=url, timeout=30, follow_redirects=False) as client,
    ):
        for collection, body in SETUP:
            r = await client.post(collection, json=body)
            assert r.status_code == 201, (collection, r.text)
        yield client


@pytest.mark.parametrize(
    ("method", "url", "answer"),
    [
        # app-intents/?app=NAME: the spec of the app's intent (EMCO's test_queryIntentForApp answer)
        ("GET", f"{GPI}/app-intents/?app=monitor", APP_INTENT_SPEC),
        ("QUERY", f"{GPI}/app-intents/?app=monitor", APP_INTENT_SPEC),
        ("GET", f"{GPI}/app-intents/?app=nosuchmonitor", {"intent": {}}),  # EMCO's empty SpecData
        # resource-requirements?resource=NAME: the requirement with QUERY, the list with GET
        ("QUERY", f"{RESOURCES}?resource=hpa-alloc-resource-1", CPU),
        ("GET", f"{RESOURCES}?resource=hpa-alloc-resource-1", [CPU]),
        ("GET", f"{RESOURCES}?resource=nosuchresource", [CPU]),
        # clusters?label=: the names of the clusters with the label; none is an empty list; `label=` lists them all
        ("GET", f"{CLUSTERS}?label=edge-cluster", ["cluster1"]),
        ("GET", f"{CLUSTERS}?label=nosuchlabel", []),
        ("GET", f"{CLUSTERS}?label=", [{"metadata": {"name": "cluster1"}}]),
    ],
)
async def test_query_answers_have_emcos_shapes(fleet: httpx2.AsyncClient, method: str, url: str, answer: Any) -> None:
    r = await fleet.request(method, url)
    assert (r.status_code, r.json()) == (200, answer)


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("GET", "/v2/nothing"),
        ("GET", "/v2/projects/proj1/composite-apps/monitor-composite-app"),  # no version: no route
        ("GET", f"{GPI}/app-intents/?app-name=nosuchmonitor"),  # EMCO's test_queryIntentForAppNeg404NoSuchAppIntent
        ("GET", f"{GPI}/app-intents/"),
        ("DELETE", f"{CA}/apps/monitor/extra"),
    ],
)
async def test_a_route_emco_does_not_have_is_404_page_not_found(
    fleet: httpx2.AsyncClient, method: str, url: str
) -> None:
    r = await fleet.request(method, url)
    assert r.status_code == 404
    status = r.json()
    assert (status["kind"], status["reason"], status["message"]) == ("Status", "NotFound", "404 page not found")


async def test_a_missing_name_looked_up_with_query_is_404(fleet: httpx2.AsyncClient) -> None:
    r = await fleet.request("QUERY", f"{RESOURCES}?resource=nosuchresource")
    assert (r.status_code, r.json()["message"]) == (404, 'resource requirement "nosuchresource" not found')


@pytest.mark.parametrize(
    "resource",
    [{"key": "nvidia.com/cuda.runtime.major", "value": ""}, {"key": "nvidia.com/cuda.runtime.major"}],
    ids=["empty", "absent"],
)
async def test_a_label_requirement_without_a_value_is_400_and_not_stored(
    fleet: httpx2.AsyncClient, resource: Obj
) -> None:
    body = {"metadata": {"name": "hpa-non-alloc-resource-1"}, "spec": {"allocatable": False, "resource": resource}}
    r = await fleet.post(RESOURCES, json=body)
    assert r.status_code == 400, r.text
    status = r.json()
    assert status["message"].startswith("Invalid Input: spec.resource.value: ")
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.resource.value"]
    assert (await fleet.get(f"{RESOURCES}/hpa-non-alloc-resource-1")).status_code == 404


async def test_a_duplicate_resource_is_409_with_emcos_text(fleet: httpx2.AsyncClient) -> None:
    r = await fleet.post(RESOURCES, json=CPU)
    assert (r.status_code, r.json()["reason"], r.json()["message"]) == (409, "AlreadyExists", "Resource already exists")
