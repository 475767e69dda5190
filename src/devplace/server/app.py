"""The devplace API server: one FastAPI app over one `Store`.

`create_app(store)` mounts the Kubernetes-style resource API (`devplace.server.resources`), the EMCO-style fleet
API under /v2 (`devplace.server.fleet`), `/healthz` and `/version`. The app does not own the store: whoever opened
it closes it (the `devplace server` command does so after uvicorn stops).

Errors: every failure becomes a `Status` body through `devplace.server.errors` in one exception handler, in the
Kubernetes dialect, or the EMCO dialect for paths under /v2. Requests the HTTP layer refuses itself (no such route,
wrong method, body too large or undecodable) get a `Status` body of the same shape. Unexpected exceptions are a
500 `Status` that names the exception type only, never a traceback.

`running(app)` serves an app with uvicorn on loopback inside the current event loop (the demo and the tests use it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Generator
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from devplace import __version__, errors
from devplace.server import errors as http_errors
from devplace.server import fleet, resources
from devplace.server.bodies import BodyLimit
from devplace.store.base import Store

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "EmbeddedServer",
    "create_app",
    "running",
]

DEFAULT_MAX_BODY_BYTES = 3 * 1024 * 1024  # Kubernetes' default request size limit
_log = logging.getLogger(__name__)


def _dialect(request: Request) -> http_errors.Dialect:
    return "emco" if request.url.path.startswith("/v2") else "kubernetes"


def status_response(err: errors.DevplaceError, dialect: http_errors.Dialect = "kubernetes") -> JSONResponse:
    """The HTTP response for a devplace error (the table lives in `devplace.server.errors`)."""
    body = http_errors.status_body(err, dialect)
    return JSONResponse(body, status_code=body["code"])


def _protocol_status(code: int, reason: str, message: str) -> JSONResponse:
    """HTTP-level refusals that are no devplace error (405, 500)."""
    body = http_errors.protocol_status_body(code, reason, message)
    return JSONResponse(body, status_code=code)


async def _on_devplace_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, errors.DevplaceError)
    return status_response(exc, _dialect(request))


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        return status_response(
            errors.NotFound(f"the server could not find the requested resource ({request.url.path})"), _dialect(request)
        )
    if exc.status_code == 405:
        return _protocol_status(405, "MethodNotAllowed", f"{request.method} is not supported on {request.url.path}")
    return _protocol_status(
        exc.status_code, "BadRequest" if exc.status_code < 500 else "InternalError", str(exc.detail)
    )


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    """FastAPI's own request validation (the /v2 routes use it): refused fields, named by path."""
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


def create_app(store: Store, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, fleet_api: bool = True) -> FastAPI:
    """The API server over `store`; request bodies over `max_body_bytes` get 413 and change nothing.

    `fleet_api=False` leaves out the /v2 fleet routes (a resource-API-only server starts faster; tests use it).
    """
    app = FastAPI(
        title="devplace",
        version=__version__,
        summary="Kubernetes-style resource API and EMCO-style fleet API over one devplace store",
        openapi_url="/openapi.json",
        redoc_url=None,
    )
    app.state.store = store
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_exception_handler(errors.DevplaceError, _on_devplace_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(Exception, _on_unexpected)

    @app.get("/healthz", tags=["health"], response_class=PlainTextResponse, summary="Liveness")
    async def healthz() -> str:
        return "ok"

    @app.get("/version", tags=["health"], summary="Server version")
    async def version() -> dict[str, Any]:
        return {"gitVersion": f"v{__version__}", "devplace": __version__, "platform": "python"}

    app.include_router(resources.router(store))
    if fleet_api:
        app.include_router(fleet.router(store))
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
    app: FastAPI, *, host: str = "127.0.0.1", port: int = 0, shutdown_timeout: int = 1
) -> AsyncIterator[str]:
    """Serve `app` in this event loop; yields the base URL (the bound port when `port` is 0); stops on exit.

    Open streams (watches) are cancelled `shutdown_timeout` seconds after exit begins.
    """
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=shutdown_timeout,
        access_log=False,
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
        yield f"http://{shown}:{bound}"
    finally:
        server.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await task
