"""The typer application; each command group lives in its own module and registers itself here."""

from __future__ import annotations

import typer

from devplace.cli import agents, daemons, demos, explains, fleets, resources, servers

__all__ = ["app", "main"]

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
        help="Store URL: sqlite:///PATH, memory, http://HOST:PORT [default: sqlite:///./devplace.db]",
    ),
) -> None:
    """Share and place hardware, from a fleet of clusters down to a single device slot."""
    ctx.obj = {"store": store}


@app.command()
def version() -> None:
    """Print devplace's version."""
    from devplace import __version__

    typer.echo(__version__)


for module in (resources, explains, servers, agents, daemons, fleets, demos):
    module.register(app)


def main() -> None:
    app()
