"""A 422 about an object a write names is Kubernetes' `NewInvalid` Status (`server/_statuses.py`): `details` name the
object's group, kind and name beside the causes, and the message reads `<Kind>.<group> "<name>" is invalid: ...`.
Pure bodies first, then the write routes over HTTP (a real uvicorn on a memory store)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.server._app import create_app
from devplace.server._statuses import Subject, status_body
from devplace.store import MemoryStore
from tests.servers import serve_app

CAM = Subject("akri.sh", "Configuration", "cam")
CAPACITY = errors.FieldError("spec.capacity", "Input should be greater than or equal to 1")


def test_an_invalid_object_is_named_as_kubernetes_names_it() -> None:
    assert status_body(errors.Invalid(str(CAPACITY), [CAPACITY]), subject=CAM) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Configuration.akri.sh "cam" is invalid: spec.capacity: Input should be greater than or equal to 1',
        "reason": "Invalid",
        "details": {
            "name": "cam",
            "group": "akri.sh",
            "kind": "Configuration",
            "causes": [{"field": "spec.capacity", "message": CAPACITY.reason, "reason": "FieldValueInvalid"}],
        },
        "code": 422,
    }


def test_several_fields_are_listed_in_brackets_once_each_and_the_core_group_is_left_out() -> None:
    fields = [
        errors.FieldError("spec.a", "bad"),
        errors.FieldError("spec.b", "worse"),
        errors.FieldError("spec.a", "bad"),
    ]
    body = status_body(errors.Invalid("three", fields), subject=Subject("", "Pod", "p"))
    assert body["message"] == 'Pod "p" is invalid: [spec.a: bad, spec.b: worse]'
    assert {k: v for k, v in body["details"].items() if k != "causes"} == {"name": "p", "kind": "Pod"}
    assert len(body["details"]["causes"]) == 3


@pytest.mark.parametrize(
    "error",
    [
        errors.Invalid("the object is not JSON"),  # no field: kubectl would print a kind and name but no message
        errors.Malformed.field("metadata", "not a mapping"),  # 400, not 422
        errors.Invalid.field("spec.capacity", "too small"),  # the EMCO dialect below
    ],
)
def test_only_a_kubernetes_422_that_names_fields_names_its_object(error: errors.DevplaceError) -> None:
    dialect = "emco" if error.message == "spec.capacity: too small" else "kubernetes"
    body = status_body(error, dialect, subject=CAM)
    assert "name" not in body.get("details", {})
    assert "is invalid" not in body["message"]


@pytest.fixture
async def api(memory_store: MemoryStore, clock: FakeClock) -> AsyncIterator[httpx2.AsyncClient]:
    app = create_app(memory_store, fleet_api=False, clock=clock)
    async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=30) as client:
        yield client


CONFIGS = "/apis/akri.sh/v0/namespaces/default/configurations"


def configuration(capacity: int) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "cam"},
        "spec": {"discoveryHandler": {"name": "debugEcho"}, "capacity": capacity},
    }


def invalid(response: httpx2.Response) -> tuple[str, dict[str, Any]]:
    assert response.status_code == 422, response.text
    body: dict[str, Any] = response.json()
    details = {k: v for k, v in body["details"].items() if k != "causes"}
    return body["message"], details


async def test_each_write_route_names_the_object_of_its_422(api: httpx2.AsyncClient) -> None:
    named = {"name": "cam", "group": "akri.sh", "kind": "Configuration"}
    message = 'Configuration.akri.sh "cam" is invalid: spec.capacity: Input should be greater than or equal to 1'
    assert invalid(await api.post(CONFIGS, json=configuration(0))) == (message, named)
    stored = (await api.post(CONFIGS, json=configuration(1))).json()
    assert invalid(await api.put(f"{CONFIGS}/cam", json={**configuration(0), "metadata": stored["metadata"]})) == (
        message,
        named,
    )
    merge = {"content-type": "application/merge-patch+json"}
    patched = await api.patch(f"{CONFIGS}/cam", json={"spec": {"capacity": 0}}, headers=merge)
    assert invalid(patched) == (message, named)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
    pod_message, pod_named = invalid(await api.post("/api/v1/namespaces/default/pods", json=pod))
    assert pod_message.startswith('Pod "p" is invalid: spec.containers')
    assert pod_named == {"name": "p", "kind": "Pod"}


async def test_a_json_patch_that_does_not_apply_names_no_object(api: httpx2.AsyncClient) -> None:
    await api.post(CONFIGS, json=configuration(1))
    ops = [{"op": "test", "path": "/spec/capacity", "value": 9}]
    answer = await api.patch(f"{CONFIGS}/cam", json=ops, headers={"content-type": "application/json-patch+json"})
    message, named = invalid(answer)
    assert named == {}
    assert message == "json patch operation 0 (test /spec/capacity: test failed: the value is 1, not 9)"
