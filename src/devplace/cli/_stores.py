"""`devplace store backup | restore | export | import`: keeping a store's data across backups, upgrades and moves.

    devplace store backup --store sqlite:////var/lib/devplace/devplace.db /backups/devplace-2026-11-26.db
    devplace store restore /backups/devplace-2026-11-26.db --store sqlite:////var/lib/devplace/devplace.db
    devplace store export --store sqlite:///devplace.db > objects.jsonl
    devplace store import objects.jsonl --store etcd://10.0.0.1:2379

`backup` is safe while the server writes (SQLite's online backup API); `restore` refuses a file that a process has
open and replaces it atomically (`devplace.store._backups`). `export` / `import` move every object between memory,
sqlite and etcd stores with its identity; revisions are the target's (`devplace.store._dumps`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from devplace.cli._resources import StoreOption, fail, run, store_url, with_store
from devplace.store import Store

store_app = typer.Typer(
    name="store",
    help="Back up, restore, export and import a store's objects.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _sqlite_url(ctx: typer.Context, store: str | None) -> str:
    from devplace import errors
    from devplace.store import sqlite_file

    try:
        return sqlite_file(store_url(ctx, store))
    except errors.DevplaceError as e:
        raise fail(e.message) from None


@store_app.command("backup")
def backup_command(
    ctx: typer.Context,
    out: Annotated[Path, typer.Argument(help="The backup file to write (replaced atomically when it exists)")],
    store: StoreOption = None,
) -> None:
    """Copy a sqlite store file while it is in use (SQLite's online backup API)."""
    from devplace import errors
    from devplace.store import backup_sqlite

    path = _sqlite_url(ctx, store)
    try:
        summary = backup_sqlite(path, str(out))
    except errors.DevplaceError as e:
        raise fail(e.message) from None
    except OSError as e:
        raise fail(str(e)) from None
    typer.echo(
        f"backed up {path} to {out}: {summary.objects} objects at revision {summary.revision},"
        f" schema version {summary.schema_version}",
        err=True,
    )


@store_app.command("restore")
def restore_command(
    ctx: typer.Context,
    backup: Annotated[Path, typer.Argument(help="A file written by `devplace store backup`")],
    store: StoreOption = None,
) -> None:
    """Replace a sqlite store file with a backup; refused while any process has the store open."""
    from devplace import errors
    from devplace.store import restore_sqlite

    path = _sqlite_url(ctx, store)
    try:
        summary = restore_sqlite(str(backup), path)
    except errors.DevplaceError as e:
        raise fail(e.message) from None
    except OSError as e:
        raise fail(str(e)) from None
    typer.echo(
        f"restored {backup} into {path}: {summary.objects} objects at revision {summary.revision},"
        f" schema version {summary.schema_version}",
        err=True,
    )


@store_app.command("export")
def export_command(
    ctx: typer.Context,
    out: Annotated[Path | None, typer.Argument(help="File to write (default: standard output)")] = None,
    output: Annotated[str, typer.Option("--format", "-o", help="json (one object per line) or yaml")] = "json",
    store: StoreOption = None,
) -> None:
    """Write every object of a memory, sqlite or etcd store, without resourceVersions."""
    from devplace.store import export_objects, format_dump

    if output not in ("json", "yaml"):
        raise typer.BadParameter(f"{output!r} is not json or yaml", param_hint="--format")
    url = store_url(ctx, store)

    async def body(opened: Store) -> int:
        objects = await export_objects(opened)
        text = format_dump(objects, "yaml" if output == "yaml" else "json")
        if out is None:
            sys.stdout.write(text)
        else:
            out.write_text(text, encoding="utf-8")
        typer.echo(f"exported {len(objects)} objects from {url}", err=True)
        return 0

    run(lambda: with_store(url, body, ctx))


@store_app.command("import")
def import_command(
    ctx: typer.Context,
    dump: Annotated[Path, typer.Argument(help="A file written by `devplace store export` (- for standard input)")],
    store: StoreOption = None,
) -> None:
    """Create every object of an export in a memory, sqlite or etcd store, keeping uids and the rest."""
    from devplace import errors
    from devplace.store import import_objects, parse_dump

    try:
        text = sys.stdin.read() if str(dump) == "-" else dump.read_text(encoding="utf-8")
        objects = parse_dump(text)
    except errors.DevplaceError as e:
        raise fail(f"{dump}: {e.message}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise fail(f"{dump}: {e}") from None
    url = store_url(ctx, store)

    async def body(opened: Store) -> int:
        count = await import_objects(opened, objects)
        typer.echo(f"imported {count} objects into {url}", err=True)
        return 0

    run(lambda: with_store(url, body, ctx))


def register(app: typer.Typer) -> None:
    app.add_typer(store_app)
