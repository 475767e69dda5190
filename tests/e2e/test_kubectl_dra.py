"""The real kubectl against a real `devplace server` (a child process on sqlite) with the DRA kinds
(resource.k8s.io/v1): `kubectl apply -f` of the manifests NVIDIA's driver, dra-example-driver and the Kubernetes docs
publish (tests/fixtures/dra/manifests.yaml); `get` with Kubernetes' columns; `explain` from the served OpenAPI;
`describe`; and refusals: an object kube-apiserver refuses, or a hostile CEL selector, is refused naming its field
and leaves nothing stored.

kubectl runs as a subprocess with `KUBECONFIG` naming the server and `HOME` a temporary directory. kubectl validates
as it does by default (it reads the server's OpenAPI, sees `fieldValidation` and leaves validation to the server).
Everything is skipped, saying why, when no kubectl is installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_dra import FIXTURES, INVALID, MANIFESTS, expand
from tests.e2e.test_kubectl_resources import KUBECTL, Kubectl, rows
from tests.servers import anonymous_kubeconfig, spawn_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine (looked on PATH)"),
]

NAMESPACES = sorted({m["metadata"]["namespace"] for m in MANIFESTS if m["metadata"].get("namespace")})


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    root = tmp_path_factory.mktemp("kubectl-dra")
    with spawn_server(f"sqlite:///{root}/devplace.db") as base_url:
        kubeconfig = anonymous_kubeconfig(root / "kubeconfig", base_url)
        run = Kubectl(kubeconfig, root / "home")
        for namespace in NAMESPACES:
            run("create", "namespace", namespace)
        yield run


def applied_line(manifest: dict[str, Any], verb: str) -> str:
    """kubectl apply's line for one manifest: `deviceclass.resource.k8s.io/<name> created`, `pod/<name> created`."""
    kind = manifest["kind"].lower()
    group = manifest["apiVersion"].rpartition("/")[0]
    return (
        f"{kind}.{group}/{manifest['metadata']['name']} {verb}"
        if group
        else f"{kind}/{manifest['metadata']['name']} {verb}"
    )


@pytest.fixture(scope="module")
def applied(kubectl: Kubectl) -> Kubectl:
    done = kubectl("apply", "-f", str(FIXTURES / "manifests.yaml"))
    assert done.stdout.splitlines() == [applied_line(m, "created") for m in MANIFESTS]
    return kubectl


def test_kubectl_apply_creates_every_published_manifest_and_a_second_apply_changes_nothing(applied: Kubectl) -> None:
    again = applied("apply", "-f", str(FIXTURES / "manifests.yaml")).stdout.splitlines()
    assert again == [applied_line(m, "unchanged") for m in MANIFESTS]
    stored = json.loads(applied("get", "resourceslices", "cat-slice", "-o", "json").stdout)
    assert stored["spec"] == next(m for m in MANIFESTS if m["kind"] == "ResourceSlice")["spec"]


@pytest.mark.parametrize(
    ("resource", "namespace", "header", "first_row"),
    [
        ("deviceclasses", None, ["NAME", "AGE"], ["gpu.example.com"]),
        ("resourceslices", None, ["NAME", "NODE", "DRIVER", "POOL", "AGE"], ["cat-slice", "<none>"]),
        ("resourceclaims", "default", ["NAME", "STATE", "AGE"], ["example-resource-claim", "pending"]),
        ("resourceclaimtemplates", "cel-selector", ["NAME", "AGE"], ["single-gpu-cel"]),
    ],
)
def test_kubectl_get_shows_kubernetes_columns(
    applied: Kubectl, resource: str, namespace: str | None, header: list[str], first_row: list[str]
) -> None:
    table = rows(applied("get", resource, *(["-n", namespace] if namespace else [])).stdout)
    assert table[0] == header
    assert table[1][: len(first_row)] == first_row
    if resource == "resourceslices":
        assert table[1][2:4] == ["resource-driver.example.com", "black-cat-pool"]


def test_kubectl_explain_prints_the_described_fields_of_the_dra_kinds(kubectl: Kubectl) -> None:
    spec = kubectl("explain", "deviceclass.spec").stdout
    assert re.search(r"^KIND:\s+DeviceClass$", spec, re.MULTILINE)
    for field in ("config", "extendedResourceName", "selectors"):
        assert re.search(rf"^  {field}\t<", spec, re.MULTILINE), spec
    assert "<no description>" not in spec
    requests = kubectl("explain", "resourceclaim.spec.devices.requests").stdout
    assert re.search(r"^FIELD: requests <\[\]Object>$", requests, re.MULTILINE)
    for field in ("exactly", "firstAvailable", "name"):
        assert re.search(rf"^  {field}\t<", requests, re.MULTILINE), requests
    assert "<no description>" not in requests
    selector = kubectl("explain", "resourceslice.spec.nodeSelector").stdout
    assert "nodeSelectorTerms" in selector  # Kubernetes' NodeSelector, not an opaque map


def test_kubectl_describe_shows_a_claim_and_a_class(applied: Kubectl) -> None:
    claim = applied("describe", "resourceclaim", "example-resource-claim", "-n", "default").stdout
    assert re.search(r"^Name:\s+example-resource-claim$", claim, re.MULTILINE)
    assert re.search(r"^Kind:\s+ResourceClaim$", claim, re.MULTILINE)
    assert re.search(r"^\s+Device Class Name:\s+resource.example.com$", claim, re.MULTILINE)
    device_class = applied("describe", "deviceclass", "gpu.nvidia.com").stdout
    assert re.search(r"^\s+Extended Resource Name:\s+nvidia.com/gpu$", device_class, re.MULTILINE)


REFUSED = [c for c in INVALID if c["object"]["kind"] != "Pod"]


@pytest.mark.parametrize("case", REFUSED, ids=[c["name"] for c in REFUSED])
def test_kubectl_apply_of_what_kube_apiserver_refuses_names_the_field_and_stores_nothing(
    kubectl: Kubectl, case: dict[str, Any], tmp_path: Path
) -> None:
    obj = expand(case["object"])
    path = tmp_path / "object.json"
    path.write_text(json.dumps(obj))
    done = kubectl("apply", "-f", str(path), check=False)
    assert done.returncode != 0
    assert str(case["path"]) in done.stderr, done.stderr
    missing = kubectl("get", obj["kind"].lower(), obj["metadata"]["name"], check=False)
    assert "NotFound" in missing.stderr


def test_kubectl_apply_of_a_hostile_selector_is_refused_naming_the_expression(kubectl: Kubectl) -> None:
    deep = "(" * 5000 + "true" + ")" * 5000
    manifest = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "hostile"},
        "spec": {"selectors": [{"cel": {"expression": deep}}]},
    }
    done = kubectl("apply", "-f", "-", stdin=json.dumps(manifest), check=False)
    assert done.returncode != 0
    assert "spec.selectors[0].cel.expression" in done.stderr
    assert "((((" in done.stderr
    assert "NotFound" in kubectl("get", "deviceclass", "hostile", check=False).stderr
