"""`devplace fleet`: the fleet placement of a deployment intent group, and emcoctl's resource files.

- `devplace fleet plan|approve|instantiate|terminate|status PROJECT CAPP VERSION DIG`: the group's lifecycle. On a
  terminal the decision is drawn as tables (where each app goes, why every other cluster was rejected, and for
  `status` what each cluster was given); otherwise, or with `-o json`, the server's document is printed as JSON.
  Exit codes: 0 when the group is placed (or, for `status`, whatever its state), 1 when the placement failed or the
  server refused the request (one line on stderr).
- `devplace fleet apply -f FILE [-v values.yaml]` sends an emcoctl file's documents in order (see `emcofiles`):
  POST each (multipart when it has a `file:`), and PUT it instead when it exists already, so applying twice is
  harmless. `devplace fleet delete -f FILE` undoes them in reverse order (an `instantiate` document is terminated).
  Documents for EMCO services devplace does not have (controllers, logical clouds, profiles...) are reported as
  skipped. Exit code 1 if any document failed (each failure is one line on stderr; the rest are still sent).

A thin HTTP client of the /v2 EMCO API (`devplace.server._emco`; `--server`, default `$DEVPLACE_SERVER` or
http://127.0.0.1:8080). The module is named for the API it speaks; the command keeps the name users type.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import typer

from devplace import errors
from devplace.cli import _emcofiles as emcofiles

if TYPE_CHECKING:
    import httpx2  # loaded by the commands that talk to a server: `devplace agent` never pays for it
    from rich.table import Table

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
    import httpx2

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
    from rich import box
    from rich.table import Table

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


def _show(doc: dict[str, Any], title: str, output: str | None, render: Any = None) -> None:
    fmt = output or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json":
        typer.echo(json.dumps(doc, indent=2, sort_keys=True))
    elif fmt == "table":
        from rich.console import Console

        console = Console(soft_wrap=True)
        for part in (render or render_tables)(doc, title):
            console.print(part)
    else:
        raise _fail(f"unknown output format {fmt!r} (table, json)")


def render_status(doc: Mapping[str, Any], title: str) -> list[Table | str]:
    """EMCO's status result: the lifecycle, what each cluster was given, then devplace's placement decision."""
    from rich import box
    from rich.table import Table

    actions = (doc.get("states") or {}).get("actions") or []
    state = actions[-1]["state"] if actions else "?"
    history = " -> ".join(a.get("state", "?") + (f" ({a['instance']})" if a.get("instance") else "") for a in actions)
    out: list[Table | str] = [f"{title}: [bold]{state}[/bold]  ({history})"]
    resources = Table("APP", "CLUSTER", "KIND", "NAME", "STATUS", "REASON", box=box.SIMPLE, title="resources")
    for app in doc.get("apps") or []:
        for cluster in app.get("clusters") or []:
            for r in cluster.get("resources") or []:
                shown = next(
                    (r[k] for k in ("deployedStatus", "rsyncStatus", "readyStatus", "clusterStatus") if k in r), "?"
                )
                resources.add_row(
                    str(app.get("name")),
                    _cluster(cluster),
                    str((r.get("GVK") or {}).get("Kind", "")),
                    str(r.get("name", "")),
                    str(shown),
                    str(r.get("reason", "")),
                )
    if resources.row_count:
        out.append(resources)
    placement = doc.get("placement")
    if isinstance(placement, Mapping):
        out.extend(render_tables(placement, "placement"))
    return out


def _run(
    method: str, verb: str, project: str, capp: str, version: str, dig: str, server: str, output: str | None
) -> None:
    path = _dig_path(project, capp, version, dig) + f"/{verb}"
    doc = _call(method, server, path)
    title = f"deployment intent group {project}/{capp}/{version}/{dig}"
    if verb == "status":
        _show(doc, title, output, render_status)
        return
    _show(doc, title, output)
    if doc.get("state") == "Failed":
        raise typer.Exit(1)


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise _fail(f"cannot read {what} {path}: {e.strerror or e}") from e


def _load(file: str, values: str | None) -> list[emcofiles.Document]:
    text = _read(file, "file")
    try:
        if values is not None:
            text = emcofiles.render(text, emcofiles.load_values(_read(values, "values file")))
        return emcofiles.documents(text)
    except errors.Invalid as e:
        raise _fail(f"{file}: {e.message}") from e


def _file_part(doc: emcofiles.Document, base: Path) -> tuple[str, bytes]:
    assert doc.file is not None
    candidates = [Path(doc.file), base / doc.file]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.name, candidate.read_bytes()
    raise errors.Invalid(f"{doc}: file {doc.file} not found")


def _send(client: httpx2.Client, request: emcofiles.Request, doc: emcofiles.Document, base: Path) -> httpx2.Response:
    if request.file is None:
        return client.request(request.method, request.path, json=request.body)
    name, data = _file_part(doc, base)
    return client.request(
        request.method, request.path, data={"metadata": json.dumps(request.body)}, files={"file": (name, data)}
    )


def _unserved(response: httpx2.Response) -> bool:
    """A 404 for a route devplace does not have (an EMCO service it does not implement), not a missing object."""
    if response.status_code not in (404, 405):
        return False
    try:
        message = str(response.json().get("message", ""))
    except (ValueError, AttributeError):
        return True
    return response.status_code == 405 or message in ("404 page not found", "404 page not found\n")


def _already_exists(response: httpx2.Response) -> bool:
    """A 409 for a duplicate (EMCO's `... already exists`, or devplace's label with another value for its key)."""
    try:
        return bool(response.json().get("reason") == "AlreadyExists")
    except (ValueError, AttributeError):
        return "already exists" in response.text


def _reason(response: httpx2.Response) -> str:
    try:
        return str(response.json().get("message") or response.text)
    except (ValueError, AttributeError):
        return response.text.strip() or response.reason_phrase


def _each(server: str, file: str, values: str | None, *, deleting: bool) -> None:
    import httpx2

    docs = _load(file, values)
    base = Path(file).parent
    failed = 0
    try:
        with httpx2.Client(base_url=server, timeout=120.0) as client:
            for doc in reversed(docs) if deleting else docs:
                try:
                    failed += not _one(client, doc, base, deleting=deleting)
                except errors.Invalid as e:
                    typer.echo(f"error: {e.message}", err=True)
                    failed += 1
    except httpx2.HTTPError as e:
        raise _fail(f"cannot reach {server}: {e}") from e
    if failed:
        typer.echo(f"{failed} of {len(docs)} documents failed", err=True)
        raise typer.Exit(1)


def _one(client: httpx2.Client, doc: emcofiles.Document, base: Path, *, deleting: bool) -> bool:
    """Send one document's request(s); print what happened; False when it failed."""
    if deleting:
        request = emcofiles.removal(doc)
        if request is None:
            typer.echo(f"{doc}: nothing to delete")
            return True
        response = _send(client, request, doc, base)
        gone = response.status_code == 404 and not _unserved(response)
        not_instantiated = response.status_code == 409 and request.path.endswith("/terminate")
        if response.status_code < 300 or gone or not_instantiated:
            what = "already gone" if gone else "not instantiated" if not_instantiated else str(response.status_code)
            typer.echo(f"{request.method} {request.path}: {what}")
            return True
    else:
        request, replace = emcofiles.request_plan(doc)
        response = _send(client, request, doc, base)
        if response.status_code == 409 and replace is not None and _already_exists(response):
            current = client.get(replace.path)
            if not doc.is_label and current.status_code == 200 and current.json() == replace.body:
                typer.echo(f"{replace.path}: unchanged")
                return True
            request, response = replace, _send(client, replace, doc, base)
        if response.status_code < 300:
            typer.echo(f"{request.method} {request.path}: {response.status_code}")
            return True
    if _unserved(response):
        typer.echo(f"{doc}: skipped (devplace does not serve /v2/{doc.anchor})")
        return True
    typer.echo(
        f"error: {doc}: {request.method} {request.path} answered {response.status_code}: {_reason(response)}", err=True
    )
    return False


def register(app: typer.Typer) -> None:
    fleet = typer.Typer(
        name="fleet",
        help="Fleet placement (EMCO-style /v2): a deployment intent group's lifecycle, and emcoctl files.",
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
    def approve(
        project: str,
        capp: str,
        version: str,
        dig: str,
        server: str = ServerOption,
        output: str | None = OutputOption,
    ) -> None:
        """Approve the group (EMCO instantiates only approved groups)."""
        _run("POST", "approve", project, capp, version, dig, server, output)

    @fleet.command()
    def terminate(
        project: str,
        capp: str,
        version: str,
        dig: str,
        server: str = ServerOption,
        output: str | None = OutputOption,
    ) -> None:
        """Withdraw an instantiated group: the objects it gave the clusters are taken back."""
        _run("POST", "terminate", project, capp, version, dig, server, output)

    @fleet.command()
    def apply(
        file: str = typer.Option(..., "--file", "-f", help="An emcoctl resource file (multi-document YAML)."),
        values: str | None = typer.Option(None, "--values", "-v", help="Values for its {{ .Key }} placeholders."),
        server: str = ServerOption,
    ) -> None:
        """Send an emcoctl file's documents in order (an object that exists is replaced)."""
        _each(server, file, values, deleting=False)

    @fleet.command()
    def delete(
        file: str = typer.Option(..., "--file", "-f", help="An emcoctl resource file (multi-document YAML)."),
        values: str | None = typer.Option(None, "--values", "-v", help="Values for its {{ .Key }} placeholders."),
        server: str = ServerOption,
    ) -> None:
        """Undo an emcoctl file's documents in reverse order (instantiate becomes terminate)."""
        _each(server, file, values, deleting=True)

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
        """EMCO's status: the lifecycle, what each cluster was given, and the committed decision."""
        _run("GET", "status", project, capp, version, dig, server, output)

    app.add_typer(fleet, name="fleet")
