"""The typer application; each command group lives in its own module and registers itself here.

Help is click's plain formatter (`rich_markup_mode=None`): it never cuts an option name to fit a narrow terminal
(rich's table did, `--max-watches-per-cli…` at 80 columns) and keeps `[default: ...]` texts, which rich read as markup
and dropped. `devplace --version` prints the version; `--install-completion` / `--show-completion` are typer's
shell completion (bash, zsh, fish, PowerShell). Every option of every command can also come from the environment
(`DEVPLACE_<OPTION>`) or a YAML file (`--config FILE`): `devplace.cli._configs`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from devplace.cli import _agents as agents
from devplace.cli import _crds as crds
from devplace.cli import _daemons as daemons
from devplace.cli import _demos as demos
from devplace.cli import _emco as emco
from devplace.cli import _explains as explains
from devplace.cli import _handlers as handlers
from devplace.cli import _kubelets as kubelets
from devplace.cli import _renders as renders
from devplace.cli import _resources as resources
from devplace.cli import _servers as servers
from devplace.cli import _sims as sims
from devplace.cli import _stores as stores
from devplace.cli import _ups as ups
from devplace.cli._configs import ConfigurableGroup
from devplace.cli._resources import DEFAULT_STORE, PROGRAM, STORE_URLS

app = typer.Typer(
    name="devplace",
    help="Share and place hardware, from a fleet of clusters down to a single device slot.",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    cls=ConfigurableGroup,  # every option also from $DEVPLACE_<OPTION> and --config FILE (`devplace.cli._configs`)
)


def _print_version(value: bool) -> None:
    if value:
        from devplace import __version__

        typer.echo(f"devplace {__version__}")
        raise typer.Exit()


@app.callback()
def options(
    ctx: typer.Context,
    store: str | None = typer.Option(
        None,
        "--store",
        envvar="DEVPLACE_STORE",
        help=f"{STORE_URLS} [default: {DEFAULT_STORE}]",
    ),
    token: str | None = typer.Option(
        None,
        "--token",
        envvar="DEVPLACE_TOKEN",
        help="Bearer token for an http(s) store (a devplace server with --token-auth-file)",
        show_default=False,
    ),
    kubeconfig: str | None = typer.Option(
        None,
        "--kubeconfig",
        envvar="KUBECONFIG",
        help="kubeconfig whose credentials (token, client certificate, CA) an http(s) store uses when one of its "
        "contexts names that server; given on the command line without --store, its current server is the store",
        show_default=False,
    ),
    show_version: bool = typer.Option(
        False, "--version", help="Print devplace's version and exit", is_eager=True, callback=_print_version
    ),
) -> None:
    """Share and place hardware, from a fleet of clusters down to a single device slot."""
    source = ctx.get_parameter_source("kubeconfig")
    given = source is not None and source.name == "COMMANDLINE"  # not from $KUBECONFIG
    if given and kubeconfig and not Path(kubeconfig).expanduser().is_file():
        raise typer.BadParameter(f"{kubeconfig} is not a file", param_hint="--kubeconfig")
    program = isinstance(ctx.obj, dict) and bool(ctx.obj.get(PROGRAM))
    ctx.obj = {"store": store, "token": token, "kubeconfig": kubeconfig, "kubeconfig_given": given, PROGRAM: program}


@app.command()
def version() -> None:
    """Print devplace's version."""
    from devplace import __version__

    typer.echo(__version__)


for module in (
    resources,
    explains,
    servers,
    agents,
    handlers,
    kubelets,
    daemons,
    emco,
    demos,
    crds,
    stores,
    renders,
    sims,
    ups,
):
    module.register(app)


def main() -> None:
    """The `devplace` program (console script, `python -m devplace.cli`): what may replace its process knows it is
    one (`_resources.PROGRAM`)."""
    app(obj={PROGRAM: True})
