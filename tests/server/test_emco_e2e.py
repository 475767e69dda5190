"""Acceptance: seed 004's usage example end to end over HTTP against a real uvicorn on 127.0.0.1.

Fleet (tests/placement/samples.py): cluster-1 has a GPU node, cluster-2 is big and plain, cluster-3 has the only QAT,
cluster-4 is too small, cluster-7 is big without QAT. fwall (core-fwall + api-server) and analytics (ai-model +
logger) carry the seed's six requirements; a generic intent puts analytics on any of cluster-3 and cluster-7.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import kubernetes_validate
import pytest

from devplace.server._app import create_app
from devplace.store import MemoryStore, Store
from devplace.store._sqlite import SqliteStore
from tests.placement.samples import (
    ANALYTICS_ANY_OF,
    ANALYTICS_MANIFESTS,
    FWALL_MANIFESTS,
    SEED_CLUSTERS,
    seed_intents,
    workload,
)
from tests.servers import serve_app

CAPP = "/v2/projects/my-proj1/composite-apps/my-capp1/v1.0"
DIG = f"{CAPP}/deployment-intent-groups/my-dig1"


@pytest.fixture(params=["memory", "sqlite"])
async def base_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    store: Store = MemoryStore() if request.param == "memory" else SqliteStore(str(tmp_path / "fleet.db"))
    try:
        async with serve_app(create_app(store)) as url:
            yield url
    finally:
        await store.close()


async def post(client: httpx2.AsyncClient, url: str, body: dict[str, Any]) -> None:
    r = await client.post(url, json=body)
    assert r.status_code == 201, (url, r.status_code, r.text)


async def register_seed(client: httpx2.AsyncClient, clusters: dict[str, list[dict[str, Any]]]) -> None:
    await post(client, "/v2/cluster-providers", {"metadata": {"name": "edge"}})
    for name, nodes in clusters.items():
        await post(
            client, "/v2/cluster-providers/edge/clusters", {"metadata": {"name": name}, "spec": {"nodes": nodes}}
        )
    await post(client, "/v2/projects", {"metadata": {"name": "my-proj1"}})
    await post(
        client,
        "/v2/projects/my-proj1/composite-apps",
        {"metadata": {"name": "my-capp1"}, "spec": {"compositeAppVersion": "v1.0"}},
    )
    await post(client, f"{CAPP}/apps", {"metadata": {"name": "fwall"}, "spec": {"manifests": FWALL_MANIFESTS}})
    await post(client, f"{CAPP}/apps", {"metadata": {"name": "analytics"}, "spec": {"manifests": ANALYTICS_MANIFESTS}})
    await post(client, f"{CAPP}/deployment-intent-groups", {"metadata": {"name": "my-dig1"}, "spec": {}})
    await post(client, f"{DIG}/generic-placement-intents", {"metadata": {"name": "gpi"}, "spec": {}})
    await post(client, f"{DIG}/generic-placement-intents/gpi/app-intents", ANALYTICS_ANY_OF)
    for intent, consumers in seed_intents():
        await post(client, f"{DIG}/hpa-intents", intent)
        intent_url = f"{DIG}/hpa-intents/{intent['metadata']['name']}/hpa-resource-consumers"
        for consumer, requirements in consumers:
            await post(client, intent_url, consumer)
            for requirement in requirements:
                await post(client, f"{intent_url}/{consumer['metadata']['name']}/resource-requirements", requirement)


def with_resources(obj: dict[str, Any], resources: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = resources
    return obj


def app(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(a for a in doc["apps"] if a["name"] == name)


NO_QAT = "no node has intel.com/qat >= 1 (max 0) for logger"
NOT_SELECTED = "not selected by generic placement intent gpi/analytics-placement"

EXPECTED_FWALL = [
    with_resources(
        workload("StatefulSet", "core-fwall", "palo-alto-e3000"),
        {
            "requests": {"cpu": "4", "memory": "1G", "nvidia.com/gpu": "1"},
            "limits": {"cpu": "4", "memory": "1G", "nvidia.com/gpu": "1"},
        },
    ),
    with_resources(
        workload("Deployment", "api-server", "nginx"),
        {"requests": {"cpu": "1", "memory": "200M"}, "limits": {"cpu": "2"}},
    ),
]
EXPECTED_ANALYTICS = [
    with_resources(workload("StatefulSet", "ai-model", "openvino"), {"requests": {"cpu": "2"}}),
    with_resources(
        workload("Deployment", "logger", "logger"),
        {"requests": {"intel.com/qat": "1"}, "limits": {"intel.com/qat": "1"}},
    ),
]


async def test_the_seed_example_end_to_end(base_url: str) -> None:
    async with httpx2.AsyncClient(base_url=base_url, timeout=30) as client:
        await register_seed(client, SEED_CLUSTERS)

        plan = await client.post(f"{DIG}/plan", json={})
        assert plan.status_code == 200
        doc = plan.json()
        assert (doc["state"], doc["dryRun"], doc["errors"]) == ("Planned", True, [])
        status = (await client.get(f"{DIG}/status")).json()
        assert [a["state"] for a in status["states"]["actions"]] == ["Created"]  # a dry run commits nothing

        fwall = app(doc, "fwall")
        assert fwall["clusters"] == [{"clusterProvider": "edge", "cluster": "cluster-1", "replicas": 2, "score": 9.0}]
        assert fwall["qualified"] == 4  # the GPU (optional, weight 9) picked cluster-1 among 1, 2, 3 and 7
        assert fwall["rejected"] == [
            {"clusterProvider": "edge", "cluster": "cluster-4", "reason": "no node has cpu >= 4 (max 2) for core-fwall"}
        ]
        assert [r["manifest"] for r in fwall["resources"]] == EXPECTED_FWALL
        assert {r["cluster"] for r in fwall["resources"]} == {"cluster-1"}
        assert fwall["warnings"] == []  # core-fwall's exclusive CPUs are set up right: 4 == 4 cpus, 1G == 1G

        analytics = app(doc, "analytics")
        assert analytics["clusters"] == [
            {"clusterProvider": "edge", "cluster": "cluster-3", "replicas": 2, "score": 0.0}
        ]
        assert analytics["rejected"] == [
            {"clusterProvider": "edge", "cluster": "cluster-1", "reason": f"{NOT_SELECTED}; {NO_QAT}"},
            {"clusterProvider": "edge", "cluster": "cluster-2", "reason": f"{NOT_SELECTED}; {NO_QAT}"},
            {"clusterProvider": "edge", "cluster": "cluster-4", "reason": f"{NOT_SELECTED}; {NO_QAT}"},
            {"clusterProvider": "edge", "cluster": "cluster-7", "reason": NO_QAT},
        ]
        assert [r["manifest"] for r in analytics["resources"]] == EXPECTED_ANALYTICS
        for entry in fwall["resources"] + analytics["resources"]:
            kubernetes_validate.validate(entry["manifest"], "1.37.0", strict=True)

        early = await client.post(f"{DIG}/instantiate", json={})
        assert (early.status_code, early.json()["message"]) == (
            409,
            'deployment intent group "my-dig1" must be approved before it is instantiated',
        )
        assert (await client.post(f"{DIG}/approve", json={})).status_code == 202
        instantiated = await client.post(f"{DIG}/instantiate", json={})
        assert instantiated.status_code == 202
        committed = instantiated.json()
        assert committed == {**doc, "state": "Instantiated", "dryRun": False}
        assert (await client.get(f"{DIG}/status")).json()["placement"] == committed

        again = await client.post(f"{DIG}/instantiate", json={})
        assert again.status_code == 409
        assert "already instantiated" in again.json()["message"]
        refused = await client.delete(DIG)
        assert refused.status_code == 409
        terminated = await client.post(f"{DIG}/terminate", json={})
        assert terminated.status_code == 202
        assert terminated.json()["state"] == "Terminated"


async def test_without_a_gpu_fwall_goes_elsewhere_without_one(base_url: str) -> None:
    clusters = {k: v for k, v in SEED_CLUSTERS.items() if k != "cluster-1"}
    async with httpx2.AsyncClient(base_url=base_url, timeout=30) as client:
        await register_seed(client, clusters)
        doc = (await client.post(f"{DIG}/plan", json={})).json()
        fwall = app(doc, "fwall")
        assert [c["cluster"] for c in fwall["clusters"]] == ["cluster-2"]  # no scores: lowest name of 2, 3, 7
        core = fwall["resources"][0]["manifest"]["spec"]["template"]["spec"]["containers"][0]["resources"]
        assert core == {"requests": {"cpu": "4", "memory": "1G"}, "limits": {"cpu": "4", "memory": "1G"}}


async def test_an_unplaceable_app_fails_the_whole_instantiation(base_url: str) -> None:
    clusters = {k: v for k, v in SEED_CLUSTERS.items() if k != "cluster-3"}
    async with httpx2.AsyncClient(base_url=base_url, timeout=30) as client:
        await register_seed(client, clusters)
        assert (await client.post(f"{DIG}/approve", json={})).status_code == 202
        r = await client.post(f"{DIG}/instantiate", json={})
        assert r.status_code == 409
        message = r.json()["message"]
        assert message.startswith(
            'instantiation of deployment intent group "my-dig1" failed: app analytics: needs 1 cluster'
        )
        assert f"edge/cluster-7: {NO_QAT}" in message
        status = (await client.get(f"{DIG}/status")).json()["placement"]
        assert status["state"] == "Failed"
        assert [a["resources"] for a in status["apps"]] == [[], []]  # nothing deployable from a failed decision
        assert app(status, "fwall")["clusters"][0]["cluster"] == "cluster-1"  # what fwall alone would have got
