"""The subset of core Kubernetes kinds the parts use: Node, Pod, Service, ConfigMap, Job, Deployment.

Only the fields devplace reads are typed; everything else a user writes is kept as-is (extra="allow"), so a real
manifest round-trips through the store without losing fields.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from devplace.api.meta import Resource
from devplace.api.registry import register

__all__ = ["ConfigMap", "Deployment", "Job", "Node", "Pod", "Service"]


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


@register
class Pod(_Core):
    KIND: ClassVar[str] = "Pod"
    PLURAL: ClassVar[str] = "pods"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("v1",)


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


@register
class Job(_Core):
    KIND: ClassVar[str] = "Job"
    PLURAL: ClassVar[str] = "jobs"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("batch/v1",)


@register
class Deployment(_Core):
    KIND: ClassVar[str] = "Deployment"
    PLURAL: ClassVar[str] = "deployments"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("apps/v1",)
