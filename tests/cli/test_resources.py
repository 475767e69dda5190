"""`devplace apply | get | describe | delete | watch` against SQLite stores in temporary directories, and once through
a spawned API server. Every bad input ends with exit code 1 and one `error:` line, and changes nothing."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from devplace.cli import _resources as resources
from devplace.cli import app
from devplace.cli._resources import raw_label, validate_document
from devplace.store import open_store
from tests.servers import spawn_server

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "manifests"
CONFIG = """\
apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: cam
spec:
  discoveryHandler:
    name: debugEcho
  capacity: {capacity}
"""


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/devplace.db"


@pytest.fixture
def cli(store_url: str) -> CliRunner:
    return CliRunner(env={"DEVPLACE_STORE": store_url, "COLUMNS": "200"})


def stored(url: str, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
    async def read() -> list[dict[str, Any]]:
        store = open_store(url)
        try:
            return (await store.list(kind, namespace)).items
        finally:
            await store.close()

    return asyncio.run(read())


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


# -- pure parts ---------------------------------------------------------------------------------------------------


def manifest(**changes: Any) -> dict[str, Any]:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "default"},
        "data": {"k": "v"},
    }
    obj.update(changes)
    return obj


def test_validate_document_fills_the_namespace_from_the_flag_only_for_namespaced_kinds() -> None:
    assert validate_document(manifest(metadata={"name": "a"}), "team")["metadata"]["namespace"] == "team"
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    assert "namespace" not in validate_document(node, "team")["metadata"]
    assert validate_document(manifest(metadata={"name": "a"}))["metadata"]["namespace"] == "default"


def test_raw_label_names_what_it_can() -> None:
    assert raw_label({"kind": "Configuration", "metadata": {"name": "x"}}) == "Configuration default/x"
    assert raw_label({"kind": "Node", "metadata": {"name": "n"}}) == "Node n"
    assert raw_label({"kind": "Gadget", "metadata": {"name": "g"}}) == "Gadget g"
    assert raw_label(["not", "an", "object"]) is None
    assert raw_label({"kind": "Node"}) is None


# -- apply ----------------------------------------------------------------------------------------------------


def test_apply_creates_then_reports_unchanged_then_configured(cli: CliRunner, tmp_path: Path, store_url: str) -> None:
    path = write(tmp_path, "cam.yaml", CONFIG.format(capacity=2))
    first = cli.invoke(app, ["apply", "-f", path])
    assert (first.exit_code, first.stdout) == (0, "Configuration default/cam created\n")
    again = cli.invoke(app, ["apply", "-f", path])
    assert (again.exit_code, again.stdout) == (0, "Configuration default/cam unchanged\n")
    write(tmp_path, "cam.yaml", CONFIG.format(capacity=3))
    changed = cli.invoke(app, ["apply", "-f", path])
    assert (changed.exit_code, changed.stdout) == (0, "Configuration default/cam configured\n")
    (obj,) = stored(store_url, "Configuration")
    assert obj["spec"]["capacity"] == 3
    assert obj["metadata"]["resourceVersion"] == "2"


def test_apply_stores_an_akri_manifest_as_written(cli: CliRunner, tmp_path: Path, store_url: str) -> None:
    cli.invoke(app, ["apply", "-f", str(EXAMPLES / "akri-debug-echo.yaml")])
    (obj,) = stored(store_url, "Configuration")
    written = yaml.safe_load((EXAMPLES / "akri-debug-echo.yaml").read_text())
    assert obj["apiVersion"] == "akri.sh/v0"
    assert obj["spec"] == written["spec"]


INSTANCE = """\
apiVersion: akri.sh/v0
kind: Instance
metadata: {{name: cam-1, namespace: default}}
spec:
  configurationName: cams
  capacity: 3
  shared: true
  nodes: [node-a, node-b]
  deviceUsage: {{cam-1-0: "", cam-1-1: "", cam-1-2: ""}}
  brokerProperties: {{RESOLUTION: "{resolution}"}}
"""


def test_apply_keeps_the_slot_holders_agents_wrote_and_says_so(cli: CliRunner, tmp_path: Path, store_url: str) -> None:
    assert (
        cli.invoke(app, ["apply", "-f", write(tmp_path, "i.yaml", INSTANCE.format(resolution="720p"))]).exit_code == 0
    )

    async def agents_claim() -> None:
        store = open_store(store_url)
        try:
            instance = await store.get("Instance", "cam-1", "default")
            instance["spec"]["deviceUsage"].update({"cam-1-0": "node-a", "cam-1-2": "C:cam-1:node-b"})
            await store.update(instance)
        finally:
            await store.close()

    asyncio.run(agents_claim())
    changed = cli.invoke(app, ["apply", "-f", write(tmp_path, "i.yaml", INSTANCE.format(resolution="1080p"))])
    assert changed.exit_code == 0, changed.output
    assert changed.stdout == "Instance default/cam-1 configured (kept 2 slot holders written by agents)\n"
    again = cli.invoke(app, ["apply", "-f", write(tmp_path, "i.yaml", INSTANCE.format(resolution="1080p"))])
    assert again.stdout == "Instance default/cam-1 unchanged (kept 2 slot holders written by agents)\n"
    [instance] = stored(store_url, "Instance")
    assert instance["spec"]["deviceUsage"] == {"cam-1-0": "node-a", "cam-1-1": "", "cam-1-2": "C:cam-1:node-b"}
    assert instance["spec"]["brokerProperties"] == {"RESOLUTION": "1080p"}


def test_apply_of_a_multi_document_file_applies_good_documents_and_reports_each_bad_one(
    cli: CliRunner, tmp_path: Path, store_url: str
) -> None:
    path = write(
        tmp_path,
        "mixed.yaml",
        """\
        apiVersion: v1
        kind: Node
        metadata: {name: node-a}
        ---
        apiVersion: akri.sh/v0
        kind: Configuration
        metadata: {name: x}
        spec: {discoveryHandler: {name: debugEcho}, capacity: 0}
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: settings}
        data: {a: "1"}
        ---
        apiVersion: v1
        kind: Gadget
        metadata: {name: g}
        ---
        apiVersion: apps/v9
        kind: Deployment
        metadata: {name: web}
        ---
        apiVersion: v1
        kind: Node
        metadata: {name: Not_Valid}
        """,
    )
    result = cli.invoke(app, ["apply", "-f", path])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == ["Node node-a created", "ConfigMap default/settings created"]
    errors = result.stderr.splitlines()
    assert errors[0] == (
        "document 2: error: Configuration default/x: spec.capacity: Input should be greater than or equal to 1"
    )
    assert errors[1].startswith("document 4: error: Gadget g: kind: unknown kind 'Gadget'")
    assert (
        errors[2]
        == "document 5: error: Deployment default/web: apiVersion: Deployment is served as apps/v1, not 'apps/v9'"
    )
    assert errors[3].startswith("document 6: error: Node Not_Valid: metadata.name: 'Not_Valid' must consist of")
    assert len(errors) == 4
    assert [o["metadata"]["name"] for o in stored(store_url, "Node")] == ["node-a"]
    assert stored(store_url, "Configuration") == []


def test_apply_of_malformed_yaml_is_one_error_line_and_changes_nothing(
    cli: CliRunner, tmp_path: Path, store_url: str
) -> None:
    path = write(tmp_path, "bad.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: a\n")
    result = cli.invoke(app, ["apply", "-f", path])
    assert result.exit_code == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {path}: malformed YAML at line ")
    assert not Path(store_url.removeprefix("sqlite:///")).exists()  # nothing was valid: the store was not opened


def test_apply_of_a_missing_file_is_an_error(cli: CliRunner, tmp_path: Path) -> None:
    result = cli.invoke(app, ["apply", "-f", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 1
    assert result.stderr == f"error: filename: {tmp_path / 'nope.yaml'}: no such file or directory\n"


def test_apply_with_a_stale_pinned_resource_version_fails_and_changes_nothing(
    cli: CliRunner, tmp_path: Path, store_url: str
) -> None:
    cli.invoke(app, ["apply", "-f", write(tmp_path, "cam.yaml", CONFIG.format(capacity=2))])
    cli.invoke(app, ["apply", "-f", write(tmp_path, "cam.yaml", CONFIG.format(capacity=3))])
    pinned = CONFIG.format(capacity=5).replace("  name: cam\n", "  name: cam\n  resourceVersion: '1'\n")
    result = cli.invoke(app, ["apply", "-f", write(tmp_path, "pinned.yaml", pinned)])
    assert result.exit_code == 1
    assert result.stderr.startswith("document 1: error: Configuration default/cam: ")
    assert "resourceVersion 1 is stale" in result.stderr
    assert stored(store_url, "Configuration")[0]["spec"]["capacity"] == 3


def test_apply_reads_stdin_and_directories(cli: CliRunner, store_url: str) -> None:
    piped = cli.invoke(app, ["apply", "-f", "-"], input=CONFIG.format(capacity=1))
    assert (piped.exit_code, piped.stdout) == (0, "Configuration default/cam created\n")
    folder = cli.invoke(app, ["apply", "-f", str(EXAMPLES)])
    assert folder.exit_code == 0, folder.stderr
    assert "Instance default/akri-debug-echo-482878 created" in folder.stdout
    assert sorted(o["metadata"]["name"] for o in stored(store_url, "Node")) == ["node-a", "node-b"]


def test_apply_with_a_namespace_flag_places_objects_there(cli: CliRunner, tmp_path: Path, store_url: str) -> None:
    result = cli.invoke(app, ["apply", "-n", "team", "-f", write(tmp_path, "cam.yaml", CONFIG.format(capacity=1))])
    assert result.stdout == "Configuration team/cam created\n"
    assert stored(store_url, "Configuration", "team")[0]["metadata"]["name"] == "cam"


# -- get / describe / delete ----------------------------------------------------------------------------------


@pytest.fixture
def applied(cli: CliRunner) -> CliRunner:
    result = cli.invoke(app, ["apply", "-f", str(EXAMPLES)])
    assert result.exit_code == 0, result.stderr
    return cli


def test_get_lists_a_kind_as_a_plain_table_off_a_terminal(applied: CliRunner) -> None:
    result = applied.invoke(app, ["get", "instances"])
    assert result.exit_code == 0
    header, row = result.stdout.splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "CONFIG", "SHARED", "NODES", "USED/CAPACITY", "AGE"]
    assert row.split()[:6] == ["default", "akri-debug-echo-482878", "akri-debug-echo", "true", "node-a,node-b", "1/2"]


def test_get_o_wide_adds_the_wide_columns_the_server_serves_at_priority_one(applied: CliRunner) -> None:
    result = applied.invoke(app, ["get", "instances", "-o", "wide"])
    assert result.exit_code == 0, result.stderr
    header, row = result.stdout.splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "CONFIG", "SHARED", "NODES", "USED/CAPACITY", "AGE", "CDI-NAME"]
    assert row.split()[0] == "default"


def test_get_accepts_kind_plural_and_lowercase_names(applied: CliRunner) -> None:
    outputs = {applied.invoke(app, ["get", k, "-o", "name"]).stdout for k in ("Node", "nodes", "node")}
    assert outputs == {"nodes/node-a\nnodes/node-b\n"}


def test_get_one_object_as_json_or_yaml(applied: CliRunner) -> None:
    as_json = json.loads(applied.invoke(app, ["get", "configuration", "shared-gpus", "-o", "json"]).stdout)
    as_yaml = yaml.safe_load(applied.invoke(app, ["get", "configuration", "shared-gpus", "-o", "yaml"]).stdout)
    assert as_json == as_yaml
    assert as_json["spec"]["uniqueDevices"] is False


def test_get_a_list_as_json_is_a_kubectl_list(applied: CliRunner) -> None:
    listed = json.loads(applied.invoke(app, ["get", "nodes", "-o", "json"]).stdout)
    assert listed["kind"] == "List"
    assert [o["metadata"]["name"] for o in listed["items"]] == ["node-a", "node-b"]


def test_get_filters_by_label_selector_and_namespace(applied: CliRunner, tmp_path: Path) -> None:
    zone2 = applied.invoke(app, ["get", "nodes", "-l", "topology.kubernetes.io/zone=zone-2", "-o", "name"])
    assert zone2.stdout == "nodes/node-b\n"
    applied.invoke(app, ["apply", "-n", "team", "-f", write(tmp_path, "cam.yaml", CONFIG.format(capacity=1))])
    in_team = applied.invoke(app, ["get", "configurations", "-n", "team", "-o", "name"])
    assert in_team.stdout == "configurations/cam\n"
    everywhere = applied.invoke(app, ["get", "configurations", "-A", "-o", "name"])
    assert everywhere.stdout.splitlines() == [
        "configurations/akri-debug-echo",
        "configurations/shared-gpus",
        "configurations/cam",
    ]


def test_get_of_nothing_says_so_on_stderr(cli: CliRunner) -> None:
    result = cli.invoke(app, ["get", "pods"])
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "No resources found in default namespace.\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["get", "gadgets"], "error: kind: unknown kind 'gadgets' (known: "),
        (["get", "configuration", "nope"], "error: Configuration default/nope not found"),
        (["get", "nodes", "-o", "xml"], "error: output: 'xml' is not one of table, wide, json, yaml, name"),
        (["get", "nodes", "-n", "team"], "error: namespace: Node is cluster-scoped and takes no namespace"),
        (["get", "nodes", "-l", "zone in (a"], "error: "),
        (["describe", "node", "nope"], "error: Node nope not found"),
        (["delete", "node", "nope"], "error: Node nope not found"),
        (["delete", "node", "node-a", "--resource-version", "999"], "error: Node node-a: precondition failed"),
    ],
)
def test_bad_requests_are_one_error_line_and_exit_code_1(applied: CliRunner, args: list[str], message: str) -> None:
    result = applied.invoke(app, args)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(message)


DRA_MANIFESTS = Path(__file__).resolve().parents[1] / "fixtures" / "dra" / "manifests.yaml"


@pytest.mark.parametrize(
    ("args", "header", "row"),
    [
        (["deviceclasses"], ["NAME", "AGE"], ["gpu.example.com"]),
        (
            ["resourceslices"],
            ["NAME", "NODE", "DRIVER", "POOL", "AGE"],
            ["cat-slice", "<none>", "resource-driver.example.com", "black-cat-pool"],
        ),
        (["resourceclaims"], ["NAMESPACE", "NAME", "STATE", "AGE"], ["default", "example-resource-claim", "pending"]),
        (
            ["resourceclaimtemplates", "-n", "cel-selector"],
            ["NAMESPACE", "NAME", "AGE"],
            ["cel-selector", "single-gpu-cel"],
        ),
    ],
)
def test_get_prints_kubernetes_columns_for_the_dra_kinds(
    cli: CliRunner, args: list[str], header: list[str], row: list[str]
) -> None:
    assert cli.invoke(app, ["apply", "-f", str(DRA_MANIFESTS)]).exit_code == 0
    result = cli.invoke(app, ["get", *args])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == header
    assert lines[1].split()[: len(row)] == row


def test_describe_shows_the_object(applied: CliRunner) -> None:
    result = applied.invoke(app, ["describe", "instance", "akri-debug-echo-482878"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["Name:", "akri-debug-echo-482878"]
    assert "Kind:             Instance (akri.sh/v0)" in lines
    assert "Slots:            1/2 used" in lines


def test_delete_removes_the_object(applied: CliRunner, store_url: str) -> None:
    result = applied.invoke(app, ["delete", "node", "node-a"])
    assert (result.exit_code, result.stdout) == (0, "Node node-a deleted\n")
    assert [o["metadata"]["name"] for o in stored(store_url, "Node")] == ["node-b"]


# -- watch ----------------------------------------------------------------------------------------------------


def test_watch_prints_current_objects_first_as_json_lines_off_a_terminal(applied: CliRunner) -> None:
    result = applied.invoke(app, ["watch", "nodes", "--count", "2"])
    assert result.exit_code == 0
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "node-a"), ("ADDED", "node-b")]


def test_watch_since_a_revision_replays_changes_in_order(applied: CliRunner) -> None:
    applied.invoke(app, ["delete", "node", "node-a"])
    result = applied.invoke(app, ["watch", "nodes", "--since", "0", "--count", "3", "-o", "table"])
    assert [line.split()[:2] for line in result.stdout.splitlines()] == [
        ["ADDED", "Node"],
        ["ADDED", "Node"],
        ["DELETED", "Node"],
    ]


def test_watch_from_a_compacted_revision_is_an_error(applied: CliRunner, store_url: str) -> None:
    async def compact() -> None:
        store = open_store(store_url)
        await store.compact(await store.revision())
        await store.close()

    asyncio.run(compact())
    result = applied.invoke(app, ["watch", "nodes", "--since", "1", "--count", "1"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert "compacted" in result.stderr


# -- store selection ------------------------------------------------------------------------------------------


def test_the_store_option_beats_the_environment(cli: CliRunner, tmp_path: Path) -> None:
    other = f"sqlite:///{tmp_path}/other.db"
    cli.invoke(app, ["apply", "--store", other, "-f", str(EXAMPLES / "node-a.yaml")])
    assert cli.invoke(app, ["get", "nodes", "-o", "name"]).stdout == ""
    assert cli.invoke(app, ["get", "nodes", "-o", "name", "--store", other]).stdout == "nodes/node-a\n"


def test_the_default_store_is_devplace_db_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEVPLACE_STORE", raising=False)
    result = CliRunner().invoke(app, ["apply", "-f", str(EXAMPLES / "node-a.yaml")])
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "devplace.db").exists()


def test_an_unsupported_store_url_is_one_error_line(cli: CliRunner) -> None:
    result = cli.invoke(app, ["get", "nodes", "--store", "ftp://nowhere"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: store: unsupported store URL 'ftp://nowhere'")


# -- through a spawned API server -------------------------------------------------------------------------------


def test_the_cli_works_through_a_spawned_api_server(tmp_path: Path) -> None:
    backing = f"sqlite:///{tmp_path}/served.db"
    with spawn_server(backing) as base_url:
        cli = CliRunner(env={"DEVPLACE_STORE": base_url})
        applied = cli.invoke(app, ["apply", "-f", str(EXAMPLES)])
        assert applied.exit_code == 0, applied.stderr
        assert "ResourceClass big-gpu created" in applied.stdout
        listed = cli.invoke(app, ["get", "nodes", "-o", "name"])
        assert listed.stdout == "nodes/node-a\nnodes/node-b\n"
        huge = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"}, "data": {"x": "y" * 10_000_000}}
        too_big = cli.invoke(app, ["apply", "-f", write(tmp_path, "huge.json", json.dumps(huge))])
        assert too_big.exit_code == 1
        assert too_big.stderr.startswith("document 1: error: ConfigMap default/huge: the request body is larger")
        stale = CONFIG.format(capacity=9).replace("  name: cam\n", "  name: cam\n  resourceVersion: '1'\n")
        conflict = cli.invoke(app, ["apply", "-f", write(tmp_path, "stale.yaml", stale)])
        assert conflict.exit_code == 1
        assert "resourceVersion 1 is given but the object does not exist" in conflict.stderr
    assert [o["metadata"]["name"] for o in stored(backing, "ConfigMap")] == ["echo-settings"]


def test_a_store_given_to_devplace_itself_is_used_when_the_command_has_none(tmp_path: Path) -> None:
    """The callback the app needs for `devplace --store URL get ...`: it puts the URL in ctx.obj["store"]."""
    top = typer.Typer()

    @top.callback()
    def options(ctx: typer.Context, store: str | None = typer.Option(None, "--store")) -> None:
        ctx.obj = {"store": store}

    resources.register(top)
    url = f"sqlite:///{tmp_path}/global.db"
    runner = CliRunner(env={"DEVPLACE_STORE": f"sqlite:///{tmp_path}/env.db"})
    applied = runner.invoke(top, ["--store", url, "apply", "-f", str(EXAMPLES / "node-a.yaml")])
    assert applied.exit_code == 0, applied.stderr
    assert [o["metadata"]["name"] for o in stored(url, "Node")] == ["node-a"]
    assert runner.invoke(top, ["get", "nodes", "-o", "name"]).stdout == ""  # no flag: the environment's store


def test_on_a_terminal_get_draws_a_rich_table_and_watch_prints_readable_lines(
    applied: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resources, "_is_tty", lambda: True)
    table = applied.invoke(app, ["get", "nodes"])
    assert table.exit_code == 0
    assert table.stdout.split()[:3] == ["NAME", "STATUS", "ROLES"]
    assert "───" in table.stdout  # rich's header rule, absent from the plain table
    watched = applied.invoke(app, ["watch", "nodes", "--count", "1"])
    assert watched.stdout.startswith("ADDED     Node node-a  (revision ")
