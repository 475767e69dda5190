"""Running the demo (what `make demo` runs): every act's narrated and checked outcomes, end to end.

The whole tour runs once (on a real SQLite file, real API server, real agents and simulated kubelets over gRPC),
narrated in plain text as off a terminal with the CLI's renderers and apply, as `devplace demo` hands them in; the
narrated outcomes of each seed are asserted from that text. A world other than the seed's proves the tour reports it
and answers exit code 1 instead of narrating success (the command's own options and errors: `tests/cli/test_demos.py`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
import yaml

from devplace.cli import _output as output
from devplace.cli import _resources as resources
from devplace.demo import ACTS, Tour, run_demo
from devplace.demo import _acts_classes as acts_classes
from devplace.store import open_store

KINDS = ("Pod", "Instance", "Configuration", "Node", "ConfigMap", "ResourceClass", "Service")
"""What the acts create, and must delete."""


@dataclass(frozen=True)
class Told:
    """What one run of the demo answered: its exit code, and what it printed."""

    code: int
    stdout: str


def told(store: str | None, acts: Sequence[int] = ACTS) -> Told:
    """Run the demo on `store` (None: a fresh SQLite file) as `devplace demo` does off a terminal."""
    printed: list[str] = []
    code = asyncio.run(run_demo(Tour(output, echo=printed.append), resources, store=store, acts=acts))
    return Told(code, "".join(f"{line}\n" for line in printed))


def lines_of(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def row(out: str, *cells: str) -> bool:
    """A plain table row whose whitespace-separated cells start with `cells`."""
    return any(line.split()[: len(cells)] == list(cells) for line in out.splitlines())


async def leftovers(url: str) -> dict[str, list[str]]:
    store = open_store(url)
    try:
        return {kind: [o["metadata"]["name"] for o in (await store.list(kind)).items] for kind in KINDS}
    finally:
        await store.close()


# -- the whole tour --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def whole_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Told, str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('demo')}/demo.db"
    return told(url), url


def test_the_whole_demo_exits_0_with_every_expectation_held(whole_demo: tuple[Told, str]) -> None:
    result, url = whole_demo
    assert result.code == 0, result.stdout
    out = result.stdout
    assert out.startswith(f"devplace demo: store {url}, API server http://127.0.0.1:")
    assert "FAILED" not in out
    assert re.search(r"^demo: all 52 expectations held \(acts 1, 2, 3, 4, 5\)$", out, re.MULTILINE)
    for number in (1, 2, 3, 4, 5):
        assert any(line.startswith(f"== Act {number}: ") for line in out.splitlines())


def test_act_1_applies_the_examples_and_refuses_a_stale_write_and_a_bad_manifest(whole_demo: tuple[Told, str]) -> None:
    out = whole_demo[0].stdout
    lines = lines_of(out)
    assert "Configuration default/akri-debug-echo created   (akri-debug-echo.yaml, document 1)" in lines
    assert "Instance default/akri-debug-echo-482878 created   (cluster.yaml, document 2)" in lines
    assert "ok: 7 documents applied (7 created); applied again: 7 unchanged" in lines
    assert row(out, "default", "akri-debug-echo-482878", "akri-debug-echo", "true", "node-a,node-b", "1/2")
    assert any(
        line.startswith("ok: update at resourceVersion") and "409 Conflict" in line and "is stale" in line
        for line in lines
    )
    assert "error: Configuration.akri.sh \"Bad_Name\" is invalid: [metadata.name: 'Bad_Name' must consist of" in out
    assert "ok: 422 Invalid naming metadata.name, spec.capacity" in lines


def test_act_2_walks_seed_000_through_the_capacities_the_seed_prints(whole_demo: tuple[Told, str]) -> None:
    out = whole_demo[0].stdout
    act = out[out.index("== Act 2") : out.index("== Act 3")]
    lines = lines_of(act)
    views = [(line.split()[0], line.split()[-1]) for line in lines if re.match(r"^node-[ab]\s.*\d+/\d+/\d+$", line)]
    assert views == [
        ("node-a", "2/2/2"),
        ("node-b", "2/2/2"),
        ("node-a", "0/1/1"),  # node-a's pod took 2 cameras through the CL resource
        ("node-b", "2/1/1"),
        ("node-a", "0/1/0"),  # node-b took cam-2's last slot through its IL resource
        ("node-b", "1/1/0"),
        ("node-a", "2/2/1"),  # node-a's pod deleted: its slots are free at once
        ("node-b", "2/2/1"),
    ]
    usage = [line for line in lines if re.match(r'^akri-onvif-[0-9a-f]{6}-\d: "', line)]
    held_by_node_a = [line for line in usage[:4] if ':node-a"' in line]
    assert len(held_by_node_a) == 2
    assert all(re.match(r'^akri-onvif-([0-9a-f]{6})-\d: "C:akri-onvif-\1:node-a"', line) for line in held_by_node_a)
    assert (
        "pod greedy: Failed (OutOfakri.sh/akri-onvif): Pod was rejected: Node didn't have enough resource: "
        "akri.sh/akri-onvif, requested: 3, free: 1, capacity: 2"
    ) in lines
    assert "ok: pod greedy Failed (OutOfakri.sh/akri-onvif); deviceUsage unchanged" in lines
    assert "ok: held now: node-b (IL); fake time passed: 0 s -- released at once, no grace period" in lines


def test_act_3_runs_exactly_capacity_pods_and_the_losers_fail_cleanly(whole_demo: tuple[Told, str]) -> None:
    out = whole_demo[0].stdout
    lines = lines_of(out[out.index("== Act 3") : out.index("== Act 4")])
    assert "ok: 5 of 10 nodes run their pod" in lines
    assert any(
        line.startswith("ok: 5 slots allocated by kubelets, 0 of them by more than one; deviceUsage names")
        and line.endswith(" -- no slot has two holders")
        for line in lines
    )
    assert any(
        re.match(r"^ok: \d+ Instance states watched, 0 slot\(s\) passed straight from one holder to another", line)
        for line in lines
    )
    assert any(
        re.match(r"^ok: 5 losers failed \(.*\); losers whose kubelet holds a slot: none -- they failed cleanly$", line)
        for line in lines
    )
    table = [line.split() for line in lines if re.match(r"^node-\d\s", line)]
    assert sorted(cells[2] for cells in table) == ["Failed"] * 5 + ["Running"] * 5
    for cells in table:
        if cells[2] == "Running":  # a running broker holds exactly one slot of the device
            assert re.fullmatch(r"broker-node-\d-\d+", cells[1])
            assert re.fullmatch(r"my-resource-[0-9a-f]{6}-[0-4]", cells[3])
        else:  # a loser runs nothing and says why
            assert cells[1] == "-"
            assert re.fullmatch(r"\((UnexpectedAdmissionError|OutOfakri\.sh/my-resource-[0-9a-f]{6})\)", cells[3])
    assert "ok: every kubelet now sees [0] free -- health was re-advertised" in lines
    assert any(re.match(r"^ok: node-\d's pod: Running; holders now ", line) for line in lines)


def test_act_4_plans_seed_004_with_every_rejection_and_the_patched_manifest(whole_demo: tuple[Told, str]) -> None:
    out = whole_demo[0].stdout
    act = out[out.index("== Act 4") : out.index("== Act 5")]
    lines = lines_of(act)
    assert row(act, "fwall", "edge/cluster-1", "9", "2")
    assert row(act, "analytics", "edge/cluster-3", "0", "1")
    assert "fwall       edge/cluster-4   no node has cpu >= 4 (max 2) for core-fwall" in lines
    assert (
        "fwall       edge/cluster-7   no node has label feature.node.kubernetes.io/cpu-pstate.turbo=true for core-fwall"
    ) in lines
    assert "analytics   edge/cluster-7   no node has intel.com/qat >= 1 (max 0) for logger" in lines
    assert (
        "ok: fwall goes to edge/cluster-1 (score 9) -- the optional GPU's weight decided among the qualified clusters"
    ) in lines
    assert "ok: analytics goes to edge/cluster-3 -- the only cluster with QuickAssist" in lines
    excerpt = act[act.index("# StatefulSet core-fwall for edge/cluster-1") : act.index("ok: requests memory=1G")]
    assert yaml.safe_load(excerpt) == {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "palo-alto-e3000",
                            "resources": {
                                "requests": {"memory": "1G", "cpu": "4", "nvidia.com/gpu": "1"},
                                "limits": {"memory": "1G", "cpu": "4", "nvidia.com/gpu": "1"},
                            },
                        }
                    ],
                    "nodeSelector": {"feature.node.kubernetes.io/cpu-pstate.turbo": "true"},
                }
            }
        }
    }
    assert "ok: the group's state after the plan: Created -- nothing committed" in lines
    assert "(cleanup: 27 of 27 created objects deleted, children first)" in lines


def test_act_5_places_a_class_request_queues_the_second_and_runs_brokers_by_capacity(
    whole_demo: tuple[Told, str],
) -> None:
    out = whole_demo[0].stdout
    act = out[out.index("== Act 5") :]
    lines = lines_of(act)
    assert act.startswith("== Act 5: resource classes and brokers ==")
    # seed 003: the seed's classes, only nvidia.high.mem selects a device here (the 32G GPU on node-b)
    assert row(act, "nvidia.high.mem", "Kind", "In", "[nvidia-gpu],", "memory", "GtEq", "30G", "1", "0")
    assert row(act, "hugepages-1gig", "Kind", "In", "[huge-pages],", "size", "GtEq", "1G", "0", "0")
    assert row(act, "fast.nic", "Kind", "In", "[nic],", "speed", "GtEq", "40GBPS", "0", "0")
    [gpu] = re.findall(r"^\s*(akri-gpu-[0-9a-f]{6})\s+node-b\s+32G\s", act, re.MULTILINE)
    assert row(act, "trainer-1", "node-b", "Running", gpu)
    assert f"scheduler.alpha.kubernetes.io/resClass_nvidia.high.mem_{gpu}=1" in lines
    assert any(
        line.startswith(f"ok: {gpu}-0 held by node-b; kubelet allocated akri.sh/{gpu}: {gpu}-0") for line in lines
    )
    assert row(act, "node-a", "no", "device", "matches", "class", "nvidia.high.mem")
    assert row(act, "node-b", "insufficient", "devices", "for", "class", "nvidia.high.mem:", "want", "1,", "0", "free")
    assert (
        "ok: pod trainer-2: Pending, unbound, saying '0/3 nodes are available: 2 no device matches class "
        "nvidia.high.mem, 1 insufficient devices for class nvidia.high.mem: want 1, 0 free.'"
    ) in lines
    assert row(act, "trainer-2", "node-b", "Running", gpu)
    assert (
        "ok: pod trainer-2: Running on node-b after 0 s of fake time -- the scheduler retried on the release event, "
        "not on a timer"
    ) in lines
    assert any(line.startswith(f"ok: {gpu}-0 went node-b -> free -> node-b; 0 slot(s)") for line in lines)
    assert lines.count("ok: nvidia.high.mem status allocatable/requested: 1/1") == 2
    # seed 002: one camera, two nodes, capacity 1: one broker runs, the other waits; services come and go with it
    [camera] = set(re.findall(r"\b(akri-onvif-video-[0-9a-f]{6})-svc\b", act))
    brokers = [line.split() for line in lines if re.match(rf"^node-[ab]-{camera}-pod\s", line)]
    assert len(brokers) == 4  # two tables of two: after the Configuration, after the camera came back
    for table in (brokers[:2], brokers[2:]):
        assert sorted(cells[-1] for cells in table) == ["Pending", "Running"]
        assert all(cells[1] == "-" for cells in table if cells[-1] == "Pending")  # waits unbound
    assert any(
        line.startswith("ok: 2 brokers: Pending, Running; slot holders: node-")
        and "Configuration status brokers: desired 2, running 1, pending 1" in line
        for line in lines
    )
    assert any(
        re.fullmatch(
            rf"node-[ab]-{camera}-pod: 0/3 nodes are available: 2 node\(s\) didn't match node selector, "
            rf"1 insufficient akri\.sh/{camera}\.",
            line,
        )
        for line in lines
    )
    assert f"ok: services: {camera}-svc, akri-onvif-video-svc" in lines
    assert "ok: 0 brokers, 0 services left" in lines
    assert any(
        line.startswith(f"ok: Instance {camera} kept while offline, deleted after 300 s of fake time") for line in lines
    )
    assert any(
        line.startswith(f"ok: 2 brokers (Pending, Running), services {camera}-svc, akri-onvif-video-svc")
        for line in lines
    )
    assert "(cleanup: the nodes stopped; 16 objects of this act deleted)" in lines


def test_the_demo_leaves_the_store_as_it_found_it_and_runs_again_on_it(whole_demo: tuple[Told, str]) -> None:
    _, url = whole_demo
    assert asyncio.run(leftovers(url)) == {kind: [] for kind in KINDS}
    again = told(url, [2, 4, 5])
    assert again.code == 0, again.stdout
    assert "demo: all " in again.stdout
    assert "(acts 2, 4, 5)" in again.stdout
    assert asyncio.run(leftovers(url)) == {kind: [] for kind in KINDS}


# -- a world other than the seed's ------------------------------------------------------------------------------------


def test_act_5_reports_a_world_other_than_the_seeds_and_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 32G GPU on node-a instead of node-b: the class still places the pod, but not where the act claims."""
    monkeypatch.setattr(acts_classes, "GPUS", (("gpu-1", "node-b", "16G"), ("gpu-2", "node-a", "32G")))
    result = told("memory", [5])
    assert result.code == 1, result.stdout
    lines = lines_of(result.stdout)
    failed = "pod trainer-1: Running on node-a (expected: Running on node-b)"
    assert f"FAILED: {failed}" in lines
    assert f"act 5: {failed}" in lines
    assert not any("the only node with a GPU of >= 30G" in line for line in lines)
    assert "demo: 4 of 14 expectations NOT met (acts 5):" in lines  # placement, slot, retry, slot history
    assert any(line.startswith("ok: annotated with 1 device(s): nvidia.high.mem_akri-gpu-") for line in lines)
    assert "ok: 0 brokers, 0 services left" in lines  # the brokers' half still holds, checked as before
