"""Resource classes (seed 003): parsing, nested classes, pod requests, binding annotations and class status.

Pure: wire dicts in, frozen values out; bad input raises `errors.Invalid` naming the field path.

Nested classes (seed 003, "Future Scope"): a selector term is either `{matchExpressions: [...]}` or
`{classRef: NAME}`, meaning "whatever class NAME matches". `resolve_classes` flattens references into one
`DeviceSelector` per class (terms are ORed, so a reference contributes its class's terms; duplicates are dropped,
which bounds a class by the number of distinct terms in the whole set, however the references nest). A cycle
(`spec.resourceSelector[0].classRef: cycle a -> b -> a`) or a reference to a missing class is refused.
Resolution is one depth-first walk over the classes in name order: O(classes + references + terms).

Requests: a container asks for a class as the extended resource `rc.devplace.io/<class>: N`, in `requests` or in
`limits` (a limit alone implies the request; both must then be equal, as Kubernetes requires of extended resources).
N is a whole number. The pod's request is Kubernetes' effective request: max(sum over containers, max over init
containers).

A request of N means N *distinct* devices, one slot each (DESIGN.md section 4's `uniqueDevices` default: a pod never
gets two slots of one Instance), across all the classes the pod asks for. The binding annotation therefore always
carries quantity 1 today; the format keeps the seed's quantity (`resClass_<class>_<device>=<qty>`).

Class status (seed 003, `ResourceClassStatus`):
- allocatable: the slots (free or held) of every device the class matches, each device counted once however many nodes
  see it;
- requested: over the same devices, the slots in use: per device the larger of the slots held on the Instance and the
  quantity bound pods' annotations put on it (through *any* class: the seed updates "all the resource classes which
  could select this device"). A bound pod whose kubelet has not claimed its slot yet counts; an admitted pod is not
  counted twice. For classes that share no device, this is the sum of the class's requests of bound pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from devplace import errors
from devplace.api import (
    SELECTION_STRATEGIES,
    DeviceSelector,
    Quantity,
    Requirement,
    SelectionStrategy,
    require_dns1123_subdomain,
)
from devplace.scheduler._devices import Device

RESOURCE_PREFIX = "rc.devplace.io/"
"""A container requests class X as the extended resource `rc.devplace.io/X`."""

ANNOTATION_PREFIX = "scheduler.alpha.kubernetes.io/resClass_"
"""Seed 003's binding annotation: `scheduler.alpha.kubernetes.io/resClass_<class>_<device>=<qty>`."""

Strategy = SelectionStrategy
STRATEGIES = SELECTION_STRATEGIES


@dataclass(frozen=True)
class ClassRef:
    """A selector term that stands for every term of another class."""

    name: str


Term = tuple[Requirement, ...] | ClassRef


@dataclass(frozen=True)
class ClassSpec:
    """A ResourceClass's spec as written: terms (requirements or class references) and an optional strategy."""

    name: str
    terms: tuple[Term, ...] = ()
    strategy: Strategy | None = None

    @classmethod
    def from_wire(cls, name: str, spec: Mapping[str, Any] | None, path: str = "spec") -> ClassSpec:
        """Validate `{resourceSelector: [...], selectionStrategy?}`; errors name e.g. `spec.resourceSelector[1]`."""
        require_dns1123_subdomain("metadata.name", name)
        spec = {} if spec is None else spec
        if not isinstance(spec, Mapping):
            raise errors.Invalid.field(path, f"must be a mapping, not {type(spec).__name__}")
        unknown = sorted(set(spec) - {"resourceSelector", "selectionStrategy"})
        if unknown:
            raise errors.Invalid.field(
                f"{path}.{unknown[0]}", "unknown field (expected resourceSelector, selectionStrategy)"
            )
        strategy = spec.get("selectionStrategy")
        if strategy is not None and strategy not in STRATEGIES:
            raise errors.Invalid.field(
                f"{path}.selectionStrategy", f"unknown strategy {strategy!r} (one of {', '.join(STRATEGIES)})"
            )
        raw = spec.get("resourceSelector")
        raw = [] if raw is None else raw
        where = f"{path}.resourceSelector"
        if not isinstance(raw, list):
            raise errors.Invalid.field(where, "must be a list of terms")
        refs: dict[int, ClassRef] = {}
        plain: list[Any] = []
        for t, term in enumerate(raw):
            if isinstance(term, Mapping) and "classRef" in term:
                if set(term) != {"classRef"}:
                    raise errors.Invalid.field(
                        f"{where}[{t}]", "a term is either matchExpressions or classRef, not both"
                    )
                ref = term["classRef"]
                if not isinstance(ref, str):
                    raise errors.Invalid.field(f"{where}[{t}].classRef", "must be a class name")
                require_dns1123_subdomain(f"{where}[{t}].classRef", ref)
                refs[t] = ClassRef(ref)
                plain.append({})  # keeps the indices of the other terms in DeviceSelector's error paths
            else:
                plain.append(term)
        parsed = DeviceSelector.from_wire(plain, where).terms
        terms: list[Term] = [refs[t] if t in refs else tuple(parsed[t]) for t in range(len(raw))]
        return cls(name, tuple(terms), cast(Strategy | None, strategy))


@dataclass(frozen=True)
class ResolvedClass:
    """A class with its references flattened: `selector` is what it matches; `includes` the classes it reaches."""

    name: str
    selector: DeviceSelector
    strategy: Strategy | None = None
    includes: tuple[str, ...] = ()

    def matches(self, attributes: Mapping[str, str]) -> bool:
        return self.selector.matches(attributes)


def _spec(name: str, raw: ClassSpec | Mapping[str, Any] | None) -> ClassSpec:
    return raw if isinstance(raw, ClassSpec) else ClassSpec.from_wire(name, raw)


def resolve_each(
    specs: Mapping[str, ClassSpec | Mapping[str, Any] | None],
) -> tuple[dict[str, ResolvedClass], dict[str, errors.Invalid]]:
    """Resolve every class that can be: (resolved, refused by name). A class referring to a refused one is refused.

    Raw specs are the `spec` of ResourceClass wire objects, keyed by class name.
    """
    refused: dict[str, errors.Invalid] = {}
    parsed: dict[str, ClassSpec] = {}
    for name in sorted(specs):
        try:
            parsed[name] = _spec(name, specs[name])
        except errors.Invalid as e:
            refused[name] = e
    resolved: dict[str, ResolvedClass] = {}
    state: dict[str, int] = {}  # 1: on the current path, 2: done (resolved or refused)

    def visit(name: str, path: list[tuple[str, int]]) -> None:
        """Resolve `name`; `path` holds the (class, term index) references that led here."""
        spec = parsed[name]
        state[name] = 1
        terms: dict[tuple[Requirement, ...], None] = {}
        includes: dict[str, None] = {}
        for t, term in enumerate(spec.terms):
            if name in refused:  # a cycle through this class was found below
                break
            if not isinstance(term, ClassRef):
                terms.setdefault(term)
                continue
            where = f"spec.resourceSelector[{t}].classRef"
            ref = term.name
            if state.get(ref) == 1:
                _refuse_cycle([*path, (name, t)], ref)
                break
            if ref not in parsed and ref not in refused:
                refused[name] = errors.Invalid.field(where, f"class {ref!r} (referenced by {name!r}) does not exist")
                break
            if ref not in state and ref in parsed:
                visit(ref, [*path, (name, t)])
            if name in refused:
                break
            if ref in refused:
                refused[name] = errors.Invalid.field(where, f"class {ref!r} is refused: {refused[ref].message}")
                break
            target = resolved[ref]
            includes.setdefault(ref)
            includes.update(dict.fromkeys(target.includes))
            for sub in target.selector.terms:
                terms.setdefault(tuple(sub))
        state[name] = 2
        if name not in refused:
            resolved[name] = ResolvedClass(name, DeviceSelector(list(terms)), spec.strategy, tuple(includes))

    def _refuse_cycle(path: list[tuple[str, int]], back_to: str) -> None:
        """Every class on the cycle gets its own error, naming its reference and the cycle as seen from it."""
        members = [n for n, _ in path]
        cycle = path[members.index(back_to) :]
        ring = [n for n, _ in cycle]
        for i, (member, t) in enumerate(cycle):
            seen = [*ring[i:], *ring[:i], member]
            refused[member] = errors.Invalid.field(f"spec.resourceSelector[{t}].classRef", f"cycle {' -> '.join(seen)}")

    for name in sorted(parsed):
        if name not in state:
            visit(name, [])
    return resolved, refused


def resolve_classes(specs: Mapping[str, ClassSpec | Mapping[str, Any] | None]) -> dict[str, ResolvedClass]:
    """Every class resolved, or `errors.Invalid` for the first refused class in name order (its field and reason)."""
    resolved, refused = resolve_each(specs)
    if refused:
        first = min(refused)
        err = refused[first]
        raise errors.Invalid(f"resourceclasses/{first}: {err.message}", err.fields) from err
    return resolved


# ---------------------------------------------------------------------------------------------------------------
# Pod requests
# ---------------------------------------------------------------------------------------------------------------


def _whole(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise errors.Invalid.field(path, f"must be a quantity, not {type(value).__name__}")
    try:
        quantity = Quantity(value)
    except errors.Invalid as e:
        raise errors.Invalid.field(path, e.message) from e
    if quantity.as_fraction().denominator != 1:
        raise errors.Invalid.field(path, f"must be a whole number of devices, not {value!r}")
    if quantity.value() < 0:
        raise errors.Invalid.field(path, f"must not be negative, got {value!r}")
    return quantity.value()


def _container_classes(container: Any, path: str) -> dict[str, int]:
    if not isinstance(container, Mapping):
        raise errors.Invalid.field(path, f"a container must be a mapping, not {type(container).__name__}")
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise errors.Invalid.field(f"{path}.resources", "must be a mapping")
    found: dict[str, dict[str, int]] = {"requests": {}, "limits": {}}
    for part, out in found.items():
        amounts = resources.get(part) or {}
        if not isinstance(amounts, Mapping):
            raise errors.Invalid.field(f"{path}.resources.{part}", "must be a mapping of resource name to quantity")
        for resource, value in amounts.items():
            if not isinstance(resource, str) or not resource.startswith(RESOURCE_PREFIX):
                continue
            where = f"{path}.resources.{part}[{resource}]"
            require_dns1123_subdomain(where, resource[len(RESOURCE_PREFIX) :])
            out[resource[len(RESOURCE_PREFIX) :]] = _whole(value, where)
    requests, limits = found["requests"], found["limits"]
    for cls, limit in limits.items():
        if cls in requests and requests[cls] != limit:
            raise errors.Invalid.field(
                f"{path}.resources.requests[{RESOURCE_PREFIX}{cls}]",
                f"must equal the limit ({limit}) for a resource class, got {requests[cls]}",
            )
    return {**limits, **requests}


def class_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """How many devices of each class a Pod wire dict asks for (zero requests left out), in class-name order."""
    spec = pod.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise errors.Invalid.field("spec", "must be a mapping")
    total: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for group, merge in (("containers", "sum"), ("initContainers", "max")):
        containers = spec.get(group) or []
        if not isinstance(containers, list):
            raise errors.Invalid.field(f"spec.{group}", "must be a list")
        for i, container in enumerate(containers):
            for cls, n in _container_classes(container, f"spec.{group}[{i}]").items():
                if merge == "sum":
                    total[cls] = total.get(cls, 0) + n
                else:
                    init_max[cls] = max(init_max.get(cls, 0), n)
    for cls, n in init_max.items():
        total[cls] = max(total.get(cls, 0), n)
    return {cls: total[cls] for cls in sorted(total) if total[cls] > 0}


# ---------------------------------------------------------------------------------------------------------------
# Binding annotations and class status
# ---------------------------------------------------------------------------------------------------------------


def binding_annotations(picks: Iterable[tuple[str, str, int]]) -> dict[str, str]:
    """`{resClass_<class>_<device>: "<qty>"}` for (class, device, quantity) picks, in key order.

    Class and device names are DNS subdomains (no `_`), so the key splits back unambiguously.
    """
    out = {f"{ANNOTATION_PREFIX}{cls}_{device}": str(qty) for cls, device, qty in picks}
    return dict(sorted(out.items()))


def parse_binding_annotations(
    annotations: Mapping[str, str], path: str = "metadata.annotations"
) -> dict[tuple[str, str], int]:
    """(class, device) -> quantity from a pod's annotations; other annotations are ignored; malformed ones refused."""
    out: dict[tuple[str, str], int] = {}
    for key, value in annotations.items():
        if not key.startswith(ANNOTATION_PREFIX):
            continue
        where = f"{path}[{key}]"
        cls, sep, device = key[len(ANNOTATION_PREFIX) :].partition("_")
        if not sep or not cls or not device:
            raise errors.Invalid.field(where, "expected scheduler.alpha.kubernetes.io/resClass_<class>_<device>")
        out[cls, device] = _whole(value, where)
    return out


@dataclass(frozen=True)
class ClassStatus:
    allocatable: int
    requested: int

    def to_wire(self) -> dict[str, str]:
        return {"allocatable": str(self.allocatable), "requested": str(self.requested)}


def class_status(
    cls: ResolvedClass, devices: Iterable[Device], bound_annotations: Iterable[Mapping[str, str]]
) -> ClassStatus:
    """Seed 003's status of one class (see the module docstring). A malformed annotation is skipped: the status is
    a report and must not fail for another party's bad write (the kubelet refuses that pod anyway)."""
    matched = {d.name: d for d in devices if cls.matches(d.attributes)}
    annotated: dict[str, int] = {}
    for pod_annotations in bound_annotations:
        try:
            parsed = parse_binding_annotations(pod_annotations)
        except errors.Invalid:
            continue
        for (_, device), qty in parsed.items():
            if device in matched:
                annotated[device] = annotated.get(device, 0) + qty
    allocatable = sum(d.capacity for d in matched.values())
    requested = sum(min(d.capacity, max(d.held, annotated.get(name, 0))) for name, d in matched.items())
    return ClassStatus(allocatable, requested)


def strategies_of(
    classes: Mapping[str, ResolvedClass], requested: Sequence[str], default: Strategy
) -> dict[str, Strategy]:
    """The selection strategy of each requested class: its own, else `default`."""
    return {c: (classes[c].strategy or default) if c in classes else default for c in requested}
