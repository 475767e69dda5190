"""The /status and /scale subresources over HTTP: each writes only its part, by compare-and-swap."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.servers import serve_app

CONFIGS = "/apis/devplace.io/v1alpha1/namespaces/default/configurations"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    async with (
        serve_app(create_app(memory_store, fleet_api=False)) as url,
        httpx2.AsyncClient(base_url=url, timeout=10) as client,
    ):
        yield client


def config(name: str = "cam") -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": name},
        "spec": {"discoveryHandler": {"name": "debugEcho"}, "capacity": 2},
    }


def deployment(replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}},
        },
    }


async def test_a_status_put_writes_the_status_and_nothing_else(api: httpx2.AsyncClient) -> None:
    created = (await api.post(CONFIGS, json=config())).json()
    body = {
        **created,
        "metadata": {**created["metadata"], "labels": {"sneaked": "in"}},
        "spec": {"discoveryHandler": {"name": "other"}},
        "status": {"brokers": {"desired": 1}},
    }
    response = await api.put(f"{CONFIGS}/cam/status", json=body)
    assert response.status_code == 200, response.text
    stored = (await api.get(f"{CONFIGS}/cam")).json()
    assert stored["status"] == {"brokers": {"desired": 1}}
    assert stored["spec"] == created["spec"]
    assert "labels" not in stored["metadata"]
    assert stored["metadata"]["generation"] == created["metadata"]["generation"]
    assert stored["metadata"]["resourceVersion"] == "2"
    assert (await api.get(f"{CONFIGS}/cam/status")).json() == stored


async def test_a_status_put_with_a_stale_resource_version_is_409_and_without_one_lands(api: httpx2.AsyncClient) -> None:
    created = (await api.post(CONFIGS, json=config())).json()
    await api.put(f"{CONFIGS}/cam/status", json={**created, "status": {"n": 1}})
    stale = await api.put(f"{CONFIGS}/cam/status", json={**created, "status": {"n": 2}})
    assert stale.status_code == 409, stale.text
    assert stale.json()["reason"] == "Conflict"
    unconditional = {"metadata": {"name": "cam"}, "status": {"n": 3}}
    landed = await api.put(f"{CONFIGS}/cam/status", json=unconditional)
    assert landed.status_code == 200, landed.text
    assert (await api.get(f"{CONFIGS}/cam")).json()["status"] == {"n": 3}


async def test_a_status_that_does_not_validate_is_422_and_changes_nothing(api: httpx2.AsyncClient) -> None:
    rc = {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": {"name": "gpu"},
        "spec": {"resourceSelector": [{"matchExpressions": [{"key": "Kind", "operator": "In", "values": ["gpu"]}]}]},
    }
    created = (await api.post("/apis/devplace.io/v1alpha1/resourceclasses", json=rc)).json()
    bad = await api.put(
        "/apis/devplace.io/v1alpha1/resourceclasses/gpu/status", json={**created, "status": {"allocatable": "1K"}}
    )
    assert bad.status_code == 422, bad.text
    assert bad.json()["details"]["causes"][0]["field"].startswith("status.allocatable")
    assert (await api.get("/apis/devplace.io/v1alpha1/resourceclasses/gpu")).json() == created


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/default/configmaps/x/status",
        f"{CONFIGS}/cam/scale",
        "/api/v1/namespaces/default/pods/p/scale",
    ],
)
async def test_kinds_without_the_subresource_answer_404(api: httpx2.AsyncClient, path: str) -> None:
    response = await api.get(path)
    assert response.status_code == 404, response.text
    assert response.json()["reason"] == "NotFound"


async def test_scale_reads_and_writes_a_deployments_replicas(api: httpx2.AsyncClient) -> None:
    created = (await api.post(DEPLOYMENTS, json=deployment(2))).json()
    scale = (await api.get(f"{DEPLOYMENTS}/web/scale")).json()
    assert (scale["kind"], scale["apiVersion"], scale["spec"], scale["status"]) == (
        "Scale",
        "autoscaling/v1",
        {"replicas": 2},
        {"replicas": 0, "selector": "app=web"},
    )
    scaled = await api.put(f"{DEPLOYMENTS}/web/scale", json={**scale, "spec": {"replicas": 5}})
    assert scaled.status_code == 200, scaled.text
    assert scaled.json()["spec"] == {"replicas": 5}
    stored = (await api.get(f"{DEPLOYMENTS}/web")).json()
    assert stored["spec"] == {**created["spec"], "replicas": 5}
    stale = await api.put(f"{DEPLOYMENTS}/web/scale", json={**scale, "spec": {"replicas": 1}})
    assert stale.status_code == 409, stale.text
    negative = await api.put(f"{DEPLOYMENTS}/web/scale", json={"spec": {"replicas": -1}})
    assert negative.status_code == 422
    assert negative.json()["details"]["causes"][0]["field"] == "spec.replicas"


async def test_subresource_dry_runs_store_nothing(api: httpx2.AsyncClient) -> None:
    await api.post(DEPLOYMENTS, json=deployment(2))
    dry = await api.put(f"{DEPLOYMENTS}/web/scale", params={"dryRun": "All"}, json={"spec": {"replicas": 9}})
    assert dry.json()["spec"] == {"replicas": 9}
    created = (await api.post(CONFIGS, json=config())).json()
    dry_status = await api.put(f"{CONFIGS}/cam/status", params={"dryRun": "All"}, json={**created, "status": {"x": 1}})
    assert dry_status.json()["status"] == {"x": 1}
    assert (await api.get(f"{DEPLOYMENTS}/web")).json()["spec"]["replicas"] == 2
    assert "status" not in (await api.get(f"{CONFIGS}/cam")).json()
