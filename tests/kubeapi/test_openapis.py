"""The OpenAPI documents kubectl reads, as pure data: every served kind is there with its group-version-kind, every
reference resolves, the schemas accept our own manifests and refuse an unknown field wherever our models refuse it,
fields have docs for `kubectl explain`, and the v2 protobuf decodes to the same document."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from devplace import errors
from devplace.api import _registry as registry
from devplace.api import normalize
from devplace.kubeapi import _gnostics as gnostics
from devplace.kubeapi import _openapis as openapis
from devplace.placement import _levels as levels

ROOT = Path(__file__).resolve().parents[2]
GVK = "x-kubernetes-group-version-kind"

_CONTAINER = {"name": "c", "image": "busybox:1.36", "resources": {"limits": {"cpu": "1", "memory": 1024}}}
_POD_SPEC = {"containers": [_CONTAINER]}
_TEMPLATE = {"metadata": {"labels": {"app": "a"}}, "spec": _POD_SPEC}
HANDMADE: list[dict[str, Any]] = [
    {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": "pool", "namespace": "edge", "labels": {"tier": "a"}},
        "spec": {
            "discoveryHandler": {
                "name": "udev",
                "discoveryDetails": "udevRules: []",
                "discoveryProperties": [
                    {"name": "realm", "value": "lab"},
                    {"name": "user", "valueFrom": {"secretKeyRef": {"name": "auth", "key": "u", "optional": True}}},
                ],
            },
            "capacity": 3,
            "brokerSpec": {"brokerPodSpec": _POD_SPEC},
            "brokerStrategy": {"pool": {"size": 2, "mode": "dynamic", "timeoutSeconds": 1.5}},
            "configurationServiceSpec": {"ports": [{"port": 80, "targetPort": "http"}]},
        },
    },
    {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "jobs"},
        "spec": {
            "discoveryHandler": {"name": "debugEcho"},
            "brokerSpec": {"brokerJobSpec": {"template": _TEMPLATE, "backoffLimit": 2}},
            "brokerStrategy": {"job": {}},
        },
    },
    {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": {"name": "cam-a1b2c3"},
        "spec": {
            "configurationName": "cam",
            "capacity": 2,
            "shared": True,
            "nodes": ["node-a", "node-b"],
            "deviceUsage": {"cam-a1b2c3-0": "", "cam-a1b2c3-1": "node-a"},
            "brokerProperties": {"IP": "10.0.0.9"},
        },
    },
    {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": {"name": "big-gpu"},
        "spec": {
            "resourceSelector": [
                {"matchExpressions": [{"key": "memory", "operator": "GtEq", "values": ["16Gi"]}]},
                {"classRef": "other"},
            ],
            "selectionStrategy": "binpack",
        },
        "status": {"allocatable": "4", "requested": "1"},
    },
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}, "data": {"k": "dg=="}, "type": "Opaque"},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}, "data": {"k": "v"}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": _POD_SPEC},
    {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "a"}}, "template": _TEMPLATE},
    },
    {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": _TEMPLATE}},
    {
        "apiVersion": "fleet.devplace.io/v1alpha1",
        "kind": "Project",
        "metadata": {"name": "p1"},
        "spec": {"path": ["p1"], "emco": {"metadata": {"name": "p1", "description": "a project"}}},
    },
]


def _examples() -> list[dict[str, Any]]:
    found = []
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        found.extend(
            d
            for d in yaml.safe_load_all(path.read_text())
            if isinstance(d, dict) and "kind" in d and d["kind"] != "Scenario"  # a scenario file, not a stored kind
        )
    return found


SAMPLES = HANDMADE + _examples()


def _sample_id(obj: dict[str, Any]) -> str:
    return f"{obj['apiVersion']}/{obj['kind']}/{obj['metadata']['name']}"


def _validator(obj: dict[str, Any]) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(openapis.json_schema(obj["apiVersion"], obj["kind"]))


# -- what is there ------------------------------------------------------------------------------------------------


def test_every_registered_kind_has_a_definition_per_group_version_with_its_group_version_kind() -> None:
    defs = openapis.definitions()
    for info in registry.kinds():
        for gv in info.group_versions:
            group, _, version = gv.rpartition("/")
            name = openapis.definition_name(group, version, info.kind)
            assert {"group": group, "kind": info.kind, "version": version} in defs[name][GVK], name


@pytest.mark.parametrize(
    ("api_version", "kind", "name"),
    [
        ("v1", "Pod", "io.k8s.api.core.v1.Pod"),
        ("apps/v1", "Deployment", "io.k8s.api.apps.v1.Deployment"),
        ("akri.sh/v0", "Configuration", "sh.akri.v0.Configuration"),
        ("devplace.io/v1alpha1", "Configuration", "io.devplace.v1alpha1.Configuration"),
        ("fleet.devplace.io/v1alpha1", "Project", "io.devplace.fleet.v1alpha1.Project"),
    ],
)
def test_definitions_are_named_as_kubernetes_names_them(api_version: str, kind: str, name: str) -> None:
    group, _, version = api_version.rpartition("/")
    assert openapis.definition_name(group, version, kind) == name
    assert name in openapis.definitions()


def test_built_in_kinds_keep_kubernetes_schemas_with_their_patch_facts() -> None:
    pod_spec = openapis.definitions()["io.k8s.api.core.v1.PodSpec"]
    containers = pod_spec["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert "nodeSelector" in pod_spec["properties"]


def test_broker_specs_are_kubernetes_pod_job_and_service_specs() -> None:
    spec = openapis.definitions()["sh.akri.v0.Configuration"]["properties"]["spec"]["properties"]
    broker = spec["brokerSpec"]["properties"]
    assert broker["brokerPodSpec"]["$ref"] == "#/definitions/io.k8s.api.core.v1.PodSpec"
    assert broker["brokerJobSpec"]["$ref"] == "#/definitions/io.k8s.api.batch.v1.JobSpec"
    assert spec["instanceServiceSpec"]["$ref"] == "#/definitions/io.k8s.api.core.v1.ServiceSpec"


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)


def test_every_reference_of_the_v2_document_resolves() -> None:
    doc = openapis.swagger()
    refs = set(_references(doc))
    assert refs
    for ref in refs:
        assert ref.startswith("#/definitions/")
        assert ref.removeprefix("#/definitions/") in doc["definitions"], ref


def test_the_v3_index_lists_every_served_group_version_and_each_document_resolves_its_references() -> None:
    served = {gv for info in registry.kinds() for gv in info.group_versions}
    index = openapis.v3_index()["paths"]
    assert set(index) == {f"apis/{gv}" if "/" in gv else f"api/{gv}" for gv in served}
    for gv in served:
        path = openapis.group_version_path(gv)
        assert index[path]["serverRelativeURL"] == f"/openapi/v3/{path}?hash={openapis.v3_hash(gv)}"
        doc = openapis.v3_document(gv)
        assert doc["openapi"].startswith("3.")
        schemas = doc["components"]["schemas"]
        for ref in _references(doc):
            assert ref.removeprefix("#/components/schemas/") in schemas, (gv, ref)
        kinds_here = {info.kind for info in registry.kinds() if gv in info.group_versions}
        gvks = {g["kind"] for schema in schemas.values() for g in schema.get(GVK, []) if _gv(g) == gv}
        assert kinds_here <= gvks


def _gv(gvk: dict[str, str]) -> str:
    return f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]


def test_a_group_version_nobody_serves_has_no_v3_document() -> None:
    with pytest.raises(errors.NotFound):
        openapis.v3_document("example.com/v1")


def test_the_v3_hash_is_the_documents_content_hash() -> None:
    import hashlib

    doc = openapis.v3_document("akri.sh/v0")
    expected = hashlib.sha512(openapis.document_bytes(doc)).hexdigest().upper()
    assert openapis.v3_hash("akri.sh/v0") == expected


def test_patch_operations_offer_field_validation_exactly_where_the_server_refuses_unknown_fields() -> None:
    """kubectl >= 1.27 (cli-runtime's QueryParamVerifierV3) looks for a PATCH operation whose group-version-kind is
    the manifest's and whose query parameters include fieldValidation: found, it leaves validation to the server;
    not found, it validates the manifest itself (the built-in kinds, which the server stores with any extra field)."""
    for gv in openapis.group_versions():
        doc = openapis.v3_document(gv)
        patched = {
            (op[GVK]["group"], op[GVK]["kind"])
            for item in doc["paths"].values()
            if (op := item.get("patch")) is not None
            and any(p["name"] == "fieldValidation" and p["in"] == "query" for p in op.get("parameters", []))
        }
        for info in registry.kinds():
            if gv in info.group_versions:
                offered = (gv.rpartition("/")[0], info.kind) in patched
                assert offered == openapis.validates_fields(info), (gv, info.kind)
    assert openapis.validates_fields(registry.lookup("Configuration"))
    assert not openapis.validates_fields(registry.lookup("Pod"))


def test_every_patch_operation_of_one_kind_agrees_on_field_validation() -> None:
    """kubectl stops at the first PATCH operation with the manifest's group-version-kind (in Go's random map order),
    so an object's PATCH and its /status PATCH must offer the same parameters."""
    for gv in openapis.group_versions():
        offers: dict[tuple[str, str], set[bool]] = {}
        for item in openapis.v3_document(gv)["paths"].values():
            if (op := item.get("patch")) is not None:
                names = {p["name"] for p in op.get("parameters", [])}
                offers.setdefault((op[GVK]["group"], op[GVK]["kind"]), set()).add("fieldValidation" in names)
        assert all(len(found) == 1 for found in offers.values()), offers


def test_strategic_merge_patch_is_offered_for_built_in_kinds_only() -> None:
    paths = openapis.swagger()["paths"]
    pod = paths["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]["consumes"]
    configuration = paths["/apis/akri.sh/v0/namespaces/{namespace}/configurations/{name}"]["patch"]["consumes"]
    assert "application/strategic-merge-patch+json" in pod
    assert "application/strategic-merge-patch+json" not in configuration
    assert "application/apply-patch+yaml" in configuration


def test_subresources_are_described_with_their_kinds() -> None:
    paths = openapis.swagger()["paths"]
    scale = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["get"]
    assert scale[GVK] == {"group": "autoscaling", "kind": "Scale", "version": "v1"}
    assert "/apis/devplace.io/v1alpha1/resourceclasses/{name}/status" in paths
    assert "/api/v1/namespaces/{namespace}/configmaps/{name}/status" not in paths  # ConfigMap has no status


def test_the_vendored_kubernetes_definitions_are_what_the_tool_writes_from_kubernetes_validate() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "kubernetes_schemas.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


# -- kubectl can parse it ---------------------------------------------------------------------------------------


def _schemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema node below a definition (properties, items, additionalProperties)."""
    yield node
    for sub in (node.get("properties") or {}).values():
        yield from _schemas(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from _schemas(node[key])


def test_every_schema_is_one_kubectl_can_parse() -> None:
    """kube-openapi's parser (kubectl's v2 reader) refuses several types in one schema, an array without exactly one
    item schema and an unknown primitive type."""
    for name, definition in openapis.definitions().items():
        for node in _schemas(definition):
            kind = node.get("type")
            assert kind is None or kind in ("object", "array", "string", "integer", "number", "boolean"), name
            if kind == "array":
                assert isinstance(node.get("items"), dict), name
            assert not {"anyOf", "oneOf"} & set(node), name


def test_every_field_of_the_device_kinds_has_a_description_for_kubectl_explain() -> None:
    """Configuration, Instance and ResourceClass fully; the other kinds of ours their kind, spec and status."""
    for s in openapis.served():
        if s.builtin:
            continue
        definition = openapis.definitions()[s.definition]
        assert definition["description"]
        assert all(prop.get("description") for prop in definition["properties"].values()), s.definition
        if s.info.kind not in ("Configuration", "Instance", "ResourceClass"):
            continue
        undocumented = [
            f"{s.definition}.{field}"
            for node in _schemas(definition)
            for field, sub in (node.get("properties") or {}).items()
            if not sub.get("description")
        ]
        assert undocumented == []


@pytest.mark.parametrize("kind", ["DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate"])
def test_every_field_of_the_dra_kinds_is_described_and_quantities_and_node_selectors_are_kubernetes_types(
    kind: str,
) -> None:
    """Kubernetes' 1.32 definitions lack resource.k8s.io/v1 (GA in 1.34): the DRA kinds are served from their
    models, each field described from its docstring, node selectors as NodeSelector, single quantities as Quantity."""
    definition = openapis.definitions()[f"io.k8s.api.resource.v1.{kind}"]
    undocumented = [
        field
        for node in _schemas(definition)
        for field, sub in (node.get("properties") or {}).items()
        if not sub.get("description") and field not in ("apiVersion", "kind")
    ]
    assert undocumented == []
    if kind == "ResourceSlice":
        spec = definition["properties"]["spec"]["properties"]
        assert spec["nodeSelector"]["$ref"] == "#/definitions/io.k8s.api.core.v1.NodeSelector"
        capacity = spec["devices"]["items"]["properties"]["capacity"]["additionalProperties"]
        assert capacity["properties"]["value"]["$ref"] == "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"


def test_every_documented_field_exists() -> None:
    """The description table names (model, field) pairs; a renamed field must not leave a stale entry."""
    from devplace.api._definitions import TYPED_FIELDS
    from devplace.kubeapi._openapis import _FIELD_DOCS, _model_classes

    classes: dict[str, Any] = {}
    for model in [info.model for info in registry.kinds()] + [level.body for level in levels.LEVELS]:
        classes.update(_model_classes(model))
    for model, field in [*_FIELD_DOCS, *TYPED_FIELDS]:
        assert model in classes, model
        aliases = {f.alias or name for name, f in classes[model].model_fields.items()}
        assert field in aliases, (model, field)


# -- the schemas and the models agree ---------------------------------------------------------------------------


@pytest.mark.parametrize("obj", SAMPLES, ids=_sample_id)
def test_our_own_manifests_validate_against_the_schema(obj: dict[str, Any]) -> None:
    normalize(copy.deepcopy(obj))  # a sample the server accepts ...
    errors_found = [f"{list(e.absolute_path)}: {e.message}" for e in _validator(obj).iter_errors(obj)]
    assert errors_found == []  # ... is one the schema accepts
    assert openapis.unknown_fields(obj) == []


def _object_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        yield path
        for key, value in node.items():
            yield from _object_paths(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _object_paths(value, (*path, i))


def _with_field(obj: dict[str, Any], path: tuple[Any, ...], key: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node: Any = out
    for part in path:
        node = node[part]
    node[key] = "surprise"
    return out


def _dotted(path: tuple[Any, ...], key: str) -> str:
    text = ""
    for part in (*path, key):
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


@pytest.mark.parametrize("obj", SAMPLES, ids=_sample_id)
def test_an_unknown_field_our_model_refuses_is_refused_by_the_schema_too(obj: dict[str, Any]) -> None:
    """At every object of every sample: add a field nobody knows. Wherever the model refuses it, the schema (what
    kubectl validates with) and `unknown_fields` (Kubernetes' strict field check) refuse it, naming that path."""
    refused_by_model = 0
    for path in _object_paths(obj):
        changed = _with_field(obj, path, "zzUnknown")
        where = _dotted(path, "zzUnknown")
        try:
            normalize(copy.deepcopy(changed))
        except errors.Invalid as e:
            if not any(f.path == where and "Extra inputs" in f.reason for f in e.fields):
                continue  # refused for another reason (e.g. "surprise" is no quantity in a map of quantities)
        else:
            continue
        refused_by_model += 1
        assert not _validator(changed).is_valid(changed), path
        assert where in openapis.unknown_fields(changed)
    if obj["apiVersion"] not in ("v1", "apps/v1", "batch/v1"):
        assert refused_by_model > 0  # our kinds refuse unknown fields somewhere


def test_unknown_fields_finds_fields_kubernetes_does_not_know_in_built_in_kinds() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"any": "label"}},
        "spec": {"containers": [{"name": "c", "image": "i", "bogus": 1}], "nodeSelector": {"any": "key"}},
        "extra": True,
    }
    assert openapis.unknown_fields(pod) == ["spec.containers[0].bogus", "extra"]


def test_unknown_fields_follows_a_configuration_into_its_broker_pod_spec() -> None:
    config = copy.deepcopy(HANDMADE[0])
    config["spec"]["brokerSpec"]["brokerPodSpec"]["containers"][0]["imagePullPolice"] = "Always"
    assert openapis.unknown_fields(config) == ["spec.brokerSpec.brokerPodSpec.containers[0].imagePullPolice"]


def test_unknown_fields_says_nothing_about_kinds_it_does_not_serve() -> None:
    assert openapis.unknown_fields({"apiVersion": "example.com/v1", "kind": "Widget", "x": 1}) == []
    assert openapis.unknown_fields({"kind": "Pod"}) == []


# -- the v2 protobuf ---------------------------------------------------------------------------------------------


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """A protobuf message's fields as (number, wire type, value); length-delimited values stay bytes."""
    out = []
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 2:
            size, i = _read_varint(data, i)
            value, i = data[i : i + size], i + size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((number, wire, value))
    return out


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def _one(data: bytes, number: int) -> bytes:
    (value,) = [v for n, _, v in _fields(data) if n == number]
    assert isinstance(value, bytes)
    return value


def _named(data: bytes, number: int) -> dict[str, bytes]:
    """A gnostic map (repeated Named*{name = 1, value = 2}) under field `number`."""
    out = {}
    for n, _, entry in _fields(data):
        if n == number:
            out[_one(entry, 1).decode()] = _one(entry, 2)
    return out


def test_the_v2_protobuf_holds_every_definition_and_path_with_their_extensions() -> None:
    doc = openapis.swagger()
    encoded = gnostics.encode_document(doc)
    assert _one(encoded, 1) == b"2.0"
    definitions = _named(_one(encoded, 9), 1)
    assert list(definitions) == list(doc["definitions"])
    paths = _named(_one(encoded, 8), 2)
    assert list(paths) == list(doc["paths"])

    configuration = definitions["sh.akri.v0.Configuration"]
    extensions = {k: json.loads(_one(v, 2)) for k, v in _named(configuration, 31).items()}  # Any{yaml = 2}
    assert extensions[GVK] == [{"group": "akri.sh", "kind": "Configuration", "version": "v0"}]
    assert _one(configuration, 4).decode() == doc["definitions"]["sh.akri.v0.Configuration"]["description"]
    properties = _named(_one(configuration, 25), 1)
    assert set(properties) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert _one(properties["metadata"], 1) == b"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    assert _one(_one(properties["kind"], 22), 1) == b"string"  # TypeItem{value = 1}


def test_the_v2_protobuf_encodes_an_operations_parameters_by_kind() -> None:
    item = {
        "patch": {
            "operationId": "patchX",
            "parameters": [
                {"in": "body", "name": "body", "required": True, "schema": {"$ref": "#/definitions/P"}},
                {"in": "query", "name": "fieldValidation", "type": "string", "uniqueItems": True},
            ],
            "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/X"}}},
            GVK: {"group": "g", "kind": "X", "version": "v1"},
        },
        "parameters": [{"in": "path", "name": "name", "required": True, "type": "string"}],
    }
    encoded = gnostics.encode_document({"swagger": "2.0", "paths": {"/x/{name}": item}})
    path_item = _named(_one(encoded, 8), 2)["/x/{name}"]
    op = _one(path_item, 8)  # PathItem.patch
    assert _one(op, 5) == b"patchX"
    body, query = [_one(v, 1) for n, _, v in _fields(op) if n == 8]  # ParametersItem.parameter
    assert _one(_one(_one(body, 1), 5), 1) == b"#/definitions/P"  # Parameter.body_parameter.schema._ref
    assert _one(_one(_one(query, 2), 3), 4) == b"fieldValidation"  # non_body.query.name
    path_param = _one(_one(_one(_one(path_item, 9), 1), 2), 4)  # PathItem.parameters[0] ... path sub-schema
    assert _one(path_param, 4) == b"name"
    assert json.loads(_one(_named(op, 13)[GVK], 2)) == item["patch"][GVK]


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**40, -1])
def test_varints_round_trip(value: int) -> None:
    from devplace.kubeapi._gnostics import _varint

    decoded, _ = _read_varint(_varint(value), 0)
    assert decoded == (value if value >= 0 else value + 2**64)
