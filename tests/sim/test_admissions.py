"""The simulated kubelet's admission rules, as pure functions: tables plus hypothesis invariants."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.sim import _admissions as admissions
from devplace.sim._admissions import ContainerNeed, Shortfall


@pytest.mark.parametrize(
    ("name", "extended"),
    [
        ("akri.sh/akri-onvif", True),
        ("devplace.io/akri-onvif-8120fe", True),
        ("nvidia.com/gpu", True),
        ("cpu", False),
        ("memory", False),
        ("kubernetes.io/something", False),
        ("node.kubernetes.io/x", False),
        ("example.com/", False),
        ("/gpu", False),
        ("Example.com/gpu", False),
    ],
)
def test_extended_resources_are_domain_prefixed_names_outside_kubernetes_io(name, extended):
    assert admissions.is_extended_resource(name) is extended


def test_out_of_reason_is_out_of_followed_by_the_resource_name():
    assert admissions.out_of_reason("akri.sh/akri-onvif") == "OutOfakri.sh/akri-onvif"


def _pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    return {"spec": spec}


def test_pod_needs_reads_extended_requests_and_limits_and_ignores_others():
    pod = _pod(
        [
            {"name": "a", "resources": {"requests": {"cpu": "100m", "x.io/d": "2"}, "limits": {"x.io/d": 2}}},
            {"name": "b", "resources": {"limits": {"x.io/d": "1", "y.io/e": "3"}}},
            {"name": "c"},
            {"name": "d", "resources": {"requests": {"x.io/d": "0"}}},
        ],
        init=[{"name": "setup", "resources": {"requests": {"x.io/d": "1"}}}],
    )
    assert admissions.pod_needs(pod) == [
        ContainerNeed("setup", {"x.io/d": 1}, init=True),
        ContainerNeed("a", {"x.io/d": 2}),
        ContainerNeed("b", {"x.io/d": 1, "y.io/e": 3}),
        ContainerNeed("c", {}),
        ContainerNeed("d", {}),
    ]


@pytest.mark.parametrize(
    ("container", "path"),
    [
        ({"name": "a", "resources": {"limits": {"x.io/d": "1.5"}}}, "spec.containers[0].resources.limits.x.io/d"),
        ({"name": "a", "resources": {"requests": {"x.io/d": "1k"}}}, "spec.containers[0].resources.requests.x.io/d"),
        ({"name": "a", "resources": {"requests": {"x.io/d": -1}}}, "spec.containers[0].resources.requests.x.io/d"),
        ({"name": "a", "resources": {"requests": {"x.io/d": True}}}, "spec.containers[0].resources.requests.x.io/d"),
        (
            {"name": "a", "resources": {"requests": {"x.io/d": "1"}, "limits": {"x.io/d": "2"}}},
            "spec.containers[0].resources.requests.x.io/d",
        ),
        ({"resources": {}}, "spec.containers[0].name"),
        ({"name": "a", "resources": []}, "spec.containers[0].resources"),
        ("nope", "spec.containers[0]"),
    ],
)
def test_pod_needs_refuses_bad_requests_naming_the_field(container, path):
    with pytest.raises(errors.Invalid) as info:
        admissions.pod_needs(_pod([container]))
    assert info.value.fields[0].path == path


def test_effective_needs_is_max_of_largest_init_and_sum_of_app_containers():
    needs = [
        ContainerNeed("i1", {"x.io/d": 3}, init=True),
        ContainerNeed("i2", {"x.io/d": 1, "y.io/e": 5}, init=True),
        ContainerNeed("a", {"x.io/d": 1, "y.io/e": 1}),
        ContainerNeed("b", {"x.io/d": 1, "z.io/f": 2}),
    ]
    assert admissions.effective_needs(needs) == {"x.io/d": 3, "y.io/e": 5, "z.io/f": 2}


def test_free_devices_are_healthy_and_unallocated_sorted():
    devices = {"d3": "Healthy", "d1": "Healthy", "d2": "Unhealthy", "d0": "Healthy"}
    assert admissions.free_devices(devices, {"d0"}) == ["d1", "d3"]


@pytest.mark.parametrize(
    ("needs", "free", "expected"),
    [
        ({"x.io/d": 2}, {"x.io/d": ["a", "b"]}, None),
        ({"x.io/d": 3}, {"x.io/d": ["a", "b"]}, Shortfall("x.io/d", 3, 2, 4)),
        ({"w.io/u": 1, "x.io/d": 3}, {"x.io/d": ["a"]}, Shortfall("w.io/u", 1, 0, 0)),
        ({}, {}, None),
    ],
)
def test_shortfall_names_the_first_resource_that_does_not_fit(needs, free, expected):
    assert admissions.shortfall(needs, free, {"x.io/d": 4}) == expected


def test_a_shortfall_reads_like_the_kubelets_rejection():
    short = Shortfall("x.io/d", 3, 2, 4)
    assert short.reason == "OutOfx.io/d"
    assert short.message == (
        "Pod was rejected: Node didn't have enough resource: x.io/d, requested: 3, free: 2, capacity: 4"
    )


@pytest.mark.parametrize(
    ("candidates", "count", "reuse", "preferred", "expected"),
    [
        (["c", "a", "b"], 2, [], None, ["c", "a"]),  # in the order offered
        (["a", "b", "c"], 2, [], ["c", "a"], ["c", "a"]),
        (["a", "b", "c"], 2, [], ["c"], ["a", "b"]),  # wrong size: ignored
        (["a", "b", "c"], 2, [], ["c", "z"], ["a", "b"]),  # not a candidate: ignored
        (["a", "b", "c"], 2, [], ["c", "c"], ["a", "b"]),  # duplicates: ignored
        (["b", "c"], 2, ["a"], None, ["a", "b"]),  # reused devices first
        (["b", "c"], 2, ["a"], ["c", "a"], ["c", "a"]),  # a preference that keeps the reused device
        (["b", "c"], 2, ["a"], ["b", "c"], ["a", "b"]),  # a preference dropping the reused device: ignored
        (["b"], 1, ["a", "z"], None, ["a"]),
    ],
)
def test_pick_devices_prefers_reuse_then_the_plugins_valid_preference_then_the_offered_order(
    candidates, count, reuse, preferred, expected
):
    assert admissions.pick_devices(candidates, count, reuse=reuse, preferred=preferred) == expected


def test_pick_devices_refuses_when_too_few_devices_are_free():
    with pytest.raises(errors.Refused, match="requested 3 devices, only 2 free"):
        admissions.pick_devices(["a", "b"], 3)


@given(
    candidates=st.lists(st.sampled_from([f"d{i}" for i in range(8)]), unique=True),
    reuse=st.lists(st.sampled_from([f"r{i}" for i in range(3)]), unique=True),
    preferred=st.none() | st.lists(st.sampled_from([f"d{i}" for i in range(8)] + ["r0", "x"])),
    count=st.integers(min_value=0, max_value=10),
)
def test_picked_devices_are_always_distinct_allowed_and_exactly_the_count(candidates, reuse, preferred, count):
    try:
        picked = admissions.pick_devices(candidates, count, reuse=reuse, preferred=preferred)
    except errors.Refused:
        assert len(candidates) + min(len(reuse), count) < count
        return
    assert len(picked) == count
    assert len(set(picked)) == count
    assert set(picked) <= set(candidates) | set(reuse)
    assert set(reuse[:count]) <= set(picked)


@given(
    requests=st.dictionaries(
        st.sampled_from(["x.io/d", "y.io/e", "cpu"]), st.integers(min_value=0, max_value=100), max_size=3
    ),
    as_string=st.booleans(),
)
def test_pod_needs_round_trips_whole_number_requests(requests, as_string):
    values = {k: str(v) if as_string else v for k, v in requests.items()}
    [need] = admissions.pod_needs(_pod([{"name": "a", "resources": {"requests": values}}]))
    assert need.resources == {k: v for k, v in requests.items() if k != "cpu" and v > 0}


def test_running_status_lists_every_container_as_ready():
    status = admissions.running_status(["a", "b"], "2026-01-01T00:00:00Z")
    assert status["phase"] == "Running"
    assert [(c["name"], c["ready"]) for c in status["containerStatuses"]] == [("a", True), ("b", True)]


def test_failed_status_carries_reason_and_message():
    status = admissions.failed_status("OutOfx.io/d", "no room", "2026-01-01T00:00:00Z")
    assert (status["phase"], status["reason"], status["message"]) == ("Failed", "OutOfx.io/d", "no room")


def test_class_selections_read_the_schedulers_device_annotations():
    annotations = {
        "scheduler.alpha.kubernetes.io/resClass_fast-gpu_gpu-b": "1",
        "scheduler.alpha.kubernetes.io/resClass_fast-gpu_gpu-a": "2",
        "scheduler.alpha.kubernetes.io/resClass_cams_cam-1": "1",
        "other": "x",
    }
    assert admissions.class_selections(annotations) == {
        "cams": [("cam-1", 1)],
        "fast-gpu": [("gpu-a", 2), ("gpu-b", 1)],
    }


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("scheduler.alpha.kubernetes.io/resClass_nodevice", "1"),
        ("scheduler.alpha.kubernetes.io/resClass__dev", "1"),
        ("scheduler.alpha.kubernetes.io/resClass_c_d", "two"),
    ],
)
def test_a_malformed_class_annotation_is_refused_naming_it(key, value):
    with pytest.raises(errors.Invalid) as info:
        admissions.class_selections({key: value})
    assert info.value.fields[0].path == f"metadata.annotations.{key}"


def test_class_requests_become_requests_on_the_chosen_devices_plugins_container_by_container():
    needs = [
        ContainerNeed("init", {"rc.devplace.io/fast-gpu": 2}, init=True),
        ContainerNeed("a", {"rc.devplace.io/fast-gpu": 2, "x.io/d": 1}),
        ContainerNeed("b", {"rc.devplace.io/fast-gpu": 2}),
    ]
    selections = {"fast-gpu": [("gpu-a", 3), ("gpu-b", 1)]}
    resource_of = {"gpu-a": "devplace.io/gpu-a", "gpu-b": "devplace.io/gpu-b"}
    assert admissions.expand_resource_classes(needs, selections, resource_of) == [
        ContainerNeed("init", {"devplace.io/gpu-a": 2}, init=True),
        ContainerNeed("a", {"devplace.io/gpu-a": 2, "x.io/d": 1}),
        ContainerNeed("b", {"devplace.io/gpu-a": 1, "devplace.io/gpu-b": 1}),
    ]


def test_class_units_without_a_chosen_device_or_plugin_stay_class_requests():
    needs = [ContainerNeed("a", {"rc.devplace.io/fast-gpu": 3}), ContainerNeed("b", {"rc.devplace.io/cams": 1})]
    selections = {"fast-gpu": [("gpu-a", 1), ("gpu-gone", 1)]}
    assert admissions.expand_resource_classes(needs, selections, {"gpu-a": "devplace.io/gpu-a"}) == [
        ContainerNeed("a", {"devplace.io/gpu-a": 1, "rc.devplace.io/fast-gpu": 2}),
        ContainerNeed("b", {"rc.devplace.io/cams": 1}),
    ]


def test_the_kubelets_status_keeps_the_schedulers_condition():
    scheduled = {"type": "PodScheduled", "status": "True"}
    current = {"conditions": [scheduled, {"type": "Ready", "status": "False"}]}
    running = admissions.running_status(["main"], "t0")
    assert admissions.merged_status(current, running)["conditions"] == [scheduled, *running["conditions"]]
    failed = admissions.failed_status("OutOfx.io/d", "no", "t0")
    assert admissions.merged_status(current, failed) == {**failed, "conditions": current["conditions"]}
    assert admissions.merged_status(None, failed) == failed


def test_the_kubelets_status_keeps_the_claims_made_for_the_pod():
    claims = [{"name": "gpu", "resourceClaimName": "p-gpu-7x2k"}]
    current = {"phase": "Pending", "resourceClaimStatuses": claims, "nominatedNodeName": "node-a"}
    running = admissions.running_status(["main"], "t0")
    merged = admissions.merged_status(current, running)
    assert merged == {**running, "resourceClaimStatuses": claims, "nominatedNodeName": "node-a"}
