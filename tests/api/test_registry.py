"""The kind registry and `normalize`, the one boundary check: kinds, apiVersions, scope, Akri manifests unchanged."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from devplace import errors
from devplace.api import Configuration, Instance, Node, Pod, ResourceClass, lookup, normalize
from devplace.api._registry import DEFAULT_NAMESPACE, lookup_plural

# A realistic Akri v0.13 ONVIF Configuration, as an Akri user would apply it.
AKRI_CONFIGURATION: dict[str, Any] = {
    "apiVersion": "akri.sh/v0",
    "kind": "Configuration",
    "metadata": {"name": "akri-onvif", "namespace": "default"},
    "spec": {
        "discoveryHandler": {
            "name": "onvif",
            "discoveryDetails": "ipAddresses:\n  action: Exclude\n  items: []\ndiscoveryTimeoutSeconds: 1\n",
            "discoveryProperties": [
                {
                    "name": "username",
                    "valueFrom": {
                        "secretKeyRef": {
                            "name": "onvif-auth-secret",
                            "namespace": "default",
                            "key": "username",
                            "optional": False,
                        }
                    },
                }
            ],
        },
        "capacity": 2,
        "brokerSpec": {
            "brokerPodSpec": {
                "containers": [
                    {
                        "name": "akri-onvif-video-broker",
                        "image": "ghcr.io/project-akri/akri/onvif-video-broker:latest",
                        "resources": {
                            "requests": {"{{PLACEHOLDER}}": "1", "memory": "98Mi", "cpu": "134m"},
                            "limits": {"{{PLACEHOLDER}}": "1", "memory": "400Mi", "cpu": "2800m"},
                        },
                    }
                ]
            }
        },
        "instanceServiceSpec": {
            "type": "ClusterIP",
            "ports": [{"name": "grpc", "port": 80, "protocol": "TCP", "targetPort": 8083}],
        },
        "configurationServiceSpec": {
            "type": "ClusterIP",
            "ports": [{"name": "grpc", "port": 80, "protocol": "TCP", "targetPort": 8083}],
        },
        "brokerProperties": {"RESOLUTION_WIDTH": "1280", "RESOLUTION_HEIGHT": "720"},
    },
}

# The Instance Akri's agent writes for one shared camera seen by two nodes, one slot held at each level.
AKRI_INSTANCE: dict[str, Any] = {
    "apiVersion": "akri.sh/v0",
    "kind": "Instance",
    "metadata": {
        "name": "akri-onvif-8120fe",
        "namespace": "default",
        "labels": {"akri.sh/configuration": "akri-onvif"},
        "ownerReferences": [
            {
                "apiVersion": "akri.sh/v0",
                "kind": "Configuration",
                "name": "akri-onvif",
                "uid": "a3c1b1a4-4d5e-4f7a-9a0b-1c2d3e4f5a6b",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "resourceVersion": "4711",
        "uid": "0f9e8d7c-6b5a-4f3e-8d2c-1b0a9f8e7d6c",
        "generation": 1,
        "creationTimestamp": "2024-05-01T12:00:00Z",
    },
    "spec": {
        "configurationName": "akri-onvif",
        "capacity": 2,
        "shared": True,
        "nodes": ["node-a", "node-b"],
        "deviceUsage": {"akri-onvif-8120fe-0": "node-a", "akri-onvif-8120fe-1": "C:0:node-b"},
        "brokerProperties": {
            "ONVIF_DEVICE_SERVICE_URL": "http://10.0.0.21:1000/onvif/device_service",
            "ONVIF_DEVICE_IP_ADDRESS": "10.0.0.21",
            "ONVIF_DEVICE_MAC_ADDRESS": "00:11:22:33:44:55",
            "RESOLUTION_WIDTH": "1280",
            "RESOLUTION_HEIGHT": "720",
        },
        "cdiName": "akri.sh/akri-onvif=8120fe",
    },
}


def test_akri_configuration_loads_unchanged_apart_from_the_unique_devices_default() -> None:
    expected = copy.deepcopy(AKRI_CONFIGURATION)
    expected["spec"]["uniqueDevices"] = True  # devplace's addition (seed 000); Akri's CL uniqueness is structural
    assert normalize(copy.deepcopy(AKRI_CONFIGURATION)) == expected


def test_akri_instance_loads_unchanged_apart_from_devplace_only_defaults() -> None:
    wire = normalize(copy.deepcopy(AKRI_INSTANCE))
    assert {k: v for k, v in wire.items() if k != "spec"} == {k: v for k, v in AKRI_INSTANCE.items() if k != "spec"}
    assert {k: v for k, v in wire["spec"].items() if k in AKRI_INSTANCE["spec"]} == AKRI_INSTANCE["spec"]
    added = {k: v for k, v in wire["spec"].items() if k not in AKRI_INSTANCE["spec"]}
    assert added in ({}, {"attributes": {}})  # devplace's typed selector metadata, empty for an Akri Instance


def test_akri_and_devplace_api_versions_are_one_kind() -> None:
    ours = copy.deepcopy(AKRI_CONFIGURATION)
    ours["apiVersion"] = "devplace.io/v1alpha1"
    assert normalize(ours)["apiVersion"] == "devplace.io/v1alpha1"
    assert lookup("Configuration").group_versions == ("devplace.io/v1alpha1", "akri.sh/v0")
    assert lookup("Configuration").preferred_api_version == "devplace.io/v1alpha1"


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("Instance", Instance),
        ("instances", Instance),
        ("instance", Instance),
        ("Configuration", Configuration),
        ("resourceclasses", ResourceClass),
        ("resourceclass", ResourceClass),
        ("Pod", Pod),
        ("pods", Pod),
        ("NODES", Node),
    ],
)
def test_lookup_accepts_kind_plural_or_lowercase_kind(name: str, model: type) -> None:
    assert lookup(name).model is model


def test_lookup_of_an_unknown_kind_names_the_kind_field_and_lists_known_kinds() -> None:
    with pytest.raises(errors.Invalid) as caught:
        lookup("Gadget")
    (field,) = caught.value.fields
    assert field.path == "kind"
    assert "unknown kind 'Gadget'" in field.reason
    assert "Instance" in field.reason


def test_lookup_plural_of_an_unknown_resource_is_not_found() -> None:
    assert lookup_plural("instances").kind == "Instance"
    with pytest.raises(errors.NotFound):
        lookup_plural("gadgets")
    with pytest.raises(errors.NotFound):
        lookup_plural("Instance")


def test_scopes_follow_the_design() -> None:
    for kind in ("Configuration", "Instance", "Pod", "Service", "ConfigMap", "Job", "Deployment"):
        assert lookup(kind).namespaced, kind
    for kind in ("Node", "ResourceClass"):
        assert not lookup(kind).namespaced, kind


def _pod(**meta: Any) -> dict[str, Any]:
    spec = {"containers": [{"name": "web", "image": "nginx"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", **meta}, "spec": spec}


def test_normalize_defaults_the_namespace_of_namespaced_kinds() -> None:
    assert normalize(_pod())["metadata"]["namespace"] == DEFAULT_NAMESPACE == "default"
    assert normalize(_pod(namespace=""))["metadata"]["namespace"] == "default"
    assert normalize(_pod(namespace="edge"))["metadata"]["namespace"] == "edge"


def test_normalize_drops_empty_metadata_collections() -> None:
    meta = normalize(_pod(labels={}, annotations={}, ownerReferences=[], finalizers=[]))["metadata"]
    assert meta == {"name": "web-0", "namespace": "default"}


def test_normalize_refuses_a_namespace_on_a_cluster_scoped_kind() -> None:
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "namespace": "default"}}
    with pytest.raises(errors.Invalid) as caught:
        normalize(node)
    (field,) = caught.value.fields
    assert field.path == "metadata.namespace"
    assert "Node is cluster-scoped" in field.reason
    node["metadata"].pop("namespace")
    assert "namespace" not in normalize(node)["metadata"]


@pytest.mark.parametrize(
    ("obj", "path", "why"),
    [
        ({**_pod(), "apiVersion": "v2"}, "apiVersion", "Pod is served as v1, not 'v2'"),
        ({**_pod(), "apiVersion": "akri.sh/v0"}, "apiVersion", "not 'akri.sh/v0'"),
        ({**AKRI_CONFIGURATION, "apiVersion": "akri.sh/v1"}, "apiVersion", "devplace.io/v1alpha1, akri.sh/v0"),
        ({k: v for k, v in _pod().items() if k != "apiVersion"}, "apiVersion", "required"),
        ({**_pod(), "apiVersion": ""}, "apiVersion", "required"),
        ({**_pod(), "kind": "Pud"}, "kind", "unknown kind 'Pud'"),
        ({**_pod(), "kind": "pods"}, "kind", "unknown kind 'pods'"),
        ({k: v for k, v in _pod().items() if k != "kind"}, "kind", "required"),
        ({**_pod(), "kind": 3}, "kind", "required"),
        (_pod(name="Web_0"), "metadata.name", "lower case alphanumeric"),
        (_pod(namespace="Edge"), "metadata.namespace", "lower case alphanumeric"),
    ],
)
def test_normalize_refuses_with_the_field_named(obj: dict[str, Any], path: str, why: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        normalize(obj)
    paths = {f.path: f.reason for f in caught.value.fields}
    assert path in paths
    assert why in paths[path]


@pytest.mark.parametrize("obj", [[1], "Pod", None, 3])
def test_normalize_refuses_a_non_mapping(obj: Any) -> None:
    with pytest.raises(errors.Invalid, match="must be a mapping"):
        normalize(obj)


def test_normalize_does_not_change_its_input_on_refusal() -> None:
    obj = _pod(name="Bad")
    before = copy.deepcopy(obj)
    with pytest.raises(errors.Invalid):
        normalize(obj)
    assert obj == before


@pytest.mark.parametrize(
    ("spec", "path", "why"),
    [
        ({"discoveryHandler": {"name": "udev"}, "capacity": 0}, "spec.capacity", "greater than or equal to 1"),
        ({"discoveryHandler": {"name": ""}}, "spec.discoveryHandler.name", "at least 1 character"),
        ({}, "spec.discoveryHandler", "Field required"),
        (
            {"discoveryHandler": {"name": "udev"}, "brokerSpec": {"brokerPodSpec": {}, "brokerJobSpec": {}}},
            "spec.brokerSpec",
            "exactly one of brokerPodSpec or brokerJobSpec",
        ),
        ({"discoveryHandler": {"name": "udev"}, "brokerSpec": {}}, "spec.brokerSpec", "exactly one"),
    ],
)
def test_bad_configuration_is_refused_with_the_field(spec: dict[str, Any], path: str, why: str) -> None:
    obj = {"apiVersion": "akri.sh/v0", "kind": "Configuration", "metadata": {"name": "c"}, "spec": spec}
    with pytest.raises(errors.Invalid) as caught:
        normalize(obj)
    paths = {f.path: f.reason for f in caught.value.fields}
    assert path in paths
    assert why in paths[path]


def _resource_class(*exprs: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "nvidia.high.mem"}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": meta,
        "spec": {"resourceSelector": [{"matchExpressions": list(exprs)}]},
    }


def test_seed_resource_class_is_accepted_and_cluster_scoped() -> None:
    obj = _resource_class(
        {"key": "Kind", "operator": "In", "values": ["nvidia-gpu"]},
        {"key": "memory", "operator": "GtEq", "values": ["30G"]},
    )
    wire = normalize(obj)
    assert "namespace" not in wire["metadata"]
    assert wire["spec"] == obj["spec"]


@pytest.mark.parametrize(
    ("expr", "why"),
    [
        ({"key": "memory", "operator": "GtEq", "values": ["lots"]}, "'lots' is none of these"),
        ({"key": "memory", "operator": "Gt", "values": ["1", "2"]}, "Gt needs exactly one value, got 2"),
        ({"key": "Kind", "operator": "In", "values": []}, "In needs at least one value"),
        ({"key": "Kind", "operator": "Exists", "values": ["x"]}, "Exists takes no values"),
        ({"key": "memory", "operator": "Bigger", "values": ["1"]}, "'In', 'NotIn', 'Eq'"),
    ],
)
def test_resource_class_with_a_bad_selector_is_refused(expr: dict[str, Any], why: str) -> None:
    ok = {"key": "Kind", "operator": "Exists"}
    with pytest.raises(errors.Invalid) as caught:
        normalize(_resource_class(ok, expr))
    assert "resourceSelector[0].matchExpressions[1]" in str(caught.value)
    assert why in str(caught.value)
    assert all(f.path.startswith("spec") for f in caught.value.fields)


def test_resource_class_with_a_namespace_is_refused() -> None:
    with pytest.raises(errors.Invalid) as caught:
        normalize(_resource_class({"key": "Kind", "operator": "Exists"}, namespace="default"))
    assert caught.value.fields[0].path == "metadata.namespace"


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        (
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"akri.sh/cam": "1K"}}}]},
            },
            "spec.containers[0].resources.limits.akri.sh/cam",
        ),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "d"},
                "spec": {
                    "template": {
                        "spec": {
                            "initContainers": [{"name": "i", "resources": {"requests": {"memory": "2ki"}}}],
                        }
                    }
                },
            },
            "spec.template.spec.initContainers[0].resources.requests.memory",
        ),
        (
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {"capacity": {"cpu": "NaN"}}},
            "status.capacity.cpu",
        ),
    ],
)
def test_a_malformed_quantity_in_a_workload_is_refused_naming_its_full_path(obj: dict, path: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        normalize(obj)
    assert [f.path for f in info.value.fields] == [path]


def test_well_formed_quantities_in_a_pod_are_accepted_and_kept_as_written() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1.5Gi"}}}]},
    }
    assert normalize(pod)["spec"] == pod["spec"]


def configuration_named(name: str, capacity: int) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": name},
        "spec": {"discoveryHandler": {"name": "debugEcho"}, "capacity": capacity},
    }


def test_a_configuration_whose_slot_ids_would_pass_the_kubelets_limit_is_refused_naming_the_name() -> None:
    name = "c" * 52  # c...c-<6 hex>-<index>: 52 + 7 + 2 = 61 with capacity 10, 62 with 100, 63 with 1000
    assert normalize(configuration_named(name, 1000))["metadata"]["name"] == name
    with pytest.raises(errors.Invalid) as info:
        normalize(configuration_named(name + "c", 1000))
    assert [f.path for f in info.value.fields] == ["metadata.name"]
    assert "64 characters" in info.value.message
    assert "at most 52 characters with capacity 1000" in info.value.message


def test_the_kind_table_says_of_each_kind_what_its_model_says() -> None:
    from devplace.api import _registry as registry

    assert len(registry._BUILTIN) == 22
    for info in registry._BUILTIN:
        model = info.model
        assert model.__module__ == info.module, info.kind
        assert (
            info.kind,
            info.plural,
            info.namespaced,
            info.group_versions,
        ) == (model.KIND, model.PLURAL, model.NAMESPACED, model.GROUP_VERSIONS)


def test_every_model_the_api_defines_is_in_the_kind_table() -> None:
    """A kind added to a model module without its entry would be unknown until that module is imported."""
    import importlib
    import inspect

    from devplace.api import _registry as registry
    from devplace.api._meta import Resource

    tabled = {info.kind for info in registry._BUILTIN}
    for module in ("_clusters", "_devices", "_dra", "_workloads"):
        loaded = importlib.import_module(f"devplace.api.{module}")
        for _, value in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(value, Resource) and value.__module__ == loaded.__name__ and getattr(value, "KIND", None):
                assert value.KIND in tabled, value.KIND


def test_a_kind_is_known_in_a_process_that_never_loaded_its_model() -> None:
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from devplace.api import lookup\n"
        "info = lookup('pods')\n"
        "loaded = ['devplace.api._workloads' in sys.modules, 'pydantic' in sys.modules]\n"
        "print(json.dumps([info.kind, info.namespaced, *loaded]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(done.stdout) == ["Pod", True, False, False]


def test_the_api_faces_lazy_map_is_exactly_its_static_imports() -> None:
    """`_WHERE` (what `from devplace.api import X` loads) and the imports type checkers read name each X in the same
    module, and `__all__` promises exactly those names."""
    import ast
    import inspect

    import devplace.api as face

    tree = ast.parse(inspect.getsource(face))
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    static = {
        alias.asname or alias.name: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert static == face._WHERE
    assert set(face.__all__) == set(static)
