"""`/metrics` and the request metrics behind it: kube-apiserver's names, counted at the outermost layer of the app.

`RequestMetrics` wraps the whole app (framing refusals, 401s and 404s are requests too) and, per request, counts
`apiserver_request_total{verb,resource,code}` and observes `apiserver_request_duration_seconds{verb,resource}`; a
watch is long-running instead: it is counted when it ends, with no latency, and is one of
`apiserver_longrunning_requests{verb="WATCH",resource}` and `apiserver_registered_watchers{kind}` while open.

`request_labels` (pure) names a request as kube-apiserver does: a GET of one object `GET`, of a collection `LIST`,
with `watch=true` (or on `/store/watch`) `WATCH`; `POST`, `PUT`, `DELETE` (`DELETECOLLECTION` on a collection),
`PATCH` (`APPLY` for a server-side apply body); HEAD counts as GET. The resource is the plural the path names when
devplace serves that kind (`instances`; a subresource such as `pods/NAME/status` counts under `pods`), `store` for
the store API, and `""` for every other path, so a client asking for made-up
paths cannot grow the label set: the set of values is bounded by the kinds devplace registers.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter
from fastapi.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from devplace import metrics
from devplace.api import lookup, lookup_plural

APPLY_PATCH = "application/apply-patch+yaml"
_WATCHING = ("1", "true", "True")


def _served(plural: str) -> str | None:
    try:
        return lookup_plural(plural).plural
    except Exception:  # an unknown plural: not a resource devplace serves (bounded labels, module docstring)
        return None


def _kind_plural(kind: str) -> str | None:
    try:
        return lookup(kind).plural
    except Exception:
        return None


def request_labels(method: str, path: str, query: str, content_type: str = "") -> tuple[str, str]:
    """(verb, resource) of a request, as kube-apiserver labels its metrics (module docstring)."""
    method = "GET" if method == "HEAD" else method
    params = parse_qs(query)
    watching = params.get("watch", [""])[-1] in _WATCHING
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["store", "watch"]:
        kind = params.get("kind", [""])[-1]
        return "WATCH", (_kind_plural(kind) or "store") if kind else "store"
    if parts[:1] == ["store"]:
        return method, "store"
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return method, ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        if _served(rest[2]) is not None:
            rest = rest[2:]
        elif rest[2] not in ("status", "finalize"):  # a Namespace's own subresources; anything else is no resource
            return method, ""
    if not rest:
        return method, ""
    resource = _served(rest[0])
    if resource is None:
        return method, ""
    collection = len(rest) == 1
    if method == "GET":
        verb = "WATCH" if watching else ("LIST" if collection else "GET")
    elif method == "DELETE" and collection:
        verb = "DELETECOLLECTION"
    elif method == "PATCH" and content_type.split(";")[0].strip() == APPLY_PATCH:
        verb = "APPLY"
    else:
        verb = method
    return verb, resource


class _Open:
    """The watches open now, by (verb, resource), sampled into the two gauges."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def longrunning(self) -> dict[tuple[str, ...], float]:
        return {("WATCH", resource): float(n) for resource, n in self.counts.items() if n}

    def watchers(self) -> dict[tuple[str, ...], float]:
        kinds: dict[tuple[str, ...], float] = {}
        for resource, n in self.counts.items():
            if n and resource not in ("", "store"):
                kind = lookup_plural(resource).kind
                kinds[(kind,)] = kinds.get((kind,), 0.0) + n
        return kinds


class RequestMetrics:
    """ASGI middleware: every HTTP request counted and timed (module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.open = _Open()
        metrics.LONGRUNNING.add(self.open, _Open.longrunning)
        metrics.WATCHERS.add(self.open, _Open.watchers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        content_type = ""
        for name, value in scope.get("headers", ()):
            if name == b"content-type":
                content_type = value.decode("latin-1")
                break
        query = scope.get("query_string", b"").decode("latin-1")
        verb, resource = request_labels(scope["method"], scope.get("path", ""), query, content_type)
        code = [500]

        async def measured_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                code[0] = int(message["status"])
            await send(message)

        started = time.perf_counter()
        watching = verb == "WATCH"
        if watching:
            self.open.counts[resource] = self.open.counts.get(resource, 0) + 1
        try:
            await self.app(scope, receive, measured_send)
        finally:
            metrics.API_REQUESTS.labels(verb, resource, str(code[0])).inc()
            if watching:
                self.open.counts[resource] -= 1
            else:
                metrics.API_REQUEST_DURATION.labels(verb, resource).observe(time.perf_counter() - started)


def router() -> APIRouter:
    """`GET /metrics`: the process's registry in Prometheus' text format."""
    api = APIRouter()

    async def scrape() -> Response:
        return Response(metrics.exposition(), media_type=metrics.CONTENT_TYPE_LATEST)

    responses: dict[int | str, dict[str, Any]] = {200: {"description": "Prometheus' text exposition format"}}
    api.add_api_route(
        "/metrics",
        scrape,
        methods=["GET"],
        tags=["health"],
        summary="Prometheus metrics (kube-apiserver's names)",
        response_class=Response,
        responses=responses,
    )
    return api
