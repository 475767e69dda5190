"""`devplace demo`: a short embedded session showing the store, the API server and the CLI's apply together.

It opens a SQLite store (a fresh file in a temporary directory unless `--store` is given), serves it with the API
server on a loopback port in the same process, and through the `remote` store backend: applies the example
manifests (`examples/manifests`), applies them again (all unchanged), prints every kind back as a table, shows a
compare-and-swap write losing to a stale resourceVersion, a bad manifest refused with its field path, and a watch
event. Until the simulator exists this is what `make demo` runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

import devplace
from devplace import errors
from devplace.api import manifests, registry
from devplace.cli import output
from devplace.cli.resources import StoreOption, apply_object, read_sources, run, validate_document
from devplace.clocks import SystemClock
from devplace.server.app import create_app, running
from devplace.store import Store, open_store
from devplace.store.remote import RemoteStore

__all__ = ["demo", "examples_dir", "register"]


def examples_dir() -> Path:
    """`examples/manifests` of the source tree devplace runs from, else of the current directory."""
    for root in (Path(devplace.__file__).resolve().parents[2], Path.cwd()):
        candidate = root / "examples" / "manifests"
        if candidate.is_dir():
            return candidate
    raise errors.Invalid.field("examples", "no examples/manifests directory found; pass --examples DIR")


@contextlib.contextmanager
def _store_url(explicit: str | None) -> Iterator[str]:
    if explicit:
        yield explicit
        return
    with tempfile.TemporaryDirectory(prefix="devplace-demo-") as tmp:
        yield f"sqlite:///{tmp}/demo.db"


def _say(text: str = "") -> None:
    typer.echo(text)


def _table(kind: str, items: list[dict[str, Any]]) -> None:
    info = registry.lookup(kind)
    headers, rows = output.table(info.kind, items, namespaced=info.namespaced, now=SystemClock().now())
    _say(output.plain_table(headers, rows))


async def _session(backing: Store, url: str, examples: Path) -> int:
    async with running(create_app(backing)) as base_url:
        remote = RemoteStore(base_url)
        try:
            return await _walkthrough(remote, url, base_url, examples)
        finally:
            await remote.close()


async def _walkthrough(store: Store, url: str, base_url: str, examples: Path) -> int:
    _say(f"devplace demo: store {url}, API server {base_url}")
    _say(f"\n$ devplace apply -f {examples}")
    objects: list[dict[str, Any]] = []
    for source in read_sources([str(examples)]):
        for index, raw in enumerate(manifests.parse_documents(source.text), start=1):
            obj = validate_document(raw)
            objects.append(obj)
            outcome = await apply_object(store, obj)
            _say(f"{output.label_of(obj)} {outcome}   ({Path(source.name).name}, document {index})")

    _say("\n$ devplace apply -f ... (again: nothing to change)")
    outcomes = [await apply_object(store, obj) for obj in objects]
    _say(", ".join(f"{outcomes.count(o)} {o}" for o in ("created", "configured", "unchanged") if o in outcomes))

    kinds = sorted({obj["kind"] for obj in objects}, key=lambda k: (k != "Configuration", k != "Instance", k))
    for kind in kinds:
        info = registry.lookup(kind)
        listed = await store.list(info.kind)
        _say(f"\n$ devplace get {info.plural}{' -A' if info.namespaced else ''}")
        _table(info.kind, listed.items)

    _say("\n# Every write is a compare-and-swap on metadata.resourceVersion:")
    config = await store.get("Configuration", "akri-debug-echo", "default")
    stale = config["metadata"]["resourceVersion"]
    first = {**config, "spec": {**config["spec"], "capacity": 3}}
    updated = await store.update(first)
    _say(f"update with resourceVersion {stale}: ok, now at {updated['metadata']['resourceVersion']} (capacity 3)")
    second = {**config, "spec": {**config["spec"], "capacity": 5}}
    try:
        await store.update(second)
    except errors.Conflict as e:
        _say(f"update with resourceVersion {stale} again: 409 Conflict: {e.message}")

    _say("\n# A bad manifest is refused with the field and the reason, and nothing changes:")
    bad = {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "Bad_Name"},
        "spec": {"discoveryHandler": {"name": "debugEcho"}, "capacity": 0},
    }
    try:
        await store.create(bad)
    except errors.Invalid as e:
        _say(f"error: Configuration default/Bad_Name: {e.message}")

    _say("\n$ devplace watch instances   (then a node takes the free slot)")
    since = await store.revision()
    events = store.watch("Instance", "default", since=since)
    instance = await store.get("Instance", "akri-debug-echo-8be2a1", "default")
    usage = dict(instance["spec"]["deviceUsage"])
    usage["akri-debug-echo-8be2a1-1"] = "node-b"
    await store.update({**instance, "spec": {**instance["spec"], "deviceUsage": usage}})
    event = await asyncio.wait_for(anext(aiter(events)), timeout=10)
    _say(output.event_line(event.type, event.object, event.revision))
    _table("Instance", [event.object])
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()
    _say("\nDone. Run `devplace server --store <url>` to serve a store, `devplace --help` for every command.")
    return 0


def demo(
    store: StoreOption = None,
    examples: Annotated[Path | None, typer.Option("--examples", help="Directory of manifests to apply")] = None,
) -> None:
    """Run a short embedded session: example manifests -> SQLite store -> API server -> printed back."""

    async def work() -> int:
        folder = examples or examples_dir()
        with _store_url(store) as url:
            backing = open_store(url)
            try:
                return await _session(backing, url, folder)
            finally:
                await backing.close()

    run(work)


def register(app: typer.Typer) -> None:
    app.command()(demo)
