"""`devplace sim`, the command: run as a user runs it, through the typer app (off a terminal: plain lines).

The run's own behaviour (steps, samples, checks) is tested in tests/demo/test_timelines.py; the pictures in
tests/demo/test_plots.py and tests/demo/test_liveviews.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from PIL import Image
from typer.testing import CliRunner

from devplace.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# -- pictures (issue #29 item 3): `sim run --plots`, plain lines off a terminal, the live view on one ---------------


def test_sim_run_with_plots_writes_the_pngs_and_prints_their_paths_and_sizes(tmp_path: Path) -> None:
    out = tmp_path / "images"
    result = CliRunner().invoke(app, ["sim", "run", "seed-000", "--plots", str(out)])
    assert result.exit_code == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    plotted = [line for line in lines if line.startswith("plot: ")]
    assert plotted == [
        f"plot: {out / 'scenario-seed-000-availability.png'} (1000x880, availability)",
        f"plot: {out / 'scenario-seed-000-pods.png'} (1000x420, pods)",
        f"plot: {out / 'scenario-seed-000-utilisation.png'} (700x320, utilisation)",
    ]
    with Image.open(out / "scenario-seed-000-pods.png") as image:
        assert image.size == (1000, 420)
    assert re.match(r"scenario seed-000: ok: (\d+)/\1 expectations held over 5 steps", lines[-1])


def test_sim_run_off_a_terminal_prints_plain_step_lines_and_no_plots_unless_asked(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["sim", "run", "seed-000"])
    assert result.exit_code == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(re.fullmatch(r"step 1/5 apply 1 manifest: ok \(\d+ checks\) \[t=0s\]", line) for line in lines)
    assert not any(line.startswith("plot: ") for line in lines)
    assert not any("━" in line or "┃" in line for line in lines)  # no live view off a terminal


def test_sim_run_on_a_terminal_draws_the_live_view_instead_of_plain_lines() -> None:
    """rich decides what a terminal is (`TTY_COMPATIBLE=1` says stdout is one, as under a real TTY)."""
    env = {"TTY_COMPATIBLE": "1", "COLUMNS": "150", "NO_COLOR": "1"}
    result = CliRunner().invoke(app, ["sim", "run", "seed-000"], env=env)
    assert result.exit_code == 0, result.stdout + result.stderr
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", result.stdout)
    assert "instances: slot holders" in plain
    assert "│ node-b │       2/0/0        │           2/0/0           │           1/1/0           │" in plain
    assert re.search(r"━+ step 5/5 delete Pod onvif-broker ok  t=0s", plain)
    assert plain.splitlines()[-1].startswith("scenario seed-000: ok: ")


# -- run, check, schema -------------------------------------------------------------------------------------------


def test_sim_run_exits_1_naming_the_step_and_field_of_a_broken_promise_and_writes_the_report(tmp_path: Path) -> None:
    text = (EXAMPLES / "scenarios" / "seed-000.yaml").read_text()
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(text.replace("phases: {onvif-broker: Running}", "phases: {onvif-broker: Failed}", 1))
    report = tmp_path / "out" / "report.json"
    result = CliRunner().invoke(app, ["sim", "run", str(wrong), "--report", str(report)])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert "   FAILED phases.onvif-broker: wanted 'Failed', got 'Running'" in lines
    assert re.search(
        r"FAILED: \d+/\d+ expectations held over 5 steps .*; failed steps: 2 \(run-pod onvif-broker\)$", lines[-1]
    )
    written = json.loads(report.read_text())
    assert written["ok"] is False
    assert [s["index"] for s in written["steps"] if not s["ok"]] == [1]
    assert written["steps"][1]["mismatches"] == [{"field": "phases.onvif-broker", "wanted": "Failed", "got": "Running"}]
    assert len(written["samples"]) == 6  # the setup and each of the five steps


def test_sim_check_refuses_a_bad_file_with_every_line_and_column_and_runs_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: devplace.io/v1alpha1\nkind: Scenario\nmetadata: {name: bad}\nspec:\n"
        "  nodes: [{name: node-a}]\n  steps:\n    - node-down: node-b\n    - advance: soon\n"
    )
    for command in ("check", "run"):
        result = CliRunner().invoke(app, ["sim", command, str(bad)])
        assert result.exit_code == 1
        assert result.stdout == ""
        assert result.stderr.splitlines() == [  # a schema problem first: references are checked on a sound file
            f"error: {bad}:8:7: spec.steps[1].advance: malformed duration 'soon': use units h, m, s, ms (e.g. 30s, "
            "5m, 1h30m)",
        ]


def test_sim_check_says_a_good_file_is_ok_and_schema_prints_the_json_schema() -> None:
    result = CliRunner().invoke(app, ["sim", "check", "seed-001"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip().endswith("scenario seed-001: 8 steps, ok")
    schema = json.loads(CliRunner().invoke(app, ["sim", "schema"]).stdout)
    assert schema["title"] == "devplace Scenario"
    assert schema["properties"]["kind"]["const"] == "Scenario"
