"""A step's `expect` block against a snapshot: every field checked exactly, every mismatch named."""

from __future__ import annotations

from typing import Any

from devplace.agent import instance_name
from devplace.sim import Expect, Observed, check_expectations, device_resource, expectation_kinds, holder_label

CAM1 = instance_name("cams", "cam-1", "", True)
LOCAL_A = instance_name("cams", "usb-1", "node-a", False)
LOCAL_B = instance_name("cams", "usb-1", "node-b", False)


def instance(name: str, nodes: list[str], usage: dict[str, str], shared: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"configurationName": "cams", "nodes": nodes, "shared": shared, "deviceUsage": usage},
    }


def pod(name: str, phase: str, node: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }


OBSERVED = Observed(
    objects={
        "Instance": [
            instance(CAM1, ["node-a", "node-b"], {f"{CAM1}-0": "C:0:node-a", f"{CAM1}-1": "node-b", f"{CAM1}-2": ""}),
            instance(LOCAL_A, ["node-a"], {f"{LOCAL_A}-0": "D:default/claim-1:node-a"}, shared=False),
            instance(LOCAL_B, ["node-b"], {f"{LOCAL_B}-0": ""}, shared=False),
        ],
        "Pod": [
            pod("p1", "Running", "node-a", {"akri.sh/configuration": "cams"}),
            pod("p2", "Pending"),
            pod("p3", "Failed", "node-b"),
        ],
    },
    available={"node-a": {"akri.sh/cams": 1, f"akri.sh/{CAM1}": 1}, "node-b": {"akri.sh/cams": 2}},
    resource_prefix={"cams": "akri.sh"},
    decision={
        "apps": [
            {
                "name": "fwall",
                "clusters": [{"clusterProvider": "edge", "cluster": "c1"}],
                "rejected": [{"clusterProvider": "edge", "cluster": "c4", "reason": "insufficient cpu"}],
            }
        ]
    },
)


def test_holders_read_as_a_reader_says_them() -> None:
    assert [holder_label(h) for h in ["", "node-a", "C:3:node-b", "D:ns/claim:node-c"]] == [
        "free",
        "node-a",
        "node-b (CL)",
        "claim ns/claim",
    ]


def test_an_expectation_that_holds_finds_no_mismatch() -> None:
    expect = Expect(
        counts={"pods": 3, "pods[phase=Running]": 1, "instances[node=node-a]": 2, "pods[configuration=cams]": 1},
        phases={"p1": "Running", "default/p2": "Pending"},
        holders={
            "cams/cam-1": {"free": 1, "node-a (CL)": 1, "node-b": 1},
            "cams/usb-1": {"claim default/claim-1": 1, "free": 1},
        },
        available={"node-a": {"akri.sh/cams": 1, "device:cams/cam-1": 1}, "node-b": {"device:cams/cam-1": 0}},
        placement={"fwall": ["edge/c1"]},
        rejected={"fwall": {"edge/c4": "cpu"}},
    )
    assert check_expectations(expect, OBSERVED) == []


def test_every_field_that_differs_is_named_with_what_was_wanted_and_what_was_there() -> None:
    expect = Expect(
        counts={"pods[phase=Failed]": 2},
        phases={"p2": "Running", "ghost": "Running"},
        holders={"cams/cam-1": {"free": 3}},
        available={"node-a": {"akri.sh/cams": 2}},
        placement={"fwall": ["edge/c2"]},
        rejected={"fwall": {"edge/c4": "memory", "edge/c9": "cpu"}},
    )
    assert [str(m) for m in check_expectations(expect, OBSERVED)] == [
        "counts.pods[phase=Failed]: wanted 2, got 1",
        "phases.p2: wanted 'Running', got 'Pending'",
        "phases.ghost: wanted 'Running', got None",
        "holders.cams/cam-1: wanted {'free': 3}, got {'free': 1, 'node-a (CL)': 1, 'node-b': 1}",
        "available.node-a.akri.sh/cams: wanted 2, got 1",
        "placement.fwall: wanted ['edge/c2'], got ['edge/c1']",
        "rejected.fwall.edge/c4: wanted 'memory', got 'insufficient cpu'",
        "rejected.fwall.edge/c9: wanted 'cpu', got None",
    ]


def test_an_error_is_a_mismatch_unless_the_step_expected_it() -> None:
    failed = Observed(error="Invalid: spec.capacity: must be positive")
    assert [str(m) for m in check_expectations(Expect(counts={}), failed)] == [
        "error: wanted None, got 'Invalid: spec.capacity: must be positive'"
    ]
    assert check_expectations(Expect(error="must be positive"), failed) == []
    assert [str(m) for m in check_expectations(Expect(error="must be positive"), Observed())] == [
        "error: wanted 'must be positive', got None"
    ]


def test_a_node_that_is_down_has_no_availability_to_match() -> None:
    mismatches = check_expectations(Expect(available={"node-c": {"akri.sh/cams": 0}}), OBSERVED)
    assert [str(m) for m in mismatches] == ["available.node-c.akri.sh/cams: wanted 0, got None"]


def test_a_device_resource_names_the_instance_level_resource_of_its_instance() -> None:
    assert device_resource("device:cams/cam-1", OBSERVED) == f"akri.sh/{CAM1}"
    assert device_resource("device:cams/cam-9", OBSERVED) is None
    assert device_resource("akri.sh/cams", OBSERVED) == "akri.sh/cams"


def test_the_kinds_a_block_reads_are_listed_for_the_snapshot() -> None:
    expect = Expect(counts={"services": 1, "pods[phase=Running]": 1}, available={"node-a": {"device:cams/cam-1": 1}})
    assert expectation_kinds(expect) == {"Service", "Pod", "Instance"}


# -- slots and fields (added with the seed scenarios: races whose winners a file cannot name; any stored field) ------


def test_slots_count_free_and_held_slots_and_distinct_holders_without_naming_them() -> None:
    # cam-1: one slot free, one held by node-a's CL plugin, one by node-b; usb-1 (two local Instances): one claim
    assert check_expectations(Expect(slots={"cams/cam-1": {"free": 1, "held": 2, "holders": 2}}), OBSERVED) == []
    assert check_expectations(Expect(slots={"cams/usb-1": {"held": 1, "holders": 1}}), OBSERVED) == []
    wrong = Expect(slots={"cams/cam-1": {"free": 0, "holders": 2}, "cams/cam-9": {"held": 1}})
    assert [str(m) for m in check_expectations(wrong, OBSERVED)] == [
        "slots.cams/cam-1.free: wanted 0, got 1",
        "slots.cams/cam-9.held: wanted 1, got 0",
    ]
    assert expectation_kinds(wrong) == {"Instance"}


FIELDS = Observed(
    objects={
        "Pod": [
            {
                "metadata": {"name": "p", "namespace": "default", "annotations": {"example.io/a.b": "1"}},
                "spec": {"nodeName": "node-b"},
                "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled"}]},
            },
            {"metadata": {"name": "p", "namespace": "other"}, "spec": {"nodeName": "node-c"}},
        ],
        "ResourceClass": [{"metadata": {"name": "big.gpu"}, "status": {"allocatable": "1"}}],
    },
    decision={"state": "Planned", "apps": [{"name": "fwall", "clusters": [{"cluster": "c1", "score": 9.0}]}]},
)


def test_fields_read_any_stored_field_or_the_decision_by_path_and_compare_exactly() -> None:
    expect = Expect(
        fields={
            "Pod/p": {
                "spec.nodeName": "node-b",
                "metadata.annotations[example.io/a.b]": "1",
                "status.conditions[type=Ready].status": "True",
                "status.conditions[1].type": "PodScheduled",
            },
            "pods/other/p": {"spec.nodeName": "node-c"},
            "ResourceClass/big.gpu": {"status.allocatable": "1"},
            "decision": {"state": "Planned", "apps[name=fwall].clusters[0].score": 9.0},
        }
    )
    assert check_expectations(expect, FIELDS) == []
    assert expectation_kinds(expect) == {"Pod", "ResourceClass"}


def test_a_field_that_differs_or_is_missing_is_named_with_its_object_and_path() -> None:
    expect = Expect(
        fields={
            "ResourceClass/big.gpu": {"status.allocatable": 1},  # a quantity is a string: compared exactly
            "Pod/p": {"status.conditions[type=Nope].status": "True", "spec.containers[3]": None},
            "Pod/ghost": {"spec.nodeName": "node-a"},
            "decision": {"apps[name=analytics].clusters": []},
        }
    )
    assert [str(m) for m in check_expectations(expect, FIELDS)] == [
        "fields.ResourceClass/big.gpu.status.allocatable: wanted 1, got '1'",
        "fields.Pod/p.status.conditions[type=Nope].status: wanted 'True', got None",
        "fields.Pod/ghost.spec.nodeName: wanted 'node-a', got None",
        "fields.decision.apps[name=analytics].clusters: wanted [], got None",
    ]
