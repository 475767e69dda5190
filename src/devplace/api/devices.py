"""Device kinds: Configuration, Instance (seeds 000/001, Akri-compatible) and ResourceClass (seed 003).

`akri.sh/v0` manifests validate unchanged; devplace's additions (`uniqueDevices`, `brokerStrategy`) are optional.
Slot holders in `deviceUsage` stay strings on the wire (`""`, `"<node>"`, `"C:<vdev>:<node>"`); the agent parses them
once at its boundary into typed holders.

`discoveryProperties` are Akri's: each is a `value` or a `valueFrom` with exactly one of `secretKeyRef` /
`configMapKeyRef` (`{name, key, namespace?, optional?}`); their shape is checked here, with field paths, and the node
agent resolves them (`devplace.agent.properties`) into the bytes it sends to the discovery handler.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from devplace import errors
from devplace.api import selectors
from devplace.api.meta import DnsLabel, DnsSubdomain, Model, Resource
from devplace.api.registry import register

__all__ = [
    "MAX_DEVICE_ID",
    "Configuration",
    "ConfigurationSpec",
    "DiscoveryHandlerInfo",
    "DiscoveryProperty",
    "DiscoveryPropertySource",
    "Instance",
    "InstanceSpec",
    "KeySelector",
    "ResourceClass",
]

_DEVICE_GROUPS = ("devplace.io/v1alpha1", "akri.sh/v0")

MAX_DEVICE_ID = 63
"""The kubelet's limit on a device ID; slot IDs are `<configuration>-<6 hex>-<index>`."""


class KeySelector(Model):
    """One key of a Secret or ConfigMap; `namespace` defaults to the Configuration's, `optional` to false."""

    name: DnsSubdomain
    key: str = Field(min_length=1)
    namespace: DnsLabel | None = None
    optional: bool | None = None


class DiscoveryPropertySource(Model):
    secret_key_ref: KeySelector | None = None
    config_map_key_ref: KeySelector | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> DiscoveryPropertySource:
        if (self.secret_key_ref is None) == (self.config_map_key_ref is None):
            raise ValueError("exactly one of secretKeyRef or configMapKeyRef must be set")
        return self


class DiscoveryProperty(Model):
    """A property sent to the discovery handler: `value`, or `valueFrom` a Secret or ConfigMap (neither: empty)."""

    name: str = Field(min_length=1)
    value: str | None = None
    value_from: DiscoveryPropertySource | None = None

    @model_validator(mode="after")
    def _not_both(self) -> DiscoveryProperty:
        if self.value is not None and self.value_from is not None:
            raise ValueError("set value or valueFrom, not both")
        return self


class DiscoveryHandlerInfo(Model):
    name: str = Field(min_length=1)
    discovery_details: str = ""
    discovery_properties: list[DiscoveryProperty] = Field(default_factory=list)


class BrokerSpec(Model):
    broker_pod_spec: dict[str, Any] | None = None
    broker_job_spec: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> BrokerSpec:
        if (self.broker_pod_spec is None) == (self.broker_job_spec is None):
            raise ValueError("exactly one of brokerPodSpec or brokerJobSpec must be set")
        return self


class ConfigurationSpec(Model):
    discovery_handler: DiscoveryHandlerInfo
    capacity: int = Field(default=1, ge=1, le=1024)
    unique_devices: bool = True
    broker_spec: BrokerSpec | None = None
    broker_strategy: dict[str, Any] | None = None
    instance_service_spec: dict[str, Any] | None = None
    configuration_service_spec: dict[str, Any] | None = None
    broker_properties: dict[str, str] = Field(default_factory=dict)


@register
class Configuration(Resource):
    KIND: ClassVar[str] = "Configuration"
    PLURAL: ClassVar[str] = "configurations"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = _DEVICE_GROUPS
    spec: ConfigurationSpec
    status: dict[str, Any] | None = None

    def problems(self) -> Iterator[errors.FieldError]:
        longest = f"{self.name}-ffffff-{self.spec.capacity - 1}"
        if len(longest) > MAX_DEVICE_ID:
            room = MAX_DEVICE_ID - len(longest) + len(self.name)
            yield errors.FieldError(
                "metadata.name",
                f"too long for its slot IDs: {longest!r} is {len(longest)} characters and the kubelet allows "
                f"{MAX_DEVICE_ID} (at most {room} characters with capacity {self.spec.capacity})",
            )


class InstanceSpec(Model):
    configuration_name: str = Field(min_length=1)
    capacity: int = Field(default=1, ge=1, le=1024)
    shared: bool = False
    nodes: list[str] = Field(default_factory=list)
    device_usage: dict[str, str] = Field(default_factory=dict)
    broker_properties: dict[str, str] = Field(default_factory=dict)
    attributes: dict[str, str] | None = None
    cdi_name: str | None = None


@register
class Instance(Resource):
    KIND: ClassVar[str] = "Instance"
    PLURAL: ClassVar[str] = "instances"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = _DEVICE_GROUPS
    spec: InstanceSpec
    status: dict[str, Any] | None = None


class SelectorRequirement(Model):
    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Eq", "Exists", "DoesNotExist", "Gt", "GtEq", "Lt", "LtEq"]
    values: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _valid(self) -> SelectorRequirement:
        problem = selectors.requirement_problem(self.key, self.operator, self.values)
        if problem:
            raise ValueError(problem)
        return self


class SelectorTerm(Model):
    match_expressions: list[SelectorRequirement] = Field(default_factory=list)


class ResourceClassSpec(Model):
    resource_selector: list[SelectorTerm] = Field(default_factory=list)


@register
class ResourceClass(Resource):
    KIND: ClassVar[str] = "ResourceClass"
    PLURAL: ClassVar[str] = "resourceclasses"
    NAMESPACED: ClassVar[bool] = False
    spec: ResourceClassSpec
    status: dict[str, Any] | None = None
