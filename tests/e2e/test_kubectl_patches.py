"""The real kubectl against a real `devplace server` (a child process on sqlite): every command that PATCHes.

`kubectl patch --type merge|json|strategic`, `label`, `annotate`, `apply` (client-side, then a change: a three-way
strategic merge patch), `apply --server-side` (twice, a conflict from a second `--field-manager`, then
`--force-conflicts`), `edit` with `KUBE_EDITOR` set to a script that edits the file, `scale` (a merge patch of the
Deployment's /scale) and `diff` (server-side dry-run patches: nothing is stored).

kubectl runs as a subprocess with `KUBECONFIG` naming the server and `HOME` set to a temporary directory (its
discovery cache never touches ~/.kube). One server serves the module; each test works in its own namespace.
Everything is skipped, saying why, when no kubectl is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.servers import anonymous_kubeconfig, spawn_server

KUBECTL = "/usr/bin/kubectl" if os.access("/usr/bin/kubectl", os.X_OK) else shutil.which("kubectl")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (not at /usr/bin/kubectl nor on PATH)"),
]

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {{app: web}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: web
        image: {image}
        env: [{{name: A, value: "1"}}]
        ports: [{{containerPort: 80}}]
"""

CONFIGURATION = """\
apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: cam
spec:
  discoveryHandler: {{name: debugEcho}}
  capacity: {capacity}
"""


class Kubectl:
    """Runs the machine's kubectl with only the environment a user of the kubeconfig would have."""

    def __init__(self, kubeconfig: Path, home: Path) -> None:
        assert KUBECTL is not None
        self.binary = KUBECTL
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "KUBECONFIG": str(kubeconfig)}

    def __call__(
        self, *args: str, stdin: str | None = None, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.binary, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**self.env, **(env or {})},
            timeout=90,
            check=False,
        )
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)} failed:\n{done.stderr}{done.stdout}"
        return done

    def get(self, resource: str, namespace: str) -> dict[str, Any]:
        out = self("get", resource, "-n", namespace, "-o", "yaml", "--show-managed-fields").stdout
        obj: dict[str, Any] = yaml.safe_load(out)
        return obj


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    root = tmp_path_factory.mktemp("kubectl-patches")
    with spawn_server(f"sqlite:///{root}/devplace.db") as base_url:
        kubeconfig = anonymous_kubeconfig(root / "kubeconfig", base_url)
        yield Kubectl(kubeconfig, root / "home")


def deployment(kubectl: Kubectl, ns: str, *, replicas: int = 1, image: str = "nginx:1") -> None:
    manifest = DEPLOYMENT.format(replicas=replicas, image=image)
    assert kubectl("apply", "-n", ns, "-f", "-", stdin=manifest).stdout.strip() == "deployment.apps/web created"


def managers(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields", [])}


def test_patch_of_every_type(kubectl: Kubectl) -> None:
    ns = "patch-types"
    deployment(kubectl, ns)
    merged = kubectl("patch", "deployment", "web", "-n", ns, "--type", "merge", "-p", '{"spec":{"replicas":2}}')
    assert merged.stdout.strip() == "deployment.apps/web patched"
    ops = '[{"op":"test","path":"/spec/replicas","value":2},{"op":"replace","path":"/spec/replicas","value":3}]'
    kubectl("patch", "deployment", "web", "-n", ns, "--type", "json", "-p", ops)
    env = '{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"B","value":"2"}]}]}}}}'
    kubectl("patch", "deployment", "web", "-n", ns, "--type", "strategic", "-p", env)
    obj = kubectl.get("deployment/web", ns)
    assert obj["spec"]["replicas"] == 3
    [container] = obj["spec"]["template"]["spec"]["containers"]
    assert (container["image"], [e["name"] for e in container["env"]]) == ("nginx:1", ["B", "A"])
    assert ("kubectl-patch", "Update") in managers(obj)
    unchanged = kubectl("patch", "deployment", "web", "-n", ns, "--type", "merge", "-p", '{"spec":{"replicas":3}}')
    assert unchanged.stdout.strip() == "deployment.apps/web patched (no change)"


def test_patch_refusals_come_back_as_kubectl_reports_them(kubectl: Kubectl) -> None:
    ns = "patch-refusals"
    deployment(kubectl, ns)
    failing = '[{"op":"test","path":"/spec/replicas","value":9}]'
    tested = kubectl("patch", "deployment", "web", "-n", ns, "--type", "json", "-p", failing, check=False)
    assert tested.returncode != 0
    assert "test failed" in tested.stderr
    kubectl("apply", "-n", ns, "-f", "-", stdin=CONFIGURATION.format(capacity=2))
    strategic = kubectl(
        "patch", "configurations.akri.sh", "cam", "-n", ns, "-p", '{"spec":{"capacity":3}}', check=False
    )
    assert strategic.returncode != 0
    assert "application/merge-patch+json" in strategic.stderr  # the 415's list of what the kind accepts
    invalid = kubectl(
        "patch",
        "configurations.akri.sh",
        "cam",
        "-n",
        ns,
        "--type",
        "merge",
        "-p",
        '{"spec":{"capacity":0}}',
        check=False,
    )
    assert invalid.returncode != 0
    assert "spec.capacity" in invalid.stderr


def test_label_and_annotate(kubectl: Kubectl) -> None:
    ns = "labels"
    kubectl("apply", "-n", ns, "-f", "-", stdin=CONFIGURATION.format(capacity=2))
    assert kubectl("label", "configurations.akri.sh", "cam", "-n", ns, "tier=front").stdout.strip() == (
        "configuration.akri.sh/cam labeled"
    )
    kubectl("label", "configurations.akri.sh", "cam", "-n", ns, "tier=back", "--overwrite")
    kubectl("annotate", "configurations.akri.sh", "cam", "-n", ns, "note=hi")
    obj = kubectl.get("configurations.akri.sh/cam", ns)
    assert obj["metadata"]["labels"] == {"tier": "back"}
    assert obj["metadata"]["annotations"]["note"] == "hi"
    assert {("kubectl-label", "Update"), ("kubectl-annotate", "Update")} <= managers(obj)
    kubectl("label", "configurations.akri.sh", "cam", "-n", ns, "tier-")
    assert not kubectl.get("configurations.akri.sh/cam", ns)["metadata"].get("labels")


def test_client_side_apply_of_a_change_patches_three_ways(kubectl: Kubectl) -> None:
    ns = "client-apply"
    deployment(kubectl, ns)
    manifest = DEPLOYMENT.format(replicas=2, image="nginx:2")
    assert kubectl("apply", "-n", ns, "-f", "-", stdin=manifest).stdout.strip() == "deployment.apps/web configured"
    obj = kubectl.get("deployment/web", ns)
    assert (obj["spec"]["replicas"], obj["spec"]["template"]["spec"]["containers"][0]["image"]) == (2, "nginx:2")
    assert ("kubectl-client-side-apply", "Update") in managers(obj)
    again = kubectl("apply", "-n", ns, "-f", "-", stdin=manifest)
    assert again.stdout.strip() == "deployment.apps/web unchanged"


def test_server_side_apply_twice_a_conflict_then_force(kubectl: Kubectl) -> None:
    ns = "server-apply"
    manifest = DEPLOYMENT.format(replicas=1, image="nginx:1")
    first = kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=manifest)
    assert first.stdout.strip() == "deployment.apps/web serverside-applied"
    rv = kubectl.get("deployment/web", ns)["metadata"]["resourceVersion"]
    kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=manifest)
    assert kubectl.get("deployment/web", ns)["metadata"]["resourceVersion"] == rv  # nothing changed
    scaled = DEPLOYMENT.format(replicas=4, image="nginx:1")
    conflict = kubectl("apply", "--server-side", "--field-manager=ci", "-n", ns, "-f", "-", stdin=scaled, check=False)
    assert conflict.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas' in conflict.stderr
    forced = ["apply", "--server-side", "--field-manager=ci", "--force-conflicts", "-n", ns, "-f", "-"]
    kubectl(*forced, stdin=scaled)
    obj = kubectl.get("deployment/web", ns)
    assert obj["spec"]["replicas"] == 4
    entries = {e["manager"]: e for e in obj["metadata"]["managedFields"]}
    assert entries["ci"]["operation"] == "Apply"
    assert "f:replicas" in entries["ci"]["fieldsV1"]["f:spec"]
    assert "f:replicas" not in entries["kubectl"]["fieldsV1"]["f:spec"]


def test_edit_with_an_editor_script(kubectl: Kubectl) -> None:
    ns = "edit"
    deployment(kubectl, ns)
    editor = kubectl.home / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/image: nginx:1/image: nginx:3/' \"$1\"\n")
    editor.chmod(0o755)
    edited = kubectl("edit", "deployment", "web", "-n", ns, env={"KUBE_EDITOR": str(editor)})
    assert edited.stdout.strip() == "deployment.apps/web edited"
    obj = kubectl.get("deployment/web", ns)
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:3"
    assert ("kubectl-edit", "Update") in managers(obj)


def test_scale_a_deployment(kubectl: Kubectl) -> None:
    ns = "scale"
    deployment(kubectl, ns)
    assert (
        kubectl("scale", "deployment", "web", "-n", ns, "--replicas=5").stdout.strip() == "deployment.apps/web scaled"
    )
    obj = kubectl.get("deployment/web", ns)
    assert obj["spec"]["replicas"] == 5
    assert any(e.get("subresource") == "scale" for e in obj["metadata"]["managedFields"])


def test_diff_shows_a_change_and_stores_nothing(kubectl: Kubectl) -> None:
    ns = "diff"
    deployment(kubectl, ns)
    before = kubectl.get("deployment/web", ns)
    same = kubectl("diff", "-n", ns, "-f", "-", stdin=DEPLOYMENT.format(replicas=1, image="nginx:1"), check=False)
    assert (same.returncode, same.stdout) == (0, "")
    changed = kubectl("diff", "-n", ns, "-f", "-", stdin=DEPLOYMENT.format(replicas=1, image="nginx:9"), check=False)
    assert changed.returncode == 1, changed.stderr
    diff_lines = [line for line in changed.stdout.splitlines() if line.startswith(("-", "+")) and "  " in line]
    # the image, and the generation a spec change bumps (a dry run answers it as Kubernetes does)
    assert sorted(line.split() for line in diff_lines) == [
        ["+", "generation:", "2"],
        ["+", "image:", "nginx:9"],
        ["-", "generation:", "1"],
        ["-", "image:", "nginx:1"],
    ]
    server = ["diff", "--server-side", "--force-conflicts", "-n", ns, "-f", "-"]  # the image is kubectl apply's
    assert kubectl(*server, stdin=DEPLOYMENT.format(replicas=1, image="nginx:9"), check=False).returncode == 1
    assert kubectl.get("deployment/web", ns) == before
