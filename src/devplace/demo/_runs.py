"""Running the demo (`devplace demo`, what `make demo` runs): a narrated tour of the whole product, in five acts.

1. The store, the API server and the CLI: example manifests applied through the API server, a compare-and-swap write
   losing to a stale resourceVersion, a bad manifest refused with its field path (`acts_stores`).
2. Device sharing, seed 000: two simulated nodes, two cameras, Configuration- and Instance-level device plugins
   drawing from one deviceUsage, the seed's capacities checked step by step (`acts_devices`).
3. Contention, seed 001: ten nodes ask for one device of capacity five at once (`acts_devices`).
4. Fleet placement, seed 004: clusters and HPA intents through `/v2`, a dry-run plan with every rejection reason and
   a patched manifest (`acts_fleets`, bodies from `examples/fleet/seed-004.yaml`).
5. Resource classes and brokers, seeds 003 and 002: three simulated nodes with the scheduler and the broker
   controller; a pod asking for a class placed on the node whose GPU the class selects, a second one Pending until the
   first goes; per-node brokers bounded by capacity, going and coming back with their camera (`acts_classes`).

Every act runs on one store: a fresh SQLite file in a temporary directory unless a store is given, served by the
API server on a loopback port in this process. Acts 2, 3 and 5 run the real agents and simulated kubelets over that
store (`devplace.sim.Fleet`; act 5 with the fleet's scheduler and broker controller too); each act deletes what it
created, so acts are independent and re-runs start clean.

The demo doubles as a smoke test and must not lie: every outcome it narrates is checked (`tours.Tour.expect`), an act
that raises is reported and the next act still runs, and the command exits 1 when any expectation failed. Bad inputs
(a missing examples directory, a malformed fleet file) are found before any act runs: `run_demo` raises
`errors.Invalid`, which the command prints as one `error:` line, exit 1. The command (`devplace.cli._demos`) only parses
its options and hands in the CLI's renderers and apply (`tours.Rendering`, `acts_stores.Applier`).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import devplace
from devplace import errors
from devplace.demo._tours import Tour

if TYPE_CHECKING:
    from devplace.demo._acts_fleets import FleetExample
    from devplace.demo._acts_stores import Applier
    from devplace.store import Store

ACTS = (1, 2, 3, 4, 5)
ACT_TIMEOUT = 90.0
"""Seconds one act may take before it is reported as failed (it takes a few; this only catches a hang)."""

FLEET_EXAMPLE = ("fleet", "seed-004.yaml")


def _example_roots() -> list[Path]:
    return [Path(devplace.__file__).resolve().parents[2] / "examples", Path.cwd() / "examples"]


def examples_dir() -> Path:
    """`examples/manifests` of the source tree devplace runs from, else of the current directory."""
    for root in _example_roots():
        candidate = root / "manifests"
        if candidate.is_dir():
            return candidate
    raise errors.Invalid.field("examples", "no examples/manifests directory found; pass --examples DIR")


def example_path(*parts: str) -> Path:
    """A file under `examples/` of the source tree devplace runs from, else of the current directory."""
    for root in _example_roots():
        candidate = root.joinpath(*parts)
        if candidate.is_file():
            return candidate
    raise errors.Invalid.field("examples", f"no examples/{'/'.join(parts)} found")


@contextlib.contextmanager
def _store_url(explicit: str | None) -> Iterator[str]:
    if explicit:
        yield explicit
        return
    with tempfile.TemporaryDirectory(prefix="devplace-demo-") as tmp:
        yield f"sqlite:///{tmp}/demo.db"


def _manifests_folder(examples: Path | None) -> Path:
    folder = examples or examples_dir()
    if not folder.is_dir():
        raise errors.Invalid.field("examples", f"{folder}: no such directory")
    return folder


def _fleet_example(explicit: Path | None) -> tuple[FleetExample, Path]:
    from devplace.demo._acts_fleets import load_fleet_example

    path = explicit or example_path(*FLEET_EXAMPLE)
    if not path.is_file():
        raise errors.Invalid.field("fleet-example", f"{path}: no such file")
    try:
        return load_fleet_example(path.read_text(encoding="utf-8")), path
    except errors.Invalid as e:
        raise errors.Invalid(f"{path}: {e.message}", e.fields) from e


async def _run_act(
    tour: Tour,
    cli: Applier,
    number: int,
    backing: Store,
    url: str,
    base_url: str,
    folder: Path | None,
    fleet: tuple[FleetExample, Path] | None,
) -> None:
    # the acts (and the agent, simulator and web stack they run) load only when the demo runs
    from devplace.demo._acts_classes import classes_act
    from devplace.demo._acts_devices import contention_act, sharing_act
    from devplace.demo._acts_fleets import placement_act
    from devplace.demo._acts_stores import store_act
    from devplace.store import RemoteStore

    if number == 1:
        assert folder is not None
        remote = RemoteStore(base_url)
        try:
            await store_act(tour, cli, remote, url, base_url, folder)
        finally:
            await remote.close()
    elif number == 2:
        await sharing_act(tour, backing)
    elif number == 3:
        await contention_act(tour, backing)
    elif number == 5:
        await classes_act(tour, backing)
    else:
        assert fleet is not None
        await placement_act(tour, base_url, fleet[0], str(fleet[1]))


async def _tour(
    tour: Tour, cli: Applier, url: str, acts: Sequence[int], examples: Path | None, fleet_file: Path | None
) -> int:
    from devplace.server import create_app, running
    from devplace.store import open_store

    folder = _manifests_folder(examples) if 1 in acts else None
    fleet = _fleet_example(fleet_file) if 4 in acts else None
    started = time.monotonic()
    backing = open_store(url)
    try:
        async with running(create_app(backing)) as base_url:
            tour.title(f"devplace demo: store {url}, API server {base_url}")
            for number in acts:
                try:
                    async with asyncio.timeout(ACT_TIMEOUT):
                        await _run_act(tour, cli, number, backing, url, base_url, folder, fleet)
                except TimeoutError:
                    tour.broke(f"act {number} did not finish within {ACT_TIMEOUT:g} s")
                except errors.DevplaceError as e:
                    tour.broke(f"act {number} stopped: {type(e).__name__}: {e.message}")
                except Exception as e:  # a bug: report it as a failed act, keep the traceback for whoever debugs it
                    traceback.print_exc()
                    tour.broke(f"act {number} stopped: {type(e).__name__}: {e}")
    finally:
        await backing.close()
    ok = tour.summary(acts)
    elapsed = time.monotonic() - started
    tour.note(f"({elapsed:.1f} s; `devplace --help` lists every command, `devplace server` serves a store)")
    return 0 if ok else 1


async def run_demo(
    tour: Tour,
    cli: Applier,
    *,
    store: str | None = None,
    acts: Sequence[int] = ACTS,
    examples: Path | None = None,
    fleet_example: Path | None = None,
) -> int:
    """Run `acts` (in order) on `store` (a URL; None: a fresh SQLite file) and narrate them on `tour`; the exit code:
    0 when every expectation held, else 1. `examples` is act 1's manifest directory, `fleet_example` act 4's requests
    (None: the shipped ones); a bad one raises `errors.Invalid` before any act runs."""
    with _store_url(store) as url:
        return await _tour(tour, cli, url, acts, examples, fleet_example)
