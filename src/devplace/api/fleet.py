"""Fleet objects: EMCO's hierarchy of projects, apps, intents and clusters, as devplace kinds.

Two faces of every object:

- The EMCO body (`HpaConsumerBody`, `HpaRequirementBody`, ...): what a `/v2` client POSTs and GETs, `{metadata, spec}`.
  A body is parsed once, where it enters (the /v2 route, or the catalog reading the store), into a typed model; every
  later use reads typed fields. Several spellings ("dialects") of one body are accepted and mean the same thing:

  - hpa intent: `spec.app` (seed, 22.x), `spec.app-name` (21.x), `spec.appName`;
  - hpa resource consumer: seed `spec.consumer{apiVersion, kind, name, container-name}` plus `spec.replicas`;
    EMCO's flat `spec{apiVersion, kind, replicas, name, container}` (22.x) or `spec{api-version, ..., container-name}`
    (21.x), any apiVersion string (`v19`);
  - resource requirement: seed's flat `spec{mandatory, weight, allocatable, name, requests, limits, units | value}`;
    EMCO's `spec{allocatable, mandatory, weight, resource: {name, requests, limits, units} | {key, value}}`;
  - composite app: `spec.compositeAppVersion` (seed, 22.x) or `spec.version` (21.x);
  - cluster label: `{clusterLabel}` (22.x), `{label-name}` (21.x), with emcoctl's `metadata`;
  - app intent: `app`, `clusterProvider`/`cluster`/`clusterLabel`, or 21.x's `app-name`,
    `provider-name`/`cluster-name`/`cluster-label-name`.

  Each level's `body` class picks the dialect from the body's shape (`EmcoBody.dialect`) and validates with that
  dialect's model, so an error names the field as the client spelled it (`spec.resource.requests`). The store keeps
  the body exactly as it came (`spec.emco`): GET answers it byte for byte in the client's own dialect, with no
  defaults added. Names follow EMCO, not Kubernetes: `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`, at most 128
  characters (`core-fwall-RAM-needs`); a consumer's workload and container names are EMCO's free strings
  (`HttpClient`), matched against the app's manifests through `kube_name`, a deterministic Kubernetes spelling.
- The stored kind (`Project`, `HpaResourceRequirement`, ...), group `fleet.devplace.io/v1alpha1`, cluster-scoped.
  EMCO names are not DNS-1123 and the hierarchy must be part of the key, so `metadata.name` is
  `Level.store_name(path)`: a readable sanitised prefix of the leaf name plus a 20-hex blake2b digest of the kind and
  the full EMCO path (at most 61 characters, hence also a valid label value). `spec.path` holds the EMCO path (typed
  access: `FleetPath`), `spec.emco` the body as sent, `spec.content` what a multipart file part brought (an app's
  chart manifests, a cluster's kubeconfig server), `spec.labels` a cluster's labels (the body's plus those added over
  `/labels`); label `fleet.devplace.io/parent` holds the parent's store name, so "list the children of X" is a
  label-selector list, and `fleet.devplace.io/deployment-intent-group` marks everything below a deployment intent
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
from pydantic import AliasChoices, ConfigDict, Field, JsonValue, PrivateAttr, field_validator, model_validator

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
    "DEPLOYMENT_INTENT",
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
    "CompositeApp",
    "DeploymentIntentGroup",
    "EmcoBody",
    "FleetPath",
    "GenericAppIntentBody",
    "HpaConsumerBody",
    "HpaIntentBody",
    "HpaRequirementBody",
    "HpaResourceRequirement",
    "Level",
    "Need",
    "Project",
    "Workload",
    "check_manifests",
    "cluster_label_text",
    "emco_name_problem",
    "kube_name",
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

WorkloadKind = Literal["Deployment", "StatefulSet", "DaemonSet", "Job", "Pod"]
"""The kinds an HPA resource consumer may name (EMCO's action controller only ever patched Deployments)."""


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


def kube_name(value: str, *, label: bool = False) -> str:
    """The Kubernetes spelling of an EMCO name, deterministically: a valid DNS-1123 subdomain (or label, for container
    names) is kept as it is; anything else is lowercased, every run of other characters becomes one '-', and the
    ends are trimmed (`HttpClient` -> `httpclient`, `core_fwall` -> `core-fwall`). Empty when nothing is left."""
    problem = names.dns1123_label_problem(value) if label else names.dns1123_subdomain_problem(value)
    if problem is None:
        return value
    text = re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")
    return text[: 63 if label else 253].rstrip("-")


def _kube_spellable(value: str, *, label: bool = False) -> str:
    if not value:
        raise ValueError("must not be empty")
    if not kube_name(value, label=label):
        raise ValueError(f"{value!r} has no letter or digit to make a Kubernetes name of")
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
        return _qualified_labels(value)


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
        return _emco_name(value)


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
    problem = names.dns1123_subdomain_problem(meta["name"])
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


# -- hpa resource consumers ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """What an hpa resource consumer names, whatever the dialect: the Kubernetes object (and container) that
    receives the resources, the replicas to run, and whether it wants exclusive CPUs (devplace)."""

    api_version: str
    kind: str
    name: str
    container: str | None
    replicas: int | None
    exclusive_cpus: bool = False

    @property
    def object_name(self) -> str:
        """The manifest's `metadata.name` this consumer targets (`kube_name` of the EMCO name)."""
        return kube_name(self.name)

    @property
    def container_name(self) -> str | None:
        return None if self.container is None else kube_name(self.container, label=True)


class ConsumerRef(Model):
    """Seed 004's nested consumer: the Kubernetes object (and container) that receives the resources."""

    api_version: str = Field(min_length=1)
    kind: WorkloadKind
    name: str
    container_name: str | None = Field(
        None,
        validation_alias=AliasChoices("container-name", "containerName", "container_name", "container"),
        serialization_alias="container-name",
    )

    @field_validator("name")
    @classmethod
    def _name_ok(cls, value: str) -> str:
        return _kube_spellable(value)

    @field_validator("container_name")
    @classmethod
    def _container_ok(cls, value: str | None) -> str | None:
        return None if value is None else _kube_spellable(value, label=True)


class SeedConsumerSpec(Model):
    consumer: ConsumerRef
    replicas: int | None = Field(None, ge=1, le=10_000)
    exclusive_cpus: bool = False


class FlatConsumerSpec(Model):
    """EMCO's flat consumer: 21.x spells `api-version` and `container-name`, 22.x `apiVersion` and `container`.
    EMCO requires only `name`; `kind` defaults to Deployment, the one kind EMCO's action controller handled."""

    api_version: str | None = Field(None, validation_alias=AliasChoices("apiVersion", "api-version"), min_length=1)
    kind: WorkloadKind = "Deployment"
    replicas: int | None = Field(None, ge=1, le=10_000)
    name: str
    container: str | None = Field(
        None, validation_alias=AliasChoices("container", "container-name", "containerName"), min_length=1
    )
    exclusive_cpus: bool = False

    @field_validator("name")
    @classmethod
    def _name_ok(cls, value: str) -> str:
        return _kube_spellable(value)

    @field_validator("container")
    @classmethod
    def _container_ok(cls, value: str | None) -> str | None:
        return None if value is None else _kube_spellable(value, label=True)


class HpaConsumerBody(EmcoBody):
    """An hpa resource consumer, seed-nested or EMCO-flat; `workload` is the one typed view of both."""

    @classmethod
    def dialect(cls, obj: dict[str, Any]) -> type[EmcoBody]:
        if cls is not HpaConsumerBody:
            return cls
        spec = obj.get("spec")
        return SeedConsumerBody if isinstance(spec, dict) and "consumer" in spec else FlatConsumerBody

    @property
    def workload(self) -> Workload:
        raise NotImplementedError

    @property
    def replicas_field(self) -> str:
        return "spec.replicas"

    def check(self) -> None:
        target = self.workload
        if target.replicas is not None and target.kind in ("DaemonSet", "Pod"):
            raise errors.Invalid.field(self.replicas_field, f"a {target.kind} has no replica count")


class SeedConsumerBody(HpaConsumerBody):
    spec: SeedConsumerSpec

    @property
    def workload(self) -> Workload:
        ref = self.spec.consumer
        return Workload(
            ref.api_version, ref.kind, ref.name, ref.container_name, self.spec.replicas, self.spec.exclusive_cpus
        )


class FlatConsumerBody(HpaConsumerBody):
    spec: FlatConsumerSpec

    @property
    def workload(self) -> Workload:
        s = self.spec
        api_version = s.api_version or ("batch/v1" if s.kind == "Job" else "v1" if s.kind == "Pod" else "apps/v1")
        return Workload(api_version, s.kind, s.name, s.container, s.replicas, s.exclusive_cpus)


HpaConsumerBody.DIALECTS = (SeedConsumerBody, FlatConsumerBody)


# -- hpa resource requirements ------------------------------------------------------------------------------------

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
    problem = names.label_key_problem(need.name)
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
    problem = names.label_value_problem(need.value)
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


# -- the hierarchy ----------------------------------------------------------------------------------------------


def _sanitized(name: str, limit: int = 40) -> str:
    text = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return text[:limit].rstrip("-")


@dataclass(frozen=True)
class Level:
    """One collection of the /v2 hierarchy: its stored kind, URL segment, path parameters, parent and body model.

    A path is the tuple of every identifying string from the root: `("my-proj1", "my-capp1", "v1.0", "my-dig1")` for
    a deployment intent group (a composite app is identified by name and version); `FleetPath` reads it by name.
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
            return (body.metadata.name, body.version)
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


@dataclass(frozen=True)
class FleetPath:
    """An EMCO path read by parameter name (`path["hpaIntent"]`), never by position."""

    level: Level
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.names) != len(self.level.all_params):
            raise errors.Invalid(
                f"{self.level.title}: a path has {len(self.level.all_params)} names "
                f"({', '.join(self.level.all_params)}), not {len(self.names)}"
            )

    def __getitem__(self, param: str) -> str:
        try:
            return self.names[self.level.all_params.index(param)]
        except ValueError:
            raise KeyError(f"a {self.level.title} path has no {param!r}") from None

    @property
    def leaf(self) -> str:
        """The object's own name (a composite app's, not its version)."""
        return self.names[self.level.parent_width]

    def up(self, level: Level) -> FleetPath:
        """The path of the enclosing object of `level`."""
        if level not in self.level.chain:
            raise KeyError(f"a {self.level.title} is not below a {level.title}")
        return FleetPath(level, self.names[: len(level.all_params)])


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
DEPLOYMENT_INTENT = Level(
    "DeploymentIntent",
    "deployment intent",
    "intents",
    ("deploymentIntent",),
    DEPLOYMENT_INTENT_GROUP,
    DeploymentIntentBody,
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
    DEPLOYMENT_INTENT,
    CLUSTER_PROVIDER,
    CLUSTER,
)


# -- stored kinds -----------------------------------------------------------------------------------------------


class FleetSpec(Model):
    """`path`: the EMCO path; `emco`: the body as sent; `content`: what a multipart file part brought (`manifests`
    and `chart` for an app, `server` for a cluster's kubeconfig); `labels`: a cluster's labels."""

    path: list[str]
    emco: dict[str, Any]
    content: dict[str, Any] | None = None
    labels: dict[str, str] | None = None


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


@_fleet_kind(DEPLOYMENT_INTENT, "deploymentintents")
class DeploymentIntent(FleetObject):
    pass


@_fleet_kind(CLUSTER_PROVIDER, "clusterproviders")
class ClusterProvider(FleetObject):
    pass


@_fleet_kind(CLUSTER, "clusters")
class Cluster(FleetObject):
    pass
