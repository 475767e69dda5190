"""Wire dicts and snapshots for the scheduler tests: Instances, Nodes, Pods and seed 003's three classes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devplace.api import instance_device
from devplace.scheduler._classes import ResolvedClass, resolve_classes
from devplace.scheduler._decisions import Snapshot
from devplace.scheduler._devices import Device, device_of
from devplace.scheduler._nodes import NodeInfo, node_info
from devplace.scheduler._pods import PodInfo, pod_info

SEED_CLASSES: dict[str, dict[str, Any]] = {
    "nvidia.high.mem": {
        "resourceSelector": [
            {
                "matchExpressions": [
                    {"key": "Kind", "operator": "In", "values": ["nvidia-gpu"]},
                    {"key": "memory", "operator": "GtEq", "values": ["30G"]},
                ]
            }
        ]
    },
    "hugepages-1gig": {
        "resourceSelector": [
            {
                "matchExpressions": [
                    {"key": "Kind", "operator": "In", "values": ["huge-pages"]},
                    {"key": "size", "operator": "GtEq", "values": ["1G"]},
                ]
            }
        ]
    },
    "fast.nic": {
        "resourceSelector": [
            {
                "matchExpressions": [
                    {"key": "Kind", "operator": "In", "values": ["nic"]},
                    {"key": "speed", "operator": "GtEq", "values": ["40GBPS"]},
                ]
            }
        ]
    },
}


def seed_classes() -> dict[str, ResolvedClass]:
    return resolve_classes(SEED_CLASSES)


def instance(
    name: str,
    nodes: list[str],
    *,
    configuration: str = "gpus",
    capacity: int = 1,
    shared: bool | None = None,
    held: Mapping[int, str] | None = None,
    props: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    usage = {f"{name}-{i}": (held or {}).get(i, "") for i in range(capacity)}
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "configurationName": configuration,
            "capacity": capacity,
            "shared": len(nodes) > 1 if shared is None else shared,
            "nodes": nodes,
            "deviceUsage": usage,
            "brokerProperties": dict(props or {}),
        },
    }


def device(
    name: str,
    node: str | list[str],
    kind: str = "nvidia-gpu",
    *,
    capacity: int = 1,
    free: int | None = None,
    **props: str,
) -> Device:
    """A device of `kind` seen from `node` (or nodes), `free` of its `capacity` slots free (default all)."""
    nodes = [node] if isinstance(node, str) else node
    taken = capacity - (capacity if free is None else free)
    held = dict.fromkeys(range(taken), nodes[0])
    return device_of(instance(name, nodes, capacity=capacity, held=held, props=props), handler_name=kind)


def node(name: str, cpu: str = "8", memory: str = "32Gi", pods: int = 110, **labels: str) -> NodeInfo:
    return node_info(
        {
            "metadata": {"name": name, "labels": dict(labels)},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": str(pods)}},
        }
    )


def pod(
    name: str,
    *,
    cpu: str | None = None,
    memory: str | None = None,
    classes: Mapping[str, int] | None = None,
    extra: Mapping[str, str] | None = None,
    priority: int | None = None,
    created: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity_terms: list[dict[str, Any]] | None = None,
) -> PodInfo:
    requests: dict[str, Any] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(extra or {})
    requests.update({f"rc.devplace.io/{c}": str(n) for c, n in (classes or {}).items()})
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": requests}}]}
    if priority is not None:
        spec["priority"] = priority
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    if affinity_terms is not None:
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": affinity_terms}}
        }
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if created is not None:
        metadata["creationTimestamp"] = created
    return pod_info({"metadata": metadata, "spec": spec})


def gpu_cluster(nodes: int, per_node: int, *, memory: str = "32Gi", cpu: str = "8") -> Snapshot:
    """`nodes` nodes with `per_node` nvidia GPUs each (capacity 1), under seed 003's classes."""
    names = [f"node-{n:03d}" for n in range(nodes)]
    devices = [
        device(f"gpu-{n:03d}-{i:02d}", name, memory=memory) for n, name in enumerate(names) for i in range(per_node)
    ]
    return Snapshot.build([node(name, cpu=cpu) for name in names], devices, seed_classes())


# -- wire objects for the DRA tests (the scheduler's, and the leader-election audit's) --------------------------

GPU_CONFIGURATION = {
    "apiVersion": "devplace.io/v1alpha1",
    "kind": "Configuration",
    "metadata": {"name": "gpus", "namespace": "default"},
    "spec": {"discoveryHandler": {"name": "udev"}, "deviceKind": "nvidia-gpu", "capacity": 1},
}


def gpu_instance_object(name: str, node: str, memory: str, capacity: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "configurationName": "gpus",
            "capacity": capacity,
            "shared": False,
            "nodes": [node],
            "deviceUsage": {f"{name}-{i}": "" for i in range(capacity)},
            "brokerProperties": {"memory": memory},
        },
    }


def gpu_slice(node: str, instances: list[dict[str, Any]]) -> dict[str, Any]:
    """What the agent publishes for a node's local Instances (the device mapping, plus the `instance` attribute)."""
    devices = []
    for inst in instances:
        device = instance_device(inst, GPU_CONFIGURATION).to_wire()
        device["attributes"]["instance"] = {"string": inst["metadata"]["name"]}
        devices.append(device)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-devplace.io"},
        "spec": {
            "driver": "devplace.io",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def node_object(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def claim_pod_object(name: str, *, template: str | None = None, claim_name: str | None = None) -> dict[str, Any]:
    """A Pod whose one container asks the claim `gpu`: made from `template` (resourceClaimTemplateName) or the claim
    `claim_name` (resourceClaimName)."""
    entry: dict[str, Any] = {"name": "gpu"}
    if template is not None:
        entry["resourceClaimTemplateName"] = template
    if claim_name is not None:
        entry["resourceClaimName"] = claim_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [{"name": "main", "image": "app", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [entry],
        },
    }


def device_class_object(name: str, *expressions: str) -> dict[str, Any]:
    """A DeviceClass selecting with each CEL `expressions` (all must hold)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }
