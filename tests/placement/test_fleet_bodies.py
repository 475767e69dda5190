"""EMCO bodies and fleet kinds (devplace.api.fleet; tested here because tests/api belongs to another part)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.api import fleet, names, registry
from devplace.api.quantity import Quantity


def req(**spec: Any) -> fleet.HpaRequirementBody:
    return fleet.HpaRequirementBody.parse({"metadata": {"name": "r"}, "spec": spec})


@pytest.mark.parametrize(
    ("spec", "requests", "limits"),
    [
        ({"name": "cpu", "requests": 4, "limits": 4}, "4", "4"),
        ({"name": "cpu", "requests": 500, "units": "m"}, "500m", None),
        ({"name": "cpu", "requests": "1.5"}, "1500m", None),
        ({"name": "memory", "requests": 1000, "limits": 1000, "units": "MB"}, "1G", "1G"),
        ({"name": "memory", "requests": 200}, "200M", None),  # MB by default (seed 004)
        ({"name": "memory", "requests": 2, "units": "GiB"}, "2Gi", None),
        ({"name": "memory", "requests": "1.5Gi"}, "1536Mi", None),
        ({"name": "nvidia.com/gpu", "limits": 1}, None, "1"),
        ({"name": "intel.com/qat", "requests": 1, "limits": 1}, "1", "1"),
        ({"name": "hugepages-2Mi", "requests": 4, "limits": 4, "units": "Mi"}, "4Mi", "4Mi"),
    ],
)
def test_amounts_become_exact_quantities(spec: dict[str, Any], requests: str | None, limits: str | None) -> None:
    got = fleet.requirement_quantities(req(**spec).need)
    assert got == (None if requests is None else Quantity(requests), None if limits is None else Quantity(limits))


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({"name": "cpu", "requests": 4, "limits": 2}, "spec.requests", "requests 4 exceed limits 2"),
        ({"name": "cpu"}, "spec.requests", "requests or limits is required"),
        ({"name": "cpu", "requests": 0}, "spec.requests", "must be positive"),
        ({"name": "cpu", "requests": "1K"}, "spec.requests", "unknown suffix 'K'"),
        ({"name": "cpu", "requests": 1, "units": "MB"}, "spec.units", "unknown unit 'MB' for cpu"),
        ({"name": "memory", "requests": 1, "units": "parsecs"}, "spec.units", "unknown unit 'parsecs'"),
        ({"name": "memory", "requests": "1Gi", "units": "MB"}, "spec.units", "already carries its unit"),
        ({"name": "nvidia.com/gpu", "requests": 1, "units": "MB"}, "spec.units", "counted in whole units"),
        ({"name": "intel.com/qat", "requests": 1, "limits": 2}, "spec.limits", "cannot be overcommitted"),
        ({"name": "cpu", "requests": 1, "value": "x"}, "spec.value", "forbidden for an allocatable resource"),
        ({"name": "turbo", "allocatable": False}, "spec.value", "required for a non-allocatable resource"),
        ({"name": "turbo", "allocatable": False, "value": "on", "units": "MB"}, "spec.units", "forbidden"),
        ({"name": "turbo", "value": "not ok!"}, "spec.value", "must be at most 63 characters"),
        ({"name": "Bad Name", "requests": 1}, "spec.name", "name part must be"),
    ],
)
def test_requirement_rules_name_the_field(spec: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        req(**spec)
    assert info.value.fields[0].path == field
    assert reason in info.value.fields[0].reason


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"metadata": {"name": "r"}, "spec": {"name": "cpu", "requests": 1, "weight": 11}}, "spec.weight"),
        ({"metadata": {"name": "r"}, "spec": {"name": "cpu", "requests": 1, "weight": 0}}, "spec.weight"),
        ({"metadata": {"name": "r"}, "spec": {"name": "cpu", "requests": True}}, "spec.requests"),
        ({"metadata": {"name": "r"}, "spec": {"name": "cpu", "requests": 1.5}}, "spec.requests"),
        ({"metadata": {"name": "r"}, "spec": {"name": "cpu", "requests": 1, "limit": 2}}, "spec.limit"),
        ({"metadata": {"name": "-r"}, "spec": {"name": "cpu", "requests": 1}}, "metadata.name"),
        ({"metadata": {"name": "r" * 129}, "spec": {"name": "cpu", "requests": 1}}, "metadata.name"),
        (
            {"metadata": {"name": "r", "description": "d" * 1025}, "spec": {"name": "cpu", "requests": 1}},
            "metadata.description",
        ),
        (
            {"metadata": {"name": "r", "userData1": "u" * 513}, "spec": {"name": "cpu", "requests": 1}},
            "metadata.userData1",
        ),
    ],
)
def test_schema_violations_name_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        fleet.HpaRequirementBody.parse(body)
    assert info.value.fields[0].path == field


@pytest.mark.parametrize("name", ["core-fwall-RAM-needs", "a", "A_b.c-9", "x" * 128])
def test_emco_names_allow_uppercase_and_underscores(name: str) -> None:
    assert fleet.emco_name_problem(name) is None


@pytest.mark.parametrize("name", ["", "-a", "a-", "a b", "a/b", "x" * 129, "é"])
def test_emco_names_refuse_the_rest(name: str) -> None:
    assert fleet.emco_name_problem(name) is not None


def test_consumer_bodies_follow_the_seed() -> None:
    body = fleet.HpaConsumerBody.parse(
        {
            "metadata": {"name": "core-fwall"},
            "spec": {
                "consumer": {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": "core-fwall",
                    "container-name": "fw",
                }
            },
        }
    )
    assert body.workload == fleet.Workload("apps/v1", "StatefulSet", "core-fwall", "fw", None)
    with pytest.raises(errors.Invalid, match="a DaemonSet has no replica count"):
        fleet.HpaConsumerBody.parse(
            {
                "metadata": {"name": "d"},
                "spec": {"consumer": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d"}, "replicas": 2},
            }
        )


def test_intents_accept_app_or_app_name() -> None:
    for key in ("app", "appName", "app-name"):
        assert fleet.HpaIntentBody.parse({"metadata": {"name": "i"}, "spec": {key: "fwall"}}).spec.app == "fwall"


def test_app_manifests_come_as_objects_or_yaml_text() -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: b}\n"
    )
    body = fleet.AppBody.parse({"metadata": {"name": "app"}, "spec": {"manifests": text}})
    assert [m["kind"] for m in body.spec.manifests] == ["ConfigMap", "Service"]
    with pytest.raises(errors.Invalid, match="document 2: duplicate ConfigMap 'a'"):
        fleet.AppBody.parse(
            {
                "metadata": {"name": "app"},
                "spec": {"manifests": text.replace("Service", "ConfigMap").replace("name: b", "name: a")},
            }
        )
    with pytest.raises(errors.Invalid, match=r"document 1: metadata\.name: required"):
        fleet.AppBody.parse({"metadata": {"name": "app"}, "spec": {"manifests": [{"apiVersion": "v1", "kind": "Pod"}]}})


def test_cluster_bodies() -> None:
    body = fleet.ClusterBody.parse(
        {
            "metadata": {"name": "c1", "labels": ["edge"]},
            "spec": {"nodes": [{"name": "n", "allocatable": {"cpu": "8", "memory": 1024}}]},
        }
    )
    assert body.metadata.labels == {"edge": ""}
    for bad, field in [
        ({"nodes": [{"name": "n", "allocatable": {"cpu": "1K"}}]}, "spec.nodes[0].allocatable"),
        ({"nodes": [{"name": "n", "allocatable": {"cpu": "-1"}}]}, "spec.nodes[0].allocatable"),
        ({"nodes": [{"name": "N", "allocatable": {}}]}, "spec.nodes[0].name"),
        ({"nodes": [{"name": "n"}, {"name": "n"}]}, "spec.nodes[1].name"),
        ({"endpoint": "ftp://x"}, "spec.endpoint"),
    ]:
        with pytest.raises(errors.Invalid) as info:
            fleet.ClusterBody.parse({"metadata": {"name": "c1"}, "spec": bad})
        assert info.value.fields[0].path == field


def test_selectors_need_exactly_one_target() -> None:
    base = {"metadata": {"name": "ai"}, "spec": {"app": "web", "intent": {}}}
    with pytest.raises(errors.Invalid, match="allOf or anyOf must list"):
        fleet.GenericAppIntentBody.parse(base)
    both = {"clusterProvider": "p", "cluster": "c", "clusterLabel": "l"}
    with pytest.raises(errors.Invalid, match="exactly one of cluster and clusterLabel"):
        fleet.GenericAppIntentBody.parse({**base, "spec": {"app": "web", "intent": {"allOf": [both]}}})
    old = {"provider-name": "p", "cluster-name": "c"}  # EMCO 21.03 spelling
    body = fleet.GenericAppIntentBody.parse({**base, "spec": {"app-name": "web", "intent": {"anyOf": [old]}}})
    assert body.spec.intent.any_of[0].cluster == "c"


def test_fleet_kinds_are_registered_cluster_scoped() -> None:
    for level in fleet.LEVELS:
        info = registry.lookup(level.kind)
        assert not info.namespaced
        assert info.group_versions == (fleet.API_VERSION,)


def test_a_stored_object_is_validated_by_the_registry() -> None:
    level = fleet.PROJECT
    obj = {
        "apiVersion": fleet.API_VERSION,
        "kind": "Project",
        "metadata": {"name": level.store_name(("p",))},
        "spec": {"path": ["p"], "emco": {"metadata": {"name": "p"}}},
    }
    assert registry.normalize(obj)["spec"]["emco"] == {"metadata": {"name": "p"}}
    with pytest.raises(errors.Invalid, match=r"spec\.path must have 1 segments"):
        registry.normalize({**obj, "spec": {"path": [], "emco": {"metadata": {"name": "p"}}}})
    with pytest.raises(errors.Invalid, match=r"metadata\.name"):
        registry.normalize({**obj, "spec": {"path": ["p"], "emco": {"metadata": {"name": "-"}}}})


@given(st.lists(st.text(min_size=1, max_size=40), min_size=7, max_size=7))
def test_store_names_are_valid_and_distinct_per_path(path: list[str]) -> None:
    name = fleet.HPA_REQUIREMENT.store_name(tuple(path))
    assert names.dns1123_label_problem(name) is None
    other = fleet.HPA_REQUIREMENT.store_name((*path[:-1], path[-1] + "x"))
    assert other != name
    assert fleet.HPA_INTENT.store_name(tuple(path[:5])) != fleet.HPA_CONSUMER.store_name((*path[:5], ""))


# -- dialects: every accepted spelling means the same thing ----------------------------------------------------------

SEED = "seed"
EMCO21 = "21.x"
EMCO22 = "22.x"

CONSUMERS: list[tuple[str, dict[str, Any], fleet.Workload]] = [
    (
        SEED,
        {"consumer": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api-server", "container-name": "nginx"}},
        fleet.Workload("apps/v1", "Deployment", "api-server", "nginx", None),
    ),
    (
        SEED,
        {
            "consumer": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "containerName": "pg"},
            "replicas": 3,
        },
        fleet.Workload("apps/v1", "StatefulSet", "db", "pg", 3),
    ),
    (
        EMCO21,
        {"api-version": "v19", "kind": "Deployment", "replicas": 2, "name": "r1-http-client", "container-name": "c"},
        fleet.Workload("v19", "Deployment", "r1-http-client", "c", 2),
    ),
    (
        EMCO22,
        {"apiVersion": "1.19", "kind": "Deployment", "name": "HttpClient", "container": "HttpClientContainer"},
        fleet.Workload("1.19", "Deployment", "HttpClient", "HttpClientContainer", None),
    ),
    (EMCO22, {"name": "labels-only"}, fleet.Workload("apps/v1", "Deployment", "labels-only", None, None)),
    (EMCO22, {"kind": "Job", "name": "batch"}, fleet.Workload("batch/v1", "Job", "batch", None, None)),
]


@pytest.mark.parametrize(
    ("dialect", "spec", "workload"), CONSUMERS, ids=[f"{d}-{i}" for i, (d, _, _) in enumerate(CONSUMERS)]
)
def test_every_consumer_spelling_names_the_same_workload(
    dialect: str, spec: dict[str, Any], workload: fleet.Workload
) -> None:
    body = fleet.HpaConsumerBody.parse({"metadata": {"name": "c"}, "spec": spec})
    assert isinstance(body, fleet.SeedConsumerBody if dialect == SEED else fleet.FlatConsumerBody)
    assert body.workload == workload


def test_emco_workload_names_map_to_kubernetes_names_deterministically() -> None:
    body = fleet.HpaConsumerBody.parse(
        {"metadata": {"name": "c"}, "spec": {"apiVersion": "v19", "name": "HttpClient", "container": "Http_Client"}}
    )
    assert (body.workload.object_name, body.workload.container_name) == ("httpclient", "http-client")
    assert fleet.kube_name("r1-http-client") == "r1-http-client"  # a Kubernetes name stays as it is
    assert fleet.kube_name("a.b-c") == "a.b-c"
    assert fleet.kube_name("a.b", label=True) == "a-b"  # a container name is a DNS label: no dots


@given(st.text(min_size=1, max_size=80))
def test_kube_names_are_valid_or_empty_and_stable(name: str) -> None:
    derived = fleet.kube_name(name)
    assert derived == "" or names.dns1123_subdomain_problem(derived) is None
    assert fleet.kube_name(derived) == derived
    label = fleet.kube_name(name, label=True)
    assert label == "" or names.dns1123_label_problem(label) is None


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"apiVersion": "v1", "kind": "Service", "name": "s"}, "spec.kind"),
        ({"apiVersion": "v1", "kind": "Deployment"}, "spec.name"),
        ({"apiVersion": "v1", "kind": "Deployment", "name": "___"}, "spec.name"),
        ({"apiVersion": "v1", "kind": "Deployment", "name": "d", "container": ""}, "spec.container"),
        ({"apiVersion": "", "kind": "Deployment", "name": "d"}, "spec.apiVersion"),
        ({"kind": "DaemonSet", "name": "d", "replicas": 2}, "spec.replicas"),
        ({"name": "d", "replicas": 0}, "spec.replicas"),
        ({"name": "d", "containers": "x"}, "spec.containers"),
        ({"consumer": {"kind": "Deployment", "name": "d"}}, "spec.consumer.apiVersion"),
    ],
)
def test_consumer_errors_name_the_field_as_the_client_spelled_it(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        fleet.HpaConsumerBody.parse({"metadata": {"name": "c"}, "spec": spec})
    assert info.value.fields[0].path == field


REQUIREMENTS: list[tuple[str, dict[str, Any], fleet.Need]] = [
    (
        SEED,
        {"mandatory": True, "allocatable": True, "name": "cpu", "requests": 4, "limits": 4},
        fleet.Need("cpu", True, None, True, 4, 4),
    ),
    (
        SEED,
        {"mandatory": False, "weight": 9, "allocatable": True, "name": "nvidia.com/gpu", "limits": 1},
        fleet.Need("nvidia.com/gpu", False, 9, True, None, 1),
    ),
    (SEED, {"name": "turbo", "value": "on"}, fleet.Need("turbo", True, None, False, value="on")),
    (
        EMCO22,
        {
            "allocatable": True,
            "mandatory": True,
            "weight": 1,
            "resource": {"name": "cpu", "requests": 10, "limits": 10},
        },
        fleet.Need("cpu", True, 1, True, 10, 10, prefix="spec.resource"),
    ),
    (
        EMCO21,
        {"allocatable": True, "resource": {"name": "memory", "requests": 1000, "units": "MB"}},
        fleet.Need("memory", True, None, True, 1000, None, "MB", prefix="spec.resource"),
    ),
    (
        EMCO21,
        {
            "allocatable": False,
            "mandatory": True,
            "weight": 1,
            "resource": {"key": "feature.node.kubernetes.io/intel_qat", "value": "true"},
        },
        fleet.Need(
            "feature.node.kubernetes.io/intel_qat",
            True,
            1,
            False,
            value="true",
            prefix="spec.resource",
            name_field="key",
        ),
    ),
]


@pytest.mark.parametrize(
    ("dialect", "spec", "need"), REQUIREMENTS, ids=[f"{d}-{i}" for i, (d, _, _) in enumerate(REQUIREMENTS)]
)
def test_every_requirement_spelling_states_the_same_need(dialect: str, spec: dict[str, Any], need: fleet.Need) -> None:
    body = fleet.HpaRequirementBody.parse({"metadata": {"name": "r"}, "spec": spec})
    assert isinstance(body, fleet.SeedRequirementBody if dialect == SEED else fleet.EmcoRequirementBody)
    assert body.need == need


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        (
            {"allocatable": True, "resource": {"name": "cpu", "requests": 4, "limits": 2}},
            "spec.resource.requests",
            "exceed",
        ),
        ({"allocatable": True, "resource": {"name": "cpu"}}, "spec.resource.requests", "requests or limits"),
        ({"allocatable": True, "resource": {"name": "cpu", "requests": True}}, "spec.resource.requests", "boolean"),
        (
            {"allocatable": True, "resource": {"name": "cpu", "requests": 1, "units": "MB"}},
            "spec.resource.units",
            "unknown unit",
        ),
        ({"allocatable": True, "resource": {"key": "a", "value": "b"}}, "spec.resource", "allocatable is true"),
        ({"allocatable": False, "resource": {"name": "cpu", "requests": 1}}, "spec.resource", "allocatable is false"),
        ({"allocatable": False, "resource": {"key": "a"}}, "spec.resource.value", "Field required"),
        ({"allocatable": False, "resource": {"key": "a", "value": "not ok"}}, "spec.resource.value", "at most 63"),
        ({"allocatable": False, "resource": {"key": "bad key", "value": "v"}}, "spec.resource.key", "name part"),
        ({"resource": {"name": "cpu", "requests": 1}}, "spec.allocatable", "Field required"),
        ({"allocatable": True, "weight": 11, "resource": {"name": "cpu", "requests": 1}}, "spec.weight", "less than"),
    ],
)
def test_emco_requirement_errors_name_the_field_as_sent(spec: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        fleet.HpaRequirementBody.parse({"metadata": {"name": "r"}, "spec": spec})
    assert info.value.fields[0].path == field
    assert reason in info.value.fields[0].reason


APP_INTENT = ("web", "p", "edge")


def _target(b: Any) -> tuple[str, str, str | None]:
    return (b.spec.app, b.spec.intent.all_of[0].cluster_provider, b.spec.intent.all_of[0].cluster_label)


@pytest.mark.parametrize(
    ("level", "body", "read", "expected"),
    [
        (fleet.HPA_INTENT, {"spec": {"app": "fwall"}}, lambda b: b.spec.app, "fwall"),
        (fleet.HPA_INTENT, {"spec": {"appName": "fwall"}}, lambda b: b.spec.app, "fwall"),
        (fleet.HPA_INTENT, {"spec": {"app-name": "fwall"}}, lambda b: b.spec.app, "fwall"),
        (fleet.COMPOSITE_APP, {"spec": {"compositeAppVersion": "v1"}}, lambda b: b.version, "v1"),
        (fleet.COMPOSITE_APP, {"spec": {"version": "v1"}}, lambda b: b.version, "v1"),
        (
            fleet.GENERIC_APP_INTENT,
            {"spec": {"app": "web", "intent": {"allOf": [{"clusterProvider": "p", "clusterLabel": "edge"}]}}},
            _target,
            APP_INTENT,
        ),
        (
            fleet.GENERIC_APP_INTENT,
            {"spec": {"app-name": "web", "intent": {"allOf": [{"provider-name": "p", "cluster-label-name": "edge"}]}}},
            _target,
            APP_INTENT,
        ),
        (fleet.CLUSTER, {"spec": {"gitOps": {"gitOpsType": "azureArc"}}}, lambda b: (b.nodes, b.endpoint), ([], None)),
        (fleet.CLUSTER, {}, lambda b: (b.nodes, b.endpoint), ([], None)),
        (
            fleet.DEPLOYMENT_INTENT,
            {"spec": {"intent": {"genericPlacementIntent": "gpi"}}},
            lambda b: b.spec.intent,
            {"genericPlacementIntent": "gpi"},
        ),
    ],
)
def test_other_bodies_accept_every_release_spelling(
    level: fleet.Level, body: dict[str, Any], read: Any, expected: Any
) -> None:
    assert read(level.body.parse({"metadata": {"name": "x"}, **body})) == expected


@pytest.mark.parametrize(
    "body",
    [{"clusterLabel": "edge"}, {"label-name": "edge"}, {"metadata": {"name": ""}, "clusterLabel": "edge"}],
)
def test_cluster_label_bodies_of_every_release(body: dict[str, Any]) -> None:
    assert fleet.ClusterLabelBody.model_validate(body).cluster_label == "edge"
