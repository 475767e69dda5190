"""`devplace demo`, the command: which scenarios it runs, on which store, what it prints, and its exit code.

What the scenarios promise is tested in tests/demo/test_scenarios.py; here the command is run as a user runs it,
through the typer app.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from devplace.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_demo_runs_the_main_job_on_a_fresh_sqlite_store_narrated_by_its_say_lines() -> None:
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"devplace demo: scenario demo ({EXAMPLES / 'demo.yaml'}), store sqlite:///")
    assert "/devplace-demo-" in lines[0]
    assert lines[1].startswith("say: seed 000: node-a and node-b both see cam-1 and cam-2.")
    steps = [line for line in lines if line.startswith("step ")]
    assert steps[0] == "step 1/42 apply 1 manifest: ok (9 checks) [t=0s]"
    assert all(": ok" in line for line in steps)
    assert lines[-1].startswith("scenario demo: ok: 140/140 expectations held over 42 steps (")
    assert not any("FAILED" in line for line in lines)


def test_several_scenarios_run_in_order_each_on_its_own_store_with_a_total() -> None:
    result = CliRunner().invoke(app, ["demo", "seed-000", "seed-000-per-usage"])
    assert result.exit_code == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    heads = [line for line in lines if line.startswith("devplace demo: ")]
    assert [h.split(" (")[0] for h in heads] == [
        "devplace demo: scenario seed-000",
        "devplace demo: scenario seed-000-per-usage",
    ]
    assert heads[0].endswith("1-seed-000.db")
    assert heads[1].endswith("2-seed-000-per-usage.db")
    summaries = [line for line in lines if line.startswith("scenario ")]
    assert [s.split(" expectations")[0] for s in summaries] == [
        "scenario seed-000: ok: 39/39",
        "scenario seed-000-per-usage: ok: 32/32",
    ]
    assert lines[-1].startswith("demo: ok: 71/71 expectations held over 2 scenarios (")


def test_a_given_store_is_used(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mine.db'}"
    result = CliRunner().invoke(app, ["demo", "seed-000", "--store", url])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[0].endswith(f"store {url}")
    assert (tmp_path / "mine.db").is_file()


def test_a_broken_promise_is_named_by_step_and_field_and_exits_1(tmp_path: Path) -> None:
    doc = yaml.safe_load((EXAMPLES / "scenarios" / "seed-000.yaml").read_text())
    doc["spec"]["steps"][1]["expect"]["phases"]["onvif-broker"] = "Pending"
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = CliRunner().invoke(app, ["demo", str(wrong)])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert "step 2/5 run-pod onvif-broker: FAILED (9 checks) [t=0s]" in lines
    assert "   FAILED phases.onvif-broker: wanted 'Pending', got 'Running'" in lines
    assert lines[-1].startswith("scenario seed-000: FAILED: 38/39 expectations held over 5 steps (")
    assert lines[-1].endswith("; failed steps: 2 (run-pod onvif-broker)")


def test_a_bad_file_is_refused_with_line_and_column_before_any_scenario_runs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = (EXAMPLES / "scenarios" / "seed-000.yaml").read_text()
    bad.write_text(text.replace("run-pod: {name: greedy, node: node-b", "run-pod: {name: greedy, node: node-z"))
    result = CliRunner().invoke(app, ["demo", "seed-000", str(bad)])
    assert result.exit_code == 1
    assert result.stdout == ""  # not even the good first scenario ran
    line = next(n for n, t in enumerate(text.splitlines(), 1) if "name: greedy" in t)
    assert result.stderr.startswith(f"error: {bad}:{line}:")
    assert "spec.steps[3].run-pod.node: unknown node 'node-z' (nodes: node-a, node-b)" in result.stderr


def test_a_missing_scenario_is_one_error_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", str(tmp_path / "none.yaml")])
    assert result.exit_code == 1
    assert result.stderr == f"error: scenario: {tmp_path / 'none.yaml'}: no such file\n"
    assert result.stdout == ""
