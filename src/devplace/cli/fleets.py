"""`devplace fleet plan|instantiate|status PROJECT CAPP VERSION DIG`: the fleet placement of a deployment intent group.

A thin HTTP client of the /v2 API (`--server`, default `$DEVPLACE_SERVER` or http://127.0.0.1:8080). On a terminal
the decision is drawn as tables (where each app goes, and why every other cluster was rejected); otherwise, or with
`-o json`, the status document is printed as JSON for scripts. Exit codes: 0 when the group is placed (or, for
`status`, whatever its state), 1 when the placement failed or the server refused the request (one line on stderr).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx2
import typer
from rich import box
from rich.console import Console
from rich.table import Table

__all__ = ["register", "render_tables"]

DEFAULT_SERVER = "http://127.0.0.1:8080"
_SHOWN_REJECTIONS = 20

ServerOption = typer.Option(
    DEFAULT_SERVER, "--server", "-s", envvar="DEVPLACE_SERVER", help="The devplace API server serving /v2."
)
OutputOption = typer.Option(None, "--output", "-o", help="table or json (default: table on a terminal, else json).")


def _dig_path(project: str, capp: str, version: str, dig: str) -> str:
    p, c, v, d = (quote(part, safe="") for part in (project, capp, version, dig))
    return f"/v2/projects/{p}/composite-apps/{c}/{v}/deployment-intent-groups/{d}"


def _call(method: str, server: str, path: str) -> dict[str, Any]:
    try:
        with httpx2.Client(base_url=server, timeout=120.0) as client:
            response = client.request(method, path, json={} if method == "POST" else None)
    except httpx2.HTTPError as e:
        raise _fail(f"cannot reach {server}: {e}") from e
    try:
        body = response.json()
    except ValueError:
        body = {"message": response.text.strip() or response.reason_phrase}
    if response.status_code >= 400:
        message = body.get("message") if isinstance(body, dict) else None
        raise _fail(str(message or f"{method} {path} answered {response.status_code}"))
    if not isinstance(body, dict):
        raise _fail(f"{method} {path}: unexpected answer {body!r}")
    return body


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def _cluster(entry: Mapping[str, Any]) -> str:
    return f"{entry.get('clusterProvider', '')}/{entry.get('cluster', '')}"


def render_tables(doc: Mapping[str, Any], title: str) -> list[Table | str]:
    """The status document as rich renderables: a summary line, placements, rejections, warnings and errors."""
    out: list[Table | str] = [
        f"{title}: [bold]{doc.get('state', '?')}[/bold]" + (" (dry run)" if doc.get("dryRun") else "")
    ]
    apps = doc.get("apps") or []
    if apps:
        placed = Table("APP", "CLUSTERS", "REPLICAS", "SCORE", "QUALIFIED", "REJECTED", "MANIFESTS", box=box.SIMPLE)
        for app in apps:
            clusters = app.get("clusters") or []
            placed.add_row(
                str(app.get("name")),
                ", ".join(_cluster(c) for c in clusters) or "-",
                ", ".join(str(c.get("replicas", 0)) for c in clusters) or "-",
                ", ".join(f"{c.get('score', 0):g}" for c in clusters) or "-",
                str(app.get("qualified", 0)),
                str(len(app.get("rejected") or [])),
                str(len(app.get("resources") or [])),
            )
        out.append(placed)
        rejected = Table("APP", "CLUSTER", "REASON", box=box.SIMPLE, title="rejected clusters")
        for app in apps:
            reasons = app.get("rejected") or []
            for entry in reasons[:_SHOWN_REJECTIONS]:
                rejected.add_row(str(app.get("name")), _cluster(entry), str(entry.get("reason", "")))
            if len(reasons) > _SHOWN_REJECTIONS:
                rejected.add_row(str(app.get("name")), "...", f"{len(reasons) - _SHOWN_REJECTIONS} more (-o json)")
        if rejected.row_count:
            out.append(rejected)
        for app in apps:
            out.extend(f"[yellow]warning[/yellow]: {w}" for w in app.get("warnings") or [])
    out.extend(f"[red]error[/red]: {e}" for e in doc.get("errors") or [])
    return out


def _show(doc: dict[str, Any], title: str, output: str | None) -> None:
    fmt = output or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json":
        typer.echo(json.dumps(doc, indent=2, sort_keys=True))
    elif fmt == "table":
        console = Console(soft_wrap=True)
        for part in render_tables(doc, title):
            console.print(part)
    else:
        raise _fail(f"unknown output format {fmt!r} (table, json)")


def _run(
    method: str, verb: str, project: str, capp: str, version: str, dig: str, server: str, output: str | None
) -> None:
    path = _dig_path(project, capp, version, dig) + f"/{verb}"
    doc = _call(method, server, path)
    _show(doc, f"deployment intent group {project}/{capp}/{version}/{dig}", output)
    if verb != "status" and doc.get("state") == "Failed":
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    fleet = typer.Typer(
        name="fleet",
        help="Fleet placement (EMCO-style /v2): plan, instantiate, or show a deployment intent group.",
        no_args_is_help=True,
    )

    @fleet.command()
    def plan(
        project: str,
        capp: str,
        version: str,
        dig: str,
        server: str = ServerOption,
        output: str | None = OutputOption,
    ) -> None:
        """Dry run: where every app would go and why, without committing anything."""
        _run("POST", "plan", project, capp, version, dig, server, output)

    @fleet.command()
    def instantiate(
        project: str,
        capp: str,
        version: str,
        dig: str,
        server: str = ServerOption,
        output: str | None = OutputOption,
    ) -> None:
        """Place every app and commit the decision (fails, changing nothing deployable, if an app cannot be placed)."""
        _run("POST", "instantiate", project, capp, version, dig, server, output)

    @fleet.command()
    def status(
        project: str,
        capp: str,
        version: str,
        dig: str,
        server: str = ServerOption,
        output: str | None = OutputOption,
    ) -> None:
        """The committed decision, patched manifests and any errors."""
        _run("GET", "status", project, capp, version, dig, server, output)

    app.add_typer(fleet, name="fleet")
