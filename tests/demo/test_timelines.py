"""Running a scenario's timeline: steps on a real simulated fleet, samples after each, expectations, the report."""

from __future__ import annotations

import textwrap
from pathlib import Path

from devplace.demo import Report, run_scenario
from devplace.sim import load_scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CONFIG = """\
apiVersion: akri.sh/v0
kind: Configuration
metadata: {name: cams, namespace: default}
spec:
  discoveryHandler: {name: sim, discoveryDetails: "kind: camera"}
  capacity: 2
"""


def scenario(steps: str, *, head: str = "", settings: str = "") -> str:
    return (
        textwrap.dedent(
            """\
            apiVersion: devplace.io/v1alpha1
            kind: Scenario
            metadata: {name: t}
            spec:
              nodes: [{name: node-a, labels: {zone: east}}, {name: node-b}]
              devices:
                - {id: cam-1, nodes: [node-a, node-b], properties: {kind: camera}}
            """
        )
        + textwrap.indent(textwrap.dedent(settings), "  ")
        + textwrap.indent(textwrap.dedent(head), "  ")
        + "  steps:\n"
        + textwrap.indent(textwrap.dedent(steps), "    ")
    )


async def run(text: str, base: Path | None = None) -> Report:
    return await run_scenario(load_scenario(text, "t.yaml", base))


def manifests() -> str:
    return "manifests:\n" + textwrap.indent(yaml_list(CONFIG), "  ")


def yaml_list(doc: str) -> str:
    lines = doc.splitlines()
    return "\n".join(["- " + lines[0], *("  " + line for line in lines[1:])]) + "\n"


async def test_each_step_is_sampled_and_checked_and_the_report_says_what_held() -> None:
    report = await run(
        scenario(
            """\
            - run-pod: {name: p1, node: node-a, requests: {akri.sh/cams: 1}}
              expect:
                phases: {p1: Running}
                holders: {cams/cam-1: {free: 1, node-a (CL): 1}}
                available: {node-a: {akri.sh/cams: 0}, node-b: {akri.sh/cams: 1}}
                counts: {"nodes[zone=east]": 1, instances: 1}
            - delete: {kind: Pod, name: p1}
              expect: {holders: {cams/cam-1: {free: 2}}}
            """,
            head=manifests(),
        )
    )
    assert report.ok, [str(m) for s in report.steps for m in s.mismatches]
    assert report.expectations == (7, 7)
    assert [s.title for s in report.steps] == ["run-pod p1", "delete Pod p1"]
    assert [s.step for s in report.samples] == [-1, 0, 1]
    cl = [s.nodes["node-a"]["akri.sh/cams"]["available"] for s in report.samples]
    assert cl == [1, 0, 1]  # one camera: the CL resource offers at most one device per node (unique devices)
    assert report.samples[1].pods == {"Running": 1}
    (name, inst), *_ = report.samples[1].instances.items()
    assert inst["slots"] == {f"{name}-0": "node-a (CL)", f"{name}-1": "free"}
    wire = report.to_wire()
    assert wire["ok"] is True
    assert wire["expectations"] == {"held": 7, "checked": 7}
    assert [s["action"] for s in wire["steps"]] == ["run-pod", "delete"]


async def test_a_wrong_expectation_fails_the_run_naming_the_step_and_field_and_the_run_goes_on() -> None:
    report = await run(
        scenario(
            """\
            - run-pod: {name: p1, node: node-a, requests: {akri.sh/cams: 1}}
              expect: {holders: {cams/cam-1: {free: 2}}}
            - delete: {kind: Pod, name: p1}
              expect: {holders: {cams/cam-1: {free: 2}}}
            """,
            head=manifests(),
        )
    )
    assert not report.ok
    assert [(s.index, s.ok) for s in report.steps] == [(0, False), (1, True)]
    assert [str(m) for m in report.steps[0].mismatches] == [
        "holders.cams/cam-1: wanted {'free': 2}, got {'free': 1, 'node-a (CL)': 1}"
    ]


async def test_a_step_that_fails_unexpectedly_stops_the_run() -> None:
    report = await run(
        scenario(
            """\
            - delete: {kind: Pod, name: ghost}
            - settle: true
            """
        )
    )
    assert not report.ok
    assert len(report.steps) == 1
    assert report.steps[0].stopped
    assert "ghost" in str(report.steps[0].error)


async def test_an_expected_error_holds_and_changes_nothing() -> None:
    bad = CONFIG.replace("capacity: 2", "capacity: -1")
    report = await run(
        scenario(
            "- apply:\n"
            + textwrap.indent(yaml_list(bad), "    ")
            + "  expect: {error: capacity, counts: {configurations: 0}}\n"
        )
    )
    assert report.ok, [str(m) for s in report.steps for m in s.mismatches]
    assert "spec.capacity" in str(report.steps[0].error)


async def test_advance_moves_simulated_time_and_an_offline_device_goes_after_its_grace() -> None:
    report = await run(
        scenario(
            """\
            - unplug: {device: cam-1}
              expect: {counts: {instances: 1}}
            - advance: 4m
              expect: {counts: {instances: 1}}
            - advance: 2m
              expect: {counts: {instances: 0}}
            """,
            head=manifests(),
            settings="settings: {offlineGrace: 5m}\n",
        )
    )
    assert report.ok, [str(m) for s in report.steps for m in s.mismatches]
    assert [s.sim_time for s in report.steps] == [0.0, 240.0, 360.0]


async def test_a_node_taken_down_has_no_sample_and_comes_back() -> None:
    report = await run(
        scenario(
            """\
            - node-down: node-b
              expect: {counts: {nodes: 1}}
            - node-up: node-b
              expect: {counts: {nodes: 2}, available: {node-b: {akri.sh/cams: 1}}}
            """,
            head=manifests(),
        )
    )
    assert report.ok, [str(m) for s in report.steps for m in s.mismatches]
    assert report.samples[1].down == ["node-b"]
    assert "node-b" not in report.samples[1].nodes
    assert report.samples[2].down == []


async def test_fleet_requests_reach_the_real_api_and_a_plan_is_checked() -> None:
    text = scenario(
        """\
        - plan: /v2/projects/my-proj1/composite-apps/my-capp1/v1.0/deployment-intent-groups/my-dig1
          expect:
            placement: {fwall: [edge/cluster-1], analytics: [edge/cluster-3]}
            rejected: {fwall: {edge/cluster-4: cpu}}
        """,
        head="fleet: {file: fleet/seed-004.yaml}\n",
    )
    report = await run(text, base=EXAMPLES)
    assert report.ok, [str(m) for s in report.steps for m in s.mismatches]
    assert report.samples[-1].decision["fwall"]["clusters"] == ["edge/cluster-1"]
    assert "cpu" in report.samples[-1].decision["fwall"]["rejected"]["edge/cluster-4"]
