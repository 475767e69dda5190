"""Extended resources backed by DRA (Kubernetes' DRAExtendedResource, KEP 5004; shared/reference/dra.md sections 1
and 7). Pure: wire dicts in, plain values out.

A DeviceClass may name an extended resource (`spec.extendedResourceName`, e.g. `example.com/gpu`); every class also
stands for `deviceclass.resource.kubernetes.io/<class>`. A pod asking such a resource in a container
(`resources.requests` or `limits`) is served, on a node whose allocatable does not offer that resource (no device
plugin there), by a ResourceClaim the scheduler makes for the pod: one request per (container, resource), named
`container-<i>-request-<j>`, ExactCount of the quantity from that class. On a node that offers the resource, the
device plugin serves it as any extended resource. The claim is named `<pod>-extended-resources-<5 characters from the
pod's uid>` (the same on every try), owned by the pod, annotated `resource.kubernetes.io/extended-resource-claim:
"true"`; the pod's `status.extendedResourceClaimStatus` names it and maps each request to its container and resource.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from devplace.api import controller_reference, generated_suffix

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
EXTENDED_CLAIM = "resource.kubernetes.io/extended-resource-claim"


def extended_classes(device_classes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Extended resource name -> the DeviceClass serving it (implicit names cannot clash with explicit ones, which
    may not use the implicit prefix; two classes naming one resource: the first by name)."""
    out: dict[str, str] = {}
    named = sorted(device_classes, key=lambda c: str((c.get("metadata") or {}).get("name") or ""))
    for cls in named:
        name = str((cls.get("metadata") or {}).get("name") or "")
        if name:
            out.setdefault(IMPLICIT_PREFIX + name, name)
    for cls in named:
        name = str((cls.get("metadata") or {}).get("name") or "")
        resource = (cls.get("spec") or {}).get("extendedResourceName")
        if name and isinstance(resource, str) and resource and not resource.startswith(IMPLICIT_PREFIX):
            out.setdefault(resource, name)
    return out


@dataclass(frozen=True, slots=True)
class Ask:
    """One (container, resource) a DeviceClass serves: the claim's request `request` for `count` devices."""

    container: str
    resource: str
    request: str
    device_class: str
    count: int


def asks(pod: Mapping[str, Any], classes: Mapping[str, str]) -> tuple[Ask, ...]:
    """The pod's container asks for extended resources a DeviceClass serves (a limit without a request counts)."""
    out: list[Ask] = []
    for i, container in enumerate((pod.get("spec") or {}).get("containers") or ()):
        if not isinstance(container, Mapping):
            continue
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        j = 0
        for resource in sorted(wanted):
            cls = classes.get(resource)
            count = _count(wanted[resource])
            if cls is None or count is None or count <= 0:
                continue
            out.append(Ask(str(container.get("name") or f"c{i}"), resource, f"container-{i}-request-{j}", cls, count))
            j += 1
    return tuple(out)


def _count(value: Any) -> int | None:
    text = str(value).strip()
    return int(text) if text.isdigit() else None


def claim_name(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    suffix = generated_suffix(f"{meta.get('uid')}/extended")
    return f"{str(meta.get('name'))[:30].rstrip('-.')}-extended-resources-{suffix}"


def extended_claim(pod: Mapping[str, Any], wanted: Iterable[Ask]) -> dict[str, Any]:
    """The ResourceClaim the scheduler makes for `pod`'s asks `wanted` (module docstring)."""
    meta = pod.get("metadata") or {}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": claim_name(pod),
            "namespace": str(meta.get("namespace") or "default"),
            "annotations": {EXTENDED_CLAIM: "true"},
            "ownerReferences": [controller_reference("v1", "Pod", str(meta.get("name")), meta.get("uid"))],
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": a.request,
                        "exactly": {
                            "deviceClassName": a.device_class,
                            "allocationMode": "ExactCount",
                            "count": a.count,
                        },
                    }
                    for a in wanted
                ]
            }
        },
    }


def extended_status(claim: str, wanted: Iterable[Ask]) -> dict[str, Any]:
    """`status.extendedResourceClaimStatus` for the claim `claim` serving `wanted`."""
    return {
        "resourceClaimName": claim,
        "requestMappings": [
            {"containerName": a.container, "resourceName": a.resource, "requestName": a.request} for a in wanted
        ],
    }


def served_by_dra(wanted: Iterable[Ask], allocatable: Mapping[str, int]) -> tuple[Ask, ...]:
    """The asks a node serves through DRA: those whose resource its allocatable does not offer at all."""
    return tuple(a for a in wanted if allocatable.get(a.resource, 0) <= 0)
