"""`devplace apply | get | describe | delete | watch`: kubectl's verbs over any devplace store.

The store comes from `--store` (on each command, or on `devplace` itself once the app has a callback that puts
it in `ctx.obj["store"]`), else `$DEVPLACE_STORE`, else `sqlite:///./devplace.db`. `http://HOST:PORT` talks to a
running `devplace server`.

Apply is create-or-update with compare-and-swap: `devplace.api._applies.plan_apply` (pure, shared with the
simulation) decides inside `store.cas` (read, decide, write with the resourceVersion read; on `Conflict` re-read and
re-decide). The manifest replaces what the user owns; the store keeps what it and the parts own (identity metadata,
`status`, owner references and finalizers the manifest omits, an Instance's slot holders), and what the plan kept is
printed beside the outcome: `Instance default/x configured (kept 2 slot holders written by agents)`. A manifest that
carries its own `metadata.resourceVersion` is a precondition instead: a stale one fails with the conflict.
Before writing, apply checks what the API server checks against stored objects (`devplace.scheduler._admissions`: a
ResourceClass's spec is immutable, its class references exist and form no cycle), so the rules hold on any store.
Documents are validated one by one before anything is written; a bad document is reported
(`document 3: error: ...`) and skipped, the good ones are applied, and the exit code is 1 if any failed.

Every failure is one line on stderr, `error: <what>: <why>`, with exit code 1 and no traceback.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from devplace import errors
from devplace.api import DEFAULT_NAMESPACE, KindInfo, json_tree, lookup, parse_documents, validated
from devplace.cli import _output as output
from devplace.clocks import Clock, SystemClock
from devplace.store import Applied, Store, open_store

DEFAULT_STORE = "sqlite:///./devplace.db"
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STORE_URLS = (
    "Store URL: memory; sqlite:///REL/PATH (relative to the working directory) or sqlite:////ABS/PATH (four "
    "slashes); etcd://HOST:PORT[,HOST:PORT...] (etcds:// for TLS); http(s)://HOST:PORT (a devplace server); "
    "kube:// (a Kubernetes API server; kube:///KUBECONFIG?context=NAME)"
)
"""Every backend `open_store` takes, for the `--store` help of every command."""


StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help=f"{STORE_URLS} [default: $DEVPLACE_STORE or {DEFAULT_STORE}]",
        show_default=False,
    ),
]
NamespaceOption = Annotated[str | None, typer.Option("--namespace", "-n", help="Namespace (default: default)")]
AllNamespacesOption = Annotated[bool, typer.Option("--all-namespaces", "-A", help="Every namespace")]
SelectorOption = Annotated[str | None, typer.Option("--selector", "-l", help="Label selector, e.g. app=x,tier!=db")]


# -- shared plumbing ----------------------------------------------------------------------------------------------


def _root_options(ctx: typer.Context | None) -> Mapping[str, Any]:
    obj = ctx.find_root().obj if ctx is not None else None
    return obj if isinstance(obj, Mapping) else {}


PROGRAM = "program"
"""Key of the root context's object: set by `_app.main`, when `devplace` is the process's program (not a caller's
Python, as typer's CliRunner in tests); a daemon command may then replace the process (`_agentruns`)."""


def is_program(ctx: typer.Context | None) -> bool:
    return bool(_root_options(ctx).get(PROGRAM))


def store_url(ctx: typer.Context | None, explicit: str | None) -> str:
    """`--store` on the command, else on `devplace` (ctx.obj["store"]), else $DEVPLACE_STORE, else the current server
    of a kubeconfig given as `devplace --kubeconfig PATH`, else the default. A command's `--store` from its
    `--config` file yields to `devplace --store` and `$DEVPLACE_STORE` (flag > environment > file)."""
    options = _root_options(ctx)
    source = ctx.get_parameter_source("store") if ctx is not None else None
    from_file = source is not None and source.name == "DEFAULT_MAP"
    if explicit and not (from_file and (options.get("store") or os.environ.get("DEVPLACE_STORE"))):
        return explicit
    if options.get("store"):
        return str(options["store"])
    if os.environ.get("DEVPLACE_STORE"):
        return os.environ["DEVPLACE_STORE"]
    if options.get("kubeconfig_given") and options.get("kubeconfig"):
        from devplace.store import current_server

        return current_server(str(options["kubeconfig"]))
    return DEFAULT_STORE


def open_cli_store(ctx: typer.Context | None, url: str, *, clock: Clock | None = None) -> Store:
    """`open_store(url)` with the credentials of `devplace --token / --kubeconfig` (used by http(s) stores)."""
    options = _root_options(ctx)
    token = options.get("token") or None
    kubeconfig = options.get("kubeconfig") or None
    return open_store(url, clock=clock, token=token, kubeconfig=kubeconfig)


def fail(message: str) -> typer.Exit:
    """Print `error: message` on stderr; returns the exit to raise (code 1)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def run(work: Callable[[], Awaitable[int]]) -> None:
    """Run an async command body; devplace errors become one stderr line and exit code 1, Ctrl-C exits quietly."""

    async def main() -> int:
        return await work()

    try:
        code = asyncio.run(main())
    except errors.DevplaceError as e:
        raise fail(e.message) from None
    except OSError as e:
        raise fail(str(e)) from None
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    if code:
        raise typer.Exit(code)


async def with_store(url: str, body: Callable[[Store], Awaitable[int]], ctx: typer.Context | None = None) -> int:
    store = open_cli_store(ctx, url)
    try:
        return await body(store)
    finally:
        await store.close()


def register_fleet_kinds() -> None:
    """Make EMCO's fleet kinds known to the registry (importing `devplace.placement` registers them), for the commands
    that name kinds. Loaded when such a command runs, not at start-up, so `devplace agent` and the other daemons never
    build EMCO's models."""
    from devplace import placement  # noqa: F401


def _kind(name: str) -> KindInfo:
    register_fleet_kinds()
    return lookup(name)


def _namespace(info: KindInfo, namespace: str | None, all_namespaces: bool = False) -> str | None:
    """The store namespace a command addresses: None = every namespace; "" for cluster-scoped kinds."""
    if not info.namespaced:
        if namespace:
            raise errors.Invalid.field("namespace", f"{info.kind} is cluster-scoped and takes no namespace")
        return ""
    if all_namespaces:
        return None
    return namespace or DEFAULT_NAMESPACE


def _is_tty() -> bool:
    return sys.stdout.isatty()


# -- apply: pure parts -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """One manifest input: a file, or stdin (`-`)."""

    name: str
    text: str


def read_sources(paths: list[str]) -> list[Source]:
    """Files as given, directories as their *.yaml/*.yml/*.json files (sorted, not recursive), `-` as stdin."""
    out: list[Source] = []
    for raw in paths:
        if raw == "-":
            out.append(Source("<stdin>", sys.stdin.read()))
            continue
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
            if not files:
                raise errors.Invalid.field("filename", f"{raw}: no .yaml, .yml or .json files in this directory")
            out.extend(Source(str(p), p.read_text(encoding="utf-8")) for p in files)
        elif path.is_file():
            out.append(Source(raw, path.read_text(encoding="utf-8")))
        else:
            raise errors.Invalid.field("filename", f"{raw}: no such file or directory")
    return out


def raw_label(raw: Any, namespace: str | None = None) -> str | None:
    """A best-effort `Kind ns/name` for a document that may not validate (None when it names nothing)."""
    if not isinstance(raw, Mapping):
        return None
    meta = raw.get("metadata")
    if not isinstance(raw.get("kind"), str) or not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return None
    ns = meta.get("namespace") or namespace
    register_fleet_kinds()
    try:
        if ns is None and lookup(raw["kind"]).namespaced:
            ns = DEFAULT_NAMESPACE
    except errors.Invalid:
        pass
    return output.label_of({"kind": raw["kind"], "metadata": {"name": meta["name"], "namespace": ns}})


def validate_document(raw: Any, namespace: str | None = None) -> dict[str, Any]:
    """One document, validated and as written; `namespace` (from -n) fills a namespaced object's missing one."""
    register_fleet_kinds()
    if namespace and isinstance(raw, Mapping) and isinstance(raw.get("metadata"), Mapping):
        meta = raw["metadata"]
        kind = raw.get("kind")
        try:
            namespaced = isinstance(kind, str) and lookup(kind).namespaced
        except errors.Invalid:
            namespaced = False
        if namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.Invalid.field(
                    "metadata.namespace", f"{meta['namespace']!r} does not match --namespace {namespace!r}"
                )
            raw = {**raw, "metadata": {**meta, "namespace": namespace}}
    return validated(json_tree(raw))


async def apply_object(store: Store, desired: Mapping[str, Any]) -> Applied:
    """Create or update one validated object, with the API server's admission rules (see the module doc)."""
    from devplace.scheduler import ADMISSION
    from devplace.store import apply_object as apply_with

    return await apply_with(store, desired, admission=ADMISSION)


# -- commands ------------------------------------------------------------------------------------------------------


def apply(
    ctx: typer.Context,
    filename: Annotated[
        list[str], typer.Option("--filename", "-f", help="Manifest file, directory of manifests, or - for stdin")
    ],
    namespace: NamespaceOption = None,
    store: StoreOption = None,
) -> None:
    """Create or update objects from YAML/JSON manifests (multi-document; each document all-or-nothing)."""
    url = store_url(ctx, store)

    async def work() -> int:
        sources = read_sources(filename)
        failed = False
        prefix_sources = len(sources) > 1
        ready: list[tuple[str, dict[str, Any]]] = []
        for source in sources:
            where = f"{source.name}: " if prefix_sources else ""
            try:
                docs = parse_documents(source.text)
            except errors.Invalid as e:
                typer.echo(f"error: {source.name}: {e.message}", err=True)
                failed = True
                continue
            if not docs:
                typer.echo(f"{where}no objects found", err=True)
            for index, raw in enumerate(docs, start=1):
                label = raw_label(raw, namespace)
                try:
                    ready.append((f"{where}document {index}", validate_document(raw, namespace)))
                except errors.DevplaceError as e:
                    failed = True
                    named = f"{label}: " if label else ""
                    typer.echo(f"{where}document {index}: error: {named}{e.message}", err=True)

        async def body(st: Store) -> int:
            nonlocal failed
            for doc_name, obj in ready:
                label = output.label_of(obj)
                try:
                    outcome = await apply_object(st, obj)
                except errors.DevplaceError as e:
                    failed = True
                    typer.echo(f"{doc_name}: error: {label}: {e.message}", err=True)
                    continue
                typer.echo(f"{label} {outcome.describe()}")
            return 1 if failed else 0

        if not ready:
            return 1 if failed else 0
        return await with_store(url, body, ctx)

    run(work)


def get(
    ctx: typer.Context,
    kind: Annotated[
        str, typer.Argument(help="Kind, plural or short name: configurations, instance, Node, ...; or brokers")
    ],
    name: Annotated[str | None, typer.Argument(help="One object's name (default: list)")] = None,
    namespace: NamespaceOption = None,
    all_namespaces: AllNamespacesOption = False,
    output_format: Annotated[
        str, typer.Option("--output", "-o", help="table, wide (more columns), json, yaml or name")
    ] = "table",
    selector: SelectorOption = None,
    store: StoreOption = None,
) -> None:
    """List objects of a kind, or show one. `get brokers`: per Configuration, its strategy and broker counts."""
    url = store_url(ctx, store)

    async def body(st: Store) -> int:
        if output_format not in output.FORMATS:
            raise errors.Invalid.field("output", f"{output_format!r} is not one of {', '.join(output.FORMATS)}")
        if kind.lower() in BROKER_VIEW:
            return await _get_brokers(st, name, namespace, all_namespaces, output_format, selector)
        info = _kind(kind)
        ns = _namespace(info, namespace, all_namespaces and name is None)
        if name is not None:
            items = [await st.get(info.kind, name, ns or "")]
            revision = int(items[0]["metadata"]["resourceVersion"])
        else:
            result = await st.list(info.kind, ns, selector)
            items, revision = result.items, result.revision
        if output_format == "json":
            typer.echo(output.to_json(items[0] if name else output.list_document(items, revision)))
        elif output_format == "yaml":
            typer.echo(output.to_yaml(items[0] if name else output.list_document(items, revision)))
        elif output_format == "name":
            for obj in items:
                typer.echo(f"{info.plural}/{obj['metadata']['name']}")
        elif not items:
            where = f" in {ns} namespace" if ns else ""
            typer.echo(f"No resources found{where}.", err=True)
        else:
            now, wide = SystemClock().now(), output_format == "wide"
            headers, rows = output.table(info.kind, items, namespaced=info.namespaced, now=now, wide=wide)
            if _is_tty():
                from rich.console import Console

                Console().print(output.rich_table(headers, rows))
            else:
                typer.echo(output.plain_table(headers, rows))
        return 0

    run(lambda: with_store(url, body, ctx))


BROKER_VIEW = ("brokers", "broker")
"""`devplace get brokers`: not a kind but a view of Configurations (`output.broker_summary`)."""


async def _get_brokers(
    st: Store, name: str | None, namespace: str | None, all_namespaces: bool, output_format: str, selector: str | None
) -> int:
    info = _kind("Configuration")
    ns = _namespace(info, namespace, all_namespaces and name is None)
    if name is not None:
        items = [await st.get(info.kind, name, ns or "")]
    else:
        items = (await st.list(info.kind, ns, selector)).items
    if output_format in ("json", "yaml"):
        summaries = [output.broker_summary(obj) for obj in items]
        shown: Any = summaries[0] if name is not None else summaries
        typer.echo(output.to_json(shown) if output_format == "json" else output.to_yaml(shown))
    elif output_format == "name":
        for obj in items:
            typer.echo(f"{info.plural}/{obj['metadata']['name']}")
    elif not items:
        typer.echo(f"No resources found{f' in {ns} namespace' if ns else ''}.", err=True)
    elif _is_tty():
        from rich.console import Console

        Console().print(output.rich_table(output.BROKER_HEADERS, output.broker_rows(items)))
    else:
        typer.echo(output.plain_table(output.BROKER_HEADERS, output.broker_rows(items)))
    return 0


def describe(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(help="Kind")],
    name: Annotated[str, typer.Argument(help="Name")],
    namespace: NamespaceOption = None,
    store: StoreOption = None,
) -> None:
    """Show one object in detail."""
    url = store_url(ctx, store)

    async def body(st: Store) -> int:
        info = _kind(kind)
        obj = await st.get(info.kind, name, _namespace(info, namespace) or "")
        typer.echo(output.describe(obj, now=SystemClock().now()))
        return 0

    run(lambda: with_store(url, body, ctx))


def delete(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(help="Kind")],
    name: Annotated[str, typer.Argument(help="Name")],
    namespace: NamespaceOption = None,
    resource_version: Annotated[
        str | None, typer.Option("--resource-version", help="Delete only if the object is still at this revision")
    ] = None,
    store: StoreOption = None,
) -> None:
    """Delete one object."""
    url = store_url(ctx, store)

    async def body(st: Store) -> int:
        info = _kind(kind)
        gone = await st.delete(info.kind, name, _namespace(info, namespace) or "", resource_version=resource_version)
        typer.echo(f"{output.label_of(gone)} deleted")
        return 0

    run(lambda: with_store(url, body, ctx))


def watch(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(help="Kind")],
    namespace: NamespaceOption = None,
    all_namespaces: AllNamespacesOption = False,
    selector: SelectorOption = None,
    since: Annotated[
        int | None,
        typer.Option("--since", help="Replay every change after this revision instead of listing current objects"),
    ] = None,
    count: Annotated[int | None, typer.Option("--count", help="Exit after this many events", min=1)] = None,
    output_format: Annotated[
        str | None, typer.Option("--output", "-o", help="json: one JSON line per event (default on a pipe)")
    ] = None,
    store: StoreOption = None,
) -> None:
    """Print changes to a kind until Ctrl-C: current objects first (as ADDED), then every change."""
    url = store_url(ctx, store)
    as_json = output_format == "json" or (output_format is None and not _is_tty())

    async def body(st: Store) -> int:
        if output_format not in (None, "json", "table"):
            raise errors.Invalid.field("output", f"{output_format!r} is not one of json, table")
        info = _kind(kind)
        ns = _namespace(info, namespace, all_namespaces)
        seen = 0

        def emit(event_type: str, obj: dict[str, Any], revision: int) -> bool:
            nonlocal seen
            if as_json:
                typer.echo(output.json_line({"type": event_type, "object": obj}))
            else:
                typer.echo(output.event_line(event_type, obj, revision))
            sys.stdout.flush()
            seen += 1
            return count is not None and seen >= count

        start = since
        if start is None:
            current = await st.list(info.kind, ns, selector)
            for obj in current.items:
                if emit("ADDED", obj, int(obj["metadata"]["resourceVersion"])):
                    return 0
            start = current.revision
        async with st.watch(info.kind, ns, since=start, selector=selector) as events:
            async for event in events:
                if emit(event.type, event.object, event.revision):
                    return 0
        return 0

    run(lambda: with_store(url, body, ctx))


def register(app: typer.Typer) -> None:
    for command in (apply, get, describe, delete, watch):
        app.command()(command)
