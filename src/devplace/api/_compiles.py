"""Seed 003's ResourceClasses compiled to DRA DeviceClasses whose CEL selects exactly the same devices.

A ResourceClass (nine operators, typed comparison: DESIGN.md section 6, `api.selectors`) selects devices by their
string attributes; a DeviceClass selects DRA devices with CEL. Under the one mapping of `api.dradevices` (each value
becomes an int, bool, version or string attribute or a capacity quantity, under the domain `devplace.io`), every
seed comparison has one CEL form, so `compile_class` gives a DeviceClass that selects a device exactly when the class
selects it (a hypothesis property in tests/api/test_compiles.py checks both on random devices and classes):

- `present(k)` is `"k" in A || "k" in C` (A, C: the device's attributes and capacity in the domain, bound once with
  `cel.bind`); Exists is `present`, DoesNotExist its negation;
- a comparison with a value v is the OR of the branches the seed's rules allow for v (each guarded by `in` and
  `type()`, so a device that lacks the key or holds another kind gives false, never an error):
  - v a quantity: a capacity compared as a quantity, an int attribute as `quantity(string(i))`;
  - v a version: a version attribute compared as a semver, an int attribute >= 0 as `semver(string(i), true)`;
  - v a quantity with a unit (`40GBPS`, not a quantity): a string attribute that ends with the same unit and whose
    number is the seed's longest quantity prefix, compared as quantities;
  - otherwise (equality only): a string or bool attribute equal to v;
- In/Eq: any value equal; NotIn: absent or no value equal; Gt/GtEq/Lt/LtEq: the one value, ordered;
- terms are ORed, a term's requirements ANDed; an empty selector is `false` (seed 003: it matches nothing).
Nested classes are flattened first (`scheduler.resolve_each`), so a compiled class carries its referenced classes'
terms. The class also carries its extended resource (KEP-5004): `rc.devplace.io/<class>` (`extended_resource`).

A Configuration compiles to a DeviceClass too (`compile_configuration`): the class of its Akri resource. Its
extendedResourceName is the Configuration-level resource the node agent advertises, `<prefix>/<configuration>`
(`api.resource_name`: the prefix is the agent's `--resource-prefix`, else the Configuration's API group, `akri.sh`
for `akri.sh/v0`), so a pod asking for `akri.sh/<configuration>: 1` gets one of its devices through DRA as through
the device plugin. The class is named `<configuration>.<prefix>` (apart from the ResourceClasses' classes), and its
selector is true exactly for the devices whose `configuration` attribute is the mapping's value of the
Configuration's name: a string attribute equal to it, or, for a name the mapping types (`123` an int, `v2` a version,
`true` a bool, `10m` a capacity), that typed value. Two names the mapping gives one value (`7` and `007`, `v1` and
`v1.0`) cannot be told apart by any selector; Akri's resource names are not namespaced either, so Configurations of
one name in two namespaces share the class, as they share the resource.

Out of scope (the seed's rules on texts whose kind is ambiguous): a value that is a quantity and also, by the
longest-prefix rule, a quantity with a unit (`10GG`), and a non-integer quantity that is also a version (`1.5` as a
version); a string longer than 64 characters, which the mapping cuts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from devplace import errors
from devplace.api import _selectors as selectors
from devplace.api._cel import MAX_LENGTH
from devplace.api._dradevices import DRIVER, attribute_id, semver_text, wire_value
from devplace.api._holders import resource_name, resource_prefix
from devplace.api._selectors import DeviceSelector, Requirement

EXTENDED_RESOURCE_PREFIX = "rc.devplace.io/"
DEVICE_CLASS_API_VERSION = "resource.k8s.io/v1"
_ORDERS = {"Gt": ">", "GtEq": ">=", "Lt": "<", "LtEq": "<="}


def extended_resource(class_name: str) -> str:
    """The extended resource a pod asks for to get a device of the class: `rc.devplace.io/<class>`."""
    return EXTENDED_RESOURCE_PREFIX + class_name


def _s(text: str) -> str:
    """A CEL string literal (JSON's escapes are CEL's)."""
    return json.dumps(text)


def _has(ident: str, where: str) -> str:
    return f"{_s(ident)} in {where}"


def _value(ident: str, where: str) -> str:
    return f"{where}[{_s(ident)}]"


def _compare(ident: str, value: str, op: str) -> list[str]:
    """The CEL branches true when the device's value of `ident` compares to `value` by `op` (module docstring)."""
    a, c = _value(ident, "a"), _value(ident, "c")
    out: list[str] = []
    if selectors._quantity(value) is not None:
        q = f"quantity({_s(value)})"
        out.append(f"({_has(ident, 'c')} && {c}.compareTo({q}) {op} 0)")
        out.append(f"({_has(ident, 'a')} && type({a}) == int && quantity(string({a})).compareTo({q}) {op} 0)")
    version = semver_text(value) if selectors._version(value) is not None else None
    if version is not None:
        v = f"semver({_s(version)})"
        out.append(f"({_has(ident, 'a')} && type({a}) == kubernetes.Semver && {a}.compareTo({v}) {op} 0)")
        if selectors._quantity(value) is None:  # an integer device value is a quantity first (handled above)
            out.append(
                f"({_has(ident, 'a')} && type({a}) == int && {a} >= 0 && "
                f"semver(string({a}), true).compareTo({v}) {op} 0)"
            )
    unit = selectors._quantity_with_unit(value) if selectors._quantity(value) is None else None
    if unit is not None:
        number, suffix = unit
        out.append(_unit_branch(ident, suffix, str(number), op))
    elif op == "==" and selectors._quantity(value) is None and version is None:
        if value in ("true", "false"):
            out.append(f"({_has(ident, 'a')} && type({a}) == bool && {a} == {value})")
        out.append(f"({_has(ident, 'a')} && type({a}) == string && {a} == {_s(value)})")
    return out


def _unit_branch(ident: str, unit: str, number: str, op: str) -> str:
    """A string attribute `<quantity><unit>` whose longest quantity prefix leaves exactly `unit`, compared by number."""
    a = _value(ident, "a")
    cut = f"{a}.size() - {len(unit)}"
    guards = [f"{_has(ident, 'a')}", f"type({a}) == string", f"{a}.size() > {len(unit)}", f"{a}.endsWith({_s(unit)})"]
    guards.append(f"isQuantity({a}.substring(0, {cut}))")
    for extra in range(1, len(unit)):  # a longer quantity prefix would leave a shorter unit (the seed's rule)
        guards.append(f"!isQuantity({a}.substring(0, {cut} + {extra}))")
    guards.append(f"quantity({a}.substring(0, {cut})).compareTo(quantity({_s(number)})) {op} 0")
    return "(" + " && ".join(guards) + ")"


def requirement_cel(req: Requirement) -> str:
    """One requirement as CEL over `a` and `c` (module docstring)."""
    ident = attribute_id(req.key)
    present = f"({_has(ident, 'a')} || {_has(ident, 'c')})"
    if req.operator == "Exists":
        return present
    if req.operator == "DoesNotExist":
        return f"!{present}"
    if req.operator in _ORDERS:
        branches = _compare(ident, req.values[0], _ORDERS[req.operator])
        return "(" + (" || ".join(branches) or "false") + ")"
    equal = [b for v in req.values for b in _compare(ident, v, "==")]
    any_equal = "(" + (" || ".join(equal) or "false") + ")"
    if req.operator == "NotIn":
        return f"(!{present} || !{any_equal})"
    return any_equal


def selector_cel(selector: DeviceSelector, driver: str = DRIVER) -> str:
    """The whole class as one CEL expression (terms ORed, requirements ANDed; empty: false)."""
    terms = [" && ".join(requirement_cel(r) for r in term) for term in selector.terms if term]
    body = " || ".join(f"({t})" for t in terms) if terms else "false"
    return (
        f"device.driver == {_s(driver)} && cel.bind(a, device.attributes[{_s(driver)}], "
        f"cel.bind(c, device.capacity[{_s(driver)}], {body}))"
    )


def compile_class(
    name: str, selector: DeviceSelector | Sequence[Sequence[Requirement]], *, driver: str = DRIVER
) -> dict[str, Any]:
    """The DeviceClass wire dict of ResourceClass `name` whose (flattened) selector is `selector`; `errors.Invalid`
    naming `spec.resourceSelector` when the CEL would exceed Kubernetes' length limit."""
    if not isinstance(selector, DeviceSelector):
        selector = DeviceSelector(selector)
    expression = selector_cel(selector, driver)
    if len(expression) > MAX_LENGTH:
        raise errors.Invalid.field(
            "spec.resourceSelector",
            f"compiles to {len(expression)} characters of CEL, more than a selector may have ({MAX_LENGTH})",
        )
    return {
        "apiVersion": DEVICE_CLASS_API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name, "annotations": {"devplace.io/resource-class": name}},
        "spec": {"selectors": [{"cel": {"expression": expression}}], "extendedResourceName": extended_resource(name)},
    }


_TYPED_EQUALS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "int": ("int", str),
    "bool": ("bool", lambda v: "true" if v else "false"),
    "string": ("string", _s),
}


def configuration_cel(name: str, driver: str = DRIVER) -> str:
    """CEL true exactly for the devices of Configuration `name`: their `configuration` attribute (or capacity, for a
    name the mapping reads as a quantity) holds the mapping's value of `name` (module docstring)."""
    where, value = wire_value(name)
    ident = _s(attribute_id("configuration"))
    if where == "capacity":
        test = f"{ident} in c && c[{ident}].compareTo(quantity({_s(value['value'])})) == 0"
    elif "version" in value:
        a = f"a[{ident}]"
        test = f"{ident} in a && type({a}) == kubernetes.Semver && {a}.compareTo(semver({_s(value['version'])})) == 0"
    else:
        ((typed, raw),) = value.items()
        cel_type, literal = _TYPED_EQUALS[typed]
        test = f"{ident} in a && type(a[{ident}]) == {cel_type} && a[{ident}] == {literal(raw)}"
    return (
        f"device.driver == {_s(driver)} && cel.bind(a, device.attributes[{_s(driver)}], "
        f"cel.bind(c, device.capacity[{_s(driver)}], {test}))"
    )


def compile_configuration(
    configuration: Mapping[str, Any], *, prefix: str | None = None, driver: str = DRIVER
) -> dict[str, Any]:
    """The DeviceClass wire dict of a Configuration (wire dict): named `<configuration>.<prefix>`, selecting its
    devices, with extendedResourceName its Configuration-level resource `<prefix>/<configuration>`; `prefix`
    overrides the resource prefix as the agent's `--resource-prefix` does (module docstring)."""
    meta = configuration.get("metadata") or {}
    name = str(meta.get("name") or "")
    if not name:
        raise errors.Invalid.field("metadata.name", "Required value")
    api_version = str(configuration.get("apiVersion") or "")
    namespace = str(meta.get("namespace") or "default")
    return {
        "apiVersion": DEVICE_CLASS_API_VERSION,
        "kind": "DeviceClass",
        "metadata": {
            "name": f"{name}.{resource_prefix(api_version, prefix)}",
            "annotations": {"devplace.io/configuration": f"{namespace}/{name}"},
        },
        "spec": {
            "selectors": [{"cel": {"expression": configuration_cel(name, driver)}}],
            "extendedResourceName": resource_name(api_version, name, prefix),
        },
    }
