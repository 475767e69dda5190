"""The OpenAPI documents of the resource API (Swagger 2.0 for `/openapi/v2`, OpenAPI 3.0 per group/version for
`/openapi/v3`), generated from the kind registry: what kubectl downloads to validate, explain and apply.

kubectl finds a kind's schema by the `x-kubernetes-group-version-kind` extension, not by name, but the names follow
Kubernetes so tools that print them read naturally: built-in kinds keep Kubernetes' own (`io.k8s.api.core.v1.Pod`),
other groups reverse their DNS name (`akri.sh/v0` Configuration is `sh.akri.v0.Configuration`, devplace.io's is
`io.devplace.v1alpha1.Configuration`). A kind served at two group/versions gets one definition per group/version, each
with its own group-version-kind, as the apiserver publishes a multi-version CRD.

Where the schemas come from:
- The built-in kinds (core, apps, batch) and the meta types (ObjectMeta, Status, DeleteOptions, Scale ...) are
  Kubernetes' own definitions, with their field docs and the `x-kubernetes-patch-*` facts kubectl's strategic merge
  relies on, read by `api.definitions` (the leaf module the object model's PodSpec check reads them from too).
  A built-in kind the file lacks falls back to its model, like the other kinds.
- Every other kind is derived from its pydantic model, inlined as a CRD's structural schema is: descriptions are the
  fields' own (`Field(description=...)`), else the texts in `_FIELD_DOCS` below, else the docstring of the model a
  field holds. `metadata` is Kubernetes' ObjectMeta. Fields the models keep as plain mappings but that hold
  Kubernetes types (a Configuration's `brokerPodSpec` is a PodSpec) point at Kubernetes' definitions, so
  `kubectl explain configurations.spec.brokerSpec.brokerPodSpec` and client-side validation see the real PodSpec.
  A model that refuses unknown fields gives an object schema with `properties` (closed, in Kubernetes' reading);
  a mapping of anything gives `x-kubernetes-preserve-unknown-fields`.

Paths list, per kind and group/version, the operations the server serves (get, list and watch, create, replace,
patch, delete, and the subresources of `subresources`: `/status` for kinds with a status, `/scale`), with
`dryRun` and `fieldManager` on the writes, and `fieldValidation` where the server refuses unknown fields itself
(`validates_fields`: the kinds whose model refuses them). kubectl >= 1.27 looks for `fieldValidation` on a kind's
PATCH operation: found, it sends `fieldValidation=Strict` and leaves validation to the server; not found (the
built-in kinds, which the server stores with any extra field), it validates the manifest itself against the v2
document, where those kinds have Kubernetes' own schemas.

Everything here is pure and computed once per process (`functools.cache`); `unknown_fields` is Kubernetes' strict
field check over these schemas, and `json_schema` turns one kind's schema into a standalone JSON Schema for tests
and tools.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel

from devplace import __version__, errors
from devplace.api import KindInfo, kinds, kubernetes_definitions, kubernetes_typed
from devplace.kubeapi import _parameters as parameters
from devplace.kubeapi import _subresources as subresources

Schema = dict[str, Any]

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
OBJECT_META = META + "ObjectMeta"
LIST_META = META + "ListMeta"
STATUS = META + "Status"
DELETE_OPTIONS = META + "DeleteOptions"
PATCH = META + "Patch"
SCALE = "io.k8s.api.autoscaling.v1.Scale"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
PRESERVE = "x-kubernetes-preserve-unknown-fields"
GVK = "x-kubernetes-group-version-kind"


_KIND_DOCS: dict[str, str] = {
    "Configuration": (
        "A Configuration says how to find one kind of leaf device (its discovery handler and the details the handler "
        "needs), how many workloads may use each device at once (capacity), and what to deploy for the devices found "
        "(brokers and services). akri.sh/v0 Configurations are accepted unchanged; uniqueDevices, brokerStrategy and "
        "deviceKind are devplace's optional additions."
    ),
    "Instance": (
        "An Instance is one discovered device: the nodes that see it, its capacity slots and who holds each. Node "
        "agents write it (each only its own share); its name is <configuration>-<6 hex digits of the device id>."
    ),
    "ResourceClass": (
        "A ResourceClass selects devices (Instances) by their attributes; a pod requests N of them as the extended "
        "resource rc.devplace.io/<class>, and the scheduler picks the devices. Cluster-scoped; spec cannot change "
        "after creation."
    ),
}

_FIELD_DOCS: dict[tuple[str, str], str] = {
    # Configuration
    ("Configuration", "spec"): "What to discover, how to share it and what to deploy for it.",
    ("Configuration", "status"): "Observed state, written by devplace.",
    ("ConfigurationSpec", "discoveryHandler"): "The discovery handler that finds the devices, and its settings.",
    ("ConfigurationSpec", "capacity"): (
        "How many workloads may use each discovered device at once: the number of slots of every Instance "
        "(1 to 1024, default 1)."
    ),
    ("ConfigurationSpec", "uniqueDevices"): (
        "For the Configuration-level device plugin: true (the default) offers one virtual device per visible "
        "Instance, so a pod never gets two slots of one device; false offers one per slot (capacity x Instances)."
    ),
    ("ConfigurationSpec", "brokerSpec"): (
        "The workload deployed for discovered devices: exactly one of brokerPodSpec or brokerJobSpec. Without it, "
        "devices are discovered and advertised but no brokers run."
    ),
    ("ConfigurationSpec", "brokerStrategy"): (
        "How brokers are deployed, exactly one of perNode, job, deployment, configuration, pool or group. Absent: "
        "perNode with a brokerPodSpec, job with a brokerJobSpec (Akri's behaviour)."
    ),
    ("ConfigurationSpec", "deviceKind"): (
        "The Kind attribute resource classes select these devices by (default: the discovery handler's name)."
    ),
    ("ConfigurationSpec", "instanceServiceSpec"): (
        "Spec of the Service created for each Instance (<instance>-svc) while brokers of it run."
    ),
    ("ConfigurationSpec", "configurationServiceSpec"): (
        "Spec of the Service created for the Configuration (<configuration>-svc) while any of its brokers run."
    ),
    ("ConfigurationSpec", "brokerProperties"): (
        "Name/value pairs added to every Instance's brokerProperties; brokers get them as environment variables."
    ),
    ("DiscoveryHandlerInfo", "name"): (
        "Name of the discovery handler (e.g. debugEcho, udev, onvif, opcua): built in, or an external process "
        "registered over Akri's discovery-handler gRPC protocol."
    ),
    ("DiscoveryHandlerInfo", "discoveryDetails"): (
        "Settings for the handler, as a string the handler parses (as YAML), e.g. udev rules or device descriptions."
    ),
    ("DiscoveryHandlerInfo", "discoveryProperties"): (
        "Properties sent to the handler with the discovery request: literal values, or values read from a key of a "
        "Secret or ConfigMap."
    ),
    ("DiscoveryProperty", "name"): "Name of the property as the handler receives it.",
    ("DiscoveryProperty", "value"): "A literal value (set value or valueFrom, not both).",
    ("DiscoveryProperty", "valueFrom"): "Where to read the value: exactly one of secretKeyRef or configMapKeyRef.",
    ("DiscoveryPropertySource", "secretKeyRef"): "A key of a Secret.",
    ("DiscoveryPropertySource", "configMapKeyRef"): "A key of a ConfigMap.",
    ("KeySelector", "name"): "Name of the Secret or ConfigMap.",
    ("KeySelector", "key"): "The key whose value is used.",
    ("KeySelector", "namespace"): "Namespace of the Secret or ConfigMap (default: the Configuration's).",
    ("KeySelector", "optional"): "If true, a missing object or key gives no value instead of an error.",
    ("BrokerSpec", "brokerPodSpec"): (
        "Spec of the broker Pods. In a container's resources, the key {{PLACEHOLDER}} stands for the resource of "
        "the Instance the broker serves."
    ),
    ("BrokerSpec", "brokerJobSpec"): "Spec of the broker Jobs (one per Instance and Configuration generation).",
    ("BrokerStrategy", "perNode"): "A broker Pod per (Instance, node that sees it), pinned to the node.",
    ("BrokerStrategy", "job"): "A Job per Instance (needs brokerJobSpec).",
    ("BrokerStrategy", "deployment"): "Unpinned broker Pods per Instance, placed by the scheduler.",
    ("BrokerStrategy", "configuration"): "Broker Pods requesting the Configuration-level resource.",
    ("BrokerStrategy", "pool"): "One broker per pool of Instances visible to one node.",
    ("BrokerStrategy", "group"): "One broker per heterogeneous group of devices (e.g. 1 GPU and 3 cameras).",
    ("DeploymentStrategy", "replicas"): "Broker Pods per Instance (at most the Instance's capacity run).",
    ("ConfigurationStrategy", "replicas"): "Broker Pods for the Configuration.",
    ("ConfigurationStrategy", "devicesPerPod"): "Configuration-level devices each broker Pod requests.",
    ("PoolStrategy", "size"): "Instances per pool.",
    ("PoolStrategy", "mode"): (
        "static: exact pools, a broker goes when a member goes. dynamic: pools filled up to size and updated in "
        "place (a ConfigMap per broker lists its Instances)."
    ),
    ("PoolStrategy", "timeoutSeconds"): "static pools: deploy a smaller pool after waiting this long for a full one.",
    ("GroupStrategy", "members"): "What each group holds.",
    ("GroupMember", "configuration"): "Take count Instances of this Configuration.",
    ("GroupMember", "resourceClass"): "Take count devices of this ResourceClass.",
    ("GroupMember", "count"): "How many (default 1).",
    # Instance
    ("Instance", "spec"): "The device, who sees it and who holds its slots.",
    ("Instance", "status"): "Observed state, written by devplace.",
    ("InstanceSpec", "configurationName"): "The Configuration that discovered the device.",
    ("InstanceSpec", "capacity"): "Number of slots, from the Configuration's capacity.",
    ("InstanceSpec", "shared"): (
        "Whether several nodes can see the device (e.g. an IP camera). A local device gets one Instance per node."
    ),
    ("InstanceSpec", "nodes"): "The nodes that see the device now.",
    ("InstanceSpec", "deviceUsage"): (
        'Slot (<instance>-<i>) to holder: "" free, "<node>" held through the Instance-level device plugin of that '
        'node, "C:<virtual device>:<node>" held through the Configuration-level one.'
    ),
    ("InstanceSpec", "brokerProperties"): (
        "The device's properties from its discovery handler plus the Configuration's; brokers get them as "
        "environment variables."
    ),
    ("InstanceSpec", "cdiName"): "The device's CDI name: <prefix>/<configuration>=<hash>.",
    # ResourceClass
    ("ResourceClass", "spec"): "Which devices the class selects and how the scheduler picks among them.",
    ("ResourceClass", "status"): "What the class matches and what is in use, written by the scheduler.",
    ("ResourceClassSpec", "resourceSelector"): (
        "Terms, ORed: each is matchExpressions (all must hold) or classRef (every term of another class)."
    ),
    ("ResourceClassSpec", "selectionStrategy"): (
        "How the scheduler picks devices of the class: firstFit (the default), binpack, spread or optimal."
    ),
    ("SelectorTerm", "matchExpressions"): "Requirements on device attributes, all of which must hold.",
    ("SelectorTerm", "classRef"): "Name of another ResourceClass whose terms this term stands for.",
    ("SelectorRequirement", "key"): (
        "A device attribute: a discovery property, or Kind, configuration or node (for local devices)."
    ),
    ("SelectorRequirement", "operator"): "In, NotIn, Eq, Exists, DoesNotExist, Gt, GtEq, Lt or LtEq.",
    ("SelectorRequirement", "values"): (
        "Values to compare with: as quantities when both sides are quantities (30G, 32Gi), as versions when both "
        "are versions, else as strings. Exists and DoesNotExist take none; Eq, Gt, GtEq, Lt and LtEq exactly one."
    ),
    ("ResourceClassStatus", "allocatable"): "Slots of the devices the class matches.",
    ("ResourceClassStatus", "requested"): "Of those, slots pods hold or have been bound to.",
    # fleet objects
    ("FleetSpec", "path"): "The object's place in the EMCO hierarchy: every identifying name from the project down.",
    ("FleetSpec", "emco"): "The object as the /v2 fleet API reads and writes it (EMCO's body: metadata and spec).",
    ("FleetSpec", "content"): (
        "What a multipart file part brought: manifests and chart for an app, server for a cluster's kubeconfig."
    ),
    ("FleetSpec", "labels"): "A cluster's labels (placement intents select clusters by them).",
    ("EmcoMetadata", "name"): "The object's name in the EMCO hierarchy.",
    ("EmcoMetadata", "description"): "Free text.",
    ("EmcoMetadata", "userData1"): "Free text for the user.",
    ("EmcoMetadata", "userData2"): "Free text for the user.",
}
"""Field docs for models whose fields carry no description: (model class, wire name) -> text."""

_TOP_DOCS = {
    "spec": "The desired state of the object.",
    "status": "The observed state of the object, written by devplace.",
}
"""Docs of a kind's spec and status where neither the model nor `_FIELD_DOCS` has one."""

_STANDARD_DOCS = {
    "apiVersion": (
        "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
        "recognized schemas to the latest internal value, and may reject unrecognized values. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
    ),
    "kind": (
        "Kind is a string value representing the REST resource this object represents. Servers may infer this from "
        "the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
    ),
    "metadata": (
        "Standard object's metadata. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
    ),
    "listMetadata": (
        "Standard list metadata. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
    ),
}


# -- served kinds -----------------------------------------------------------------------------------------------


K8S_IO = ".k8s.io"
"""The domain of Kubernetes' own named groups (rbac.authorization.k8s.io, events.k8s.io, ...)."""


@dataclass(frozen=True)
class Served:
    """One kind at one of its group/versions (`group` is "" for the core group)."""

    info: KindInfo
    group: str
    version: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def definition(self) -> str:
        return definition_name(self.group, self.version, self.info.kind)

    @property
    def gvk(self) -> dict[str, str]:
        return {"group": self.group, "kind": self.info.kind, "version": self.version}

    @property
    def builtin(self) -> bool:
        return is_builtin(self.api_version)


def is_builtin(api_version: str) -> bool:
    """Whether a group/version is Kubernetes' own: the core group, groups without a domain (apps, batch) and the
    `*.k8s.io` groups; every other is a custom resource's (devplace.io, akri.sh)."""
    group = api_version.rpartition("/")[0]
    return "." not in group or group.endswith(K8S_IO)


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def definition_name(group: str, version: str, kind: str) -> str:
    """Kubernetes' name for a kind's definition: `io.k8s.api.apps.v1.Deployment`, `sh.akri.v0.Configuration`."""
    if not group:
        return f"io.k8s.api.core.{version}.{kind}"
    if "." not in group:  # Kubernetes' own groups without a domain: apps, batch, autoscaling, policy
        return f"io.k8s.api.{group}.{version}.{kind}"
    if group.endswith(K8S_IO):  # rbac.authorization.k8s.io -> io.k8s.api.rbac, events.k8s.io -> io.k8s.api.events
        return f"io.k8s.api.{group.split('.', 1)[0]}.{version}.{kind}"
    return ".".join(reversed(group.split("."))) + f".{version}.{kind}"


@functools.cache
def served() -> tuple[Served, ...]:
    """Every kind at every group/version it is served as, in the registry's order."""
    return tuple(Served(info, *_split(gv)) for info in kinds() for gv in info.group_versions)


def group_versions() -> list[str]:
    """The served group/versions, core (`v1`) first, then groups by name."""
    found = {s.api_version for s in served()}
    return sorted(found, key=lambda gv: ("/" in gv, gv))


def group_version_path(api_version: str) -> str:
    """`api/v1` for the core group, `apis/<group>/<version>` for the others (the paths of /openapi/v3)."""
    return f"apis/{api_version}" if "/" in api_version else f"api/{api_version}"


def validates_fields(info: KindInfo) -> bool:
    """Whether the server refuses a field the kind does not know (its model refuses unknown fields), so the OpenAPI
    may offer `fieldValidation`: kubectl then leaves validation to the server. The built-in kinds are stored with
    any extra field, so they do not offer it and kubectl validates them against Kubernetes' schemas itself."""
    return info.model.model_config.get("extra") == "forbid"


def _ref(name: str) -> str:
    return f"#/definitions/{name}"


# -- definitions ------------------------------------------------------------------------------------------------


@functools.cache
def definitions() -> dict[str, Schema]:
    """Every definition, by name, in Swagger 2.0 form (`$ref`s are `#/definitions/<name>`). Do not mutate."""
    found = dict(kubernetes_definitions())
    for s in served():
        if s.builtin and s.definition in found:
            continue
        found[s.definition] = _kind_schema(s)
        found[s.definition + "List"] = _list_schema(s)
    return dict(sorted(found.items()))


def _kind_schema(s: Served) -> Schema:
    model = s.info.model
    schema = _ModelSchemas(model).convert()
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {"description": _STANDARD_DOCS["apiVersion"], "type": "string"}
    props["kind"] = {"description": _STANDARD_DOCS["kind"], "type": "string"}
    props["metadata"] = {"$ref": _ref(OBJECT_META), "description": _STANDARD_DOCS["metadata"]}
    for path, held in model.SCHEMA_MODELS.items():
        owner = props
        for key in path[:-1]:
            owner = owner[key]["properties"]
        schema_of_held = _ModelSchemas(held).convert()
        schema_of_held["description"] = owner[path[-1]].get("description", "")
        owner[path[-1]] = schema_of_held
    for field, doc in _TOP_DOCS.items():
        if field in props and not props[field].get("description"):
            props[field]["description"] = doc
    required = [r for r in schema.get("required", []) if r not in ("apiVersion", "kind", "metadata")]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    schema["description"] = _KIND_DOCS.get(s.info.kind) or _own_doc(model) or s.info.kind
    schema[GVK] = [s.gvk]
    schema["properties"] = dict(sorted(props.items()))
    return schema


def _list_schema(s: Served) -> Schema:
    kind = s.info.kind
    return {
        "description": f"{kind}List is a list of {kind} objects.",
        "properties": {
            "apiVersion": {"description": _STANDARD_DOCS["apiVersion"], "type": "string"},
            "items": {
                "description": f"List of {s.info.plural}.",
                "items": {"$ref": _ref(s.definition)},
                "type": "array",
            },
            "kind": {"description": _STANDARD_DOCS["kind"], "type": "string"},
            "metadata": {"$ref": _ref(LIST_META), "description": _STANDARD_DOCS["listMetadata"]},
        },
        "required": ["items"],
        "type": "object",
        GVK: [{**s.gvk, "kind": f"{kind}List"}],
    }


def _own_doc(cls: type) -> str:
    """A class's own docstring (never one inherited from a base), first paragraph, on one line."""
    doc = cls.__dict__.get("__doc__") or ""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())


def _model_classes(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model class reachable from `model`'s fields, by class name (pydantic's `$defs` keys)."""
    found: dict[str, type[BaseModel]] = {}

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp.__name__ in found:
                return
            found[tp.__name__] = tp
            for field in tp.model_fields.values():
                visit(field.annotation)
            return
        for arg in get_args(tp):
            visit(arg)

    visit(model)
    return found


class _ModelSchemas:
    """pydantic's JSON Schema of one model, turned into an inlined Kubernetes (structural) schema."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        raw = model.model_json_schema(by_alias=True, mode="validation")
        self.defs: dict[str, Schema] = raw.pop("$defs", {})
        self.root = raw
        self.classes = _model_classes(model)

    def convert(self) -> Schema:
        return self._node(self.root, self.model.__name__, ())

    def _node(self, node: Mapping[str, Any], owner: str | None, stack: tuple[str, ...]) -> Schema:
        """`owner` is the model class whose schema `node` is (None for a field's or an item's schema)."""
        siblings = {k: v for k, v in node.items() if k in ("description", "default")}
        if "$ref" in node:
            name = str(node["$ref"]).rsplit("/", 1)[1]
            if name in stack:  # a recursive model: stop describing it
                return {PRESERVE: True, **self._plain(siblings)}
            target = self._node(self.defs[name], name, (*stack, name))
            doc = _own_doc(self.classes[name]) if name in self.classes else ""
            if doc and "description" not in target:
                target["description"] = doc
            return {**target, **self._plain(siblings)}
        for combinator in ("anyOf", "oneOf", "allOf"):
            if combinator in node:
                branches = [b for b in node[combinator] if b != {"type": "null"}]
                if len(branches) == 1:
                    return {**self._node(branches[0], None, stack), **self._plain(siblings)}
                types = {b.get("type") for b in branches}
                if types == {"integer", "string"}:
                    return {"type": "string", "format": "int-or-string", **self._plain(siblings)}
                return {PRESERVE: True, **self._plain(siblings)}
        out: Schema = {}
        for key, value in node.items():
            if key in ("title", "$defs", "additionalProperties", "properties", "items", "prefixItems"):
                continue
            if key == "const":
                out["enum"] = [value]
            elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
                out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
                out[key] = True
            elif key in _KEPT:
                out[key] = value
        if out.get("default", 0) is None:
            del out["default"]
        if "properties" in node:
            out["properties"] = {
                name: self._property(owner, name, prop, stack) for name, prop in node["properties"].items()
            }
        extra = node.get("additionalProperties")
        if extra is True:
            out[PRESERVE] = True
        elif isinstance(extra, Mapping):
            out["additionalProperties"] = self._node(extra, None, stack)
        if node.get("type") == "array":
            items = node.get("items")
            out["items"] = self._node(items, None, stack) if isinstance(items, Mapping) else {PRESERVE: True}
        if node.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
            out[PRESERVE] = True
        if not node.get("type") and "properties" not in out and not out.get("enum"):
            out[PRESERVE] = True
        return out

    def _property(self, owner: str | None, name: str, node: Mapping[str, Any], stack: tuple[str, ...]) -> Schema:
        doc = _FIELD_DOCS.get((owner, name), "") if owner else ""
        typed = kubernetes_typed(owner, name) if owner else None
        if typed is not None:
            return {"$ref": _ref(typed), "description": node.get("description") or doc}
        schema = self._node(node, None, stack)
        if not node.get("description") and doc:
            schema["description"] = doc
        return schema

    @staticmethod
    def _plain(siblings: Mapping[str, Any]) -> Schema:
        return {k: v for k, v in siblings.items() if not (k == "default" and v is None)}


_KEPT = frozenset(
    {
        "type",
        "description",
        "default",
        "enum",
        "format",
        "pattern",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "uniqueItems",
        "required",
        "minProperties",
        "maxProperties",
        "multipleOf",
    }
)
"""Keys of pydantic's JSON Schema that Swagger 2.0's Schema Object has too (the rest are dropped or rewritten)."""


# -- paths ------------------------------------------------------------------------------------------------------


def _param(name: str, where: str, description: str, kind: str = "string", *, required: bool = False) -> Schema:
    param: Schema = {"description": description, "in": where, "name": name, "type": kind, "uniqueItems": True}
    if required:
        param["required"] = True
    return param


def _body(definition: str) -> Schema:
    return {"in": "body", "name": "body", "required": True, "schema": {"$ref": _ref(definition)}}


_PRETTY = parameters.PRETTY.swagger()
_FORCE = parameters.FORCE.swagger()
_LIST_PARAMS = [p.swagger() for p in parameters.LIST_QUERY if p.kubernetes is not None]
_DELETE_PARAMS = [p.swagger() for p in parameters.DELETE_QUERY if p.kubernetes is not None]
_JSON = ["application/json"]
_PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
_STRATEGIC = "application/strategic-merge-patch+json"


def _camel(text: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in text.replace("-", ".").split("."))


def _responses(definition: str, *codes: int) -> Schema:
    text = {200: "OK", 201: "Created", 202: "Accepted"}
    out: Schema = {str(code): {"description": text[code], "schema": {"$ref": _ref(definition)}} for code in codes}
    out["401"] = {"description": "Unauthorized"}
    return out


def _operation(
    s: Served,
    verb: str,
    action: str,
    subject: str,
    params: list[Schema],
    responses: Schema,
    *,
    consumes: list[str] | None = None,
    produces: list[str] | None = None,
    description: str,
    gvk: Mapping[str, str] | None = None,
) -> Schema:
    op: Schema = {
        "description": description,
        "operationId": f"{verb}{_camel(s.group or 'core')}{_camel(s.version)}{subject}",
        "parameters": params,
        "produces": produces or _JSON,
        "responses": responses,
        "schemes": ["https", "http"],
        "tags": [f"{_camel(s.group or 'core')}_{s.version}".lower()],
        "x-kubernetes-action": action,
        GVK: dict(gvk or s.gvk),
    }
    if consumes is not None:
        op["consumes"] = consumes
    return dict(sorted(op.items()))


def paths(s: Served) -> dict[str, Schema]:
    """The Swagger 2.0 path items of one served kind."""
    info, kind, plural = s.info, s.info.kind, s.info.plural
    root = f"/{group_version_path(s.api_version)}"
    scope = "Namespaced" if info.namespaced else ""
    collection = f"{root}/namespaces/{{namespace}}/{plural}" if info.namespaced else f"{root}/{plural}"
    item = f"{collection}/{{name}}"
    path_params = [_param("namespace", "path", "object name and auth scope", required=True)] if info.namespaced else []
    name_param = _param("name", "path", f"name of the {kind}", required=True)
    definition, listed = s.definition, s.definition + "List"
    patch_types = [*_PATCH_TYPES, _STRATEGIC] if s.builtin else _PATCH_TYPES
    writes = [p.swagger() for p in parameters.WRITE_QUERY if p.name != "fieldValidation" or validates_fields(info)]
    streams = [*_JSON, "application/json;stream=watch", "application/x-ndjson"]

    out: dict[str, Schema] = {
        collection: {
            "get": _operation(
                s,
                "list",
                "list",
                f"{scope}{kind}",
                _LIST_PARAMS,
                _responses(listed, 200),
                produces=streams,
                description=f"list or watch objects of kind {kind}",
            ),
            "post": _operation(
                s,
                "create",
                "post",
                f"{scope}{kind}",
                [_body(definition), *writes],
                _responses(definition, 200, 201, 202),
                consumes=["*/*"],
                description=f"create a {kind}",
            ),
            "parameters": [*path_params, _PRETTY],
        },
        item: {
            "get": _operation(
                s,
                "read",
                "get",
                f"{scope}{kind}",
                [],
                _responses(definition, 200),
                description=f"read the specified {kind}",
            ),
            "put": _operation(
                s,
                "replace",
                "put",
                f"{scope}{kind}",
                [_body(definition), *writes],
                _responses(definition, 200, 201),
                consumes=["*/*"],
                description=f"replace the specified {kind}",
            ),
            "patch": _operation(
                s,
                "patch",
                "patch",
                f"{scope}{kind}",
                [_body(PATCH), *writes, _FORCE],
                _responses(definition, 200, 201),
                consumes=patch_types,
                description=f"partially update the specified {kind}",
            ),
            "delete": _operation(
                s,
                "delete",
                "delete",
                f"{scope}{kind}",
                [{**_body(DELETE_OPTIONS), "required": False}, *_DELETE_PARAMS],
                _responses(definition, 200, 202),
                consumes=["*/*"],
                description=f"delete a {kind}",
            ),
            "parameters": [name_param, *path_params, _PRETTY],
        },
    }
    if info.namespaced:
        out[f"{root}/{plural}"] = {
            "get": _operation(
                s,
                "list",
                "list",
                f"{kind}ForAllNamespaces",
                _LIST_PARAMS,
                _responses(listed, 200),
                produces=streams,
                description=f"list or watch objects of kind {kind} in every namespace",
            ),
            "parameters": [_PRETTY],
        }
    if subresources.has_status(kind):
        out[f"{item}/status"] = {
            "get": _operation(
                s,
                "read",
                "get",
                f"{scope}{kind}Status",
                [],
                _responses(definition, 200),
                description=f"read status of the specified {kind}",
            ),
            "put": _operation(
                s,
                "replace",
                "put",
                f"{scope}{kind}Status",
                [_body(definition), *writes],
                _responses(definition, 200, 201),
                consumes=["*/*"],
                description=f"replace status of the specified {kind}",
            ),
            "patch": _operation(
                s,
                "patch",
                "patch",
                f"{scope}{kind}Status",
                [_body(PATCH), *writes, _FORCE],  # as the main PATCH: kubectl reads whichever it meets first
                _responses(definition, 200, 201),
                consumes=patch_types,
                description=f"partially update status of the specified {kind}",
            ),
            "parameters": [name_param, *path_params, _PRETTY],
        }
    if kind in subresources.SCALE_KINDS:
        scale_gvk = {"group": "autoscaling", "kind": "Scale", "version": "v1"}
        out[f"{item}/scale"] = {
            "get": _operation(
                s,
                "read",
                "get",
                f"{scope}{kind}Scale",
                [],
                _responses(SCALE, 200),
                description=f"read scale of the specified {kind}",
                gvk=scale_gvk,
            ),
            "put": _operation(
                s,
                "replace",
                "put",
                f"{scope}{kind}Scale",
                [_body(SCALE), *writes],
                _responses(SCALE, 200, 201),
                consumes=["*/*"],
                description=f"replace scale of the specified {kind}",
                gvk=scale_gvk,
            ),
            "patch": _operation(
                s,
                "patch",
                "patch",
                f"{scope}{kind}Scale",
                [_body(PATCH), *writes, _FORCE],
                _responses(SCALE, 200, 201),
                consumes=patch_types,
                description=f"partially update scale of the specified {kind}",
                gvk=scale_gvk,
            ),
            "parameters": [_param("name", "path", "name of the Scale", required=True), *path_params, _PRETTY],
        }
    return out


@functools.cache
def swagger() -> Schema:
    """The Swagger 2.0 document of the whole resource API (`/openapi/v2`). Do not mutate."""
    found: dict[str, Schema] = {}
    for s in served():
        found.update(paths(s))
    return {
        "swagger": "2.0",
        "info": {"title": "devplace", "version": f"v{__version__}"},
        "paths": dict(sorted(found.items())),
        "definitions": definitions(),
    }


# -- OpenAPI v3 -------------------------------------------------------------------------------------------------


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value.rsplit("/", 1)[1]
            else:
                yield from _references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)


def _closure(start: Any) -> list[str]:
    defs = definitions()
    seen: dict[str, None] = {}
    pending = list(_references(start))
    while pending:
        name = pending.pop()
        if name not in seen:
            seen[name] = None
            pending.extend(_references(defs[name]))
    return sorted(seen)


def _v3_schema(node: Any) -> Any:
    """A Swagger 2.0 schema in OpenAPI 3.0 form: references under components, a `$ref` beside other keys wrapped in
    `allOf` (as the apiserver does; 3.0 ignores a `$ref`'s siblings)."""
    if isinstance(node, list):
        return [_v3_schema(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    out = {k: _v3_schema(v) for k, v in node.items() if k != "$ref"}
    if "$ref" in node:
        ref = "#/components/schemas/" + str(node["$ref"]).rsplit("/", 1)[1]
        if not out:
            return {"$ref": ref}
        out["allOf"] = [{"$ref": ref}]
    return out


def _v3_operation(op: Mapping[str, Any]) -> Schema:
    out: Schema = {
        k: v for k, v in op.items() if k not in ("consumes", "produces", "parameters", "responses", "schemes")
    }
    params = []
    for param in op.get("parameters", []):
        if param["in"] == "body":
            out["requestBody"] = {
                "content": {media: {"schema": _v3_schema(param["schema"])} for media in op.get("consumes", ["*/*"])},
                "required": param.get("required", False),
            }
        else:
            params.append(_v3_parameter(param))
    if params:
        out["parameters"] = params
    responses: Schema = {}
    for code, response in op["responses"].items():
        entry: Schema = {"description": response["description"]}
        if "schema" in response:
            entry["content"] = {media: {"schema": _v3_schema(response["schema"])} for media in op["produces"]}
        responses[code] = entry
    out["responses"] = responses
    return out


def _v3_parameter(param: Mapping[str, Any]) -> Schema:
    schema = {"type": param["type"], "uniqueItems": True}
    out = {k: param[k] for k in ("name", "in", "description") if k in param}
    if param.get("required"):
        out["required"] = True
    out["schema"] = schema
    return out


@functools.cache
def v3_document(api_version: str) -> Schema:
    """The OpenAPI 3.0 document of one group/version (`/openapi/v3/apis/<group>/<version>`); NotFound for a
    group/version no kind is served as. Do not mutate."""
    here = [s for s in served() if s.api_version == api_version]
    if not here:
        raise errors.NotFound(f"no kinds are served as {api_version!r}")
    items: dict[str, Schema] = {}
    for s in here:
        items.update(paths(s))
    v3_paths = {
        path: {
            method: (_v3_operation(op) if method != "parameters" else [_v3_parameter(p) for p in op])
            for method, op in item.items()
        }
        for path, item in sorted(items.items())
    }
    defs = definitions()
    schemas = {name: _v3_schema(defs[name]) for name in _closure(items)}
    return {
        "openapi": "3.0.0",
        "info": {"title": "devplace", "version": f"v{__version__}"},
        "paths": v3_paths,
        "components": {"schemas": schemas},
    }


def document_bytes(document: Mapping[str, Any]) -> bytes:
    """A document as served: compact JSON, keys in the order built (so equal documents give equal bytes)."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


@functools.cache
def v3_hash(api_version: str) -> str:
    """The content hash in a group/version's `serverRelativeURL` (clients cache a document by it)."""
    return hashlib.sha512(document_bytes(v3_document(api_version))).hexdigest().upper()


@functools.cache
def v3_index() -> Schema:
    """`/openapi/v3`: every served group/version's document path with its hash."""
    out = {}
    for gv in group_versions():
        path = group_version_path(gv)
        out[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={v3_hash(gv)}"}
    return {"paths": out}


# -- checks over the schemas ------------------------------------------------------------------------------------


def unknown_fields(obj: Mapping[str, Any]) -> list[str]:
    """The paths of fields `obj` has that its kind's schema does not know (`spec.foo`, `spec.items[0].bar`), as
    Kubernetes' strict field validation reports them; [] for an unknown kind or apiVersion (other checks refuse it).

    An object schema with `properties` is closed unless it says `x-kubernetes-preserve-unknown-fields`; a map
    (`additionalProperties`) or a schema without properties takes any key."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str):
        return []
    name = definition_name(*_split(api_version), kind)
    defs = definitions()
    if name not in defs or not any(g == _gvk(api_version, kind) for g in defs[name].get(GVK, [])):
        return []
    found: list[str] = []
    _walk_unknown(obj, defs[name], "", defs, found)
    return found


def _gvk(api_version: str, kind: str) -> dict[str, str]:
    group, version = _split(api_version)
    return {"group": group, "kind": kind, "version": version}


def _walk_unknown(
    value: Any, schema: Mapping[str, Any], path: str, defs: Mapping[str, Schema], found: list[str]
) -> None:
    while "$ref" in schema:
        schema = defs[str(schema["$ref"]).rsplit("/", 1)[1]]
    if isinstance(value, Mapping):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if props is not None and key in props:
                _walk_unknown(item, props[key], where, defs, found)
            elif isinstance(extra, Mapping):
                _walk_unknown(item, extra, where, defs, found)
            elif props is not None and not schema.get(PRESERVE):
                found.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            _walk_unknown(item, schema["items"], f"{path}[{i}]", defs, found)


def json_schema(api_version: str, kind: str) -> Schema:
    """A standalone JSON Schema (draft 7) of one served kind, closed the way `unknown_fields` reads the OpenAPI
    schema (an object with properties takes no other key), for validating manifests with a JSON Schema library."""
    s = next((s for s in served() if s.api_version == api_version and s.info.kind == kind), None)
    if s is None:
        raise errors.NotFound(f"{kind} is not served as {api_version!r}")
    defs = definitions()
    names = [s.definition, *_closure(defs[s.definition])]
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$ref": _ref(s.definition),
        "definitions": {name: _closed(name, defs[name]) for name in dict.fromkeys(names)},
    }


def _closed(name: str, node: Any) -> Any:
    if isinstance(node, list):
        return [_closed("", item) for item in node]
    if not isinstance(node, Mapping):
        return node
    if "$ref" in node:
        return {"$ref": node["$ref"]}  # draft 7 ignores a $ref's siblings anyway
    out = {k: _closed("", v) for k, v in node.items() if not k.startswith("x-")}
    if name == QUANTITY:
        out["type"] = ["string", "number"]
    elif out.get("format") == "int-or-string":
        out["type"] = ["string", "integer"]
    if "properties" in out and "additionalProperties" not in out and not node.get(PRESERVE):
        out["additionalProperties"] = False
    if isinstance(out.get("type"), str) and out["type"] in (
        "string",
        "integer",
        "number",
        "boolean",
        "object",
        "array",
    ):
        out["type"] = [out["type"], "null"]  # Kubernetes reads a null field as absent
    return out
