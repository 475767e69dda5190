"""Release decisions: which held slots to free on pod deletion, and after the PodResources grace."""

from __future__ import annotations

from typing import Any

import pytest

from devplace.agent import _release_rules as releases
from devplace.agent import _slots as slots
from devplace.agent._instances import InstanceRecord
from devplace.agent._release_rules import HeldSlot

P = "devplace.io"


def record(name: str, usage: dict[str, str], configuration: str = "cams") -> InstanceRecord:
    obj: dict[str, Any] = {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "1"},
        "spec": {"configurationName": configuration, "capacity": len(usage), "nodes": ["node-a"], "deviceUsage": usage},
    }
    return InstanceRecord.from_wire(obj)


RECORDS = [
    record("cams-aaaaaa", {"cams-aaaaaa-0": "node-a", "cams-aaaaaa-1": "C:cams-aaaaaa:node-a"}),
    record("cams-bbbbbb", {"cams-bbbbbb-0": "node-b", "cams-bbbbbb-1": "C:cams-bbbbbb-1:node-a"}),
]


def test_held_by_node_keys_il_slots_by_instance_resource_and_cl_slots_by_vdev() -> None:
    held = releases.held_by_node(RECORDS, "node-a", P)
    assert held == {
        (f"{P}/cams-aaaaaa", "cams-aaaaaa-0"): HeldSlot(
            "default", "cams-aaaaaa", "cams-aaaaaa-0", slots.IL("node-a"), (f"{P}/cams-aaaaaa", "cams-aaaaaa-0")
        ),
        (f"{P}/cams", "cams-aaaaaa"): HeldSlot(
            "default", "cams-aaaaaa", "cams-aaaaaa-1", slots.CL("cams-aaaaaa", "node-a"), (f"{P}/cams", "cams-aaaaaa")
        ),
        (f"{P}/cams", "cams-bbbbbb-1"): HeldSlot(
            "default",
            "cams-bbbbbb",
            "cams-bbbbbb-1",
            slots.CL("cams-bbbbbb-1", "node-a"),
            (f"{P}/cams", "cams-bbbbbb-1"),
        ),
    }
    assert set(releases.held_by_node(RECORDS, "node-b", P)) == {(f"{P}/cams-bbbbbb", "cams-bbbbbb-0")}


def test_held_slots_are_keyed_by_their_configurations_group_unless_a_prefix_is_given() -> None:
    """The kubelet knows an akri.sh/v0 Configuration's devices as akri.sh/...: the Configuration's apiVersion names
    them (the Instance's own when the Configuration is gone), as the plugins registered them."""
    akri = {("default", "cams"): "akri.sh/v0"}
    assert set(releases.held_by_node(RECORDS, "node-b", None, akri)) == {("akri.sh/cams-bbbbbb", "cams-bbbbbb-0")}
    assert set(releases.held_by_node(RECORDS, "node-b", None)) == {("devplace.io/cams-bbbbbb", "cams-bbbbbb-0")}
    assert set(releases.held_by_node(RECORDS, "node-b", "example.com", akri)) == {
        ("example.com/cams-bbbbbb", "cams-bbbbbb-0")
    }


IL_KEY = (f"{P}/cams-aaaaaa", "cams-aaaaaa-0")
CL_KEY = (f"{P}/cams", "cams-aaaaaa")


@pytest.mark.parametrize(
    ("in_use", "absent_since", "allocated_at", "now", "due"),
    [
        (set(), {}, {}, 100.0, []),  # first observation of absence: the grace starts now
        (set(), {IL_KEY: 0.0, CL_KEY: 0.0}, {}, 299.0, []),
        (set(), {IL_KEY: 0.0, CL_KEY: 0.0}, {}, 300.0, [IL_KEY, CL_KEY]),
        ({IL_KEY}, {IL_KEY: 0.0, CL_KEY: 0.0}, {}, 300.0, [CL_KEY]),  # in use again: not released
        (set(), {IL_KEY: 0.0}, {IL_KEY: 200.0}, 300.0, []),  # allocated since: the grace restarts
        (set(), {}, {IL_KEY: 0.0}, 300.0, [IL_KEY]),  # never listed since its allocation: absent since then
        (set(), {}, {IL_KEY: 1.0}, 300.0, []),
        (set(), {IL_KEY: 100.0}, {IL_KEY: 0.0}, 300.0, []),  # an absence already recorded stands
    ],
)
def test_absences_release_only_after_the_grace(
    in_use: set[tuple[str, str]],
    absent_since: dict[tuple[str, str], float],
    allocated_at: dict[tuple[str, str], float],
    now: float,
    due: list[tuple[str, str]],
) -> None:
    held = {k: v for k, v in releases.held_by_node(RECORDS, "node-a", P).items() if k in (IL_KEY, CL_KEY)}
    since, released = releases.absences(held, in_use, absent_since, allocated_at, now, 300.0)
    assert [s.device for s in released] == due
    assert set(since) == {k for k in held if k not in in_use}


@pytest.mark.parametrize(
    ("others", "allocated_seq", "freed"),
    [
        (set(), {}, [IL_KEY, CL_KEY]),
        ({IL_KEY}, {}, [CL_KEY]),  # the kubelet already gave the device to another pod
        (set(), {CL_KEY: 9}, [IL_KEY]),  # allocated again after the observation
        (set(), {CL_KEY: 3}, [IL_KEY, CL_KEY]),
    ],
)
def test_pod_release_frees_the_gone_pods_devices_unless_reused(
    others: set[tuple[str, str]], allocated_seq: dict[tuple[str, str], int], freed: list[tuple[str, str]]
) -> None:
    held = releases.held_by_node(RECORDS, "node-a", P)
    unknown = (f"{P}/other", "x")  # a device this node does not hold is never a candidate
    out = releases.pod_release([IL_KEY, CL_KEY, unknown], 5, others, allocated_seq, held)
    assert sorted(s.device for s in out) == sorted(freed)
