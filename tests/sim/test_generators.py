"""Generated scenarios: valid at every size, deterministic, exact in what they expect, and true when run."""

from __future__ import annotations

import stat
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from devplace import errors
from devplace.agent import instance_name
from devplace.cli import app
from devplace.demo import ScenarioRun, run_scenario
from devplace.sim import generate_scenario, load_scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def loaded(document: dict[str, Any]) -> Any:
    return load_scenario(yaml.safe_dump(document, sort_keys=False), "generated.yaml")


sizes = st.fixed_dictionaries(
    {
        "nodes": st.integers(1, 8),
        "devices": st.integers(1, 40),
        "seed": st.integers(0, 2**32),
        "shared_ratio": st.floats(0.0, 1.0),
        "configurations": st.integers(1, 10),
        "pods": st.integers(0, 8),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes)
def test_every_generated_scenario_loads_and_its_first_counts_are_one_instance_per_device(args: dict[str, Any]) -> None:
    document = generate_scenario(**args)
    scenario = loaded(document)
    spec = scenario.spec
    assert [n.name for n in spec.nodes] == [f"node-{i}" for i in range(1, args["nodes"] + 1)]
    assert len(spec.devices) == args["devices"]
    for device in spec.devices:
        assert 1 <= len(device.nodes) <= min(3, args["nodes"])
        assert len(set(device.nodes)) == len(device.nodes)
    names = Counter(
        instance_name(f"sim-{d.properties['kind']}", d.id, "", True) for d in spec.devices
    )  # the sim handler stamps every device shared: one Instance each, never two devices on one name
    assert max(names.values()) == 1
    first = spec.steps[0].expect
    assert first is not None
    assert first.counts is not None
    assert first.counts["instances"] == args["devices"]
    assert first.counts["nodes"] == args["nodes"]
    kinds = Counter(d.properties["kind"] for d in spec.devices)
    assert {k: v for k, v in first.counts.items() if k.startswith("instances[")} == {
        f"instances[configuration=sim-{kind}]": kinds.get(kind, 0)
        for kind in [c["spec"]["discoveryHandler"]["discoveryDetails"][6:] for c in spec.steps[0].apply]  # type: ignore[union-attr]
    }
    pods = [s.run_pod for s in spec.steps if s.run_pod is not None]
    assert len(pods) == min(args["pods"], args["devices"])
    asked = Counter(next(iter(p.requests)) for p in pods)
    assert all(asked[f"akri.sh/sim-{kind}"] <= count for kind, count in kinds.items())
    assert all(p.node is None for p in pods)  # the scheduler places them


@given(sizes)
def test_the_generator_is_a_pure_function_of_its_arguments(args: dict[str, Any]) -> None:
    assert generate_scenario(**args) == generate_scenario(**args)


def test_the_node_that_goes_down_takes_only_the_instances_no_other_node_sees() -> None:
    document = generate_scenario(nodes=4, devices=40, shared_ratio=0.5, seed=3)
    devices = document["spec"]["devices"]
    down = next(s for s in document["spec"]["steps"] if "node-down" in s)
    assert down["node-down"] == "node-4"
    only_there = sum(1 for d in devices if d["nodes"] == ["node-4"])
    assert 0 < only_there < sum(1 for d in devices if "node-4" in d["nodes"])
    assert down["expect"]["counts"]["instances"] == 40 - only_there
    assert down["expect"]["counts"]["nodes"] == 3


def test_colliding_instance_names_get_a_suffix_so_the_counts_stay_exact() -> None:
    document = generate_scenario(nodes=100, devices=10_000, configurations=1, pods=0)
    ids = [d["id"] for d in document["spec"]["devices"]]
    assert len({instance_name("sim-camera", i, "", True) for i in ids}) == 10_000
    assert any(i.endswith("x") for i in ids)  # 10,000 ids over 24 bits of digest: some collided


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("nodes", 0, "must be at least 1, got 0"),
        ("devices", -3, "must be at least 1, got -3"),
        ("shared_ratio", 1.5, "must be between 0 and 1, got 1.5"),
        ("configurations", 65, "must be between 1 and 64, got 65"),
        ("pods", True, "must be a number, got True"),
    ],
)
def test_bad_arguments_are_refused_naming_the_argument(field: str, value: Any, reason: str) -> None:
    args: dict[str, Any] = {"nodes": 2, "devices": 4, field: value}
    with pytest.raises(errors.Invalid) as caught:
        generate_scenario(**args)
    assert caught.value.fields[0].path == field
    assert caught.value.fields[0].reason == reason


@pytest.mark.parametrize("transport", ["unix", "inprocess"])
async def test_a_generated_scenario_runs_on_the_real_fleet_with_every_expectation_holding_over_both_transports(
    transport: Literal["unix", "inprocess"],
) -> None:
    document = generate_scenario(
        nodes=3, devices=12, shared_ratio=0.5, configurations=2, pods=3, seed=7, transport=transport
    )
    sockets: list[bool] = []
    runner = ScenarioRun(
        loaded(document),
        on_step=lambda record, sample: sockets.append(
            stat.S_ISSOCK(runner.fleet.kubelet("node-1").registration_socket.stat().st_mode)
        ),
    )
    report = await runner.run()
    assert [(s.title, s.mismatches) for s in report.steps if not s.ok] == []
    held, checked = report.expectations
    assert held == checked > 30
    assert set(sockets) == {transport == "unix"}  # in process: the same files, no socket behind them


def test_large_generated_scenarios_ask_for_the_in_process_transport_and_small_ones_keep_sockets() -> None:
    assert "transport" not in generate_scenario(nodes=49, devices=49)["spec"]["settings"]
    assert generate_scenario(nodes=50, devices=50)["spec"]["settings"]["transport"] == "inprocess"
    assert "transport" not in generate_scenario(nodes=50, devices=50, transport="unix")["spec"]["settings"]


async def test_seed_000_holds_over_the_in_process_transport_as_over_sockets() -> None:
    text = (EXAMPLES / "scenarios" / "seed-000.yaml").read_text()
    text = text.replace("spec:\n  nodes:", "spec:\n  settings: {transport: inprocess}\n  nodes:", 1)
    scenario = load_scenario(text, "seed-000.yaml")
    assert scenario.spec.settings.transport == "inprocess"
    report = await run_scenario(scenario)
    assert [(s.title, s.mismatches) for s in report.steps if not s.ok] == []
    assert report.expectations[0] == report.expectations[1] > 0


def test_devplace_sim_generate_prints_a_scenario_the_loader_accepts() -> None:
    result = CliRunner().invoke(app, ["sim", "generate", "--nodes", "3", "--devices", "9", "--seed", "2"])
    assert result.exit_code == 0, result.output
    document = yaml.safe_load(result.output)
    assert document == generate_scenario(nodes=3, devices=9, seed=2)
    assert loaded(document).name == "generated-3n-9d-s2"
