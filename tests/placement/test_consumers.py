"""Hpa resource consumers (`devplace.placement._consumers`): every dialect names one `Workload`, whose EMCO names
map to Kubernetes names, and every error names the field as the client spelled it."""

from __future__ import annotations

from typing import Any

import pytest

from devplace import errors
from devplace.placement._consumers import FlatConsumerBody, HpaConsumerBody, SeedConsumerBody, Workload
from devplace.placement._names import kube_name


def test_consumer_bodies_follow_the_seed() -> None:
    body = HpaConsumerBody.parse(
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
    assert body.workload == Workload("apps/v1", "StatefulSet", "core-fwall", "fw", None)
    with pytest.raises(errors.Invalid, match="a DaemonSet has no replica count"):
        HpaConsumerBody.parse(
            {
                "metadata": {"name": "d"},
                "spec": {"consumer": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d"}, "replicas": 2},
            }
        )


SEED = "seed"


EMCO21 = "21.x"


EMCO22 = "22.x"


CONSUMERS: list[tuple[str, dict[str, Any], Workload]] = [
    (
        SEED,
        {"consumer": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api-server", "container-name": "nginx"}},
        Workload("apps/v1", "Deployment", "api-server", "nginx", None),
    ),
    (
        SEED,
        {
            "consumer": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "containerName": "pg"},
            "replicas": 3,
        },
        Workload("apps/v1", "StatefulSet", "db", "pg", 3),
    ),
    (
        EMCO21,
        {"api-version": "v19", "kind": "Deployment", "replicas": 2, "name": "r1-http-client", "container-name": "c"},
        Workload("v19", "Deployment", "r1-http-client", "c", 2),
    ),
    (
        EMCO22,
        {"apiVersion": "1.19", "kind": "Deployment", "name": "HttpClient", "container": "HttpClientContainer"},
        Workload("1.19", "Deployment", "HttpClient", "HttpClientContainer", None),
    ),
    (EMCO22, {"name": "labels-only"}, Workload("apps/v1", "Deployment", "labels-only", None, None)),
    (EMCO22, {"kind": "Job", "name": "batch"}, Workload("batch/v1", "Job", "batch", None, None)),
]


@pytest.mark.parametrize(
    ("dialect", "spec", "workload"), CONSUMERS, ids=[f"{d}-{i}" for i, (d, _, _) in enumerate(CONSUMERS)]
)
def test_every_consumer_spelling_names_the_same_workload(
    dialect: str, spec: dict[str, Any], workload: Workload
) -> None:
    body = HpaConsumerBody.parse({"metadata": {"name": "c"}, "spec": spec})
    assert isinstance(body, SeedConsumerBody if dialect == SEED else FlatConsumerBody)
    assert body.workload == workload


def test_emco_workload_names_map_to_kubernetes_names_deterministically() -> None:
    body = HpaConsumerBody.parse(
        {"metadata": {"name": "c"}, "spec": {"apiVersion": "v19", "name": "HttpClient", "container": "Http_Client"}}
    )
    assert (body.workload.object_name, body.workload.container_name) == ("httpclient", "http-client")
    assert kube_name("r1-http-client") == "r1-http-client"  # a Kubernetes name stays as it is
    assert kube_name("a.b-c") == "a.b-c"
    assert kube_name("a.b", label=True) == "a-b"  # a container name is a DNS label: no dots


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
        HpaConsumerBody.parse({"metadata": {"name": "c"}, "spec": spec})
    assert info.value.fields[0].path == field
