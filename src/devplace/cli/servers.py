"""`devplace server`: the API server (resource API + /v2 fleet API) over one store, until SIGINT or SIGTERM.

The command owns the store: it opens it from `--store`, serves it with uvicorn, and closes it after uvicorn has
stopped, whichever signal stopped it (uvicorn's own signal handling would re-raise SIGTERM before the store is
closed, so the command installs its own handlers: the first signal drains, a second one forces the exit).
Open watch streams are given `--shutdown-timeout` seconds before they are cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from typing import Annotated

import typer

from devplace import errors
from devplace.cli.resources import StoreOption, run, store_url

__all__ = ["listening_socket", "register"]


def server(
    ctx: typer.Context,
    store: StoreOption = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on", min=0, max=65535)] = 8080,
    max_body_bytes: Annotated[
        int | None,
        typer.Option("--max-body-bytes", help="Largest request body accepted (larger: 413) [default: 3 MiB]", min=1),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="critical, error, warning, info or debug")] = "info",
    shutdown_timeout: Annotated[
        int, typer.Option("--shutdown-timeout", help="Seconds open streams get on shutdown", min=0)
    ] = 5,
) -> None:
    """Serve the store over HTTP: the Kubernetes-style resource API, watch, and the /v2 fleet API."""
    url = store_url(ctx, store)

    async def work() -> int:
        import uvicorn  # the web stack loads only for this command

        from devplace.server.app import DEFAULT_MAX_BODY_BYTES, EmbeddedServer, create_app
        from devplace.store import open_store

        try:  # bind first, so a taken port is one clear error line before anything else starts
            listener = listening_socket(host, port)
        except OSError as e:
            raise errors.Unavailable(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
        st = open_store(url)
        try:
            config = uvicorn.Config(
                create_app(st, max_body_bytes=max_body_bytes or DEFAULT_MAX_BODY_BYTES),
                host=host,
                port=port,
                log_level=log_level,
                access_log=log_level == "debug",
                lifespan="off",
                timeout_graceful_shutdown=shutdown_timeout,
            )
            web = EmbeddedServer(config)

            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, web.stop)
            bound = listener.getsockname()[1]
            shown = f"[{host}]" if ":" in host else host
            typer.echo(f"devplace server: store {url}, listening on http://{shown}:{bound}", err=True)
            await web.serve(sockets=[listener])
        finally:
            listener.close()
            await st.close()
        return 0

    run(work)


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket like asyncio's own: proto IPPROTO_TCP, so accepted connections get TCP_NODELAY
    (asyncio sets it only when the proto says TCP; without it small responses wait ~40 ms for delayed ACKs)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)[
        0
    ]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def register(app: typer.Typer) -> None:
    app.command()(server)
