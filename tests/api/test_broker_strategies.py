"""Configuration.spec.brokerStrategy and deviceKind: one strategy key, each field checked, refused with its path."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from devplace import errors
from devplace.api import normalize
from devplace.api._devices import Configuration

POD_SPEC = {"containers": [{"name": "broker", "image": "nginx", "resources": {"limits": {"{{PLACEHOLDER}}": "1"}}}]}
PLAIN_POD_SPEC = {"containers": [{"name": "broker", "image": "nginx"}]}
JOB_SPEC = {"template": {"spec": {"containers": [{"name": "j", "image": "busybox"}], "restartPolicy": "Never"}}}


def configuration(strategy: Any = None, *, pod: Any = POD_SPEC, job: Any = None, **extra: Any) -> dict[str, Any]:
    broker = {"brokerJobSpec": job} if job is not None else {"brokerPodSpec": pod}
    spec: dict[str, Any] = {"discoveryHandler": {"name": "onvif"}, "brokerSpec": copy.deepcopy(broker), **extra}
    if strategy is not None:
        spec["brokerStrategy"] = strategy
    return {"apiVersion": "akri.sh/v0", "kind": "Configuration", "metadata": {"name": "onvif"}, "spec": spec}


@pytest.mark.parametrize(
    ("strategy", "pod", "expected"),
    [
        ({"perNode": {}}, POD_SPEC, {"perNode": {}}),
        ({"deployment": {"replicas": 3}}, POD_SPEC, {"deployment": {"replicas": 3}}),
        ({"deployment": {"replicas": 0}}, POD_SPEC, {"deployment": {"replicas": 0}}),
        (
            {"configuration": {"replicas": 2, "devicesPerPod": 2}},
            PLAIN_POD_SPEC,
            {"configuration": {"replicas": 2, "devicesPerPod": 2}},
        ),
        ({"pool": {"size": 3}}, PLAIN_POD_SPEC, {"pool": {"size": 3, "mode": "static"}}),
        (
            {"pool": {"size": 3, "mode": "dynamic", "timeoutSeconds": 60}},
            PLAIN_POD_SPEC,
            {"pool": {"size": 3, "mode": "dynamic", "timeoutSeconds": 60}},
        ),
        (
            {"group": {"members": [{"resourceClass": "gpu"}, {"configuration": "onvif", "count": 3}]}},
            PLAIN_POD_SPEC,
            {"group": {"members": [{"resourceClass": "gpu", "count": 1}, {"configuration": "onvif", "count": 3}]}},
        ),
    ],
)
def test_each_strategy_loads_with_its_defaults(strategy: Any, pod: Any, expected: Any) -> None:
    assert normalize(configuration(strategy, pod=pod))["spec"]["brokerStrategy"] == expected


def test_the_job_strategy_takes_a_job_spec() -> None:
    wire = normalize(configuration({"job": {}}, job=JOB_SPEC))
    assert wire["spec"]["brokerStrategy"] == {"job": {}}
    assert Configuration.from_obj(wire).strategy == "job"


@pytest.mark.parametrize(
    ("broker", "strategy"),
    [({"pod": POD_SPEC}, "perNode"), ({"job": JOB_SPEC}, "job")],
)
def test_without_a_strategy_akri_defaults_apply(broker: dict[str, Any], strategy: str) -> None:
    wire = normalize(configuration(**broker))
    assert "brokerStrategy" not in wire["spec"]
    assert Configuration.from_obj(wire).strategy == strategy


def test_a_configuration_without_brokers_has_no_strategy() -> None:
    body = configuration()
    del body["spec"]["brokerSpec"]
    assert Configuration.from_obj(normalize(body)).strategy is None


PH = "spec.brokerSpec.brokerPodSpec.containers[0].resources.limits.{{PLACEHOLDER}}"


@pytest.mark.parametrize(
    ("body", "path", "reason"),
    [
        (configuration({"magic": {}}), "spec.brokerStrategy", "unknown strategy 'magic'"),
        (configuration({"perNode": {}, "job": {}}), "spec.brokerStrategy", "exactly one strategy must be set"),
        (configuration({}), "spec.brokerStrategy", "exactly one strategy must be set (got none"),
        (configuration({"pool": {"size": 0}}, pod=PLAIN_POD_SPEC), "spec.brokerStrategy.pool.size", "greater than"),
        (configuration({"pool": {}}, pod=PLAIN_POD_SPEC), "spec.brokerStrategy.pool.size", "Field required"),
        (
            configuration({"pool": {"size": 2, "mode": "elastic"}}, pod=PLAIN_POD_SPEC),
            "spec.brokerStrategy.pool.mode",
            "Input should be",
        ),
        (
            configuration({"pool": {"size": 2, "timeoutSeconds": -1}}, pod=PLAIN_POD_SPEC),
            "spec.brokerStrategy.pool.timeoutSeconds",
            "greater than",
        ),
        (configuration({"deployment": {"replicas": -1}}), "spec.brokerStrategy.deployment.replicas", "greater than"),
        (
            configuration({"configuration": {"replicas": -2}}, pod=PLAIN_POD_SPEC),
            "spec.brokerStrategy.configuration.replicas",
            "greater than",
        ),
        (
            configuration({"configuration": {"devicesPerPod": 0}}, pod=PLAIN_POD_SPEC),
            "spec.brokerStrategy.configuration.devicesPerPod",
            "greater than",
        ),
        (
            configuration({"group": {"members": [{"count": 1}]}}, pod=PLAIN_POD_SPEC),
            "spec.brokerStrategy.group.members[0]",
            "exactly one of configuration or resourceClass",
        ),
        (
            configuration({"group": {"members": [{"configuration": "a", "resourceClass": "b"}]}}, pod=PLAIN_POD_SPEC),
            "spec.brokerStrategy.group.members[0]",
            "exactly one of configuration or resourceClass",
        ),
        (
            configuration({"group": {"members": []}}, pod=PLAIN_POD_SPEC),
            "spec.brokerStrategy.group.members",
            "at least 1",
        ),
        (
            configuration({"group": {"members": [{"configuration": "a", "count": 0}]}}, pod=PLAIN_POD_SPEC),
            "spec.brokerStrategy.group.members[0].count",
            "greater than",
        ),
        (configuration({"pool": {"size": 3}}), PH, "serves no single Instance"),
        (configuration({"configuration": {}}), PH, "serves no single Instance"),
        (configuration({"group": {"members": [{"configuration": "a"}]}}), PH, "serves no single Instance"),
        (configuration({"job": {}}), "spec.brokerStrategy.job", "set spec.brokerSpec.brokerJobSpec"),
        (configuration({"perNode": {}}, job=JOB_SPEC), "spec.brokerStrategy.perNode", "set spec.brokerSpec.broker"),
        (configuration({"pool": {"size": 2}}, job=JOB_SPEC), "spec.brokerStrategy.pool", "brokerPodSpec"),
        (configuration(deviceKind=""), "spec.deviceKind", "at least 1 character"),
        (configuration(deviceKind="two words"), "spec.deviceKind", "match pattern"),
    ],
)
def test_a_bad_strategy_is_refused_naming_its_field(body: dict[str, Any], path: str, reason: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        normalize(body)
    assert [f.path for f in info.value.fields] == [path], info.value.message
    assert reason in info.value.fields[0].reason


def test_a_strategy_without_a_broker_spec_is_refused() -> None:
    body = configuration({"deployment": {"replicas": 1}})
    del body["spec"]["brokerSpec"]
    with pytest.raises(errors.Invalid) as info:
        normalize(body)
    assert [f.path for f in info.value.fields] == ["spec.brokerStrategy.deployment"]


def test_both_broker_specs_are_refused() -> None:
    body = configuration({"perNode": {}})
    body["spec"]["brokerSpec"]["brokerJobSpec"] = JOB_SPEC
    with pytest.raises(errors.Invalid) as info:
        normalize(body)
    assert [f.path for f in info.value.fields] == ["spec.brokerSpec"]


def test_the_placeholder_is_fine_where_a_broker_serves_one_instance() -> None:
    for strategy in ({"perNode": {}}, {"deployment": {"replicas": 2}}):
        assert normalize(configuration(strategy))["spec"]["brokerSpec"] == {"brokerPodSpec": POD_SPEC}


def test_device_kind_round_trips() -> None:
    assert normalize(configuration(deviceKind="camera"))["spec"]["deviceKind"] == "camera"
