"""kubectl 1.27 to 1.33, as a new user runs it against `devplace server` (issue #22, section 1): each test is a habit
that failed before and now works unchanged. One server (a child process on sqlite) serves the module; each test
works in its own namespace. Skipped, saying why, where a kubectl binary is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.e2e.kubeclients import KUBECTL, KUBECTLS, MINORS, Kubectl, kubeconfig, kubectl_minor

__all__ = ["kubeconfig"]  # the module's server fixture

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine (looked on PATH)"),
]

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "akri-samples"
AKRI_CONFIGURATION = """\
apiVersion: akri.sh/v0
kind: Configuration
metadata: {name: akri-cam}
spec: {discoveryHandler: {name: debugEcho}, capacity: 1}
"""
OUR_CONFIGURATION = AKRI_CONFIGURATION.replace("akri.sh/v0", "devplace.io/v1alpha1").replace("akri-cam", "our-cam")
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: waiting}
spec:
  containers: [{name: main, image: busybox:1.36}]
"""


@pytest.fixture(scope="module")
def kubectl(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    assert KUBECTL is not None
    return Kubectl(KUBECTL, kubeconfig, tmp_path_factory.mktemp("home"))


def versioned(minor: int, kubeconfig: Path, home: Path) -> Kubectl:
    return Kubectl(KUBECTLS[minor], kubeconfig, home / f"1.{minor}")


@pytest.mark.parametrize("minor", [31, 32, 33])
def test_kubectl_within_one_minor_of_the_served_level_prints_no_skew_warning(
    minor: int, kubeconfig: Path, tmp_path: Path
) -> None:
    if minor not in KUBECTLS:
        pytest.skip(f"kubectl.1.{minor} is not installed")
    done = versioned(minor, kubeconfig, tmp_path)("version")
    assert "Server Version: v1.32.0+devplace." in done.stdout
    assert "skew" not in done.stderr + done.stdout


def test_readyz_and_livez_answer_with_their_checks(kubectl: Kubectl) -> None:
    assert kubectl("get", "--raw", "/readyz").stdout == "ok"
    assert kubectl("get", "--raw", "/livez").stdout == "ok"
    verbose = kubectl("get", "--raw", "/readyz?verbose").stdout.splitlines()
    assert verbose == ["[+]ping ok", "[+]store ok", "readyz check passed"]


def test_a_pod_created_without_a_status_is_pending(kubectl: Kubectl) -> None:
    kubectl("create", "-n", "pending", "-f", "-", stdin=POD)
    assert kubectl("get", "pod", "waiting", "-n", "pending", "-o", "jsonpath={.status.phase}").stdout == "Pending"


@pytest.mark.parametrize("minor", MINORS)
def test_server_side_apply_after_a_client_side_apply_of_a_changed_object_succeeds(
    minor: int, kubeconfig: Path, tmp_path: Path
) -> None:
    kubectl = versioned(minor, kubeconfig, tmp_path)
    ns = f"ssa-{minor}"
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: '%s'}\n"
    kubectl("apply", "-n", ns, "-f", "-", stdin=manifest % 1)
    done = kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=manifest % 2)
    assert "serverside-applied" in done.stdout
    kubectl("apply", "-n", ns, "-f", "-", stdin=manifest % 3)  # and back to client-side apply
    got = yaml.safe_load(kubectl("get", "cm", "settings", "-n", ns, "-o", "yaml").stdout)
    assert got["data"] == {"a": "3"}


@pytest.mark.parametrize("minor", MINORS)
def test_auth_can_i_answers_from_devplaces_rules(minor: int, kubeconfig: Path, tmp_path: Path) -> None:
    kubectl = versioned(minor, kubeconfig, tmp_path)
    done = kubectl("auth", "can-i", "create", "configurations.akri.sh", "-n", "x")
    assert done.stdout.strip() == "yes"


def test_namespaces_are_created_listed_and_deleted_with_their_objects(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "team")
    kubectl("create", "configmap", "settings", "-n", "team", "--from-literal=a=b")
    kubectl("create", "-n", "team", "-f", "-", stdin=AKRI_CONFIGURATION)
    rows = [line.split()[:2] for line in kubectl("get", "ns").stdout.splitlines()]
    assert ["default", "Active"] in rows
    assert ["team", "Active"] in rows
    assert 'namespace "team" deleted' in kubectl("delete", "namespace", "team").stdout
    assert "team" not in kubectl("get", "ns", "-o", "name").stdout
    assert kubectl("get", "configmaps,configurations.akri.sh", "-n", "team", "-o", "name").stdout == ""


def test_events_are_listed_and_described_with_their_object(kubectl: Kubectl) -> None:
    ns = "events"
    kubectl("create", "configmap", "settings", "-n", ns, "--from-literal=a=b")
    uid = kubectl("get", "cm", "settings", "-n", ns, "-o", "jsonpath={.metadata.uid}").stdout
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "settings.1"},
        "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings", "namespace": ns, "uid": uid},
        "reason": "Checked",
        "message": "the settings were read",
        "type": "Normal",
        "source": {"component": "tester"},
        "count": 1,
    }
    kubectl("create", "-n", ns, "-f", "-", stdin=yaml.safe_dump(event))
    listed = kubectl("get", "events", "-n", ns).stdout.splitlines()
    assert listed[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert listed[1].split()[1:] == ["Normal", "Checked", "configmap/settings", "the", "settings", "were", "read"]
    new_api = kubectl("get", "events.events.k8s.io", "-n", ns, "-o", "jsonpath={.items[0].note}").stdout
    assert new_api == "the settings were read"
    described = kubectl("describe", "configmap", "settings", "-n", ns).stdout
    assert "Checked" in described
    assert "the settings were read" in described


def test_akris_rbac_and_samples_apply_whole_and_list(kubectl: Kubectl) -> None:
    for sample in sorted(SAMPLES.glob("*.yaml")):
        kubectl("apply", "-f", str(sample))
    names = kubectl("get", "serviceaccounts,clusterroles,clusterrolebindings", "-o", "name").stdout.split()
    assert {
        "serviceaccount/akri-agent-sa",
        "serviceaccount/akri-controller-sa",
        "clusterrole.rbac.authorization.k8s.io/akri-agent-role",
        "clusterrole.rbac.authorization.k8s.io/akri-controller-role",
        "clusterrolebinding.rbac.authorization.k8s.io/akri-agent-binding",
        "clusterrolebinding.rbac.authorization.k8s.io/akri-controller-binding",
    } <= set(names)
    deployments = kubectl("get", "deployments,services", "-o", "name").stdout.split()
    assert {"deployment.apps/anomaly-detection-app", "service/akri-video-streaming-app"} <= set(deployments)


def test_each_group_lists_only_its_own_configurations_and_short_names_are_unambiguous(kubectl: Kubectl) -> None:
    ns = "groups"
    kubectl("create", "-n", ns, "-f", "-", stdin=AKRI_CONFIGURATION)
    kubectl("create", "-n", ns, "-f", "-", stdin=OUR_CONFIGURATION)
    akri = kubectl("get", "akric", "-n", ns, "-o", "name")
    assert akri.stdout.split() == ["configuration.akri.sh/akri-cam"]
    assert "could also match" not in akri.stderr
    ours = kubectl("get", "configurations.devplace.io", "-n", ns, "-o", "name").stdout.split()
    assert ours == ["configuration.devplace.io/our-cam"]
    instances = kubectl("get", "akrii", "-n", ns)
    assert "Warning" not in instances.stderr


def test_api_resources_lists_the_self_reviews_and_the_rbac_kinds(kubectl: Kubectl) -> None:
    names = {line.split()[0] for line in kubectl("api-resources", "--no-headers").stdout.splitlines()}
    assert {"selfsubjectaccessreviews", "namespaces", "events", "roles", "clusterrolebindings"} <= names


@kubectl_minor(27)
def test_kubectl_127_auth_whoami_is_answered(kubeconfig: Path, tmp_path: Path) -> None:
    done = versioned(27, kubeconfig, tmp_path)("auth", "whoami")
    assert "system:anonymous" in done.stdout


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: main, image: nginx:1.27}]
"""
NO_CONTROLLER = "devplace runs no Deployment controller"


@pytest.mark.parametrize("minor", [None, 28])
def test_rollout_status_of_a_deployment_ends_at_once_saying_it_cannot_progress(
    minor: int | None, kubectl: Kubectl, kubeconfig: Path, tmp_path: Path
) -> None:
    if minor is not None and minor not in KUBECTLS:
        pytest.skip(f"kubectl.1.{minor} is not installed")
    client = kubectl if minor is None else versioned(minor, kubeconfig, tmp_path)
    ns = f"rollout-{minor or 'default'}"
    client("apply", "-n", ns, "-f", "-", stdin=DEPLOYMENT)
    for _ in range(2):  # as created, then after a spec change (a new generation)
        done = client("rollout", "status", "deploy/web", "-n", ns, "--timeout=10s", check=False)
        assert (done.returncode, done.stderr) == (1, 'error: deployment "web" exceeded its progress deadline\n')
        client("scale", "deploy/web", "-n", ns, "--replicas=3")
    described = client("describe", "deploy", "web", "-n", ns).stdout
    assert "Progressing   False   ProgressDeadlineExceeded" in described
    assert "3 desired | 0 updated | 0 total | 0 available | 0 unavailable" in described
    assert NO_CONTROLLER in described  # the Event that tells it (describe shows no condition messages)


@pytest.mark.parametrize("minor", [None, 28])
def test_applying_an_invalid_object_names_it_and_the_field(
    minor: int | None, kubectl: Kubectl, kubeconfig: Path, tmp_path: Path
) -> None:
    if minor is not None and minor not in KUBECTLS:
        pytest.skip(f"kubectl.1.{minor} is not installed")
    client = kubectl if minor is None else versioned(minor, kubeconfig, tmp_path)
    invalid = AKRI_CONFIGURATION.replace("capacity: 1", "capacity: 0")
    done = client("apply", "-n", f"invalid-{minor or 'default'}", "-f", "-", stdin=invalid, check=False)
    assert (done.returncode, done.stderr) == (
        1,
        'The Configuration "akri-cam" is invalid: spec.capacity: Input should be greater than or equal to 1\n',
    )
