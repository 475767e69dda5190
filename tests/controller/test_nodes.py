"""Node cleanup decisions: when a node is gone, and an Instance without it."""

from __future__ import annotations

import pytest

from devplace.controller import _nodes as nodes
from devplace.controller._nodes import NodeState
from devplace.store._cas import DELETE
from tests.controller.samples import instance, node

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


@pytest.mark.parametrize(
    ("state", "deleted", "now", "gone", "wake_at"),
    [
        (NodeState("n", True), False, T0 + 9999, False, None),  # Ready: never gone
        (None, True, T0, True, None),  # deleted: at once
        (NodeState("n", False, T0), False, T0 + 299, False, T0 + 300),  # NotReady: within the grace
        (NodeState("n", False, T0), False, T0 + 300, True, None),  # NotReady past the grace
        (NodeState("n", False, None), False, T0 + 300, True, None),  # no transition time: since first noticed (T0)
        (None, False, T0 + 100, False, T0 + 300),  # never registered: grace from first noticed
        (None, False, T0 + 300, True, None),
    ],
)
def test_when_a_node_is_gone(
    state: NodeState | None, deleted: bool, now: float, gone: bool, wake_at: float | None
) -> None:
    known = {"n": state} if state is not None else {}
    result = nodes.gone_nodes(["n"], known, deleted={"n"} if deleted else set(), noticed={"n": T0}, now=now, grace=300)
    assert result == (frozenset({"n"} if gone else set()), wake_at)


@pytest.mark.parametrize(("status", "ready"), [("True", True), ("False", False), ("Unknown", False)])
def test_node_state_reads_the_ready_condition(status: str, ready: bool) -> None:
    state = nodes.node_state(node("n", ready=status))
    assert state.ready is ready
    assert state.not_ready_since == (None if ready else T0)


@pytest.mark.parametrize(
    ("holder", "expected"), [("", None), ("node-a", "node-a"), ("C:0:node-b", "node-b"), ("C:v:1:node-c", "node-c")]
)
def test_holder_node(holder: str, expected: str | None) -> None:
    assert nodes.holder_node(holder) == expected


def test_a_gone_node_leaves_the_instance_and_its_slots_are_freed() -> None:
    inst = instance(
        "cam-8120fe",
        ["node-a", "node-b"],
        capacity=3,
        usage={"cam-8120fe-0": "node-b", "cam-8120fe-1": "C:1:node-b", "cam-8120fe-2": "node-a"},
    )
    out = nodes.without_nodes(inst, frozenset({"node-b"}))
    assert isinstance(out, dict)
    assert out["spec"]["nodes"] == ["node-a"]
    assert out["spec"]["deviceUsage"] == {"cam-8120fe-0": "", "cam-8120fe-1": "", "cam-8120fe-2": "node-a"}
    assert inst["spec"]["nodes"] == ["node-a", "node-b"]  # the input is not changed


def test_an_untouched_instance_is_not_rewritten_and_an_orphan_is_deleted() -> None:
    inst = instance("cam-8120fe", ["node-a"])
    assert nodes.without_nodes(inst, frozenset({"node-z"})) is None
    assert nodes.without_nodes(inst, frozenset({"node-a"})) is DELETE
