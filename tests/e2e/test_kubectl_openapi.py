"""The real kubectl against a real `devplace server` (a child process on sqlite): discovery, OpenAPI and the
kubeconfig the server writes for itself.

kubectl runs as a subprocess with `KUBECONFIG` set to the file `devplace server --write-kubeconfig` wrote and `HOME`
set to a temporary directory (so its discovery and HTTP caches never touch ~/.kube). Without flags, `kubectl apply`
downloads /openapi/v3 to learn that the server validates fields (and then sends `fieldValidation=Strict`);
`kubectl explain` reads the same documents, `--output=plaintext-openapiv2` the v2 protobuf.

The machine's `kubectl` is used; `kubectl.1.<minor>` binaries beside it (Google Cloud SDK ships 1.27 to 1.33) are
checked for apply and explain too. Everything is skipped, saying why, when no kubectl is installed.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.kubeclients import Kubectl
from tests.servers import spawn_server

KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine (looked on PATH)"),
]

CONFIGURATION = """\
apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: {name}
spec:
  discoveryHandler:
    name: debugEcho
    discoveryDetails: |
      descriptions: ["a"]
  capacity: 2
  brokerSpec:
    brokerPodSpec:
      containers:
      - name: broker
        image: busybox:1.36
        resources:
          limits:
            "{{{{PLACEHOLDER}}}}": "1"
"""


def _versioned_kubectls() -> list[str]:
    """`kubectl.1.<minor>` beside the kubectl on PATH (or behind its symlink), oldest first."""
    if KUBECTL is None:
        return []
    found: dict[str, str] = {}
    for directory in {Path(KUBECTL).parent, Path(os.path.realpath(KUBECTL)).parent}:
        for path in directory.glob("kubectl.1.*"):
            if re.fullmatch(r"kubectl\.1\.\d+", path.name) and os.access(path, os.X_OK):
                found.setdefault(path.name, str(path))
    return [found[name] for name in sorted(found, key=lambda n: int(n.rsplit(".", 1)[1]))]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A `devplace server` on sqlite that wrote its kubeconfig; yields the kubeconfig's path."""
    directory = tmp_path_factory.mktemp("kubectl")
    kubeconfig = directory / "kubeconfig"
    with spawn_server(f"sqlite:///{directory}/devplace.db", extra_args=("--write-kubeconfig", str(kubeconfig))):
        yield kubeconfig


@pytest.fixture(scope="module")
def kubectl(server: Path, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    assert KUBECTL is not None
    return Kubectl(KUBECTL, server, tmp_path_factory.mktemp("home"))


def test_the_written_kubeconfig_alone_takes_kubectl_to_the_server(kubectl: Kubectl, server: Path) -> None:
    assert kubectl("config", "current-context").stdout.strip() == "devplace"
    done = kubectl("get", "instances")
    assert "No resources found in default namespace." in done.stderr
    config = yaml.safe_load(server.read_text())
    assert config["clusters"][0]["cluster"]["server"].startswith("http://127.0.0.1:")


def test_apply_without_flags_validates_on_the_server_and_creates(kubectl: Kubectl) -> None:
    done = kubectl("apply", "-f", "-", "-v=6", stdin=CONFIGURATION.format(name="cam"))
    assert "configuration.akri.sh/cam created" in done.stdout
    assert "GET http://127.0.0.1:" in done.stderr
    assert "/openapi/v3/apis/akri.sh/v0?hash=" in done.stderr  # where kubectl learnt that the server validates
    got = yaml.safe_load(kubectl("get", "configurations.akri.sh", "cam", "-o", "yaml").stdout)
    assert got["spec"]["capacity"] == 2
    assert "kubectl.kubernetes.io/last-applied-configuration" in got["metadata"]["annotations"]


def test_a_manifest_with_an_unknown_field_is_refused_naming_the_field(kubectl: Kubectl) -> None:
    manifest = CONFIGURATION.format(name="typo").replace("  capacity: 2", "  capacityy: 2")
    done = kubectl("apply", "-f", "-", stdin=manifest, check=False)
    assert done.returncode != 0
    assert "spec.capacityy" in done.stderr
    assert "error validating data" not in done.stderr  # the server refused it (kubectl left validation to it)
    missing = kubectl("get", "configurations.akri.sh", "typo", check=False)
    assert "NotFound" in missing.stderr


POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: c
    image: busybox:1.36
"""


def test_a_built_in_kind_is_validated_by_kubectl_against_kubernetes_schema(kubectl: Kubectl) -> None:
    """The server stores a Pod with any extra field, so its OpenAPI offers no fieldValidation for Pods and kubectl
    validates them itself, from the v2 protobuf document (Kubernetes' own Pod schema)."""
    assert "pod/ok created" in kubectl("apply", "-f", "-", stdin=POD.format(name="ok")).stdout
    refused = kubectl("apply", "-f", "-", stdin=POD.format(name="typo") + "    imagePullPolice: Always\n", check=False)
    assert refused.returncode != 0
    assert "error validating data" in refused.stderr  # refused by kubectl, before any write
    assert 'unknown field "imagePullPolice" in io.k8s.api.core.v1.Container' in refused.stderr
    assert "NotFound" in kubectl("get", "pod", "typo", check=False).stderr


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("configurations.spec.brokerSpec", ["exactly one of brokerPodSpec", "brokerJobSpec", "brokerPodSpec"]),
        ("configurations.spec.brokerSpec.brokerPodSpec.containers", ["imagePullPolicy"]),
        ("instances.spec", ["deviceUsage", "held through the", "configurationName"]),
        ("resourceclasses", ["KIND: ResourceClass", "selects devices", "Which devices the class selects"]),
        ("akric.spec.capacity", ["How many workloads may use each discovered device"]),
    ],
)
def test_explain_prints_the_field_docs(kubectl: Kubectl, field: str, expected: list[str]) -> None:
    text = " ".join(kubectl("explain", field).stdout.split())  # explain wraps lines
    for phrase in expected:
        assert phrase in text, text


def test_explain_from_the_v2_protobuf_document(kubectl: Kubectl) -> None:
    text = " ".join(kubectl("explain", "configurations.spec.brokerSpec", "--output=plaintext-openapiv2").stdout.split())
    assert "RESOURCE: brokerSpec <Object>" in text
    assert "exactly one of brokerPodSpec or brokerJobSpec" in text


def test_api_resources_lists_short_names_and_categories_resolve(kubectl: Kubectl) -> None:
    lines = kubectl("api-resources", "--api-group=akri.sh").stdout.splitlines()
    rows = {tuple(line.split()[:2]) for line in lines[1:]}
    assert {("configurations", "akric"), ("instances", "akrii")} <= rows
    kubectl("apply", "-f", "-", stdin=CONFIGURATION.format(name="short"))
    assert "short" in kubectl("get", "akric", "short", "-o", "name").stdout
    assert "short" in kubectl("get", "akri", "-o", "name").stdout  # the akri category


@pytest.mark.parametrize("binary", _versioned_kubectls(), ids=lambda b: Path(b).name)
def test_other_kubectl_versions_apply_refuse_and_explain(
    binary: str, server: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    run = Kubectl(binary, server, tmp_path_factory.mktemp("home"))
    name = "cam-" + Path(binary).name.rsplit(".", 2)[-1]
    assert (
        f"configuration.akri.sh/{name} created" in run("apply", "-f", "-", stdin=CONFIGURATION.format(name=name)).stdout
    )
    refused = run(
        "apply", "-f", "-", stdin=CONFIGURATION.format(name=name + "-x").replace("capacity:", "capacityy:"), check=False
    )
    assert refused.returncode != 0
    assert "spec.capacityy" in refused.stderr
    text = " ".join(run("explain", "configurations.spec.brokerSpec").stdout.split())
    assert "exactly one of brokerPodSpec or brokerJobSpec" in text
    pod = run("apply", "-f", "-", stdin=POD.format(name=name) + "    imagePullPolice: Always\n", check=False)
    assert 'unknown field "imagePullPolice"' in pod.stderr
