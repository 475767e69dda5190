"""`devplace fleet plan|instantiate|status` against a real uvicorn (in a thread) serving seed 004's example."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from typer.testing import CliRunner

from devplace.cli._app import app
from devplace.cli._emco import render_tables
from devplace.placement._catalog import Catalog
from devplace.server._app import create_app, running
from devplace.store import MemoryStore
from tests.placement.samples import SEED_CLUSTERS, build_seed, chart_archive, manifests_text, workload

DIG = ["my-proj1", "my-capp1", "v1.0", "my-dig1"]


def _serve(clusters: dict[str, list[dict[str, object]]] | None) -> Iterator[str]:
    """A seeded store (empty for None) behind a real uvicorn in its own thread and loop (the CLI under test blocks
    this one)."""
    store = MemoryStore()
    if clusters is not None:
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


def test_approve_instantiate_then_status(server: str) -> None:
    early = runner.invoke(app, ["fleet", "instantiate", *DIG, "--server", server])
    assert early.exit_code == 1
    assert early.stderr == 'error: deployment intent group "my-dig1" must be approved before it is instantiated\n'
    assert runner.invoke(app, ["fleet", "approve", *DIG, "--server", server]).exit_code == 0
    first = runner.invoke(app, ["fleet", "instantiate", *DIG, "--server", server])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["state"] == "Instantiated"
    status = runner.invoke(app, ["fleet", "status", *DIG, "--server", server])
    doc = json.loads(status.stdout)
    assert doc["placement"] == json.loads(first.stdout)
    assert [a["state"] for a in doc["states"]["actions"]] == ["Created", "Approved", "Instantiated"]
    table = runner.invoke(app, ["fleet", "status", *DIG, "--server", server, "-o", "table"])
    assert "Created -> Approved -> Instantiated (1)" in table.stdout
    assert "NotApplied" in table.stdout  # the seed's clusters are static inventories: no API to hand objects to
    again = runner.invoke(app, ["fleet", "instantiate", *DIG, "--server", server])
    assert again.exit_code == 1
    assert again.stderr.startswith('error: deployment intent group "my-dig1" is already instantiated')


def test_a_failed_placement_exits_1(no_qat_server: str) -> None:
    plan = runner.invoke(app, ["fleet", "plan", *DIG, "--server", no_qat_server])
    assert plan.exit_code == 1
    assert json.loads(plan.stdout)["state"] == "Failed"
    assert runner.invoke(app, ["fleet", "approve", *DIG, "--server", no_qat_server]).exit_code == 0
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


@pytest.fixture
def empty_server() -> Iterator[str]:
    yield from _serve(None)


EMCOCTL_FILE = """\
#creating controller entries (an EMCO service devplace does not have)
version: emco/v2
resourceContext:
  anchor: controllers
metadata:
  name: rsync
spec:
  host: rsync
  port: 9031
---
version: emco/v2
resourceContext:
  anchor: cluster-providers
metadata:
  name: {{ .ClusterProvider }}
---
version: emco/v2
resourceContext:
  anchor: cluster-providers/{{ .ClusterProvider }}/clusters
metadata:
  name: {{ .Cluster1 }}
  description: test
spec:
  nodes:
  - name: n1
    allocatable: {cpu: "8", memory: 16Gi}
---
version: emco/v2
resourceContext:
  anchor: cluster-providers/{{ .ClusterProvider }}/clusters/{{ .Cluster1 }}/labels
clusterLabel: {{ .ClusterLabel }}
---
version: emco/v2
resourceContext:
  anchor: projects
metadata:
  name: {{ .Values.ProjectName }}
---
version: emco/v2
resourceContext:
  anchor: projects/{{ $.ProjectName }}/logical-clouds
metadata:
  name: default
spec:
  level: "0"
---
version: emco/v2
resourceContext:
  anchor: projects/{{ .ProjectName }}/composite-apps
metadata:
  name: capp
spec:
  compositeAppVersion: v1
---
version: emco/v2
resourceContext:
  anchor: projects/{{ .ProjectName }}/composite-apps/capp/v1/apps
metadata:
  name: web
file: {{ .Chart }}
---
version: emco/v2
resourceContext:
  anchor: projects/{{ .ProjectName }}/composite-apps/capp/v1/deployment-intent-groups
metadata:
  name: dig
spec:
  compositeProfile: profile
  version: r1
---
version: emco/v2
resourceContext:
  anchor: {{ .Group }}/generic-placement-intents
metadata:
  name: gpi
---
version: emco/v2
resourceContext:
  anchor: {{ .Group }}/generic-placement-intents/gpi/app-intents
metadata:
  name: web-placement
spec:
  app: web
  intent:
    allOf:
    - clusterProvider: {{ .ClusterProvider }}
      clusterLabel: {{ .ClusterLabel }}
---
version: emco/v2
resourceContext:
  anchor: {{ .Group }}/hpa-intents
metadata:
  name: hpa
spec:
  app: web
---
version: emco/v2
resourceContext:
  anchor: {{ .Group }}/hpa-intents/hpa/hpa-resource-consumers
metadata:
  name: web
spec:
  apiVersion: apps/v1
  kind: Deployment
  name: web
  container: main
---
version: emco/v2
resourceContext:
  anchor: {{ .Group }}/hpa-intents/hpa/hpa-resource-consumers/web/resource-requirements
metadata:
  name: cpu
spec:
  allocatable: true
  resource: {name: cpu, requests: 2, limits: 2}
"""
LIFECYCLE = """\
---
version: emco/v2
resourceContext:
  anchor: {{ .Group }}/approve
---
version: emco/v2
resourceContext:
  anchor: {{ .Group }}/instantiate
"""


def write_files(tmp_path: Path, *, lifecycle: bool) -> tuple[str, str]:
    (tmp_path / "web.tgz").write_bytes(
        chart_archive("web", {"web.yaml": manifests_text(workload("Deployment", "web", "main"))})
    )
    (tmp_path / "values.yaml").write_text(
        "ProjectName: proj1\nClusterProvider: provider1\nCluster1: cluster1\nClusterLabel: edge\n"
        "Group: projects/proj1/composite-apps/capp/v1/deployment-intent-groups/dig\n"
        f"Chart: {tmp_path / 'web.tgz'}\n"
    )
    (tmp_path / "hpa.yaml").write_text(EMCOCTL_FILE + (LIFECYCLE if lifecycle else ""))
    return str(tmp_path / "hpa.yaml"), str(tmp_path / "values.yaml")


def test_apply_sends_an_emcoctl_file_and_delete_undoes_it(empty_server: str, tmp_path: Path) -> None:
    file, values = write_files(tmp_path, lifecycle=True)
    applied = runner.invoke(app, ["fleet", "apply", "-f", file, "-v", values, "--server", empty_server])
    assert applied.exit_code == 0, applied.output
    assert "document 1 (controllers/rsync): skipped (devplace does not serve /v2/controllers)" in applied.stdout
    assert (
        "POST /v2/projects/proj1/composite-apps/capp/v1/deployment-intent-groups/dig/instantiate: 202" in applied.stdout
    )
    dig = ["proj1", "capp", "v1", "dig"]
    status = json.loads(runner.invoke(app, ["fleet", "status", *dig, "--server", empty_server]).stdout)
    assert [a["state"] for a in status["states"]["actions"]] == ["Created", "Approved", "Instantiated"]
    placement = status["placement"]
    assert [c["cluster"] for c in placement["apps"][0]["clusters"]] == ["cluster1"]
    resources = placement["apps"][0]["resources"][0]["manifest"]["spec"]["template"]["spec"]["containers"][0]
    assert resources["resources"] == {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}

    deleted = runner.invoke(app, ["fleet", "delete", "-f", file, "-v", values, "--server", empty_server])
    assert deleted.exit_code == 0, deleted.output
    lines = deleted.stdout.splitlines()
    assert lines[0] == "POST /v2/projects/proj1/composite-apps/capp/v1/deployment-intent-groups/dig/terminate: 202"
    assert "DELETE /v2/cluster-providers/provider1: 204" in lines
    with httpx2.Client(base_url=empty_server) as client:
        assert client.get("/v2/projects").json() == []
        assert client.get("/v2/cluster-providers").json() == []


def test_applying_twice_replaces_what_exists(empty_server: str, tmp_path: Path) -> None:
    file, values = write_files(tmp_path, lifecycle=False)
    first = runner.invoke(app, ["fleet", "apply", "-f", file, "-v", values, "--server", empty_server])
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, ["fleet", "apply", "-f", file, "-v", values, "--server", empty_server])
    assert again.exit_code == 0, again.output
    assert "/v2/projects/proj1: unchanged" in again.stdout.splitlines()  # exists as written: left alone
    assert "PUT /v2/cluster-providers/provider1/clusters/cluster1/labels/edge: 200" in again.stdout


def test_a_failing_document_is_reported_and_the_rest_still_sent(empty_server: str, tmp_path: Path) -> None:
    file, values = write_files(tmp_path, lifecycle=False)
    text = Path(file).read_text().replace("requests: 2, limits: 2", "requests: 4, limits: 2")
    Path(file).write_text(text)
    result = runner.invoke(app, ["fleet", "apply", "-f", file, "-v", values, "--server", empty_server])
    assert result.exit_code == 1
    assert "error: document 14 (" in result.stderr
    assert "Invalid Input: spec.resource.requests: requests 4 exceed limits 2" in result.stderr
    assert "1 of 14 documents failed" in result.stderr


@pytest.mark.parametrize(
    ("text", "values", "message"),
    [
        ("name: {{ .Missing }}\n", "A: 1\n", "line 1: {{ .Missing }} has no value in the values file"),
        ("a: 1\n{{- range $i, $a := .Apps }}\n", "Apps: []\n", "line 2: {{ range $i, $a := .Apps }} is a Go template"),
        ("resourceContext: {anchor: projects}\nversion: emco/v1\n", "A: 1\n", "document 1: version 'emco/v1'"),
        ("metadata: {name: x}\n", "A: 1\n", "document 1: resourceContext.anchor is required"),
    ],
)
def test_bad_emcoctl_files_are_one_error_line(tmp_path: Path, text: str, values: str, message: str) -> None:
    (tmp_path / "f.yaml").write_text(text)
    (tmp_path / "v.yaml").write_text(values)
    file = str(tmp_path / "f.yaml")
    result = runner.invoke(app, ["fleet", "apply", "-f", file, "-v", str(tmp_path / "v.yaml")])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {file}: {message}"), result.stderr
