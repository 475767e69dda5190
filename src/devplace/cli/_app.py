"""The typer application; each command group lives in its own module and registers itself here."""

from __future__ import annotations

from pathlib import Path

import typer

from devplace.cli import _agents as agents
from devplace.cli import _crds as crds
from devplace.cli import _daemons as daemons
from devplace.cli import _demos as demos
from devplace.cli import _emco as emco
from devplace.cli import _explains as explains
from devplace.cli import _kubelets as kubelets
from devplace.cli import _resources as resources
from devplace.cli import _servers as servers

app = typer.Typer(
    name="devplace",
    help="Share and place hardware, from a fleet of clusters down to a single device slot.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def options(
    ctx: typer.Context,
    store: str | None = typer.Option(
        None,
        "--store",
        envvar="DEVPLACE_STORE",
        help="Store URL: sqlite:///PATH, memory, etcd://HOST:PORT[,HOST:PORT...], http(s)://HOST:PORT (a devplace "
        "server), kube:// (a Kubernetes API server; kube:///KUBECONFIG?context=NAME) [default: sqlite:///./devplace.db]",
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
) -> None:
    """Share and place hardware, from a fleet of clusters down to a single device slot."""
    source = ctx.get_parameter_source("kubeconfig")
    given = source is not None and source.name == "COMMANDLINE"  # not from $KUBECONFIG
    if given and kubeconfig and not Path(kubeconfig).expanduser().is_file():
        raise typer.BadParameter(f"{kubeconfig} is not a file", param_hint="--kubeconfig")
    ctx.obj = {"store": store, "token": token, "kubeconfig": kubeconfig, "kubeconfig_given": given}


@app.command()
def version() -> None:
    """Print devplace's version."""
    from devplace import __version__

    typer.echo(__version__)


for module in (resources, explains, servers, agents, kubelets, daemons, emco, demos, crds):
    module.register(app)


def main() -> None:
    app()
