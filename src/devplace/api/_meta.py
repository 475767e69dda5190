"""Kubernetes-shaped object metadata and the base of every typed object.

Objects travel as plain JSON dicts (camelCase) through the store and over the wire; the typed models here validate
them at the boundary (API server, CLI, simulation harness) and give parts typed access. `Resource.from_obj` turns
pydantic's errors into one `errors.Invalid` whose fields carry dotted paths (`spec.capacity`), so a user sees the
field and the reason, never a stack trace.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any, ClassVar, Self

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from devplace import errors
from devplace.api import _names as names

SERVER_OWNED_METADATA = (
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
)
"""Metadata only the server writes; a client's body never sets it (the one list: API boundary, store, CLI apply).

- `api.manifests.validated`, the boundary every client write passes, drops all of it except `resourceVersion`,
  which an update carries as its compare-and-swap precondition (never as the value stored).
- The store stamps `resourceVersion`, `uid`, `generation` and `creationTimestamp` on every write (an update keeps the
  stored identity) and never stores `deletionTimestamp`, `deletionGracePeriodSeconds` or `selfLink` from a caller:
  devplace has no graceful deletion, so an object is never born "being deleted", and an update keeps the stored
  value (none). `selfLink` went out of Kubernetes in 1.20.
- `managedFields` is the API server's field manager's (server-side apply): it computes them after the boundary and
  hands them to the store, which passes them through.
- The CLI's apply plan (`api.applies`) writes none of it from a manifest and keeps the stored values on update.
"""


class Model(BaseModel):
    """Base of every wire model: camelCase on the wire, snake_case in Python, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=False,
        ser_json_inf_nan="constants",
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


def invalid_from(exc: pydantic.ValidationError, prefix: str = "") -> errors.Invalid:
    fields = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        path = field_path(loc)
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        msg = str(err["msg"]).removeprefix("Value error, ")
        fields.append(errors.FieldError(path, msg))
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
    def from_obj(cls, obj: Any) -> Self:
        """Validate a wire dict; bad input raises `errors.Invalid` naming each field and reason."""
        try:
            model = cls.model_validate(obj)
        except pydantic.ValidationError as e:
            raise invalid_from(e) from e
        found = list(model.problems())
        if found:
            raise errors.Invalid("; ".join(str(f) for f in found), found)
        return model

    def problems(self) -> Iterator[errors.FieldError]:
        """Rules that span fields, reported with their own paths; kinds override this (default: none)."""
        return iter(())

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace
