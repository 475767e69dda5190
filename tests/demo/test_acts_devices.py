"""The pure parts of acts 2 and 3: the `x/y/z` view, holder labels, and the watch-based double-booking checks the
acts draw on (`devplace.sim._invariants`)."""

from __future__ import annotations

import pytest

from devplace.demo._acts_devices import holder_label, view
from devplace.sim._invariants import UsageHistory, double_bookings


def test_view_joins_free_counts_in_resource_order() -> None:
    assert view({"cl": 0, "a": 1, "b": 1}, ["cl", "a", "b"]) == "0/1/1"
    assert view({"a": 2}, ["cl", "a"]) == "0/2"


@pytest.mark.parametrize(
    ("holder", "label"),
    [
        ("", "free"),
        ("node-a", "node-a (IL)"),
        ("C:akri-onvif-8120fe:node-a", "node-a (CL)"),
        ("C:cam:x:node-b", "node-b (CL)"),
    ],
)
def test_holder_label_names_the_node_and_the_plugin_level(holder: str, label: str) -> None:
    assert holder_label(holder) == label


@pytest.mark.parametrize(
    ("states", "found"),
    [
        ([{"s-0": ""}, {"s-0": "node-a"}, {"s-0": ""}, {"s-0": "node-b"}], []),  # claim, release, claim
        ([{"s-0": "node-a"}, {"s-0": "node-a", "s-1": "node-b"}], []),
        ([{"s-0": "node-a"}, {"s-0": "node-b"}], ["i s-0: 'node-a' -> 'node-b'"]),
        ([{"s-0": "node-a"}, {"s-0": "C:v:node-a"}], ["i s-0: 'node-a' -> 'C:v:node-a'"]),  # IL hold is not CL
        ([{"s-0": "node-a"}, {}], []),  # the Instance went away
    ],
)
def test_double_bookings_are_slots_passed_straight_between_holders(
    states: list[dict[str, str]], found: list[str]
) -> None:
    assert double_bookings({"i": states}) == found


def test_the_usage_history_keeps_each_distinct_state_once() -> None:
    history = UsageHistory()
    obj = {"metadata": {"name": "i"}, "spec": {"deviceUsage": {"i-0": ""}}}
    history.record("ADDED", obj)
    history.record("MODIFIED", obj)
    history.record("MODIFIED", {"metadata": {"name": "i"}, "spec": {"deviceUsage": {"i-0": "n"}}})
    history.record("DELETED", obj)
    assert history.states == {"i": [{"i-0": ""}, {"i-0": "n"}, {}]}
    assert history.latest() == {"i": {}}
