"""The Deployment status the API server answers, devplace running no Deployment controller (`server/_deployments.py`):
the pure rule as a table, then over HTTP on a real uvicorn (memory store, fake clock): creates and spec changes are
answered and told by an Event, a status somebody else wrote is never overwritten, and a server over a `kube://` store
(a Kubernetes API server, whose own controller owns the status) answers nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace.clocks import FakeClock
from devplace.server._app import create_app
from devplace.server._deployments import (
    NO_CONTROLLER,
    Answer,
    AnsweringStore,
    answer,
    answers_for,
    is_ours,
)
from devplace.store import EventRecorder, MemoryStore
from devplace.store._kube import KubeStore
from devplace.store._kubeconfigs import ServerConfig
from devplace.store._remote import RemoteStore
from tests.servers import serve_app

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
WEB = f"{DEPLOYMENTS}/web"
EVENTS = "/api/v1/namespaces/default/events"
T0 = "1970-01-01T00:00:00Z"
T5 = "1970-01-01T00:00:05Z"
D0, D5, D10 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z", "2026-01-01T00:00:10Z"
"""The fake clock's start, 5 s and 10 s later."""
MERGE = {"content-type": "application/merge-patch+json"}


def deployment(replicas: int = 2, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "w", "image": "x"}]}},
        },
    }
    if status is not None:
        obj["status"] = status
    return obj


def ours(generation: int, updated: str = T0, since: str = T0) -> dict[str, Any]:
    condition = {
        "type": "Progressing",
        "status": "False",
        "reason": "ProgressDeadlineExceeded",
        "message": NO_CONTROLLER,
        "lastUpdateTime": updated,
        "lastTransitionTime": since,
    }
    return {"observedGeneration": generation, "conditions": [condition]}


CONTROLLERS = {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}


# -- the rule -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "generation", "expected"),
    [
        (None, deployment(), 1, Answer(ours(1, T5, T5), fresh=True)),  # a create without a status
        (None, deployment(status={}), 1, Answer(ours(1, T5, T5), fresh=True)),  # an empty one is none
        (None, deployment(status=ours(7)), 1, Answer(ours(1, T5, T5), fresh=True)),  # a copied answer, re-made
        (None, deployment(status=CONTROLLERS), 1, None),  # the writer's own status stands
        (deployment(status=ours(1)), deployment(3, ours(1)), 2, Answer(ours(2, T5, T0), fresh=True)),  # spec moved
        (deployment(status=ours(1)), deployment(2, {}), 2, Answer(ours(2, T5, T0), fresh=True)),
        (deployment(status=ours(1)), deployment(2, ours(1)), 1, Answer(ours(1), fresh=False)),  # labels only
        (deployment(status=ours(1)), deployment(2), 1, Answer(ours(1), fresh=False)),  # a PUT without status
        (deployment(), deployment(), 1, Answer(ours(1, T5, T5), fresh=True)),  # stored before the server answered
        (deployment(status=CONTROLLERS), deployment(3, CONTROLLERS), 2, None),  # a controller's, kept
        (deployment(status=CONTROLLERS), deployment(3), 2, None),
        (deployment(status=ours(1)), deployment(3, CONTROLLERS), 2, None),  # a client wrote its own
        (deployment(status=ours(1)), deployment(2, {**ours(1), "replicas": 1}), 1, None),  # a status patch added one
    ],
)
def test_answer_follows_the_rule_of_the_module_docstring(
    old: dict[str, Any] | None, new: dict[str, Any], generation: int, expected: Answer | None
) -> None:
    assert answer(old, new, generation, now=5.0) == expected


def test_only_the_answer_as_made_is_ours() -> None:
    assert is_ours(ours(3))
    assert not is_ours({**ours(3), "replicas": 0})
    assert not is_ours({"observedGeneration": 3, "conditions": [*ours(3)["conditions"], {"type": "Available"}]})
    assert not is_ours(CONTROLLERS)
    assert not is_ours(None)


async def test_only_stores_that_hold_their_data_get_answers(memory_store: MemoryStore, clock: FakeClock) -> None:
    kube = KubeStore(ServerConfig("http://127.0.0.1:9"), clock=clock)
    remote = RemoteStore("http://127.0.0.1:9", clock=clock)
    try:
        assert (answers_for(memory_store), answers_for(kube), answers_for(remote)) == (True, False, False)
        assert isinstance(create_app(memory_store, fleet_api=False).state.store, AnsweringStore)
        assert not isinstance(create_app(kube, fleet_api=False).state.store, AnsweringStore)
    finally:
        await kube.close()
        await remote.close()


# -- over HTTP ----------------------------------------------------------------------------------------------------


@pytest.fixture
async def api(memory_store: MemoryStore, clock: FakeClock) -> AsyncIterator[httpx2.AsyncClient]:
    app = create_app(memory_store, fleet_api=False, clock=clock)
    async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=30) as client:
        yield client


def ok(response: httpx2.Response, code: int = 200) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    return body


async def warnings_about(api: httpx2.AsyncClient, uid: str) -> list[tuple[str, str, str, int]]:
    items = ok(await api.get(EVENTS))["items"]
    return [(e["type"], e["reason"], e["message"], e["count"]) for e in items if e["involvedObject"].get("uid") == uid]


async def test_a_created_deployment_is_answered_as_observed_and_not_progressing_and_an_event_says_why(
    api: httpx2.AsyncClient, clock: FakeClock
) -> None:
    created = ok(await api.post(DEPLOYMENTS, json=deployment()), 201)
    assert created["metadata"]["generation"] == 1
    assert created["status"] == ours(1, D0, D0)
    assert ok(await api.get(WEB))["status"] == created["status"]
    uid = created["metadata"]["uid"]
    assert await warnings_about(api, uid) == [("Warning", "NoDeploymentController", NO_CONTROLLER, 1)]


async def test_a_spec_change_is_answered_at_the_new_generation_and_a_label_change_is_not(
    api: httpx2.AsyncClient, clock: FakeClock
) -> None:
    created = ok(await api.post(DEPLOYMENTS, json=deployment()), 201)
    await clock.advance(5)
    scaled = ok(await api.patch(f"{WEB}/scale", json={"spec": {"replicas": 4}}, headers=MERGE))
    assert scaled["spec"]["replicas"] == 4
    after_scale = ok(await api.get(WEB))
    assert (after_scale["metadata"]["generation"], after_scale["status"]) == (2, ours(2, D5, D0))
    await clock.advance(5)
    labelled = ok(await api.patch(WEB, json={"metadata": {"labels": {"tier": "front"}}}, headers=MERGE))
    assert (labelled["metadata"]["generation"], labelled["status"]) == (2, ours(2, D5, D0))
    put = ok(await api.put(WEB, json={**deployment(6), "metadata": labelled["metadata"]}))
    assert (put["metadata"]["generation"], put["status"]) == (3, ours(3, D10, D0))
    uid = created["metadata"]["uid"]
    assert await warnings_about(api, uid) == [("Warning", "NoDeploymentController", NO_CONTROLLER, 3)]


async def test_a_status_written_through_the_status_subresource_is_never_overwritten(api: httpx2.AsyncClient) -> None:
    created = ok(await api.post(DEPLOYMENTS, json=deployment()), 201)
    written = ok(await api.put(f"{WEB}/status", json={**created, "status": CONTROLLERS}))
    assert written["status"] == CONTROLLERS
    rescaled = ok(await api.patch(WEB, json={"spec": {"replicas": 3}}, headers=MERGE))
    assert (rescaled["metadata"]["generation"], rescaled["status"]) == (2, CONTROLLERS)
    patched = ok(await api.patch(f"{WEB}/status", json={"status": {"replicas": 1}}, headers=MERGE))
    assert patched["status"] == {**CONTROLLERS, "replicas": 1}


async def test_a_created_deployment_with_a_status_of_its_own_keeps_it(api: httpx2.AsyncClient) -> None:
    created = ok(await api.post(DEPLOYMENTS, json=deployment(status=CONTROLLERS)), 201)
    assert created["status"] == CONTROLLERS
    assert await warnings_about(api, created["metadata"]["uid"]) == []


async def test_a_dry_run_create_stores_no_answer_and_no_event(api: httpx2.AsyncClient) -> None:
    ok(await api.post(DEPLOYMENTS, json=deployment(), params={"dryRun": "All"}), 201)
    assert ok(await api.get(EVENTS))["items"] == []


async def test_a_server_over_a_kube_store_leaves_the_status_to_the_cluster(clock: FakeClock) -> None:
    """`devplace server --store kube://...`: the cluster (here a devplace server that answers nothing, standing in
    for a Kubernetes API server whose controller writes status later) gets the Deployment as the client sent it."""
    cluster = MemoryStore(clock=clock)
    async with serve_app(create_app(cluster, fleet_api=False, deployment_status=False)) as cluster_url:
        kube = KubeStore(ServerConfig(cluster_url), clock=clock)
        try:
            async with (
                serve_app(create_app(kube, fleet_api=False, clock=clock)) as url,
                httpx2.AsyncClient(base_url=url, timeout=30) as client,
            ):
                created = ok(await client.post(DEPLOYMENTS, json=deployment()), 201)
                assert created.get("status") in (None, {})
                stored = await cluster.get("Deployment", "web", "default")
                assert stored.get("status") in (None, {})
                assert (await cluster.list("Event")).items == []
        finally:
            await kube.close()
            await cluster.close()


async def test_events_are_swept_by_the_answering_store(memory_store: MemoryStore, clock: FakeClock) -> None:
    events = EventRecorder(memory_store, "devplace-server", clock, ttl=60.0, sweep_interval=10.0)
    answering = AnsweringStore(memory_store, clock, events)
    await answering.create(deployment())
    await clock.advance(120)  # past the ttl and the sweep interval: the next answer sweeps the first one's Event
    await answering.create({**deployment(), "metadata": {"name": "api", "namespace": "default"}})
    regarding = [e["involvedObject"]["name"] for e in (await memory_store.list("Event")).items]
    assert regarding == ["api"]
