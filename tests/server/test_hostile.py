"""The API server under hostile input (issue 10): one test per hole, each against a real uvicorn on 127.0.0.1.

Deep nesting, YAML alias bombs, bodies decoded off the event loop, server-owned metadata, duplicate keys, undecodable
bodies on /v2, HEAD. The generated (hypothesis) side lives in test_hostile_fuzz.py.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from typer.testing import CliRunner

from bench.hostile import alias_bomb, nested
from devplace.cli import app as cli_app
from devplace.server import _bodies as bodies
from devplace.server._app import create_app
from devplace.store import MemoryStore, Store, open_store
from tests.servers import serve_app

NODES = "/api/v1/nodes"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
PROJECTS = "/v2/projects"
JSON = {"content-type": "application/json"}
YAML = {"content-type": "application/yaml"}
DEEP = "nested deeper than 100 levels"


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    """The resource API (the /v2 routes take a second to build: only the tests of /v2 use `fleet_api`)."""
    app = create_app(memory_store, fleet_api=False)
    async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=30) as client:
        yield client


@pytest.fixture
async def fleet_api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    async with serve_app(create_app(memory_store)) as url, httpx2.AsyncClient(base_url=url, timeout=30) as client:
        yield client


@pytest.fixture(params=["memory", "sqlite"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    store = open_store("memory" if request.param == "memory" else f"sqlite:///{tmp_path}/hostile.db")
    yield store
    await store.close()


@pytest.fixture
async def any_api(any_store: Store) -> AsyncIterator[httpx2.AsyncClient]:
    async with (
        serve_app(create_app(any_store, fleet_api=False)) as url,
        httpx2.AsyncClient(base_url=url, timeout=30) as client,
    ):
        yield client


def assert_status(response: httpx2.Response, code: int, reason: str) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    assert (body["kind"], body["status"], body["code"], body["reason"]) == ("Status", "Failure", code, reason)
    return body


def config_map(name: str = "cm", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": {"k": "v"}}


def yaml_nested(levels: int) -> bytes:
    """The YAML twin of `nested(levels, "[")`: `spec` holds lists nested `levels - 1` deep."""
    inner = levels - 1
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: deep}}\nspec: {'[' * inner}{']' * inner}\n".encode()


# -- 1. nesting ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [101, 256, 2000])
@pytest.mark.parametrize(("opener", "step"), [("{", ".a"), ("[", "[0]")])
async def test_a_json_body_nested_past_the_limit_is_400_naming_the_depth_and_where(
    api: httpx2.AsyncClient, memory_store: MemoryStore, levels: int, opener: str, step: str
) -> None:
    body = assert_status(await api.post(CONFIGMAPS, content=nested(levels, opener), headers=JSON), 400, "BadRequest")
    (cause,) = body["details"]["causes"]
    assert cause["field"] == "spec" + step * 99  # the 101st level: the object is level 1, spec level 2
    assert DEEP in cause["message"]
    assert await memory_store.revision() == 0


@pytest.mark.parametrize("levels", [101, 2000])
async def test_a_yaml_body_nested_past_the_limit_is_400_naming_the_depth_and_where(
    api: httpx2.AsyncClient, memory_store: MemoryStore, levels: int
) -> None:
    body = assert_status(await api.post(CONFIGMAPS, content=yaml_nested(levels), headers=YAML), 400, "BadRequest")
    (cause,) = body["details"]["causes"]
    assert cause["field"] == "spec" + "[0]" * 99
    assert DEEP in cause["message"]
    assert await memory_store.revision() == 0


async def test_a_body_exactly_at_the_depth_limit_is_stored(api: httpx2.AsyncClient) -> None:
    """ConfigMap refuses `spec`, so the deep tree goes under an annotation-free field the kind keeps: a Node's."""
    text = nested(100, "{").replace(b'"kind":"ConfigMap"', b'"kind":"Node"')
    response = await api.post(NODES, content=text, headers=JSON)
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("levels", [120, 3000])
async def test_a_fleet_body_nested_past_the_limit_is_refused_like_any_undecodable_fleet_body(
    fleet_api: httpx2.AsyncClient, levels: int
) -> None:
    inner = levels - 2
    text = '{"metadata": {"name": "p", "description": ' + "[" * inner + "]" * inner + "}}"
    body = assert_status(await fleet_api.post(PROJECTS, content=text, headers=JSON), 422, "BadRequest")
    assert DEEP in body["message"]


@pytest.mark.parametrize(
    ("manifest", "says"),
    [(yaml_nested(2000), DEEP), (alias_bomb(8, 9), "YAML aliases would add more than")],
    ids=["deep", "alias-bomb"],
)
def test_the_cli_refuses_a_deep_or_alias_bomb_manifest_naming_the_problem(
    tmp_path: Path, manifest: bytes, says: str
) -> None:
    runner = CliRunner(env={"DEVPLACE_STORE": f"sqlite:///{tmp_path}/cli.db", "COLUMNS": "200"})
    path = tmp_path / "hostile.yaml"
    path.write_bytes(manifest)
    result = runner.invoke(cli_app, ["apply", "-f", str(path)])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert says in result.output


# -- 2. YAML aliases, and decoding off the event loop ----------------------------------------------------------------


@pytest.mark.parametrize("levels", [6, 8])
async def test_a_yaml_alias_bomb_is_refused_before_it_is_expanded(
    api: httpx2.AsyncClient, memory_store: MemoryStore, levels: int
) -> None:
    response = await api.post(CONFIGMAPS, content=alias_bomb(levels, 9), headers=YAML)
    body = assert_status(response, 400, "BadRequest")
    assert "YAML aliases would add more than 1048576 bytes of JSON" in body["message"]
    assert await memory_store.revision() == 0


async def test_an_alias_to_a_node_that_contains_it_is_refused(api: httpx2.AsyncClient) -> None:
    text = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: loop}\ndata: &d {k: *d}\n"
    body = assert_status(await api.post(CONFIGMAPS, content=text, headers=YAML), 400, "BadRequest")
    assert body["details"]["causes"][0]["field"] == "data.k"
    assert "refers to a node that contains it" in body["message"]


async def test_modest_aliases_are_expanded_as_yaml_says(api: httpx2.AsyncClient) -> None:
    text = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\ndata: {a: &v shared, b: *v}\n"
    response = await api.post(CONFIGMAPS, content=text, headers=YAML)
    assert response.status_code == 201, response.text
    assert response.json()["data"] == {"a": "shared", "b": "shared"}


async def test_healthz_answers_while_a_body_is_being_decoded(
    api: httpx2.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gate holds the decoding of one body; /healthz must answer meanwhile (it cannot if decoding runs on the loop:
    then the loop itself waits at the gate, until its timeout)."""
    decoding, gate = threading.Event(), threading.Event()
    real_json_tree = bodies.json_tree

    def gated_json_tree(value: Any, path: str = "") -> Any:
        decoding.set()
        gate.wait(timeout=5)
        return real_json_tree(value, path)

    monkeypatch.setattr(bodies, "json_tree", gated_json_tree)
    text = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: slow}\ndata: {k: v}\n"
    post = asyncio.create_task(api.post(CONFIGMAPS, content=text, headers=YAML))
    assert await asyncio.to_thread(decoding.wait, 10)
    health = await api.get("/healthz")
    still_decoding = not post.done()
    gate.set()
    created = await post
    assert health.status_code == 200
    assert still_decoding
    assert created.status_code == 201, created.text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\ndata: {when: 2026-13-45}\n", "month must be in"),
        (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: n}\nspec: {n: 1" + b"0" * 5000 + b"}\n", "digits"),
    ],
)
async def test_a_yaml_scalar_python_cannot_build_is_400(api: httpx2.AsyncClient, text: bytes, says: str) -> None:
    body = assert_status(await api.post(CONFIGMAPS, content=text, headers=YAML), 400, "BadRequest")
    assert says in body["message"]


@pytest.mark.parametrize("where", ['"labels": {"\\ud800": "x"}', '"labels": {"x": "a\\udfff"}'])
async def test_a_lone_surrogate_escape_is_400_naming_where(api: httpx2.AsyncClient, where: str) -> None:
    """JSON may escape half a character (`\\ud800`); nothing downstream can hold one (pydantic raised on it)."""
    text = f'{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "s", {where}}}}}'.encode()
    body = assert_status(await api.post(CONFIGMAPS, content=text, headers=JSON), 400, "BadRequest")
    assert body["details"]["causes"][0]["field"].startswith("metadata.labels")
    assert "lone surrogate" in body["message"]


# -- 7. server-owned metadata --------------------------------------------------------------------------------------

FORGED = {
    "uid": "forged",
    "generation": 9,
    "creationTimestamp": "2000-01-01T00:00:00Z",
    "deletionTimestamp": "2000-01-01T00:00:00Z",
    "deletionGracePeriodSeconds": 30,
    "selfLink": "/api/v1/namespaces/default/configmaps/cm",
    "managedFields": [{"manager": "forged", "operation": "Apply"}],
}


def assert_not_forged(meta: dict[str, Any], *, field_manager: bool = True) -> None:
    """None of FORGED came through (`managedFields` is checked only through the API server: the store passes the
    field manager's value on, and the field manager writes it, never a client's)."""
    for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        assert key not in meta, meta
    for key in ("uid", "generation", "creationTimestamp", "managedFields")[: 4 if field_manager else 3]:
        assert meta.get(key) != FORGED[key], meta


async def test_server_owned_metadata_in_a_create_body_is_never_stored(any_api: httpx2.AsyncClient) -> None:
    created = await any_api.post(CONFIGMAPS, json=config_map(**FORGED))
    assert created.status_code == 201, created.text
    assert_not_forged(created.json()["metadata"])
    assert_not_forged((await any_api.get(f"{CONFIGMAPS}/cm")).json()["metadata"])
    assert created.json()["metadata"]["generation"] == 1


async def test_an_update_cannot_set_server_owned_metadata(any_api: httpx2.AsyncClient) -> None:
    stored = (await any_api.post(CONFIGMAPS, json=config_map())).json()
    update = config_map(**FORGED, resourceVersion=stored["metadata"]["resourceVersion"])
    updated = await any_api.put(f"{CONFIGMAPS}/cm", json=update)
    assert updated.status_code == 200, updated.text
    meta = updated.json()["metadata"]
    assert_not_forged(meta)
    assert (meta["uid"], meta["creationTimestamp"]) == (
        stored["metadata"]["uid"],
        stored["metadata"]["creationTimestamp"],
    )


async def test_the_store_never_takes_deletion_metadata_from_a_caller(any_store: Store) -> None:
    """The CLI and the parts write to a store directly, past the API server's boundary."""
    created = await any_store.create(config_map(namespace="default", **FORGED))
    assert_not_forged(created["metadata"], field_manager=False)
    updated = await any_store.update(config_map(**{**created["metadata"], **FORGED, "name": "cm"}))
    assert "deletionTimestamp" not in updated["metadata"]
    assert "deletionTimestamp" not in (await any_store.get("ConfigMap", "cm", "default"))["metadata"]


# -- 10. duplicate keys, undecodable /v2 bodies, HEAD ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "field", "key"),
    [
        (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"metadata":{"name":"b"}}', "", "metadata"),
        (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"1","k":"2"}}', "data", "k"),
        (
            b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"1","x":"1"}}}',
            "metadata.labels",
            "x",
        ),
    ],
)
async def test_a_json_key_given_twice_is_400_naming_the_key_and_where(
    api: httpx2.AsyncClient, memory_store: MemoryStore, text: bytes, field: str, key: str
) -> None:
    body = assert_status(await api.post(CONFIGMAPS, content=text, headers=JSON), 400, "BadRequest")
    (cause,) = body["details"]["causes"]
    assert (cause["field"], cause["message"]) == (field, f"duplicate key {key!r}")
    assert await memory_store.revision() == 0


async def test_a_yaml_key_given_twice_is_400_naming_the_key_and_where(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    text = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  k: '1'\n  k: '2'\n"
    body = assert_status(await api.post(CONFIGMAPS, content=text, headers=YAML), 400, "BadRequest")
    (cause,) = body["details"]["causes"]
    assert cause["field"] == "data"
    assert cause["message"].startswith("duplicate key 'k' (line 6)")
    assert await memory_store.revision() == 0


@pytest.mark.parametrize(
    "text",
    [
        b"{oops",
        b'{"metadata": {"name": "p"}, "metadata": {"name": "q"}}',
        b'{"metadata": {"name": "p", "description": ' + b"[" * 3000 + b"]" * 3000 + b"}}",
        b'\xff{"metadata": {"name": "p"}}',
    ],
)
async def test_every_undecodable_fleet_body_is_422_bad_request(fleet_api: httpx2.AsyncClient, text: bytes) -> None:
    """EMCO answers a body that does not parse with 422 (server/_statuses.py's table); the reason says which failure
    it was, as on the resource API, where the same bodies are 400 `BadRequest`."""
    assert_status(await fleet_api.post(PROJECTS, content=text, headers=JSON), 422, "BadRequest")
    assert_status(await fleet_api.post(CONFIGMAPS, content=text, headers=JSON), 400, "BadRequest")
    assert (await fleet_api.get(PROJECTS)).json() == []


@pytest.mark.parametrize(
    "path",
    [NODES, f"{NODES}/a", "/api", "/api/v1", "/apis", "/apis/devplace.io/v1alpha1", "/healthz", "/version"],
)
async def test_head_answers_every_get_route_like_get_without_a_body(api: httpx2.AsyncClient, path: str) -> None:
    await api.post(NODES, json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}})
    got, head = await api.get(path), await api.head(path)
    assert (head.status_code, got.status_code) == (200, 200)
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]


async def test_head_on_a_missing_object_is_404_without_a_body(api: httpx2.AsyncClient) -> None:
    head = await api.head(f"{NODES}/missing")
    assert (head.status_code, head.content) == (404, b"")


async def test_head_answers_the_fleet_api_too(fleet_api: httpx2.AsyncClient) -> None:
    assert (await fleet_api.head(PROJECTS)).status_code == 200
    assert (await fleet_api.head(f"{PROJECTS}/missing")).status_code == 404


async def test_head_on_a_watch_answers_at_once_and_ends_the_store_watch(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    head = await asyncio.wait_for(api.head(NODES, params={"watch": "1"}), 10)
    assert (head.status_code, head.content) == (200, b"")
    for _ in range(200):  # the server ends the watch once the response is complete; bounded poll
        if not memory_store._watchers:
            break
        await asyncio.sleep(0.01)
    assert not memory_store._watchers


def test_a_status_body_survives_json_round_trip_of_odd_text() -> None:
    """Status bodies are ASCII JSON: what a client decodes is the message as written."""
    from devplace import errors
    from devplace.server._app import status_response

    response = status_response(errors.Malformed("key '\ud800' and caf\u00e9"))
    assert response.body.isascii()
    assert json.loads(response.body)["message"] == "key '\ud800' and caf\u00e9"
