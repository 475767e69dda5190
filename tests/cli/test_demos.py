"""`devplace demo` (what `make demo` runs): the narrated tour, its acts' checked outcomes, and its pure parts.

The whole tour runs once end to end (on a real SQLite file, real API server, real agents and simulated kubelets over
gRPC); the narrated outcomes of each seed are asserted from its plain-text output. A fleet file whose outcome differs
from the seed's proves the tour reports it and exits 1 instead of narrating success.
"""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from devplace import errors
from devplace.cli import app, tour_classes
from devplace.cli.demos import FLEET_EXAMPLE, example_path
from devplace.cli.tour_devices import holder_label, view
from devplace.cli.tour_fleets import (
    FleetRequest,
    inventory_rows,
    item_path,
    load_fleet_example,
    manifest_excerpt,
)
from devplace.cli.tours import Tour
from devplace.sim.invariants import UsageHistory, double_bookings
from devplace.store import open_store

KINDS = ("Pod", "Instance", "Configuration", "Node", "ConfigMap", "ResourceClass", "Service")
"""What the acts create, and must delete."""


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
def whole_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('demo')}/demo.db"
    return CliRunner().invoke(app, ["demo", "--store", url]), url


def test_the_whole_demo_exits_0_with_every_expectation_held(whole_demo: tuple[Any, str]) -> None:
    result, url = whole_demo
    assert result.exit_code == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.startswith(f"devplace demo: store {url}, API server http://127.0.0.1:")
    assert "FAILED" not in out
    assert re.search(r"^demo: all 52 expectations held \(acts 1, 2, 3, 4, 5\)$", out, re.MULTILINE)
    for number in (1, 2, 3, 4, 5):
        assert any(line.startswith(f"== Act {number}: ") for line in out.splitlines())


def test_act_1_applies_the_examples_and_refuses_a_stale_write_and_a_bad_manifest(whole_demo: tuple[Any, str]) -> None:
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
    assert "error: Configuration default/Bad_Name: metadata.name: 'Bad_Name' must consist of" in out
    assert "ok: 422 Invalid naming metadata.name, spec.capacity" in lines


def test_act_2_walks_seed_000_through_the_capacities_the_seed_prints(whole_demo: tuple[Any, str]) -> None:
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


def test_act_3_runs_exactly_capacity_pods_and_the_losers_fail_cleanly(whole_demo: tuple[Any, str]) -> None:
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


def test_act_4_plans_seed_004_with_every_rejection_and_the_patched_manifest(whole_demo: tuple[Any, str]) -> None:
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
    whole_demo: tuple[Any, str],
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


def test_the_demo_leaves_the_store_as_it_found_it_and_runs_again_on_it(whole_demo: tuple[Any, str]) -> None:
    _, url = whole_demo
    assert asyncio.run(leftovers(url)) == {kind: [] for kind in KINDS}
    again = CliRunner().invoke(app, ["demo", "--store", url, "--act", "2", "--act", "4", "--act", "5"])
    assert again.exit_code == 0, again.stdout + again.stderr
    assert "demo: all " in again.stdout
    assert "(acts 2, 4, 5)" in again.stdout
    assert asyncio.run(leftovers(url)) == {kind: [] for kind in KINDS}


# -- options and failures --------------------------------------------------------------------------------------------


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


def test_act_5_reports_a_world_other_than_the_seeds_and_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 32G GPU on node-a instead of node-b: the class still places the pod, but not where the act claims."""
    monkeypatch.setattr(tour_classes, "GPUS", (("gpu-1", "node-b", "16G"), ("gpu-2", "node-a", "32G")))
    result = CliRunner().invoke(app, ["demo", "--store", "memory", "--act", "5"])
    assert result.exit_code == 1, result.stdout + result.stderr
    lines = lines_of(result.stdout)
    failed = "pod trainer-1: Running on node-a (expected: Running on node-b)"
    assert f"FAILED: {failed}" in lines
    assert f"act 5: {failed}" in lines
    assert not any("the only node with a GPU of >= 30G" in line for line in lines)
    assert "demo: 4 of 14 expectations NOT met (acts 5):" in lines  # placement, slot, retry, slot history
    assert any(line.startswith("ok: annotated with 1 device(s): nvidia.high.mem_akri-gpu-") for line in lines)
    assert "ok: 0 brokers, 0 services left" in lines  # the brokers' half still holds, checked as before


# -- the narrator ----------------------------------------------------------------------------------------------------


def test_the_plain_tour_prints_verdicts_with_stable_prefixes_and_keeps_them() -> None:
    printed: list[str] = []
    tour = Tour(echo=printed.append)
    tour.act(7, "a title", "a source")
    tour.step("do a thing", "it works")
    assert tour.expect(True, "it worked")
    assert not tour.expect(False, "it broke", "it works")
    tour.broke("act 7 stopped: Unavailable: gone")
    assert printed == [
        "\n== Act 7: a title ==",
        "a source",
        "\n-> do a thing",
        "   seed: it works",
        "   ok: it worked",
        "   FAILED: it broke (expected: it works)",
        "   FAILED: act 7 stopped: Unavailable: gone",
    ]
    assert [(c.act, c.ok) for c in tour.checks] == [(7, True), (7, False), (7, False)]
    printed.clear()
    assert tour.summary([7]) is False
    assert printed[0] == "\ndemo: 2 of 3 expectations NOT met (acts 7):\n  act 7: it broke (expected: it works)\n" + (
        "  act 7: act 7 stopped: Unavailable: gone (expected: the act to run to its end)"
    )


def test_a_tour_where_everything_held_says_so() -> None:
    printed: list[str] = []
    tour = Tour(echo=printed.append)
    tour.expect(True, "fine")
    assert tour.summary([1, 2]) is True
    assert printed[-1] == "\ndemo: all 1 expectations held (acts 1, 2)"


def test_the_rich_tour_marks_failures_on_a_terminal() -> None:
    buffer = io.StringIO()
    tour = Tour(Console(file=buffer, force_terminal=True, width=100))
    tour.act(1, "t", "s")
    tour.table(["A", "B"], [["1", "2"]])
    tour.code("a: 1")
    tour.expect(False, "x [not markup]", "y")
    text = buffer.getvalue()
    assert "\x1b[" in text
    assert "FAILED: " in text
    assert "x [not markup]" in text  # narration is text, never parsed as rich markup


# -- pure parts of acts 2 and 3 --------------------------------------------------------------------------------------


def test_view_joins_free_counts_in_resource_order() -> None:
    assert view({"cl": 0, "a": 1, "b": 1}, ["cl", "a", "b"]) == "0/1/1"
    assert view({"a": 2}, ["cl", "a"]) == "0/2"


@pytest.mark.parametrize(
    ("holder", "label"),
    [
        ("", "free"),
        ("node-a", "node-a (IL)"),
        ("C:akri-onvif-8120fe:node-a", "node-a (CL)"),
        ("C:cam:x:node-b", "node-b (CL)"),
    ],
)
def test_holder_label_names_the_node_and_the_plugin_level(holder: str, label: str) -> None:
    assert holder_label(holder) == label


@pytest.mark.parametrize(
    ("states", "found"),
    [
        ([{"s-0": ""}, {"s-0": "node-a"}, {"s-0": ""}, {"s-0": "node-b"}], []),  # claim, release, claim
        ([{"s-0": "node-a"}, {"s-0": "node-a", "s-1": "node-b"}], []),
        ([{"s-0": "node-a"}, {"s-0": "node-b"}], ["i s-0: 'node-a' -> 'node-b'"]),
        ([{"s-0": "node-a"}, {"s-0": "C:v:node-a"}], ["i s-0: 'node-a' -> 'C:v:node-a'"]),  # IL hold is not CL
        ([{"s-0": "node-a"}, {}], []),  # the Instance went away
    ],
)
def test_double_bookings_are_slots_passed_straight_between_holders(
    states: list[dict[str, str]], found: list[str]
) -> None:
    assert double_bookings({"i": states}) == found


def test_the_usage_history_keeps_each_distinct_state_once() -> None:
    history = UsageHistory()
    obj = {"metadata": {"name": "i"}, "spec": {"deviceUsage": {"i-0": ""}}}
    history.record("ADDED", obj)
    history.record("MODIFIED", obj)
    history.record("MODIFIED", {"metadata": {"name": "i"}, "spec": {"deviceUsage": {"i-0": "n"}}})
    history.record("DELETED", obj)
    assert history.states == {"i": [{"i-0": ""}, {"i-0": "n"}, {}]}
    assert history.latest() == {"i": {}}


# -- pure parts of act 4 ---------------------------------------------------------------------------------------------


def test_the_shipped_fleet_example_holds_the_seeds_intents() -> None:
    example = load_fleet_example(example_path(*FLEET_EXAMPLE).read_text())
    assert example.plan == "/v2/projects/my-proj1/composite-apps/my-capp1/v1.0/deployment-intent-groups/my-dig1"
    names = {(r.collection, r.name) for r in example.requests}
    for requirement in (
        "core-fwall-cpu-requirement",
        "core-fwall-RAM-needs",
        "core-fwall-gpu-needs",
        "api-server-cpu-needs",
        "api-server-ram-needs",
        "ai-model-cpu-requirement",
        "logger-cpu-needs",
    ):
        assert ("resource-requirements", requirement) in names
    assert [r[0] for r in inventory_rows(example.requests)] == [
        "edge/cluster-1",
        "edge/cluster-1",
        "edge/cluster-2",
        "edge/cluster-3",
        "edge/cluster-4",
        "edge/cluster-7",
    ]


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("[1, 2]", ""),
        ("plan: /v1/x\nrequests: [{post: /v2/a, body: {metadata: {name: a}}}]", "plan"),
        ("plan: /v2/x\nrequests: []", "requests"),
        ("plan: /v2/x\nrequests: [3]", "requests[0]"),
        ("plan: /v2/x\nrequests: [{post: /v2/a, body: {metadata: {name: a}}, put: x}]", "requests[0].put"),
        ("plan: /v2/x\nrequests: [{post: v2/a, body: {metadata: {name: a}}}]", "requests[0].post"),
        ("plan: /v2/x\nrequests: [{post: /v2/a, body: []}]", "requests[0].body"),
        ("plan: /v2/x\nrequests: [{post: /v2/a, body: {metadata: {}}}]", "requests[0].body.metadata.name"),
        ("plan: /v2/x\nrequests: {{", ""),
    ],
)
def test_a_bad_fleet_example_names_the_field(text: str, path: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        load_fleet_example(text)
    assert [f.path for f in caught.value.fields] == [path]


@given(st.text(max_size=200))
def test_loading_any_text_as_a_fleet_example_succeeds_or_is_invalid(text: str) -> None:
    try:
        example = load_fleet_example(text)
    except errors.Invalid:
        return
    assert example.plan.startswith("/v2/")
    assert example.requests


def test_item_path_is_where_the_created_object_lives() -> None:
    base = "/v2/projects/p/composite-apps"
    assert item_path(FleetRequest("/v2/projects", {"metadata": {"name": "p"}})) == "/v2/projects/p"
    capp = FleetRequest(base, {"metadata": {"name": "c"}, "spec": {"compositeAppVersion": "v1"}})
    assert item_path(capp) == f"{base}/c/v1"


def test_manifest_excerpt_keeps_what_the_action_controller_writes() -> None:
    resources = {"requests": {"cpu": "1"}}
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "replicas": 2,
            "selector": {},
            "template": {
                "spec": {
                    "containers": [{"name": "c", "image": "i", "resources": resources}],
                    "nodeSelector": {"k": "v"},
                }
            },
        },
    }
    assert manifest_excerpt(deployment) == {
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "c", "resources": resources}], "nodeSelector": {"k": "v"}}},
        }
    }
    pod = {"kind": "Pod", "spec": {"containers": [{"name": "c", "image": "i"}]}}
    assert manifest_excerpt(pod) == {"spec": {"containers": [{"name": "c", "resources": {}}]}}
