"""Device kinds by field: Configuration discoveryProperties (Akri's value | valueFrom: secretKeyRef | configMapKeyRef)
and an Instance's deviceUsage (the slot rules: names, holders, capacity), each refusal naming its field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import api, errors
from devplace.api import _devices as devices
from devplace.api import _holders as holders
from devplace.api import normalize
from devplace.api._holders import CL, FREE, IL

P = "spec.discoveryHandler.discoveryProperties"


def configuration(*props: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "onvif"},
        "spec": {"discoveryHandler": {"name": "onvif", "discoveryProperties": list(props)}},
    }


def test_akri_discovery_properties_load_unchanged() -> None:
    props = [
        {"name": "realm", "value": "lab"},
        {"name": "empty"},
        {"name": "user", "valueFrom": {"secretKeyRef": {"name": "auth", "key": "username", "optional": False}}},
        {"name": "tmo", "valueFrom": {"configMapKeyRef": {"name": "s", "namespace": "edge", "key": "timeout"}}},
    ]
    assert normalize(configuration(*props))["spec"]["discoveryHandler"]["discoveryProperties"] == props


@pytest.mark.parametrize(
    ("prop", "message"),
    [
        (
            {"name": "p", "value": "x", "valueFrom": {"secretKeyRef": {"name": "a", "key": "k"}}},
            f"{P}[1]: set value or valueFrom, not both",
        ),
        (
            {"name": "p", "valueFrom": {}},
            f"{P}[1].valueFrom: exactly one of secretKeyRef or configMapKeyRef must be set",
        ),
        (
            {
                "name": "p",
                "valueFrom": {
                    "secretKeyRef": {"name": "a", "key": "k"},
                    "configMapKeyRef": {"name": "a", "key": "k"},
                },
            },
            f"{P}[1].valueFrom: exactly one of secretKeyRef or configMapKeyRef must be set",
        ),
        (
            {"name": "p", "valueFrom": {"secretKeyRef": {"name": "a"}}},
            f"{P}[1].valueFrom.secretKeyRef.key: Field required",
        ),
        (
            {"name": "p", "valueFrom": {"secretKeyRef": {"name": "a", "key": ""}}},
            f"{P}[1].valueFrom.secretKeyRef.key: String should have at least 1 character",
        ),
        (
            {"name": "p", "valueFrom": {"configMapKeyRef": {"name": "Bad_Name", "key": "k"}}},
            f"{P}[1].valueFrom.configMapKeyRef.name: 'Bad_Name' must consist of lower case alphanumeric characters",
        ),
        (
            {"name": "p", "valueFrom": {"secretKeyRef": {"name": "a", "key": "k", "namespace": "a.b"}}},
            f"{P}[1].valueFrom.secretKeyRef.namespace: 'a.b' must consist of lower case alphanumeric characters",
        ),
        (
            {"name": "p", "valueFrom": {"secretKeyRef": {"name": "a", "key": "k", "colour": "red"}}},
            f"{P}[1].valueFrom.secretKeyRef.colour: Extra inputs are not permitted",
        ),
        ({"name": "", "value": "x"}, f"{P}[1].name: String should have at least 1 character"),
    ],
)
def test_a_malformed_discovery_property_is_invalid_naming_its_field(prop: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        normalize(configuration({"name": "ok", "value": "fine"}, prop))
    assert info.value.message.startswith(message), info.value.message
    assert [f.path for f in info.value.fields] == [message.split(": ", 1)[0]]


# -- Instance deviceUsage: one rule set (api.devices), used by the API, the agent, the scheduler and the controller --


def instance(usage: dict[str, Any] | None, capacity: int = 2, api_version: str = "akri.sh/v0") -> dict[str, Any]:
    spec: dict[str, Any] = {"configurationName": "cam", "capacity": capacity, "nodes": ["node-a", "node-b"]}
    if usage is not None:
        spec["deviceUsage"] = usage
    return {
        "apiVersion": api_version,
        "kind": "Instance",
        "metadata": {"name": "cam-8120fe", "namespace": "default"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("usage", "capacity"),
    [
        ({"cam-8120fe-0": "", "cam-8120fe-1": ""}, 2),  # as the agent creates it
        ({"cam-8120fe-0": "node-a", "cam-8120fe-1": "C:cam-8120fe:node-b"}, 2),  # Akri's three holder forms
        ({"cam-8120fe-0": "C:cam-8120fe-0:node-b.example"}, 1),  # a per-slot vdev, a dotted node name
        ({"cam-8120fe-0": "", "cam-8120fe-3": "node-zzz"}, 1),  # held beyond capacity: retiring after a shrink
        ({"cam-8120fe-0": "node-c"}, 1),  # a node no longer in `nodes` keeps its slot until it is released
        ({}, 3),  # not written yet: the agent of a listed node writes the free slots
        (None, 3),
    ],
)
def test_an_instance_following_the_slot_rules_is_accepted(usage: dict[str, str] | None, capacity: int) -> None:
    assert normalize(instance(usage, capacity))["spec"]["deviceUsage"] == (usage or {})


@pytest.mark.parametrize(
    ("usage", "capacity", "path", "reason"),
    [
        ({"cam-8120fe-0": "C:::"}, 1, "cam-8120fe-0", "'C:::' is not a configuration-level holder 'C:<vdev>:<node>'"),
        ({"cam-8120fe-0": "C::node-a"}, 1, "cam-8120fe-0", "is not a configuration-level holder"),
        (
            {"cam-8120fe-0": "Node A"},
            1,
            "cam-8120fe-0",
            "'Node A' is neither empty, a node name, 'C:<vdev>:<node>' nor 'D:<namespace>/<claim>:<node>'",
        ),
        ({"cam-8120fe-0": "", "bogus": ""}, 1, "bogus", "not a slot of cam-8120fe: slots are named 'cam-8120fe-<i>'"),
        ({"cam-8120fe-0": "", "cam-8120fe-01": ""}, 1, "cam-8120fe-01", "not a slot of cam-8120fe"),
        ({"cam-8120fe-0": "", "other-0": "node-a"}, 1, "other-0", "not a slot of cam-8120fe"),
        ({"cam-8120fe-0": "", "cam-8120fe-1024": "node-a"}, 1, "cam-8120fe-1024", "not a slot of cam-8120fe"),
        ({"cam-8120fe-0": "", "cam-8120fe-1": ""}, 1, "cam-8120fe-1", "free, and beyond capacity 1"),
        ({"cam-8120fe-0": ""}, 3, "cam-8120fe-1", "missing (and 1 more): an Instance of capacity 3 has the slots"),
        ({"cam-8120fe-0": 5}, 1, "cam-8120fe-0", "must be a string, not number 5"),
    ],
)
def test_an_instance_breaking_a_slot_rule_is_invalid_naming_the_slot(
    usage: dict[str, Any], capacity: int, path: str, reason: str
) -> None:
    with pytest.raises(errors.Invalid) as info:
        normalize(instance(usage, capacity))
    assert [f.path for f in info.value.fields] == [f"spec.deviceUsage.{path}"]
    assert reason in info.value.fields[0].reason, info.value.message


def test_the_issues_instance_is_refused_with_every_broken_slot_named() -> None:
    usage = {"cam-8120fe-0": "C:::", "cam-8120fe-1": "node-zzz", "slot-x": ""}
    with pytest.raises(errors.Invalid) as info:
        normalize(instance(usage, capacity=1))
    assert [f.path for f in info.value.fields] == ["spec.deviceUsage.cam-8120fe-0", "spec.deviceUsage.slot-x"]
    # "node-zzz" is a well-formed holder on a slot beyond capacity 1: a retiring hold, which the rules allow


def test_without_usage_checks_everything_but_the_usage() -> None:
    bad = instance({"cam-8120fe-0": "C:::", "x": 7})
    assert devices.Instance.without_usage(bad).spec.device_usage == {}
    bad["spec"]["capacity"] = 0
    with pytest.raises(errors.Invalid) as info:
        devices.Instance.without_usage(bad)
    assert [f.path for f in info.value.fields] == ["spec.capacity"]


_names = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,12}[a-z0-9])?", fullmatch=True)
_holders = st.one_of(st.just(FREE), st.builds(IL, _names), st.builds(CL, _names, _names))


@given(st.integers(1, 8), st.lists(_holders, min_size=8, max_size=8), st.lists(st.integers(8, 1023), max_size=3))
def test_usages_built_by_the_rules_have_no_problems(capacity: int, held: list[Any], retiring: list[int]) -> None:
    usage = {holders.slot_name("cam", i): holders.format_holder(held[i]) for i in range(capacity)}
    for i in retiring:
        usage[holders.slot_name("cam", i)] = "node-a"
    assert list(holders.usage_problems("cam", capacity, usage)) == []


@given(st.dictionaries(st.text(max_size=12), st.text(max_size=12), max_size=5), st.integers(1, 4))
def test_usage_problems_name_only_slots_of_the_usage_or_missing_ones(usage: dict[str, str], capacity: int) -> None:
    canonical = {holders.slot_name("cam", i) for i in range(capacity)}
    for problem in holders.usage_problems("cam", capacity, usage):
        slot = problem.path.removeprefix("spec.deviceUsage.")
        assert slot in usage or slot in canonical


# -- DRA holders (issue #25/#26: one slot rule for both paths) --------------------------------------------------------


def test_a_dra_holder_round_trips_and_names_its_node() -> None:
    from devplace.api import DRA, format_holder, named_node, parse_holder

    holder = parse_holder("D:team-a/train-1-gpu-x7k2m:node-b")
    assert holder == DRA("team-a", "train-1-gpu-x7k2m", "node-b")
    assert format_holder(holder) == "D:team-a/train-1-gpu-x7k2m:node-b"
    assert named_node("D:team-a/train-1-gpu-x7k2m:node-b") == "node-b"
    for bad in ("D:no-slash:node", "D:a/b", "D:A/b:node", "D:a/b:"):
        with pytest.raises(errors.Invalid, match="DRA holder"):
            parse_holder(bad)


def test_dra_taken_takes_a_named_slot_or_free_ones_and_refuses_a_slot_someone_else_holds() -> None:
    from devplace.api import DRA, dra_released, dra_taken

    holder = DRA("ns", "c", "node-b")
    usage = {"gpu-0": "node-a", "gpu-1": "", "gpu-2": ""}
    assert dra_taken("gpu", usage, holder, slot=1) == {"gpu-0": "node-a", "gpu-1": "D:ns/c:node-b", "gpu-2": ""}
    with pytest.raises(errors.Conflict, match="gpu-0 is held by 'node-a'"):
        dra_taken("gpu", usage, holder, slot=0)
    two = dra_taken("gpu", usage, holder, count=2)
    assert two == {"gpu-0": "node-a", "gpu-1": "D:ns/c:node-b", "gpu-2": "D:ns/c:node-b"}
    assert dra_taken("gpu", two, holder, count=2) == two  # a retry takes nothing more
    with pytest.raises(errors.Conflict, match="has 0 free slot"):
        dra_taken("gpu", two, DRA("ns", "other", "node-b"), count=1)
    assert dra_released(two, "ns", "c") == usage


def test_an_instance_without_claims_frees_only_their_slots_and_says_when_nothing_changes() -> None:
    inst = {
        "kind": "Instance",
        "metadata": {"name": "cam"},
        "spec": {"deviceUsage": {"cam-0": "D:ns/a:node-a", "cam-1": "D:ns/b:node-b", "cam-2": "node-a"}},
    }
    freed = api.instance_without_claims(inst, [("ns", "a")])
    assert freed is not None
    assert freed["spec"]["deviceUsage"] == {"cam-0": "", "cam-1": "D:ns/b:node-b", "cam-2": "node-a"}
    assert inst["spec"]["deviceUsage"]["cam-0"] == "D:ns/a:node-a"  # the input is left as it was
    assert api.instance_without_claims(inst, [("ns", "z"), ("other", "a")]) is None


def test_a_holder_read_again_is_the_value_read_before_and_a_bad_one_is_refused_each_time_naming_its_path() -> None:
    """Holders are remembered by wire value (a watch event moves a slot to a holder seen before); a refusal is not
    remembered: each names the path it was asked with."""
    first = holders.parse_holder("C:cams-0:node-a")
    assert first == CL("cams-0", "node-a")
    assert holders.parse_holder("C:cams-0:node-a") is first
    assert holders.parse_holder("") is FREE
    for path in ("spec.deviceUsage.cams-0", "spec.deviceUsage.cams-1"):
        with pytest.raises(errors.Invalid) as e:
            holders.parse_holder("Node A", path)
        assert [f.path for f in e.value.fields] == [path]
    with pytest.raises(errors.Invalid, match="a holder is a string, not int"):
        holders.parse_holder(7, "spec.deviceUsage.cams-2")
    for i in range(holders._PARSED_MAX + 1):  # bounded: a flood of distinct holders starts the memory over
        holders.parse_holder(f"node-{i}")
    assert len(holders._parsed) <= holders._PARSED_MAX
    assert holders.parse_holder("node-7") == IL("node-7")
