"""Hpa resource requirements: their bodies, `Need` (the one typed view of them) and the maths of their amounts.

Two dialects of one body, told apart by shape:

- seed 004's flat `spec{mandatory, weight, allocatable, name, requests, limits, units | value}`;
- EMCO's `spec{allocatable, mandatory, weight, resource: {name, requests, limits, units} | {key, value}}`, where, as in
  EMCO, a label's `value` may not be empty.

Allocatable amounts (`requirement_quantities`) are exact Kubernetes quantities. A bare number takes its unit from
`units`, defaulting to MB (10^6 bytes, the seed's default) for memory and to whole units otherwise (cores for cpu);
cpu also takes `units: m` (millicores); a string with a Kubernetes suffix (`1.5Gi`, `500m`) is used as it is and then
`units` must be absent. Extended resources (anything but cpu, memory, ephemeral-storage) cannot be overcommitted in
Kubernetes, so when both `requests` and `limits` are given they must be equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pydantic
from pydantic import Field, PrivateAttr, field_validator

from devplace import errors
from devplace.api import Model, Quantity, invalid_from, label_key_problem, label_value_problem
from devplace.placement._bodies import EmcoBody

OVERCOMMITTABLE = frozenset({"cpu", "memory", "ephemeral-storage"})
"""Resources whose requests and limits may differ; every other (extended) resource needs requests == limits."""


Amount = int | str


def _no_bool_or_float(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("must be an integer or a quantity string, not a boolean")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("use a quantity string for a fractional amount (e.g. '500m' or '1.5Gi')")
        return int(value)
    return value


@dataclass(frozen=True)
class Need:
    """One requirement, whatever the dialect: the resource (or node label key) and what is asked of it, plus where
    each field sits in the body as sent (`spec.requests` or `spec.resource.requests`), for error messages."""

    name: str
    mandatory: bool = True
    weight: int | None = None
    allocatable: bool = True
    requests: Amount | None = None
    limits: Amount | None = None
    units: str | None = None
    value: str | None = None
    prefix: str = "spec"
    name_field: str = "name"

    def field(self, name: str) -> str:
        if name == "name":
            name = self.name_field
        if name in ("allocatable", "mandatory", "weight"):
            return f"spec.{name}"
        return f"{self.prefix}.{name}"


class SeedRequirementSpec(Model):
    """Seed 004's flat requirement: allocatable `name, requests, limits, units`, or a node label `name, value`."""

    mandatory: bool = True
    weight: int | None = Field(None, ge=1, le=10)
    allocatable: bool | None = None
    name: str
    requests: Amount | None = None
    limits: Amount | None = None
    units: str | None = None
    value: str | None = None

    @field_validator("requests", "limits", mode="before")
    @classmethod
    def _amounts(cls, value: Any) -> Any:
        return _no_bool_or_float(value)


class AllocatableResource(Model):
    name: str
    requests: Amount | None = None
    limits: Amount | None = None
    units: str | None = None

    @field_validator("requests", "limits", mode="before")
    @classmethod
    def _amounts(cls, value: Any) -> Any:
        return _no_bool_or_float(value)


class LabelResource(Model):
    key: str
    value: str


class EmcoRequirementSpec(Model):
    """EMCO's requirement: `allocatable` decides what `resource` holds: `{name, requests, limits, units}` or a node
    label `{key, value}`. EMCO's `mandatory` defaults to true here (EMCO never read it: every requirement bound)."""

    allocatable: bool
    mandatory: bool = True
    weight: int | None = Field(None, ge=1, le=10)
    resource: dict[str, Any] = Field(
        json_schema_extra={
            "oneOf": [
                AllocatableResource.model_json_schema(by_alias=True),
                LabelResource.model_json_schema(by_alias=True),
            ]
        }
    )


class HpaRequirementBody(EmcoBody):
    """An hpa resource requirement, seed-flat or EMCO's `resource` form; `need` is the one typed view of both."""

    @classmethod
    def dialect(cls, obj: dict[str, Any]) -> type[EmcoBody]:
        if cls is not HpaRequirementBody:
            return cls
        spec = obj.get("spec")
        return EmcoRequirementBody if isinstance(spec, dict) and "resource" in spec else SeedRequirementBody

    @property
    def need(self) -> Need:
        raise NotImplementedError

    def check(self) -> None:
        _check_need(self.need)


class SeedRequirementBody(HpaRequirementBody):
    spec: SeedRequirementSpec

    @property
    def need(self) -> Need:
        s = self.spec
        allocatable = s.allocatable
        if allocatable is None:  # inferred: amounts make it allocatable, a lone `value` makes it a label
            allocatable = s.requests is not None or s.limits is not None or s.value is None
        return Need(s.name, s.mandatory, s.weight, allocatable, s.requests, s.limits, s.units, s.value)


class EmcoRequirementBody(HpaRequirementBody):
    spec: EmcoRequirementSpec
    _need: Need | None = PrivateAttr(None)

    def check(self) -> None:
        s = self.spec
        model: type[Model] = AllocatableResource if s.allocatable else LabelResource
        try:
            resource = model.model_validate(s.resource)
        except pydantic.ValidationError as e:
            if not s.allocatable and {"name", "requests", "limits", "units"} & set(s.resource):
                raise errors.Invalid.field(
                    "spec.resource", "a non-allocatable resource is a node label {key, value} (allocatable is false)"
                ) from e
            if s.allocatable and "key" in s.resource:
                raise errors.Invalid.field(
                    "spec.resource", "an allocatable resource is {name, requests, limits, units} (allocatable is true)"
                ) from e
            raise invalid_from(e, "spec.resource") from e
        if isinstance(resource, AllocatableResource):
            need = Need(
                resource.name,
                s.mandatory,
                s.weight,
                True,
                resource.requests,
                resource.limits,
                resource.units,
                prefix="spec.resource",
            )
        else:
            assert isinstance(resource, LabelResource)
            if not resource.value:
                # EMCO re-encodes the body with `omitempty` before its schema check, so an empty value is a missing
                # one: 400 (JsonSchemaValidation). A node label's value may be "" in Kubernetes; not in EMCO's body.
                raise errors.Invalid.field("spec.resource.value", "required: EMCO refuses an empty label value")
            need = Need(
                resource.key,
                s.mandatory,
                s.weight,
                False,
                value=resource.value,
                prefix="spec.resource",
                name_field="key",
            )
        self._need = need
        super().check()

    @property
    def need(self) -> Need:
        if self._need is None:
            self.check()
        assert self._need is not None
        return self._need


HpaRequirementBody.DIALECTS = (SeedRequirementBody, EmcoRequirementBody)


def _check_need(need: Need) -> None:
    problem = label_key_problem(need.name)
    if problem:
        raise errors.Invalid.field(need.field("name"), problem)
    if need.allocatable:
        if need.value is not None:
            raise errors.Invalid.field(
                need.field("value"), "forbidden for an allocatable resource (use requests/limits)"
            )
        requirement_quantities(need)
        return
    for key in ("requests", "limits", "units"):
        if getattr(need, key) is not None:
            raise errors.Invalid.field(need.field(key), "forbidden for a non-allocatable resource (use value)")
    if need.value is None:
        raise errors.Invalid.field(need.field("value"), "required for a non-allocatable resource (a node label value)")
    problem = label_value_problem(need.value)
    if problem:
        raise errors.Invalid.field(need.field("value"), problem)


# -- amounts ----------------------------------------------------------------------------------------------------

_BYTE_UNITS: dict[str, tuple[int, bool]] = {
    "B": (1, False),
    "KB": (10**3, False),
    "K": (10**3, False),
    "k": (10**3, False),
    "MB": (10**6, False),
    "M": (10**6, False),
    "GB": (10**9, False),
    "G": (10**9, False),
    "TB": (10**12, False),
    "T": (10**12, False),
    "KiB": (2**10, True),
    "Ki": (2**10, True),
    "MiB": (2**20, True),
    "Mi": (2**20, True),
    "GiB": (2**30, True),
    "Gi": (2**30, True),
    "TiB": (2**40, True),
    "Ti": (2**40, True),
}
_CPU_UNITS: dict[str, Fraction] = {"cores": Fraction(1), "core": Fraction(1), "m": Fraction(1, 1000)}
_COUNT_UNITS = frozenset({"", "count", "units"})
_BARE_NUMBER = re.compile(r"^[0-9]+(\.[0-9]*)?$|^\.[0-9]+$")


def _unit_factor(need: Need) -> tuple[Fraction, bool]:
    """(multiplier, binary format) of a bare number of the need's resource in its `units`."""
    resource, units = need.name, need.units
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        unit = "MB" if units is None or units == "" else units
        if unit not in _BYTE_UNITS:
            known = ", ".join(_BYTE_UNITS)
            raise errors.Invalid.field(need.field("units"), f"unknown unit {unit!r} for {resource} (known: {known})")
        factor, binary = _BYTE_UNITS[unit]
        return Fraction(factor), binary
    if resource == "cpu":
        if units is None or units == "":
            return Fraction(1), False
        if units not in _CPU_UNITS:
            raise errors.Invalid.field(need.field("units"), f"unknown unit {units!r} for cpu (known: cores, m)")
        return _CPU_UNITS[units], False
    if units is None or units in _COUNT_UNITS:
        return Fraction(1), False
    raise errors.Invalid.field(need.field("units"), f"{resource} is counted in whole units; {units!r} does not apply")


def _amount(need: Need, field: str, raw: Amount) -> Quantity:
    path = need.field(field)
    text = str(raw)
    if _BARE_NUMBER.match(text):
        factor, binary = _unit_factor(need)
        value = Quantity(text).as_fraction() * factor
        quantity = Quantity.from_fraction(value, binary=binary)
    else:
        try:
            quantity = Quantity(text)
        except errors.Invalid as e:
            raise errors.Invalid.field(path, e.message) from e
        if need.units:
            raise errors.Invalid.field(need.field("units"), f"{path} {text!r} already carries its unit; drop units")
    if quantity <= Quantity(0):
        raise errors.Invalid.field(path, f"must be positive (got {text})")
    return quantity


def requirement_quantities(need: Need) -> tuple[Quantity | None, Quantity | None]:
    """(requests, limits) as exact quantities; raises `Invalid` for bad amounts, units, or requests > limits."""
    if need.requests is None and need.limits is None:
        raise errors.Invalid.field(need.field("requests"), "requests or limits is required for an allocatable resource")
    requests = None if need.requests is None else _amount(need, "requests", need.requests)
    limits = None if need.limits is None else _amount(need, "limits", need.limits)
    if requests is not None and limits is not None:
        if requests > limits:
            raise errors.Invalid.field(need.field("requests"), f"requests {requests} exceed limits {limits}")
        if need.name not in OVERCOMMITTABLE and requests != limits:
            raise errors.Invalid.field(
                need.field("limits"),
                f"{need.name} cannot be overcommitted: requests ({requests}) must equal limits ({limits})",
            )
    return requests, limits
