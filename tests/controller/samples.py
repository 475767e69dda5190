"""Wire dicts for controller tests: Configurations, Instances, Nodes, as the store holds them."""

from __future__ import annotations

import copy
from typing import Any

from devplace.controller import _inputs as inputs

BROKER_POD_SPEC: dict[str, Any] = {
    "containers": [
        {
            "name": "broker",
            "image": "ghcr.io/project-akri/akri/onvif-video-broker:latest",
            "resources": {"limits": {"{{PLACEHOLDER}}": "1"}, "requests": {"{{PLACEHOLDER}}": "1"}},
        }
    ]
}
PLAIN_POD_SPEC: dict[str, Any] = {"containers": [{"name": "broker", "image": "nginx:latest"}]}
BROKER_JOB_SPEC: dict[str, Any] = {
    "template": {
        "spec": {
            "containers": [{"name": "job", "image": "busybox", "resources": {"limits": {"{{PLACEHOLDER}}": "1"}}}],
            "restartPolicy": "Never",
        }
    },
    "backoffLimit": 2,
}
INSTANCE_SERVICE: dict[str, Any] = {"type": "ClusterIP", "ports": [{"name": "grpc", "port": 80, "targetPort": 8083}]}
CONFIGURATION_SERVICE: dict[str, Any] = {"type": "ClusterIP", "ports": [{"name": "grpc", "port": 80}]}


def configuration(
    name: str = "akri-onvif",
    strategy: dict[str, Any] | None = None,
    *,
    pod: dict[str, Any] | None = None,
    job: dict[str, Any] | None = None,
    services: bool = True,
    generation: int = 1,
    capacity: int = 1,
    conditions: list[dict[str, Any]] | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    if job is not None:
        broker: dict[str, Any] = {"brokerJobSpec": copy.deepcopy(job)}
    else:
        broker = {"brokerPodSpec": copy.deepcopy(pod if pod is not None else BROKER_POD_SPEC)}
    spec: dict[str, Any] = {"discoveryHandler": {"name": "onvif"}, "capacity": capacity, "brokerSpec": broker}
    if strategy is not None:
        spec["brokerStrategy"] = strategy
    if services:
        spec["instanceServiceSpec"] = copy.deepcopy(INSTANCE_SERVICE)
        spec["configurationServiceSpec"] = copy.deepcopy(CONFIGURATION_SERVICE)
    body: dict[str, Any] = {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": generation},
        "spec": spec,
    }
    if conditions:
        body["status"] = {"conditions": conditions}
    return body


def instance(
    name: str,
    nodes: list[str],
    *,
    configuration: str = "akri-onvif",
    shared: bool = True,
    capacity: int = 1,
    created: str = "2026-01-01T00:00:00Z",
    properties: dict[str, str] | None = None,
    usage: dict[str, str] | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "creationTimestamp": created},
        "spec": {
            "configurationName": configuration,
            "shared": shared,
            "nodes": list(nodes),
            "capacity": capacity,
            "deviceUsage": usage if usage is not None else {f"{name}-{i}": "" for i in range(capacity)},
            "brokerProperties": properties or {"ONVIF_DEVICE_UUID": name},
        },
    }


def node(name: str, *, ready: str = "True", since: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": since}]},
    }


def cfg_view(body: dict[str, Any]) -> inputs.ConfigurationFacts:
    return inputs.ConfigurationFacts.from_wire(body)


def views(*bodies: dict[str, Any]) -> list[inputs.InstanceFacts]:
    return [inputs.InstanceFacts.from_wire(b) for b in bodies]


def conflict(node_name: str) -> dict[str, Any]:
    return {
        "type": "ResourceNameConflict",
        "status": "True",
        "reason": "ResourceNameTaken",
        "message": "taken",
        "node": node_name,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
