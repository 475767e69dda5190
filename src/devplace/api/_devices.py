"""Device kinds: Configuration, Instance (seeds 000/001, Akri-compatible) and ResourceClass (seed 003).

`akri.sh/v0` manifests validate unchanged; devplace's additions (`uniqueDevices`, `brokerStrategy`, `deviceKind`) are
optional.

`brokerStrategy` (DESIGN.md section 5, seed 002) has exactly one key: `perNode: {}`, `job: {}`,
`deployment: {replicas}`, `configuration: {replicas, devicesPerPod}`, `pool: {size, mode, timeoutSeconds}` or
`group: {members: [{configuration | resourceClass, count}]}`. Absent, it is `perNode` with a `brokerPodSpec` and `job`
with a `brokerJobSpec` (Akri's behaviour). `job` needs a `brokerJobSpec`, every other strategy a `brokerPodSpec`.
The `{{PLACEHOLDER}}` resource key names one Instance's resource, so strategies whose brokers serve no single
Instance (`configuration`, `pool`, `group`) refuse it.
An Instance's `deviceUsage` follows the slot rules (DESIGN.md section 4), defined here once and used by this model
(so by the API server, `devplace apply` and the simulation), by the agent (`devplace.agent._slots` parses and repairs
with them) and by the scheduler and controller (they skip or read around what breaks them):
- slot names are `<instance>-<i>`, `i` a decimal without leading zeros below `MAX_CAPACITY`;
- holders are `""` (free), `"<node>"` (held through the node's Instance-level plugin) or `"C:<vdev>:<node>"` (held
  through its Configuration-level plugin), node and vdev lower-case DNS-style names: Akri's three forms, parsed once
  into `FREE`, `IL(node)` and `CL(vdev, node)`; and devplace's fourth, `"D:<namespace>/<claim>:<node>"` (`DRA`): held
  for the ResourceClaim `<namespace>/<claim>` allocated for a pod on `<node>` through DRA (DESIGN.md section 6a). Akri's
  agent reads a holder as "this node holds it" only when it is the node's name or ends in `:<node>`, so it sees a
  DRA-held slot as taken by that node, never as free (the same rule `named_node` applies). A holder may name a node
  that is not in `nodes` (a node that stopped seeing the device keeps its slots until they are released);
- capacity: every slot below `capacity` exists (an empty `deviceUsage` is accepted as not yet written: the agent of a
  node in `nodes` writes the free slots), and a slot at or beyond `capacity` exists only while held (it retires after
  a capacity shrink and goes when released).
Each broken rule is refused as `spec.deviceUsage.<slot>` with the reason (`usage_problems`). `named_node` (which
node a stored holder names, also one that breaks the grammar) and `released` (a node's slots freed, retiring ones
removed) are the lenient readers for what is already stored: a node's own repair, cleanup after a gone node.

Extended resources (one rule for the agent, the controller, the scheduler and the simulation, `resource_name`): a
Configuration's devices are `<prefix>/<instance>` (Instance level) and `<prefix>/<configuration>` (Configuration
level), the prefix being the API group of the Configuration's `apiVersion` (`akri.sh/v0` -> `akri.sh`,
`devplace.io/v1alpha1` -> `devplace.io`) unless a part is given an override (`--resource-prefix`). An Instance's
`cdiName` is `<group>/<configuration>=<digest>` (`cdi_name`).
An Instance stays valid against Akri's Instance CRD: its spec holds only the CRD's fields (`configurationName`,
`cdiName`, `capacity`, `brokerProperties`, `shared`, `nodes`, `deviceUsage`); devplace-only data goes to annotations
or `status`.

`discoveryProperties` are Akri's: each is a `value` or a `valueFrom` with exactly one of `secretKeyRef` /
`configMapKeyRef` (`{name, key, namespace?, optional?}`; the namespace is `default` when not given, as Akri's);
their shape is checked here, with field paths, and the node agent resolves them (`devplace.agent._properties`) into
the bytes it sends to the discovery handler.

A ResourceClass (seed 003) selects devices by `spec.resourceSelector`: terms ORed, each either `matchExpressions`
(at least one `{key, operator, values}`, ANDed) or `classRef: <class>` (nested classes, seed 003's future scope),
never both; `spec.selectionStrategy` optionally picks the device selection (`firstFit`, `binpack`, `spread`,
`optimal`). Every requirement is refused here with its field path: an unknown operator (`...operator`), a wrong
number of values (`Gt` with two, `Exists` with one: `...values`), a value an ordering operator cannot order
(`...values`). `status` is `{allocatable, requested}`, quantities as strings.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import AfterValidator, Field, model_validator

from devplace import errors
from devplace.api import _selectors as selectors
from devplace.api._devicepaths import device_paths_problems
from devplace.api._holders import (
    DEVICE_GROUPS,
    MAX_CAPACITY,
    MAX_DEVICE_ID,
    SelectionStrategy,
    usage_problems,
)
from devplace.api._meta import DnsLabel, DnsSubdomain, Model, Resource
from devplace.api._quantity import is_quantity
from devplace.api._registry import register
from devplace.api._udevrules import udev_details_problems


class KeySelector(Model):
    """One key of a Secret or ConfigMap; `namespace` defaults to `default` (as Akri's), `optional` to false."""

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


PLACEHOLDER = "{{PLACEHOLDER}}"
"""The resource key in a broker's container resources that the controller replaces by the Instance's resource."""

STRATEGIES = ("perNode", "job", "deployment", "configuration", "pool", "group")
"""The keys of `brokerStrategy`, in the order they are documented."""

_SINGLE_INSTANCE = frozenset({"perNode", "job", "deployment"})
"""Strategies whose brokers serve exactly one Instance: the only ones `{{PLACEHOLDER}}` makes sense in."""


class PerNodeStrategy(Model):
    """A broker Pod per (Instance, node that sees it), pinned to the node (Akri's default)."""


class JobStrategy(Model):
    """A Job per Instance and Configuration generation (Akri's brokerJobSpec behaviour)."""


class DeploymentStrategy(Model):
    """min(replicas, capacity) unpinned broker Pods per Instance; the scheduler places them."""

    replicas: int = Field(default=1, ge=0)


class ConfigurationStrategy(Model):
    """`replicas` unpinned broker Pods, each requesting `devicesPerPod` of the Configuration-level resource."""

    replicas: int = Field(default=1, ge=0)
    devices_per_pod: int = Field(default=1, ge=1)


class PoolStrategy(Model):
    """A broker per pool of `size` Instances visible to one node; `dynamic` pools are filled up to `size`."""

    size: int = Field(ge=1)
    mode: Literal["static", "dynamic"] = "static"
    timeout_seconds: float | None = Field(default=None, ge=0)


class GroupMember(Model):
    """`count` Instances of one Configuration, or `count` devices of one ResourceClass."""

    configuration: DnsSubdomain | None = None
    resource_class: DnsSubdomain | None = None
    count: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _exactly_one(self) -> GroupMember:
        if (self.configuration is None) == (self.resource_class is None):
            raise ValueError("exactly one of configuration or resourceClass must be set")
        return self


class GroupStrategy(Model):
    """One broker per heterogeneous group (e.g. 1 GPU and 3 cameras) visible to one node."""

    members: list[GroupMember] = Field(min_length=1)


class BrokerStrategy(Model):
    """Exactly one of the strategies (module docstring)."""

    per_node: PerNodeStrategy | None = None
    job: JobStrategy | None = None
    deployment: DeploymentStrategy | None = None
    configuration: ConfigurationStrategy | None = None
    pool: PoolStrategy | None = None
    group: GroupStrategy | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_known_key(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [k for k in data if k not in STRATEGIES]
            if unknown:
                raise ValueError(f"unknown strategy {unknown[0]!r} (known: {', '.join(STRATEGIES)})")
            if len(data) != 1:
                chosen = f"got {', '.join(data)}" if data else "got none"
                raise ValueError(f"exactly one strategy must be set ({chosen}; known: {', '.join(STRATEGIES)})")
        return data

    @property
    def name(self) -> str:
        """The chosen strategy's key (`perNode`, `pool`, ...)."""
        for key in STRATEGIES:
            if getattr(self, _snake(key)) is not None:
                return key
        raise AssertionError("a validated BrokerStrategy has one strategy")


def _snake(key: str) -> str:
    return "per_node" if key == "perNode" else key


def _placeholder_paths(path: str, pod_spec: Any) -> Iterator[str]:
    """The field paths of every `{{PLACEHOLDER}}` resource key in a pod spec's containers."""
    if not isinstance(pod_spec, dict):
        return
    for group in ("initContainers", "containers"):
        containers = pod_spec.get(group)
        for i, container in enumerate(containers if isinstance(containers, list) else []):
            resources = container.get("resources") if isinstance(container, dict) else None
            for amounts in ("requests", "limits"):
                values = resources.get(amounts) if isinstance(resources, dict) else None
                if isinstance(values, dict) and PLACEHOLDER in values:
                    yield f"{path}.{group}[{i}].resources.{amounts}.{PLACEHOLDER}"


class ConfigurationSpec(Model):
    discovery_handler: DiscoveryHandlerInfo
    capacity: int = Field(default=1, ge=1, le=MAX_CAPACITY)
    unique_devices: bool = True
    broker_spec: BrokerSpec | None = None
    broker_strategy: BrokerStrategy | None = None
    device_kind: str | None = Field(default=None, min_length=1, max_length=253, pattern=r"^\S+$")
    instance_service_spec: dict[str, Any] | None = None
    configuration_service_spec: dict[str, Any] | None = None
    broker_properties: dict[str, str] = Field(default_factory=dict)


@register
class Configuration(Resource):
    KIND: ClassVar[str] = "Configuration"
    PLURAL: ClassVar[str] = "configurations"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = DEVICE_GROUPS
    spec: ConfigurationSpec
    status: dict[str, Any] | None = None

    @property
    def strategy(self) -> str | None:
        """The broker strategy in force: `brokerStrategy`'s key, else Akri's default for the broker spec (None: no
        brokers)."""
        if self.spec.broker_strategy is not None:
            return self.spec.broker_strategy.name
        broker = self.spec.broker_spec
        if broker is None:
            return None
        return "perNode" if broker.broker_pod_spec is not None else "job"

    @classmethod
    def from_obj(cls, obj: Any, *, strict: bool = False) -> Self:
        """As every kind's, and at the write boundary (`strict`) also `admission_problems`: read back from a store,
        a Configuration with such details still loads, and the agent puts a condition on it."""
        model = super().from_obj(obj, strict=strict)
        found = list(model.admission_problems()) if strict else []
        if found:
            raise errors.Invalid("; ".join(str(f) for f in found), found)
        return model

    def admission_problems(self) -> Iterator[errors.FieldError]:
        """What apply refuses beyond the schema: a `udev` rule Akri's grammar cannot parse (`api._udevrules`), a
        `devplace.io/device-paths` annotation that names no path (`api._devicepaths`)."""
        yield from device_paths_problems(self.metadata.annotations)
        handler = self.spec.discovery_handler
        if handler.name == "udev":
            yield from udev_details_problems(handler.discovery_details)

    def problems(self) -> Iterator[errors.FieldError]:
        yield from self._strategy_problems()
        longest = f"{self.name}-ffffff-{self.spec.capacity - 1}"
        if len(longest) > MAX_DEVICE_ID:
            room = MAX_DEVICE_ID - len(longest) + len(self.name)
            yield errors.FieldError(
                "metadata.name",
                f"too long for its slot IDs: {longest!r} is {len(longest)} characters and the kubelet allows "
                f"{MAX_DEVICE_ID} (at most {room} characters with capacity {self.spec.capacity})",
            )

    def _strategy_problems(self) -> Iterator[errors.FieldError]:
        chosen = self.spec.broker_strategy
        if chosen is None:
            return
        name = chosen.name
        path = f"spec.brokerStrategy.{name}"
        broker = self.spec.broker_spec
        if broker is None:
            wanted = "brokerJobSpec" if name == "job" else "brokerPodSpec"
            yield errors.FieldError(path, f"the {name} strategy deploys brokers: spec.brokerSpec.{wanted} is required")
            return
        if name == "job" and broker.broker_job_spec is None:
            yield errors.FieldError(path, "the job strategy deploys Jobs: set spec.brokerSpec.brokerJobSpec")
        if name != "job" and broker.broker_pod_spec is None:
            yield errors.FieldError(path, f"the {name} strategy deploys Pods: set spec.brokerSpec.brokerPodSpec")
        if name not in _SINGLE_INSTANCE:
            for where in _placeholder_paths("spec.brokerSpec.brokerPodSpec", broker.broker_pod_spec):
                yield errors.FieldError(
                    where,
                    f"{PLACEHOLDER} stands for one Instance's resource, and a broker of the {name} strategy serves "
                    "no single Instance (the controller adds the resources it needs)",
                )


class InstanceSpec(Model):
    configuration_name: str = Field(min_length=1)
    capacity: int = Field(default=1, ge=1, le=MAX_CAPACITY)
    shared: bool = False
    nodes: list[str] = Field(default_factory=list)
    device_usage: dict[str, str] = Field(default_factory=dict)
    broker_properties: dict[str, str] = Field(default_factory=dict)
    cdi_name: str | None = None


@register
class Instance(Resource):
    KIND: ClassVar[str] = "Instance"
    PLURAL: ClassVar[str] = "instances"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = DEVICE_GROUPS
    spec: InstanceSpec
    status: dict[str, Any] | None = None

    def problems(self) -> Iterator[errors.FieldError]:
        return usage_problems(self.name, self.spec.capacity, self.spec.device_usage)

    @classmethod
    def without_usage(cls, obj: Mapping[str, Any]) -> Instance:
        """`from_obj` on `obj` with `spec.deviceUsage` left out (so not in the result either): for a part that reads
        stored Instances and deals with a usage that breaks the slot rules itself (the agent repairs its own
        slots, `devplace.agent._slots`); `usage_problems` says what is wrong with it."""
        spec = obj.get("spec")
        if isinstance(spec, Mapping) and "deviceUsage" in spec:
            obj = {**obj, "spec": {k: v for k, v in spec.items() if k != "deviceUsage"}}
        return cls.from_obj(obj)


class SelectorRequirement(Model):
    """`{key, operator, values}`; the operator/values rules are checked by `ResourceClass.problems` (field paths)."""

    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Eq", "Exists", "DoesNotExist", "Gt", "GtEq", "Lt", "LtEq"]
    values: list[str] = Field(default_factory=list)


class SelectorTerm(Model):
    """Either `matchExpressions` (at least one, ANDed) or `classRef` (every term of another class), never both."""

    match_expressions: list[SelectorRequirement] | None = None
    class_ref: DnsSubdomain | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> SelectorTerm:
        if self.class_ref is not None and self.match_expressions is not None:
            raise ValueError("a term is either matchExpressions or classRef, not both")
        if self.class_ref is None and not self.match_expressions:
            raise ValueError("a term needs classRef or non-empty matchExpressions (an empty term matches nothing)")
        return self


def _quantity_text(value: str) -> str:
    if not is_quantity(value):
        raise ValueError(f"{value!r} is not a quantity")
    return value


QuantityText = Annotated[str, AfterValidator(_quantity_text)]
"""A Kubernetes quantity kept as written (`4`, `32Gi`)."""


class ResourceClassSpec(Model):
    resource_selector: list[SelectorTerm] = Field(default_factory=list)
    selection_strategy: SelectionStrategy | None = None


class ResourceClassStatus(Model):
    """Seed 003's `ResourceClassStatus`, written by the scheduler: the slots the class matches and those in use."""

    allocatable: QuantityText | None = None
    requested: QuantityText | None = None


@register
class ResourceClass(Resource):
    """Cluster-scoped; `spec` is immutable after creation (the API server and `devplace apply` refuse a change).

    References between classes (`classRef`) must name existing classes and form no cycle: that needs the stored
    classes, so the API server checks it on create (`devplace.scheduler._admissions`), not this model."""

    KIND: ClassVar[str] = "ResourceClass"
    PLURAL: ClassVar[str] = "resourceclasses"
    NAMESPACED: ClassVar[bool] = False
    spec: ResourceClassSpec
    status: ResourceClassStatus | None = None

    def problems(self) -> Iterator[errors.FieldError]:
        for t, term in enumerate(self.spec.resource_selector):
            for e, req in enumerate(term.match_expressions or []):
                found = selectors.requirement_problem_at(req.key, req.operator, req.values)
                if found is not None:
                    where, reason = found
                    yield errors.FieldError(f"spec.resourceSelector[{t}].matchExpressions[{e}].{where}", reason)
