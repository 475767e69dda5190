"""EMCO's bodies: what a `/v2` client POSTs and GETs, `{metadata, spec}`, as typed models.

A body is parsed once, where it enters (the /v2 route, or the catalog reading the store), into a typed model; every
later use reads typed fields. Several spellings ("dialects") of one body are accepted and mean the same thing:

- composite app: `spec.compositeAppVersion` (seed, 22.x) or `spec.version` (21.x);
- cluster label: `{clusterLabel}` (22.x), `{label-name}` (21.x), with emcoctl's `metadata`;
- app intent: `app`, `clusterProvider`/`cluster`/`clusterLabel`, or 21.x's `app-name`,
  `provider-name`/`cluster-name`/`cluster-label-name`;
- hpa intent: `spec.app` (seed, 22.x), `spec.app-name` (21.x), `spec.appName`;
- hpa resource consumer and resource requirement: see `consumers` and `requirements`, which hold those bodies.

Each level's `body` class picks the dialect from the body's shape (`EmcoBody.dialect`) and validates with that
dialect's model, so an error names the field as the client spelled it (`spec.resource.requests`). The store keeps
the body exactly as it came (`spec.emco` of the stored kind): GET answers it byte for byte in the client's own
dialect, with no defaults added. Names are EMCO's (`names`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar, Self

import pydantic
from pydantic import AliasChoices, ConfigDict, Field, JsonValue, field_validator, model_validator

from devplace import errors
from devplace.api import Model, Quantity, dns1123_subdomain_problem, invalid_from, label_key_problem, parse_documents
from devplace.placement._names import (
    EMCO_NAME_MAX,
    EMCO_NAME_PATTERN,
    checked_cluster_label,
    checked_emco_name,
    checked_labels,
)

_NAME_SCHEMA: dict[str, JsonValue] = {"pattern": EMCO_NAME_PATTERN.pattern, "maxLength": EMCO_NAME_MAX}


class EmcoMetadata(Model):
    name: str = Field(json_schema_extra=_NAME_SCHEMA)
    description: str = Field("", max_length=1024)
    user_data1: str = Field("", max_length=512)
    user_data2: str = Field("", max_length=512)

    @field_validator("name")
    @classmethod
    def _name_ok(cls, value: str) -> str:
        return checked_emco_name(value)


class ClusterMetadata(EmcoMetadata):
    """A cluster's metadata may also carry labels (devplace): `{"gpu": "true"}`, or a plain list `["edge"]` (value
    "")."""

    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels", mode="before")
    @classmethod
    def _labels_from_list(cls, value: Any) -> Any:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return dict.fromkeys(value, "")
        return value

    @field_validator("labels")
    @classmethod
    def _labels_are_qualified(cls, value: dict[str, str]) -> dict[str, str]:
        return checked_labels(value)


class EmcoBody(Model):
    """`{metadata, spec}`; subclasses narrow both. `check` holds the rules that span fields (raises `Invalid`).

    A level whose body comes in several dialects subclasses this once as its face (the typed accessors every user
    reads) and once per dialect (the fields as spelled); `dialect` picks the dialect class for a raw body.
    """

    DIALECTS: ClassVar[tuple[type[EmcoBody], ...]] = ()

    metadata: EmcoMetadata

    @classmethod
    def dialect(cls, obj: dict[str, Any]) -> type[EmcoBody]:
        """The model that validates `obj` (a level with several dialects picks one by the body's shape)."""
        return cls

    @classmethod
    def parse(cls, obj: Any, prefix: str = "") -> Self:
        """Validate a raw body (any dialect); raises `errors.Invalid` naming each field as the client spelled it."""
        if not isinstance(obj, dict):
            raise errors.Invalid.field(prefix, f"the body must be a JSON object, not {type(obj).__name__}")
        model = cls.dialect(obj)
        try:
            body = model.model_validate(obj)
        except pydantic.ValidationError as e:
            raise invalid_from(e, prefix) from e
        assert isinstance(body, cls)
        try:
            body.check()
        except errors.Invalid as e:
            if not prefix:
                raise
            raise errors.Invalid(
                e.message, [errors.FieldError(f"{prefix}.{f.path}", f.reason) for f in e.fields]
            ) from e
        return body

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON schema of every accepted dialect (for OpenAPI), references inlined."""
        models = cls.DIALECTS or (cls,)
        schemas = [_inlined(m.model_json_schema(by_alias=True)) for m in models]
        return schemas[0] if len(schemas) == 1 else {"anyOf": schemas, "title": cls.__name__}

    def check(self) -> None:
        return None

    @property
    def name(self) -> str:
        return self.metadata.name


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema with its `#/$defs/...` references replaced by the definitions (the models are not recursive)."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref.removeprefix("#/$defs/")])
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out: dict[str, Any] = walk(schema)
    return out


class _OpenSpec(Model):
    """A spec whose fields are all optional and whose unknown fields are kept (EMCO's specs grow over releases)."""

    model_config = ConfigDict(extra="allow")


class ProjectBody(EmcoBody):
    spec: _OpenSpec | None = None


class ClusterProviderBody(EmcoBody):
    spec: _OpenSpec | None = None


class ClusterNode(Model):
    """One node of a static inventory: what is free for new pods, and its labels."""

    name: str
    allocatable: dict[str, str | int] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _node_name(cls, value: str) -> str:
        problem = dns1123_subdomain_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("allocatable", mode="before")
    @classmethod
    def _no_bools(cls, value: Any) -> Any:
        if isinstance(value, dict) and any(isinstance(v, bool | float) for v in value.values()):
            raise ValueError("amounts are quantity strings or integers")
        return value

    @field_validator("allocatable")
    @classmethod
    def _resources(cls, value: dict[str, str | int]) -> dict[str, str | int]:
        for key, amount in value.items():
            problem = label_key_problem(key)
            if problem:
                raise ValueError(f"resource name {problem}")
            try:
                quantity = Quantity(amount)
            except errors.Invalid as e:
                raise ValueError(f"{key}: {e.message}") from e
            if quantity < Quantity(0):
                raise ValueError(f"{key}: {amount} is negative")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        return checked_labels(value)


def _http_url(value: str | None) -> str | None:
    if value is not None and not re.match(r"^https?://[^\s/]+(/\S*)?$", value):
        raise ValueError(f"{value!r} is not an http(s) URL")
    return value


class ClusterSpec(Model):
    """Static inventory (`nodes`), or live from a member API server at `endpoint` (then `nodes` is ignored).
    EMCO 22.x's `gitOps` block is kept as sent (devplace does not sync through git)."""

    nodes: list[ClusterNode] = Field(default_factory=list)
    endpoint: str | None = None
    git_ops: dict[str, Any] | None = None

    @field_validator("endpoint")
    @classmethod
    def _endpoint_is_http(cls, value: str | None) -> str | None:
        return _http_url(value)


class ClusterBody(EmcoBody):
    metadata: ClusterMetadata
    spec: ClusterSpec | None = None

    def check(self) -> None:
        seen: set[str] = set()
        for i, node in enumerate(self.nodes):
            if node.name in seen:
                raise errors.Invalid.field(f"spec.nodes[{i}].name", f"duplicate node {node.name!r}")
            seen.add(node.name)

    @property
    def nodes(self) -> list[ClusterNode]:
        return self.spec.nodes if self.spec is not None else []

    @property
    def endpoint(self) -> str | None:
        return self.spec.endpoint if self.spec is not None else None


class CompositeAppSpec(Model):
    composite_app_version: str = Field(
        validation_alias=AliasChoices("compositeAppVersion", "version"), json_schema_extra=_NAME_SCHEMA
    )

    @field_validator("composite_app_version")
    @classmethod
    def _version_ok(cls, value: str) -> str:
        return checked_emco_name(value)


class CompositeAppBody(EmcoBody):
    spec: CompositeAppSpec

    @property
    def version(self) -> str:
        return self.spec.composite_app_version


def _manifest_problem(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return f"must be a mapping, not {type(doc).__name__}"
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            return f"{key}: required"
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return "metadata.name: required"
    problem = dns1123_subdomain_problem(meta["name"])
    return f"metadata.name: {problem}" if problem else None


def check_manifests(docs: list[Any], where: Callable[[int], str] = lambda i: f"document {i + 1}") -> None:
    """Every document is a named Kubernetes object and no two share kind and name; raises `ValueError`."""
    seen: set[tuple[str, str]] = set()
    for i, doc in enumerate(docs):
        problem = _manifest_problem(doc)
        if problem:
            raise ValueError(f"{where(i)}: {problem}")
        key = (doc["kind"], doc["metadata"]["name"])
        if key in seen:
            raise ValueError(f"{where(i)}: duplicate {key[0]} {key[1]!r}")
        seen.add(key)


class AppSpec(Model):
    """The app's Kubernetes manifests: a list of objects, or YAML/JSON text with one or more documents."""

    manifests: list[dict[str, Any]] = Field(default_factory=list)

    @field_validator("manifests", mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_documents(value)
        return value

    @field_validator("manifests")
    @classmethod
    def _each_is_an_object(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        check_manifests(list(value))
        return value


class AppBody(EmcoBody):
    """An app: manifests inline (devplace), or, as EMCO registers apps, a chart archive in a multipart file part."""

    spec: AppSpec | None = None

    @property
    def manifests(self) -> list[dict[str, Any]]:
        return self.spec.manifests if self.spec is not None else []


class DeploymentIntentGroupBody(EmcoBody):
    spec: _OpenSpec | None = None


class DeploymentIntentSpec(Model):
    """EMCO's list of the intents a group uses: `{"genericPlacementIntent": "gpi", "<controller>": "<intent>"}`."""

    intent: dict[str, str] = Field(default_factory=dict)


class DeploymentIntentBody(EmcoBody):
    spec: DeploymentIntentSpec


class GenericPlacementIntentBody(EmcoBody):
    spec: _OpenSpec | None = None


class ClusterLabelBody(Model):
    """EMCO's cluster label (`POST .../clusters/{c}/labels`): `{"clusterLabel": "edge"}` or `"zone=east"`.

    It lands in the cluster's labels (`edge` as key `edge` with value ""), which generic placement intents select by
    `clusterLabel`. EMCO 21.x clients' `label-name` is accepted too, and so is the `metadata` (and empty `spec`) that
    emcoctl sends with every body.
    """

    cluster_label: str = Field(
        validation_alias=AliasChoices("clusterLabel", "label-name"),
        serialization_alias="clusterLabel",
        max_length=381,  # a qualified key (253-character prefix, "/", 63-character name), "=", a 63-character value
    )
    metadata: dict[str, Any] | None = None
    spec: dict[str, Any] | None = None

    @field_validator("cluster_label")
    @classmethod
    def _label_ok(cls, value: str) -> str:
        return checked_cluster_label(value)


class ClusterSelector(Model):
    """One cluster by name, or every cluster carrying a label (`gpu` = has the key, `gpu=true` = key with value)."""

    cluster_provider: str = Field(validation_alias=AliasChoices("clusterProvider", "provider-name", "cluster_provider"))
    cluster: str | None = Field(None, validation_alias=AliasChoices("cluster", "cluster-name"))
    cluster_label: str | None = Field(
        None, validation_alias=AliasChoices("clusterLabel", "cluster-label-name", "cluster_label")
    )

    @field_validator("cluster_provider")
    @classmethod
    def _provider_ok(cls, value: str) -> str:
        return checked_emco_name(value)

    @field_validator("cluster")
    @classmethod
    def _cluster_ok(cls, value: str | None) -> str | None:
        return None if value is None else checked_emco_name(value)

    @field_validator("cluster_label")
    @classmethod
    def _label_ok(cls, value: str | None) -> str | None:
        return None if value is None else checked_cluster_label(value)

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.cluster is None) == (self.cluster_label is None):
            raise ValueError("exactly one of cluster and clusterLabel is required")
        return self


class PlacementIntent(Model):
    all_of: list[ClusterSelector] = Field(default_factory=list)
    any_of: list[ClusterSelector] = Field(default_factory=list)


class GenericAppIntentSpec(Model):
    app: str = Field(validation_alias=AliasChoices("app", "appName", "app-name"))
    intent: PlacementIntent

    @field_validator("app")
    @classmethod
    def _app_ok(cls, value: str) -> str:
        return checked_emco_name(value)


class GenericAppIntentBody(EmcoBody):
    spec: GenericAppIntentSpec

    def check(self) -> None:
        if not self.spec.intent.all_of and not self.spec.intent.any_of:
            raise errors.Invalid.field("spec.intent", "allOf or anyOf must list at least one cluster or label")


class HpaIntentSpec(Model):
    app: str = Field(validation_alias=AliasChoices("app", "appName", "app-name"))

    @field_validator("app")
    @classmethod
    def _app_ok(cls, value: str) -> str:
        return checked_emco_name(value)


class HpaIntentBody(EmcoBody):
    spec: HpaIntentSpec
