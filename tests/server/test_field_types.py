"""Field types over HTTP: a Configuration or Instance whose integer or boolean field holds another JSON type is 422
with a cause naming the field, and nothing is stored; an integer sent as `1e2` is stored as 100, so the API, the
Table and the typed model read one value."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace.api import Configuration
from devplace.clocks import FakeClock
from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.servers import serve_app

CONFIGS = "/apis/akri.sh/v0/namespaces/default/configurations"
INSTANCES = "/apis/akri.sh/v0/namespaces/default/instances"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def config(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "cam"},
        "spec": {"discoveryHandler": {"name": "debugEcho"}, "capacity": 2, **spec},
    }


def instance(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": {"name": "cam-8120fe"},
        "spec": {"configurationName": "cam", "capacity": 2, "shared": True, "nodes": ["node-a"], **spec},
    }


@pytest.fixture
async def api(clock: FakeClock) -> AsyncIterator[httpx2.AsyncClient]:
    store = MemoryStore(clock=clock)
    try:
        app = create_app(store, fleet_api=False, clock=clock)
        async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=10) as client:
            yield client
    finally:
        await store.close()


def causes(response: httpx2.Response) -> list[tuple[str, str, str]]:
    assert response.status_code == 422, response.text
    status = response.json()
    assert (status["kind"], status["status"], status["reason"], status["code"]) == ("Status", "Failure", "Invalid", 422)
    return [(c["field"], c["message"], c["reason"]) for c in status["details"]["causes"]]


async def stored_names(api: httpx2.AsyncClient, path: str) -> list[str]:
    listed = await api.get(path)
    assert listed.status_code == 200
    return [o["metadata"]["name"] for o in listed.json()["items"]]


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        (CONFIGS, config(capacity="2"), [("spec.capacity", "must be an integer, not string '2'")]),
        (CONFIGS, config(capacity=True), [("spec.capacity", "must be an integer, not boolean true")]),
        (CONFIGS, config(uniqueDevices="no"), [("spec.uniqueDevices", "must be a boolean, not string 'no'")]),
        (
            INSTANCES,
            instance(capacity="2", shared="yes"),
            [
                ("spec.capacity", "must be an integer, not string '2'"),
                ("spec.shared", "must be a boolean, not string 'yes'"),
            ],
        ),
    ],
)
async def test_a_wrong_json_type_is_422_naming_the_field_and_nothing_is_stored(
    api: httpx2.AsyncClient, path: str, body: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert causes(await api.post(path, json=body)) == [(f, m, "FieldValueInvalid") for f, m in expected]
    assert await stored_names(api, path) == []


async def test_an_update_or_patch_to_a_wrong_json_type_is_422_and_changes_nothing(api: httpx2.AsyncClient) -> None:
    created = (await api.post(CONFIGS, json=config())).json()
    bad = {**created, "spec": {**created["spec"], "capacity": "3"}}
    assert causes(await api.put(f"{CONFIGS}/cam", json=bad)) == [
        ("spec.capacity", "must be an integer, not string '3'", "FieldValueInvalid")
    ]
    patched = await api.patch(
        f"{CONFIGS}/cam",
        content=json.dumps({"spec": {"uniqueDevices": "false"}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert causes(patched) == [("spec.uniqueDevices", "must be a boolean, not string 'false'", "FieldValueInvalid")]
    assert (await api.get(f"{CONFIGS}/cam")).json() == created


async def test_an_integer_sent_as_1e2_is_stored_as_100_and_every_reader_sees_100(api: httpx2.AsyncClient) -> None:
    text = json.dumps(config()).replace('"capacity": 2', '"capacity": 1e2')
    created = await api.post(CONFIGS, content=text, headers={"Content-Type": "application/json"})
    assert created.status_code == 201, created.text
    read = await api.get(f"{CONFIGS}/cam")
    for answer in (created, read):
        capacity = answer.json()["spec"]["capacity"]
        assert (capacity, type(capacity)) == (100, int), answer.text  # JSON 100, not 100.0 nor 1e2
    table = (await api.get(CONFIGS, headers={"Accept": TABLE})).json()
    column = [c["name"] for c in table["columnDefinitions"]].index("Capacity")
    assert table["rows"][0]["cells"][column] == 100
    assert Configuration.from_obj(read.json()).spec.capacity == 100
