"""Act 1 of `devplace demo`: the store, the API server and the CLI's apply, on the embedded store.

Everything goes through the API server in the same process (the `remote` store backend speaking HTTP to it), so the
act shows the same path `devplace --store http://...` takes: the example manifests applied (then applied again:
unchanged), one kind listed back as `devplace get` prints it, a compare-and-swap write losing to a stale
resourceVersion (409), and a bad manifest refused with its field path (422) while nothing is written.

The act removes the objects it applied when it ends (even after a failed expectation), so the simulated nodes of the
next acts start from an empty cluster: the example Configurations would otherwise be discovered by their agents.

What the act shows of the CLI is the CLI's own code: `devplace apply`'s reading, validation and apply (`Applier`:
`devplace.cli._resources` satisfies it) and `devplace get`'s table (the tour's `Rendering`), handed in by the
`devplace demo` command, since the demo sits below the CLI and never imports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from devplace import errors
from devplace.api import DEFAULT_NAMESPACE, parse_documents
from devplace.clocks import SystemClock
from devplace.demo._tours import Tour, delete_all
from devplace.server import http_status
from devplace.store import Applied, Store


class ManifestSource(Protocol):
    """One manifest input the CLI read: where from, and its text."""

    @property
    def name(self) -> str: ...

    @property
    def text(self) -> str: ...


class Applier(Protocol):
    """`devplace apply`'s parts (`devplace.cli._resources` is one): what act 1 applies the examples with."""

    def read_sources(self, paths: list[str]) -> Sequence[ManifestSource]:
        """Files as given, a directory as its manifest files."""
        ...

    def validate_document(self, raw: Any, namespace: str | None = None) -> dict[str, Any]:
        """One document, validated and as written."""
        ...

    async def apply_object(self, store: Store, desired: Mapping[str, Any]) -> Applied:
        """Create or update one validated object, with the API server's admission rules."""
        ...


BAD_MANIFEST: dict[str, Any] = {
    "apiVersion": "akri.sh/v0",
    "kind": "Configuration",
    "metadata": {"name": "Bad_Name"},
    "spec": {"discoveryHandler": {"name": "debugEcho"}, "capacity": 0},
}
"""Two mistakes: a name that is not DNS-1123, and a capacity below 1."""


async def store_act(tour: Tour, cli: Applier, store: Store, url: str, base_url: str, examples: Path) -> None:
    """Run act 1 against `store` (a client of the API server at `base_url`, which serves `url`)."""
    tour.act(1, "the store, the API server and the CLI", f"store {url}, served by the API server at {base_url}")
    applied: list[dict[str, Any]] = []
    try:
        await _apply(tour, cli, store, examples, applied)
        await _list_back(tour, store, applied)
        await _compare_and_swap(tour, store, applied)
        await _bad_manifest(tour, store)
    finally:
        await _remove(tour, store, applied)


async def _apply(tour: Tour, cli: Applier, store: Store, examples: Path, applied: list[dict[str, Any]]) -> None:
    tour.step("Apply the example manifests through the API server, then apply them again")
    tour.command(f"devplace apply -f {examples}")
    objects: list[tuple[dict[str, Any], str]] = []
    for source in cli.read_sources([str(examples)]):
        for index, raw in enumerate(parse_documents(source.text), start=1):
            objects.append((cli.validate_document(raw), f"{Path(source.name).name}, document {index}"))
    outcomes: list[str] = []
    for obj, origin in objects:
        outcome = await cli.apply_object(store, obj)
        applied.append(obj)
        outcomes.append(outcome.outcome)
        tour.say(f"{tour.rendering.label_of(obj)} {outcome.describe()}   ({origin})")
    again = [(await cli.apply_object(store, obj)).outcome for obj, _ in objects]
    tour.expect(
        bool(objects) and again == ["unchanged"] * len(objects),
        f"{len(objects)} documents applied ({_counts(outcomes)}); applied again: {_counts(again)}",
        "every document unchanged the second time",
    )


def _counts(outcomes: Sequence[str]) -> str:
    return ", ".join(f"{outcomes.count(o)} {o}" for o in ("created", "configured", "unchanged") if o in outcomes)


async def _list_back(tour: Tour, store: Store, applied: list[dict[str, Any]]) -> None:
    if not any(obj["kind"] == "Instance" for obj in applied):
        return
    tour.step("List the Instances back, as `devplace get` prints them")
    tour.command("devplace get instances -A")
    listed = await store.list("Instance")
    headers, rows = tour.rendering.table("Instance", listed.items, namespaced=True, now=SystemClock().now())
    tour.table(headers, rows)


async def _compare_and_swap(tour: Tour, store: Store, applied: list[dict[str, Any]]) -> None:
    target = next((obj for obj in applied if obj["kind"] == "Configuration"), None)
    if target is None:
        return
    meta = target["metadata"]
    tour.step(
        "Two writers update the same Configuration from the same read",
        "every write is a compare-and-swap on metadata.resourceVersion: the second writer loses (409)",
        who="design",
    )
    current = await store.get("Configuration", meta["name"], meta.get("namespace") or DEFAULT_NAMESPACE)
    stale = current["metadata"]["resourceVersion"]
    capacity = int(current["spec"].get("capacity", 1))
    first = await store.update({**current, "spec": {**current["spec"], "capacity": capacity + 1}})
    tour.say(f"update at resourceVersion {stale}: ok, now at {first['metadata']['resourceVersion']}")
    try:
        await store.update({**current, "spec": {**current["spec"], "capacity": capacity + 3}})
    except errors.Conflict as e:
        tour.expect(True, f"update at resourceVersion {stale} again: {_http(e)} Conflict: {e.message}")
    else:
        tour.expect(False, f"update at resourceVersion {stale} again was accepted", "409 Conflict")
    final = await store.get("Configuration", meta["name"], meta.get("namespace") or DEFAULT_NAMESPACE)
    tour.expect(
        final["spec"].get("capacity") == capacity + 1,
        f"capacity is now {final['spec'].get('capacity')}",
        f"capacity {capacity + 1}",
        because="the first writer's value stands",
    )


async def _bad_manifest(tour: Tour, store: Store) -> None:
    tour.step(
        "Apply a Configuration with a bad name and capacity 0",
        "a bad manifest is rejected with the field path and the reason, never half-applied",
        who="design",
    )
    before = await store.revision()
    try:
        await store.create(BAD_MANIFEST)
    except errors.Invalid as e:
        paths = sorted({f.path for f in e.fields})
        named = " is invalid: " in e.message  # the API server's 422 names the object, as Kubernetes' does
        tour.say(f"error: {e.message}" if named else f"error: Configuration default/Bad_Name: {e.message}")
        tour.expect(
            "metadata.name" in paths and "spec.capacity" in paths,
            f"{_http(e)} Invalid naming {', '.join(paths) or 'no field'}",
            "metadata.name and spec.capacity named",
        )
    else:
        tour.expect(False, "the bad Configuration was stored", "422 Invalid")
    after = await store.revision()
    tour.expect(
        after == before, f"store revision {before} before, {after} after", "no change", because="nothing was written"
    )


def _http(err: errors.DevplaceError) -> int:
    """The HTTP status the API server answers this error with (its one error mapping, not a number typed here)."""
    return http_status(err, "kubernetes")


async def _remove(tour: Tour, store: Store, applied: list[dict[str, Any]]) -> None:
    doomed = [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace") or "") for o in reversed(applied)]
    removed = await delete_all(store, doomed)
    if applied:
        tour.note(f"(cleanup: {removed} example objects deleted, so the next acts start from an empty cluster)")
