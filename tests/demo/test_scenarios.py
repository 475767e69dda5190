"""The shipped scenarios (every seed under examples/scenarios, and examples/demo.yaml, the main job) run and keep their
promises; a broken promise is named by step and field; a bad file is refused with line and column before anything runs.

These replace the narrated tour's acts: what each act checked in Python is an `expect` block in a scenario file now.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from devplace import errors
from devplace.demo import Report, run_scenario
from devplace.sim import load_scenario, load_scenario_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHIPPED = [*sorted(EXAMPLES.glob("scenarios/*.yaml")), EXAMPLES / "demo.yaml"]


def failures(report: Report) -> list[str]:
    return [f"step {s.index + 1} ({s.title}): {m}" for s in report.steps for m in s.mismatches]


def test_every_seed_has_its_own_scenario() -> None:
    names = {p.stem for p in SHIPPED}
    assert {"seed-000", "seed-000-per-usage", "seed-001", "seed-002", "seed-003", "seed-004", "demo"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
async def test_a_shipped_scenario_keeps_every_expectation(path: Path) -> None:
    report = await run_scenario(load_scenario_file(path))
    assert failures(report) == []
    held, checked = report.expectations
    assert report.ok
    assert held == checked
    assert len(report.steps) == len(load_scenario_file(path).spec.steps)
    if path.stem == "demo":
        assert checked > 52  # the narrated tour it replaces checked 52 outcomes


def test_the_main_job_narrates_every_seed_and_the_failures_it_survives() -> None:
    steps = load_scenario_file(EXAMPLES / "demo.yaml").spec.steps
    said = " ".join(s.say or "" for s in steps)
    for seed in ("seed 000", "seed 001", "seed 002", "seed 003", "seed 004"):
        assert seed in said
    assert "the other policy" in said  # seed 000 in both policies
    actions = {s.action for s in steps}
    assert {"node-down", "node-up", "advance", "plan", "instantiate", "run-pod", "unplug", "plug"} <= actions


async def test_a_wrong_expectation_fails_with_a_diff_naming_the_step_and_the_field(tmp_path: Path) -> None:
    """seed-001 with one holder count changed: the run goes on, and the report says which step and field broke."""
    doc = yaml.safe_load((EXAMPLES / "scenarios" / "seed-001.yaml").read_text())
    doc["spec"]["steps"][0]["expect"]["slots"]["my-resource/my-resource"]["holders"] = 4
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(yaml.safe_dump(doc, sort_keys=False))
    report = await run_scenario(load_scenario_file(wrong))
    assert not report.ok
    assert failures(report) == ["step 1 (apply 1 manifest): slots.my-resource/my-resource.holders: wanted 4, got 5"]
    assert len(report.steps) == len(doc["spec"]["steps"])  # a broken promise does not stop the run
    held, checked = report.expectations
    assert checked - held == 1


BAD = """\
apiVersion: devplace.io/v1alpha1
kind: Scenario
metadata: {name: bad}
spec:
  nodes: [{name: node-a}]
  devices: [{id: cam-1, nodes: [node-a]}]
  steps:
%s
"""


@pytest.mark.parametrize(
    ("step", "where", "message"),
    [
        ("    - node-down: node-z", "8:7", "steps[0].node-down: unknown node 'node-z' (nodes: node-a)"),
        ("    - unplug: {device: cam-9}", "8:16", "steps[0].unplug.device: unknown device 'cam-9'"),
        ("    - advance: 5 minutes", "8:7", "steps[0].advance: malformed duration '5 minutes'"),
        ("    - settle: true\n      expect: {podz: 1}", "9:16", "steps[0].expect.podz: unknown field"),
    ],
    ids=["unknown node", "unknown device", "malformed duration", "unknown expect field"],
)
def test_a_bad_scenario_is_refused_with_line_and_column_before_anything_runs(
    step: str, where: str, message: str
) -> None:
    with pytest.raises(errors.Invalid) as refused:
        load_scenario(BAD % step, "bad.yaml")
    first = refused.value.message.splitlines()[0]
    assert re.match(r"bad\.yaml:\d+:\d+: ", first), first
    assert first.startswith(f"bad.yaml:{where}: spec.{message}"), first
