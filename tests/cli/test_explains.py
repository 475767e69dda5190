"""`devplace explain pod NAME`: the scheduler's per-node verdicts, computed from a SQLite store with no scheduler
running (seed 003's class example: only node-c has a GPU with 30G or more)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from rich.table import Table
from typer.testing import CliRunner

from devplace.cli import app
from devplace.cli._explains import Explanation, render
from devplace.scheduler._decisions import NodeVerdict
from devplace.store import open_store

HIGH = "nvidia.high.mem"


def node(name: str, cpu: str, gpu: str | None = None) -> dict[str, Any]:
    """A Node; its kubelet advertises `gpu`'s Instance-level resource (the scheduler chooses only advertised ones)."""
    allocatable = {"cpu": cpu, "memory": "8Gi", "pods": "110", **({f"devplace.io/{gpu}": "1"} if gpu else {})}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": allocatable}}


def gpu(name: str, on: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "configurationName": "gpus",
            "nodes": [on],
            "deviceUsage": {f"{name}-0": ""},
            "brokerProperties": {"memory": memory},
        },
    }


def pod(name: str, cpu: str, gpus: int = 0, node_name: str | None = None) -> dict[str, Any]:
    requests = {"cpu": cpu, **({f"rc.devplace.io/{HIGH}": str(gpus)} if gpus else {})}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "app", "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


CLUSTER = [
    node("node-a", "1"),
    node("node-b", "8", "gpus-aaaaaa"),
    node("node-c", "8", "gpus-cccccc"),
    {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": "gpus", "namespace": "default"},
        "spec": {"discoveryHandler": {"name": "udev"}, "deviceKind": "nvidia-gpu"},
    },
    gpu("gpus-aaaaaa", "node-b", "16G"),
    gpu("gpus-cccccc", "node-c", "32G"),
    {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": {"name": HIGH},
        "spec": {
            "resourceSelector": [
                {
                    "matchExpressions": [
                        {"key": "Kind", "operator": "In", "values": ["nvidia-gpu"]},
                        {"key": "memory", "operator": "GtEq", "values": ["30G"]},
                    ]
                }
            ]
        },
    },
]


@pytest.fixture
def cli(tmp_path: Path) -> CliRunner:
    url = f"sqlite:///{tmp_path}/devplace.db"

    async def seed() -> None:
        store = open_store(url)
        try:
            for obj in [*CLUSTER, pod("trainer", "2", gpus=1), pod("huge", "16"), pod("web", "1", node_name="node-a")]:
                await store.create(obj)
        finally:
            await store.close()

    asyncio.run(seed())
    return CliRunner(env={"DEVPLACE_STORE": url, "COLUMNS": "200"})


def test_explain_shows_every_node_with_why_the_pod_does_not_fit_there(cli: CliRunner) -> None:
    result = cli.invoke(app, ["explain", "pod", "trainer"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "Pod default/trainer (pending): 1/3 nodes are available.\n"
        "NODE     VERDICT\n"
        "node-a   insufficient cpu\n"
        "node-b   no device matches class nvidia.high.mem\n"
        "node-c   fits\n"
    )


def test_a_pod_no_node_takes_is_summed_up_as_the_scheduler_reports_it(cli: CliRunner) -> None:
    result = cli.invoke(app, ["explain", "pods", "huge", "-n", "default"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "Pod default/huge (pending): 0/3 nodes are available: 3 insufficient cpu."


def test_a_bound_pod_is_explained_as_if_it_were_pending_on_its_own_node(cli: CliRunner) -> None:
    result = cli.invoke(app, ["explain", "pod", "web"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "Pod default/web (bound to node-a): 3/3 nodes are available.\n"
        "NODE     VERDICT\n"
        "node-a   fits\n"
        "node-b   fits\n"
        "node-c   fits\n"
    )


def test_explain_prints_json_for_programs(cli: CliRunner) -> None:
    result = cli.invoke(app, ["explain", "pod", "trainer", "-o", "json"])
    assert json.loads(result.stdout) == {
        "pod": "default/trainer",
        "node": "",
        "message": "1/3 nodes are available.",
        "verdicts": [
            {"node": "node-a", "fits": False, "reason": "insufficient cpu"},
            {"node": "node-b", "fits": False, "reason": f"no device matches class {HIGH}"},
            {"node": "node-c", "fits": True, "reason": None},
        ],
    }


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["explain", "pod", "ghost"], "error: pod default/ghost not found\n"),
        (
            ["explain", "node", "node-a"],
            "error: kind: only pods, resource classes and configurations are explained, not 'node'\n",
        ),
        (["explain", "pod", "web", "-o", "name"], "error: output: 'name' is not one of table, json, yaml\n"),
    ],
)
def test_explain_refuses_what_it_cannot_explain_in_one_line(cli: CliRunner, args: list[str], error: str) -> None:
    result = cli.invoke(app, args)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", error)


def test_on_a_terminal_the_verdicts_are_a_rich_table_after_the_heading() -> None:
    explanation = Explanation("default/p", "", (NodeVerdict("node-a", None), NodeVerdict("node-b", "insufficient cpu")))
    heading, table = render(explanation, "table", tty=True)
    assert heading == "Pod default/p (pending): 1/2 nodes are available."
    assert isinstance(table, Table)
    assert [c.header for c in table.columns] == ["NODE", "VERDICT"]
    assert [list(c.cells) for c in table.columns] == [["node-a", "node-b"], ["fits", "insufficient cpu"]]


def test_a_cluster_without_nodes_says_so() -> None:
    assert Explanation("default/p", "", ()).heading == "Pod default/p (pending): 0/0 nodes are available: no nodes."


def test_explain_resourceclass_shows_the_device_class_it_compiles_to(cli: CliRunner) -> None:
    import yaml

    result = cli.invoke(app, ["explain", "resourceclass", HIGH])
    assert result.exit_code == 0, result.output
    device_class = yaml.safe_load(result.output)
    assert device_class["kind"] == "DeviceClass"
    assert device_class["spec"]["extendedResourceName"] == f"rc.devplace.io/{HIGH}"
    assert 'device.driver == "devplace.io"' in device_class["spec"]["selectors"][0]["cel"]["expression"]
    missing = cli.invoke(app, ["explain", "resourceclass", "nope"])
    assert missing.exit_code != 0


def test_explain_configuration_shows_the_device_class_of_its_akri_resource_selecting_its_devices(
    cli: CliRunner,
) -> None:
    import yaml

    from devplace.api import DRIVER, DeviceInput, compile_selector, instance_device

    result = cli.invoke(app, ["explain", "configuration", "gpus", "-n", "default"])
    assert result.exit_code == 0, result.output
    device_class = yaml.safe_load(result.stdout)
    assert device_class["metadata"]["name"] == "gpus.devplace.io"
    assert device_class["spec"]["extendedResourceName"] == "devplace.io/gpus"
    selector = compile_selector(device_class["spec"]["selectors"][0]["cel"]["expression"])
    ours, theirs = gpu("gpus-aaaaaa", "node-b", "16G"), gpu("cams-bbbbbb", "node-b", "16G")
    theirs["spec"]["configurationName"] = "cams"
    assert [selector.matches(DeviceInput(DRIVER, instance_device(i).to_wire())) for i in (ours, theirs)] == [
        True,
        False,
    ]
    missing = cli.invoke(app, ["explain", "configuration", "nope"])
    assert missing.exit_code == 1
    assert "not found" in missing.stderr


def test_a_pod_with_a_claim_is_explained_with_the_allocators_verdict_per_node(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/dra.db"
    driver = "gpu.example.com"

    def gpu_slice(node_name: str, memory: str) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-gpus"},
            "spec": {
                "driver": driver,
                "nodeName": node_name,
                "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "capacity": {"memory": {"value": memory}}}],
            },
        }

    big = f'device.capacity["{driver}"].memory.compareTo(quantity("30Gi")) >= 0'
    objects = [
        node("node-a", "8"),
        node("node-b", "8"),
        gpu_slice("node-a", "16Gi"),
        gpu_slice("node-b", "80Gi"),
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "big-gpu"},
            "spec": {"selectors": [{"cel": {"expression": big}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "big-gpu"}}]}},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer", "namespace": "default"},
            "spec": {
                "containers": [{"name": "main", "image": "app"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "train"}],
            },
        },
    ]

    async def seed() -> None:
        store = open_store(url)
        try:
            for obj in objects:
                await store.create(obj)
        finally:
            await store.close()

    asyncio.run(seed())
    result = CliRunner(env={"DEVPLACE_STORE": url, "COLUMNS": "200"}).invoke(app, ["explain", "pod", "trainer"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Pod default/trainer (pending): 1/2 nodes are available."
    assert lines[2].split(None, 1) == [
        "node-a",
        "claim default/train, request gpu: no device on the node matches class big-gpu and the request",
    ]
    assert lines[3].split() == ["node-b", "fits"]
