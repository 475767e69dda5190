"""`/livez` and `/readyz`: whether the server lives and whether it can serve, as kube-apiserver answers them.

Each endpoint runs named checks: `/livez` only `ping` (the process answers; a store that does not answer makes it
unready, not dead, so nothing restarts a server whose etcd is briefly away), `/readyz` `ping` and `store` (the
store answers its current revision within `STORE_TIMEOUT` seconds). Kubernetes' forms:

- 200 `ok` when every check passes; with `?verbose`, one line per check (`[+]ping ok`) and `readyz check passed`;
- a failing check makes it 500 with every line (`[-]store failed: reason withheld`) and `readyz check failed`;
  the reason goes to the server log, never to the client (as Kubernetes withholds it);
- `?exclude=store` skips a check (an unknown name is listed as `warn: some health checks cannot be excluded`);
- `/readyz/<check>` (and `/livez/<check>`) runs that one check: 200 `ok` or 500, 404 for a name it does not have.

Like /healthz and /version, they are open to every client with authentication on (`server.authz.PUBLIC_PATHS`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from devplace import errors
from devplace.store import Store

STORE_TIMEOUT = 5.0
"""Seconds the store may take to answer its revision before `/readyz` says it is not ready."""

Check = Callable[[], Awaitable[None]]
_log = logging.getLogger(__name__)


async def _ping() -> None:
    return None


def _store_check(store: Store) -> Check:
    async def check() -> None:
        await asyncio.wait_for(store.revision(), STORE_TIMEOUT)

    return check


async def report(endpoint: str, checks: Mapping[str, Check], *, verbose: bool, exclude: Sequence[str]) -> Response:
    """Run `checks` (but `exclude`d ones) and answer as kube-apiserver's `/<endpoint>` (module docstring)."""
    lines: list[str] = []
    failed = False
    for name, check in checks.items():
        if name in exclude:
            lines.append(f"[+]{name} excluded: ok")
            continue
        try:
            await check()
            lines.append(f"[+]{name} ok")
        except Exception as e:  # any failure of a check is a failed check; its reason goes to the log only
            _log.warning("%s check %s failed: %s", endpoint, name, e)
            failed = True
            lines.append(f"[-]{name} failed: reason withheld")
    unknown = sorted(set(exclude) - set(checks))
    if unknown:
        lines.append(f"warn: some health checks cannot be excluded: no matches for {', '.join(unknown)}")
    if failed:
        return PlainTextResponse("\n".join([*lines, f"{endpoint} check failed"]) + "\n", status_code=500)
    if verbose:
        return PlainTextResponse("\n".join([*lines, f"{endpoint} check passed"]) + "\n")
    return PlainTextResponse("ok")


def router(store: Store) -> APIRouter:
    """`/livez`, `/readyz` and their single checks (`/readyz/store`)."""
    endpoints: dict[str, dict[str, Check]] = {
        "livez": {"ping": _ping},
        "readyz": {"ping": _ping, "store": _store_check(store)},
    }
    api = APIRouter()

    def whole(endpoint: str) -> Callable[[Request], Awaitable[Response]]:
        async def handler(request: Request) -> Response:
            query = request.query_params
            verbose = "verbose" in query and query["verbose"].lower() not in ("0", "false")
            exclude = [v for raw in query.getlist("exclude") for v in raw.split(",") if v]
            return await report(endpoint, endpoints[endpoint], verbose=verbose, exclude=exclude)

        return handler

    def single(endpoint: str) -> Callable[[Request], Awaitable[Response]]:
        async def handler(request: Request) -> Response:
            name = str(request.path_params["check"])
            check = endpoints[endpoint].get(name)
            if check is None:
                raise errors.NotFound(f"the server could not find the requested resource (/{endpoint}/{name})")
            return await report(endpoint, {name: check}, verbose=False, exclude=())

        return handler

    for endpoint, summary in (("livez", "Liveness"), ("readyz", "Readiness (the store answers)")):
        failed: dict[int | str, dict[str, Any]] = {
            500: {"description": "a check failed (each check's line says which)"}
        }
        query = [
            {"name": "verbose", "in": "query", "required": False, "schema": {"type": "string"}},
            {"name": "exclude", "in": "query", "required": False, "schema": {"type": "string"}},
        ]
        api.add_api_route(
            f"/{endpoint}",
            whole(endpoint),
            methods=["GET"],
            tags=["health"],
            summary=f"{summary}; ?verbose lists each check, ?exclude=NAME skips one",
            response_class=PlainTextResponse,
            responses=failed,
            openapi_extra={"parameters": query},
        )
        check = {"name": "check", "in": "path", "required": True, "schema": {"type": "string"}}
        api.add_api_route(
            f"/{endpoint}/{{check}}",
            single(endpoint),
            methods=["GET"],
            tags=["health"],
            summary=f"One {endpoint} check by name",
            response_class=PlainTextResponse,
            responses={**failed, 404: {"description": "no check of that name"}},
            openapi_extra={"parameters": [check]},
        )
    return api
