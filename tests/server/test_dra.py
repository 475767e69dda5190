"""The DRA kinds (resource.k8s.io/v1) through a real uvicorn server on 127.0.0.1 and a real HTTP client: the
published manifests are stored as written; every object kube-apiserver refuses (tests/fixtures/dra/invalid.yaml) is
refused with 422 naming its field path and leaves nothing stored; hostile CEL selectors are refused at create naming
the expression, and a body of many heavy selectors is validated off the event loop (others are answered meanwhile)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace.server import _resources as resources
from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.api.test_dra import INVALID, MANIFESTS, expand
from tests.scheduler.builders import device_class_object
from tests.servers import serve_app

BOUND = 30.0  # seconds a request may take before the test fails (a bound, not a timing)
WAIT = 5.0  # seconds a blocked validation waits for /healthz before giving up (only a failing run waits)
PLURALS = {
    "DeviceClass": "deviceclasses",
    "ResourceSlice": "resourceslices",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "Pod": "pods",
}
CLUSTER_SCOPED = {"DeviceClass", "ResourceSlice"}


def collection(obj: dict[str, Any]) -> str:
    api_version, kind = obj["apiVersion"], obj["kind"]
    root = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    if kind in CLUSTER_SCOPED:
        return f"{root}/{PLURALS[kind]}"
    namespace = obj["metadata"].get("namespace", "default")
    return f"{root}/namespaces/{namespace}/{PLURALS[kind]}"


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    async with (
        serve_app(create_app(memory_store, fleet_api=False)) as url,
        httpx2.AsyncClient(base_url=url, timeout=BOUND) as client,
    ):
        yield client


async def test_the_published_dra_manifests_are_created_and_read_back_as_written(api: httpx2.AsyncClient) -> None:
    for manifest in MANIFESTS:
        created = await api.post(collection(manifest), json=manifest)
        assert created.status_code == 201, created.text
        read = await api.get(f"{collection(manifest)}/{manifest['metadata']['name']}")
        assert read.status_code == 200
        assert read.json()["spec"] == manifest["spec"]


@pytest.mark.parametrize("case", INVALID, ids=[c["name"] for c in INVALID])
async def test_what_kube_apiserver_refuses_is_a_422_naming_the_field_and_nothing_is_stored(
    api: httpx2.AsyncClient, case: dict[str, Any]
) -> None:
    obj = expand(case["object"])
    refused = await api.post(collection(obj), json=obj)
    assert refused.status_code == 422, refused.text
    body = refused.json()
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "Invalid", 422)
    assert case["path"] in [cause["field"] for cause in body["details"]["causes"]], body["message"]
    assert (await api.get(f"{collection(obj)}/{obj['metadata']['name']}")).status_code == 404
    listed = await api.get(collection(obj))
    assert listed.json()["items"] == []


HOSTILE = {
    "nested 5,000 deep": "(" * 5000 + "true" + ")" * 5000,
    "a megabyte long": "true && " * 131072 + "true",
    "over the cost budget": "["
    + ",".join(map(str, range(60)))
    + "].all(x, ["
    + ",".join(map(str, range(60)))
    + "].all(y, ["
    + ",".join(map(str, range(60)))
    + "].all(z, x + y + z > 0)))",
    "quadratic over a device's attributes": "device.attributes.all(d, device.attributes[d].all(k, "
    "device.attributes.all(e, device.attributes[e].all(k2, true))))",
}


@pytest.mark.parametrize("expression", list(HOSTILE.values()), ids=list(HOSTILE))
async def test_a_hostile_selector_is_refused_at_create_naming_the_expression(
    api: httpx2.AsyncClient, expression: str
) -> None:
    obj = device_class_object("hostile", expression)
    refused = await api.post(collection(obj), json=obj)
    assert refused.status_code == 422, refused.text
    causes = refused.json()["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.selectors[0].cel.expression"]
    assert expression[:40] in causes[0]["message"]
    assert (await api.get(collection(obj))).json()["items"] == []


async def test_a_claim_is_validated_off_the_event_loop_so_other_requests_are_answered_meanwhile(
    api: httpx2.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim's validation, once started, waits until /healthz has been answered. The server runs on this test's
    event loop: validated on it, the loop would stop until the wait gave up (the POST then fails)."""
    started, answered = threading.Event(), threading.Event()
    prepare = resources.prepare_write

    def waiting(*args: Any, **kwargs: Any) -> dict[str, Any]:
        started.set()
        assert answered.wait(WAIT), "/healthz was not answered while the claim was being validated"
        return prepare(*args, **kwargs)

    monkeypatch.setattr(resources, "prepare_write", waiting)
    claim = next(m for m in MANIFESTS if m["kind"] == "ResourceClaim")
    posting = asyncio.ensure_future(api.post(collection(claim), json=claim))
    assert await asyncio.to_thread(started.wait, BOUND)
    health = await api.get("/healthz")
    answered.set()
    assert health.status_code == 200
    assert (await posting).status_code == 201


@pytest.mark.parametrize("patch_type", ["application/merge-patch+json", "application/apply-patch+yaml"])
async def test_a_device_class_patch_is_validated_off_the_event_loop_too(
    api: httpx2.AsyncClient, monkeypatch: pytest.MonkeyPatch, patch_type: str
) -> None:
    """As a create: a patch (or a server-side apply) of a kind whose validation compiles CEL is checked in a worker
    thread, so the server answers others meanwhile."""
    obj = device_class_object("patched", 'device.driver == "a.example.com"')
    assert (await api.post(collection(obj), json=obj)).status_code == 201
    started, answered = threading.Event(), threading.Event()
    prepare = resources.prepare_write

    def waiting(*args: Any, **kwargs: Any) -> dict[str, Any]:
        started.set()
        assert answered.wait(WAIT), "/healthz was not answered while the patch was being validated"
        return prepare(*args, **kwargs)

    monkeypatch.setattr(resources, "prepare_write", waiting)
    selectors = [{"cel": {"expression": 'device.driver == "b.example.com"'}}]
    if patch_type.startswith("application/apply"):
        body = json.dumps({**obj, "spec": {"selectors": selectors}})
        params = {"fieldManager": "test", "force": "true"}
    else:
        body, params = json.dumps({"spec": {"selectors": selectors}}), {}
    url = f"{collection(obj)}/patched"
    patching = asyncio.ensure_future(api.patch(url, content=body, params=params, headers={"Content-Type": patch_type}))
    assert await asyncio.to_thread(started.wait, BOUND)
    health = await api.get("/healthz")
    answered.set()
    assert health.status_code == 200
    patched = await patching
    assert patched.status_code == 200, patched.text
    assert patched.json()["spec"]["selectors"] == selectors
