"""`devplace get resourceclasses | brokers` and `devplace apply` of ResourceClasses on a SQLite store: the class rules
the API server enforces (references exist and form no cycle, spec immutable) hold without a server too."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from devplace.cli import _output as output
from devplace.cli import app
from devplace.store import open_store

GPU_CLASS = """\
apiVersion: devplace.io/v1alpha1
kind: ResourceClass
metadata:
  name: gpu
spec:
  resourceSelector:
  - matchExpressions:
    - {key: Kind, operator: In, values: [nvidia-gpu]}
"""


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/devplace.db"


@pytest.fixture
def cli(url: str) -> CliRunner:
    return CliRunner(env={"DEVPLACE_STORE": url, "COLUMNS": "200"})


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def create(url: str, *objects: dict[str, Any]) -> None:
    async def write() -> None:
        store = open_store(url)
        try:
            for obj in objects:
                await store.create(obj)
        finally:
            await store.close()

    run(write())


def stored_classes(url: str) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        store = open_store(url)
        try:
            return {o["metadata"]["name"]: o["spec"] for o in (await store.list("ResourceClass", "")).items}
        finally:
            await store.close()

    return dict(run(read()))


def manifest(tmp_path: Path, text: str) -> str:
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def without_age(stdout: str) -> list[list[str]]:
    return [line.split()[:-1] for line in stdout.splitlines()]


# -- get -------------------------------------------------------------------------------------------------------------


def test_get_resourceclasses_shows_allocatable_and_requested_from_the_status(cli: CliRunner, url: str) -> None:
    create(
        url,
        {
            "apiVersion": "devplace.io/v1alpha1",
            "kind": "ResourceClass",
            "metadata": {"name": "nvidia.high.mem"},
            "spec": {"resourceSelector": [{"classRef": "gpu"}], "selectionStrategy": "binpack"},
            "status": {"allocatable": "4", "requested": "1"},
        },
        {
            "apiVersion": "devplace.io/v1alpha1",
            "kind": "ResourceClass",
            "metadata": {"name": "unseen"},
            "spec": {"resourceSelector": [{"classRef": "gpu"}]},
        },
    )
    result = cli.invoke(app, ["get", "resourceclasses"])
    assert result.exit_code == 0, result.stderr
    assert without_age(result.stdout) == [
        ["NAME", "ALLOCATABLE", "REQUESTED", "STRATEGY"],
        ["nvidia.high.mem", "4", "1", "binpack"],
        ["unseen", "<none>", "<none>", "<none>"],
    ]


def configuration(name: str, strategy: dict[str, Any] | None, brokers: dict[str, int] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "discoveryHandler": {"name": "debugEcho"},
        "brokerSpec": {"brokerPodSpec": {"containers": [{"name": "b", "image": "nginx"}]}},
    }
    if strategy is not None:
        spec["brokerStrategy"] = strategy
    obj: dict[str, Any] = {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }
    if brokers is not None:
        obj["status"] = {"brokers": brokers}
    return obj


@pytest.fixture
def brokers(url: str) -> None:
    create(
        url,
        configuration("cams", None, {"desired": 3, "running": 2, "pending": 1}),
        configuration("gpus", {"deployment": {"replicas": 2}}, {"desired": 2, "running": 0, "pending": 2}),
        configuration("fresh", {"pool": {"size": 2}}, None),
    )


@pytest.mark.usefixtures("brokers")
def test_get_brokers_shows_each_configurations_strategy_and_the_controllers_counts(cli: CliRunner) -> None:
    result = cli.invoke(app, ["get", "brokers"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "NAMESPACE   CONFIGURATION   STRATEGY     DESIRED   RUNNING   PENDING\n"
        "default     cams            perNode      3         2         1\n"
        "default     fresh           pool         <none>    <none>    <none>\n"
        "default     gpus            deployment   2         0         2\n"
    )


@pytest.mark.usefixtures("brokers")
def test_get_brokers_of_one_configuration_as_json(cli: CliRunner) -> None:
    result = cli.invoke(app, ["get", "brokers", "gpus", "-o", "json"])
    assert json.loads(result.stdout) == {
        "namespace": "default",
        "configuration": "gpus",
        "strategy": "deployment",
        "desired": 2,
        "running": 0,
        "pending": 2,
    }


def test_broker_rows_show_none_for_a_configuration_without_brokers() -> None:
    bare = {"metadata": {"name": "x", "namespace": "default"}, "spec": {"discoveryHandler": {"name": "h"}}}
    assert output.broker_rows([bare]) == [["default", "x", "<none>", "<none>", "<none>", "<none>"]]


# -- apply -----------------------------------------------------------------------------------------------------------


def test_applying_a_class_with_a_missing_reference_fails_and_stores_nothing(
    cli: CliRunner, url: str, tmp_path: Path
) -> None:
    text = "apiVersion: devplace.io/v1alpha1\nkind: ResourceClass\nmetadata: {name: any}\n"
    text += "spec:\n  resourceSelector: [{classRef: gpu}]\n"
    result = cli.invoke(app, ["apply", "-f", manifest(tmp_path, text)])
    assert (result.exit_code, result.stderr) == (
        1,
        "document 1: error: ResourceClass any: spec.resourceSelector[0].classRef: class 'gpu' (referenced by 'any') "
        "does not exist\n",
    )
    assert stored_classes(url) == {}


def test_in_one_file_the_first_class_is_created_and_the_next_one_naming_itself_is_refused_as_a_cycle(
    cli: CliRunner, url: str, tmp_path: Path
) -> None:
    text = GPU_CLASS + "---\napiVersion: devplace.io/v1alpha1\nkind: ResourceClass\nmetadata: {name: any}\n"
    text += "spec:\n  resourceSelector: [{classRef: gpu}, {classRef: any}]\n"
    result = cli.invoke(app, ["apply", "-f", manifest(tmp_path, text)])
    assert result.exit_code == 1
    assert result.stdout == "ResourceClass gpu created\n"
    assert result.stderr == (
        "document 2: error: ResourceClass any: spec.resourceSelector[1].classRef: cycle any -> any\n"
    )
    assert list(stored_classes(url)) == ["gpu"]


def test_reapplying_a_class_with_another_spec_is_refused_as_immutable(cli: CliRunner, url: str, tmp_path: Path) -> None:
    assert cli.invoke(app, ["apply", "-f", manifest(tmp_path, GPU_CLASS)]).stdout == "ResourceClass gpu created\n"
    before = stored_classes(url)
    again = cli.invoke(app, ["apply", "-f", manifest(tmp_path, GPU_CLASS)])
    assert (again.exit_code, again.stdout) == (0, "ResourceClass gpu unchanged\n")
    changed = cli.invoke(app, ["apply", "-f", manifest(tmp_path, GPU_CLASS + "  selectionStrategy: spread\n")])
    assert (changed.exit_code, changed.stderr) == (
        1,
        "document 1: error: ResourceClass gpu: spec: field is immutable\n",
    )
    assert stored_classes(url) == before
