"""The real kubectl against a real `devplace server` (a child process on sqlite): get with the server's Table columns,
-o wide/yaml/jsonpath, get -w, describe, create, replace, delete --wait, and paging with --chunk-size.

kubectl runs as a subprocess with `KUBECONFIG` set to a file naming the server and `HOME` set to a temporary
directory (its discovery cache never touches ~/.kube). One server serves the module; each test works in its own
namespace. A watch is read line by line while another kubectl writes; every read is bounded, and the watching
kubectl ends on its own after `--request-timeout` if a test fails half-way (it is stopped by its PID regardless).
Everything is skipped, saying why, when no kubectl is installed. kubectl validates as it does by default (it
downloads the server's OpenAPI).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.processes import stop_child
from tests.servers import anonymous_kubeconfig, spawn_server

KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine (looked on PATH)"),
]

BOUND = 30.0  # seconds a single read of kubectl's output may take before the test fails (a bound, not a timing)

CONFIGURATION = """\
apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: {name}
  labels: {{app: cams}}
spec:
  discoveryHandler:
    name: debugEcho
  capacity: {capacity}
"""

INSTANCE = """\
apiVersion: akri.sh/v0
kind: Instance
metadata:
  name: {name}
spec:
  configurationName: cam
  shared: true
  nodes: [node-a, node-b]
  capacity: 2
  cdiName: akri.sh/cam={name}
  deviceUsage: {{{name}-0: node-a, {name}-1: ""}}
"""

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  nodeName: node-a
  containers: [{{name: main, image: busybox:1.36}}]
status:
  phase: Running
  podIP: 10.0.0.9
  containerStatuses:
  - {{name: main, image: busybox, imageID: "", ready: true, restartCount: 1, state: {{running: {{}}}}}}
"""


class Kubectl:
    """Runs the machine's kubectl with only the environment a user of the kubeconfig would have."""

    def __init__(self, kubeconfig: Path, home: Path) -> None:
        assert KUBECTL is not None
        self.binary = KUBECTL
        home.mkdir(parents=True, exist_ok=True)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "KUBECONFIG": str(kubeconfig)}

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.binary, *args], input=stdin, capture_output=True, text=True, env=self.env, timeout=90, check=False
        )
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)} failed:\n{done.stderr}{done.stdout}"
        return done

    def create(self, manifest: str, namespace: str) -> str:
        return self("create", "-n", namespace, "-f", "-", stdin=manifest).stdout

    def replace_file(self, manifest: str, namespace: str) -> str:
        return self("replace", "-n", namespace, "-f", "-", stdin=manifest).stdout


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    root = tmp_path_factory.mktemp("kubectl-resources")
    with spawn_server(f"sqlite:///{root}/devplace.db") as base_url:
        kubeconfig = anonymous_kubeconfig(root / "kubeconfig", base_url)
        yield Kubectl(kubeconfig, root / "home")


def rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.strip().splitlines()]


def test_get_prints_the_servers_columns_wide_ones_with_o_wide(kubectl: Kubectl) -> None:
    ns = "tables"
    kubectl.create(INSTANCE.format(name="cam-aaaaaa"), ns)
    narrow = rows(kubectl("get", "instances.akri.sh", "-n", ns).stdout)
    assert narrow[0] == ["NAME", "CONFIG", "SHARED", "NODES", "USED/CAPACITY", "AGE"]
    assert narrow[1][:5] == ["cam-aaaaaa", "cam", "true", "node-a,node-b", "1/2"]
    wide = rows(kubectl("get", "instances.akri.sh", "-n", ns, "-o", "wide").stdout)
    assert wide[0] == [*narrow[0], "CDI-NAME"]
    assert wide[1][-1] == "akri.sh/cam=cam-aaaaaa"
    everywhere = rows(kubectl("get", "instances.akri.sh", "-A").stdout)
    assert everywhere[0][:2] == ["NAMESPACE", "NAME"]  # kubectl's column, from each row's object metadata
    assert ["tables", "cam-aaaaaa"] in [r[:2] for r in everywhere[1:]]


def test_get_shows_kubectls_familiar_pod_columns(kubectl: Kubectl) -> None:
    ns = "pods"
    kubectl.create(POD.format(name="p1"), ns)
    wide = rows(kubectl("get", "pods", "-n", ns, "-o", "wide").stdout)
    assert wide[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert [wide[1][i] for i in (0, 1, 2, 3, 5, 6)] == ["p1", "1/1", "Running", "1", "10.0.0.9", "node-a"]


def test_get_o_yaml_and_jsonpath_show_the_stored_objects(kubectl: Kubectl) -> None:
    ns = "outputs"
    kubectl.create(CONFIGURATION.format(name="cam", capacity=2), ns)
    obj = yaml.safe_load(kubectl("get", "configurations.akri.sh", "cam", "-n", ns, "-o", "yaml").stdout)
    assert (obj["apiVersion"], obj["kind"], obj["spec"]["capacity"]) == ("akri.sh/v0", "Configuration", 2)
    listed = yaml.safe_load(kubectl("get", "configurations.akri.sh", "-n", ns, "-o", "yaml").stdout)
    assert [o["metadata"]["name"] for o in listed["items"]] == ["cam"]
    path = kubectl("get", "configurations.akri.sh", "-n", ns, "-o", "jsonpath={.items[*].spec.discoveryHandler.name}")
    assert path.stdout == "debugEcho"


def test_describe_shows_the_object(kubectl: Kubectl) -> None:
    ns = "describe"
    kubectl.create(CONFIGURATION.format(name="cam", capacity=3), ns)
    text = kubectl("describe", "configurations.akri.sh", "cam", "-n", ns).stdout
    assert re.search(r"^Name:\s+cam$", text, re.MULTILINE)
    assert re.search(r"^Namespace:\s+describe$", text, re.MULTILINE)
    assert re.search(r"^\s+Capacity:\s+3$", text, re.MULTILINE)


def test_create_replace_and_delete_wait(kubectl: Kubectl) -> None:
    ns = "lifecycle"
    assert (
        kubectl.create(CONFIGURATION.format(name="cam", capacity=2), ns).strip() == "configuration.akri.sh/cam created"
    )
    manifest = CONFIGURATION.format(name="cam", capacity=2)
    taken = kubectl("create", "-n", ns, "-f", "-", stdin=manifest, check=False)
    assert taken.returncode != 0
    assert "AlreadyExists" in taken.stderr or "already exists" in taken.stderr
    replaced = kubectl.replace_file(
        CONFIGURATION.format(name="cam", capacity=4), ns
    )  # no resourceVersion: kubectl reads it
    assert replaced.strip() == "configuration.akri.sh/cam replaced"
    capacity = kubectl("get", "configurations.akri.sh", "cam", "-n", ns, "-o", "jsonpath={.spec.capacity}").stdout
    assert capacity == "4"
    dry = kubectl("delete", "configurations.akri.sh", "cam", "-n", ns, "--dry-run=server").stdout
    assert "deleted (server dry run)" in dry
    gone = kubectl("delete", "configurations.akri.sh", "cam", "-n", ns, "--wait=true", "--timeout=60s")
    assert gone.stdout.strip() == 'configuration.akri.sh "cam" deleted'
    missing = kubectl("get", "configurations.akri.sh", "cam", "-n", ns, check=False)
    assert missing.returncode != 0
    assert "NotFound" in missing.stderr


def test_chunked_get_pages_five_objects_by_two(kubectl: Kubectl) -> None:
    ns = "paging"
    for i in range(5):
        kubectl.create(CONFIGURATION.format(name=f"cam-{i}", capacity=1), ns)
    done = kubectl("get", "configurations.akri.sh", "-n", ns, "--chunk-size=2", "-v=6")
    requests = [line for line in done.stderr.splitlines() if "GET" in line and "/configurations?" in line]
    assert len(requests) == 3
    assert sum("continue=" in line for line in requests) == 2
    assert [r[0] for r in rows(done.stdout)[1:]] == [f"cam-{i}" for i in range(5)]


def test_get_of_big_objects_follows_the_pages_the_servers_byte_bound_cuts(kubectl: Kubectl) -> None:
    """Ten ConfigMaps of 1 MB: the server pages by bytes (4 MiB: four objects a page) as well as by count, and
    kubectl, asking for 500 a page, follows `continue` to get them all, as a Table and as JSON."""
    ns = "big"
    documents = [
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"big-{i}"},
                "data": {"blob": str(i) * 1_000_000},
            }
        )
        for i in range(10)
    ]
    kubectl("create", "-n", ns, "-f", "-", stdin="---\n".join(documents))
    done = kubectl("get", "configmaps", "-n", ns, "-v=6")
    requests = [line for line in done.stderr.splitlines() if "GET" in line and "/configmaps?" in line]
    assert len(requests) == 3
    assert sum("continue=" in line for line in requests) == 2
    assert [r[0] for r in rows(done.stdout)[1:]] == [f"big-{i}" for i in range(10)]
    listed = json.loads(kubectl("get", "configmaps", "-n", ns, "-o", "json").stdout)
    assert [(o["metadata"]["name"], o["data"]["blob"]) for o in listed["items"]] == [
        (f"big-{i}", str(i) * 1_000_000) for i in range(10)
    ]


async def test_get_w_prints_a_row_for_each_change_made_while_it_watches(kubectl: Kubectl) -> None:
    ns = "watching"
    kubectl.create(CONFIGURATION.format(name="cam-0", capacity=1), ns)
    proc = await asyncio.create_subprocess_exec(
        kubectl.binary,
        "get",
        "configurations.akri.sh",
        "-n",
        ns,
        "-w",
        "--output-watch-events",
        "--request-timeout=60s",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=kubectl.env,
    )
    try:
        stdout = proc.stdout
        assert stdout is not None

        async def line() -> list[str]:
            raw = await asyncio.wait_for(stdout.readline(), BOUND)
            assert raw, "kubectl get -w ended early"
            return raw.decode().split()

        assert await line() == ["EVENT", "NAME", "HANDLER", "CAPACITY", "UNIQUE", "BROKERS", "AGE"]
        assert (await line())[:2] == ["ADDED", "cam-0"]
        await asyncio.to_thread(kubectl.create, CONFIGURATION.format(name="cam-1", capacity=3), ns)
        added = await line()
        assert added[:5] == ["ADDED", "cam-1", "debugEcho", "3", "true"]
        await asyncio.to_thread(kubectl, "delete", "configurations.akri.sh", "cam-1", "-n", ns)
        assert (await line())[:2] == ["DELETED", "cam-1"]
    finally:
        await stop_child(proc)


async def test_get_w_watch_only_o_yaml_with_a_selector_prints_only_matching_changes(kubectl: Kubectl) -> None:
    ns = "watching-yaml"
    kubectl.create(CONFIGURATION.format(name="cam-0", capacity=1), ns)
    proc = await asyncio.create_subprocess_exec(
        kubectl.binary,
        *("get", "configurations.akri.sh", "-n", ns, "-w", "--watch-only", "-o", "yaml", "-l", "app=cams"),
        *("--request-timeout=60s", "-v=6"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=kubectl.env,
    )
    try:
        stdout, stderr = proc.stdout, proc.stderr
        assert stdout is not None
        assert stderr is not None
        # Nothing printed marks the start of a --watch-only: its request log does (the list, then the watch from it).
        while True:
            logged = await asyncio.wait_for(stderr.readline(), BOUND)
            assert logged, "kubectl get -w ended early"
            if b"watch=true" in logged and b"200 OK" in logged:
                break
        other = CONFIGURATION.format(name="other", capacity=1).replace("app: cams", "app: dogs")
        await asyncio.to_thread(kubectl.create, other, ns)
        await asyncio.to_thread(kubectl.create, CONFIGURATION.format(name="cam-1", capacity=2), ns)
        names: list[str] = []
        while "cam-1" not in names:
            raw = await asyncio.wait_for(stdout.readline(), BOUND)
            assert raw, "kubectl get -w ended early"
            line = raw.decode().rstrip()
            if line.startswith("  name: "):
                names.append(line.removeprefix("  name: "))
        assert names == ["cam-1"]  # not cam-0 (--watch-only) nor other (the selector)
    finally:
        await stop_child(proc)
