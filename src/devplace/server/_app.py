"""The devplace API server: one FastAPI app over one `Store`.

`create_app(store)` mounts the Kubernetes-style resource API (`devplace.server._resources`), the EMCO-style fleet
API under /v2 (`devplace.server._emco`), `/healthz`, `/livez` and `/readyz` (`devplace.server._health`), `/metrics`
(`devplace.server._metrics`, which also counts every request) and `/version`
(the Kubernetes API level devplace serves, `kubeapi.versions`), the read-only `devices` subresource of
ResourceClasses and DeviceClasses (`devplace.server._classdevices`), and the dashboard at /ui with Swagger UI at /docs
(`devplace.server._ui`). The app does not own the store: whoever opened
it closes it (the `devplace server` command does so after uvicorn stops).

Errors: every failure becomes a `Status` body through `devplace.server._statuses` in one exception handler, in the
Kubernetes dialect, or the EMCO dialect for paths under /v2. Requests the HTTP layer refuses itself (no such route,
wrong method, body too large or undecodable) get a `Status` body of the same shape. Unexpected exceptions are a
500 `Status` that names the exception type only, never a traceback. `Status` bodies are ASCII JSON (other characters
escaped), so a message quoting hostile input (a lone surrogate in a key) can always be sent.

Bodies are read, capped and decoded (off the event loop) by `devplace.server._bodies.BodyGuard` before any route
runs; a body that does not decode is answered there, in the path's dialect. Before all of them,
`devplace.server._framing.RequestFraming` refuses requests whose framing is wrong (Content-Length with chunked
encoding, too many query parameters, too large a head).

HEAD: every GET route answers HEAD as it answers GET, without the body (RFC 9110): a middleware hands the routes a
GET and sends only the status and headers; a streaming response (a watch) is ended as soon as they are sent.

Authentication and authorization (`create_app(auth=...)`, off by default): `server.guards.AccessGuard` runs in front
of the body reader (401 and 403 `Status` bodies; `server.authn`, `server.authz`), and the routes' store is a
`server.guards.GuardedStore`, which checks each write of a node identity. Watches are limited per client and dropped
when their client stops reading (`server.limits`); lists are paged by the server (`server.lists`).

`running(app)` serves an app with uvicorn on loopback inside the current event loop (the demo and the tests use it),
over TLS when given `tls` (`server.authn.TlsFiles`), with `connections` bounding how long a request's headers and
body may take and how many connections one address may hold (`server.connections.ConnectionLimits`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import AsyncIterator, Generator
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import devplace.placement  # noqa: F401  (registers the fleet kinds, which the resource API serves too)
from devplace import __version__, errors
from devplace.clocks import Clock, SystemClock
from devplace.kubeapi import version_info
from devplace.server import _authn as authn
from devplace.server import _classdevices as classdevices
from devplace.server import _deployments as deployments
from devplace.server import _discoveries as discoveries
from devplace.server import _emco as emco
from devplace.server import _guards as guards
from devplace.server import _health as health
from devplace.server import _limits as limits
from devplace.server import _metrics as request_metrics
from devplace.server import _openapis as openapis
from devplace.server import _patches as patches
from devplace.server import _resources as resources
from devplace.server import _reviews as reviews
from devplace.server import _statuses as http_errors
from devplace.server import _ui as ui
from devplace.server._bodies import BodyGuard
from devplace.server._connections import ConnectionLimits
from devplace.server._framing import RequestFraming
from devplace.server._routetables import route_by_table
from devplace.store import EventRecorder, Store

DEFAULT_MAX_BODY_BYTES = 3 * 1024 * 1024  # Kubernetes' default request size limit
_log = logging.getLogger(__name__)


def _dialect(request: Request) -> http_errors.Dialect:
    return _dialect_of(request.url.path)


def _dialect_of(path: str) -> http_errors.Dialect:
    return "emco" if path.startswith("/v2") else "kubernetes"


class _StatusResponse(JSONResponse):
    """A `Status` body as ASCII JSON: a message may quote hostile input, lone surrogates included."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def status_response(
    err: errors.DevplaceError, dialect: http_errors.Dialect = "kubernetes", subject: http_errors.Subject | None = None
) -> JSONResponse:
    """The HTTP response for a devplace error (the table lives in `devplace.server._statuses`); `subject`: the object
    the request names (`statuses.Subject`)."""
    body = http_errors.status_body(err, dialect, subject)
    return _StatusResponse(body, status_code=body["code"])


def _refuse(err: errors.DevplaceError, scope: Scope) -> ASGIApp:
    """What `BodyGuard` answers for a body it refuses, in the dialect of the request's path."""
    return status_response(err, _dialect_of(str(scope.get("path", ""))))


def _protocol_status(code: int, reason: str, message: str) -> JSONResponse:
    """HTTP-level refusals that are no devplace error (405, 500)."""
    body = http_errors.protocol_status_body(code, reason, message)
    return _StatusResponse(body, status_code=code)


class _HeadAsGet:
    """ASGI middleware: HEAD is GET without the body; the routes and the other middleware only ever see GET."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        finished = False

        async def head_send(message: Message) -> None:
            nonlocal finished
            if finished:
                return  # the body GET would send, and anything after it
            await send(message)
            if message["type"] == "http.response.start":
                # The response is complete once its headers are out: the server then tells the app the client has
                # gone (a watch stops streaming), and drops any body for a HEAD request.
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                finished = True

        await self.app({**scope, "method": "GET"}, receive, head_send)


async def _on_devplace_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.DevplaceError)
    subject = getattr(request.state, "subject", None)  # set by the write routes (`resources.name_subject`)
    return status_response(exc, _dialect(request), subject if isinstance(subject, http_errors.Subject) else None)


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        if _dialect(request) == "emco":  # EMCO's own text for a path no route serves
            return status_response(errors.NotFound(emco.UNKNOWN_ROUTE), "emco")
        return status_response(
            errors.NotFound(f"the server could not find the requested resource ({request.url.path})"), _dialect(request)
        )
    if exc.status_code == 405:
        return _protocol_status(405, "MethodNotAllowed", f"{request.method} is not supported on {request.url.path}")
    return _protocol_status(
        exc.status_code, "BadRequest" if exc.status_code < 500 else "InternalError", str(exc.detail)
    )


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    """FastAPI's own request validation (the /v2 routes use it): refused fields, named by path.

    A body FastAPI could not read as JSON is `Malformed`, as `BodyGuard` answers every other undecodable body, so /v2
    answers all of them alike (422 `BadRequest` in the EMCO dialect)."""
    assert isinstance(exc, RequestValidationError)
    fields = []
    undecodable = False
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path")]
        undecodable = undecodable or err.get("type") == "json_invalid"
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if not loc and err.get("type") == "missing":
            loc, msg = ["body"], "required (the request body is empty)"
        fields.append(errors.FieldError(".".join(loc), msg))
    message = "; ".join(str(f) for f in fields) or "invalid request"
    if undecodable:
        return status_response(errors.Malformed(f"the request body is not valid JSON: {message}"), _dialect(request))
    return status_response(errors.Invalid(message, fields), _dialect(request))


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    _log.exception("unexpected error serving %s %s", request.method, request.url.path, exc_info=exc)
    return _protocol_status(500, "InternalError", f"internal error ({type(exc).__name__}); see the server log")


def create_app(
    store: Store,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    fleet_api: bool = True,
    clock: Clock | None = None,
    watch_bookmark_interval: float = resources.DEFAULT_BOOKMARK_INTERVAL,
    auth: authn.Auth | None = None,
    max_watches_per_client: int = limits.DEFAULT_MAX_WATCHES,
    watch_stall_timeout: float | None = limits.DEFAULT_STALL_TIMEOUT,
    deployment_status: bool | None = None,
) -> FastAPI:
    """The API server over `store`; request bodies over `max_body_bytes` get 413 and change nothing.

    `fleet_api=False` leaves out the /v2 fleet routes (a resource-API-only server starts faster; tests use it).
    `clock` (default: the system's) dates Table ages and paces watch BOOKMARK events, one every
    `watch_bookmark_interval` seconds to watches that allow them.
    `auth` turns on authentication and authorization (None: every request may do anything, as before); a client may
    hold `max_watches_per_client` watches, and a watch whose client has not read for `watch_stall_timeout` seconds is
    dropped (`server.limits`).
    `deployment_status`: whether the server answers Deployments' status, devplace running no Deployment controller
    (`server.deployments`); None: when the store holds its data itself (not on a `kube://` or remote store).
    """
    app = FastAPI(
        title="devplace",
        version=__version__,
        summary="Kubernetes-style resource API and EMCO-style fleet API over one devplace store",
        openapi_url="/openapi.json",
        docs_url=None,  # `server.ui` serves /docs with Swagger UI's files vendored, so it works offline
        redoc_url=None,
    )
    app.add_middleware(BodyGuard, limit=max_body_bytes, refuse=_refuse)
    app.add_middleware(limits.WatchLimits, per_client=max_watches_per_client, stall_timeout=watch_stall_timeout)
    app.state.auth = auth
    if deployment_status if deployment_status is not None else deployments.answers_for(store):
        now = clock or SystemClock()
        events = EventRecorder(store, deployments.COMPONENT, now)
        store = deployments.AnsweringStore(store, now, events)
    if auth is not None:  # outside the limits (it names the user they count by) and the body reader
        app.add_middleware(guards.AccessGuard, auth=auth, store=store, refuse=_refuse)
        store = guards.GuardedStore(store)
    app.state.store = store
    app.add_middleware(RequestFraming)  # before authentication: framing is refused whoever sends it
    app.add_middleware(_HeadAsGet)  # everything inside sees a GET
    app.add_middleware(request_metrics.RequestMetrics)  # outermost: every request is counted, refused ones too
    app.add_exception_handler(errors.DevplaceError, _on_devplace_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(Exception, _on_unexpected)

    @app.get("/healthz", tags=["health"], response_class=PlainTextResponse, summary="Liveness")
    async def healthz() -> str:
        return "ok"

    @app.get("/version", tags=["health"], summary="The Kubernetes API level served (version.Info) and devplace's")
    async def version() -> dict[str, Any]:
        return version_info(__version__)

    app.include_router(reviews.router(store))  # before the resource routes, whose paths would match them
    app.include_router(resources.router(store, clock=clock, bookmark_interval=watch_bookmark_interval))
    app.include_router(patches.router(store, clock=clock))
    app.include_router(classdevices.router(store))
    app.include_router(health.router(store))
    app.include_router(request_metrics.router())
    app.include_router(discoveries.router())
    app.include_router(openapis.router())
    app.include_router(ui.router())
    if fleet_api:
        app.include_router(emco.router(store))
    route_by_table(app.router)
    return app


class EmbeddedServer(uvicorn.Server):
    """uvicorn without its signal handlers (the embedding program owns Ctrl-C) and with a prompt `stop()`.

    uvicorn checks `should_exit` every 0.1 s and pauses 0.1 s in shutdown; `stop()` wakes the loop at once and
    `shutdown` waits only as long as open connections need, so tests that start many servers stay quick.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._wake = asyncio.Event()

    def stop(self) -> None:
        """Begin a graceful shutdown; a second call forces it (open streams are cut at once)."""
        if self.should_exit:
            self.force_exit = True
        self.should_exit = True
        self._wake.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Stop listening, ask connections to finish, wait for them (checking every 10 ms, unlike uvicorn's fixed
        0.1 s pause) up to `timeout_graceful_shutdown`, then cancel what is left."""
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        state = self.server_state
        for connection in list(state.connections):
            connection.shutdown()
        loop = asyncio.get_running_loop()
        limit = self.config.timeout_graceful_shutdown
        deadline = None if limit is None else loop.time() + limit
        while (state.connections or state.tasks) and not self.force_exit:
            if deadline is not None and loop.time() >= deadline:
                for task in state.tasks:
                    task.cancel()
                break
            await asyncio.sleep(0.01)
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def main_loop(self) -> None:
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)
            should_exit = await self.on_tick(counter)


@contextlib.asynccontextmanager
async def running(
    app: FastAPI,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    shutdown_timeout: int = 1,
    tls: authn.TlsFiles | None = None,
    connections: ConnectionLimits | None = ConnectionLimits(),
) -> AsyncIterator[str]:
    """Serve `app` in this event loop; yields the base URL (the bound port when `port` is 0); stops on exit.

    Open streams (watches) are cancelled `shutdown_timeout` seconds after exit begins. With `tls` the URL is https.
    `connections`: the connection limits (`server.connections`; None: uvicorn's own protocol, unbounded).
    """
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=shutdown_timeout,
        access_log=False,
        **authn.uvicorn_options(tls, getattr(app.state, "auth", None), connections),
    )
    server = EmbeddedServer(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()  # raises the startup error
                raise errors.Unavailable(f"the API server on {host}:{port} stopped during startup")
            await asyncio.sleep(0.005)
        bound = server.servers[0].sockets[0].getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        yield f"{'https' if tls else 'http'}://{shown}:{bound}"
    finally:
        server.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await task
