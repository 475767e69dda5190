"""The subset of core Kubernetes kinds the parts use: Node, Pod, Service, ConfigMap, Secret, Job, Deployment.

Only the fields devplace reads are typed; everything else a user writes is kept as-is (extra="allow"), so a real
manifest round-trips through the store without losing fields. Resource amounts are checked wherever Kubernetes
carries them (container requests/limits in a pod spec or pod template, a Node's capacity/allocatable): a quantity
like `1K` is refused with its full field path, as the apiserver would. So is a value of a Secret's `data` or a
ConfigMap's `binaryData` that is not base64 (the standard alphabet, padded), which is how Kubernetes carries bytes.
Unlike the apiserver, the store keeps a Secret's `stringData` as written instead of merging it into `data`, so
readers look in `data` first and then in `stringData`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from devplace import errors
from devplace.api._dra import pod_claim_problems
from devplace.api._encodings import decode_base64
from devplace.api._meta import Resource
from devplace.api._quantity import Quantity
from devplace.api._registry import register


def _base64_problems(path: str, values: Mapping[str, str] | None) -> Iterator[errors.FieldError]:
    for key, value in (values or {}).items():
        try:
            decode_base64(value)
        except ValueError as e:
            yield errors.FieldError(f"{path}.{key}", str(e))


def _amount_problems(path: str, amounts: Any) -> Iterator[errors.FieldError]:
    if amounts is None:
        return
    if not isinstance(amounts, Mapping):
        yield errors.FieldError(path, "must be a mapping of resource name to quantity")
        return
    for name, value in amounts.items():
        if isinstance(value, bool) or not isinstance(value, str | int):
            yield errors.FieldError(f"{path}.{name}", f"must be a quantity string, not {type(value).__name__}")
            continue
        try:
            Quantity(value)
        except errors.Invalid as e:
            yield errors.FieldError(f"{path}.{name}", e.message)


def _pod_spec_problems(path: str, spec: Any) -> Iterator[errors.FieldError]:
    if not isinstance(spec, Mapping):
        return
    for group in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(group) or []):
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if isinstance(resources, Mapping):
                for kind in ("requests", "limits"):
                    yield from _amount_problems(f"{path}.{group}[{i}].resources.{kind}", resources.get(kind))


class _Core(Resource):
    model_config = ConfigDict(extra="allow")
    spec: dict[str, Any] = Field(default_factory=dict)
    status: dict[str, Any] | None = None


@register
class Node(_Core):
    KIND: ClassVar[str] = "Node"
    PLURAL: ClassVar[str] = "nodes"
    NAMESPACED: ClassVar[bool] = False
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("v1",)

    def problems(self) -> Iterator[errors.FieldError]:
        for field in ("capacity", "allocatable"):
            yield from _amount_problems(f"status.{field}", (self.status or {}).get(field))


@register
class Pod(_Core):
    KIND: ClassVar[str] = "Pod"
    PLURAL: ClassVar[str] = "pods"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("v1",)

    def problems(self) -> Iterator[errors.FieldError]:
        containers = self.spec.get("containers")
        if not isinstance(containers, list) or not containers:  # Kubernetes: "spec.containers: Required value"
            yield errors.FieldError("spec.containers", "Required value: a Pod runs at least one container")
        yield from _pod_spec_problems("spec", self.spec)
        yield from pod_claim_problems("spec", self.spec)  # DRA: resourceClaims, containers[].resources.claims


@register
class Service(_Core):
    KIND: ClassVar[str] = "Service"
    PLURAL: ClassVar[str] = "services"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("v1",)


@register
class ConfigMap(Resource):
    model_config = ConfigDict(extra="allow")
    KIND: ClassVar[str] = "ConfigMap"
    PLURAL: ClassVar[str] = "configmaps"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("v1",)
    data: dict[str, str] = Field(default_factory=dict)
    binary_data: dict[str, str] | None = None

    def problems(self) -> Iterator[errors.FieldError]:
        return _base64_problems("binaryData", self.binary_data)


@register
class Secret(Resource):
    """`data` values are base64; `stringData` values are plain text (Kubernetes' write-only convenience)."""

    model_config = ConfigDict(extra="allow")
    KIND: ClassVar[str] = "Secret"
    PLURAL: ClassVar[str] = "secrets"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("v1",)
    data: dict[str, str] = Field(default_factory=dict)
    string_data: dict[str, str] | None = None
    type: str = "Opaque"

    def problems(self) -> Iterator[errors.FieldError]:
        return _base64_problems("data", self.data)


@register
class Job(_Core):
    KIND: ClassVar[str] = "Job"
    PLURAL: ClassVar[str] = "jobs"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("batch/v1",)

    def problems(self) -> Iterator[errors.FieldError]:
        template = self.spec.get("template")
        return _pod_spec_problems("spec.template.spec", template.get("spec") if isinstance(template, Mapping) else None)


@register
class Deployment(_Core):
    KIND: ClassVar[str] = "Deployment"
    PLURAL: ClassVar[str] = "deployments"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("apps/v1",)

    def problems(self) -> Iterator[errors.FieldError]:
        template = self.spec.get("template")
        return _pod_spec_problems("spec.template.spec", template.get("spec") if isinstance(template, Mapping) else None)
