"""PATCH over HTTP: a real uvicorn on 127.0.0.1, driven with httpx2, over a memory store (and sqlite where the
concurrency of real threads matters). Every patch type, the subresources, dry runs, and the Status bodies of every
refusal."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from devplace.clocks import FakeClock
from devplace.server._app import create_app
from devplace.store import MemoryStore, Store
from devplace.store._sqlite import SqliteStore
from tests.servers import serve_app

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
WEB = f"{DEPLOYMENTS}/web"
CONFIGS = "/apis/akri.sh/v0/namespaces/default/configurations"
CAM = f"{CONFIGS}/cam"
NODES = "/api/v1/nodes"

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


def deployment(replicas: int = 1, image: str = "nginx:1") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image, "env": [{"name": "A", "value": "1"}]}]},
            },
        },
    }


def config(capacity: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "cam"},
        "spec": {"discoveryHandler": {"name": "debugEcho"}, "capacity": capacity},
    }


async def serve(store: Store, clock: FakeClock) -> AsyncIterator[httpx2.AsyncClient]:
    # The Deployment status the server answers (and its Event, one more revision) is test_deployments.py's.
    app = create_app(store, fleet_api=False, clock=clock, deployment_status=False)
    async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=30) as client:
        yield client


@pytest.fixture
async def api(memory_store: MemoryStore, clock: FakeClock) -> AsyncIterator[httpx2.AsyncClient]:
    async for client in serve(memory_store, clock):
        yield client


async def patch(api: httpx2.AsyncClient, path: str, body: Any, content_type: str, **params: str) -> httpx2.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await api.patch(path, content=content, headers={"content-type": content_type}, params=params)


def ok(response: httpx2.Response, code: int = 200) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    return body


def status(response: httpx2.Response, code: int, reason: str) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    assert (body["kind"], body["status"], body["code"], body["reason"]) == ("Status", "Failure", code, reason)
    return body


async def created(api: httpx2.AsyncClient, path: str = DEPLOYMENTS, obj: dict[str, Any] | None = None) -> str:
    body = ok(await api.post(path, json=obj or deployment()), 201)
    return str(body["metadata"]["resourceVersion"])


def managers(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(e["manager"], e["operation"], e.get("subresource", "")) for e in obj["metadata"]["managedFields"]]


# -- the four types ------------------------------------------------------------------------------------------------


async def test_a_merge_patch_merges_and_records_its_manager(api: httpx2.AsyncClient) -> None:
    await created(api)
    body = ok(await patch(api, WEB, {"metadata": {"labels": {"tier": "front"}}}, MERGE, fieldManager="labeller"))
    assert body["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert body["metadata"]["resourceVersion"] == "2"
    assert ("labeller", "Update", "") in managers(body)


async def test_a_json_patch_applies_its_operations(api: httpx2.AsyncClient) -> None:
    await created(api)
    ops = [
        {"op": "test", "path": "/spec/replicas", "value": 1},
        {"op": "replace", "path": "/spec/replicas", "value": 3},
        {"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": {"name": "B", "value": "2"}},
    ]
    body = ok(await patch(api, WEB, ops, JSON_PATCH))
    assert body["spec"]["replicas"] == 3
    assert [e["name"] for e in body["spec"]["template"]["spec"]["containers"][0]["env"]] == ["A", "B"]


async def test_a_strategic_merge_patch_merges_containers_by_name(api: httpx2.AsyncClient) -> None:
    await created(api)
    change = {"spec": {"template": {"spec": {"containers": [{"name": "web", "env": [{"name": "B", "value": "2"}]}]}}}}
    body = ok(await patch(api, WEB, change, STRATEGIC))
    [container] = body["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "nginx:1"
    assert [e["name"] for e in container["env"]] == ["B", "A"]


async def test_server_side_apply_creates_then_conflicts_then_forces(api: httpx2.AsyncClient) -> None:
    first = ok(await patch(api, WEB, deployment(), APPLY, fieldManager="kubectl"), 201)
    assert managers(first) == [("kubectl", "Apply", "")]
    again = ok(await patch(api, WEB, deployment(), APPLY, fieldManager="kubectl"))
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]  # nothing changed
    refused = status(await patch(api, WEB, deployment(replicas=4), APPLY, fieldManager="ci"), 409, "Conflict")
    assert refused["message"] == 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas'
    assert refused["details"]["causes"] == [
        {"field": ".spec.replicas", "message": 'conflict with "kubectl"', "reason": "FieldManagerConflict"}
    ]
    forced = ok(await patch(api, WEB, deployment(replicas=4), APPLY, fieldManager="ci", force="true"))
    assert forced["spec"]["replicas"] == 4
    assert managers(forced) == [("ci", "Apply", ""), ("kubectl", "Apply", "")]  # same time: by manager


async def test_an_apply_body_may_be_yaml(api: httpx2.AsyncClient) -> None:
    yaml_body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: '1'\n"
    body = ok(await patch(api, "/api/v1/namespaces/default/configmaps/c", yaml_body, APPLY, fieldManager="m"), 201)
    assert body["data"] == {"a": "1"}


async def test_post_and_put_record_update_entries_named_after_the_user_agent(api: httpx2.AsyncClient) -> None:
    headers = {"user-agent": "kubectl-create/v1.32.4 (linux/amd64) kubernetes/abc"}
    body = ok(await api.post(DEPLOYMENTS, json=deployment(), headers=headers), 201)
    assert managers(body) == [("kubectl-create", "Update", "")]
    replaced = {**body, "spec": {**body["spec"], "replicas": 2}}
    put = ok(await api.put(WEB, json=replaced, params={"fieldManager": "kubectl-replace"}))
    assert managers(put) == [("kubectl-create", "Update", ""), ("kubectl-replace", "Update", "")]
    assert put["metadata"]["managedFields"][1]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


async def test_a_put_with_an_empty_managed_fields_list_resets_them_as_kubernetes_does(api: httpx2.AsyncClient) -> None:
    body = ok(await api.post(DEPLOYMENTS, json=deployment(), params={"fieldManager": "creator"}), 201)
    replaced = {**body, "spec": {**body["spec"], "replicas": 2}}
    replaced["metadata"] = {**body["metadata"], "managedFields": []}
    put = ok(await api.put(WEB, json=replaced, params={"fieldManager": "kubectl-replace"}))
    assert managers(put) == [("kubectl-replace", "Update", "")]  # the creator's record is gone
    assert put["metadata"]["managedFields"][0]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


# -- subresources --------------------------------------------------------------------------------------------------


async def test_a_scale_patch_writes_replicas_and_answers_the_scale(api: httpx2.AsyncClient) -> None:
    await created(api)
    scale = ok(await patch(api, f"{WEB}/scale", {"spec": {"replicas": 5}}, MERGE))
    assert (scale["kind"], scale["spec"]["replicas"], scale["status"]["selector"]) == ("Scale", 5, "app=web")
    stored = ok(await api.get(WEB))
    assert stored["spec"]["replicas"] == 5
    assert any(m[2] == "scale" for m in managers(stored))


async def test_every_patch_type_reaches_the_scale(api: httpx2.AsyncClient) -> None:
    await created(api)
    ok(await patch(api, f"{WEB}/scale", [{"op": "replace", "path": "/spec/replicas", "value": 2}], JSON_PATCH))
    ok(await patch(api, f"{WEB}/scale", {"spec": {"replicas": 3}}, STRATEGIC))
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": 4}}
    ok(await patch(api, f"{WEB}/scale", scale, APPLY, fieldManager="hpa", force="true"))
    stored = ok(await api.get(WEB))
    assert stored["spec"]["replicas"] == 4
    hpa = next(e for e in stored["metadata"]["managedFields"] if e["manager"] == "hpa")
    assert (hpa["operation"], hpa["subresource"], hpa["fieldsV1"]) == ("Apply", "scale", {"f:spec": {"f:replicas": {}}})


async def test_a_status_patch_changes_only_the_status(api: httpx2.AsyncClient) -> None:
    await created(api)
    change = {"spec": {"replicas": 9}, "status": {"replicas": 1}}
    body = ok(await patch(api, f"{WEB}/status", change, MERGE))
    assert (body["spec"]["replicas"], body["status"]) == (1, {"replicas": 1})


async def test_subresources_a_kind_lacks_are_404(api: httpx2.AsyncClient) -> None:
    await created(api, CONFIGS, config())
    status(await patch(api, f"{CAM}/scale", {"spec": {"replicas": 1}}, MERGE), 404, "NotFound")
    await created(api, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}, "data": {}})
    status(await patch(api, "/api/v1/namespaces/default/configmaps/c/status", {}, MERGE), 404, "NotFound")


# -- refusals ------------------------------------------------------------------------------------------------------


async def test_an_unknown_patch_type_is_415_with_kubernetes_message(api: httpx2.AsyncClient) -> None:
    await created(api)
    body = status(await patch(api, WEB, {}, "application/json"), 415, "UnsupportedMediaType")
    assert body["message"].endswith(
        "accepted media types include: application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json, application/apply-patch+yaml"
    )


async def test_a_strategic_merge_patch_of_a_devplace_kind_is_415(api: httpx2.AsyncClient) -> None:
    await created(api, CONFIGS, config())
    body = status(await patch(api, CAM, {"spec": {"capacity": 3}}, STRATEGIC), 415, "UnsupportedMediaType")
    assert "strategic" not in body["message"]


@pytest.mark.parametrize(
    ("body", "content_type", "params"),
    [
        (b"{oops", MERGE, {}),
        (b"[1, 2]", MERGE, {}),
        (b'{"op": "add"}', JSON_PATCH, {}),
        (b"[{oops", JSON_PATCH, {}),
        (b"", STRATEGIC, {}),
        (json.dumps(deployment()).encode(), APPLY, {}),  # no fieldManager
        (b"{}", MERGE, {"force": "true"}),
        (b"{}", MERGE, {"dryRun": "Some"}),
        (b"{}", APPLY, {"fieldManager": "m", "force": "maybe"}),
        (b"a: [", APPLY, {"fieldManager": "m"}),
    ],
)
async def test_an_unparsable_patch_or_a_wrong_parameter_is_400_and_changes_nothing(
    api: httpx2.AsyncClient, body: bytes, content_type: str, params: dict[str, str]
) -> None:
    rv = await created(api)
    status(await patch(api, WEB, body, content_type, **params), 400, "BadRequest")
    assert ok(await api.get(WEB))["metadata"]["resourceVersion"] == rv


async def test_a_json_patch_test_that_fails_is_422_naming_the_operation(api: httpx2.AsyncClient) -> None:
    rv = await created(api)
    ops = [
        {"op": "replace", "path": "/spec/replicas", "value": 2},
        {"op": "test", "path": "/spec/replicas", "value": 9},
    ]
    body = status(await patch(api, WEB, ops, JSON_PATCH), 422, "Invalid")
    assert "operation 1 (test /spec/replicas: test failed" in body["message"]
    assert body["details"]["causes"][0]["field"] == "[1]"
    assert ok(await api.get(WEB))["metadata"]["resourceVersion"] == rv


async def test_a_patch_whose_result_is_invalid_is_422_with_field_causes(api: httpx2.AsyncClient) -> None:
    await created(api, CONFIGS, config())
    body = status(await patch(api, CAM, {"spec": {"capacity": 0}}, MERGE), 422, "Invalid")
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.capacity"]
    renamed = status(await patch(api, CAM, {"metadata": {"name": "other"}}, MERGE), 422, "Invalid")
    assert renamed["details"]["causes"][0]["field"] == "metadata.name"


async def test_a_stale_resource_version_in_the_patch_is_409_and_not_retried(api: httpx2.AsyncClient) -> None:
    rv = await created(api)
    ok(await patch(api, WEB, {"metadata": {"resourceVersion": rv, "labels": {"a": "1"}}}, MERGE))
    body = status(
        await patch(api, WEB, {"metadata": {"resourceVersion": rv, "labels": {"b": "2"}}}, MERGE), 409, "Conflict"
    )
    assert "the object has been modified" in body["message"]
    assert "b" not in ok(await api.get(WEB))["metadata"]["labels"]


async def test_unknown_fields_are_refused_by_default_and_dropped_with_a_warning_under_warn(
    api: httpx2.AsyncClient,
) -> None:
    await created(api, CONFIGS, config())
    refused = status(await patch(api, CAM, {"spec": {"colour": "red"}}, MERGE), 422, "Invalid")
    assert refused["details"]["causes"][0]["field"] == "spec.colour"
    warned = await patch(api, CAM, {"spec": {"colour": "red", "capacity": 3}}, MERGE, fieldValidation="Warn")
    body = ok(warned)
    assert (body["spec"]["capacity"], "colour" in body["spec"]) == (3, False)
    assert warned.headers["warning"] == r'299 - "unknown field \"spec.colour\""'


async def test_a_patch_of_a_missing_object_is_404(api: httpx2.AsyncClient) -> None:
    status(await patch(api, WEB, {"spec": {"replicas": 2}}, MERGE), 404, "NotFound")


async def test_a_patch_may_write_managed_fields_as_kubernetes_allows(api: httpx2.AsyncClient) -> None:
    await created(api)
    moved = [{"manager": "mover", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
    body = ok(await patch(api, WEB, {"metadata": {"managedFields": moved}, "spec": {"replicas": 2}}, MERGE))
    assert [m[0] for m in managers(body)] == ["mover", "python-httpx2"]  # the patch's own change: its manager's


async def test_managed_fields_that_are_not_entries_are_422_naming_the_field(api: httpx2.AsyncClient) -> None:
    await created(api)
    bad = [{"manager": "x", "operation": "Steal", "fieldsV1": {}}]
    response = await patch(api, WEB, {"metadata": {"managedFields": bad}}, MERGE)
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0]["field"] == "metadata.managedFields[0].operation"


# -- no-ops, dry runs, concurrency ---------------------------------------------------------------------------------


async def test_a_patch_that_changes_nothing_writes_nothing(api: httpx2.AsyncClient) -> None:
    rv = await created(api)
    body = ok(await patch(api, WEB, {"spec": {"replicas": 1}}, MERGE))
    assert body["metadata"]["resourceVersion"] == rv


@pytest.mark.parametrize(
    ("body", "content_type", "params"),
    [
        ({"spec": {"replicas": 7}}, MERGE, {}),
        ([{"op": "replace", "path": "/spec/replicas", "value": 7}], JSON_PATCH, {}),
        ({"spec": {"replicas": 7}}, STRATEGIC, {}),
        (deployment(replicas=7), APPLY, {"fieldManager": "kubectl", "force": "true"}),
    ],
)
async def test_a_dry_run_patch_answers_the_result_and_stores_nothing(
    api: httpx2.AsyncClient, body: Any, content_type: str, params: dict[str, str]
) -> None:
    rv = await created(api)
    before = ok(await api.get(WEB))
    answer = ok(await patch(api, WEB, body, content_type, dryRun="All", **params))
    assert answer["spec"]["replicas"] == 7
    assert (answer["metadata"]["uid"], answer["metadata"]["resourceVersion"]) == (before["metadata"]["uid"], rv)
    assert ok(await api.get(WEB)) == before


async def test_a_dry_run_apply_of_a_missing_object_creates_nothing(api: httpx2.AsyncClient) -> None:
    answer = ok(await patch(api, WEB, deployment(), APPLY, fieldManager="kubectl", dryRun="All"), 201)
    assert answer["metadata"]["uid"]
    assert "resourceVersion" not in answer["metadata"]
    status(await api.get(WEB), 404, "NotFound")


class ReadsTogether:
    """A real store whose first `n` reads of an object all return before any of them does: `n` concurrent patches
    then all decide on the same resourceVersion, so all but one must lose the race and re-apply (without the gate
    the patches may simply run one after another). Every other call goes to the store as is."""

    def __init__(self, store: Store, n: int) -> None:
        self.store = store
        self.waiting = n
        self.all_read = asyncio.Event()

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        obj = await self.store.get(kind, name, namespace)
        if not self.all_read.is_set():
            self.waiting -= 1
            if self.waiting <= 0:
                self.all_read.set()
            await self.all_read.wait()
        return obj

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_fifty_concurrent_merge_patches_each_adding_a_label_lose_none(
    backend: str, tmp_path: Path, clock: FakeClock
) -> None:
    real: Store = MemoryStore(clock=clock) if backend == "memory" else SqliteStore(str(tmp_path / "s.db"), clock=clock)
    gated = ReadsTogether(real, 50)
    try:
        async for api in serve(gated, clock):  # type: ignore[arg-type]
            await created(api)
            answers = await asyncio.gather(
                *(patch(api, WEB, {"metadata": {"labels": {f"l{i}": str(i)}}}, MERGE) for i in range(50))
            )
            assert [a.status_code for a in answers] == [200] * 50, [a.text for a in answers if a.status_code != 200]
            stored = ok(await api.get(WEB))
            assert stored["metadata"]["labels"] == {"app": "web", **{f"l{i}": str(i) for i in range(50)}}
            assert stored["metadata"]["resourceVersion"] == "51"
    finally:
        await real.close()
