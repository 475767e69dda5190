"""/metrics on the API server: kube-apiserver's request metrics, counted for what a client really did."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import api
from devplace.server._app import create_app
from devplace.server._metrics import request_labels
from devplace.store import MemoryStore
from tests.scrapes import delta, labels, series
from tests.servers import serve_app

INSTANCE = {
    "apiVersion": "akri.sh/v0",
    "kind": "Instance",
    "metadata": {"name": "cam-a1b2c3", "namespace": "default"},
    "spec": {"configurationName": "cam", "capacity": 1, "nodes": ["node-a"], "deviceUsage": {"cam-a1b2c3-0": ""}},
}
INSTANCES = "/apis/akri.sh/v0/namespaces/default/instances"


@pytest.mark.parametrize(
    ("method", "path", "query", "content_type", "expected"),
    [
        ("GET", "/api/v1/namespaces/default/pods/web", "", "", ("GET", "pods")),
        ("HEAD", "/api/v1/namespaces/default/pods/web", "", "", ("GET", "pods")),
        ("GET", "/api/v1/namespaces/default/pods", "", "", ("LIST", "pods")),
        ("GET", "/api/v1/pods", "watch=true", "", ("WATCH", "pods")),
        ("GET", "/api/v1/pods", "watch=1&resourceVersion=5", "", ("WATCH", "pods")),
        ("GET", "/api/v1/pods", "watch=false", "", ("LIST", "pods")),
        ("POST", "/api/v1/namespaces/default/pods", "", "application/json", ("POST", "pods")),
        ("PUT", f"{INSTANCES}/cam-a1b2c3", "", "application/json", ("PUT", "instances")),
        ("PUT", "/api/v1/namespaces/default/pods/web/status", "", "application/json", ("PUT", "pods")),
        ("PATCH", "/api/v1/namespaces/default/pods/web", "", "application/merge-patch+json", ("PATCH", "pods")),
        ("PATCH", "/api/v1/namespaces/default/pods/web", "", "application/apply-patch+yaml", ("APPLY", "pods")),
        ("DELETE", "/api/v1/namespaces/default/pods/web", "", "", ("DELETE", "pods")),
        ("DELETE", "/api/v1/namespaces/default/pods", "", "", ("DELETECOLLECTION", "pods")),
        ("GET", "/api/v1/namespaces/default", "", "", ("GET", "namespaces")),
        ("GET", "/api/v1/namespaces", "", "", ("LIST", "namespaces")),
        ("GET", "/store/watch", "kind=Instance", "", ("WATCH", "instances")),
        ("GET", "/store/watch", "", "", ("WATCH", "store")),
        ("GET", "/store/revision", "", "", ("GET", "store")),
        ("GET", "/api/v1/namespaces/default/made-up-things/x", "", "", ("GET", "")),
        ("GET", "/healthz", "", "", ("GET", "")),
        ("GET", "/v2/projects/p", "", "", ("GET", "")),
    ],
)
def test_a_request_is_labelled_with_kube_apiservers_verb_and_resource(
    method: str, path: str, query: str, content_type: str, expected: tuple[str, str]
) -> None:
    assert request_labels(method, path, query, content_type) == expected


@given(st.text(alphabet="/abcdefghijklmnopqrstuvwxyz-.", max_size=60), st.text(max_size=30))
def test_no_path_makes_a_resource_label_outside_the_served_kinds(path: str, query: str) -> None:
    _, resource = request_labels("GET", path, query)
    assert resource in {"", "store"} | {info.plural for info in api.kinds()}


async def test_the_api_servers_metrics_count_each_request_by_verb_resource_and_code() -> None:
    store = MemoryStore()
    async with serve_app(create_app(store, fleet_api=False)) as base, httpx2.AsyncClient(base_url=base) as client:
        before = series((await client.get("/metrics")).text)
        created = (await client.post(INSTANCES, json=INSTANCE)).json()
        stale = copy.deepcopy(created)
        current = created
        for n in range(3):
            current["metadata"]["labels"] = {"n": str(n)}
            answer = await client.put(f"{INSTANCES}/cam-a1b2c3", json=current)
            assert answer.status_code == 200
            current = answer.json()
        assert (await client.put(f"{INSTANCES}/cam-a1b2c3", json=stale)).status_code == 409
        assert (await client.get(INSTANCES)).status_code == 200
        assert (await client.get(f"{INSTANCES}/nope")).status_code == 404
        after = series((await client.get("/metrics")).text)
        total = "apiserver_request_total"
        assert delta(before, after, total, verb="POST", resource="instances", code="201") == 1
        assert delta(before, after, total, verb="PUT", resource="instances", code="200") == 3
        assert delta(before, after, total, verb="PUT", resource="instances", code="409") == 1
        assert delta(before, after, total, verb="LIST", resource="instances", code="200") == 1
        assert delta(before, after, total, verb="GET", resource="instances", code="404") == 1
        assert delta(before, after, total, verb="GET", resource="", code="200") == 1  # the first /metrics
        duration = "apiserver_request_duration_seconds_count"
        assert delta(before, after, duration, verb="PUT", resource="instances") == 4


async def _gauges(client: httpx2.AsyncClient) -> tuple[float, float]:
    now = series((await client.get("/metrics")).text)
    return (
        now.get(("apiserver_longrunning_requests", labels(verb="WATCH", resource="instances")), 0.0),
        now.get(("apiserver_registered_watchers", labels(kind="Instance")), 0.0),
    )


async def test_an_open_watch_is_a_longrunning_request_and_a_registered_watcher_until_it_ends() -> None:
    store = MemoryStore()
    async with serve_app(create_app(store, fleet_api=False)) as base, httpx2.AsyncClient(base_url=base) as client:
        before = series((await client.get("/metrics")).text)
        assert await _gauges(client) == (0.0, 0.0)
        async with (
            httpx2.AsyncClient(base_url=base) as watcher,
            watcher.stream("GET", INSTANCES, params={"watch": "1"}) as stream,
        ):
            assert stream.status_code == 200
            assert await _gauges(client) == (1.0, 1.0)
        deadline = time.monotonic() + 30  # the server notices the closed connection; a safety net, not a timing
        while await _gauges(client) != (0.0, 0.0):
            assert time.monotonic() < deadline, "the watch was never counted as ended"
            await asyncio.sleep(0.02)
        after: dict[Any, float] = series((await client.get("/metrics")).text)
        assert delta(before, after, "apiserver_request_total", verb="WATCH", resource="instances", code="200") == 1
        assert delta(before, after, "apiserver_request_duration_seconds_count", verb="WATCH", resource="instances") == 0
