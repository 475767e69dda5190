"""DRA allocation inputs as the allocator reads them (shared/reference/dra.md sections 1 and 3): ResourceSlices
gathered into pools, DeviceClasses with compiled selectors, ResourceClaims with their requests and constraints, and
what other claims already hold. Pure: wire dicts in, frozen values out; no clock, no I/O.

Why a parse step of its own: a scheduling cycle reads the same slices for every pod and every node, and the same claim
for every node. Parsing (quantities to exact fractions, attribute names to fully qualified ones, CEL compiled once by
`api.compile_selector`) happens once per cycle for slices and once per pod for claims, never per (pod, node).

Rules kept from Kubernetes (k8s.io/dynamic-resource-allocation/structured):
- a pool is (driver, pool name); only its newest generation counts, over every slice of the pool whichever node it
  is for, and the pool is complete when that generation has `resourceSliceCount` slices. An incomplete pool gives no
  device; an invalid one (a device name twice, a counter set twice, a device drawing on a counter that is not in the
  pool) gives none either, and its reason is reported when nothing else fits;
- a bare attribute or capacity name is under the driver's domain; an explicitly qualified name wins over a bare one;
- a device that `allowMultipleAllocations` is shared (never exclusive); others are exclusive;
- a claim result without a shareID holds its device exclusively; one with a shareID consumes capacity; an
  adminAccess result holds nothing.

A claim that is not well formed (no class name, no count, an unknown allocation mode, an empty constraint, a selector
that does not compile) raises `errors.Invalid` naming the field: Kubernetes refuses to allocate it too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from devplace import errors
from devplace.api import DeviceInput, NodeSelector, Quantity, Selector, compile_selector

AttrValue = tuple[str, Any]
"""An attribute value with its type: ("int", 3), ("bool", True), ("string", "a"), ("version", "1.0.0")."""

DeviceId = tuple[str, str, str]
"""(driver, pool, device)."""

MAX_RESULTS = 32
"""Kubernetes' AllocationResultsMaxSize: devices per claim."""

_ATTRIBUTE_KINDS = ("int", "bool", "string", "version")


def qualified(name: str, driver: str) -> str:
    """A fully qualified attribute or capacity name: a bare name is under the driver's domain."""
    return name if "/" in name else f"{driver}/{name}"


def quantity(value: Any, path: str) -> Fraction:
    """The exact value of a quantity written as text or a number; `errors.Invalid` naming `path` otherwise."""
    if isinstance(value, bool) or value is None:
        raise errors.Invalid.field(path, f"{value!r} is not a quantity")
    try:
        return Quantity(str(value) if not isinstance(value, int) else value).as_fraction()
    except errors.Invalid as e:
        raise errors.Invalid.field(path, e.message) from None


def quantity_text(value: Fraction) -> str:
    """A consumed amount as Kubernetes writes a quantity (`2`, `4Gi`, `500m`)."""
    binary = value.denominator == 1 and value >= 1024 and value.numerator % 1024 == 0
    return str(Quantity.from_fraction(value, binary=binary))


# -- taints and tolerations ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    @property
    def blocks(self) -> bool:
        """Only NoSchedule and NoExecute keep a device from new claims; None and unknown effects do not."""
        return self.effect in ("NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' rule: the effect (if set) and the key (if set) match, and Exists or an equal value."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def tolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> bool:
    return all(not t.blocks or any(x.tolerates(t) for x in tolerations) for t in taints)


# -- devices -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """How much of a shared capacity one allocation consumes."""

    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] | None = None
    minimum: Fraction | None = None
    maximum: Fraction | None = None
    step: Fraction | None = None

    def rounded(self, requested: Fraction) -> Fraction:
        """The request rounded up as the policy says (the next valid value; min, then min + n * step)."""
        if self.minimum is not None:
            if requested <= self.minimum:
                return self.minimum
            if self.step:
                steps = -((self.minimum - requested) // self.step)  # ceiling
                return self.minimum + steps * self.step
            return requested
        if self.valid_values is not None:
            return next((v for v in self.valid_values if v >= requested), requested)
        return requested

    def allows(self, amount: Fraction) -> bool:
        if self.minimum is not None:
            if amount < self.minimum or (self.maximum is not None and amount > self.maximum):
                return False
            return not self.step or (amount - self.minimum) % self.step == 0
        if self.valid_values is not None:
            return amount in self.valid_values
        return True


@dataclass(frozen=True, slots=True)
class Capacity:
    name: str
    """As the slice wrote it (bare or qualified): results report consumed capacity under this spelling."""
    value: Fraction
    policy: RequestPolicy | None


@dataclass(frozen=True, slots=True)
class Locality:
    """Which nodes can reach a device: one node, a node selector (one term), or all."""

    node_name: str | None = None
    all_nodes: bool = False
    terms: tuple[Mapping[str, Any], ...] | None = None
    selector: NodeSelector | None = field(default=None, compare=False)

    def reaches(self, node: str, labels: Mapping[str, str]) -> bool:
        if self.node_name is not None:
            return self.node_name == node
        if self.all_nodes:
            return True
        return self.selector is not None and self.selector.matches(labels, node)


def _locality(spec: Mapping[str, Any], path: str) -> Locality | None:
    node_name = spec.get("nodeName")
    if node_name:
        return Locality(node_name=str(node_name))
    if spec.get("allNodes"):
        return Locality(all_nodes=True)
    selector = spec.get("nodeSelector")
    if selector is not None:
        terms = selector.get("nodeSelectorTerms") if isinstance(selector, Mapping) else None
        parsed = NodeSelector.from_wire(
            terms if isinstance(terms, list) else [], f"{path}.nodeSelector.nodeSelectorTerms"
        )
        return Locality(terms=tuple(terms or ()), selector=parsed)
    return None


@dataclass(eq=False, slots=True)
class Device:
    """One device of a pool's newest generation, parsed once per snapshot."""

    driver: str
    pool: str
    name: str
    slice_name: str
    attributes: dict[str, AttrValue]
    capacity: dict[str, Capacity]
    shared: bool
    taints: tuple[Taint, ...]
    counters: tuple[tuple[str, str, Fraction], ...]
    counter_sets: tuple[str, ...]
    """The counter sets the device names (even with no counter in them): an unknown one makes the pool invalid."""
    binding_conditions: tuple[str, ...]
    binding_failure_conditions: tuple[str, ...]
    binds_to_node: bool
    locality: Locality | None
    """Per-device node selection; None when the slice's locality applies."""
    wire: Mapping[str, Any]
    content: tuple[Any, ...]
    """Everything but the name and the pool: two devices with equal content are interchangeable to a request."""
    id: DeviceId = ("", "", "")
    _cel: DeviceInput | None = None

    def __post_init__(self) -> None:
        self.id = (self.driver, self.pool, self.name)

    def cel(self) -> DeviceInput:
        if self._cel is None:
            self._cel = DeviceInput(self.driver, self.wire)
        return self._cel


def _frozen(value: Any) -> Any:
    return json.dumps(value, sort_keys=True, default=str)


def _attributes(raw: Mapping[str, Any], driver: str) -> dict[str, AttrValue]:
    out: dict[str, AttrValue] = {}
    explicit: set[str] = set()
    for name, value in raw.items():
        key = qualified(name, driver)
        if key in explicit:
            continue  # an explicitly qualified name wins over the bare one
        kinds = [k for k in _ATTRIBUTE_KINDS if isinstance(value, Mapping) and value.get(k) is not None]
        out[key] = (kinds[0], value[kinds[0]]) if len(kinds) == 1 else ("unknown", _frozen(value))
        if "/" in name:
            explicit.add(key)
    return out


def _policy(raw: Mapping[str, Any] | None, path: str) -> RequestPolicy | None:
    if not raw:
        return None
    rng = raw.get("validRange") or {}
    values = raw.get("validValues")

    def opt(v: Any, p: str) -> Fraction | None:
        return None if v is None else quantity(v, p)

    return RequestPolicy(
        default=opt(raw.get("default"), f"{path}.default"),
        valid_values=tuple(quantity(v, f"{path}.validValues") for v in values) if values is not None else None,
        minimum=opt(rng.get("min"), f"{path}.validRange.min"),
        maximum=opt(rng.get("max"), f"{path}.validRange.max"),
        step=opt(rng.get("step"), f"{path}.validRange.step"),
    )


def _device(raw: Mapping[str, Any], driver: str, pool: str, slice_name: str, per_device: bool, path: str) -> Device:
    name = str(raw.get("name") or "")
    attributes = _attributes(raw.get("attributes") or {}, driver)
    capacity: dict[str, Capacity] = {}
    for cname, cap in sorted((raw.get("capacity") or {}).items(), key=lambda kv: "/" not in kv[0]):
        key = qualified(cname, driver)
        if key in capacity:
            continue
        value = cap.get("value") if isinstance(cap, Mapping) else cap
        policy = _policy(cap.get("requestPolicy") if isinstance(cap, Mapping) else None, f"{path}.capacity[{cname}]")
        capacity[key] = Capacity(cname, quantity(value, f"{path}.capacity[{cname}].value"), policy)
    taints = tuple(
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in raw.get("taints") or ()
    )
    counters = tuple(
        (str(c.get("counterSet") or ""), str(cn), quantity((cv or {}).get("value"), f"{path}.consumesCounters"))
        for c in raw.get("consumesCounters") or ()
        for cn, cv in sorted((c.get("counters") or {}).items())
    )
    shared = bool(raw.get("allowMultipleAllocations"))
    locality = _locality(raw, path) if per_device else None
    content = (
        driver,
        tuple(sorted(attributes.items(), key=lambda kv: kv[0])),
        tuple(sorted((k, c.value, c.policy) for k, c in capacity.items())),
        shared,
        taints,
        (pool, counters) if counters else (),
    )
    return Device(
        driver=driver,
        pool=pool,
        name=name,
        slice_name=slice_name,
        attributes=attributes,
        capacity=capacity,
        shared=shared,
        taints=taints,
        counters=counters,
        counter_sets=tuple(str(c.get("counterSet") or "") for c in raw.get("consumesCounters") or ()),
        binding_conditions=tuple(raw.get("bindingConditions") or ()),
        binding_failure_conditions=tuple(raw.get("bindingFailureConditions") or ()),
        binds_to_node=bool(raw.get("bindsToNode")),
        locality=locality,
        wire=raw,
        content=content,
    )


# -- pools ---------------------------------------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class Slice:
    name: str
    locality: Locality | None
    """None with perDeviceNodeSelection (each device says), or when the slice names no node choice at all."""
    per_device: bool
    devices: list[Device]


@dataclass(eq=False, slots=True)
class Pool:
    """A pool at its newest generation, over all its slices (whichever nodes they are for)."""

    driver: str
    name: str
    generation: int
    complete: bool
    problem: str | None
    """Why the pool is invalid, or None."""
    slices: list[Slice]
    counters: dict[tuple[str, str], Fraction]
    binding: bool
    """Some device has binding conditions: such pools are searched last."""

    @property
    def label(self) -> str:
        return f"{self.driver}/{self.name}"


def gather_pools(slices: Iterable[Mapping[str, Any]]) -> list[Pool]:
    """Every pool of `slices` at its newest generation, in search order: pools without binding conditions first,
    then by (driver, pool name); slices by name; devices as listed. A slice that does not parse makes its pool
    invalid (with the reason) instead of failing the whole snapshot."""
    newest: dict[tuple[str, str], list[tuple[int, int, Mapping[str, Any]]]] = {}
    for raw in slices:
        spec = raw.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
        newest.setdefault(key, []).append(
            (int(pool.get("generation") or 0), int(pool.get("resourceSliceCount") or 0), raw)
        )
    pools: list[Pool] = []
    for (driver, name), entries in newest.items():
        generation = max(g for g, _, _ in entries)
        current = [(count, raw) for g, count, raw in entries if g == generation]
        expected = current[0][0]
        pools.append(_pool(driver, name, generation, len(current) == expected, [raw for _, raw in current]))
    pools.sort(key=lambda p: (p.binding, p.driver, p.name))
    return pools


def _pool(driver: str, name: str, generation: int, complete: bool, raws: list[Mapping[str, Any]]) -> Pool:
    problem: str | None = None
    parsed: list[Slice] = []
    counters: dict[tuple[str, str], Fraction] = {}
    sets: set[str] = set()
    seen: set[str] = set()
    for raw in sorted(raws, key=lambda r: str((r.get("metadata") or {}).get("name") or "")):
        slice_name = str((raw.get("metadata") or {}).get("name") or "")
        spec = raw.get("spec") or {}
        path = f"ResourceSlice {slice_name}"
        try:
            per_device = bool(spec.get("perDeviceNodeSelection"))
            locality = None if per_device else _locality(spec, f"{path}.spec")
            devices = [
                _device(d, driver, name, slice_name, per_device, f"{path}.spec.devices[{i}]")
                for i, d in enumerate(spec.get("devices") or ())
            ]
            for counter_set in spec.get("sharedCounters") or ():
                set_name = str(counter_set.get("name") or "")
                if set_name in sets:
                    problem = problem or f"counter set {set_name} is defined twice"
                sets.add(set_name)
                for cn, cv in (counter_set.get("counters") or {}).items():
                    counters[(set_name, str(cn))] = quantity((cv or {}).get("value"), f"{path}.sharedCounters")
        except errors.Invalid as e:
            problem = problem or f"slice {slice_name}: {e.message}"
            continue
        for device in devices:
            if device.name in seen:
                problem = problem or f"duplicate device name {device.name}"
            seen.add(device.name)
        parsed.append(Slice(slice_name, locality, per_device, devices))
    for s in parsed:
        for device in s.devices:
            for set_name in device.counter_sets:
                if set_name not in sets:
                    problem = problem or f"device {device.name} consumes from unknown counter set {set_name}"
            for set_name, counter, _ in device.counters:
                if set_name in sets and (set_name, counter) not in counters:
                    problem = problem or f"device {device.name} consumes unknown counter {set_name}/{counter}"
    binding = any(d.binding_conditions for s in parsed for d in s.devices)
    return Pool(driver, name, generation, complete, problem, parsed, counters, binding)


# -- classes -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeviceClassInfo:
    name: str
    selectors: tuple[Selector, ...]
    problem: str | None
    """Why the class cannot select (a selector that does not compile), or None."""
    config: tuple[Mapping[str, Any], ...]


def parse_class(raw: Mapping[str, Any]) -> DeviceClassInfo:
    """A DeviceClass wire dict; a selector that does not compile is kept as the class's problem (a request naming
    the class then fails with it, as in Kubernetes), so one bad class never breaks the snapshot."""
    name = str((raw.get("metadata") or {}).get("name") or "")
    spec = raw.get("spec") or {}
    selectors: list[Selector] = []
    problem: str | None = None
    for i, selector in enumerate(spec.get("selectors") or ()):
        expression = ((selector or {}).get("cel") or {}).get("expression")
        if not expression:
            problem = problem or f"class {name}: selector #{i}: CEL expression empty (unsupported selector type?)"
            continue
        try:
            selectors.append(compile_selector(str(expression), new=False))
        except errors.Invalid as e:
            problem = problem or f"class {name}: selector #{i}: {e.message}"
    return DeviceClassInfo(name, tuple(selectors), problem, tuple(spec.get("config") or ()))


# -- claims --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """A request, or one alternative (subrequest) of a firstAvailable request."""

    name: str
    """`req` or `req/sub`, as results name it."""
    base: str
    class_name: str
    selectors: tuple[Selector, ...]
    all: bool
    count: int
    admin: bool
    tolerations: tuple[Toleration, ...]
    tolerations_wire: tuple[Mapping[str, Any], ...]
    capacity: tuple[tuple[str, Fraction], ...]
    signature: tuple[Any, ...]
    """What decides which devices are candidates: equal signatures share a per-node candidate list."""


@dataclass(frozen=True, slots=True)
class Slot:
    """One entry of spec.devices.requests: its alternatives in order (one unless firstAvailable)."""

    name: str
    alternatives: tuple[Request, ...]


@dataclass(frozen=True, slots=True)
class Constraint:
    requests: frozenset[str]
    attribute: str
    distinct: bool

    def applies(self, request: Request) -> bool:
        return not self.requests or request.base in self.requests or request.name in self.requests


@dataclass(frozen=True, slots=True)
class Claim:
    key: str
    """The claim's uid, or namespace/name: names the claim in reasons and seeds its share ids."""
    slots: tuple[Slot, ...]
    constraints: tuple[Constraint, ...]
    config: tuple[Mapping[str, Any], ...]


def _request(raw: Mapping[str, Any], name: str, base: str, path: str, subrequest: bool) -> Request:
    if not isinstance(raw, Mapping):
        raise errors.Invalid.field(path, "must be an object")
    class_name = raw.get("deviceClassName")
    if not class_name:
        raise errors.Invalid.field(f"{path}.deviceClassName", "Required value: missing device class name")
    selectors: list[Selector] = []
    for i, selector in enumerate(raw.get("selectors") or ()):
        expression = ((selector or {}).get("cel") or {}).get("expression")
        if not expression:
            raise errors.Invalid.field(
                f"{path}.selectors[{i}].cel", "CEL expression empty (unsupported selector type?)"
            )
        try:
            selectors.append(compile_selector(str(expression), new=False))
        except errors.Invalid as e:
            raise errors.Invalid.field(f"{path}.selectors[{i}].cel.expression", e.message) from None
    mode = raw.get("allocationMode") or "ExactCount"
    if mode not in ("ExactCount", "All"):
        raise errors.Invalid.field(f"{path}.allocationMode", f"unsupported count mode {mode}")
    count = raw.get("count")
    if mode == "ExactCount":
        count = 1 if count is None else count
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            raise errors.Invalid.field(f"{path}.count", f"Invalid value: {count!r}: must be greater than zero")
    else:
        count = 0
    tolerations_wire = tuple(raw.get("tolerations") or ())
    tolerations = tuple(
        Toleration(
            str(t.get("key") or ""),
            str(t.get("operator") or "Equal"),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in tolerations_wire
    )
    requests = ((raw.get("capacity") or {}).get("requests")) or {}
    capacity = tuple(sorted((str(k), quantity(v, f"{path}.capacity.requests[{k}]")) for k, v in requests.items()))
    admin = bool(raw.get("adminAccess")) and not subrequest
    signature = (str(class_name), tuple(s.expression for s in selectors), tolerations, capacity)
    return Request(
        name,
        base,
        str(class_name),
        tuple(selectors),
        mode == "All",
        count,
        admin,
        tolerations,
        tolerations_wire,
        capacity,
        signature,
    )


def parse_claim(raw: Mapping[str, Any]) -> Claim:
    """A ResourceClaim wire dict (or a ResourceClaimTemplate's `spec.spec` wrapped as {"spec": ...}) as the
    allocator reads it; `errors.Invalid` naming the field when Kubernetes would refuse to allocate it."""
    meta = raw.get("metadata") or {}
    key = str(meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}")
    devices = (raw.get("spec") or {}).get("devices") or {}
    slots: list[Slot] = []
    for i, req in enumerate(devices.get("requests") or ()):
        path = f"spec.devices.requests[{i}]"
        name = str((req or {}).get("name") or "")
        if not name:
            raise errors.Invalid.field(f"{path}.name", "Required value")
        if req.get("exactly") is not None:
            slots.append(Slot(name, (_request(req["exactly"], name, name, f"{path}.exactly", False),)))
            continue
        subs = req.get("firstAvailable")
        if not subs:
            raise errors.Invalid.field(path, "exactly one of exactly or firstAvailable is required")
        alternatives = tuple(
            _request(s, f"{name}/{s.get('name')}", name, f"{path}.firstAvailable[{j}]", True)
            for j, s in enumerate(subs)
        )
        slots.append(Slot(name, alternatives))
    constraints: list[Constraint] = []
    for i, c in enumerate(devices.get("constraints") or ()):
        match, distinct = c.get("matchAttribute"), c.get("distinctAttribute")
        if bool(match) == bool(distinct):
            raise errors.Invalid.field(
                f"spec.devices.constraints[{i}]", "empty constraint (unsupported constraint type?)"
            )
        attribute = str(match or distinct)
        if "/" not in attribute:
            raise errors.Invalid.field(f"spec.devices.constraints[{i}]", "must be a fully qualified name <domain>/<id>")
        constraints.append(Constraint(frozenset(c.get("requests") or ()), attribute, bool(distinct)))
    return Claim(key, tuple(slots), tuple(constraints), tuple(devices.get("config") or ()))


# -- what other claims hold ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Holdings:
    """Devices held by allocated claims: exclusively, or as shares consuming capacity."""

    exclusive: set[DeviceId] = field(default_factory=set)
    shares: dict[DeviceId, dict[str, Fraction]] = field(default_factory=dict)
    """Per shared device, the capacity its shares consume (fully qualified names); a device with shares but no
    capacity has an empty entry."""

    def add_results(self, results: Iterable[Mapping[str, Any]]) -> None:
        for r in results:
            if r.get("adminAccess"):
                continue
            driver = str(r.get("driver") or "")
            device: DeviceId = (driver, str(r.get("pool") or ""), str(r.get("device") or ""))
            if r.get("shareID"):
                used = self.shares.setdefault(device, {})
                for name, amount in (r.get("consumedCapacity") or {}).items():
                    key = qualified(str(name), driver)
                    used[key] = used.get(key, Fraction(0)) + quantity(amount, f"consumedCapacity[{name}]")
            else:
                self.exclusive.add(device)

    def add_claim(self, claim: Mapping[str, Any]) -> None:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        self.add_results((allocation.get("devices") or {}).get("results") or ())

    def holds(self, device: DeviceId) -> bool:
        return device in self.exclusive or device in self.shares
