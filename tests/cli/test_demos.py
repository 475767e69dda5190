"""`devplace demo`, the command: its options, its one-line errors and its exit code.

The tour itself (every act's narrated and checked outcomes, the narrator, the acts' pure parts) is tested in
`tests/demo`; here the command is run as a user runs it, through the typer app.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from devplace.cli import app
from devplace.demo._runs import FLEET_EXAMPLE, example_path


def lines_of(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def test_the_demo_without_a_store_uses_a_temporary_sqlite_file() -> None:
    result = CliRunner().invoke(app, ["demo", "--act", "1"])
    assert result.exit_code == 0, result.stdout + result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("devplace demo: store sqlite:///")
    assert "/devplace-demo-" in first
    assert "== Act 2" not in result.stdout


def test_the_demo_with_a_missing_examples_directory_is_one_error_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--store", "memory", "--examples", str(tmp_path / "none")])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert len(result.stderr.splitlines()) == 1
    assert result.stdout == ""


def test_a_malformed_fleet_example_is_one_error_line_before_any_act(tmp_path: Path) -> None:
    bad = tmp_path / "fleet.yaml"
    bad.write_text("requests:\n  - post: /v2/projects\n    body: {metadata: {name: p}}\n")
    result = CliRunner().invoke(app, ["demo", "--store", "memory", "--fleet-example", str(bad)])
    assert result.exit_code == 1
    assert result.stderr == f"error: {bad}: plan: must be a /v2/... path, got None\n"
    assert result.stdout == ""


def test_an_act_number_outside_1_to_5_is_a_usage_error() -> None:
    for number in ("0", "6"):
        result = CliRunner().invoke(app, ["demo", "--act", number])
        assert result.exit_code == 2


def test_an_outcome_other_than_the_seeds_is_reported_and_exits_1(tmp_path: Path) -> None:
    """Without cluster-1's GPU, fwall lands elsewhere: the tour says so (FAILED, expected vs seen) and exits 1."""
    doc = yaml.safe_load(example_path(*FLEET_EXAMPLE).read_text())
    for request in doc["requests"]:
        for node in (request["body"].get("spec") or {}).get("nodes") or []:
            node["allocatable"].pop("nvidia.com/gpu", None)
    changed = tmp_path / "no-gpu.yaml"
    changed.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(app, ["demo", "--store", "memory", "--act", "4", "--fleet-example", str(changed)])
    assert result.exit_code == 1
    lines = lines_of(result.stdout)
    # fwall still lands on cluster-1 (ties go to the lowest name), but not for the seed's reason: no GPU scored
    failed = "fwall goes to edge/cluster-1 (score 0) (expected: edge/cluster-1 (score 9))"
    assert f"FAILED: {failed}" in lines
    assert any(
        line.startswith("FAILED: requests memory=1G, cpu=4; limits memory=1G, cpu=4; nodeSelector") for line in lines
    )
    assert "demo: 2 of 8 expectations NOT met (acts 4):" in lines
    assert f"act 4: {failed}" in lines
    assert "ok: analytics goes to edge/cluster-3 -- the only cluster with QuickAssist" in lines
    assert not any("GPU's weight decided" in line for line in lines)
