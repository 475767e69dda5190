"""Kubernetes-shaped object metadata and the base of every typed object.

Objects travel as plain JSON dicts (camelCase) through the store and over the wire; the typed models here validate
them at the boundary (API server, CLI, simulation harness) and give parts typed access. `Resource.from_obj` turns
pydantic's errors into one `errors.Invalid` whose fields carry dotted paths (`spec.capacity`), so a user sees the
field and the reason, never a stack trace.

Types: a write (`from_obj(strict=True)`, what `registry.normalize` runs for the API server, the CLI and the
simulation) checks every typed field as kube-apiserver checks a custom resource against its CRD's structural schema,
and refuses a value of another JSON type naming the field (`spec.capacity: must be an integer, not string '2'`):
- an integer takes a JSON integer, or a float with no fraction within +-(2**53 - 1) (`1e2`, `2.0`), never a string, a
  boolean or a fraction. kube-apiserver decodes a custom resource's numbers to int64, else float64
  (k8s.io/apimachinery/pkg/util/json `convertNumber`: `1e2` fails `Int64()`, so it is float64 100), its schema
  validator takes a float64 for `type: integer` when go-openapi's `IsFloat64AJSONInteger` holds (kube-openapi
  validate/type.go), and the object is stored as Go re-encodes it, `100`. So such a float is stored as the integer
  (`conformed`), and every reader (the API, the Table, `devplace get`, the typed model) sees the same value. Newer
  go-openapi also takes a float within 1e-9 (relative) of a whole number and would store its fraction; devplace
  takes whole numbers only;
- a boolean takes true or false only, a string a string only, a number an integer or a float.
Readers (`from_obj()`: the agent, the controller, the scheduler) stay lenient, as an API server reads what it stored
before a schema tightened: pydantic's lax mode takes `"2"` for 2 there, so what a store already holds stays readable.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, ClassVar, Literal, Self, Union, get_args, get_origin

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from devplace import errors
from devplace.api import _names as names


class Model(BaseModel):
    """Base of every wire model: camelCase on the wire, snake_case in Python, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=False,
        ser_json_inf_nan="constants",
        defer_build=True,
    )

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class OwnerReference(Model):
    model_config = ConfigDict(extra="allow")
    api_version: str
    kind: str
    name: str
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


def _checked(problem: str | None, value: str) -> str:
    if problem:
        raise ValueError(problem)
    return value


DnsSubdomain = Annotated[str, AfterValidator(lambda v: _checked(names.dns1123_subdomain_problem(v), v))]
"""An object name: a DNS-1123 subdomain (a field of this type reports why a value is not one)."""

DnsLabel = Annotated[str, AfterValidator(lambda v: _checked(names.dns1123_label_problem(v), v))]
"""A namespace: a DNS-1123 label."""


class ObjectMeta(Model):
    model_config = ConfigDict(extra="allow")

    name: DnsSubdomain
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    resource_version: str | None = None
    uid: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    owner_references: list[OwnerReference] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)

    @field_validator("namespace")
    @classmethod
    def _namespace_is_label(cls, value: str | None) -> str | None:
        return value if not value else _checked(names.dns1123_label_problem(value), value)  # "": not namespaced

    @field_validator("labels")
    @classmethod
    def _labels_are_qualified(cls, value: dict[str, str]) -> dict[str, str]:
        for key, val in value.items():
            problem = names.label_key_problem(key) or names.label_value_problem(val)
            if problem:
                raise ValueError(f"label {key}={val!r}: {problem}")
        return value


def field_path(loc: tuple[int | str, ...]) -> str:
    """pydantic's location tuple -> `spec.nodes[2].name`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def described(value: Any) -> str:
    """A value as a reason names it: its JSON type, and the value itself when it is short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {'true' if value else 'false'}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string {shown!r}"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


_JSON_TYPES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
    "string_type": "a string",
    "float_type": "a number",
    "float_parsing": "a number",
}
"""pydantic's error types for a value of the wrong JSON type -> the type a reason names (module docstring)."""


def _reason(err: Any, json_types: bool) -> str:
    kind, value = err["type"], err.get("input")
    if json_types and kind in _JSON_TYPES:
        return f"must be {_JSON_TYPES[kind]}, not {described(value)}"
    if json_types and kind == "literal_error" and not isinstance(value, str):
        return f"must be a string ({err['ctx']['expected']}), not {described(value)}"
    return str(err["msg"]).removeprefix("Value error, ")


def invalid_from(exc: pydantic.ValidationError, prefix: str = "", *, json_types: bool = False) -> errors.Invalid:
    """One `errors.Invalid` for pydantic's errors, each at its dotted path (under `prefix`); `json_types`: a value
    of the wrong JSON type is refused as the kinds refuse it (`must be an integer, not string '2'`, module
    docstring), else in pydantic's words."""
    fields = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        path = field_path(loc)
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        fields.append(errors.FieldError(path, _reason(err, json_types)))
    message = "; ".join(str(f) for f in fields) or "invalid object"
    return errors.Invalid(message, fields)


class Resource(Model):
    """A top-level object. Subclasses set `KIND`, `GROUP_VERSIONS`, `PLURAL`, `NAMESPACED`, then `@register`."""

    model_config = ConfigDict(extra="forbid")

    KIND: ClassVar[str] = ""
    PLURAL: ClassVar[str] = ""
    NAMESPACED: ClassVar[bool] = True
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = ("devplace.io/v1alpha1",)
    SCHEMA_MODELS: ClassVar[Mapping[tuple[str, ...], type[BaseModel]]] = {}
    """Fields kept as plain mappings whose published schema is a model's: wire path -> model (a fleet object's
    `("spec", "emco")` holds its level's EMCO body). Read by the OpenAPI documents; validation is the model's own."""

    api_version: str
    kind: str
    metadata: ObjectMeta

    @classmethod
    def from_obj(cls, obj: Any, *, strict: bool = False) -> Self:
        """Validate a wire dict; bad input raises `errors.Invalid` naming each field and reason. `strict`: the write
        boundary's check (module docstring: JSON types as a CRD's structural schema has them, on `conformed(obj)`);
        without it, lenient, for reading what a store holds."""
        try:
            model = cls.model_validate(cls.conformed(obj), strict=True) if strict else cls.model_validate(obj)
        except pydantic.ValidationError as e:
            raise invalid_from(e, json_types=True) from e
        found = list(model.problems())
        if found:
            raise errors.Invalid("; ".join(str(f) for f in found), found)
        return model

    @classmethod
    def conformed(cls, obj: Any) -> Any:
        """`obj` with each float with no fraction (`1e2`, `2.0`) in a field the kind types as an integer written as
        that integer, as kube-apiserver stores it (module docstring); `obj` itself when there is none (what changes
        is copied, never `obj`)."""
        return _conform(obj, _model_step(cls))

    def problems(self) -> Iterator[errors.FieldError]:
        """Rules that span fields, reported with their own paths; kinds override this (default: none)."""
        return iter(())

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace


# -- integers written as floats (module docstring): where a model types an integer, compiled once per model ----------

_MAX_JSON_INTEGER = 2**53 - 1
"""go-openapi's `IsFloat64AJSONInteger` range: the whole numbers a float64 holds exactly."""

_Step = tuple[Any, ...]
"""Where integers are below a field: `("int",)`, `("model", ((key, step), ...))`, `("list", step)`, `("map", step)`
or `("any", (step, ...))` (a union: each member's in turn)."""

_INT: _Step = ("int",)


def _step(annotation: Any) -> _Step | None:
    """The step for a field of type `annotation`; None when no integer can be below it."""
    origin = get_origin(annotation)
    if annotation is int:
        return _INT
    if origin is Annotated:
        return _step(get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _model_step(annotation)
    if origin in (Union, types.UnionType):
        found = tuple(s for s in map(_step, get_args(annotation)) if s is not None)
        return None if not found else found[0] if len(found) == 1 else ("any", found)
    if origin is Literal or not isinstance(origin, type):
        return None
    args = get_args(annotation)
    if issubclass(origin, Mapping) and len(args) == 2:
        inner = _step(args[1])
        return None if inner is None else ("map", inner)
    if issubclass(origin, list | tuple) and args:
        inner = _step(args[0])
        return None if inner is None else ("list", inner)
    return None


_BUILDING: set[type[BaseModel]] = set()


@functools.cache
def _model_step(model: type[BaseModel]) -> _Step | None:
    if model in _BUILDING:  # a model that holds itself: its integers are found from its outermost use
        return None
    _BUILDING.add(model)
    try:
        fields: list[tuple[str, _Step]] = []
        for name, field in model.model_fields.items():
            inner = _step(field.annotation)
            if inner is not None:
                fields.extend((key, inner) for key in dict.fromkeys((field.alias or name, name)))
        return ("model", tuple(fields)) if fields else None
    finally:
        _BUILDING.discard(model)


def _conform(value: Any, step: _Step | None) -> Any:
    if step is None:
        return value
    kind = step[0]
    if kind == "int":
        whole = isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_JSON_INTEGER
        return int(value) if whole else value
    if kind == "any":
        for member in step[1]:
            value = _conform(value, member)
        return value
    if kind == "list" and isinstance(value, list):
        items = [_conform(item, step[1]) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if kind == "map" and isinstance(value, dict):
        entries = {key: _conform(item, step[1]) for key, item in value.items()}
        return value if all(entries[key] is item for key, item in value.items()) else entries
    if kind == "model" and isinstance(value, dict):
        out = value
        for key, inner in step[1]:
            if key in value:
                item = _conform(value[key], inner)
                if item is not value[key]:
                    out = dict(out) if out is value else out
                    out[key] = item
        return out
    return value
