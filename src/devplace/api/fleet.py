"""Fleet objects: EMCO's hierarchy of projects, apps, intents and clusters, as devplace kinds.

Two faces of every object:

- The EMCO body (`ProjectBody`, `HpaRequirementBody`, ...): what a `/v2` client POSTs and GETs, `{metadata, spec}`.
  Names follow EMCO, not Kubernetes: `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`, at most 128 characters (so
  `core-fwall-RAM-needs` is fine); description <= 1024 characters, userData1/2 <= 512. Seed 004's bodies are accepted
  as written: an intent's `spec.app` or `spec.appName`, a consumer nested under `spec.consumer` with `container-name`,
  requirements with `mandatory`, `weight`, `allocatable`, `name`, `requests`, `limits`, `units` or `name`/`value`.
  Pydantic checks shapes; `body.check()` adds the rules that span fields and raises `errors.Invalid` naming the path.
- The stored kind (`Project`, `HpaResourceRequirement`, ...), group `fleet.devplace.io/v1alpha1`, cluster-scoped.
  EMCO names are not DNS-1123 and the hierarchy must be part of the key, so `metadata.name` is
  `Level.store_name(path)`: a readable sanitised prefix of the leaf name plus a 20-hex blake2b digest of the kind and
  the full EMCO path (at most 61 characters, hence also a valid label value). The EMCO path lives in `spec.path`, the
  body in `spec.emco`; label `fleet.devplace.io/parent` holds the parent's store name, so "list the children of X" is
  a label-selector list, and `fleet.devplace.io/deployment-intent-group` marks everything below a deployment intent
  group so a plan reads each kind of its subtree with one list.

Allocatable amounts (`requirement_quantities`) are exact Kubernetes quantities. A bare number takes its unit from
`units`, defaulting to MB (10^6 bytes, the seed's default) for memory and to whole units otherwise (cores for cpu);
cpu also takes `units: m` (millicores); a string with a Kubernetes suffix (`1.5Gi`, `500m`) is used as it is and then
`units` must be absent. Extended resources (anything but cpu, memory, ephemeral-storage) cannot be overcommitted in
Kubernetes, so when both `requests` and `limits` are given they must be equal.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Literal, Self

import pydantic
from pydantic import AliasChoices, ConfigDict, Field, JsonValue, field_validator, model_validator

from devplace import errors
from devplace.api import names
from devplace.api.manifests import parse_documents
from devplace.api.meta import Model, Resource, invalid_from
from devplace.api.quantity import Quantity
from devplace.api.registry import register

__all__ = [
    "API_VERSION",
    "APP",
    "CHILD_WRITES_ANNOTATION",
    "CLUSTER",
    "CLUSTER_PROVIDER",
    "COMPOSITE_APP",
    "DEPLOYMENT_INTENT_GROUP",
    "DIG_LABEL",
    "GENERIC_APP_INTENT",
    "GENERIC_PLACEMENT_INTENT",
    "HPA_CONSUMER",
    "HPA_INTENT",
    "HPA_REQUIREMENT",
    "LEVELS",
    "OVERCOMMITTABLE",
    "PARENT_LABEL",
    "PROJECT",
    "App",
    "AppBody",
    "Cluster",
    "ClusterBody",
    "ClusterLabelBody",
    "ClusterSelector",
    "CompositeApp",
    "DeploymentIntentGroup",
    "EmcoBody",
    "GenericAppIntentBody",
    "HpaConsumerBody",
    "HpaIntentBody",
    "HpaRequirementBody",
    "HpaResourceRequirement",
    "Level",
    "Project",
    "cluster_label_text",
    "emco_name_problem",
    "requirement_quantities",
    "split_cluster_label",
]

API_VERSION = "fleet.devplace.io/v1alpha1"
PARENT_LABEL = "fleet.devplace.io/parent"
DIG_LABEL = "fleet.devplace.io/deployment-intent-group"
CHILD_WRITES_ANNOTATION = "fleet.devplace.io/child-writes"

EMCO_NAME_MAX = 128
_EMCO_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

OVERCOMMITTABLE = frozenset({"cpu", "memory", "ephemeral-storage"})
"""Resources whose requests and limits may differ; every other (extended) resource needs requests == limits."""

WORKLOAD_API_VERSIONS: dict[str, str] = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
    "Pod": "v1",
}
"""The kinds an HPA resource consumer may name, with the apiVersion each is served as."""


def emco_name_problem(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > EMCO_NAME_MAX:
        return f"must be no more than {EMCO_NAME_MAX} characters (got {len(value)})"
    if not _EMCO_NAME.match(value):
        return (
            f"{value!r} must consist of alphanumerics, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def _emco_name(value: str) -> str:
    problem = emco_name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _qualified_labels(value: dict[str, str]) -> dict[str, str]:
    for key, val in value.items():
        problem = names.label_key_problem(key) or names.label_value_problem(val)
        if problem:
            raise ValueError(f"label {key}={val!r}: {problem}")
    return value


# -- EMCO bodies ------------------------------------------------------------------------------------------------


_NAME_SCHEMA: dict[str, JsonValue] = {"pattern": _EMCO_NAME.pattern, "maxLength": EMCO_NAME_MAX}


class EmcoMetadata(Model):
    name: str = Field(json_schema_extra=_NAME_SCHEMA)
    description: str = Field("", max_length=1024)
    user_data1: str = Field("", max_length=512)
    user_data2: str = Field("", max_length=512)

    @field_validator("name")
    @classmethod
    def _name_ok(cls, value: str) -> str:
        return _emco_name(value)


class ClusterMetadata(EmcoMetadata):
    """A cluster's metadata also carries labels: `{"gpu": "true"}`, or EMCO's plain list `["edge"]` (value "")."""

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
        return _qualified_labels(value)


class EmcoBody(Model):
    """`{metadata, spec}`; subclasses narrow both. `check` holds the rules that span fields (raises `Invalid`)."""

    metadata: EmcoMetadata

    @classmethod
    def parse(cls, obj: Any, prefix: str = "") -> Self:
        try:
            body = cls.model_validate(obj)
        except pydantic.ValidationError as e:
            raise invalid_from(e, prefix) from e
        body.check()
        return body

    def check(self) -> None:
        return None

    @property
    def name(self) -> str:
        return self.metadata.name

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class _OpenSpec(Model):
    """A spec whose fields are all optional and whose unknown fields are kept (EMCO's specs grow over releases)."""

    model_config = ConfigDict(extra="allow")


class ProjectBody(EmcoBody):
    spec: _OpenSpec = Field(default_factory=_OpenSpec)


class ClusterProviderBody(EmcoBody):
    spec: _OpenSpec = Field(default_factory=_OpenSpec)


class ClusterNode(Model):
    """One node of a static inventory: what is free for new pods, and its labels."""

    name: str
    allocatable: dict[str, str | int] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _node_name(cls, value: str) -> str:
        problem = names.dns1123_subdomain_problem(value)
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
            problem = names.label_key_problem(key)
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
        return _qualified_labels(value)


class ClusterSpec(Model):
    """Static inventory (`nodes`), or live from a member devplace API server at `endpoint` (then `nodes` is ignored)."""

    nodes: list[ClusterNode] = Field(default_factory=list)
    endpoint: str | None = None

    @field_validator("endpoint")
    @classmethod
    def _endpoint_is_http(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+(/\S*)?$", value):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value


class ClusterBody(EmcoBody):
    metadata: ClusterMetadata
    spec: ClusterSpec = Field(default_factory=ClusterSpec)

    def check(self) -> None:
        seen: set[str] = set()
        for i, node in enumerate(self.spec.nodes):
            if node.name in seen:
                raise errors.Invalid.field(f"spec.nodes[{i}].name", f"duplicate node {node.name!r}")
            seen.add(node.name)


class CompositeAppSpec(Model):
    composite_app_version: str = Field(json_schema_extra=_NAME_SCHEMA)

    @field_validator("composite_app_version")
    @classmethod
    def _version_ok(cls, value: str) -> str:
        return _emco_name(value)


class CompositeAppBody(EmcoBody):
    spec: CompositeAppSpec


def _manifest_problem(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return f"must be a mapping, not {type(doc).__name__}"
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            return f"{key}: required"
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return "metadata.name: required"
    problem = names.dns1123_subdomain_problem(meta["name"])
    return f"metadata.name: {problem}" if problem else None


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
        seen: set[tuple[str, str]] = set()
        for i, doc in enumerate(value):
            problem = _manifest_problem(doc)
            if problem:
                raise ValueError(f"document {i + 1}: {problem}")
            key = (doc["kind"], doc["metadata"]["name"])
            if key in seen:
                raise ValueError(f"document {i + 1}: duplicate {key[0]} {key[1]!r}")
            seen.add(key)
        return value


class AppBody(EmcoBody):
    spec: AppSpec = Field(default_factory=AppSpec)


class DeploymentIntentGroupBody(EmcoBody):
    spec: _OpenSpec = Field(default_factory=_OpenSpec)


class GenericPlacementIntentBody(EmcoBody):
    spec: _OpenSpec = Field(default_factory=_OpenSpec)


def split_cluster_label(text: str) -> tuple[str, str | None]:
    """`gpu` -> ("gpu", None) (any value), `zone=east` -> ("zone", "east")."""
    key, sep, value = text.partition("=")
    return key, (value if sep else None)


def cluster_label_text(key: str, value: str) -> str:
    """How EMCO's /labels lists a cluster label: the key alone when its value is empty, else `key=value`."""
    return f"{key}={value}" if value else key


def _cluster_label(value: str) -> str:
    key, val = split_cluster_label(value)
    problem = names.label_key_problem(key) or (None if val is None else names.label_value_problem(val))
    if problem:
        raise ValueError(problem)
    return value


class ClusterLabelBody(Model):
    """EMCO's cluster label (`POST .../clusters/{c}/labels`): `{"clusterLabel": "edge"}` or `"zone=east"`.

    It lands in the cluster's `metadata.labels` (`edge` as key `edge` with value ""), which generic placement
    intents select by `clusterLabel`; EMCO 21.x clients' `label-name` is accepted too.
    """

    cluster_label: str = Field(
        validation_alias=AliasChoices("clusterLabel", "label-name"),
        serialization_alias="clusterLabel",
        max_length=381,  # a qualified key (253-character prefix, "/", 63-character name), "=", a 63-character value
    )

    @field_validator("cluster_label")
    @classmethod
    def _label_ok(cls, value: str) -> str:
        return _cluster_label(value)


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
        return _emco_name(value)

    @field_validator("cluster")
    @classmethod
    def _cluster_ok(cls, value: str | None) -> str | None:
        return None if value is None else _emco_name(value)

    @field_validator("cluster_label")
    @classmethod
    def _label_ok(cls, value: str | None) -> str | None:
        return None if value is None else _cluster_label(value)

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
        return _emco_name(value)


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
        return _emco_name(value)


class HpaIntentBody(EmcoBody):
    spec: HpaIntentSpec


class ConsumerRef(Model):
    """The Kubernetes object (and container) that receives the resources."""

    api_version: str
    kind: Literal["Deployment", "StatefulSet", "DaemonSet", "Job", "Pod"]
    name: str
    container_name: str | None = Field(
        None,
        validation_alias=AliasChoices("container-name", "containerName", "container_name"),
        serialization_alias="container-name",
    )

    @field_validator("name")
    @classmethod
    def _name_ok(cls, value: str) -> str:
        problem = names.dns1123_subdomain_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("container_name")
    @classmethod
    def _container_ok(cls, value: str | None) -> str | None:
        if value is not None and (problem := names.dns1123_label_problem(value)):
            raise ValueError(problem)
        return value


class ConsumerSpec(Model):
    consumer: ConsumerRef
    replicas: int | None = Field(None, ge=1, le=10_000)
    exclusive_cpus: bool = False


class HpaConsumerBody(EmcoBody):
    spec: ConsumerSpec

    def check(self) -> None:
        ref = self.spec.consumer
        want = WORKLOAD_API_VERSIONS[ref.kind]
        if ref.api_version != want:
            raise errors.Invalid.field("spec.consumer.apiVersion", f"a {ref.kind} is served as {want!r}")
        if self.spec.replicas is not None and ref.kind in ("DaemonSet", "Pod"):
            raise errors.Invalid.field("spec.replicas", f"a {ref.kind} has no replica count")


Amount = int | str


class RequirementSpec(Model):
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
    def _no_bool_or_float(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be an integer or a quantity string, not a boolean")
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError("use a quantity string for a fractional amount (e.g. '500m' or '1.5Gi')")
            return int(value)
        return value

    @property
    def is_allocatable(self) -> bool:
        """As stated, else inferred: amounts make it allocatable, a lone `value` makes it a label."""
        if self.allocatable is not None:
            return self.allocatable
        return self.requests is not None or self.limits is not None or self.value is None


class HpaRequirementBody(EmcoBody):
    spec: RequirementSpec

    def check(self) -> None:
        spec = self.spec
        problem = names.label_key_problem(spec.name)
        if problem:
            raise errors.Invalid.field("spec.name", problem)
        if spec.is_allocatable:
            if spec.value is not None:
                raise errors.Invalid.field("spec.value", "forbidden for an allocatable resource (use requests/limits)")
            requirement_quantities(spec)
        else:
            for key in ("requests", "limits", "units"):
                if getattr(spec, key) is not None:
                    raise errors.Invalid.field(f"spec.{key}", "forbidden for a non-allocatable resource (use value)")
            if spec.value is None:
                raise errors.Invalid.field("spec.value", "required for a non-allocatable resource (a node label value)")
            problem = names.label_value_problem(spec.value)
            if problem:
                raise errors.Invalid.field("spec.value", problem)


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


def _unit_factor(resource: str, units: str | None) -> tuple[Fraction, bool]:
    """(multiplier, binary format) of a bare number of `resource` in `units`."""
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        unit = "MB" if units is None or units == "" else units
        if unit not in _BYTE_UNITS:
            known = ", ".join(_BYTE_UNITS)
            raise errors.Invalid.field("spec.units", f"unknown unit {unit!r} for {resource} (known: {known})")
        factor, binary = _BYTE_UNITS[unit]
        return Fraction(factor), binary
    if resource == "cpu":
        if units is None or units == "":
            return Fraction(1), False
        if units not in _CPU_UNITS:
            raise errors.Invalid.field("spec.units", f"unknown unit {units!r} for cpu (known: cores, m)")
        return _CPU_UNITS[units], False
    if units is None or units in _COUNT_UNITS:
        return Fraction(1), False
    raise errors.Invalid.field("spec.units", f"{resource} is counted in whole units; {units!r} does not apply")


def _amount(resource: str, field: str, raw: Amount, units: str | None) -> Quantity:
    path = f"spec.{field}"
    text = str(raw)
    if _BARE_NUMBER.match(text):
        factor, binary = _unit_factor(resource, units)
        value = Quantity(text).as_fraction() * factor
        quantity = Quantity.from_fraction(value, binary=binary)
    else:
        try:
            quantity = Quantity(text)
        except errors.Invalid as e:
            raise errors.Invalid.field(path, e.message) from e
        if units:
            raise errors.Invalid.field("spec.units", f"{path} {text!r} already carries its unit; drop units")
    if quantity <= Quantity(0):
        raise errors.Invalid.field(path, f"must be positive (got {text})")
    return quantity


def requirement_quantities(spec: RequirementSpec) -> tuple[Quantity | None, Quantity | None]:
    """(requests, limits) as exact quantities; raises `Invalid` for bad amounts, units, or requests > limits."""
    if spec.requests is None and spec.limits is None:
        raise errors.Invalid.field("spec.requests", "requests or limits is required for an allocatable resource")
    requests = None if spec.requests is None else _amount(spec.name, "requests", spec.requests, spec.units)
    limits = None if spec.limits is None else _amount(spec.name, "limits", spec.limits, spec.units)
    if requests is not None and limits is not None:
        if requests > limits:
            raise errors.Invalid.field("spec.requests", f"requests {requests} exceed limits {limits}")
        if spec.name not in OVERCOMMITTABLE and requests != limits:
            raise errors.Invalid.field(
                "spec.limits",
                f"{spec.name} cannot be overcommitted: requests ({requests}) must equal limits ({limits})",
            )
    return requests, limits


# -- the hierarchy ----------------------------------------------------------------------------------------------


def _sanitized(name: str, limit: int = 40) -> str:
    text = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return text[:limit].rstrip("-")


@dataclass(frozen=True)
class Level:
    """One collection of the /v2 hierarchy: its stored kind, URL segment, path parameters, parent and body model.

    A path is the tuple of every identifying string from the root: `("my-proj1", "my-capp1", "v1.0", "my-dig1")` for
    a deployment intent group (a composite app is identified by name and version).
    """

    kind: str
    title: str
    segment: str
    params: tuple[str, ...]
    parent: Level | None
    body: type[EmcoBody]

    @property
    def chain(self) -> tuple[Level, ...]:
        """Root first, self last."""
        out: list[Level] = []
        level: Level | None = self
        while level is not None:
            out.append(level)
            level = level.parent
        return tuple(reversed(out))

    @property
    def all_params(self) -> tuple[str, ...]:
        return tuple(p for level in self.chain for p in level.params)

    @property
    def parent_width(self) -> int:
        return len(self.all_params) - len(self.params)

    def identity(self, body: EmcoBody) -> tuple[str, ...]:
        """The path segment a body names: its name (and version for a composite app)."""
        if isinstance(body, CompositeAppBody):
            return (body.metadata.name, body.spec.composite_app_version)
        return (body.metadata.name,)

    def store_name(self, path: tuple[str, ...]) -> str:
        digest = hashlib.blake2b(
            "\x00".join((self.kind, *path)).encode("utf-8", "surrogatepass"), digest_size=10
        ).hexdigest()
        prefix = _sanitized(path[-len(self.params)]) if path else ""
        return f"{prefix}-{digest}" if prefix else f"{self.kind.lower()}-{digest}"

    def describe(self, path: tuple[str, ...]) -> str:
        """`hpa intent "fwall-hpa-intent"`, `composite app "my-capp1" version "v1.0"`."""
        own = path[len(path) - len(self.params) :]
        if len(own) == 2:
            return f'{self.title} "{own[0]}" version "{own[1]}"'
        return f'{self.title} "{own[0]}"' if own else self.title

    @property
    def children(self) -> tuple[Level, ...]:
        return tuple(level for level in LEVELS if level.parent is self)

    @property
    def under_dig(self) -> bool:
        """Is this a strict descendant of a deployment intent group?"""
        return DEPLOYMENT_INTENT_GROUP in self.chain[:-1]


PROJECT = Level("Project", "project", "projects", ("project",), None, ProjectBody)
COMPOSITE_APP = Level(
    "CompositeApp", "composite app", "composite-apps", ("compositeApp", "version"), PROJECT, CompositeAppBody
)
APP = Level("App", "app", "apps", ("app",), COMPOSITE_APP, AppBody)
DEPLOYMENT_INTENT_GROUP = Level(
    "DeploymentIntentGroup",
    "deployment intent group",
    "deployment-intent-groups",
    ("deploymentIntentGroup",),
    COMPOSITE_APP,
    DeploymentIntentGroupBody,
)
GENERIC_PLACEMENT_INTENT = Level(
    "GenericPlacementIntent",
    "generic placement intent",
    "generic-placement-intents",
    ("genericPlacementIntent",),
    DEPLOYMENT_INTENT_GROUP,
    GenericPlacementIntentBody,
)
GENERIC_APP_INTENT = Level(
    "GenericPlacementAppIntent",
    "app intent",
    "app-intents",
    ("appIntent",),
    GENERIC_PLACEMENT_INTENT,
    GenericAppIntentBody,
)
HPA_INTENT = Level("HpaIntent", "hpa intent", "hpa-intents", ("hpaIntent",), DEPLOYMENT_INTENT_GROUP, HpaIntentBody)
HPA_CONSUMER = Level(
    "HpaResourceConsumer", "hpa resource consumer", "hpa-resource-consumers", ("consumer",), HPA_INTENT, HpaConsumerBody
)
HPA_REQUIREMENT = Level(
    "HpaResourceRequirement",
    "resource requirement",
    "resource-requirements",
    ("requirement",),
    HPA_CONSUMER,
    HpaRequirementBody,
)
CLUSTER_PROVIDER = Level(
    "ClusterProvider", "cluster provider", "cluster-providers", ("clusterProvider",), None, ClusterProviderBody
)
CLUSTER = Level("Cluster", "cluster", "clusters", ("cluster",), CLUSTER_PROVIDER, ClusterBody)

LEVELS: tuple[Level, ...] = (
    PROJECT,
    COMPOSITE_APP,
    APP,
    DEPLOYMENT_INTENT_GROUP,
    GENERIC_PLACEMENT_INTENT,
    GENERIC_APP_INTENT,
    HPA_INTENT,
    HPA_CONSUMER,
    HPA_REQUIREMENT,
    CLUSTER_PROVIDER,
    CLUSTER,
)


# -- stored kinds -----------------------------------------------------------------------------------------------


class FleetSpec(Model):
    path: list[str]
    emco: dict[str, Any]


class FleetObject(Resource):
    """A stored fleet object; `spec.emco` must be a valid body of the kind's level."""

    NAMESPACED: ClassVar[bool] = False
    GROUP_VERSIONS: ClassVar[tuple[str, ...]] = (API_VERSION,)
    LEVEL: ClassVar[Level]

    spec: FleetSpec
    status: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _emco_body_is_valid(self) -> Self:
        level = type(self).LEVEL
        if len(self.spec.path) != len(level.all_params):
            raise ValueError(f"spec.path must have {len(level.all_params)} segments ({', '.join(level.all_params)})")
        level.body.parse(self.spec.emco, "spec.emco")
        return self


def _fleet_kind(level: Level, plural: str) -> Callable[[type[FleetObject]], type[FleetObject]]:
    def decorate(cls: type[FleetObject]) -> type[FleetObject]:
        cls.KIND = level.kind
        cls.PLURAL = plural
        cls.LEVEL = level
        return register(cls)

    return decorate


@_fleet_kind(PROJECT, "projects")
class Project(FleetObject):
    pass


@_fleet_kind(COMPOSITE_APP, "compositeapps")
class CompositeApp(FleetObject):
    pass


@_fleet_kind(APP, "apps")
class App(FleetObject):
    pass


@_fleet_kind(DEPLOYMENT_INTENT_GROUP, "deploymentintentgroups")
class DeploymentIntentGroup(FleetObject):
    pass


@_fleet_kind(GENERIC_PLACEMENT_INTENT, "genericplacementintents")
class GenericPlacementIntent(FleetObject):
    pass


@_fleet_kind(GENERIC_APP_INTENT, "genericplacementappintents")
class GenericPlacementAppIntent(FleetObject):
    pass


@_fleet_kind(HPA_INTENT, "hpaintents")
class HpaIntent(FleetObject):
    pass


@_fleet_kind(HPA_CONSUMER, "hparesourceconsumers")
class HpaResourceConsumer(FleetObject):
    pass


@_fleet_kind(HPA_REQUIREMENT, "hparesourcerequirements")
class HpaResourceRequirement(FleetObject):
    pass


@_fleet_kind(CLUSTER_PROVIDER, "clusterproviders")
class ClusterProvider(FleetObject):
    pass


@_fleet_kind(CLUSTER, "clusters")
class Cluster(FleetObject):
    pass
