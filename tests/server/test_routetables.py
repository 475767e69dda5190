"""The route table picks the route FastAPI's router picks, for every route's own paths and for paths made up of the
routes' words (hypothesis), with every method; what it does not place, the router answers as before."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from devplace.server import create_app
from devplace.server._routetables import RouteTable, TableRouting
from devplace.store import MemoryStore

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "BREW")


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return create_app(MemoryStore())


def _routing(app: FastAPI) -> TableRouting:
    routing = app.router.middleware_stack
    assert isinstance(routing, TableRouting)
    return routing


def _words(app: FastAPI) -> list[str]:
    """Every literal segment of every route, and values for the parameters."""
    words = {"default", "x", "v1", "pods", "akri.sh", "nodes", "", "{}", "a b"}
    for route in app.routes:
        path = getattr(route, "path_format", "")
        words.update(part for part in path.split("/") if part and "{" not in part)
    for routing_route in _routing(app).table._buckets.values():
        for entry in routing_route:
            if entry.route is not None:
                words.update(p for p in entry.route.path_format.split("/") if p and "{" not in p)
    return sorted(words)


def _route_paths(app: FastAPI) -> Iterator[str]:
    """Each served route's path with its parameters filled in."""
    for bucket in _routing(app).table._buckets.values():
        for entry in bucket:
            if entry.route is not None:
                yield re.sub(r"\{[^}:]+(:path)?\}", "x", entry.route.path_format)


class _Chosen:
    """Which route handled a request (APIRoute.handle recorded instead of run)."""

    def __init__(self) -> None:
        self.route: APIRoute | None = None


def _choice(app: FastAPI, asgi: Any, method: str, path: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, int]:
    chosen = _Chosen()

    async def handle(self: APIRoute, scope: Scope, receive: Receive, send: Send) -> None:
        chosen.route = self
        await Response(status_code=204)(scope, receive, send)

    monkeypatch.setattr(APIRoute, "handle", handle)
    statuses: list[int] = []
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1),
        "root_path": "",
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    asyncio.run(asgi(scope, receive, send))
    return chosen.route, statuses[0]


def _both(app: FastAPI, method: str, path: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    routing = _routing(app)
    with_table = _choice(app, app, method, path, monkeypatch)
    app.router.middleware_stack = routing.fallback
    try:
        without = _choice(app, app, method, path, monkeypatch)
    finally:
        app.router.middleware_stack = routing
    return with_table, without


def test_every_route_is_found_as_the_router_finds_it_with_every_method(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = sorted(set(_route_paths(app)))
    assert len(paths) > 40
    placed = 0
    for path in paths:
        for method in METHODS:
            with_table, without = _both(app, method, path, monkeypatch)
            assert with_table == without, (method, path)
            placed += _routing(app).table.lookup(method, path) is not None
    assert placed > 100  # the table placed most of them itself


def test_a_literal_route_listed_first_wins_over_the_pattern_that_also_matches_it(app: FastAPI) -> None:
    table = _routing(app).table
    found = table.lookup("POST", "/api/v1/namespaces/default/bindings")
    assert found is not None
    assert found[0].path_format == "/api/v1/namespaces/{namespace}/bindings"
    review = table.lookup("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert review is not None
    assert review[0].path_format == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    item = table.lookup("PUT", "/api/v1/namespaces/default/pods/p/status")
    assert item is not None
    assert item[1] == {"version": "v1", "namespace": "default", "plural": "pods", "name": "p"}


def test_made_up_methods_share_one_entry_of_the_tables_cache(app: FastAPI) -> None:
    table = RouteTable(app.router.routes)
    for i in range(50):
        assert table.lookup(f"BREW{i}", "/api/v1/namespaces/default/pods/p") is None
    assert len(table._candidates) == 1


def test_what_the_table_does_not_serve_goes_to_the_router(app: FastAPI) -> None:
    table = _routing(app).table
    assert table.lookup("GET", "/openapi.json") is None  # a plain starlette Route
    assert table.lookup("GET", "/nowhere/at/all") is None
    assert table.lookup("PUT", "/api") is None  # only GET: the router answers 405


def test_what_comes_after_a_mount_or_an_include_with_a_prefix_is_left_to_the_router() -> None:
    inner = FastAPI()

    @inner.get("/things/{name}")
    async def thing(name: str) -> dict[str, str]:
        return {"name": name}

    outer = FastAPI()

    @outer.get("/early/{name}")
    async def early(name: str) -> dict[str, str]:
        return {"early": name}

    outer.mount("/mounted", inner)
    outer.include_router(inner.router, prefix="/prefixed")

    @outer.get("/{anything}")
    async def anything(anything: str) -> dict[str, str]:
        return {"anything": anything}

    @outer.get("/mounted/things/{name}")
    @outer.get("/prefixed/things/{name}")
    async def shadowed(name: str) -> dict[str, str]:  # listed after the mount and the include: never chosen
        return {"shadowed": name}

    table = RouteTable(outer.router.routes)
    assert table.lookup("GET", "/mounted/things/a") is None
    assert table.lookup("GET", "/prefixed/things/a") is None
    assert table.lookup("GET", "/prefixed/other/a") is None  # nothing matches: the router's 404
    assert table.lookup("GET", "/plain") is None  # after the prefixed include: the router decides
    found = table.lookup("GET", "/early/a")
    assert found is not None
    assert (found[0].path_format, found[1]) == ("/early/{name}", {"name": "a"})


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_path_of_route_words_gets_the_routers_answer(data: st.DataObject) -> None:
    app = _APP
    words = _WORDS
    segments = data.draw(st.lists(st.sampled_from(words), min_size=0, max_size=9))
    trailing = data.draw(st.booleans())
    path = "/" + "/".join(segments) + ("/" if trailing and segments else "")
    method = data.draw(st.sampled_from(METHODS))
    with pytest.MonkeyPatch.context() as monkeypatch:
        with_table, without = _both(app, method, path, monkeypatch)
    assert with_table == without, (method, path)


_APP = create_app(MemoryStore())
_WORDS = _words(_APP)
