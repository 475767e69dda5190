"""deploy/kubernetes, checked offline: every manifest a valid Kubernetes object under strict validation (Kubernetes'
own schemas from the kubernetes-validate package, a pinned version), the kustomizations complete, the CRDs exactly
what `devplace crds` generates from today's models, and the workloads wired as Akri's were: the agent's host paths and
environment, the kube store, each part under its own service account."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import typer.main
import yaml

from devplace import __version__
from devplace.cli._app import app as cli_app
from devplace.cli._crds import definitions
from devplace.kubeapi import _crds as crds
from devplace.store._kube import parse_url

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.32.0"
"""The Kubernetes version the manifests are validated against (kubernetes-validate ships 1.25 to 1.37)."""


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def manifests() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(DEPLOY.rglob("*.yaml")):
        for i, doc in enumerate(documents(path)):
            if doc.get("kind") != "Kustomization":
                yield f"{path.relative_to(DEPLOY)}#{i}:{doc['kind']}/{doc['metadata']['name']}", doc


MANIFESTS = list(manifests())
BY_KIND: dict[str, dict[str, dict[str, Any]]] = {}
for _, _doc in MANIFESTS:
    BY_KIND.setdefault(_doc["kind"], {})[_doc["metadata"]["name"]] = _doc


@pytest.mark.parametrize(("where", "doc"), MANIFESTS, ids=[where for where, _ in MANIFESTS])
def test_every_manifest_is_valid_kubernetes_in_strict_mode(where, doc):
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_manifests_are_the_parts_akri_users_replace_and_what_they_need():
    assert set(BY_KIND["DaemonSet"]) == {
        "devplace-agent",
        "devplace-gpu-handler",
        "devplace-onvif-handler",
        "devplace-udev-handler",
    }
    assert set(BY_KIND["Deployment"]) == {"devplace-controller", "devplace-scheduler"}
    assert set(BY_KIND["ServiceAccount"]) == set(BY_KIND["ClusterRole"]) == set(BY_KIND["ClusterRoleBinding"])
    assert len(BY_KIND["CustomResourceDefinition"]) == len(definitions())


def test_every_kustomization_lists_exactly_the_manifests_beside_it():
    for kustomization in sorted(DEPLOY.rglob("kustomization.yaml")):
        here = kustomization.parent
        [body] = documents(kustomization)
        listed = set(body["resources"])
        present = {p.name for p in here.glob("*.yaml") if p.name != "kustomization.yaml"}
        present |= {p.name for p in here.iterdir() if p.is_dir() and (p / "kustomization.yaml").exists()}
        assert listed == present, kustomization
    [top] = documents(DEPLOY / "kustomization.yaml")
    assert top["namespace"] == "devplace"


def test_the_crds_are_what_devplace_crds_generates_from_the_models():
    """Fails when a model changed and the CRDs did not: run `devplace crds -o deploy/kubernetes/crds`."""
    found = definitions()
    wanted = {crds.file_name(crd): crds.crd_yaml(crd) for crd in found}
    wanted["kustomization.yaml"] = crds.kustomization_yaml(found)
    present = {p.name: p.read_text() for p in (DEPLOY / "crds").iterdir()}
    stale = sorted(name for name in wanted.keys() | present.keys() if wanted.get(name) != present.get(name))
    assert stale == [], "deploy/kubernetes/crds is stale: run `devplace crds -o deploy/kubernetes/crds`"


# -- the workloads ---------------------------------------------------------------------------------------------------


def pod_spec(kind: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = BY_KIND[kind][name]["spec"]["template"]["spec"]
    return spec


WORKLOADS = [
    ("DaemonSet", "devplace-agent"),
    ("Deployment", "devplace-controller"),
    ("Deployment", "devplace-scheduler"),
]


def test_the_agent_runs_with_akris_environment_and_host_paths():
    spec = pod_spec("DaemonSet", "devplace-agent")
    [container] = spec["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["AGENT_NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["DISCOVERY_HANDLERS_DIRECTORY"]["value"] == "/var/lib/akri"
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    mounted = {m["mountPath"]: host_paths.get(m["name"]) for m in container["volumeMounts"]}
    for path in (
        "/var/lib/kubelet/device-plugins",
        "/var/lib/kubelet/pod-resources",
        "/var/lib/akri",
        "/var/lib/kubelet/plugins",  # the DRA plugin's socket (plugins/devplace.io/dra.sock)
        "/var/lib/kubelet/plugins_registry",  # where the kubelet finds DRA plugins
        "/var/run/cdi",  # CDI spec files the container runtime resolves
    ):
        assert mounted[path] == path  # the same path inside as on the host: sockets are named by it
    agent = _command(cli_app, container["args"])
    names = {name for param in agent.params for name in getattr(param, "envvar", None) or ()}
    assert "AGENT_NODE_NAME" in names  # the agent takes its node from Akri's variable, no flag needed


def test_the_gpu_handler_runs_on_gpu_nodes_with_nvidias_runtime_and_registers_where_the_agent_listens():
    spec = pod_spec("DaemonSet", "devplace-gpu-handler")
    [container] = spec["containers"]
    assert container["args"] == ["handler", "nvml"]
    handler = _command(cli_app, container["args"])
    assert handler.commands["nvml"].name == "nvml"
    assert spec["runtimeClassName"] == "nvidia"  # NVIDIA's toolkit brings libnvidia-ml and /dev/nvidia*
    assert spec["nodeSelector"]["nvidia.com/gpu.present"] == "true"
    assert spec["automountServiceAccountToken"] is False  # it never talks to the API server
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {
        "DISCOVERY_HANDLERS_DIRECTORY": "/var/lib/akri",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "NVIDIA_DRIVER_CAPABILITIES": "utility",
    }
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    mounted = {m["mountPath"]: (host_paths[m["name"]], m.get("readOnly", False)) for m in container["volumeMounts"]}
    assert mounted == {
        "/var/lib/akri": ("/var/lib/akri", False),  # the agent's registration socket, the handler's own socket
        "/etc/cdi": ("/etc/cdi", True),
        "/var/run/cdi": ("/var/run/cdi", True),
    }
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["image"] == f"devplace:{__version__}"
    [agent] = pod_spec("DaemonSet", "devplace-agent")["containers"]
    assert "--no-nvml" in agent["args"]  # GPUs come from the handler, which has NVIDIA's libraries


def test_the_onvif_handler_alone_shares_the_hosts_network_for_the_multicast_probe():
    spec = pod_spec("DaemonSet", "devplace-onvif-handler")
    [container] = spec["containers"]
    assert container["args"] == ["handler", "onvif"]
    assert _command(cli_app, container["args"]).commands["onvif"].name == "onvif"
    assert spec["hostNetwork"] is True  # WS-Discovery multicast reaches the node's LAN, not from a pod network
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["automountServiceAccountToken"] is False  # it never talks to the API server
    assert {e["name"]: e["value"] for e in container["env"]} == {"DISCOVERY_HANDLERS_DIRECTORY": "/var/lib/akri"}
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    assert {m["mountPath"]: host_paths[m["name"]] for m in container["volumeMounts"]} == {
        "/var/lib/akri": "/var/lib/akri"  # the agent's registration socket, the handler's own socket
    }
    security = container["securityContext"]
    assert (security["allowPrivilegeEscalation"], security["capabilities"]) == (False, {"drop": ["ALL"]})
    assert container["image"] == f"devplace:{__version__}"
    agent_spec = pod_spec("DaemonSet", "devplace-agent")
    [agent] = agent_spec["containers"]
    assert "--no-onvif" in agent["args"]  # cameras come from the handler on the host network
    assert not agent_spec.get("hostNetwork", False)  # the agent itself stays on the pod network


def test_the_udev_handler_reads_the_hosts_udev_database_and_dev_and_hears_udevs_events():
    spec = pod_spec("DaemonSet", "devplace-udev-handler")
    [container] = spec["containers"]
    assert container["args"] == ["handler", "udev"]
    assert _command(cli_app, container["args"]).commands["udev"].name == "udev"
    assert spec["hostNetwork"] is True  # udevd's netlink events live in the host's network namespace
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["automountServiceAccountToken"] is False  # it never talks to the API server
    assert {e["name"]: e["value"] for e in container["env"]} == {"DISCOVERY_HANDLERS_DIRECTORY": "/var/lib/akri"}
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    mounts = {m["mountPath"]: (host_paths[m["name"]], m.get("readOnly", False)) for m in container["volumeMounts"]}
    assert mounts == {
        "/var/lib/akri": ("/var/lib/akri", False),  # the agent's registration socket, the handler's own socket
        "/run/udev": ("/run/udev", True),  # the udev database: ENV{ID_*} and TAG rules (Akri's issue #476)
        "/dev": ("/dev", True),
    }
    security = container["securityContext"]
    assert (security["allowPrivilegeEscalation"], security["capabilities"]) == (False, {"drop": ["ALL"]})
    assert container["image"] == f"devplace:{__version__}"
    [agent] = pod_spec("DaemonSet", "devplace-agent")["containers"]
    assert "--no-udev" in agent["args"]  # udev devices come from the handler, which hears udev's events


def _command(app: typer.Typer, args: list[str]) -> Any:
    group = typer.main.get_command(app)
    command = group.commands[args[0]]  # type: ignore[attr-defined]
    return command


@pytest.mark.parametrize(("kind", "name"), WORKLOADS)
def test_each_part_keeps_its_objects_in_the_cluster_under_its_own_service_account(kind, name):
    spec = pod_spec(kind, name)
    [container] = spec["containers"]
    assert container["command"] == ["devplace"]
    args = container["args"]
    command = _command(cli_app, args)
    assert args[0] == name.removeprefix("devplace-")
    assert "--store" in {opt for param in command.params for opt in getattr(param, "opts", [])}
    url = args[args.index("--store") + 1]
    assert url.startswith("kube://")
    assert parse_url(url).groups == ("akri.sh",)  # Akri's Configurations and Instances: the groups rbac.yaml grants
    assert spec["serviceAccountName"] == name
    [binding] = [b for b in BY_KIND["ClusterRoleBinding"].values() if b["roleRef"]["name"] == name]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "devplace"}]
    assert BY_KIND["ServiceAccount"][name]["metadata"]["namespace"] == "devplace"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_images_follow_the_package_version():
    for kind, name in WORKLOADS:
        [container] = pod_spec(kind, name)["containers"]
        assert container["image"] == f"devplace:{__version__}"
    [top] = documents(DEPLOY / "kustomization.yaml")
    assert top["images"] == [{"name": "devplace", "newTag": __version__}]


@pytest.mark.parametrize(("kind", "name"), WORKLOADS)
def test_each_long_running_part_is_probed_on_its_metrics_endpoint(kind, name):
    [container] = pod_spec(kind, name)["containers"]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert env["DEVPLACE_METRICS_PORT"] == "8080"
    assert env["DEVPLACE_METRICS_ADDRESS"] == "0.0.0.0"  # the kubelet probes the pod's address
    assert {"name": "metrics", "containerPort": 8080} in container["ports"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    command = _command(cli_app, container["args"])
    variables = {v for param in command.params for v in (param.envvar or []) if isinstance(param.envvar, list)} | {
        param.envvar for param in command.params if isinstance(param.envvar, str)
    }
    assert {"DEVPLACE_METRICS_PORT", "DEVPLACE_METRICS_ADDRESS"} <= variables  # the command reads them


@pytest.mark.parametrize(("kind", "name"), [("DaemonSet", "devplace-agent"), ("Deployment", "devplace-controller")])
def test_on_a_real_cluster_the_agent_and_controller_serve_configurations_through_device_plugins_by_default(kind, name):
    # kube-scheduler cannot see device-plugin slots: one path per Configuration, the classic one unless annotated
    [container] = pod_spec(kind, name)["containers"]
    args = container["args"]
    assert args[args.index("--device-paths") + 1] == "device-plugins"
    command = _command(cli_app, args)
    assert "--device-paths" in {opt for param in command.params for opt in getattr(param, "opts", [])}
    header = (DEPLOY / f"{name.removeprefix('devplace-')}.yaml").read_text()
    assert "devplace.io/device-paths=dra" in header  # how to switch a Configuration to DRA
