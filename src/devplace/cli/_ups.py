"""`devplace up` (a simulated cluster that keeps running) and `devplace sim step` (one step sent to it).

`up` is the shell over `devplace.demo.Up`: it builds the scenario (`--scenario FILE`, or `--nodes N` with
`--devices FILE`), serves the API with `devplace.server.running` on `--host`/`--port` (`--port 0`: a free one),
writes a kubeconfig for it (`devplace.kubeconfig` in the working directory unless `--write-kubeconfig PATH`; the
helpers of `devplace server`: `kubeconfig`, `server_url`; `files.write_atomically`), prints the URL, runs the
scenario's steps (each printed as `devplace sim run` prints it, and so are the steps sent later), and serves until
SIGINT or SIGTERM.
The first signal stops it cleanly: the server, then the ticker, the world saved, the fleet, the store closed; exit 0.
A second signal cancels what is left (exit 1). The lines a script waits for: `devplace up: <url> ...` once the API
answers, then `devplace up: ready` once the scenario's steps ran.

The store is the embedded one (`--store sqlite:///PATH`, default `sqlite:///devplace.db`, or `memory`); its world is
saved beside it (`<file>.sim.yaml`, `demo.world_file`). Started again on the same file, `up` restores the world and
runs no scenario again (the options that describe a new world are then ignored, and it says so). A world file without
its store file is refused: one of the two was moved or deleted.

Authentication: `--token-auth-file` (kube-apiserver's tokens CSV) as for `devplace server`, with `--kubeconfig-user`
putting a user's token into the written kubeconfig. `up` listens on loopback only (a simulator): it takes no TLS
options, and `devplace server`'s exposure rule refuses any other address.

`sim step ACTION [ARGS]` builds one scenario step (`plug DEVICE --nodes N [--property k=v]`, `unplug DEVICE [--nodes
N]`, `node-down NODE`, `node-up NODE`, `restart-agent NODE`, `restart-kubelet NODE`, `restart-part PART`,
`advance DURATION`, `settle`; any step with `--json '{...}'`; `--expect '{...}'` adds an expect block) and posts it
to `/sim/v1/steps` of the server given by `--server URL`, else of `devplace --kubeconfig PATH`'s current context, else
of `./devplace.kubeconfig` (what `up` wrote here). Credentials are the remote store's (`devplace --token`, the
kubeconfig's token, client certificate and CA). It prints `step N <title>: ok|FAILED [t=...]` with each failed
expectation (or the whole answer with `-o json`) and exits 1 when the step failed, an expectation did not hold, or
the server refused the step (422: each bad field is printed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from devplace import errors
from devplace.cli._logs import announce, configure_logging
from devplace.cli._options import LogFormatOption, LogLevelOption
from devplace.cli._resources import fail, run, store_url
from devplace.cli._servers import (
    KubeconfigUserOption,
    TokenAuthFileOption,
    exposure_problem,
    kubeconfig,
    kubeconfig_token,
    listening_socket,
)
from devplace.cli._sims import sim_app
from devplace.files import write_atomically

if TYPE_CHECKING:
    from devplace.demo import Sample, StepRecord

DEFAULT_KUBECONFIG = Path("devplace.kubeconfig")
_FILE: dict[str, Any] = {"dir_okay": False, "exists": True, "readable": True}


class _StepPrinter:
    """Prints every step as it ends: the scenario's at start, then each one sent to `/sim/v1/steps`."""

    def __call__(self, record: StepRecord, sample: Sample) -> None:
        del sample
        typer.echo(_step_line(record.to_wire()))


def _step_line(wire: dict[str, Any]) -> str:
    verdict = "ok" if wire.get("ok") else "FAILED"
    checks = f" ({wire['checked']} checks)" if wire.get("checked") else ""
    lines = []
    if wire.get("say"):
        lines.append(f"say: {wire['say']}")
    lines.append(
        f"step {int(wire.get('index', 0)) + 1} {wire.get('title')}: {verdict}{checks} [t={wire.get('simTime', 0):g}s]"
    )
    if wire.get("error"):
        lines.append(f"   {'failed as expected' if wire.get('ok') else 'error'}: {wire['error']}")
    for mismatch in wire.get("mismatches") or []:
        lines.append(
            f"   FAILED {mismatch.get('field')}: wanted {mismatch.get('wanted')!r}, got {mismatch.get('got')!r}"
        )
    return "\n".join(lines)


def up(
    ctx: typer.Context,
    nodes: Annotated[int, typer.Option("--nodes", help="Nodes of a generated world: node-1..node-N", min=1)] = 2,
    devices: Annotated[
        Path | None,
        typer.Option("--devices", help="Devices of a generated world: a YAML list of {id, nodes, properties}", **_FILE),
    ] = None,
    scenario: Annotated[
        str | None,
        typer.Option(
            "--scenario",
            help="Start from this scenario (its nodes, devices, manifests, fleet requests; its steps run once)",
        ),
    ] = None,
    configuration: Annotated[
        bool,
        typer.Option(
            "--configuration/--no-configuration",
            help="In a generated world, apply Configuration `devices` (sim discovery, every device, capacity 1)",
        ),
    ] = True,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="sqlite:///PATH (the world is saved beside it, PATH.sim.yaml) or memory (nothing kept) "
            "[default: $DEVPLACE_STORE or sqlite:///./devplace.db]",
            show_default=False,
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (loopback)")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0: a free one)", min=0, max=65535)] = 8080,
    write_kubeconfig: Annotated[
        Path,
        typer.Option("--write-kubeconfig", help="Write a kubeconfig for the server here (mode 0600)", dir_okay=False),
    ] = DEFAULT_KUBECONFIG,
    token_auth_file: TokenAuthFileOption = None,
    kubeconfig_user: KubeconfigUserOption = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for anything random in the scenario")] = 0,
    log_level: LogLevelOption = "warning",
    log_format: LogFormatOption = "text",
) -> None:
    """Run a simulated cluster (API server, scheduler, broker controller, nodes and devices) until Ctrl-C."""
    from devplace.demo import Up, scenario_path, up_scenario, world_file
    from devplace.server import Auth, Tokens
    from devplace.sim import load_scenario_file

    configure_logging(log_level, log_format)
    url = store_url(ctx, store)
    source = ctx.get_parameter_source("nodes")
    generated = (source is not None and source.name != "DEFAULT") or devices is not None
    if scenario is not None and generated:
        raise typer.BadParameter("a scenario names its own nodes and devices", param_hint="--scenario")
    try:
        tokens = Tokens.load(token_auth_file) if token_auth_file is not None else None
    except errors.Invalid as e:
        raise typer.BadParameter(e.message, param_hint="--token-auth-file") from e
    auth = Auth(tokens) if tokens is not None else None
    problem = exposure_problem(host, authenticated=auth is not None, tls=False, tokens=tokens is not None)
    if problem:
        raise typer.BadParameter(problem, param_hint="--host")
    user_token = kubeconfig_token(tokens, kubeconfig_user)

    async def work() -> int:
        from devplace.server import running

        stopped = asyncio.Event()
        main = asyncio.current_task()

        def on_signal() -> None:
            if stopped.is_set() and main is not None:
                main.cancel()  # a second signal: stop waiting for a clean stop
            stopped.set()

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, on_signal)
        world = world_file(url)
        store_file = world.with_name(world.name.removesuffix(".sim.yaml")) if world is not None else None
        if world is not None and store_file is not None and world.exists() and not store_file.exists():
            raise errors.Invalid.field(
                "store", f"{world} is there without its store {store_file}: restore the store, or remove the file"
            )
        if world is not None and world.exists():
            chosen = None
        elif scenario is not None:
            chosen = load_scenario_file(scenario_path(scenario))
        else:
            text = devices.read_text(encoding="utf-8") if devices is not None else None
            chosen = up_scenario(nodes, text, source=str(devices or "--devices"), configuration=configuration)
        if port:  # a taken port is one clear error line before anything starts
            try:
                listening_socket(host, port).close()
            except OSError as e:
                raise errors.Unavailable(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
        session = Up(chosen, url, world=world, seed=seed, on_step=_StepPrinter())
        try:
            async with session:
                if session.restored:
                    ignored = " (--scenario, --nodes and --devices are ignored)" if scenario or generated else ""
                    announce(f"restored the simulated world from {world}{ignored}")
                app = session.app(auth=auth)
                async with running(app, host=host, port=port) as base_url:
                    kubeconfig_path = write_kubeconfig
                    try:
                        write_atomically(kubeconfig_path, kubeconfig(base_url, token=user_token))
                    except OSError as e:
                        raise errors.Unavailable(f"cannot write {kubeconfig_path}: {e.strerror or e}") from e
                    announce(
                        f"devplace up: {base_url} (store {url}, kubeconfig {kubeconfig_path}); "
                        f"try: kubectl --kubeconfig {kubeconfig_path} get nodes"
                    )
                    starting = asyncio.ensure_future(session.start())
                    waiting = asyncio.ensure_future(stopped.wait())
                    await asyncio.wait({starting, waiting}, return_when=asyncio.FIRST_COMPLETED)
                    if starting.done():
                        starting.result()
                        announce("devplace up: ready")
                        await waiting
                    else:
                        starting.cancel()
                        await asyncio.gather(starting, return_exceptions=True)
                    announce("devplace up: stopping")
        except asyncio.CancelledError:
            return 1
        return 0

    run(work)


# -- devplace sim step ---------------------------------------------------------------------------------------------

_NODE_ACTIONS = ("node-down", "node-up", "restart-agent", "restart-kubelet", "restart-part")


def _step_body(
    action: str | None, args: list[str], nodes: list[str], properties: list[str], raw: str | None, expect: str | None
) -> dict[str, Any]:
    """The step a command line describes (module docstring); `typer.BadParameter` naming what is wrong."""
    if raw is not None:
        if action is not None:
            raise typer.BadParameter("give an ACTION or --json, not both", param_hint="--json")
        body = _json_object(raw, "--json")
    else:
        if action is None:
            raise typer.BadParameter("give an ACTION (plug, unplug, node-down, node-up, advance, ...) or --json")
        node_list = [n for value in nodes for n in value.split(",") if n]
        body = {action: _argument(action, args, node_list, properties)}
    if expect is not None:
        body["expect"] = _json_object(expect, "--expect")
    return body


def _argument(action: str, args: list[str], nodes: list[str], properties: list[str]) -> Any:
    def one(what: str) -> str:
        if len(args) != 1:
            raise typer.BadParameter(f"{action} takes one {what}, got {len(args)} arguments", param_hint="ARGS")
        return args[0]

    if action == "plug":
        if not nodes:
            raise typer.BadParameter("plug needs the nodes that see the device", param_hint="--nodes")
        pairs = {}
        for item in properties:
            key, eq, value = item.partition("=")
            if not eq or not key:
                raise typer.BadParameter(f"{item!r}: write key=value", param_hint="--property")
            pairs[key] = value
        return {"device": one("device id"), "nodes": nodes, "properties": pairs}
    if action == "unplug":
        return {"device": one("device id"), **({"nodes": nodes} if nodes else {})}
    if action in _NODE_ACTIONS:
        return one("node name" if action != "restart-part" else "part (scheduler, controller, classes)")
    if action == "advance":
        return one("duration (30s, 5m, 1h30m)")
    if action == "settle":
        if args:
            raise typer.BadParameter("settle takes no arguments", param_hint="ARGS")
        return True
    raise typer.BadParameter(
        f"{action!r}: the command line knows plug, unplug, {', '.join(_NODE_ACTIONS)}, advance and settle; "
        "send any other step with --json",
        param_hint="ACTION",
    )


def _json_object(text: str, hint: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise typer.BadParameter(f"not JSON: {e}", param_hint=hint) from e
    if not isinstance(value, dict):
        raise typer.BadParameter("a JSON object", param_hint=hint)
    return value


def _server(ctx: typer.Context, explicit: str | None) -> tuple[str, str | None]:
    """(server URL, the kubeconfig its credentials come from) for `sim step` (module docstring)."""
    from devplace.store import current_server

    root = ctx.find_root().obj or {}
    given = root.get("kubeconfig") if root.get("kubeconfig_given") else None
    config = given or (str(DEFAULT_KUBECONFIG) if DEFAULT_KUBECONFIG.is_file() else None)
    if explicit:
        return explicit, config or root.get("kubeconfig")
    if config is None:
        raise fail(f"no server: give --server URL, or run where `devplace up` wrote {DEFAULT_KUBECONFIG}")
    return current_server(config), config


@sim_app.command("step")
def step_command(
    ctx: typer.Context,
    action: Annotated[
        str | None,
        typer.Argument(
            help="plug, unplug, node-down, node-up, restart-agent, restart-kubelet, restart-part, advance or settle",
            show_default=False,
        ),
    ] = None,
    args: Annotated[
        list[str] | None, typer.Argument(help="The device, node, part or duration", show_default=False)
    ] = None,
    nodes: Annotated[
        list[str] | None, typer.Option("--nodes", help="Nodes that see the device (repeat, or comma-separated)")
    ] = None,
    properties: Annotated[list[str] | None, typer.Option("--property", help="A device property, key=value")] = None,
    raw: Annotated[str | None, typer.Option("--json", help="The whole step as JSON, a scenario step")] = None,
    expect: Annotated[
        str | None, typer.Option("--expect", help="An expect block as JSON, checked after the step")
    ] = None,
    server: Annotated[
        str | None, typer.Option("--server", help="The `devplace up` server's URL", show_default=False)
    ] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="text or json")] = "text",
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the step", min=1.0)] = 300.0,
) -> None:
    """Send one step to a running `devplace up` (plug, unplug, node-down, node-up, advance, ...) and print its result.

    Exits 1 when the step failed or an expectation did not hold.
    """
    if output not in ("text", "json"):
        raise typer.BadParameter("text or json", param_hint="--output")
    body = _step_body(action, list(args or []), list(nodes or []), list(properties or []), raw, expect)
    url, config = _server(ctx, server)

    async def work() -> int:
        from devplace.demo import SIM_PATH

        status, answer = await _post(ctx, url, config, f"{SIM_PATH}/steps", body, timeout)
        if status != 200 or not isinstance(answer, dict):
            message = answer.get("message") if isinstance(answer, dict) else answer
            typer.echo(f"error: {url} refused the step ({status}): {message}", err=True)
            details = answer.get("details") if isinstance(answer, dict) else None
            for cause in (details or {}).get("causes") or []:
                line = f"{cause.get('field')}: {cause.get('message')}"
                if line not in str(message):
                    typer.echo(f"   {line}", err=True)
            return 1
        if output == "json":
            typer.echo(json.dumps(answer, indent=2))
        else:
            typer.echo(_step_line(answer))
        return 0 if answer.get("ok") else 1

    run(work)


async def _post(
    ctx: typer.Context, url: str, config: str | None, path: str, body: dict[str, Any], timeout: float
) -> tuple[int, Any]:
    """POST `body` as JSON with the remote store's credentials for `url`; (status, decoded answer)."""
    import httpx2

    from devplace.store import RemoteStore, open_store

    root = ctx.find_root().obj or {}
    store = open_store(url, token=root.get("token") or None, kubeconfig=config)
    try:
        if not isinstance(store, RemoteStore):
            raise errors.Invalid.field("server", f"{url!r} is not an http(s):// URL")
        credentials = store.credentials
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        authenticator = credentials.auth()
        if authenticator is not None:
            headers["Authorization"] = (await authenticator.header())[0]
        verify: Any = credentials.ssl_context() if url.lower().startswith("https://") else True
        try:
            async with httpx2.AsyncClient(base_url=url, verify=verify, timeout=timeout) as client:
                response = await client.post(path, content=json.dumps(body).encode(), headers=headers)
        except httpx2.HTTPError as e:
            raise errors.Unavailable(f"cannot reach {url}: {e}") from e
    finally:
        await store.close()
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, response.text


def register(app: typer.Typer) -> None:
    app.command("up")(up)
