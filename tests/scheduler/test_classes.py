from __future__ import annotations

from typing import Any

import pytest

from devplace import errors
from devplace.scheduler._classes import (
    ANNOTATION_PREFIX,
    ClassSpec,
    binding_annotations,
    class_requests,
    class_status,
    parse_binding_annotations,
    resolve_classes,
    resolve_each,
)
from tests.scheduler.builders import SEED_CLASSES, device, seed_classes


def one(key: str, operator: str, values: list[str] | None = None) -> dict[str, Any]:
    expr: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        expr["values"] = values
    return {"resourceSelector": [{"matchExpressions": [expr]}]}


@pytest.mark.parametrize(
    ("cls", "attrs", "matches"),
    [
        ("nvidia.high.mem", {"Kind": "nvidia-gpu", "memory": "32Gi"}, True),
        ("nvidia.high.mem", {"Kind": "nvidia-gpu", "memory": "30G"}, True),  # GtEq: equal counts
        ("nvidia.high.mem", {"Kind": "nvidia-gpu", "memory": "16Gi"}, False),
        ("nvidia.high.mem", {"Kind": "nvidia-gpu", "memory": "30000000000"}, True),  # plain bytes compare too
        ("nvidia.high.mem", {"Kind": "nvidia-gpu"}, False),  # absent key: ordering operators do not match
        ("nvidia.high.mem", {"Kind": "amd-gpu", "memory": "64Gi"}, False),
        ("nvidia.high.mem", {"Kind": "nvidia-gpu", "memory": "lots"}, False),  # a string does not order
        ("hugepages-1gig", {"Kind": "huge-pages", "size": "1Gi"}, True),
        ("hugepages-1gig", {"Kind": "huge-pages", "size": "1G"}, True),
        ("hugepages-1gig", {"Kind": "huge-pages", "size": "2Mi"}, False),
        ("fast.nic", {"Kind": "nic", "speed": "40GBPS"}, True),
        ("fast.nic", {"Kind": "nic", "speed": "100GBPS"}, True),
        ("fast.nic", {"Kind": "nic", "speed": "10GBPS"}, False),
        ("fast.nic", {"Kind": "nic", "speed": "100Gbps"}, False),  # another unit does not order against GBPS
        ("fast.nic", {"Kind": "nic"}, False),
    ],
)
def test_the_seeds_three_classes_select_as_written(cls: str, attrs: dict[str, str], matches: bool) -> None:
    assert seed_classes()[cls].matches(attrs) is matches


@pytest.mark.parametrize(
    ("operator", "values", "attrs", "matches"),
    [
        ("In", ["a", "b"], {"k": "b"}, True),
        ("In", ["a"], {"k": "c"}, False),
        ("In", ["a"], {}, False),
        ("In", ["32Gi"], {"k": "34359738368"}, True),  # typed equality
        ("NotIn", ["a"], {"k": "b"}, True),
        ("NotIn", ["a"], {"k": "a"}, False),
        ("NotIn", ["a"], {}, True),  # absent key matches NotIn, as in Kubernetes
        ("Eq", ["1.2.0"], {"k": "v1.2"}, True),
        ("Eq", ["x"], {}, False),
        ("Exists", None, {"k": ""}, True),
        ("Exists", None, {}, False),
        ("DoesNotExist", None, {}, True),
        ("DoesNotExist", None, {"k": "x"}, False),
        ("Gt", ["1.2.9"], {"k": "1.2.10"}, True),  # versions compare numerically
        ("Gt", ["1.2.10"], {"k": "1.2.10"}, False),
        ("Gt", ["1"], {}, False),
        ("GtEq", ["1.2.10"], {"k": "1.2.10"}, True),
        ("GtEq", ["2.0.0"], {"k": "2.0.0-rc1"}, False),  # a pre-release is below its release
        ("Lt", ["32Gi"], {"k": "30G"}, True),
        ("Lt", ["30G"], {"k": "32Gi"}, False),
        ("Lt", ["1"], {}, False),
        ("LtEq", ["40GBPS"], {"k": "40GBPS"}, True),
        ("LtEq", ["40GBPS"], {"k": "41GBPS"}, False),
        ("LtEq", ["2"], {"k": "two"}, False),
    ],
)
def test_every_operator_selects_through_a_class(
    operator: str, values: list[str] | None, attrs: dict[str, str], matches: bool
) -> None:
    cls = resolve_classes({"c": one("k", operator, values)})["c"]
    assert cls.matches(attrs) is matches


def test_an_empty_class_matches_nothing() -> None:
    assert not resolve_classes({"c": {"resourceSelector": []}})["c"].matches({"Kind": "x"})


def test_a_class_ref_matches_what_the_referenced_class_matches_or_its_own_terms() -> None:
    specs = {
        **SEED_CLASSES,
        "any.gpu": {
            "resourceSelector": [
                {"classRef": "nvidia.high.mem"},
                {"matchExpressions": [{"key": "Kind", "operator": "In", "values": ["amd-gpu"]}]},
            ]
        },
        "accelerator": {"resourceSelector": [{"classRef": "any.gpu"}, {"classRef": "fast.nic"}]},
    }
    classes = resolve_classes(specs)
    accel = classes["accelerator"]
    assert accel.includes == ("any.gpu", "nvidia.high.mem", "fast.nic")
    assert accel.matches({"Kind": "nvidia-gpu", "memory": "40Gi"})
    assert accel.matches({"Kind": "amd-gpu"})
    assert accel.matches({"Kind": "nic", "speed": "100GBPS"})
    assert not accel.matches({"Kind": "nvidia-gpu", "memory": "8Gi"})


def test_a_diamond_of_references_does_not_duplicate_terms() -> None:
    leaf = one("k", "Exists")
    specs: dict[str, Any] = {"leaf": leaf}
    prev = "leaf"
    for i in range(30):  # 2^30 paths if references were expanded naively
        name = f"c{i:02d}"
        specs[name] = {"resourceSelector": [{"classRef": prev}, {"classRef": prev}]}
        prev = name
    assert len(resolve_classes(specs)[prev].selector.terms) == 1


@pytest.mark.parametrize(
    ("specs", "cls", "path", "reason"),
    [
        (
            {"a": {"resourceSelector": [{"classRef": "b"}]}, "b": {"resourceSelector": [{"classRef": "a"}]}},
            "a",
            "spec.resourceSelector[0].classRef",
            "cycle a -> b -> a",
        ),
        (
            {"a": {"resourceSelector": [{"classRef": "b"}]}, "b": {"resourceSelector": [{"classRef": "a"}]}},
            "b",
            "spec.resourceSelector[0].classRef",
            "cycle b -> a -> b",
        ),
        (
            {"a": {"resourceSelector": [one("k", "Exists")["resourceSelector"][0], {"classRef": "a"}]}},
            "a",
            "spec.resourceSelector[1].classRef",
            "cycle a -> a",
        ),
        (
            {
                "a": {"resourceSelector": [{"classRef": "b"}]},
                "b": {"resourceSelector": [{"classRef": "c"}]},
                "c": {"resourceSelector": [{"classRef": "b"}]},
            },
            "c",
            "spec.resourceSelector[0].classRef",
            "cycle c -> b -> c",
        ),
        (
            {"a": {"resourceSelector": [{"classRef": "missing"}]}},
            "a",
            "spec.resourceSelector[0].classRef",
            "class 'missing' (referenced by 'a') does not exist",
        ),
    ],
)
def test_cycles_and_dangling_references_are_refused_naming_the_field(
    specs: dict[str, Any], cls: str, path: str, reason: str
) -> None:
    _, refused = resolve_each(specs)
    assert refused[cls].fields[0].path == path
    assert refused[cls].fields[0].reason == reason


def test_resolve_classes_raises_for_the_first_refused_class_with_its_path() -> None:
    specs = {"a": {"resourceSelector": [{"classRef": "b"}]}, "b": {"resourceSelector": [{"classRef": "a"}]}}
    with pytest.raises(
        errors.Invalid, match=r"resourceclasses/a: spec.resourceSelector\[0\].classRef: cycle a -> b -> a"
    ):
        resolve_classes(specs)


def test_a_class_leading_into_a_cycle_is_refused_and_unrelated_classes_still_resolve() -> None:
    specs = {
        "entry": {"resourceSelector": [{"classRef": "a"}]},
        "a": {"resourceSelector": [{"classRef": "b"}]},
        "b": {"resourceSelector": [{"classRef": "a"}]},
        "fine": one("k", "Exists"),
    }
    resolved, refused = resolve_each(specs)
    assert set(resolved) == {"fine"}
    assert set(refused) == {"a", "b", "entry"}
    assert "class 'a' is refused" in refused["entry"].message


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"resourceSelector": [{"classRef": "b", "matchExpressions": []}]}, "spec.resourceSelector[0]"),
        ({"resourceSelector": [{"classRef": "B_"}]}, "spec.resourceSelector[0].classRef"),
        (
            {"resourceSelector": [{"classRef": "b"}, {"matchExpressions": [{"key": "k", "operator": "Gt"}]}]},
            "spec.resourceSelector[1].matchExpressions[0].values",
        ),
        ({"resourceSelector": [], "selectionStrategy": "random"}, "spec.selectionStrategy"),
        ({"resourceSelector": [], "extra": 1}, "spec.extra"),
    ],
)
def test_a_malformed_class_spec_is_refused_naming_the_field(spec: dict[str, Any], path: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        ClassSpec.from_wire("a", spec)
    assert caught.value.fields[0].path == path


def test_selection_strategy_is_kept() -> None:
    assert resolve_classes({"c": {"resourceSelector": [], "selectionStrategy": "spread"}})["c"].strategy == "spread"


def container(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources}


def test_class_requests_sum_containers_take_limits_as_requests_and_the_init_maximum() -> None:
    pod = {
        "spec": {
            "containers": [
                container({"rc.devplace.io/fast.nic": "1", "cpu": "1"}),
                container(limits={"rc.devplace.io/fast.nic": 2, "rc.devplace.io/nvidia.high.mem": "1"}),
            ],
            "initContainers": [container({"rc.devplace.io/nvidia.high.mem": "4", "rc.devplace.io/zero": "0"})],
        }
    }
    assert class_requests(pod) == {"fast.nic": 3, "nvidia.high.mem": 4}


@pytest.mark.parametrize(
    ("resources", "path"),
    [
        (container({"rc.devplace.io/x": "1.5"}), "spec.containers[0].resources.requests[rc.devplace.io/x]"),
        (container({"rc.devplace.io/x": "500m"}), "spec.containers[0].resources.requests[rc.devplace.io/x]"),
        (container({"rc.devplace.io/x": "-1"}), "spec.containers[0].resources.requests[rc.devplace.io/x]"),
        (container({"rc.devplace.io/x": "1K"}), "spec.containers[0].resources.requests[rc.devplace.io/x]"),
        (container({"rc.devplace.io/x": True}), "spec.containers[0].resources.requests[rc.devplace.io/x]"),
        (container(limits={"rc.devplace.io/X_": "1"}), "spec.containers[0].resources.limits[rc.devplace.io/X_]"),
        (
            container({"rc.devplace.io/x": "1"}, {"rc.devplace.io/x": "2"}),
            "spec.containers[0].resources.requests[rc.devplace.io/x]",
        ),
    ],
)
def test_a_bad_class_request_is_refused_naming_the_field(resources: dict[str, Any], path: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        class_requests({"spec": {"containers": [resources]}})
    assert caught.value.fields[0].path == path


def test_binding_annotations_round_trip_in_the_seeds_format() -> None:
    annotations = binding_annotations([("nvidia.high.mem", "gpus-a1b2c3", 1), ("fast.nic", "nics-000001", 2)])
    assert annotations == {
        "scheduler.alpha.kubernetes.io/resClass_fast.nic_nics-000001": "2",
        "scheduler.alpha.kubernetes.io/resClass_nvidia.high.mem_gpus-a1b2c3": "1",
    }
    assert parse_binding_annotations({**annotations, "other": "x"}) == {
        ("fast.nic", "nics-000001"): 2,
        ("nvidia.high.mem", "gpus-a1b2c3"): 1,
    }
    with pytest.raises(errors.Invalid) as caught:
        parse_binding_annotations({ANNOTATION_PREFIX + "nodevice": "1"})
    assert caught.value.fields[0].path == f"metadata.annotations[{ANNOTATION_PREFIX}nodevice]"


def test_class_status_counts_slots_of_matching_devices_and_their_use_through_any_class() -> None:
    classes = resolve_classes({**SEED_CLASSES, "gpu": one("Kind", "In", ["nvidia-gpu"])})
    devices = [
        device("big-0", "node-a", memory="40Gi", capacity=2),
        device("big-1", "node-b", memory="40Gi", capacity=2, free=1),  # one slot held, no annotation seen yet
        device("small-0", "node-a", memory="8Gi", capacity=4),
        device("nic-0", "node-a", "nic", speed="100GBPS"),
    ]
    bound = [
        {ANNOTATION_PREFIX + "gpu_big-0": "1"},  # asked through another class that also selects big-0
        {ANNOTATION_PREFIX + "nvidia.high.mem_big-1": "1"},  # the pod that holds big-1's slot: not counted twice
        {ANNOTATION_PREFIX + "gpu_small-0": "1"},
        {ANNOTATION_PREFIX + "broken": "x"},  # malformed: skipped
    ]
    high = class_status(classes["nvidia.high.mem"], devices, bound)
    assert (high.allocatable, high.requested) == (4, 2)
    gpu = class_status(classes["gpu"], devices, bound)
    assert (gpu.allocatable, gpu.requested) == (8, 3)
    assert class_status(classes["fast.nic"], devices, bound).to_wire() == {"allocatable": "1", "requested": "0"}
