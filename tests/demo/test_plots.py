"""The run's pictures (`devplace sim run --plots`): each PNG is written at the size it reports, and shows the data
the samples hold.

Seed 000 runs once for the module (memory store) and its plots are written once; each test reads what it checks
from the `Plot`s returned (the series every figure was drawn from) and from the files read back. Shapes the seed does
not have (time that moves, a node down, 50 nodes, a fleet decision) come from samples built by hand.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path

import pytest
from PIL import Image

from devplace import errors
from devplace.demo import Plot, Report, Sample, StepRecord, run_scenario, scenario_path, write_plots
from devplace.demo import _plots as plots
from devplace.sim import load_scenario_file

CL = "akri.sh/akri-onvif"


def il(device: str) -> str:
    """A device's Instance-level resource: the Instance name hashes the (shared) device id (DESIGN.md section 2)."""
    return f"akri.sh/akri-onvif-{hashlib.blake2b(device.encode(), digest_size=3).hexdigest()}"


@pytest.fixture(scope="module")
def seed_report() -> Report:
    report = asyncio.run(run_scenario(load_scenario_file(scenario_path("seed-000")), store="memory"))
    assert report.ok
    return report


@pytest.fixture(scope="module")
def seed_plots(seed_report: Report, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Plot]:
    return {p.kind: p for p in write_plots(seed_report, tmp_path_factory.mktemp("plots"))}


def points(plot: Plot, name: str) -> tuple[tuple[float | str, float], ...]:
    [series] = [s for s in plot.series if s.name == name]
    return series.points


def sample(step: int, time: float, nodes: dict[str, dict[str, dict[str, int]]], **rest: object) -> Sample:
    fields: dict[str, object] = {
        "down": [],
        "pods": {},
        "pending": {},
        "instances": {},
        "brokers": {},
        "decision": {},
        **rest,
    }
    return Sample(step, time, nodes, **fields)  # type: ignore[arg-type]


def cell(capacity: int, allocatable: int, available: int) -> dict[str, int]:
    return {"capacity": capacity, "allocatable": allocatable, "available": available}


def steps(*times: float) -> list[StepRecord]:
    return [StepRecord(i, f"step {i + 1}", "advance", None, sim_time=t) for i, t in enumerate(times)]


# -- seed 000, as run ----------------------------------------------------------------------------------------------


def test_seed_000_writes_availability_pods_and_utilisation_but_no_placement(seed_plots: dict[str, Plot]) -> None:
    assert sorted(seed_plots) == ["availability", "pods", "utilisation"]
    for kind, plot in seed_plots.items():
        assert plot.path.name == f"scenario-seed-000-{kind}.png"
        assert plot.path.is_file()


def test_each_png_read_back_has_the_pixel_size_its_plot_reports(seed_plots: dict[str, Plot]) -> None:
    for plot in seed_plots.values():
        with Image.open(plot.path) as image:
            assert image.format == "PNG"
            assert image.size == (plot.width, plot.height)
    assert (seed_plots["availability"].width, seed_plots["availability"].height) == (1000, 880)


def test_node_a_cl_availability_goes_2_0_0_0_2_over_the_five_steps(seed_plots: dict[str, Plot]) -> None:
    """x is the step number (time never moves in seed 000); the resource appears with step 1's Configuration."""
    availability = seed_plots["availability"]
    assert points(availability, f"node-a {CL} available") == ((1, 2), (2, 0), (3, 0), (4, 0), (5, 2))
    assert points(availability, f"node-b {CL} available") == ((1, 2), (2, 2), (3, 1), (4, 1), (5, 2))
    assert points(availability, f"all nodes {CL} available") == ((1, 4), (2, 2), (3, 1), (4, 1), (5, 4))


def test_cam_2s_instance_level_availability_follows_the_seed_on_both_nodes(seed_plots: dict[str, Plot]) -> None:
    availability = seed_plots["availability"]
    cam2 = il("cam-2")
    assert points(availability, f"node-a {cam2} available") == ((1, 2), (2, 1), (3, 0), (4, 0), (5, 1))
    assert points(availability, f"node-b {cam2} available") == ((1, 2), (2, 1), (3, 0), (4, 0), (5, 1))
    names = [s.name for s in availability.series]
    assert len(names) == 9  # 3 resources x (sum + 2 nodes)
    assert names.index(f"all nodes {CL} available") == 0  # the resources that change come first, then by name


def test_pods_plot_counts_running_pending_and_failed_per_step(seed_plots: dict[str, Plot]) -> None:
    """Setup is x = 0; greedy fails at step 4; deleting onvif-broker leaves one pod running."""
    pods = seed_plots["pods"]
    assert [s.name for s in pods.series] == ["Running", "Pending", "Failed"]
    assert points(pods, "Running") == ((0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 1))
    assert points(pods, "Pending") == tuple((x, 0) for x in range(6))
    assert points(pods, "Failed") == ((0, 0), (1, 0), (2, 0), (3, 0), (4, 1), (5, 1))


def test_utilisation_is_held_over_allocatable_per_node_after_the_last_step(seed_plots: dict[str, Plot]) -> None:
    """node-b's il-broker still holds a slot of cam-2; node-a sees that slot as unhealthy (allocatable 1)."""
    utilisation = seed_plots["utilisation"]
    cam1, cam2 = il("cam-1"), il("cam-2")
    assert dict(points(utilisation, "node-b held")) == {CL: 0, cam1: 0, cam2: 1}
    assert dict(points(utilisation, "node-b allocatable")) == {CL: 2, cam1: 2, cam2: 2}
    assert dict(points(utilisation, "node-a held")) == {CL: 0, cam1: 0, cam2: 0}
    assert dict(points(utilisation, "node-a allocatable")) == {CL: 2, cam1: 2, cam2: 1}


def test_a_run_at_one_instant_is_drawn_over_step_numbers_and_the_axis_says_so(seed_report: Report) -> None:
    line = plots.timeline(seed_report.samples, seed_report.steps)
    assert not line.by_time
    assert line.xs == (0, 1, 2, 3, 4, 5)
    assert line.label == "step (simulated time stays at 0 s)"
    assert [t for _, t in line.ticks][:2] == ["setup", "1 apply 1 manifest"]
    assert [x for x, _ in line.marks] == [0.5, 1.5, 2.5, 3.5, 4.5]


# -- shapes built by hand ------------------------------------------------------------------------------------------


def test_a_run_whose_every_step_moves_time_is_drawn_over_seconds_with_a_gap_while_a_node_is_down() -> None:
    up = {"node-a": {"r": cell(2, 2, 2)}, "node-b": {"r": cell(2, 2, 1)}}
    samples = [
        sample(-1, 0.0, up),
        sample(0, 60.0, {"node-a": {"r": cell(2, 2, 0)}}, down=["node-b"]),
        sample(1, 300.0, up),
    ]
    line = plots.timeline(samples, steps(60.0, 300.0))
    assert line.by_time
    assert line.label == "simulated time (s); dotted: steps"
    assert line.marks == ((60.0, "1"), (300.0, "2"))
    series = {s.name: s.points for s in plots.availability_series(samples, line, "r")}
    assert series["node-b r available"] == ((0.0, 1), (300.0, 1))
    assert series["all nodes r available"] == ((0.0, 3), (60.0, 0), (300.0, 3))


def test_steps_that_take_no_time_keep_step_numbers_and_mark_where_time_moved() -> None:
    """On a time axis steps 1 and 2 (both at t=0) would draw nothing; step numbers keep them, step 3 says t=300s."""
    nodes = {"node-a": {"r": cell(1, 1, 1)}}
    samples = [sample(i - 1, t, nodes) for i, t in enumerate((0.0, 0.0, 0.0, 300.0))]
    line = plots.timeline(samples, steps(0.0, 0.0, 300.0))
    assert not line.by_time
    assert line.xs == (0, 1, 2, 3)
    assert line.label == "step (simulated time moves from 0 s to 300 s where marked)"
    assert line.marks == ((0.5, ""), (1.5, ""), (2.5, "t=300s"))


def test_fifty_nodes_keep_a_two_entry_legend_and_every_node_series() -> None:
    nodes = {f"node-{i:02d}": {"r": cell(1, 1, i % 2)} for i in range(50)}
    drawing = plots.draw_availability([sample(-1, 0.0, nodes), sample(0, 0.0, nodes)], steps(0.0))
    [legend] = drawing.figure.legends
    assert [t.get_text() for t in legend.get_texts()] == ["each node (50)", "all nodes (right scale)"]
    assert len(drawing.series) == 51
    assert drawing.series[0].points == ((0, 25), (1, 25))


def test_more_resources_than_panels_are_counted_in_the_title() -> None:
    nodes = {"node-a": {f"r{i:02d}": cell(1, 1, 1) for i in range(plots.MAX_PANELS + 3)}}
    drawing = plots.draw_availability([sample(0, 0.0, nodes)], steps(0.0))
    assert drawing.figure.get_suptitle() == (
        "available per resource, as the kubelet sees it (3 more resources not shown)"
    )
    assert len({s.name.split(" ")[-2] for s in drawing.series}) == plots.MAX_PANELS


def test_a_fleet_decision_becomes_a_placement_table_of_chosen_and_rejected_clusters(tmp_path: Path) -> None:
    decision = {
        "fwall": {"clusters": ["p1/cluster-1"], "rejected": {"p1/cluster-2": "no node has nvidia.com/gpu >= 1"}},
        "analytics": {"clusters": ["p1/cluster-2"], "rejected": {}},
    }
    samples = [sample(-1, 0.0, {}), sample(0, 0.0, {}, decision=decision), sample(1, 0.0, {})]
    report = Report("fleet", "fleet.yaml", 0, "memory", steps(0.0, 0.0), samples)
    written = {p.kind: p for p in write_plots(report, tmp_path / "new")}
    assert sorted(written) == ["availability", "placement", "pods", "utilisation"]
    placement = written["placement"]
    assert placement.rows == (
        ("analytics", "placed", "p1/cluster-2", ""),
        ("fwall", "placed", "p1/cluster-1", ""),
        ("fwall", "rejected", "p1/cluster-2", "no node has nvidia.com/gpu >= 1"),
    )
    with Image.open(placement.path) as image:
        assert image.size == (placement.width, placement.height) == (1200, 173)


def test_without_matplotlib_plots_fail_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    report = Report("x", "x.yaml", 0, "memory", [], [sample(-1, 0.0, {})])
    with pytest.raises(errors.Unavailable, match=r"pip install 'devplace\[report\]'"):
        write_plots(report, tmp_path)
    assert list(tmp_path.iterdir()) == []
