"""Sample Kubernetes workloads and seed 004's intents, shared by the placement, server and CLI tests."""

from __future__ import annotations

import copy
import io
import tarfile
from typing import Any

import yaml

from devplace.api._quantity import Quantity
from devplace.placement import _levels as levels
from devplace.placement._hpa import Requirement

Obj = dict[str, Any]


def pod_template(name: str, *containers: str) -> Obj:
    return {
        "metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": c, "image": f"registry.example/{c}:1"} for c in containers]},
    }


def workload(kind: str, name: str, *containers: str, replicas: int | None = None) -> Obj:
    """A minimal valid Deployment, StatefulSet, DaemonSet, Job or Pod."""
    if kind == "Pod":
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": pod_template(name, *containers)["spec"],
        }
    spec: Obj = {"template": pod_template(name, *containers)}
    if kind == "Job":
        spec["template"]["spec"]["restartPolicy"] = "Never"
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}
    spec["selector"] = {"matchLabels": {"app": name}}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


FWALL_MANIFESTS = [
    workload("StatefulSet", "core-fwall", "palo-alto-e3000"),
    workload("Deployment", "api-server", "nginx"),
]
ANALYTICS_MANIFESTS = [workload("StatefulSet", "ai-model", "openvino"), workload("Deployment", "logger", "logger")]

# Seed 004's usage example, as written (intent -> consumers -> requirements).
SEED_INTENTS: list[tuple[Obj, list[tuple[Obj, list[Obj]]]]] = [
    (
        {
            "metadata": {
                "name": "fwall-hpa-intent",
                "description": "Assign resurces to core-fwall and api-server",
                "userData1": "foo",
                "userData2": "bar",
            },
            "spec": {"app": "fwall"},
        },
        [
            (
                {
                    "metadata": {"name": "core-fwall", "description": "core-fwall microservice"},
                    "spec": {
                        "consumer": {
                            "apiVersion": "apps/v1",
                            "kind": "StatefulSet",
                            "name": "core-fwall",
                            "container-name": "palo-alto-e3000",
                        }
                    },
                },
                [
                    {
                        "metadata": {"name": "core-fwall-cpu-requirement"},
                        "spec": {"mandatory": True, "allocatable": True, "name": "cpu", "requests": 4, "limits": 4},
                    },
                    {
                        "metadata": {"name": "core-fwall-RAM-needs"},
                        "spec": {
                            "mandatory": True,
                            "allocatable": True,
                            "name": "memory",
                            "requests": 1000,
                            "limits": 1000,
                            "units": "MB",
                        },
                    },
                    {
                        "metadata": {"name": "core-fwall-gpu-needs"},
                        "spec": {
                            "mandatory": False,
                            "weight": 9,
                            "allocatable": True,
                            "name": "nvidia.com/gpu",
                            "limits": 1,
                        },
                    },
                ],
            ),
            (
                {
                    "metadata": {"name": "api-server", "description": "api-server microservice"},
                    "spec": {
                        "consumer": {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": "api-server",
                            "container-name": "nginx",
                        }
                    },
                },
                [
                    {
                        "metadata": {"name": "api-server-cpu-needs"},
                        "spec": {"mandatory": True, "allocatable": True, "name": "cpu", "requests": 1, "limits": 2},
                    },
                    {
                        "metadata": {"name": "api-server-ram-needs"},
                        "spec": {
                            "mandatory": True,
                            "allocatable": True,
                            "name": "memory",
                            "requests": 200,
                            "units": "MB",
                        },
                    },
                ],
            ),
        ],
    ),
    (
        {
            "metadata": {
                "name": "analytics-hpa-intent",
                "description": "Assign resurces to ai-model and logger",
                "userData1": "foo",
                "userData2": "bar",
            },
            "spec": {"app": "analytics"},
        },
        [
            (
                {
                    "metadata": {"name": "ai-model", "description": "ai-model microservice"},
                    "spec": {
                        "consumer": {
                            "apiVersion": "apps/v1",
                            "kind": "StatefulSet",
                            "name": "ai-model",
                            "container-name": "openvino",
                        }
                    },
                },
                [
                    {
                        "metadata": {"name": "ai-model-cpu-requirement"},
                        "spec": {"mandatory": True, "allocatable": True, "name": "cpu", "requests": 2},
                    }
                ],
            ),
            (
                {
                    "metadata": {"name": "logger", "description": "logger microservice"},
                    "spec": {
                        "consumer": {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": "logger",
                            "container-name": "logger",
                        }
                    },
                },
                [
                    {
                        "metadata": {"name": "logger-cpu-needs"},
                        "spec": {
                            "mandatory": True,
                            "allocatable": True,
                            "name": "intel.com/qat",
                            "requests": 1,
                            "limits": 1,
                        },
                    }
                ],
            ),
        ],
    ),
]

# The fleet for the seed example: GPUs on cluster-1, QAT on cluster-3, cluster-4 too small, cluster-7 big but no QAT.
SEED_CLUSTERS: dict[str, list[Obj]] = {
    "cluster-1": [
        {
            "name": "gpu-node",
            "allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "1"},
            "labels": {"gpu": "true"},
        },
        {"name": "plain-node", "allocatable": {"cpu": "16", "memory": "64Gi"}},
    ],
    "cluster-2": [{"name": "n1", "allocatable": {"cpu": "32", "memory": "128Gi"}}],
    "cluster-3": [{"name": "qat-node", "allocatable": {"cpu": "8", "memory": "16Gi", "intel.com/qat": "2"}}],
    "cluster-4": [{"name": "tiny", "allocatable": {"cpu": "2", "memory": "1Gi"}}],
    "cluster-7": [{"name": "n1", "allocatable": {"cpu": "32", "memory": "64Gi"}}],
}


def seed_intents() -> list[tuple[Obj, list[tuple[Obj, list[Obj]]]]]:
    return copy.deepcopy(SEED_INTENTS)


PROJECT_PATH = ("my-proj1",)
CAPP_PATH = ("my-proj1", "my-capp1", "v1.0")
DIG_PATH = ("my-proj1", "my-capp1", "v1.0", "my-dig1")


async def build_seed(
    catalog: Any, clusters: dict[str, list[Obj]] | None = None, *, analytics_any_of: bool = True
) -> None:
    """Seed 004's usage example through the catalog: provider `edge` with SEED_CLUSTERS, project my-proj1,
    composite app my-capp1 v1.0 with apps fwall and analytics, deployment intent group my-dig1 with both HPA intents,
    and (optionally) a generic intent putting analytics on any of cluster-3 and cluster-7."""
    await catalog.create(levels.CLUSTER_PROVIDER, (), {"metadata": {"name": "edge"}})
    for name, nodes in (SEED_CLUSTERS if clusters is None else clusters).items():
        await catalog.create(levels.CLUSTER, ("edge",), {"metadata": {"name": name}, "spec": {"nodes": nodes}})
    await catalog.create(levels.PROJECT, (), {"metadata": {"name": "my-proj1"}})
    await catalog.create(
        levels.COMPOSITE_APP, PROJECT_PATH, {"metadata": {"name": "my-capp1"}, "spec": {"compositeAppVersion": "v1.0"}}
    )
    await catalog.create(levels.APP, CAPP_PATH, {"metadata": {"name": "fwall"}, "spec": {"manifests": FWALL_MANIFESTS}})
    await catalog.create(
        levels.APP, CAPP_PATH, {"metadata": {"name": "analytics"}, "spec": {"manifests": ANALYTICS_MANIFESTS}}
    )
    await catalog.create(levels.DEPLOYMENT_INTENT_GROUP, CAPP_PATH, {"metadata": {"name": "my-dig1"}, "spec": {}})
    if analytics_any_of:
        await catalog.create(levels.GENERIC_PLACEMENT_INTENT, DIG_PATH, {"metadata": {"name": "gpi"}})
        await catalog.create(levels.GENERIC_APP_INTENT, (*DIG_PATH, "gpi"), ANALYTICS_ANY_OF)
    for intent, consumers in seed_intents():
        await catalog.create(levels.HPA_INTENT, DIG_PATH, intent)
        intent_path = (*DIG_PATH, intent["metadata"]["name"])
        for consumer, requirements in consumers:
            await catalog.create(levels.HPA_CONSUMER, intent_path, consumer)
            for requirement in requirements:
                await catalog.create(levels.HPA_REQUIREMENT, (*intent_path, consumer["metadata"]["name"]), requirement)


ANALYTICS_ANY_OF: Obj = {
    "metadata": {"name": "analytics-placement"},
    "spec": {
        "app": "analytics",
        "intent": {
            "anyOf": [
                {"clusterProvider": "edge", "cluster": "cluster-3"},
                {"clusterProvider": "edge", "cluster": "cluster-7"},
            ]
        },
    },
}


EXTENDED = {"qat": "intel.com/qat", "gpu": "nvidia.com/gpu"}


def node_obj(
    name: str, labels: dict[str, str] | None = None, unschedulable: bool = False, **alloc: str
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"allocatable": {EXTENDED.get(k, k): v for k, v in alloc.items()}},
    }
    return obj


def pod_obj(name: str, node: str | None, phase: str = "Running", **requests: str) -> dict[str, Any]:
    amounts = {EXTENDED.get(k, k): v for k, v in requests.items()}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i", "resources": {"requests": amounts}}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"phase": phase},
    }


def need(name: str, requests: str | None = None, limits: str | None = None, **kw: Any) -> Requirement:
    """An allocatable requirement: `need("cpu", "2", "4")`."""
    return Requirement(
        name,
        f"{name}-req",
        requests=None if requests is None else Quantity(requests),
        limits=None if limits is None else Quantity(limits),
        **kw,
    )


def label(key: str, value: str, **kw: Any) -> Requirement:
    """A non-allocatable (node label) requirement: `label("turbo", "on")`."""
    return Requirement(key, f"{key}-label", allocatable=False, value=value, **kw)


def chart_archive(chart: str, templates: dict[str, str], *, extra: dict[str, str] | None = None) -> bytes:
    """A Helm chart archive (.tgz) as `helm package` lays it out: `<chart>/Chart.yaml`, `<chart>/values.yaml`,
    `<chart>/templates/<file>` for each template text, plus any `extra` files (path relative to the chart)."""
    files = {
        "Chart.yaml": f"apiVersion: v2\nname: {chart}\nversion: 0.1.0\n",
        "values.yaml": "replicaCount: 1\n",
        **{f"templates/{name}": text for name, text in templates.items()},
        **(extra or {}),
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for path, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"{chart}/{path}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def kubeconfig(server: str, cluster: str = "member") -> str:
    """A kubeconfig whose current context points at `server`."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": {"server": server}}],
            "contexts": [{"name": f"{cluster}-admin", "context": {"cluster": cluster, "user": "admin"}}],
            "current-context": f"{cluster}-admin",
            "users": [{"name": "admin", "user": {"token": "not-used"}}],
        }
    )


def manifests_text(*objs: Obj) -> str:
    return yaml.safe_dump_all(objs, sort_keys=False)
