"""Configurations are validated as Kubernetes (and Akri's webhook) would: the PodSpec, JobSpec and ServiceSpecs they
carry as maps are checked against Kubernetes' own schemas at the boundary every write passes, and refused with the
field's full path; the verdict agrees with the kubernetes-validate package's strict schemas."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import kubernetes_validate
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from devplace import errors
from devplace.api import _manifests as manifests
from devplace.api import _podspecs as podspecs
from devplace.api._devices import Configuration
from devplace.api._quantity import is_quantity
from devplace.cli._app import app as cli_app
from devplace.server._app import create_app
from devplace.sim import Fleet
from devplace.store import MemoryStore
from tests.servers import serve_app

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_VERSION = "1.32"  # kubernetes-validate's schemas, as tools/kubernetes_schemas.py copies them

POD_SPEC: dict[str, Any] = {
    "containers": [
        {
            "name": "broker",
            "image": "ghcr.io/example/broker:1.0",
            "command": ["/broker"],
            "args": ["--verbose"],
            "env": [
                {"name": "MODE", "value": "fast"},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "auth", "key": "token", "optional": True}}},
            ],
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "resources": {
                "requests": {"{{PLACEHOLDER}}": "1", "cpu": "10m", "memory": "16Mi"},
                "limits": {"{{PLACEHOLDER}}": "1", "cpu": 1, "memory": "64Mi"},
            },
            "volumeMounts": [{"name": "dev", "mountPath": "/dev/video0", "readOnly": True}],
            "securityContext": {"privileged": True, "runAsUser": 1000},
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "initialDelaySeconds": 5},
        }
    ],
    "volumes": [{"name": "dev", "hostPath": {"path": "/dev/video0", "type": "CharDevice"}}],
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "edge", "operator": "Exists", "effect": "NoSchedule"}],
    "restartPolicy": "Always",
    "imagePullSecrets": [{"name": "regcred"}],
}
"""A broker PodSpec using the parts of PodSpec Akri's published Configurations use."""

SERVICE_SPEC: dict[str, Any] = {
    "type": "ClusterIP",
    "ports": [{"name": "grpc", "port": 8083, "protocol": "TCP", "targetPort": 8083}],
}


def configuration(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "cams"},
        "spec": {"discoveryHandler": {"name": "debugEcho", "discoveryDetails": "descriptions: [a]"}, **spec},
    }


def with_pod_spec(pod_spec: Any) -> dict[str, Any]:
    return configuration(brokerSpec={"brokerPodSpec": pod_spec}, instanceServiceSpec=SERVICE_SPEC)


def refused(obj: dict[str, Any]) -> list[str]:
    """The `path: reason` texts `manifests.validated` refuses `obj` with (it must refuse it)."""
    with pytest.raises(errors.Invalid) as caught:
        manifests.validated(obj)
    return [str(f) for f in caught.value.fields]


# -- the rule, field by field --------------------------------------------------------------------------------------


def test_an_unknown_field_in_a_broker_pod_spec_is_refused_naming_its_full_path():
    pod_spec = copy.deepcopy(POD_SPEC)
    pod_spec["containers"][0]["imagee"] = "nginx"
    assert refused(with_pod_spec(pod_spec)) == ["spec.brokerSpec.brokerPodSpec.containers[0].imagee: unknown field"]


def _job(**extra: Any) -> dict[str, Any]:
    return {"template": {"spec": {**copy.deepcopy(POD_SPEC), "restartPolicy": "Never"}}, "backoffLimit": 4, **extra}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"brokerSpec": {"brokerPodSpec": {"containers": [{"image": "nginx"}]}}},
            "spec.brokerSpec.brokerPodSpec.containers[0].name: Required value (a Container needs name)",
            id="pod spec: a container without a name",
        ),
        pytest.param(
            {"brokerSpec": {"brokerPodSpec": {"hostNetwork": "yes", "containers": [{"name": "b"}]}}},
            "spec.brokerSpec.brokerPodSpec.hostNetwork: must be a boolean, not string 'yes'",
            id="pod spec: a string for a boolean",
        ),
        pytest.param(
            {"brokerSpec": {"brokerPodSpec": {"containers": {"name": "b"}}}},
            "spec.brokerSpec.brokerPodSpec.containers: must be an array, not an object",
            id="pod spec: an object for a list",
        ),
        pytest.param(
            {"brokerSpec": {"brokerPodSpec": {"containers": [{"name": "b", "resources": {"limits": {"cpu": "1x"}}}]}}},
            "spec.brokerSpec.brokerPodSpec.containers[0].resources.limits.cpu: '1x' is not a quantity "
            "(e.g. 500m, 2, 1.5Gi: Kubernetes' grammar)",
            id="pod spec: a quantity Kubernetes cannot parse",
        ),
        pytest.param(
            {"brokerSpec": {"brokerPodSpec": {"containers": [{"name": "b", "ports": [{"containerPort": 2**31}]}]}}},
            "spec.brokerSpec.brokerPodSpec.containers[0].ports[0].containerPort: 2147483648 is out of range for int32 "
            "(-2147483648 to 2147483647)",
            id="pod spec: an int32 out of range",
        ),
        pytest.param(
            {"brokerSpec": {"brokerJobSpec": {"backoffLimit": 4}}},
            "spec.brokerSpec.brokerJobSpec.template: Required value (a JobSpec needs template)",
            id="job spec: no template",
        ),
        pytest.param(
            {"brokerSpec": {"brokerJobSpec": _job(parallelism="2")}},
            "spec.brokerSpec.brokerJobSpec.parallelism: must be an integer, not string '2'",
            id="job spec: a string for an integer",
        ),
        pytest.param(
            {"brokerSpec": {"brokerJobSpec": _job(templatee={})}},
            "spec.brokerSpec.brokerJobSpec.templatee: unknown field",
            id="job spec: unknown field",
        ),
        pytest.param(
            {"instanceServiceSpec": {"ports": [{"name": "http", "protocoll": "TCP", "port": 80}]}},
            "spec.instanceServiceSpec.ports[0].protocoll: unknown field",
            id="instance service: unknown field",
        ),
        pytest.param(
            {"instanceServiceSpec": {"ports": [{"name": "http", "targetPort": 80}]}},
            "spec.instanceServiceSpec.ports[0].port: Required value (a ServicePort needs port)",
            id="instance service: a port without its port",
        ),
        pytest.param(
            {"configurationServiceSpec": {"ports": [{"port": 80, "targetPort": 8.5}]}},
            "spec.configurationServiceSpec.ports[0].targetPort: must be an integer or a string, not number 8.5",
            id="configuration service: a float for an IntOrString",
        ),
        pytest.param(
            {"configurationServiceSpec": {"type": 1, "selector": {"app": True}}},
            "spec.configurationServiceSpec.type: must be a string, not number 1",
            id="configuration service: a number for a string",
        ),
    ],
)
def test_each_kubernetes_typed_field_is_checked_against_kubernetes_schema(spec, expected):
    assert refused(configuration(**spec))[0] == expected


def test_every_problem_is_reported_at_once_and_nothing_of_a_refused_object_is_half_accepted():
    pod_spec = {"containers": [{"imagee": "x", "ports": [{"containerPort": "80"}]}], "hostPID": 1}
    found = refused(with_pod_spec(pod_spec))
    assert found == [
        "spec.brokerSpec.brokerPodSpec.containers[0].imagee: unknown field",
        "spec.brokerSpec.brokerPodSpec.containers[0].ports[0].containerPort: must be an integer, not string '80'",
        "spec.brokerSpec.brokerPodSpec.containers[0].name: Required value (a Container needs name)",
        "spec.brokerSpec.brokerPodSpec.hostPID: must be a boolean, not number 1",
    ]


def test_akri_shaped_specs_with_placeholder_resources_quantities_and_int_or_strings_are_accepted():
    obj = configuration(
        brokerSpec={"brokerPodSpec": POD_SPEC},
        instanceServiceSpec=SERVICE_SPEC,
        configurationServiceSpec={**SERVICE_SPEC, "ports": [{"port": 80, "targetPort": "grpc"}]},
    )
    assert podspecs.problems(obj) == []
    assert manifests.validated(obj)["spec"] == obj["spec"]  # kept as written
    assert podspecs.problems(configuration(brokerSpec={"brokerJobSpec": _job(completions=1)})) == []


def test_a_null_field_is_absent_as_kubernetes_reads_it():
    pod_spec = {"containers": [{"name": "b", "image": None, "ports": None}], "nodeSelector": None}
    assert podspecs.problems(with_pod_spec(pod_spec)) == []
    assert "containers[0].name: Required value" in refused(with_pod_spec({"containers": [{"name": None}]}))[0]


def test_the_typed_fields_are_found_from_the_models_and_the_openapi_table():
    assert podspecs.typed_fields("Configuration") == (
        (("spec", "brokerSpec", "brokerPodSpec"), "io.k8s.api.core.v1.PodSpec"),
        (("spec", "brokerSpec", "brokerJobSpec"), "io.k8s.api.batch.v1.JobSpec"),
        (("spec", "instanceServiceSpec"), "io.k8s.api.core.v1.ServiceSpec"),
        (("spec", "configurationServiceSpec"), "io.k8s.api.core.v1.ServiceSpec"),
    )
    for kind in ("Instance", "ResourceClass", "Pod", "Deployment", "App", "NoSuchKind"):
        assert podspecs.typed_fields(kind) == ()
    assert podspecs.problems({"kind": "Pod", "spec": {"containers": "x"}}) == []  # built-in kinds: as stored
    assert podspecs.problems("not an object") == []


def test_stored_configurations_are_still_read_leniently():
    """Only writes are checked: an agent or controller reading what an older version stored (or what kubectl wrote to a
    cluster's CRD) still parses it."""
    stored = with_pod_spec({"containers": [{"imagee": "x"}]})
    assert Configuration.from_obj(stored).spec.broker_spec is not None


# -- every example and sample stays valid ------------------------------------------------------------------------


def _examples() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted((ROOT / "examples").rglob("*.y*ml")):
        for doc in manifests.parse_documents(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "Configuration":
                yield f"{path.relative_to(ROOT)}:{doc['metadata']['name']}", doc


@pytest.mark.parametrize(("where", "doc"), list(_examples()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_example_configuration_passes(where, doc):
    assert podspecs.problems(doc) == [], where
    manifests.validated(doc)


# -- the same verdict as Kubernetes' schemas ----------------------------------------------------------------------


def kubernetes_accepts(pod_spec: Any) -> bool:
    """Kubernetes' verdict: its schemas (kubernetes-validate, strict), and the quantity grammar its decoder applies to
    a Quantity string (the JSON schemas say only "string" there)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod_spec}
    try:
        kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError:
        return False
    return all(is_quantity(amount) for amount in _resource_amounts(pod_spec) if isinstance(amount, str))


def _resource_amounts(pod_spec: dict[str, Any]) -> Iterator[Any]:
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") if isinstance(container, dict) else None
        for amounts in (resources or {}).values() if isinstance(resources, dict) else ():
            if isinstance(amounts, dict):
                yield from amounts.values()


def _paths(node: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*at, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*at, i))


_PATHS = list(_paths(POD_SPEC))
_REPLACEMENTS = [7, "7", True, 1.5, {}, [], {"name": "n"}, "Always"]


def _mutated(spec: dict[str, Any], path: tuple[Any, ...], how: str, replacement: Any) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    if not path:
        out["bogusField"] = replacement
        return out
    parent: Any = out
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "replace":
        parent[last] = replacement
    elif how == "delete" and isinstance(parent, dict):
        del parent[last]
    elif isinstance(parent[last], dict):
        parent[last]["bogusField"] = replacement
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.sampled_from(_PATHS),
    how=st.sampled_from(["replace", "delete", "add"]),
    replacement=st.sampled_from(_REPLACEMENTS),
)
def test_the_verdict_on_a_mutated_pod_spec_is_kubernetes_own(path, how, replacement):
    pod_spec = _mutated(POD_SPEC, path, how, replacement)
    found = podspecs.problems(with_pod_spec(pod_spec))
    assert (found == []) == kubernetes_accepts(pod_spec), found
    assert all(f.path.startswith("spec.brokerSpec.brokerPodSpec") for f in found)


def test_the_base_pod_spec_is_valid_kubernetes():
    assert kubernetes_accepts(POD_SPEC)


# -- the boundary everywhere: server, devplace apply, Fleet.apply ------------------------------------------------


BAD = with_pod_spec({"containers": [{"name": "b", "imagee": "nginx"}]})
BAD_PATH = "spec.brokerSpec.brokerPodSpec.containers[0].imagee"


async def test_the_api_server_refuses_it_with_422_and_the_field_path(clock):
    store = MemoryStore(clock=clock)
    async with serve_app(create_app(store, clock=clock)) as base, httpx2.AsyncClient(base_url=base) as client:
        response = await client.post("/apis/akri.sh/v0/namespaces/default/configurations", json=BAD)
    assert response.status_code == 422
    body = response.json()
    assert body["reason"] == "Invalid"
    assert {"field": BAD_PATH, "message": "unknown field"}.items() <= body["details"]["causes"][0].items()
    assert (await store.list("Configuration", "")).items == []
    await store.close()


def test_devplace_apply_refuses_it_naming_the_field(tmp_path):
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(yaml.safe_dump(BAD))
    result = CliRunner().invoke(cli_app, ["--store", f"sqlite:///{tmp_path}/s.db", "apply", "-f", str(manifest)])
    assert result.exit_code != 0
    assert f"{BAD_PATH}: unknown field" in result.output


async def test_fleet_apply_refuses_it_and_stores_nothing():
    async with Fleet(scheduler=False, controller=False) as fleet:
        with pytest.raises(errors.Invalid, match=BAD_PATH.replace("[", r"\[").replace("]", r"\]")):
            await fleet.apply(BAD)
        assert (await fleet.store.list("Configuration", "")).items == []
