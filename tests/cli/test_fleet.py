"""`devplace fleet plan|instantiate|status` against a real uvicorn (in a thread) serving seed 004's example."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from devplace.cli.app import app
from devplace.cli.fleets import render_tables
from devplace.placement.catalog import Catalog
from devplace.server.app import create_app, running
from devplace.store import MemoryStore
from tests.placement.samples import SEED_CLUSTERS, build_seed

DIG = ["my-proj1", "my-capp1", "v1.0", "my-dig1"]


def _serve(clusters: dict[str, list[dict[str, object]]]) -> Iterator[str]:
    """A seeded store behind a real uvicorn in its own thread and loop (the CLI under test blocks this one)."""
    store = MemoryStore()
    asyncio.run(build_seed(Catalog(store), clusters))
    ready = threading.Event()
    stop: list[asyncio.Event] = []
    urls: list[str] = []

    async def main() -> None:
        stop.append(asyncio.Event())
        async with running(create_app(store)) as url:
            urls.append(url)
            ready.set()
            await stop[0].wait()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(20), "the server did not start"
    try:
        yield urls[0]
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(20)
        loop.close()


@pytest.fixture
def server() -> Iterator[str]:
    yield from _serve(SEED_CLUSTERS)


@pytest.fixture
def no_qat_server() -> Iterator[str]:
    yield from _serve({k: v for k, v in SEED_CLUSTERS.items() if k != "cluster-3"})


runner = CliRunner()


def test_plan_prints_the_status_document_as_json_off_a_terminal(server: str) -> None:
    result = runner.invoke(app, ["fleet", "plan", *DIG, "--server", server])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["state"] == "Planned"
    assert {a["name"]: [c["cluster"] for c in a["clusters"]] for a in doc["apps"]} == {
        "analytics": ["cluster-3"],
        "fwall": ["cluster-1"],
    }


def test_tables_show_placements_and_reasons(server: str) -> None:
    result = runner.invoke(app, ["fleet", "plan", *DIG, "--server", server, "-o", "table"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Planned (dry run)" in out
    assert "edge/cluster-1" in out
    assert "rejected clusters" in out
    assert "no node has cpu >= 4 (max 2) for core-fwall" in out


def test_instantiate_then_status(server: str) -> None:
    first = runner.invoke(app, ["fleet", "instantiate", *DIG, "--server", server])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["state"] == "Instantiated"
    status = runner.invoke(app, ["fleet", "status", *DIG, "--server", server])
    assert json.loads(status.stdout) == json.loads(first.stdout)
    again = runner.invoke(app, ["fleet", "instantiate", *DIG, "--server", server])
    assert again.exit_code == 1
    assert again.stderr.startswith('error: deployment intent group "my-dig1" is already instantiated')


def test_a_failed_placement_exits_1(no_qat_server: str) -> None:
    plan = runner.invoke(app, ["fleet", "plan", *DIG, "--server", no_qat_server])
    assert plan.exit_code == 1
    assert json.loads(plan.stdout)["state"] == "Failed"
    instantiate = runner.invoke(app, ["fleet", "instantiate", *DIG, "--server", no_qat_server])
    assert instantiate.exit_code == 1
    assert "app analytics: needs 1 cluster, 0 qualify" in instantiate.stderr
    status = runner.invoke(app, ["fleet", "status", *DIG, "--server", no_qat_server, "-o", "table"])
    assert status.exit_code == 0
    assert "Failed" in status.stdout


def test_a_missing_group_is_one_error_line(server: str) -> None:
    result = runner.invoke(app, ["fleet", "status", "my-proj1", "my-capp1", "v1.0", "nope", "--server", server])
    assert result.exit_code == 1
    assert result.stderr == 'error: deployment intent group "nope" not found\n'


def test_an_unreachable_server_is_one_error_line() -> None:
    serving = _serve({})
    url = next(serving)
    serving.close()  # stops the server: its port now refuses connections
    result = runner.invoke(app, ["fleet", "status", *DIG, "--server", url])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot reach {url}")


def test_render_tables_lists_warnings_and_errors() -> None:
    doc = {
        "state": "Failed",
        "apps": [{"name": "web", "clusters": [], "rejected": [], "resources": [], "warnings": ["w1"], "qualified": 0}],
        "errors": ["e1"],
    }
    parts = [p for p in render_tables(doc, "dig") if isinstance(p, str)]
    assert parts == ["dig: [bold]Failed[/bold]", "[yellow]warning[/yellow]: w1", "[red]error[/red]: e1"]
