"""The live view on a terminal: what each frame shows, read back from a recording rich console.

Seed 000 runs once for the module with the view as its observer (as `devplace sim run` does on a TTY); the frame's
tables are asserted as rows of cells. Pending pods, brokers, a node down and a large fleet come from samples built by
hand.
"""

from __future__ import annotations

import asyncio
import hashlib
import re

import pytest
from rich.console import Console, RenderableType

from devplace.demo import LiveView, Sample, StepRecord, run_scenario, scenario_path
from devplace.demo import _liveviews as liveviews
from devplace.sim import load_scenario_file

CL = "akri.sh/akri-onvif"


def instance(device: str) -> str:
    return f"akri-onvif-{hashlib.blake2b(device.encode(), digest_size=3).hexdigest()}"


def recorder(*, colour: bool = False) -> Console:
    return Console(record=True, width=160, force_terminal=colour, color_system="standard" if colour else None)


def text_of(renderable: RenderableType, *, colour: bool = False) -> str:
    console = recorder(colour=colour)
    console.print(renderable)
    return console.export_text(styles=colour)


def rows(text: str) -> list[list[str]]:
    """Table rows as their cells (box-drawn with │, the header with ┃)."""
    lines = [line.strip().replace("┃", "│") for line in text.splitlines()]
    return [[c.strip() for c in line.strip("│").split("│")] for line in lines if "│" in line]


def sample(**fields: object) -> Sample:
    plain: dict[str, object] = {
        "step": 0,
        "time": 0.0,
        "nodes": {},
        "down": [],
        "pods": {},
        "pending": {},
        "instances": {},
        "brokers": {},
        "decision": {},
        **fields,
    }
    return Sample(**plain)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def seed_run() -> tuple[str, list[tuple[StepRecord, Sample]]]:
    """Seed 000 observed by a LiveView on a recording console: what it printed, and every (record, sample)."""
    scenario = load_scenario_file(scenario_path("seed-000"))
    console = recorder()
    seen: list[tuple[StepRecord, Sample]] = []
    with LiveView(len(scenario.spec.steps), console=console) as view:

        def observe(record: StepRecord, sample: Sample) -> None:
            seen.append((record, sample))
            view.on_step(record, sample)

        report = asyncio.run(run_scenario(scenario, store="memory", on_step=observe))
    assert report.ok
    return console.export_text(), seen


def test_the_view_prints_each_steps_narration_and_verdict_and_ends_on_the_last_frame(
    seed_run: tuple[str, list[tuple[StepRecord, Sample]]],
) -> None:
    printed, _ = seed_run
    lines = [line.rstrip() for line in printed.splitlines()]
    verdicts = [line for line in lines if re.fullmatch(r"step \d/5 .*: ok \(\d+ checks\) \[t=0s\]", line)]
    assert [v.split(":")[0] for v in verdicts] == [
        "step 1/5 apply 1 manifest",
        "step 2/5 run-pod onvif-broker",
        "step 3/5 run-pod il-broker",
        "step 4/5 run-pod greedy",
        "step 5/5 delete Pod onvif-broker",
    ]
    assert "say: delete onvif-broker; its slots are released at once, with no grace period" in lines
    assert "step 5/5 delete Pod onvif-broker ok  t=0s" in printed  # the final frame stays on screen


def test_the_nodes_table_shows_available_held_unhealthy_as_the_seed_says(
    seed_run: tuple[str, list[tuple[StepRecord, Sample]]],
) -> None:
    """After step 3 node-a's CL resource is all held; cam-2's two slots are held by node-a (CL) and node-b (IL), so
    node-b's CL resource can map to cam-1 only (one unhealthy) and each node sees cam-2's IL slots held or unhealthy."""
    _, seen = seed_run
    _, after_3 = seen[2]
    table = rows(text_of(liveviews.nodes_table(after_3)))
    cam1, cam2 = f"akri.sh/{instance('cam-1')}", f"akri.sh/{instance('cam-2')}"
    assert table[0] == ["node", CL, cam1, cam2]
    assert table[1] == ["node-a", "0/2/0", "1/0/1", "0/0/2"]
    assert table[2] == ["node-b", "1/0/1", "1/0/1", "0/1/1"]


def test_instances_show_a_chip_per_slot_holder_coloured_by_kind(
    seed_run: tuple[str, list[tuple[StepRecord, Sample]]],
) -> None:
    _, seen = seed_run
    _, after_3 = seen[2]
    table = rows(text_of(liveviews.instances_table(after_3)))
    assert [instance("cam-1"), "akri-onvif", "node-a, node-b", "[node-a (CL)] [free]"] in table
    assert [instance("cam-2"), "akri-onvif", "node-a, node-b", "[node-a (CL)] [node-b]"] in table
    coloured = text_of(liveviews.instances_table(after_3), colour=True)
    assert "\x1b[35m[node-a (CL)]\x1b[0m" in coloured  # magenta: the Configuration-level plugin
    assert "\x1b[36m[node-b]\x1b[0m" in coloured  # cyan: the Instance-level plugin
    assert "\x1b[32m[free]\x1b[0m" in coloured  # green


@pytest.mark.parametrize(
    ("label", "kind"),
    [("free", "free"), ("node-a", "il"), ("node-a (CL)", "cl"), ("claim default/gpu-claim", "claim")],
)
def test_holder_kind_reads_every_holder_label(label: str, kind: str) -> None:
    assert liveviews.holder_kind(label) == kind


def test_pending_pods_brokers_and_a_down_node_are_shown_with_their_reasons() -> None:
    frame = liveviews.step_view(
        StepRecord(1, "node-down node-b", "node-down", "node-b goes away", sim_time=300.0),
        sample(
            nodes={"node-a": {"r": {"capacity": 1, "allocatable": 1, "available": 0}}},
            down=["node-b"],
            pending={"default/cam-broker-2": "0/2 nodes: 1 insufficient akri.sh/cam, 1 not ready"},
            brokers={"cam": {"running": 1, "pending": 1}},
        ),
        4,
    )
    text = text_of(frame)
    table = rows(text)
    assert "step 2/4 node-down node-b ok  t=300s" in text
    assert "say: node-b goes away" in text
    assert ["node-a", "0/1/0"] in table
    assert ["node-b", "down"] in table
    assert ["cam", "1", "1"] in table
    assert ["default/cam-broker-2", "0/2 nodes: 1 insufficient akri.sh/cam, 1 not ready"] in table
    assert "pending pods (1)" in text


def test_a_failed_step_prints_every_mismatch_in_red() -> None:
    from devplace.sim import Mismatch

    record = StepRecord(0, "apply 1 manifest", "apply", None, checked=2, mismatches=[Mismatch("counts.pods", 2, 1)])
    console = recorder()
    LiveView(3, console=console).on_step(record, sample())
    assert console.export_text().splitlines() == [
        "step 1/3 apply 1 manifest: FAILED (2 checks) [t=0s]",
        f"   FAILED {Mismatch('counts.pods', 2, 1)}",
    ]


def test_a_fifty_node_frame_stays_within_its_caps_and_counts_what_it_leaves_out() -> None:
    nodes = {
        f"node-{i:02d}": {f"r{j}": {"capacity": 1, "allocatable": 1, "available": 1} for j in range(9)}
        for i in range(50)
    }
    instances = {
        f"i-{k:02d}": {"configuration": "c", "nodes": ["node-00"], "slots": {f"s{n}": "free" for n in range(10)}}
        for k in range(15)
    }
    text = text_of(liveviews.step_view(None, sample(nodes=nodes, instances=instances), 10))
    table = rows(text)
    assert "step 0/10 setting up" in text
    assert "nodes: available/held/unhealthy" in text
    assert "3 more resources not shown" in text
    assert sum(1 for r in table if r[0].startswith("node-")) == liveviews.MAX_NODES
    assert "... 30 more nodes" in text
    assert "... 3 more instances" in text
    assert "[free] " * 7 + "[free] +2" in text
