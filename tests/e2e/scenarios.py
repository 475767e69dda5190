"""Shared pieces of the end-to-end scenarios: manifests and slot readers (the invariant checkers are in
`devplace.sim._invariants`, shared with the demo)."""

from __future__ import annotations

import re
from typing import Any

from devplace.api import resource_name
from devplace.sim import Fleet

__all__ = [
    "BROKER",
    "BROKER_JOB",
    "PLAIN_BROKER",
    "broker_configuration",
    "cl_holder_node",
    "configuration",
    "held",
    "il",
    "instances",
    "usage",
]

_CL = re.compile(r"^C:(?P<vdev>.+):(?P<node>[^:]+)$")


def configuration(
    name: str = "akri-onvif", *, capacity: int = 2, unique: bool = True, details: str = "", namespace: str = "default"
) -> str:
    """An Akri-style Configuration manifest using the simulated world's `sim` discovery handler."""
    return f"""
apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: {name}
  namespace: {namespace}
spec:
  discoveryHandler:
    name: sim
    discoveryDetails: {details!r}
  capacity: {capacity}
  uniqueDevices: {"true" if unique else "false"}
"""


async def instances(fleet: Fleet, configuration_name: str | None = None) -> list[dict[str, Any]]:
    """Instances sorted by name, optionally of one Configuration."""
    items = await fleet.list("Instance")
    if configuration_name is not None:
        items = [i for i in items if i["spec"]["configurationName"] == configuration_name]
    return sorted(items, key=lambda i: i["metadata"]["name"])


def usage(instance: dict[str, Any]) -> dict[str, str]:
    return dict(instance["spec"].get("deviceUsage") or {})


def held(instance: dict[str, Any]) -> dict[str, str]:
    """Slots that somebody holds, with their holder strings."""
    return {slot: holder for slot, holder in usage(instance).items() if holder}


def cl_holder_node(holder: str) -> str | None:
    """The node of a Configuration-level holder `C:<vdev>:<node>`, or None for any other holder."""
    match = _CL.match(holder)
    return match["node"] if match else None


def il(fleet: Fleet, instance: dict[str, Any]) -> str:
    """The Instance-level resource name of an Instance."""
    return resource_name(instance["apiVersion"], instance["metadata"]["name"], fleet.resource_prefix)


BROKER: dict[str, Any] = {
    "containers": [
        {"name": "broker", "image": "nginx:latest", "resources": {"limits": {"{{PLACEHOLDER}}": "1"}}},
    ]
}
PLAIN_BROKER: dict[str, Any] = {"containers": [{"name": "broker", "image": "nginx:latest"}]}
BROKER_JOB: dict[str, Any] = {
    "template": {
        "spec": {
            "containers": [{"name": "job", "image": "busybox", "resources": {"limits": {"{{PLACEHOLDER}}": "1"}}}],
            "restartPolicy": "Never",
        }
    },
    "backoffLimit": 2,
}
SERVICE: dict[str, Any] = {"type": "ClusterIP", "ports": [{"name": "grpc", "port": 80, "targetPort": 8083}]}


def broker_configuration(
    name: str,
    *,
    strategy: dict[str, Any] | None = None,
    pod: dict[str, Any] | None = None,
    job: dict[str, Any] | None = None,
    capacity: int = 1,
    details: str = "",
    kind: str | None = None,
    services: bool = True,
) -> dict[str, Any]:
    """A Configuration with brokers (`pod` default: one container asking `{{PLACEHOLDER}}`), as a dict."""
    spec: dict[str, Any] = {
        "discoveryHandler": {"name": "sim", "discoveryDetails": details},
        "capacity": capacity,
        "brokerSpec": {"brokerJobSpec": job} if job is not None else {"brokerPodSpec": pod or BROKER},
    }
    if strategy is not None:
        spec["brokerStrategy"] = strategy
    if kind is not None:
        spec["deviceKind"] = kind
    if services:
        spec["instanceServiceSpec"] = SERVICE
        spec["configurationServiceSpec"] = SERVICE
    return {"apiVersion": "akri.sh/v0", "kind": "Configuration", "metadata": {"name": name}, "spec": spec}
