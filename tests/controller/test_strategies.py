"""Desired brokers per strategy: Akri's names, labels, affinity and resources; devplace's pools and groups."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devplace.controller import _decisions as decisions
from devplace.controller import _inputs as inputs
from devplace.controller import _names as names
from devplace.controller import _strategies as strategies
from devplace.controller._strategies import Brokers
from tests.controller.samples import (
    BROKER_JOB_SPEC,
    PLAIN_POD_SPEC,
    cfg_view,
    configuration,
    conflict,
    instance,
    views,
)

NODES3 = ["node-a", "node-b", "node-c"]


def run(cfg: dict[str, Any], *insts: dict[str, Any], existing: Any = (), now: float = 0.0, **kw: Any) -> Brokers:
    return strategies.brokers(cfg_view(cfg), views(*insts), list(existing), now=now, **kw)


def bodies(result: Brokers, kind: str = "Pod") -> dict[str, dict[str, Any]]:
    return {d.key[2]: dict(d.body) for d in result.objects if d.key[0] == kind}


def limits(pod: dict[str, Any]) -> dict[str, str]:
    return dict(pod["spec"]["containers"][0]["resources"]["limits"])


def pinned(pod: dict[str, Any]) -> list[dict[str, Any]]:
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [f for t in terms["nodeSelectorTerms"] for f in t["matchFields"]]


# -- perNode -----------------------------------------------------------------------------------------------------


def test_per_node_deploys_akris_pod_per_instance_and_node() -> None:
    result = run(
        configuration(),
        instance("akri-onvif-8120fe", ["node-a", "node-b"]),
        instance("akri-onvif-a19705", ["node-b"], shared=False),
        prefix="akri.sh",
    )
    pods = bodies(result)
    assert sorted(pods) == ["akri-onvif-a19705-pod", "node-a-akri-onvif-8120fe-pod", "node-b-akri-onvif-8120fe-pod"]
    pod = pods["node-a-akri-onvif-8120fe-pod"]
    assert pod["metadata"]["labels"] == {
        "controller": "akri.sh",
        "akri.sh/configuration": "akri-onvif",
        "akri.sh/instance": "akri-onvif-8120fe",
        "akri.sh/target-node": "node-a",
    }
    assert pinned(pod) == [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]
    assert limits(pod) == {"akri.sh/akri-onvif-8120fe": "1"}
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"akri.sh/akri-onvif-8120fe": "1"}
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Instance"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "uid-akri-onvif-8120fe"
    assert pod["metadata"]["namespace"] == "default"


def test_the_resource_prefix_is_the_configurations_api_group_unless_overridden() -> None:
    """One rule with the agent (`api.devices.resource_name`): akri.sh/v0 -> akri.sh, devplace.io/v1alpha1 ->
    devplace.io; an override names every Configuration's resources."""
    inst = instance("akri-onvif-8120fe", ["node-a"], shared=False)
    pods = bodies(run(configuration(), inst))
    assert limits(pods["akri-onvif-8120fe-pod"]) == {"akri.sh/akri-onvif-8120fe": "1"}
    ours = {**configuration(), "apiVersion": "devplace.io/v1alpha1"}
    assert limits(bodies(run(ours, inst))["akri-onvif-8120fe-pod"]) == {"devplace.io/akri-onvif-8120fe": "1"}
    assert limits(bodies(run(ours, inst, prefix="example.com"))["akri-onvif-8120fe-pod"]) == {
        "example.com/akri-onvif-8120fe": "1"
    }


def test_per_node_creates_one_per_node_whatever_the_capacity() -> None:
    """With capacity 1 and three nodes, three brokers: the kubelet keeps two Pending (HA), not the controller."""
    result = run(configuration(capacity=1), instance("akri-onvif-8120fe", NODES3, capacity=1))
    assert len(bodies(result)) == 3


def test_all_devices_offline_means_no_brokers() -> None:
    result = run(configuration(), instance("akri-onvif-8120fe", []), instance("akri-onvif-a19705", []))
    assert result.objects == ()


def test_instances_of_other_configurations_are_not_ours() -> None:
    result = run(configuration(), instance("other-8120fe", ["node-a"], configuration="other"))
    assert result.objects == ()


def test_a_node_that_lost_a_resource_name_clash_gets_no_broker_and_a_reason() -> None:
    cfg = configuration(conditions=[conflict("node-b")])
    result = run(cfg, instance("akri-onvif-8120fe", NODES3))
    assert sorted(bodies(result)) == ["node-a-akri-onvif-8120fe-pod", "node-c-akri-onvif-8120fe-pod"]
    assert [(s.reason, s.node) for s in result.skips] == [("ResourceNameConflict", "node-b")]
    assert "node-b-akri-onvif-8120fe-pod" in result.skips[0].message


def test_an_invalid_configuration_wants_nothing() -> None:
    bad = configuration(strategy={"pool": {"size": 0}}, pod=PLAIN_POD_SPEC)
    view = cfg_view(bad)
    assert view.problem is not None
    assert "spec.brokerStrategy.pool.size" in view.problem
    assert run(bad, instance("akri-onvif-8120fe", NODES3)).objects == ()


# -- job ---------------------------------------------------------------------------------------------------------


def test_job_per_instance_named_for_the_generation() -> None:
    cfg = configuration(job=BROKER_JOB_SPEC, generation=4)
    result = run(cfg, instance("akri-onvif-8120fe", NODES3), instance("akri-onvif-a19705", []))
    jobs = bodies(result, "Job")
    assert list(jobs) == ["akri-onvif-8120fe-4-job"]
    job = jobs["akri-onvif-8120fe-4-job"]
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"akri.sh/akri-onvif-8120fe": "1"}
    assert job["spec"]["backoffLimit"] == 2
    assert job["metadata"]["labels"]["akri.sh/instance"] == "akri-onvif-8120fe"


def test_a_new_generation_gets_a_new_job_and_the_old_one_is_left_to_finish() -> None:
    old = {
        "kind": "Job",
        "metadata": {
            "name": "akri-onvif-8120fe-4-job",
            "namespace": "default",
            "labels": {"controller": "akri.sh", "akri.sh/instance": "akri-onvif-8120fe"},
        },
    }
    gone = {
        "kind": "Job",
        "metadata": {
            "name": "akri-onvif-dead00-4-job",
            "namespace": "default",
            "labels": {"controller": "akri.sh", "akri.sh/instance": "akri-onvif-dead00"},
        },
    }
    cfg = configuration(job=BROKER_JOB_SPEC, generation=5)
    result = run(cfg, instance("akri-onvif-8120fe", ["node-a"]), existing=[old, gone])
    assert list(bodies(result, "Job")) == ["akri-onvif-8120fe-5-job"]
    assert result.retain == {("Job", "default", "akri-onvif-8120fe-4-job")}


# -- deployment --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("replicas", "capacity", "expected"), [(3, 2, 2), (1, 4, 1), (0, 2, 0), (2, 2, 2)])
def test_deployment_runs_min_of_replicas_and_capacity(replicas: int, capacity: int, expected: int) -> None:
    cfg = configuration(strategy={"deployment": {"replicas": replicas}}, capacity=capacity)
    result = run(cfg, instance("akri-onvif-8120fe", NODES3, capacity=capacity))
    pods = bodies(result)
    assert sorted(pods) == [f"akri-onvif-8120fe-{i}-pod" for i in range(expected)]
    for pod in pods.values():
        assert "affinity" not in pod["spec"]
        assert limits(pod) == {"akri.sh/akri-onvif-8120fe": "1"}
    assert [s.reason for s in result.skips] == (["CapacityBound"] if replicas > capacity else [])


def test_deployment_adds_the_instance_resource_when_the_spec_has_no_placeholder() -> None:
    cfg = configuration(strategy={"deployment": {"replicas": 1}}, pod=PLAIN_POD_SPEC)
    pods = bodies(run(cfg, instance("akri-onvif-8120fe", ["node-a"])))
    assert limits(pods["akri-onvif-8120fe-0-pod"]) == {"akri.sh/akri-onvif-8120fe": "1"}


def test_unpinned_brokers_keep_off_conflicting_nodes() -> None:
    cfg = configuration(strategy={"deployment": {"replicas": 1}}, conditions=[conflict("node-b")])
    pods = bodies(run(cfg, instance("akri-onvif-8120fe", NODES3)))
    assert pinned(pods["akri-onvif-8120fe-0-pod"]) == [
        {"key": "metadata.name", "operator": "NotIn", "values": ["node-b"]}
    ]


# -- configuration -----------------------------------------------------------------------------------------------


def test_configuration_strategy_requests_the_configuration_resource_unpinned() -> None:
    cfg = configuration(strategy={"configuration": {"replicas": 2, "devicesPerPod": 3}}, pod=PLAIN_POD_SPEC)
    result = run(cfg, instance("akri-onvif-8120fe", ["node-a"]), prefix="akri.sh")
    pods = bodies(result)
    assert sorted(pods) == ["akri-onvif-0-pod", "akri-onvif-1-pod"]
    assert limits(pods["akri-onvif-0-pod"]) == {"akri.sh/akri-onvif": "3"}
    assert "affinity" not in pods["akri-onvif-0-pod"]["spec"]
    assert pods["akri-onvif-0-pod"]["metadata"]["ownerReferences"][0]["kind"] == "Configuration"


def test_configuration_strategy_without_devices_deploys_nothing() -> None:
    cfg = configuration(strategy={"configuration": {"replicas": 2}}, pod=PLAIN_POD_SPEC)
    result = run(cfg, instance("akri-onvif-8120fe", []))
    assert result.objects == ()
    assert [s.reason for s in result.skips] == ["NoDevices"]


# -- pool (static): seed 002's example is the acceptance test ----------------------------------------------------

POOL = configuration(strategy={"pool": {"size": 3}}, pod=PLAIN_POD_SPEC)
CAMS = [f"akri-onvif-cam00{i}" for i in range(1, 8)]


def cameras(*numbers: int, nodes: list[str] = NODES3, created: str = "2026-01-01T00:00:00Z") -> list[dict[str, Any]]:
    return [instance(CAMS[n - 1], nodes, created=created) for n in numbers]


def members(result: Brokers) -> list[tuple[str, list[str]]]:
    out = []
    for pod in bodies(result).values():
        groups = json.loads(pod["metadata"]["annotations"][names.MEMBERS_ANNOTATION])
        out.append((pod["metadata"]["labels"][names.NODE_LABEL], [n for g in groups for n in g]))
    return sorted(out)


def existing_of(result: Brokers) -> list[dict[str, Any]]:
    return [{**dict(d.body), "metadata": {**d.body["metadata"], "uid": d.key[2]}} for d in result.objects]


def test_seed_002_static_pools_of_three() -> None:
    # five cameras seen by three worker nodes -> one broker, on one node, for three of them
    first = run(POOL, *cameras(1, 2, 3, 4, 5))
    assert members(first) == [("node-a", CAMS[0:3])]
    pod = next(iter(bodies(first).values()))
    assert limits(pod) == {f"akri.sh/{c}": "1" for c in CAMS[0:3]}
    assert pinned(pod) == [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]
    assert [s.reason for s in first.skips] == ["PoolIncomplete"]
    # a sixth camera comes online -> a second broker for the three available cameras
    second = run(POOL, *cameras(1, 2, 3, 4, 5, 6), existing=existing_of(first))
    assert members(second) == [("node-a", CAMS[0:3]), ("node-b", CAMS[3:6])]
    assert bodies(first).keys() <= bodies(second).keys()  # the first broker is untouched
    assert second.skips == ()
    # a camera of the first pool goes down -> that broker goes; the survivors wait to re-pool
    third = run(POOL, *cameras(1, 3, 4, 5, 6), existing=existing_of(second))
    assert members(third) == [("node-b", CAMS[3:6])]
    assert "cam001" in third.skips[0].message
    assert "cam003" in third.skips[0].message
    # ... and re-pool when a camera comes
    fourth = run(POOL, *cameras(1, 3, 4, 5, 6, 7), existing=existing_of(third))
    assert members(fourth) == [("node-a", [CAMS[0], CAMS[2], CAMS[6]]), ("node-b", CAMS[3:6])]


def test_static_pool_members_must_share_a_node() -> None:
    insts = [instance(CAMS[0], ["node-a"]), instance(CAMS[1], ["node-b"]), instance(CAMS[2], ["node-a", "node-b"])]
    assert run(POOL, *insts).objects == ()


def test_static_pool_timeout_deploys_a_smaller_pool_after_the_timeout() -> None:
    cfg = configuration(strategy={"pool": {"size": 3, "timeoutSeconds": 60}}, pod=PLAIN_POD_SPEC)
    t0 = 1_767_225_600.0
    first = run(cfg, *cameras(1, 2, 3, 4, 5), now=t0)
    assert members(first) == [("node-a", CAMS[0:3])]
    assert (first.waiting_since, first.wake_at) == (t0, t0 + 60)  # the wait starts now; its start goes to status
    waiting = {**cfg, "status": {"pools": {"waitingSince": "2026-01-01T00:00:00Z"}}}
    before = run(waiting, *cameras(1, 2, 3, 4, 5), existing=existing_of(first), now=t0 + 59)
    assert members(before) == members(first)
    assert (before.waiting_since, before.wake_at) == (t0, t0 + 60)
    after = run(waiting, *cameras(1, 2, 3, 4, 5), existing=existing_of(before), now=t0 + 60)
    assert members(after) == [("node-a", CAMS[0:3]), ("node-b", CAMS[3:5])]
    assert (after.wake_at, after.waiting_since, after.skips) == (None, None, ())
    # the smaller pool stays while its members stay
    later = run(cfg, *cameras(1, 2, 3, 4, 5), existing=existing_of(after), now=t0 + 600)
    assert members(later) == members(after)


def test_the_pool_wait_is_recorded_in_status_and_cleared_when_nobody_waits() -> None:
    cfg = configuration(strategy={"pool": {"size": 3, "timeoutSeconds": 60}}, pod=PLAIN_POD_SPEC)
    decision = decisions.decide(cfg_view(cfg), views(*cameras(1, 2, 3, 4)), [], now=1_767_225_600.0)
    assert decision.status is not None
    assert decision.status["status"]["pools"] == {"waitingSince": "2026-01-01T00:00:00Z"}
    full = decisions.decide(cfg_view(decision.status), views(*cameras(1, 2, 3)), [], now=1_767_225_700.0)
    assert full.status is not None
    assert "pools" not in full.status["status"]


def test_each_pool_broker_gets_a_config_map_listing_its_instances() -> None:
    result = run(POOL, *cameras(1, 2, 3))
    maps = bodies(result, "ConfigMap")
    assert len(maps) == 1
    (cm,) = maps.values()
    listing = json.loads(cm["data"]["instances.json"])
    assert [e["name"] for e in listing] == CAMS[0:3]
    assert listing[0]["brokerProperties"] == {"ONVIF_DEVICE_UUID": CAMS[0]}
    pod = next(iter(bodies(result).values()))
    assert pod["spec"]["volumes"] == [{"name": "devplace-pool", "configMap": {"name": cm["metadata"]["name"]}}]


# -- pool (dynamic) ----------------------------------------------------------------------------------------------

DYNAMIC = configuration(strategy={"pool": {"size": 3, "mode": "dynamic"}}, pod=PLAIN_POD_SPEC)


def listing(result: Brokers) -> dict[str, list[str]]:
    return {
        name: [e["name"] for e in json.loads(cm["data"]["instances.json"])]
        for name, cm in bodies(result, "ConfigMap").items()
    }


def test_dynamic_pools_fill_up_and_shrink_in_place() -> None:
    first = run(DYNAMIC, *cameras(1, 2, 3, 4, 5))
    assert listing(first) == {"akri-onvif-pool-0": CAMS[0:3], "akri-onvif-pool-1": CAMS[3:5]}
    pods_before = {k: v["metadata"]["annotations"] for k, v in bodies(first).items()}
    second = run(DYNAMIC, *cameras(1, 3, 4, 5, 6), existing=existing_of(first))
    # cam002 leaves pool 0; cam006 joins the lowest-numbered pool with room (pool 0); nobody else moves
    assert listing(second) == {"akri-onvif-pool-0": [CAMS[0], CAMS[2], CAMS[5]], "akri-onvif-pool-1": CAMS[3:5]}
    # the brokers themselves are unchanged (same digest): their ConfigMaps are rewritten, they are not restarted
    assert {k: v["metadata"]["annotations"] for k, v in bodies(second).items()} == pods_before
    third = run(DYNAMIC, *cameras(1, 3, 4, 5, 6, 7), existing=existing_of(second))
    assert listing(third) == {
        "akri-onvif-pool-0": [CAMS[0], CAMS[2], CAMS[5]],
        "akri-onvif-pool-1": [*CAMS[3:5], CAMS[6]],
    }


# -- group -------------------------------------------------------------------------------------------------------


def test_group_deploys_one_broker_per_satisfiable_group_on_one_node() -> None:
    cfg = configuration(
        "vision",
        strategy={"group": {"members": [{"resourceClass": "gpu"}, {"configuration": "akri-onvif", "count": 3}]}},
        pod=PLAIN_POD_SPEC,
    )
    gpus = [instance("gpus-aaaaaa", ["node-b"], configuration="gpus", shared=False)]
    cams = cameras(1, 2, 3, 4, nodes=["node-a", "node-b"])

    def is_gpu(cls: str, inst: inputs.InstanceFacts) -> bool:
        return cls == "gpu" and inst.configuration == "gpus"

    result = run(cfg, *gpus, *cams, class_matches=is_gpu)
    assert members(result) == [("node-b", ["gpus-aaaaaa", *CAMS[0:3]])]
    pod = next(iter(bodies(result).values()))
    assert set(limits(pod)) == {"akri.sh/gpus-aaaaaa", *(f"akri.sh/{c}" for c in CAMS[0:3])}
    # without a GPU there is no group, and the status says why
    lonely = run(cfg, *cams, class_matches=is_gpu)
    assert lonely.objects == ()
    assert [s.reason for s in lonely.skips] == ["GroupUnsatisfiable"]
