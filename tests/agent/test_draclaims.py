"""A ResourceClaim's allocation read as slots of Instances (the slice convention), and every way it can be wrong."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace.agent._draclaims import ClaimProblem, Result, Want, check_claim, device_index, device_name, plan
from devplace.agent._instances import InstanceRecord

CAMS = "cams-8120fe"
GPUS = "gpus-0a0b0c"


def record(name: str, capacity: int, namespace: str = "default") -> InstanceRecord:
    return InstanceRecord.from_wire(
        {
            "apiVersion": "devplace.io/v1alpha1",
            "kind": "Instance",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
            "spec": {
                "configurationName": name.rpartition("-")[0],
                "capacity": capacity,
                "nodes": ["node-a"],
                "deviceUsage": {f"{name}-{i}": "" for i in range(capacity)},
            },
        }
    )


INDEX = device_index([record(CAMS, 1), record(GPUS, 3)])


def claim(*results: dict[str, Any], uid: str = "u-1") -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "default", "uid": uid},
        "status": {"allocation": {"devices": {"results": list(results)}}},
    }


def result(device: str, request: str = "req", driver: str = "devplace.io", **more: Any) -> dict[str, Any]:
    return {"request": request, "driver": driver, "pool": "node-a", "device": device, **more}


def test_a_device_named_like_the_instance_takes_slots_of_any_name() -> None:
    planned = plan(claim(result(CAMS)), INDEX)
    assert planned.results == (Result("req", "node-a", CAMS, ("default", CAMS), None, 1),)
    assert planned.wants == {("default", CAMS): Want((), 1)}


def test_the_n_devices_form_names_the_slot_and_the_consumable_form_counts_slots() -> None:
    planned = plan(
        claim(
            result(f"{GPUS}-2", request="one"),
            result(
                GPUS, request="two", consumedCapacity={"slots": "2"}, shareID="5e1c0c1e-0000-4000-8000-0000000000aa"
            ),
            result("other", driver="gpu.example.com"),
        ),
        INDEX,
    )
    assert [r.request for r in planned.results] == ["one", "two"]
    assert planned.results[1].share_id == "5e1c0c1e-0000-4000-8000-0000000000aa"
    assert planned.wants == {("default", GPUS): Want((f"{GPUS}-2",), 2)}


@pytest.mark.parametrize(
    ("results", "problem"),
    [
        ([result("nope")], "status.allocation.devices.results[0]: device 'nope' of pool 'node-a' is no Instance"),
        (
            [result(GPUS, consumedCapacity={"slots": "1500m"})],
            "status.allocation.devices.results[0].consumedCapacity.slots: '1500m' is not a whole number of slots",
        ),
        (
            [result(GPUS, consumedCapacity={"slots": "lots"})],
            "status.allocation.devices.results[0].consumedCapacity.slots: 'lots' is not a quantity",
        ),
        (
            [result(GPUS, consumedCapacity="2")],
            "status.allocation.devices.results[0].consumedCapacity: a map of capacity name to quantity, not '2'",
        ),
        (
            [result(f"{GPUS}-0"), result(f"{GPUS}-0")],
            f"status.allocation.devices.results[1]: device '{GPUS}-0' is allocated twice in one claim",
        ),
    ],
)
def test_a_result_that_maps_to_no_slot_is_a_problem_naming_the_field(
    results: list[dict[str, Any]], problem: str
) -> None:
    with pytest.raises(ClaimProblem) as e:
        plan(claim(*results), INDEX)
    assert str(e.value).startswith(problem)


def test_a_device_name_two_instances_share_is_refused_not_guessed() -> None:
    index = device_index([record(CAMS, 1, "default"), record(CAMS, 1, "lab")])
    with pytest.raises(ClaimProblem, match=f"stands for several Instances \\(default/{CAMS}, lab/{CAMS}\\)"):
        plan(claim(result(CAMS)), index)


def test_a_long_instance_name_maps_through_the_cut_device_name() -> None:
    long = "c" * 70 + "-8120fe"
    index = device_index([record(long, 1)])
    assert plan(claim(result(device_name(long))), index).wants == {("default", long): Want((), 1)}


@pytest.mark.parametrize(
    ("stored", "problem"),
    [
        (claim(result(CAMS), uid="u-2"), "ResourceClaim default/c has UID u-2, not u-1: it was deleted and created"),
        ({"metadata": {"uid": "u-1"}}, "ResourceClaim default/c is not allocated (status.allocation is empty)"),
    ],
)
def test_check_claim_wants_the_same_uid_and_an_allocation(stored: dict[str, Any], problem: str) -> None:
    with pytest.raises(ClaimProblem) as e:
        check_claim(stored, "default", "c", "u-1")
    assert str(e.value).startswith(problem)


_values = st.one_of(
    st.none(), st.text(max_size=6), st.integers(-3, 5), st.dictionaries(st.text(max_size=4), st.text(max_size=4))
)


_devices = st.one_of(st.sampled_from([CAMS, GPUS, f"{GPUS}-1", f"{GPUS}-3"]), _values)
_capacity = st.one_of(_values, st.dictionaries(st.just("slots"), st.one_of(_values, st.sampled_from(["2", "1k", "0"]))))


@given(
    st.lists(
        st.fixed_dictionaries(
            {"driver": st.just("devplace.io")},
            optional={
                "request": _values,
                "pool": _values,
                "device": _devices,
                "shareID": _values,
                "consumedCapacity": _capacity,
            },
        )
    )
)
def test_any_allocation_either_plans_or_is_a_claim_problem(results: list[dict[str, Any]]) -> None:
    try:
        plan(claim(*results), INDEX)
    except ClaimProblem:
        pass
