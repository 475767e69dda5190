"""The Kubernetes REST client core under the remote and kube backends (`store.restclients`): Status bodies back to
devplace errors, the HTTP client built from credentials (TLS material, a token re-read from its file on a 401, an
exec plugin's token, basic auth), JSON calls, list paging across expired continue tokens, watch lines, and the
small pieces both backends build paths and queries with. The watch's reconnect loop runs in tests/store/test_remote.py
and tests/store/test_kube.py, against real servers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from devplace import errors
from devplace.clocks import FakeClock
from devplace.server import _statuses as http_errors
from devplace.store._restclients import (
    Credentials,
    ExecPlugin,
    Resource,
    RestClient,
    delete_options,
    error_from_status,
    scope_holds,
    selector_params,
    watch_event,
)
from tests.servers import free_port, serve_app

# -- Status bodies -> devplace errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "err",
    [
        errors.NotFound("ConfigMap default/a not found"),
        errors.AlreadyExists("ConfigMap default/a already exists"),
        errors.Conflict("resourceVersion 3 is stale"),
        errors.Gone("revision 2 has been compacted"),
        errors.Refused("slot held by node-b"),
        errors.Forbidden("node-a may not write node-b's slot"),
        errors.Unavailable("store is closed"),
        errors.Invalid.field("spec.capacity", "Input should be greater than or equal to 1"),
        errors.TooLarge("ConfigMap default/big is too large: 1572865 bytes of JSON, the limit is 1572864 bytes"),
        errors.ResourceVersionTooLarge.at(100_000, 6),
    ],
)
def test_every_error_survives_the_trip_through_a_status_body(err: errors.DevplaceError) -> None:
    back = error_from_status(http_errors.http_status(err), http_errors.status_body(err))
    assert type(back) is type(err)
    assert err.message in back.message  # Kubernetes prefixes a 504's message with "Timeout: "
    if isinstance(err, errors.Invalid):
        assert isinstance(back, errors.Invalid)
        assert back.fields == err.fields


@pytest.mark.parametrize(
    ("code", "body", "expected"),
    [
        (400, {"message": "the request body is not valid JSON"}, errors.Invalid),
        (413, {"message": "too large"}, errors.TooLarge),
        (504, {"message": "Timeout: request did not complete"}, errors.Unavailable),
        (405, None, errors.Invalid),
        (500, {"message": "internal error"}, errors.Unavailable),
        (502, "<html>bad gateway</html>", errors.Unavailable),
    ],
)
def test_other_answers_map_to_the_nearest_error(code: int, body: Any, expected: type[errors.DevplaceError]) -> None:
    assert type(error_from_status(code, body, "fallback")) is expected


def test_an_answer_without_a_status_body_keeps_the_fallback_text_as_its_message() -> None:
    assert error_from_status(404, "<html>", "no such page").message == "no such page"
    assert error_from_status(502, None).message == "the API server answered 502: HTTP 502"


# -- watch lines ------------------------------------------------------------------------------------------------------


def line(type_: str, obj: Any) -> str:
    return json.dumps({"type": type_, "object": obj})


def test_a_watch_line_gives_its_type_object_and_revision_bookmarks_included() -> None:
    obj = {"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "7"}}
    assert watch_event(line("MODIFIED", obj)) == ("MODIFIED", obj, 7)
    mark = {"kind": "ConfigMap", "metadata": {"resourceVersion": "9"}}
    assert watch_event(line("BOOKMARK", mark)) == ("BOOKMARK", mark, 9)


def test_an_error_event_raises_the_error_of_its_status() -> None:
    with pytest.raises(errors.Gone, match="too old"):
        watch_event(line("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not json", "malformed watch event"),
        ('{"type": "ADDED"}', "malformed watch event"),
        (line("SNAPSHOT", {"metadata": {"resourceVersion": "1"}}), "unknown watch event type 'SNAPSHOT'"),
        (line("ADDED", {"metadata": {}}), "watch event without a revision"),
        (line("ADDED", ["not", "an", "object"]), "watch event without a revision"),
    ],
)
def test_a_watch_line_the_server_should_not_send_is_unavailable(text: str, reason: str) -> None:
    with pytest.raises(errors.Unavailable, match=reason):
        watch_event(text)


# -- paths and queries ------------------------------------------------------------------------------------------------


def test_selectors_become_the_kubernetes_query_parameters_and_empty_ones_none() -> None:
    both = {"labelSelector": "app=web", "fieldSelector": "spec.nodeName=a"}
    assert selector_params("app=web", "spec.nodeName=a") == both
    assert selector_params(None, "") == {}


def test_a_delete_precondition_is_checked_before_it_becomes_delete_options() -> None:
    assert delete_options(None) is None
    precondition = {"resourceVersion": "5"}
    assert delete_options("5") == {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": precondition}
    with pytest.raises(errors.Invalid):
        delete_options("five")


@pytest.mark.parametrize(
    ("namespaced", "namespace", "holds"),
    [
        (True, None, True),
        (True, "default", True),
        (True, "", False),
        (False, None, True),
        (False, "", True),
        (False, "default", False),
    ],
)
def test_only_a_scope_of_the_kinds_own_kind_can_hold_its_objects(
    namespaced: bool, namespace: str | None, holds: bool
) -> None:
    assert scope_holds(namespaced, namespace) is holds


def test_a_resource_path_quotes_the_name_and_refuses_the_wrong_scope() -> None:
    pods = Resource("Pod", "v1", "pods", namespaced=True)
    assert pods.collection(None) == "/api/v1/pods"
    assert pods.item("a b/c", "team") == "/api/v1/namespaces/team/pods/a%20b%2Fc"
    with pytest.raises(errors.NotFound, match="needs a namespace"):
        pods.item("a", "")
    widgets = Resource("Widget", "apps.example/v2", "widgets", namespaced=False)
    assert widgets.item("w", "") == "/apis/apps.example/v2/widgets/w"
    with pytest.raises(errors.NotFound, match="is cluster-scoped"):
        widgets.item("w", "default")


# -- the HTTP client --------------------------------------------------------------------------------------------------


def test_unreadable_tls_material_is_refused_naming_the_credentials(tmp_path: Path) -> None:
    with pytest.raises(errors.Invalid) as caught:
        Credentials(ca_file=str(tmp_path / "missing.pem")).ssl_context()
    assert caught.value.fields[0].path == "credentials"
    with pytest.raises(errors.Invalid):
        Credentials(cert_data="not a pem", key_data="not a pem").ssl_context()


def test_an_https_client_loads_its_tls_material_before_any_request(tmp_path: Path, clock: FakeClock) -> None:
    credentials = Credentials(ca_file=str(tmp_path / "missing.pem"))
    client = RestClient("https://127.0.0.1:1", credentials, clock=clock, timeout=1)
    with pytest.raises(errors.Invalid) as caught:
        client._http()
    assert [f.path for f in caught.value.fields] == ["credentials"]


def authorizations(seen: list[str], accepted: str) -> FastAPI:
    """An API server that records each request's Authorization header and answers 401 unless it is `accepted`."""
    app = FastAPI()

    @app.get("/api/v1/nodes")
    async def nodes(request: Request) -> Response:
        seen.append(request.headers.get("authorization", ""))
        if seen[-1] != accepted:
            return JSONResponse({"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "who?"}, 401)
        return JSONResponse({"kind": "NodeList", "metadata": {"resourceVersion": "3"}, "items": []})

    return app


async def call_nodes(url: str, credentials: Credentials, clock: FakeClock) -> Any:
    client = RestClient(url, credentials, clock=clock, timeout=5)
    try:
        return await client._call("GET", "/api/v1/nodes")
    finally:
        await client.close()


async def test_a_token_from_a_file_is_read_again_on_a_401_and_the_request_retried(
    tmp_path: Path, clock: FakeClock
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("rotated\n")
    seen: list[str] = []
    async with serve_app(authorizations(seen, "Bearer rotated")) as url:
        listed = await call_nodes(url, Credentials(token="expired", token_file=str(token_file)), clock)
        assert listed["metadata"] == {"resourceVersion": "3"}
        assert seen == ["Bearer expired", "Bearer rotated"]
        seen.clear()
        token_file.write_text("stale")
        with pytest.raises(errors.Unauthenticated, match="who"):  # the file holds the refused token: no retry
            await call_nodes(url, Credentials(token="stale", token_file=str(token_file)), clock)
        assert seen == ["Bearer stale"]
        seen.clear()
        with pytest.raises(errors.Unauthenticated):  # a fixed token is not retried
            await call_nodes(url, Credentials(token="expired"), clock)
        assert seen == ["Bearer expired"]


async def test_an_exec_plugins_token_and_basic_auth_are_sent(tmp_path: Path, clock: FakeClock) -> None:
    printer = "import json, os; print(json.dumps({'status': {'token': os.environ['WHO']}}))"
    plugin = ExecPlugin("client.authentication.k8s.io/v1beta1", sys.executable, ("-c", printer), (("WHO", "plugin"),))
    seen: list[str] = []
    async with serve_app(authorizations(seen, "Bearer plugin")) as url:
        await call_nodes(url, Credentials(exec_plugin=plugin), clock)
        assert seen == ["Bearer plugin"]
    seen.clear()
    async with serve_app(authorizations(seen, "Basic dTpw")) as url:
        await call_nodes(url, Credentials(username="u", password="p"), clock)
        assert seen == ["Basic dTpw"]


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("-c", "import sys; sys.exit(3)"), "exited with 3"),
        (("-c", "print('{}')"), "printed no ExecCredential with a status.token"),
    ],
)
async def test_an_exec_plugin_that_gives_no_token_is_unauthenticated(
    clock: FakeClock, args: tuple[str, ...], reason: str
) -> None:
    plugin = ExecPlugin("client.authentication.k8s.io/v1beta1", sys.executable, args)
    seen: list[str] = []
    async with serve_app(authorizations(seen, "Bearer plugin")) as url:
        with pytest.raises(errors.Unauthenticated, match=reason):
            await call_nodes(url, Credentials(exec_plugin=plugin), clock)
    assert seen == []


async def test_a_call_sends_json_and_an_answer_that_is_not_json_is_unavailable(clock: FakeClock) -> None:
    received: list[tuple[str, str, Any]] = []
    app = FastAPI()

    @app.post("/api/v1/namespaces/default/configmaps")
    async def create(request: Request) -> Response:
        received.append((request.headers["content-type"], request.headers["accept"], await request.json()))
        return Response(b"<html>", media_type="text/html")

    async with serve_app(app) as url:
        client = RestClient(url, Credentials(), clock=clock, timeout=5)
        try:
            with pytest.raises(errors.Unavailable, match="answered POST /api/v1/namespaces/default/configmaps with no"):
                await client._call("POST", "/api/v1/namespaces/default/configmaps", body={"data": {"a": "é"}})
        finally:
            await client.close()
    assert received == [("application/json", "application/json", {"data": {"a": "é"}})]


async def test_a_server_that_does_not_answer_is_unavailable_naming_it(clock: FakeClock) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client = RestClient(url, Credentials(), clock=clock, timeout=5)
    try:
        with pytest.raises(errors.Unavailable, match=f"the API server at {url} did not answer"):
            await client._call("GET", "/api/v1/nodes")
    finally:
        await client.close()
    with pytest.raises(errors.Unavailable, match="store is closed"):
        client._http()


# -- lists ------------------------------------------------------------------------------------------------------------


def pages(script: list[tuple[int, dict[str, Any]]], requests: list[dict[str, str]]) -> FastAPI:
    """An API server answering each Node list request with the next scripted (code, body)."""
    app = FastAPI()

    @app.get("/api/v1/nodes")
    async def nodes(request: Request) -> Response:
        requests.append(dict(request.query_params))
        code, body = script.pop(0)
        return JSONResponse(body, code)

    return app


def page(revision: str, names: list[str], token: str = "") -> tuple[int, dict[str, Any]]:
    items = [{"kind": "Node", "metadata": {"name": n}} for n in names]
    return 200, {"kind": "NodeList", "metadata": {"resourceVersion": revision, "continue": token}, "items": items}


EXPIRED = (410, {"kind": "Status", "code": 410, "reason": "Expired", "message": "continue token expired"})


async def test_a_list_follows_continue_tokens_and_restarts_when_one_expires(clock: FakeClock) -> None:
    requests: list[dict[str, str]] = []
    script = [page("5", ["a"], "t1"), EXPIRED, page("6", ["a"], "t2"), page("9", ["b"])]
    async with serve_app(pages(script, requests)) as url:
        client = RestClient(url, Credentials(), clock=clock, timeout=5)
        try:
            listed = await client._list_pages("/api/v1/nodes", {"labelSelector": "x=y"}, page_size=1)
        finally:
            await client.close()
    assert ([i["metadata"]["name"] for i in listed.items], listed.revision) == (["a", "b"], 6)
    selector = {"labelSelector": "x=y", "limit": "1"}
    assert requests == [selector, {**selector, "continue": "t1"}, selector, {**selector, "continue": "t2"}]


async def test_a_list_whose_first_page_is_gone_raises_gone_and_one_that_keeps_expiring_is_unavailable(
    clock: FakeClock,
) -> None:
    requests: list[dict[str, str]] = []
    script = [EXPIRED, *[page("5", ["a"], "t"), EXPIRED] * 3]
    async with serve_app(pages(script, requests)) as url:
        client = RestClient(url, Credentials(), clock=clock, timeout=5)
        try:
            with pytest.raises(errors.Gone):
                await client._list_pages("/api/v1/nodes", {})
            assert requests == [{}]
            with pytest.raises(errors.Unavailable, match="the continue token kept expiring"):
                await client._list_pages("/api/v1/nodes", {})
        finally:
            await client.close()
    assert len(requests) == 7


async def test_a_list_without_a_resource_version_is_unavailable(clock: FakeClock) -> None:
    requests: list[dict[str, str]] = []
    async with serve_app(pages([(200, {"kind": "NodeList", "metadata": {}, "items": []})], requests)) as url:
        client = RestClient(url, Credentials(), clock=clock, timeout=5)
        try:
            with pytest.raises(errors.Unavailable, match="a list without a resourceVersion"):
                await client._list_pages("/api/v1/nodes", {})
        finally:
            await client.close()
