"""Scenario files: durations, the models, every problem refused with its line and column, the JSON Schema."""

from __future__ import annotations

import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.sim import ACTIONS, load_scenario, load_scenario_file, parse_duration, scenario_schema
from devplace.sim._scenarios import parse_field_path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

HEAD = """\
apiVersion: devplace.io/v1alpha1
kind: Scenario
metadata: {name: t}
spec:
  nodes: [{name: node-a}, {name: node-b}]
  devices:
    - {id: cam-1, nodes: [node-a, node-b], properties: {kind: camera}}
"""


def scenario(steps: str) -> str:
    return HEAD + "  steps:\n" + textwrap.indent(textwrap.dedent(steps), "    ")


def problems(text: str) -> list[str]:
    with pytest.raises(errors.Invalid) as caught:
        load_scenario(text, "s.yaml")
    return caught.value.message.splitlines()


# -- durations -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0), ("250ms", 0.25), ("1.5s", 1.5), (12, 12.0), (0.5, 0.5)],
)
def test_a_duration_is_read_in_go_units_or_as_seconds(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5x", "", "m5", "5 m", "-3s", -1, True, "1h-2m"])
def test_a_malformed_duration_is_refused(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@given(st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(["h", "m", "s", "ms"])), min_size=1, max_size=4))
def test_a_duration_is_the_sum_of_its_parts(parts: list[tuple[int, str]]) -> None:
    unit = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    text = "".join(f"{n}{u}" for n, u in parts)
    assert parse_duration(text) == pytest.approx(sum(n * unit[u] for n, u in parts))


# -- loading ---------------------------------------------------------------------------------------------------------


def test_a_valid_scenario_loads_with_its_steps_actions_and_expectations() -> None:
    loaded = load_scenario(
        scenario(
            """\
            - say: hello
              plug: {device: cam-2, nodes: [node-a]}
              expect: {counts: {"instances[node=node-a]": 2}}
            - advance: 5m
            - node-down: node-b
            - unplug: {device: cam-2}
            - expect: {phases: {p: Running}}
            """
        )
    )
    steps = loaded.spec.steps
    assert [s.action for s in steps] == ["plug", "advance", "node-down", "unplug", None]
    assert steps[1].advance == 300.0
    assert [s.title() for s in steps] == ["plug cam-2", "advance 300s", "node-down node-b", "unplug cam-2", "check"]
    assert steps[0].expect is not None
    assert steps[0].expect.counts == {"instances[node=node-a]": 2}


def test_an_unknown_node_is_refused_with_its_line_and_column() -> None:
    assert problems(scenario("- node-down: node-z\n")) == [
        "s.yaml:9:7: spec.steps[0].node-down: unknown node 'node-z' (nodes: node-a, node-b)"
    ]


def test_an_unknown_device_is_refused_where_it_is_named() -> None:
    assert problems(scenario("- unplug: {device: cam-9}\n")) == [
        "s.yaml:9:16: spec.steps[0].unplug.device: unknown device 'cam-9': not declared nor plugged before"
    ]


def test_a_device_plugged_by_an_earlier_step_may_be_unplugged_later_but_not_before() -> None:
    load_scenario(scenario("- plug: {device: cam-9, nodes: [node-a]}\n- unplug: {device: cam-9}\n"))
    assert problems(scenario("- unplug: {device: cam-9}\n- plug: {device: cam-9, nodes: [node-a]}\n"))[0].startswith(
        "s.yaml:9:16: spec.steps[0].unplug.device: unknown device 'cam-9'"
    )


def test_a_malformed_duration_is_refused_with_its_line_and_column() -> None:
    assert problems(scenario("- advance: 5 minutes\n")) == [
        "s.yaml:9:7: spec.steps[0].advance: malformed duration '5 minutes': use units h, m, s, ms (e.g. 30s, 5m, 1h30m)"
    ]


def test_an_expectation_on_an_unknown_field_is_refused() -> None:
    assert problems(scenario("- settle: true\n  expect: {instancez: 2}\n")) == [
        "s.yaml:10:16: spec.steps[0].expect.instancez: unknown field"
    ]


def test_an_expectation_on_an_unknown_node_or_device_is_refused() -> None:
    assert problems(
        scenario(
            """\
            - settle: true
              expect:
                available: {node-q: {akri.sh/x: 1}}
                holders: {akri-onvif/cam-7: {free: 1}}
            """
        )
    ) == [
        "s.yaml:11:21: spec.steps[0].expect.available.node-q: unknown node 'node-q' (nodes: node-a, node-b)",
        "s.yaml:12:19: spec.steps[0].expect.holders.akri-onvif/cam-7: unknown device 'cam-7': not declared nor "
        "plugged before this step",
    ]


def test_a_step_that_does_two_things_is_refused() -> None:
    assert problems(scenario("- node-down: node-a\n  node-up: node-b\n")) == [
        "s.yaml:9:7: spec.steps[0]: a step does one thing; this one has node-down, node-up"
    ]


def test_every_problem_is_reported_at_once() -> None:
    found = problems(scenario("- advance: soon\n- bogus: 1\n- plug: {device: cam-2}\n"))
    assert found == [
        "s.yaml:9:7: spec.steps[0].advance: malformed duration 'soon': use units h, m, s, ms (e.g. 30s, 5m, 1h30m)",
        "s.yaml:10:7: spec.steps[1].bogus: unknown field",
        "s.yaml:11:7: spec.steps[2].plug.nodes: required",
    ]


def test_malformed_yaml_is_refused_with_where_the_parser_stopped() -> None:
    assert problems(HEAD + "  steps: [\n") == [
        "s.yaml:9:1: malformed YAML: expected the node content, but found '<stream end>'"
    ]


def test_a_device_seen_by_an_undeclared_node_is_refused() -> None:
    text = HEAD.replace("nodes: [node-a, node-b], properties", "nodes: [node-a, node-x], properties")
    assert problems(text) == ["s.yaml:7:35: spec.devices[0].nodes[1]: unknown node 'node-x' (nodes: node-a, node-b)"]


def test_a_malformed_count_key_is_refused() -> None:
    assert problems(scenario("- expect: {counts: {'pods[phase]': 1}}\n")) == [
        "s.yaml:9:25: spec.steps[0].expect.counts.pods[phase]: write a kind, optionally with filters: "
        "pods[phase=Running,node=node-a]"
    ]


def test_a_count_of_an_unknown_kind_is_refused() -> None:
    assert problems(scenario("- expect: {counts: {gadgets: 1}}\n")) == [
        "s.yaml:9:25: spec.steps[0].expect.counts.gadgets: unknown kind 'gadgets' (write a kind or its plural: pods, "
        "instances)"
    ]


def test_a_missing_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(errors.Invalid, match="cannot read"):
        load_scenario_file(tmp_path / "absent.yaml")


# -- the schema ------------------------------------------------------------------------------------------------------


def test_the_schema_lists_every_step_action() -> None:
    step = scenario_schema()["$defs"]["Step"]["properties"]
    assert set(ACTIONS) <= set(step)
    duration = step["advance"]["anyOf"][0]["anyOf"]
    assert [d["type"] for d in duration] == ["number", "string"]


@pytest.mark.parametrize("path", sorted((EXAMPLES / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_scenario_loads_and_satisfies_the_published_schema(path: Path) -> None:
    load_scenario_file(path)
    jsonschema.validate(yaml.safe_load(path.read_text()), scenario_schema())


def test_the_schema_refuses_what_the_loader_refuses() -> None:
    doc = yaml.safe_load(scenario("- advance: 5 minutes\n"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, scenario_schema())


# -- field paths and object keys of `expect.fields` (added with the seed scenarios) ----------------------------------


@pytest.mark.parametrize(
    ("path", "steps"),
    [
        ("status.phase", ["status", "phase"]),
        ("status.conditions[type=PodScheduled].message", ["status", "conditions", ("type", "PodScheduled"), "message"]),
        ("metadata.annotations[example.io/a_b.c]", ["metadata", "annotations", "example.io/a_b.c"]),
        ("apps[name=fwall].clusters[0].score", ["apps", ("name", "fwall"), "clusters", 0, "score"]),
        ("items[0][1]", ["items", 0, 1]),
        ("[k=]", [("k", "")]),
    ],
)
def test_a_field_path_is_dotted_keys_with_indexes_selectors_and_bracketed_keys(path: str, steps: list[object]) -> None:
    assert parse_field_path(path) == steps


@pytest.mark.parametrize("path", ["", "a.", ".a", "a..b", "a[]", "a[0", "a]b", "a[0]b", "a[=x]", "a.[0]"])
def test_a_malformed_field_path_is_refused(path: str) -> None:
    assert parse_field_path(path) is None


@given(st.lists(st.from_regex(r"[a-zA-Z][a-zA-Z0-9_-]{0,8}", fullmatch=True), min_size=1, max_size=5))
def test_dotted_keys_parse_back_to_themselves(keys: list[str]) -> None:
    assert parse_field_path(".".join(keys)) == keys


def test_an_expectation_on_a_malformed_object_key_or_field_path_is_refused() -> None:
    lines = problems(
        scenario(
            """\
            - settle: true
              expect:
                fields:
                  Pod: {spec.nodeName: a}
                  Gizmo/x: {a: 1}
                  Pod/p: {a..b: 1}
            """
        )
    )
    assert lines == [
        "s.yaml:12:11: spec.steps[0].expect.fields.Pod: write <Kind>/<name>, <Kind>/<namespace>/<name> or decision, "
        "not 'Pod'",
        "s.yaml:13:11: spec.steps[0].expect.fields.Gizmo/x: unknown kind 'Gizmo' "
        "(write a kind or its plural: Pod, pods)",
        "s.yaml:14:19: spec.steps[0].expect.fields.Pod/p.a..b: write a field path: status.phase, items[0].name, "
        "conditions[type=Ready].status",
    ]
