"""Kubernetes' DRA kinds (`resource.k8s.io/v1`, GA since 1.34): DeviceClass, ResourceSlice, ResourceClaim and
ResourceClaimTemplate, with kube-apiserver's validation and limits (shared/reference/dra.md section 1), and the DRA
fields of a Pod (`pod_claim_problems`).

Each model refuses unknown fields (pydantic), and `problems` reports every rule kube-apiserver's
`pkg/apis/resource/validation` applies that spans fields or needs a limit, each at its Kubernetes field path
(`spec.devices[0].attributes[dra.example.com/x]`, `spec.selectors[0].cel.expression`), so a bad object is refused with
422 and nothing is stored:
- names: DeviceClass and ResourceSlice names DNS subdomains; a device, a request, a subrequest and a pod claim name
  DNS labels; a driver a DNS subdomain of at most 63 characters; a pool name DNS subdomains joined by `/` (<= 253);
  attribute and capacity names `<domain>/<C identifier>` or a bare identifier (domain <= 63, id <= 32);
- limits: 32 selectors and 32 configs per class or request; 32 requests, 32 constraints and 32 configs per claim;
  8 subrequests; 128 devices per slice, 64 when any device has taints, consumesCounters or list attributes; 32
  attributes and capacities together per device; string and version values <= 64 characters, versions strict
  semver; 16 taints, 16 tolerations; 256 `reservedFor` entries (only with an allocation); 32 results per allocation;
  opaque parameters <= 10 KiB;
- CEL selectors compile in Kubernetes' DRA environment (`api.cel`): a syntax or type error, an expression over
  10 KiB, or one whose worst-case cost is over the limit (hostile: deeply nested, huge, unbounded loops) is refused
  at its path, naming the expression;
- one of: a slice's `nodeName` | `nodeSelector` (exactly one term) | `allNodes` | `perDeviceNodeSelection`;
  `devices` or `sharedCounters`, not both; a request's `exactly` or `firstAvailable`; `count` only with ExactCount.
Each field's docstring is its description in the served OpenAPI documents (`kubectl explain`): Kubernetes' 1.32
definitions, which the server serves for the other built-in kinds, lack resource.k8s.io/v1 (GA in 1.34), so these
models are the DRA kinds' schemas; node selectors and single quantities point at Kubernetes' NodeSelector and
Quantity (`api.definitions`).

`update_problems(current, new)` is the rule set of an update (immutability): a ResourceSlice's driver, pool name and
node name, a ResourceClaim's and a template's spec, and a claim's allocation once set.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from devplace import errors
from devplace.api import _cel as cel
from devplace.api import _names as names
from devplace.api._dradevices import GROUP_VERSION, MAX_DEVICES, MAX_DEVICES_WITH_EXTRAS
from devplace.api._meta import Model, Resource
from devplace.api._quantity import is_quantity
from devplace.api._registry import register

MAX_SELECTORS = 32
MAX_CONFIGS = 32
MAX_REQUESTS = 32
MAX_SUBREQUESTS = 8
MAX_CONSTRAINTS = 32
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_TAINTS = 16
MAX_TOLERATIONS = 16
MAX_RESERVED_FOR = 256
MAX_RESULTS = 32
MAX_SHARED_COUNTERS = 8
MAX_COUNTERS = 32
MAX_PARAMETERS_BYTES = 10 * 1024
MAX_DRIVER_LENGTH = 63
MAX_POOL_NAME_LENGTH = 253

_C_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXTENDED = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_SHARE_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _one_line_docs(cls: type[BaseModel]) -> None:
    """A field's docstring, on one line, as its description (what `kubectl explain` prints and wraps itself)."""
    for info in cls.model_fields.values():
        if info.description:
            info.description = " ".join(info.description.split())


class _Open(Model):
    """A nested Kubernetes type whose fields devplace checks in `problems` (unknown fields still refused). A field's
    docstring is its description in the OpenAPI documents (`kubectl explain`)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        _one_line_docs(cls)


class _Kind(Resource):
    """A DRA kind: stored as written (fields left out stay out, as Kubernetes' `omitempty` leaves them out)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        _one_line_docs(cls)

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_unset=True, exclude_none=True, mode="json")


QuantityText = str
"""A Kubernetes quantity (`32Gi`, `1`, `100m`), written as a string as devplace's other quantities are (a bare JSON
number is refused naming the field); its grammar is checked by `problems` and by Kubernetes' Quantity schema."""


class CELSelector(_Open):
    """A CEL expression that selects a device."""

    expression: str
    """The CEL expression, at most 10 KiB, evaluated per device; it must return a bool. It reads `device.driver`,
    `device.attributes[<domain>].<id>`, `device.capacity[<domain>].<id>` and `device.allowMultipleAllocations`; an
    attribute a device lacks is an error, so guard with `"<id>" in device.attributes[<domain>]`. Its worst-case
    cost must stay under 1,000,000 units."""


class DeviceSelector(_Open):
    """One way to select devices: a CEL expression."""

    cel: CELSelector | None = None
    """The CEL expression a device must satisfy."""


class OpaqueConfiguration(_Open):
    """Configuration in a format only the named driver reads."""

    driver: str
    """The DRA driver the parameters are for (a DNS subdomain of at most 63 characters)."""
    parameters: Any = None
    """The driver's configuration, any JSON object (at most 10 KiB), handed to the driver as written."""


class DeviceClassConfiguration(_Open):
    """Configuration for the devices of the class."""

    opaque: OpaqueConfiguration | None = None
    """Driver-specific configuration."""


class DeviceClassSpec(_Open):
    """Which devices belong to the class and how they are configured."""

    selectors: list[DeviceSelector] = Field(default_factory=list)
    """Selectors a device must all satisfy to be in the class (at most 32)."""
    config: list[DeviceClassConfiguration] = Field(default_factory=list)
    """Configuration applied to every device allocated through the class (at most 32 entries)."""
    extended_resource_name: str | None = None
    """An extended resource (`example.com/gpu`) a pod may request in its container resources instead of writing a
    ResourceClaim; the scheduler then allocates devices of this class for it (KEP-5004)."""


def _many(path: str, limit: int, count: int | None = None, why: str = "") -> errors.FieldError:
    """Kubernetes' `Too many` error: a list over its limit."""
    shown = f"{count}: " if count is not None else ""
    return errors.FieldError(path, f"Too many: {shown}must have at most {limit} items{why}")


def _bad(path: str, value: object, why: str) -> errors.FieldError:
    """Kubernetes' `Invalid value` error."""
    return errors.FieldError(path, f"Invalid value: {value!r}: {why}")


# -- shared checks ------------------------------------------------------------------------------------------------


def _driver_problem(driver: str) -> str | None:
    if not driver:
        return "Required value"
    if len(driver) > MAX_DRIVER_LENGTH:
        return f"must be no more than {MAX_DRIVER_LENGTH} characters"
    return names.dns1123_subdomain_problem(driver)


def _qualified_problem(name: str) -> str | None:
    """Why `name` is not a QualifiedName (`<domain>/<C identifier>` or a bare identifier), or None."""
    domain, sep, ident = name.rpartition("/")
    if sep:
        if not domain:
            return "the domain must not be empty"
        if len(domain) > cel.MAX_DOMAIN_LENGTH:
            return f"the domain must be no more than {cel.MAX_DOMAIN_LENGTH} characters"
        problem = names.dns1123_subdomain_problem(domain)
        if problem:
            return f"the domain {problem}"
    if not ident:
        return "the name must not be empty"
    if len(ident) > cel.MAX_ID_LENGTH:
        return f"the name must be no more than {cel.MAX_ID_LENGTH} characters"
    if not _C_ID.fullmatch(ident):
        return "the name must be a C identifier ([A-Za-z_][A-Za-z0-9_]*)"
    return None


def selectors_problems(path: str, selectors: list[DeviceSelector]) -> Iterator[errors.FieldError]:
    """Kubernetes' checks of a selector list: at most 32, each a CEL expression that compiles within the limits."""
    if len(selectors) > MAX_SELECTORS:
        yield errors.FieldError(path, f"Too many: {len(selectors)}: must have at most {MAX_SELECTORS} items")
    for i, selector in enumerate(selectors):
        if selector.cel is None:
            yield errors.FieldError(f"{path}[{i}].cel", "Required value")
            continue
        expression = selector.cel.expression
        if not expression:
            yield errors.FieldError(f"{path}[{i}].cel.expression", "Required value")
            continue
        problem = cel.selector_problem(expression)
        if problem is not None:
            shown = expression if len(expression) <= 200 else expression[:197] + "..."
            yield errors.FieldError(f"{path}[{i}].cel.expression", f"Invalid value: {shown!r}: {problem}")


def _opaque_problems(path: str, opaque: OpaqueConfiguration | None) -> Iterator[errors.FieldError]:
    if opaque is None:
        yield errors.FieldError(path, "Required value: exactly one of opaque")
        return
    problem = _driver_problem(opaque.driver)
    if problem:
        yield errors.FieldError(f"{path}.opaque.driver", problem)
    if opaque.parameters is None:
        yield errors.FieldError(f"{path}.opaque.parameters", "Required value")
    elif len(json.dumps(opaque.parameters)) > MAX_PARAMETERS_BYTES:
        yield errors.FieldError(f"{path}.opaque.parameters", f"Too long: at most {MAX_PARAMETERS_BYTES} bytes")


def _extended_resource_problem(name: str) -> str | None:
    """KEP-5004: an extended resource name (`example.com/gpu`, not in kubernetes.io, not `requests.`-prefixed)."""
    domain, sep, ident = name.partition("/")
    if not sep or not domain or not ident:
        return "must be a qualified name <domain>/<name>"
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io") or name.startswith("requests."):
        return "must not be in the kubernetes.io domain or start with requests."
    problem = names.dns1123_subdomain_problem(domain)
    if problem:
        return f"the domain {problem}"
    if len(ident) > 63 or not _EXTENDED.fullmatch(ident):
        return "the name must be at most 63 characters of [-A-Za-z0-9_.], starting and ending alphanumeric"
    return None


@register
class DeviceClass(_Kind):
    """A class of devices, selected by CEL over their driver, attributes and capacity; a claim request names one."""

    KIND: ClassVar[str] = "DeviceClass"
    PLURAL: ClassVar[str] = "deviceclasses"
    NAMESPACED: ClassVar[bool] = False
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = (GROUP_VERSION,)
    spec: DeviceClassSpec
    """The class's selectors, configuration and extended resource."""

    def problems(self) -> Iterator[errors.FieldError]:
        yield from selectors_problems("spec.selectors", self.spec.selectors)
        if len(self.spec.config) > MAX_CONFIGS:
            yield errors.FieldError("spec.config", f"Too many: must have at most {MAX_CONFIGS} items")
        for i, config in enumerate(self.spec.config):
            yield from _opaque_problems(f"spec.config[{i}]", config.opaque)
        if self.spec.extended_resource_name is not None:
            problem = _extended_resource_problem(self.spec.extended_resource_name)
            if problem:
                yield errors.FieldError("spec.extendedResourceName", problem)


# -- ResourceSlice -------------------------------------------------------------------------------------------------


class ResourcePool(_Open):
    """The pool a slice's devices belong to; a pool may span several slices."""

    name: str
    """The pool's name, unique per driver: DNS subdomains joined by `/`, at most 253 characters. Immutable."""
    generation: int = 0
    """Bumped by the driver on every change of the pool; only slices of the highest generation count."""
    resource_slice_count: int = 0
    """How many slices the pool has in this generation (more than 0); fewer present means the pool is incomplete."""


class DeviceAttribute(_Open):
    """An attribute's value: exactly one of int, bool, string or version."""

    int_value: int | None = Field(default=None, alias="int")
    """A number (int64)."""
    bool_value: bool | None = Field(default=None, alias="bool")
    """true or false."""
    string_value: str | None = Field(default=None, alias="string")
    """A string of at most 64 characters."""
    version_value: str | None = Field(default=None, alias="version")
    """A semantic version 2.0.0 (`1.2.3`, `1.0.0-rc.1`), at most 64 characters."""


class CapacityRequestPolicyRange(_Open):
    """A range of amounts a request may consume."""

    min: QuantityText
    """The least amount consumed."""
    max: QuantityText | None = None
    """The most amount consumed (at most the capacity)."""
    step: QuantityText | None = None
    """Amounts above min are min plus a multiple of step (a request is rounded up to one)."""


class CapacityRequestPolicy(_Open):
    """How much of a shared device's capacity one allocation consumes."""

    default: QuantityText | None = None
    """What an allocation consumes when its request names no amount."""
    valid_values: list[QuantityText] | None = None
    """The amounts an allocation may consume, ascending (at most 10); a request is rounded up to the next."""
    valid_range: CapacityRequestPolicyRange | None = None
    """The range an allocation's amount must lie in."""


class DeviceCapacity(_Open):
    """An amount a device has, e.g. its memory."""

    value: QuantityText
    """The amount, a quantity (`80Gi`, `4`)."""
    request_policy: CapacityRequestPolicy | None = None
    """For a device shared among allocations (allowMultipleAllocations): what each allocation consumes."""


class Counter(_Open):
    """An amount of a shared counter."""

    value: QuantityText
    """The amount, a quantity."""


class CounterSet(_Open):
    """Counters that several devices of the pool draw from (partitionable devices)."""

    name: str
    """The counter set's name, unique in the pool (a DNS label)."""
    counters: dict[str, Counter] = Field(default_factory=dict)
    """The counters by name (at most 32)."""


class DeviceCounterConsumption(_Open):
    """What a device takes from one counter set of its pool while allocated."""

    counter_set: str
    """The name of the pool's counter set."""
    counters: dict[str, Counter] = Field(default_factory=dict)
    """The amounts taken, by counter name."""


class DeviceTaint(_Open):
    """A taint on a device: claims that do not tolerate it do not get the device (or lose it, with NoExecute)."""

    key: str
    """The taint's key (a label key)."""
    value: str | None = None
    """The taint's value (a label value)."""
    effect: Literal["None", "NoSchedule", "NoExecute"]
    """None (informational), NoSchedule (not allocated to new claims) or NoExecute (also evicts its pods)."""
    time_added: str | None = None
    """When the taint was added (RFC 3339)."""


class Device(_Open):
    """One device of a slice: its name, attributes and capacity, and how it may be shared."""

    name: str
    """The device's name, unique in its pool (a DNS label)."""
    attributes: dict[str, DeviceAttribute] = Field(default_factory=dict)
    """Attributes by qualified name (`<domain>/<id>`, or a bare id in the driver's domain); at most 32 together
    with capacity."""
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict)
    """Capacities by qualified name, like attributes."""
    consumes_counters: list[DeviceCounterConsumption] = Field(default_factory=list)
    """Amounts the device takes from the pool's counter sets (at most 2 entries)."""
    node_name: str | None = None
    """With perDeviceNodeSelection: the node the device is local to."""
    node_selector: dict[str, Any] | None = None
    """With perDeviceNodeSelection: the nodes that can use the device."""
    all_nodes: bool | None = None
    """With perDeviceNodeSelection: every node can use the device."""
    allow_multiple_allocations: bool | None = None
    """Whether several claims may be allocated the device at once (sharing its capacity)."""
    taints: list[DeviceTaint] = Field(default_factory=list)
    """Taints on the device (at most 16)."""
    binds_to_node: bool | None = None
    """Whether an allocation of the device is tied to the node it was scheduled on."""
    binding_conditions: list[str] = Field(default_factory=list)
    """Conditions of the claim that must be true before a pod using the device is bound (at most 4)."""
    binding_failure_conditions: list[str] = Field(default_factory=list)
    """Conditions of the claim that, when true, make the scheduler try again elsewhere (at most 4)."""


class ResourceSliceSpec(_Open):
    """A driver's devices in one pool, and which nodes can reach them."""

    driver: str
    """The DRA driver publishing the devices (a DNS subdomain of at most 63 characters). Immutable."""
    pool: ResourcePool
    """The pool the devices belong to."""
    node_name: str | None = None
    """The node the devices are local to. One of nodeName, nodeSelector, allNodes and perDeviceNodeSelection is
    set. Immutable."""
    node_selector: dict[str, Any] | None = None
    """The nodes that can use the devices (exactly one term)."""
    all_nodes: bool | None = None
    """Every node can use the devices."""
    per_device_node_selection: bool | None = None
    """Each device says which nodes can use it (its nodeName, nodeSelector or allNodes)."""
    devices: list[Device] = Field(default_factory=list)
    """The devices (at most 128; 64 when any has taints or consumesCounters)."""
    shared_counters: list[CounterSet] = Field(default_factory=list)
    """Counter sets the pool's devices draw from (at most 8); a slice has devices or sharedCounters, not both."""


def _attribute_problems(path: str, value: DeviceAttribute) -> Iterator[errors.FieldError]:
    set_ = [k for k in ("int", "bool", "string", "version") if getattr(value, f"{k}_value") is not None]
    if len(set_) != 1:
        yield errors.FieldError(path, f"Invalid value: exactly one value must be specified (found {len(set_)})")
        return
    text = value.string_value if value.string_value is not None else value.version_value
    if text is not None and len(text) > cel.MAX_VALUE_LENGTH:
        yield errors.FieldError(f"{path}.{set_[0]}", f"Too long: may not be more than {cel.MAX_VALUE_LENGTH} bytes")
    elif value.version_value is not None:
        try:
            cel.parse_semver(value.version_value)
        except ValueError:
            yield errors.FieldError(
                f"{path}.version", f"Invalid value: {value.version_value!r}: must be a semantic version"
            )


def _counters_problems(path: str, counters: Mapping[str, Counter]) -> Iterator[errors.FieldError]:
    if len(counters) > MAX_COUNTERS:
        yield _many(path, MAX_COUNTERS, len(counters))
    for name, counter in counters.items():
        if not is_quantity(counter.value):
            yield _bad(f"{path}[{name}].value", counter.value, "not a quantity")


def _device_problems(path: str, device: Device, per_device: bool) -> Iterator[errors.FieldError]:
    problem = names.dns1123_label_problem(device.name)
    if problem:
        yield errors.FieldError(f"{path}.name", problem)
    keys = len(device.attributes) + len(device.capacity)
    if keys > MAX_ATTRIBUTES_AND_CAPACITIES:
        yield _many(path, MAX_ATTRIBUTES_AND_CAPACITIES, keys, " (attributes and capacities combined)")
    for name, attribute in device.attributes.items():
        problem = _qualified_problem(name)
        if problem:
            yield errors.FieldError(f"{path}.attributes[{name}]", problem)
        yield from _attribute_problems(f"{path}.attributes[{name}]", attribute)
    for name, capacity in device.capacity.items():
        problem = _qualified_problem(name)
        if problem:
            yield errors.FieldError(f"{path}.capacity[{name}]", problem)
        if not is_quantity(str(capacity.value)):
            yield _bad(f"{path}.capacity[{name}].value", capacity.value, "not a quantity")
        policy = capacity.request_policy
        if policy is not None and not device.allow_multiple_allocations:
            yield errors.FieldError(
                f"{path}.capacity[{name}].requestPolicy", "Forbidden: only allowed with allowMultipleAllocations"
            )
        if policy is not None:
            where = f"{path}.capacity[{name}].requestPolicy"
            amounts = [("default", policy.default)]
            amounts += [(f"validValues[{i}]", v) for i, v in enumerate(policy.valid_values or [])]
            if policy.valid_range is not None:
                amounts += [(f"validRange.{k}", getattr(policy.valid_range, k)) for k in ("min", "max", "step")]
            for field, amount in amounts:
                if amount is not None and not is_quantity(amount):
                    yield _bad(f"{where}.{field}", amount, "not a quantity")
    for i, consumption in enumerate(device.consumes_counters):
        yield from _counters_problems(f"{path}.consumesCounters[{i}].counters", consumption.counters)
    if len(device.taints) > MAX_TAINTS:
        yield errors.FieldError(f"{path}.taints", f"Too many: must have at most {MAX_TAINTS} items")
    for kind in ("binding_conditions", "binding_failure_conditions"):
        if len(getattr(device, kind)) > 4:
            wire = "bindingConditions" if kind == "binding_conditions" else "bindingFailureConditions"
            yield errors.FieldError(f"{path}.{wire}", "Too many: must have at most 4 items")
    chosen = [k for k in ("node_name", "node_selector", "all_nodes") if getattr(device, k)]
    if per_device and len(chosen) != 1:
        yield errors.FieldError(path, "exactly one of nodeName, nodeSelector or allNodes is required")
    if not per_device and chosen:
        yield errors.FieldError(path, "nodeName, nodeSelector and allNodes need spec.perDeviceNodeSelection")


@register
class ResourceSlice(_Kind):
    """A driver's devices in one pool, on one node (nodeName), some nodes (nodeSelector) or all (allNodes)."""

    KIND: ClassVar[str] = "ResourceSlice"
    PLURAL: ClassVar[str] = "resourceslices"
    NAMESPACED: ClassVar[bool] = False
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = (GROUP_VERSION,)
    spec: ResourceSliceSpec
    """The driver, pool, node choice and devices."""

    def problems(self) -> Iterator[errors.FieldError]:
        spec = self.spec
        problem = _driver_problem(spec.driver)
        if problem:
            yield errors.FieldError("spec.driver", problem)
        yield from _pool_problems(spec.pool)
        chosen = [
            w
            for w, k in (
                ("nodeName", "node_name"),
                ("nodeSelector", "node_selector"),
                ("allNodes", "all_nodes"),
                ("perDeviceNodeSelection", "per_device_node_selection"),
            )
            if getattr(spec, k)
        ]
        if len(chosen) != 1:
            found = ", ".join(chosen) or "none"
            yield errors.FieldError(
                "spec",
                f"exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection is required ({found})",
            )
        if spec.node_name:
            problem = names.dns1123_subdomain_problem(spec.node_name)
            if problem:
                yield errors.FieldError("spec.nodeName", problem)
        if spec.node_selector is not None:
            terms = spec.node_selector.get("nodeSelectorTerms")
            if not isinstance(terms, list) or len(terms) != 1:
                yield errors.FieldError("spec.nodeSelector.nodeSelectorTerms", "must have exactly one term")
        if spec.devices and spec.shared_counters:
            yield errors.FieldError("spec", "devices and sharedCounters are mutually exclusive")
        if len(spec.shared_counters) > MAX_SHARED_COUNTERS:
            yield errors.FieldError("spec.sharedCounters", f"Too many: must have at most {MAX_SHARED_COUNTERS} items")
        for i, counter_set in enumerate(spec.shared_counters):
            yield from _counters_problems(f"spec.sharedCounters[{i}].counters", counter_set.counters)
        extras = any(d.taints or d.consumes_counters or _has_lists(d) for d in spec.devices)
        limit = MAX_DEVICES_WITH_EXTRAS if extras else MAX_DEVICES
        if len(spec.devices) > limit:
            why = " when a device has taints, consumesCounters or list attributes" if extras else ""
            yield _many("spec.devices", limit, len(spec.devices), why)
        seen: set[str] = set()
        for i, device in enumerate(spec.devices):
            if device.name in seen:
                yield errors.FieldError(f"spec.devices[{i}].name", f"Duplicate value: {device.name!r}")
            seen.add(device.name)
            yield from _device_problems(f"spec.devices[{i}]", device, bool(spec.per_device_node_selection))


def _has_lists(device: Device) -> bool:
    return False  # list-typed attributes (DRAListTypeAttributes, alpha) are refused by the model


def _pool_problems(pool: ResourcePool) -> Iterator[errors.FieldError]:
    if not pool.name:
        yield errors.FieldError("spec.pool.name", "Required value")
    elif len(pool.name) > MAX_POOL_NAME_LENGTH:
        yield errors.FieldError("spec.pool.name", f"Too long: may not be more than {MAX_POOL_NAME_LENGTH} bytes")
    else:
        for part in pool.name.split("/"):
            problem = names.dns1123_subdomain_problem(part)
            if problem:
                yield errors.FieldError("spec.pool.name", f"Invalid value: {pool.name!r}: {problem}")
                break
    if pool.generation < 0:
        yield errors.FieldError("spec.pool.generation", "Invalid value: must be greater than or equal to 0")
    if pool.resource_slice_count <= 0:
        yield errors.FieldError("spec.pool.resourceSliceCount", "Invalid value: must be greater than zero")


# -- ResourceClaim and ResourceClaimTemplate ---------------------------------------------------------------------


class DeviceToleration(_Open):
    """Tolerates a device taint whose key, value and effect it matches."""

    key: str | None = None
    """The taint key it matches; empty matches every key (with operator Exists)."""
    operator: Literal["Equal", "Exists"] = "Equal"
    """Equal (the taint's value must equal value) or Exists (any value)."""
    value: str | None = None
    """The taint value it matches (empty with Exists)."""
    effect: Literal["None", "NoSchedule", "NoExecute"] | None = None
    """The taint effect it matches; empty matches every effect."""
    toleration_seconds: int | None = None
    """With NoExecute: how long the device is kept after the taint appears; unset is forever."""


class CapacityRequirements(_Open):
    """Amounts of a device's capacity a request needs."""

    requests: dict[str, QuantityText] = Field(default_factory=dict)
    """Amounts by capacity name: a device must have at least these; on a shared device they are consumed."""


class _RequestFields(_Open):
    device_class_name: str
    """The DeviceClass whose selectors and configuration apply (a DNS subdomain)."""
    selectors: list[DeviceSelector] = Field(default_factory=list)
    """More selectors a device must satisfy, beside the class's (at most 32)."""
    allocation_mode: Literal["ExactCount", "All"] | None = None
    """ExactCount (the default: count devices) or All (every matching device, at least one)."""
    count: int | None = None
    """With ExactCount: how many devices (default 1)."""
    tolerations: list[DeviceToleration] = Field(default_factory=list)
    """Device taints the request tolerates (at most 16)."""
    capacity: CapacityRequirements | None = None
    """The capacity each allocated device must provide."""


class ExactDeviceRequest(_RequestFields):
    """A request for devices of one class."""

    admin_access: bool | None = None
    """Access for administration: the devices stay available to other claims (needs the namespace label
    resource.kubernetes.io/admin-access=true)."""


class DeviceSubRequest(_RequestFields):
    """One alternative of a firstAvailable request."""

    name: str
    """The alternative's name, unique in the request (a DNS label); results name it `<request>/<name>`."""


class DeviceRequest(_Open):
    """One request for devices: exactly one of exactly or firstAvailable."""

    name: str
    """The request's name, unique in the claim (a DNS label); constraints, config and containers name it."""
    exactly: ExactDeviceRequest | None = None
    """The devices wanted, of one class."""
    first_available: list[DeviceSubRequest] | None = None
    """Alternatives tried in order, the first that can be allocated wins (at most 8)."""


class DeviceConstraint(_Open):
    """A rule across the devices of several requests: exactly one of matchAttribute or distinctAttribute."""

    requests: list[str] = Field(default_factory=list)
    """The requests it spans (`<request>` or `<request>/<subrequest>`); empty means all."""
    match_attribute: str | None = None
    """A fully qualified attribute every chosen device has, with the same value."""
    distinct_attribute: str | None = None
    """A fully qualified attribute whose value differs on every chosen device."""


class DeviceClaimConfiguration(_Open):
    """Configuration for some or all requests of the claim."""

    requests: list[str] = Field(default_factory=list)
    """The requests it applies to; empty means all."""
    opaque: OpaqueConfiguration | None = None
    """Driver-specific configuration."""


class DeviceClaim(_Open):
    """The devices a claim asks for."""

    requests: list[DeviceRequest] = Field(default_factory=list)
    """The requests, all of which must be allocated (at most 32)."""
    constraints: list[DeviceConstraint] = Field(default_factory=list)
    """Rules across the requests' devices (at most 32)."""
    config: list[DeviceClaimConfiguration] = Field(default_factory=list)
    """Configuration for the drivers of the allocated devices (at most 32); allocation ignores it."""


class ResourceClaimSpec(_Open):
    """What a claim asks for. Immutable."""

    devices: DeviceClaim = Field(default_factory=DeviceClaim)
    """The devices requested, their constraints and configuration."""


class ResourceClaimConsumerReference(_Open):
    """An object the claim is reserved for, usually a pod."""

    api_group: str | None = None
    """The object's API group; empty for the core group."""
    resource: str
    """The object's resource (plural), e.g. pods."""
    name: str
    """The object's name."""
    uid: str
    """The object's UID, unique among the entries."""


class DeviceRequestAllocationResult(_Open):
    """One allocated device."""

    model_config = ConfigDict(extra="allow")
    request: str
    """The request it was allocated for (`<request>` or `<request>/<subrequest>`)."""
    driver: str
    """The device's driver."""
    pool: str
    """The device's pool."""
    device: str
    """The device's name in its pool."""
    share_id: str | None = None
    """On a shared device: this allocation's share (a lower-case UUID)."""


class DeviceAllocationResult(_Open):
    """The devices allocated and the configuration for them."""

    model_config = ConfigDict(extra="allow")
    results: list[DeviceRequestAllocationResult] = Field(default_factory=list)
    """One entry per allocated device (at most 32)."""
    config: list[dict[str, Any]] = Field(default_factory=list)
    """The class and claim configuration for the allocated devices, in that order."""


class AllocationResult(_Open):
    """Where the claim's devices are: written once by the scheduler."""

    model_config = ConfigDict(extra="allow")
    devices: DeviceAllocationResult | None = None
    """The allocated devices."""
    node_selector: dict[str, Any] | None = None
    """The nodes from which the devices can be used; unset means every node."""
    allocation_timestamp: str | None = None
    """When the claim was allocated (RFC 3339)."""


class ResourceClaimStatus(_Open):
    """The claim's allocation, its users and the drivers' reports."""

    allocation: AllocationResult | None = None
    """Set once the claim is allocated; immutable afterwards."""
    reserved_for: list[ResourceClaimConsumerReference] = Field(default_factory=list)
    """The pods (or other objects) using the claim, at most 256; only with an allocation."""
    devices: list[dict[str, Any]] = Field(default_factory=list)
    """What the drivers report per allocated device (conditions, data, network data)."""


def _request_fields_problems(path: str, request: _RequestFields) -> Iterator[errors.FieldError]:
    if not request.device_class_name:
        yield errors.FieldError(f"{path}.deviceClassName", "Required value")
    else:
        problem = names.dns1123_subdomain_problem(request.device_class_name)
        if problem:
            yield errors.FieldError(f"{path}.deviceClassName", problem)
    yield from selectors_problems(f"{path}.selectors", request.selectors)
    mode = request.allocation_mode or "ExactCount"
    if mode == "ExactCount" and request.count is not None and request.count <= 0:
        yield errors.FieldError(f"{path}.count", f"Invalid value: {request.count}: must be greater than zero")
    if mode == "All" and request.count is not None:
        yield errors.FieldError(f"{path}.count", "Invalid value: must not be set with allocationMode All")
    if len(request.tolerations) > MAX_TOLERATIONS:
        yield errors.FieldError(f"{path}.tolerations", f"Too many: must have at most {MAX_TOLERATIONS} items")
    for i, toleration in enumerate(request.tolerations):
        if toleration.operator == "Exists" and toleration.value:
            yield errors.FieldError(f"{path}.tolerations[{i}].value", "Invalid value: must be empty with Exists")
        if toleration.key:
            problem = names.label_key_problem(toleration.key)
            if problem:
                yield errors.FieldError(f"{path}.tolerations[{i}].key", problem)
    if request.capacity is not None:
        for name, amount in request.capacity.requests.items():
            if not is_quantity(str(amount)):
                yield _bad(f"{path}.capacity.requests[{name}]", amount, "not a quantity")


def claim_spec_problems(path: str, spec: ResourceClaimSpec) -> Iterator[errors.FieldError]:
    """Kubernetes' checks of a ResourceClaimSpec at `path` (`spec`, or `spec.spec` in a template)."""
    devices = spec.devices
    requests = devices.requests
    if len(requests) > MAX_REQUESTS:
        yield errors.FieldError(f"{path}.devices.requests", f"Too many: must have at most {MAX_REQUESTS} items")
    known: set[str] = set()
    for i, request in enumerate(requests):
        where = f"{path}.devices.requests[{i}]"
        problem = names.dns1123_label_problem(request.name)
        if problem:
            yield errors.FieldError(f"{where}.name", problem)
        if request.name in known:
            yield errors.FieldError(f"{where}.name", f"Duplicate value: {request.name!r}")
        known.add(request.name)
        if (request.exactly is None) == (request.first_available is None):
            yield errors.FieldError(where, "exactly one of exactly or firstAvailable is required")
        if request.exactly is not None:
            yield from _request_fields_problems(f"{where}.exactly", request.exactly)
        if request.first_available is not None:
            subs = request.first_available
            if not subs:
                yield errors.FieldError(f"{where}.firstAvailable", "Required value")
            if len(subs) > MAX_SUBREQUESTS:
                yield _many(f"{where}.firstAvailable", MAX_SUBREQUESTS, len(subs))
            seen: set[str] = set()
            for j, sub in enumerate(subs):
                problem = names.dns1123_label_problem(sub.name)
                if problem:
                    yield errors.FieldError(f"{where}.firstAvailable[{j}].name", problem)
                if sub.name in seen:
                    yield errors.FieldError(f"{where}.firstAvailable[{j}].name", f"Duplicate value: {sub.name!r}")
                seen.add(sub.name)
                known.add(f"{request.name}/{sub.name}")
                yield from _request_fields_problems(f"{where}.firstAvailable[{j}]", sub)
    if len(devices.constraints) > MAX_CONSTRAINTS:
        yield errors.FieldError(f"{path}.devices.constraints", f"Too many: must have at most {MAX_CONSTRAINTS} items")
    for i, constraint in enumerate(devices.constraints):
        where = f"{path}.devices.constraints[{i}]"
        if (constraint.match_attribute is None) == (constraint.distinct_attribute is None):
            yield errors.FieldError(where, "exactly one of matchAttribute or distinctAttribute is required")
        for attribute, wire in (
            (constraint.match_attribute, "matchAttribute"),
            (constraint.distinct_attribute, "distinctAttribute"),
        ):
            if attribute is not None and ("/" not in attribute or _qualified_problem(attribute)):
                yield errors.FieldError(f"{where}.{wire}", "must be a fully qualified name <domain>/<id>")
        for j, name in enumerate(constraint.requests):
            if name not in known:
                yield _bad(f"{where}.requests[{j}]", name, "must be the name of a request")
    if len(devices.config) > MAX_CONFIGS:
        yield errors.FieldError(f"{path}.devices.config", f"Too many: must have at most {MAX_CONFIGS} items")
    for i, config in enumerate(devices.config):
        yield from _opaque_problems(f"{path}.devices.config[{i}]", config.opaque)
        for j, name in enumerate(config.requests):
            if name not in known:
                yield _bad(f"{path}.devices.config[{i}].requests[{j}]", name, "must be the name of a request")


@register
class ResourceClaim(_Kind):
    """A request for devices; the scheduler allocates them (`status.allocation`) and reserves them for pods."""

    KIND: ClassVar[str] = "ResourceClaim"
    PLURAL: ClassVar[str] = "resourceclaims"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = (GROUP_VERSION,)
    spec: ResourceClaimSpec
    """What the claim asks for. Immutable."""
    status: ResourceClaimStatus | None = None
    """The allocation and reservations, written by the scheduler and the drivers."""

    def problems(self) -> Iterator[errors.FieldError]:
        yield from claim_spec_problems("spec", self.spec)
        status = self.status
        if status is None:
            return
        if len(status.reserved_for) > MAX_RESERVED_FOR:
            yield _many("status.reservedFor", MAX_RESERVED_FOR, len(status.reserved_for))
        if status.reserved_for and status.allocation is None:
            yield errors.FieldError("status.reservedFor", "Forbidden: may not be specified when `allocated` is not set")
        uids: set[str] = set()
        for i, ref in enumerate(status.reserved_for):
            if ref.uid in uids:
                yield errors.FieldError(f"status.reservedFor[{i}].uid", f"Duplicate value: {ref.uid!r}")
            uids.add(ref.uid)
        allocation = status.allocation
        if allocation is not None and allocation.devices is not None:
            results = allocation.devices.results
            if len(results) > MAX_RESULTS:
                yield _many("status.allocation.devices.results", MAX_RESULTS, len(results))
            for i, result in enumerate(results):
                if result.share_id is not None and not _SHARE_ID.fullmatch(result.share_id):
                    yield errors.FieldError(
                        f"status.allocation.devices.results[{i}].shareID", "must be a lower-case UUID"
                    )


class ResourceClaimTemplateSpec(_Open):
    """The claim to create for each pod."""

    metadata: dict[str, Any] | None = None
    """Labels and annotations copied to every claim made from the template."""
    spec: ResourceClaimSpec
    """The spec of every claim made from the template."""


@register
class ResourceClaimTemplate(_Kind):
    """A ResourceClaim to create per pod: the pod's `spec.resourceClaims[].resourceClaimTemplateName` names it."""

    KIND: ClassVar[str] = "ResourceClaimTemplate"
    PLURAL: ClassVar[str] = "resourceclaimtemplates"
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = (GROUP_VERSION,)
    spec: ResourceClaimTemplateSpec
    """The claim to create for each pod. Immutable."""

    def problems(self) -> Iterator[errors.FieldError]:
        yield from claim_spec_problems("spec.spec", self.spec.spec)


# -- updates ------------------------------------------------------------------------------------------------------


def _at(obj: Mapping[str, Any], *path: str) -> Any:
    value: Any = obj
    for step in path:
        value = value.get(step) if isinstance(value, Mapping) else None
    return value


_IMMUTABLE: dict[str, tuple[tuple[str, ...], ...]] = {
    "ResourceSlice": (("spec", "driver"), ("spec", "pool", "name"), ("spec", "nodeName")),
    "ResourceClaim": (("spec",),),
    "ResourceClaimTemplate": (("spec",),),
}


def update_problems(current: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[errors.FieldError]:
    """What Kubernetes' update validation refuses when `new` replaces `current` (immutable fields)."""
    kind = new.get("kind")
    for path in _IMMUTABLE.get(str(kind), ()):
        if _at(current, *path) != _at(new, *path):
            yield errors.FieldError(".".join(path), "field is immutable")
    if kind == "ResourceClaim":
        before = _at(current, "status", "allocation")
        if before is not None and _at(new, "status", "allocation") not in (None, before):
            yield errors.FieldError("status.allocation", "field is immutable")


# -- the DRA fields of a Pod -------------------------------------------------------------------------------------


def pod_claim_problems(path: str, spec: Any) -> Iterator[errors.FieldError]:
    """`spec.resourceClaims[]` ({name, exactly one of resourceClaimName | resourceClaimTemplateName}) and
    `containers[].resources.claims[]` ({name of a pod claim, request}), as Kubernetes validates them."""
    if not isinstance(spec, Mapping):
        return
    claims = spec.get("resourceClaims") or []
    declared: set[str] = set()
    for i, claim in enumerate(claims if isinstance(claims, list) else []):
        where = f"{path}.resourceClaims[{i}]"
        if not isinstance(claim, Mapping):
            yield errors.FieldError(where, "must be an object")
            continue
        name = claim.get("name")
        problem = names.dns1123_label_problem(name) if isinstance(name, str) else "Required value"
        if problem:
            yield errors.FieldError(f"{where}.name", problem)
        elif name in declared:
            yield errors.FieldError(f"{where}.name", f"Duplicate value: {name!r}")
        declared.add(str(name))
        sources = [k for k in ("resourceClaimName", "resourceClaimTemplateName") if claim.get(k)]
        if len(sources) != 1:
            yield errors.FieldError(where, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`")
        for key in sources:
            problem = names.dns1123_subdomain_problem(str(claim[key]))
            if problem:
                yield errors.FieldError(f"{where}.{key}", problem)
    for group in ("initContainers", "containers"):
        containers = spec.get(group) or []
        for c, container in enumerate(containers if isinstance(containers, list) else []):
            resources = container.get("resources") if isinstance(container, Mapping) else None
            used = resources.get("claims") if isinstance(resources, Mapping) else None
            seen_refs: set[tuple[str, str]] = set()
            for j, ref in enumerate(used if isinstance(used, list) else []):
                where = f"{path}.{group}[{c}].resources.claims[{j}]"
                name = ref.get("name") if isinstance(ref, Mapping) else None
                if not isinstance(name, str) or not name:
                    yield errors.FieldError(f"{where}.name", "Required value")
                    continue
                if name not in declared:
                    yield errors.FieldError(f"{where}.name", f"Not found: {name!r}: must be one of spec.resourceClaims")
                pair = (name, str(ref.get("request") or ""))
                if pair in seen_refs:
                    yield errors.FieldError(where, f"Duplicate value: {name!r}")
                seen_refs.add(pair)
