"""The CustomResourceDefinitions generated from the models: structural as apiextensions.k8s.io/v1 requires, valid
Kubernetes objects, named as discovery names the kinds, with `devplace get`'s columns and a status subresource where
the kind has a status; the akri.sh ones compatible with Akri's (facts transcribed from Akri v0.13's CRDs below), and
every example and Akri-shaped manifest valid under its CRD's schema."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from devplace import errors
from devplace.api import _manifests as manifests
from devplace.api import _registry as registry
from devplace.cli._app import app as cli_app
from devplace.cli._crds import definitions
from devplace.kubeapi import _crds as crds
from devplace.kubeapi import _openapis as openapis
from devplace.kubeapi import _subresources as subresources
from devplace.kubeapi import _tables as tables

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_VERSION = "1.32"
PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"

CRDS = definitions()
BY_NAME = {crd["metadata"]["name"]: crd for crd in CRDS}


def schema_of(crd_name: str, version: str | None = None) -> dict[str, Any]:
    versions = BY_NAME[crd_name]["spec"]["versions"]
    chosen = next(v for v in versions if version in (None, v["name"]))
    schema: dict[str, Any] = chosen["schema"]["openAPIV3Schema"]
    return schema


def crd_for(obj: Mapping[str, Any]) -> str:
    info = registry.lookup(str(obj["kind"]))
    return f"{info.plural}.{str(obj['apiVersion']).rpartition('/')[0]}"


# -- structural, as apiextensions.k8s.io/v1 requires ---------------------------------------------------------------

_JSON_SCHEMA_PROPS = {
    "description",
    "type",
    "format",
    "title",
    "default",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "properties",
    "additionalProperties",
    "nullable",
    PRESERVE,
    INT_OR_STRING,
    "x-kubernetes-embedded-resource",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
}
"""The fields of Kubernetes' JSONSchemaProps a generated schema may use (no $ref, no definitions, no extensions
Kubernetes does not know)."""


def structural_problems(node: Mapping[str, Any], path: str = "") -> Iterator[str]:
    """Kubernetes' structural-schema rules (apiextensions.k8s.io/v1), as `path: problem` texts."""
    for key in node:
        if key not in _JSON_SCHEMA_PROPS:
            yield f"{path}: {key} is not a field of a CRD schema"
    typed = "type" in node or node.get(PRESERVE) is True or node.get(INT_OR_STRING) is True
    if not typed:
        yield f"{path}: no type (and neither preserve-unknown-fields nor int-or-string)"
    if node.get("uniqueItems") is True:
        yield f"{path}: uniqueItems cannot be true in a CRD"
    if node.get("additionalProperties") is False:
        yield f"{path}: additionalProperties: false is not allowed"
    if "properties" in node and "additionalProperties" in node:
        yield f"{path}: properties and additionalProperties are mutually exclusive"
    if "default" in node:
        yield f"{path}: defaults would be written into stored objects"
    for junctor in ("allOf", "oneOf", "not"):
        if junctor in node:
            yield f"{path}: {junctor} is not generated"
    if "anyOf" in node and node["anyOf"] != [{"type": "integer"}, {"type": "string"}]:
        yield f"{path}: anyOf other than int-or-string's"
    if "anyOf" in node and not node.get(INT_OR_STRING):
        yield f"{path}: anyOf without x-kubernetes-int-or-string"
    if node.get("type") not in (None, "object", "array", "string", "integer", "number", "boolean"):
        yield f"{path}: unknown type {node.get('type')!r}"
    if "properties" in node and node.get("type") != "object":
        yield f"{path}: properties on a non-object"
    if "items" in node and node.get("type") != "array":
        yield f"{path}: items on a non-array"
    if node.get("type") == "array" and not isinstance(node.get("items"), Mapping):
        yield f"{path}: an array without one items schema"
    for name, prop in (node.get("properties") or {}).items():
        yield from structural_problems(prop, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from structural_problems(node["additionalProperties"], f"{path}.*")
    if isinstance(node.get("items"), Mapping):
        yield from structural_problems(node["items"], f"{path}[*]")


@pytest.mark.parametrize("crd", CRDS, ids=lambda crd: crd["metadata"]["name"])
def test_every_schema_is_structural(crd):
    for version in crd["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        assert list(structural_problems(schema)) == []
        assert schema["type"] == "object"
        assert schema["properties"]["metadata"] == {"type": "object"}  # the API server owns metadata
        assert "$ref" not in yaml.safe_dump(schema)


@pytest.mark.parametrize("crd", CRDS, ids=lambda crd: crd["metadata"]["name"])
def test_every_crd_is_a_valid_kubernetes_object_in_strict_mode(crd):
    kubernetes_validate.validate(crd, KUBERNETES_VERSION, strict=True)


def test_every_kind_outside_kubernetes_own_groups_has_one_crd_per_group():
    expected = {f"{s.info.plural}.{s.group}" for s in openapis.served() if not s.builtin}
    assert set(BY_NAME) == expected
    assert {
        "configurations.akri.sh",
        "instances.akri.sh",
        "configurations.devplace.io",
        "resourceclasses.devplace.io",
    } <= (set(BY_NAME))
    assert not any(name.endswith((".apps", ".batch")) or "." not in name for name in BY_NAME)
    for crd in CRDS:
        versions = crd["spec"]["versions"]
        assert [v["storage"] for v in versions].count(True) == 1
        assert all(v["served"] for v in versions)


def test_names_scope_and_short_names_are_what_discovery_serves():
    config, instance = BY_NAME["configurations.akri.sh"]["spec"], BY_NAME["instances.akri.sh"]["spec"]
    assert config["names"]["shortNames"] == ["akric"]
    assert instance["names"]["shortNames"] == ["akrii"]
    assert config["names"]["categories"] == ["all", "akri", "devplace"]
    assert BY_NAME["resourceclasses.devplace.io"]["spec"]["scope"] == "Cluster"
    assert BY_NAME["projects.fleet.devplace.io"]["spec"]["names"]["categories"] == ["fleet"]
    for crd in CRDS:
        info = registry.lookup(crd["spec"]["names"]["kind"])
        assert crd["spec"]["names"]["plural"] == info.plural
        assert crd["spec"]["scope"] == ("Namespaced" if info.namespaced else "Cluster")


def test_a_status_subresource_exactly_where_the_kind_has_a_status():
    for crd in CRDS:
        kind = crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            assert ("subresources" in version) == subresources.has_status(kind), kind
            if subresources.has_status(kind):
                assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("crd", CRDS, ids=lambda crd: crd["metadata"]["name"])
def test_printer_columns_are_the_columns_devplace_get_prints(crd):
    kind = crd["spec"]["names"]["kind"]
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    expected = [c.name for c in tables.columns(kind) if c.name != "Name"]
    shown = ["Used/Capacity" if (kind, c["name"]) == ("Instance", "Capacity") else c["name"] for c in columns]
    assert shown == expected
    assert {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"} in columns
    for column in columns:
        assert column["jsonPath"].startswith((".spec.", ".status.", ".metadata."))
        assert column["type"] in ("string", "integer", "number", "boolean", "date")


def test_a_column_without_a_json_path_is_an_error_not_a_silent_gap(monkeypatch):
    monkeypatch.setitem(tables._KIND_COLUMNS, "Project", ([tables.Column("Owner", lambda o, now: None)], []))
    with pytest.raises(errors.NotFound, match="Owner"):
        crds.printer_columns("Project")


def test_the_cli_prints_every_crd_and_writes_them_with_a_kustomization(tmp_path):
    printed = CliRunner().invoke(cli_app, ["crds"])
    assert printed.exit_code == 0, printed.output
    docs = [d for d in yaml.safe_load_all(printed.stdout) if d]
    assert docs == CRDS
    written = CliRunner().invoke(cli_app, ["crds", "-o", str(tmp_path / "crds")])
    assert written.exit_code == 0, written.output
    files = sorted(p.name for p in (tmp_path / "crds").iterdir())
    assert files == sorted([crds.file_name(crd) for crd in CRDS] + ["kustomization.yaml"])
    kustomization = yaml.safe_load((tmp_path / "crds" / "kustomization.yaml").read_text())
    assert kustomization["resources"] == [crds.file_name(crd) for crd in CRDS]
    for crd in CRDS:
        assert yaml.safe_load((tmp_path / "crds" / crds.file_name(crd)).read_text()) == crd


# -- Akri compatibility --------------------------------------------------------------------------------------------

AKRI = {
    "configurations.akri.sh": {
        "scope": "Namespaced",
        "names": {"plural": "configurations", "singular": "configuration", "kind": "Configuration"},
        "shortNames": ["akric"],
        "version": "v0",
        "types": {
            "spec": "object",
            "spec.discoveryHandler": "object",
            "spec.discoveryHandler.name": "string",
            "spec.discoveryHandler.discoveryDetails": "string",
            "spec.discoveryHandler.discoveryProperties": "array",
            "spec.capacity": "integer",
            "spec.brokerSpec": "object",
            "spec.brokerSpec.brokerPodSpec": "object",
            "spec.brokerSpec.brokerJobSpec": "object",
            "spec.instanceServiceSpec": "object",
            "spec.configurationServiceSpec": "object",
            "spec.brokerProperties": "object",
        },
        "preserved": [
            "spec.brokerSpec.brokerPodSpec",
            "spec.brokerSpec.brokerJobSpec",
            "spec.instanceServiceSpec",
            "spec.configurationServiceSpec",
        ],
        "maps_of_strings": ["spec.brokerProperties"],
        "required": {},
    },
    "instances.akri.sh": {
        "scope": "Namespaced",
        "names": {"plural": "instances", "singular": "instance", "kind": "Instance"},
        "shortNames": ["akrii"],
        "version": "v0",
        "types": {
            "spec": "object",
            "spec.configurationName": "string",
            "spec.cdiName": "string",
            "spec.capacity": "integer",
            "spec.brokerProperties": "object",
            "spec.shared": "boolean",
            "spec.nodes": "array",
            "spec.deviceUsage": "object",
        },
        "preserved": [],
        "maps_of_strings": ["spec.brokerProperties", "spec.deviceUsage"],
        "required": {"spec": ["capacity", "cdiName", "configurationName"]},
    },
}
"""Facts of Akri v0.13's CRDs (`deployment/helm/crds/` in project-akri/akri): names, scope, version, the type of
each property, which hold Kubernetes types whole (preserve-unknown-fields), and what they require."""


def _node(schema: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    node = schema
    for step in path.split("."):
        node = node["properties"][step]
    return node


def _walk(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    for prop in (node.get("properties") or {}).values():
        yield from _walk(prop)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), Mapping):
            yield from _walk(node[key])


@pytest.mark.parametrize("name", sorted(AKRI))
def test_the_akri_crds_have_akris_names_scope_version_and_property_types(name):
    facts, crd = AKRI[name], BY_NAME[name]["spec"]
    assert crd["group"] == "akri.sh"
    assert crd["scope"] == facts["scope"]
    assert {k: crd["names"][k] for k in facts["names"]} == facts["names"]
    assert crd["names"]["shortNames"] == facts["shortNames"]
    assert [v["name"] for v in crd["versions"]] == [facts["version"]]
    schema = schema_of(name)
    for path, kind in facts["types"].items():
        assert _node(schema, path).get("type") == kind, path
    for path in facts["preserved"]:
        assert _node(schema, path).get(PRESERVE) is True, path
    for path in facts["maps_of_strings"]:
        assert _node(schema, path)["additionalProperties"] == {"type": "string"}, path
    if "spec.nodes" in facts["types"]:
        assert _node(schema, "spec.nodes")["items"] == {"type": "string"}


@pytest.mark.parametrize("name", sorted(AKRI))
def test_the_akri_crds_accept_every_value_akris_accept_requiring_nothing_more(name):
    """Only the shape is kept (types and property names): no bounds, patterns or enums, and nothing required that
    Akri's CRD does not require."""
    schema = schema_of(name)
    for node in _walk(schema):
        assert not {"minimum", "maximum", "pattern", "enum", "minLength", "maxLength", "minItems"} & set(node)
    for path, required in AKRI[name]["required"].items():
        assert set(_node(schema, path).get("required", [])) <= set(required)
    assert schema.get("required", []) == []


def test_the_devplace_io_crds_keep_the_models_rules():
    schema = schema_of("configurations.devplace.io")
    capacity = _node(schema, "spec.capacity")
    assert (capacity["minimum"], capacity["maximum"]) == (1, 1024)
    assert schema["required"] == ["spec"]
    assert _node(schema, "spec")["required"] == ["discoveryHandler"]
    assert _node(schema, "spec.brokerStrategy.pool.mode")["enum"] == ["static", "dynamic"]


# -- objects valid under the generated schemas ---------------------------------------------------------------------


def json_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    """A CRD's structural schema as JSON Schema draft 4 (whose exclusiveMinimum is OpenAPI 3.0's boolean), read as
    an API server asked for `fieldValidation=Strict` reads it: a field a closed object does not know is an error
    (without Strict it would be dropped), null is a value only where `nullable` says so."""
    out: dict[str, Any] = {}
    types = ["integer", "string"] if node.get(INT_OR_STRING) else [node["type"]] if "type" in node else []
    if types and node.get("nullable"):
        types.append("null")
    if types:
        out["type"] = types
    for key in ("enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "pattern", "required"):
        if key in node:
            out[key] = node[key]
    for key in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"):
        if key in node:
            out[key] = node[key]
    if "properties" in node:
        out["properties"] = {k: json_schema(v) for k, v in node["properties"].items()}
        if not node.get(PRESERVE):
            out["additionalProperties"] = False
    if isinstance(node.get("additionalProperties"), Mapping):
        out["additionalProperties"] = json_schema(node["additionalProperties"])
    if isinstance(node.get("items"), Mapping):
        out["items"] = json_schema(node["items"])
    return out


def crd_problems(obj: Mapping[str, Any]) -> list[str]:
    schema = schema_of(crd_for(obj), str(obj["apiVersion"]).rpartition("/")[2])
    validator = jsonschema.Draft4Validator(json_schema(schema))
    return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(obj)]


_POD = {
    "containers": [
        {
            "name": "broker",
            "image": "example.org/broker:1",
            "securityContext": {"privileged": True},
            "resources": {"requests": {"{{PLACEHOLDER}}": "1", "cpu": "10m"}, "limits": {"{{PLACEHOLDER}}": "1"}},
        }
    ],
    "imagePullSecrets": [{"name": "regcred"}],
}
_SERVICE = {"type": "ClusterIP", "ports": [{"name": "grpc", "port": 8083, "protocol": "TCP", "targetPort": 8083}]}

AKRI_SHAPED: list[dict[str, Any]] = [
    {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {
            "name": "echo",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": ""},
            "generation": 1,
            "managedFields": [],
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "uid": "00000000-0000-0000-0000-000000000000",
        },
        "spec": {
            "discoveryHandler": {"name": "debugEcho", "discoveryDetails": "descriptions: [foo, bar]\n"},
            "capacity": 2,
            "brokerSpec": {"brokerPodSpec": _POD},
            "instanceServiceSpec": _SERVICE,
            "configurationServiceSpec": _SERVICE,
            "brokerProperties": {},
        },
    },
    {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "udev-jobs"},
        "spec": {
            "discoveryHandler": {"name": "udev", "discoveryDetails": 'udevRules:\n- KERNEL=="video[0-9]*"\n'},
            "brokerSpec": {
                "brokerJobSpec": {
                    "template": {"spec": {**_POD, "restartPolicy": "Never"}},
                    "backoffLimit": 2,
                    "parallelism": 1,
                    "completions": 1,
                }
            },
            "brokerProperties": {"RESOLUTION_WIDTH": "800", "RESOLUTION_HEIGHT": "600"},
            "capacity": 1,
        },
    },
    {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "cameras"},
        "spec": {
            "discoveryHandler": {
                "name": "onvif",
                "discoveryDetails": "ipAddresses:\n  action: Exclude\n  items: []\ndiscoveryTimeoutSeconds: 1\n",
                "discoveryProperties": [
                    {"name": "nonce", "value": "x"},
                    {
                        "name": "username",
                        "valueFrom": {"secretKeyRef": {"name": "cams", "namespace": "default", "key": "user"}},
                    },
                    {"name": "realm", "valueFrom": {"configMapKeyRef": {"name": "cams", "key": "r", "optional": True}}},
                ],
            },
            "capacity": 5,
        },
    },
    {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "akri-accepts-what-devplace-refuses"},
        "spec": {"discoveryHandler": {"name": "opcua"}, "capacity": 0},
    },
    {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": {"name": "cameras-8120fe", "namespace": "default"},
        "spec": {
            "configurationName": "cameras",
            "cdiName": "akri.sh/cameras=8120fe",
            "capacity": 2,
            "shared": True,
            "nodes": ["node-a", "node-b"],
            "deviceUsage": {"cameras-8120fe-0": "node-a", "cameras-8120fe-1": "C:0:node-b"},
            "brokerProperties": {"ONVIF_DEVICE_SERVICE_URL": "http://10.0.0.9/onvif/device_service"},
        },
    },
]
"""Objects in the shapes Akri's published Configurations and Instances take (every Configuration field, pod and job
brokers, services, discovery properties from Secrets and ConfigMaps, a server-filled metadata)."""


@pytest.mark.parametrize("obj", AKRI_SHAPED, ids=lambda obj: f"{obj['kind']}-{obj['metadata']['name']}")
def test_akri_shaped_objects_are_valid_under_the_akri_crds(obj):
    assert crd_problems(obj) == []


def test_a_value_devplace_refuses_is_refused_by_the_devplace_io_crd_and_kept_by_the_akri_one():
    obj = copy.deepcopy(AKRI_SHAPED[3])
    assert crd_problems(obj) == []
    with pytest.raises(errors.Invalid, match=r"spec\.capacity"):
        manifests.validated(obj)
    obj["apiVersion"] = "devplace.io/v1alpha1"
    assert [p for p in crd_problems(obj) if p.startswith("spec.capacity")]


def test_an_unknown_field_is_refused_under_strict_validation_by_both():
    for api_version in ("akri.sh/v0", "devplace.io/v1alpha1"):
        obj = {**copy.deepcopy(AKRI_SHAPED[0]), "apiVersion": api_version}
        obj["spec"]["discoveryHandler"]["nmae"] = "x"
        assert any("nmae" in p for p in crd_problems(obj)), api_version


def _examples() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted((ROOT / "examples").rglob("*.y*ml")):
        for doc in manifests.parse_documents(path.read_text()):
            if isinstance(doc, dict) and isinstance(doc.get("kind"), str) and isinstance(doc.get("apiVersion"), str):
                try:
                    served = crd_for(doc) in BY_NAME
                except errors.Invalid:
                    continue
                if served:
                    yield f"{path.relative_to(ROOT)}:{doc['kind']}/{doc['metadata']['name']}", doc


EXAMPLES = list(_examples())


def test_the_examples_include_objects_of_crd_kinds():
    assert {doc["kind"] for _, doc in EXAMPLES} >= {"Configuration", "ResourceClass"}


@pytest.mark.parametrize(("where", "doc"), EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_every_example_of_a_crd_kind_is_valid_under_its_crd(where, doc):
    assert crd_problems(doc) == [], where
