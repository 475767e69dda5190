"""`devplace server`: the API server (resource API + /v2 fleet API) over one store, until SIGINT or SIGTERM.

The command owns the store: it opens it from `--store`, serves it with uvicorn, and closes it after uvicorn has
stopped, whichever signal stopped it (uvicorn's own signal handling would re-raise SIGTERM before the store is
closed, so the command installs its own handlers: the first signal drains, a second one forces the exit).
Open watch streams are given `--shutdown-timeout` seconds before they are cut.

Slow clients (`devplace.server._connections`): a request's headers must arrive within `--header-timeout` seconds and
its body within `--body-timeout`, with no pause longer than `--body-idle-timeout` (else the connection is closed, a
late body answered 408 first); one client address holds at most `--max-connections-per-client` connections.

`--write-kubeconfig PATH` writes a kubeconfig for this server once its port is bound (so `--port 0` works): cluster,
user and context `devplace`, the context current, the server's loopback URL (a wildcard listen address becomes
127.0.0.1 or ::1), a user without credentials. The file is written atomically (a temporary file in the same directory,
renamed over PATH) with mode 0600 from the start, so `KUBECONFIG=PATH kubectl get instances` needs no other flag.

Authentication (README "Authentication"; `devplace.server._authn`, `devplace.server._authz`): `--token-auth-file`
(kube-apiserver's tokens CSV) and, over TLS (`--tls-cert-file`, `--tls-private-key-file`), `--client-ca-file` for
client certificates. Without either, every request may do anything, as before. The server refuses to listen on an
address other than loopback without authentication, or with tokens but without TLS (they would cross the network in
clear), unless told `--insecure`. `--kubeconfig-user NAME` puts NAME's first token from the tokens file into the
written kubeconfig; over TLS the kubeconfig trusts `--client-ca-file` (one CA for both sides, as kubeadm sets it up),
else the server's own certificate.

Logs: `--log-level` and `--log-format text|json` (`devplace.cli._logs`); uvicorn's access log only at debug. The
server's own `/metrics` is part of the app (`devplace.server._metrics`).

`devplace wait-ready --server URL` returns once the server at URL answers (its store's revision, through the remote
store, so tokens, client certificates and kubeconfig CAs apply as for any other command), or fails after `--timeout`
seconds naming what the last try got. A script that starts `devplace server ... &` runs it before its first request:
the server needs a second or two before it listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import signal
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml

from devplace import errors
from devplace.cli._logs import announce, configure_logging
from devplace.cli._options import LogFormatOption, LogLevelOption
from devplace.cli._resources import StoreOption, open_cli_store, run, store_url
from devplace.files import write_atomically

if TYPE_CHECKING:
    from devplace.server import Tokens

_FILE: dict[str, Any] = {"dir_okay": False, "exists": True, "readable": True}

TokenAuthFileOption = Annotated[
    Path | None,
    typer.Option("--token-auth-file", help='Bearer tokens, lines of token,user,uid[,"group1,group2"]', **_FILE),
]
KubeconfigUserOption = Annotated[
    str | None,
    typer.Option("--kubeconfig-user", help="Put this user's token (from --token-auth-file) in --write-kubeconfig"),
]
"""The options `devplace server` and `devplace up` share."""


def kubeconfig_token(tokens: Tokens | None, user: str | None) -> str | None:
    """The token `--kubeconfig-user` puts in the kubeconfig (None without the option); a user without one is refused."""
    if user is None:
        return None
    token = tokens.first_token.get(user) if tokens is not None else None
    if token is None:
        raise typer.BadParameter(f"no token for user {user!r} in --token-auth-file", param_hint="--kubeconfig-user")
    return token


def server(
    ctx: typer.Context,
    store: StoreOption = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on", min=0, max=65535)] = 8080,
    max_body_bytes: Annotated[
        int | None,
        typer.Option("--max-body-bytes", help="Largest request body accepted (larger: 413) [default: 3 MiB]", min=1),
    ] = None,
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
    shutdown_timeout: Annotated[
        int, typer.Option("--shutdown-timeout", help="Seconds open streams get on shutdown", min=0)
    ] = 5,
    write_kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--write-kubeconfig",
            help="Write a kubeconfig for this server here (mode 0600) once it listens",
            dir_okay=False,
        ),
    ] = None,
    kubeconfig_user: KubeconfigUserOption = None,
    token_auth_file: TokenAuthFileOption = None,
    tls_cert_file: Annotated[
        Path | None, typer.Option("--tls-cert-file", help="Serve HTTPS with this certificate (PEM)", **_FILE)
    ] = None,
    tls_private_key_file: Annotated[
        Path | None, typer.Option("--tls-private-key-file", help="The key of --tls-cert-file (PEM)", **_FILE)
    ] = None,
    client_ca_file: Annotated[
        Path | None,
        typer.Option(
            "--client-ca-file", help="Accept client certificates signed by this CA (user CN, groups O)", **_FILE
        ),
    ] = None,
    insecure: Annotated[
        bool,
        typer.Option("--insecure", help="Listen beyond loopback without authentication, or tokens without TLS"),
    ] = False,
    max_watches_per_client: Annotated[
        int | None,
        typer.Option("--max-watches-per-client", help="Open watches per user (or address) [default: 512]", min=1),
    ] = None,
    watch_stall_timeout: Annotated[
        float | None,
        typer.Option(
            "--watch-stall-timeout", help="Drop a watch whose client read nothing this long [default: 60 s]", min=0.001
        ),
    ] = None,
    header_timeout: Annotated[
        float | None,
        typer.Option(
            "--header-timeout", help="Close a connection whose request headers take longer [default: 10 s]", min=0.001
        ),
    ] = None,
    body_idle_timeout: Annotated[
        float | None,
        typer.Option(
            "--body-idle-timeout", help="End a request whose body pauses this long (408) [default: 30 s]", min=0.001
        ),
    ] = None,
    body_timeout: Annotated[
        float | None,
        typer.Option("--body-timeout", help="End a request whose body takes longer (408) [default: 60 s]", min=0.001),
    ] = None,
    max_connections_per_client: Annotated[
        int | None,
        typer.Option(
            "--max-connections-per-client", help="Connections one client address may hold [default: 1024]", min=1
        ),
    ] = None,
) -> None:
    """Serve the store over HTTP: the Kubernetes-style resource API, watch, and the /v2 fleet API."""
    url = store_url(ctx, store)
    level = configure_logging(log_level, log_format)
    from devplace.server import Auth, ConnectionLimits, TlsFiles, Tokens, uvicorn_options

    defaults = ConnectionLimits()
    connections = ConnectionLimits(
        header_timeout=header_timeout or defaults.header_timeout,
        body_idle_timeout=body_idle_timeout or defaults.body_idle_timeout,
        body_timeout=body_timeout or defaults.body_timeout,
        per_client=max_connections_per_client or defaults.per_client,
    )

    if (tls_cert_file is None) != (tls_private_key_file is None):
        raise typer.BadParameter("--tls-cert-file and --tls-private-key-file go together", param_hint="--tls-cert-file")
    if client_ca_file is not None and tls_cert_file is None:
        raise typer.BadParameter(
            "client certificates need TLS: give --tls-cert-file too", param_hint="--client-ca-file"
        )
    tls = None
    if tls_cert_file is not None and tls_private_key_file is not None:
        ca = str(client_ca_file) if client_ca_file else None
        tls = TlsFiles(str(tls_cert_file), str(tls_private_key_file), ca)
    try:
        tokens = Tokens.load(token_auth_file) if token_auth_file is not None else None
    except errors.Invalid as e:
        raise typer.BadParameter(e.message, param_hint="--token-auth-file") from e
    auth = Auth(tokens, client_certificates=client_ca_file is not None) if tokens or client_ca_file else None
    problem = exposure_problem(host, authenticated=auth is not None, tls=tls is not None, tokens=tokens is not None)
    if problem and not insecure:
        raise typer.BadParameter(f"{problem} (--insecure to do so anyway)", param_hint="--host")
    user_token = kubeconfig_token(tokens, kubeconfig_user)
    trusted = None
    if tls is not None:
        trusted = str((client_ca_file or tls_cert_file or Path()).resolve())
    scheme = "https" if tls is not None else "http"

    async def work() -> int:
        import uvicorn  # the web stack loads only for this command

        from devplace.server import (
            DEFAULT_MAX_BODY_BYTES,
            DEFAULT_MAX_WATCHES,
            DEFAULT_STALL_TIMEOUT,
            EmbeddedServer,
            create_app,
        )

        try:  # bind first, so a taken port is one clear error line before anything else starts
            listener = listening_socket(host, port)
        except OSError as e:
            raise errors.Unavailable(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
        st = open_cli_store(ctx, url)
        try:
            app = create_app(
                st,
                max_body_bytes=max_body_bytes or DEFAULT_MAX_BODY_BYTES,
                auth=auth,
                max_watches_per_client=max_watches_per_client or DEFAULT_MAX_WATCHES,
                watch_stall_timeout=watch_stall_timeout or DEFAULT_STALL_TIMEOUT,
            )
            gc.freeze()  # the app's long-lived objects leave the collector's scans: shorter pauses on the event loop
            config = uvicorn.Config(
                app,
                host=host,
                port=port,
                log_config=None,  # configure_logging's handler and format; uvicorn's loggers quiet below debug
                log_level=None,
                access_log=level <= logging.DEBUG,
                lifespan="off",
                timeout_graceful_shutdown=shutdown_timeout,
                **uvicorn_options(tls, auth, connections),
            )
            web = EmbeddedServer(config)

            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, web.stop)
            bound = listener.getsockname()[1]
            shown = f"[{host}]" if ":" in host else host
            if write_kubeconfig is not None:
                try:
                    text = kubeconfig(server_url(host, bound, scheme), token=user_token, certificate_authority=trusted)
                    write_atomically(write_kubeconfig, text)  # 0600 from its creation
                except OSError as e:
                    raise errors.Unavailable(f"cannot write {write_kubeconfig}: {e.strerror or e}") from e
            announce(f"devplace server: store {url}, listening on {scheme}://{shown}:{bound}")
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


def server_url(host: str, port: int, scheme: str = "http") -> str:
    """The URL a local client reaches a server listening on `host`:`port` by (a wildcard address: loopback)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"{scheme}://{host}:{port}"  # a name, e.g. localhost
    if address.is_unspecified:
        address = ipaddress.ip_address("::1" if address.version == 6 else "127.0.0.1")
    shown = f"[{address}]" if address.version == 6 else str(address)
    return f"{scheme}://{shown}:{port}"


def exposure_problem(host: str, *, authenticated: bool, tls: bool, tokens: bool) -> str | None:
    """Why listening on `host` so would expose the store (None: it does not). Loopback (an address, or `localhost`)
    exposes nothing; any other address, wildcards included, needs authentication, and tokens need TLS."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host.lower() == "localhost"
    if loopback:
        return None
    if not authenticated:
        return f"refusing to listen on {host} without authentication (--token-auth-file or --client-ca-file)"
    if tokens and not tls:
        return f"refusing to take bearer tokens on {host} without TLS (--tls-cert-file, --tls-private-key-file)"
    return None


def kubeconfig(
    url: str, name: str = "devplace", *, token: str | None = None, certificate_authority: str | None = None
) -> str:
    """A kubeconfig (YAML) whose current context is the server at `url`; its user has `token` (else no credentials)
    and its cluster trusts `certificate_authority` (a PEM file) when given."""
    cluster: dict[str, Any] = {"server": url}
    if certificate_authority is not None:
        cluster["certificate-authority"] = certificate_authority
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token} if token else {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def wait_ready(
    ctx: typer.Context,
    server_url_option: Annotated[
        str | None,
        typer.Option(
            "--server",
            help="The devplace server's URL, http(s)://HOST:PORT [default: the store, when it is an http(s) URL]",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait before failing", min=0.0, show_default=True)
    ] = 30.0,
) -> None:
    """Wait until a devplace server answers (for scripts that start `devplace server ... &`)."""
    url = server_url_option or store_url(ctx, None)
    if not url.startswith(("http://", "https://")):
        raise typer.BadParameter(f"{url!r} is not an http(s):// URL of a devplace server", param_hint="--server")

    async def work() -> int:
        deadline = time.monotonic() + timeout
        pause = 0.05
        st = open_cli_store(ctx, url)
        try:
            while True:
                try:
                    await st.revision()
                    return 0
                except errors.Unavailable as e:
                    if time.monotonic() + pause > deadline:
                        raise errors.Unavailable(f"{url} is not ready after {timeout:g} s: {e.message}") from e
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.5)
        finally:
            await st.close()

    run(work)


def register(app: typer.Typer) -> None:
    app.command()(server)
    app.command("wait-ready")(wait_ready)
