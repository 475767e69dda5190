"""Choosing a request's route in a few steps: the route FastAPI's router would choose, without its walk over them all.

Why: FastAPI's router (0.165) offers a request to every route in order, and through each included router twice (once
to pick the router, once inside it), with bookkeeping per candidate: a Pod's update checked 54 routes, and under
cProfile routing was 62% of a GET's cost in the process and a fifth of the server's CPU in the DRA fill of
`bench/dra_scheduler.py`. The routes themselves stay FastAPI's (OpenAPI, handlers, 405s and 404s); this table only
finds the one that wins sooner.

Exactness: the router's answer is the first route, in its order, whose path matches and which allows the method
(a route whose path matches but not its method only makes the router look further). The table holds every route in
that order (included routers flattened), grouped by the path's first segment and by method, so a lookup tries only
the few routes that could match: for `PUT /api/v1/namespaces/default/pods/p/status` the six PUT routes under `/api`.
A route the table does not serve itself (anything but an `APIRoute` reached through plain includes: a mount, a route
of another kind, an include with a prefix or dependencies) still counts: when it would win, the lookup answers None
and the request goes to the router as before. So does a request the table finds no route for (the router answers
its 404, 405 or redirect), and one with a `root_path`.

A route found here is handled as the router handles it: `scope["endpoint"]`, `scope["path_params"]` (with the
route's converters) and `scope["route"]` set, then `route.handle`. Routes added after the table was built come after
the ones in it, so they could never win over them: the router still finds them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi.routing import APIRoute
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send


@dataclass(frozen=True)
class _Entry:
    order: int
    regex: re.Pattern[str] | None
    """None: matches every path (a route the table cannot read)."""
    methods: frozenset[str] | None
    """None: every method."""
    route: APIRoute | None
    """None: a route the table does not serve (when it wins, the router decides)."""


_ANY = ""
"""The bucket of routes whose first segment is not a literal: tried for every path."""


def _first_segment(path: str) -> str:
    return path[1:].split("/", 1)[0] if path.startswith("/") else _ANY


def _plain_include(context: Any) -> bool:
    """An include that changes nothing of how its routes match or run (no prefix, dependencies or body limit)."""
    return (
        context is not None
        and getattr(context, "prefix", None) == ""
        and not getattr(context, "dependencies", None)
        and getattr(context, "max_body_size", None) is None
    )


def _flattened(routes: Sequence[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route in the router's order, the routes of plain includes in their place. An include that is not plain
    stays one entry: its routes' own patterns do not say which paths it answers, so the table reads it as matching
    every path (what comes after it is the router's to decide)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if (
            inner is not None
            and isinstance(getattr(inner, "routes", None), list)
            and _plain_include(getattr(route, "include_context", None))
        ):
            yield from _flattened(inner.routes)
        else:
            yield route


class RouteTable:
    """The app's routes, grouped for `lookup` (see the module docstring)."""

    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        self._buckets: dict[str, list[_Entry]] = {}
        for order, route in enumerate(_flattened(routes)):
            regex = getattr(route, "path_regex", None)
            methods = getattr(route, "methods", None)
            entry = _Entry(
                order=order,
                regex=regex if isinstance(regex, re.Pattern) else None,
                methods=frozenset(methods) if methods else None,
                route=route if isinstance(route, APIRoute) and isinstance(regex, re.Pattern) else None,
            )
            path = getattr(route, "path_format", None) if entry.regex is not None else None
            first = _first_segment(path) if isinstance(path, str) else _ANY
            self._buckets.setdefault(_ANY if "{" in first else first, []).append(entry)
        self._methods = frozenset(m for bucket in self._buckets.values() for e in bucket for m in e.methods or ())
        self._candidates: dict[tuple[str, str], tuple[_Entry, ...]] = {}
        """Per (method, bucket) the entries to try, in order; a method no route names shares one key (a client's
        made-up methods cannot grow it)."""

    def _tried(self, method: str, first: str) -> tuple[_Entry, ...]:
        key = (method if method in self._methods else "", first if first in self._buckets else _ANY)
        found = self._candidates.get(key)
        if found is None:
            entries = [*self._buckets.get(key[1], ()), *(self._buckets.get(_ANY, ()) if key[1] != _ANY else ())]
            found = tuple(
                sorted(
                    (e for e in entries if e.methods is None or key[0] in e.methods),  # others could only be PARTIAL
                    key=lambda e: e.order,
                )
            )
            self._candidates[key] = found
        return found

    def lookup(self, method: str, path: str) -> tuple[APIRoute, dict[str, Any]] | None:
        """The route the router would choose for `method` and `path`, and its path parameters; None when the router
        must decide (no route found, or one the table does not serve would win)."""
        for entry in self._tried(method, _first_segment(path)):
            if entry.regex is None:
                return None
            match = entry.regex.match(path)
            if match is None:
                continue
            if entry.route is None:
                return None
            converters = entry.route.param_convertors
            return entry.route, {key: converters[key].convert(value) for key, value in match.groupdict().items()}
        return None


class TableRouting:
    """The router's ASGI entry (its `middleware_stack`) with the table in front: a request the table places is
    handled by its route at once, any other goes to the router."""

    def __init__(self, router: Any, table: RouteTable, fallback: ASGIApp) -> None:
        self.router = router
        self.table = table
        self.fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            found = self.table.lookup(scope["method"], scope["path"])
            if found is not None:
                route, params = found
                if "router" not in scope:
                    scope["router"] = self.router
                scope["endpoint"] = route.endpoint
                scope["path_params"] = {**scope.get("path_params", {}), **params}
                scope["route"] = route
                await route.handle(scope, receive, send)
                return
        await self.fallback(scope, receive, send)


def route_by_table(router: Any) -> None:
    """Put a `RouteTable` of `router`'s routes in front of it (once all routes are added)."""
    router.middleware_stack = TableRouting(router, RouteTable(router.routes), router.middleware_stack)
