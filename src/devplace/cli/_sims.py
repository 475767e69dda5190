"""`devplace sim`: scenario files run over the simulated fleet (`run`, `check`, `schema`).

The shell only: options, the text a run prints, the report file. Loading and checking the file is
`devplace.sim.load_scenario_file` (every problem with its line and column, before anything runs: exit 1 with one
`error:` block); running it is `devplace.demo.run_scenario`. Plain output has stable prefixes a script can grep:
`say: ` (the step's narration), `step N/M <title>: ok|FAILED`, `   FAILED <field>: wanted ..., got ...`, then one
summary line. The exit code is 0 only when every expectation held.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from devplace.cli._resources import StoreOption, run

if TYPE_CHECKING:
    from devplace.demo import Report, Sample, StepRecord

sim_app = typer.Typer(
    name="sim",
    help="Scenario files over the simulated fleet: run them, check them, print their JSON Schema.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

ScenarioArgument = Annotated[
    str, typer.Argument(help="A scenario file (or the name of one under examples/scenarios, e.g. seed-000)")
]


class _Printer:
    """Prints each step as it ends (plain text)."""

    def __init__(self, total: int) -> None:
        self.total = total

    def __call__(self, record: StepRecord, sample: Sample) -> None:
        del sample
        verdict = "ok" if record.ok else "FAILED"
        checks = f" ({record.checked} checks)" if record.checked else ""
        if record.say:
            typer.echo(f"say: {record.say}")
        typer.echo(f"step {record.index + 1}/{self.total} {record.title}: {verdict}{checks} [t={record.sim_time:g}s]")
        if record.error and record.ok:
            typer.echo(f"   failed as expected: {record.error}")
        for mismatch in record.mismatches:
            typer.echo(f"   FAILED {mismatch}")


def _summary(report: Report) -> str:
    held, checked = report.expectations
    verdict = "ok" if report.ok else "FAILED"
    failed = [f"{s.index + 1} ({s.title})" for s in report.steps if not s.ok]
    where = f"; failed steps: {', '.join(failed)}" if failed else ""
    return (
        f"scenario {report.scenario}: {verdict}: {held}/{checked} expectations held over {len(report.steps)} steps "
        f"({report.wall_seconds:.1f} s){where}"
    )


@sim_app.command("run")
def run_command(
    scenario: ScenarioArgument,
    store: StoreOption = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write the JSON report here")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for anything random in the run")] = 0,
    plots: Annotated[
        Path | None, typer.Option("--plots", help="Write PNG plots of the run into this directory (needs matplotlib)")
    ] = None,
) -> None:
    """Run a scenario: its nodes and devices, manifests and fleet requests, then every step with its checks.

    On a terminal a live view redraws the cluster after every step; otherwise each step is one plain line.
    Exits 1 when any expectation does not hold (each failure names the step and the field).
    """
    from rich.console import Console

    from devplace.demo import LiveView, run_scenario, scenario_path, write_plots
    from devplace.sim import load_scenario_file

    async def work() -> int:
        loaded = load_scenario_file(scenario_path(scenario))
        total, console = len(loaded.spec.steps), Console()
        if console.is_terminal:
            with LiveView(total, console=console) as view:
                result = await run_scenario(loaded, store=store or "memory", seed=seed, on_step=view.on_step)
        else:
            result = await run_scenario(loaded, store=store or "memory", seed=seed, on_step=_Printer(total))
        if report is not None:
            report.parent.mkdir(parents=True, exist_ok=True)
            report.write_text(json.dumps(result.to_wire(), indent=2) + "\n", encoding="utf-8")
        for plot in write_plots(result, plots) if plots is not None else []:
            typer.echo(f"plot: {plot.path} ({plot.width}x{plot.height}, {plot.kind})")
        typer.echo(_summary(result))
        return 0 if result.ok else 1

    run(work)


@sim_app.command("check")
def check_command(scenario: ScenarioArgument) -> None:
    """Check a scenario file (schema and references) without running it."""
    from devplace.demo import scenario_path
    from devplace.sim import load_scenario_file

    async def work() -> int:
        loaded = load_scenario_file(scenario_path(scenario))
        typer.echo(f"{loaded.source}: scenario {loaded.name}: {len(loaded.spec.steps)} steps, ok")
        return 0

    run(work)


@sim_app.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of scenario files."""
    from devplace.sim import scenario_schema

    typer.echo(json.dumps(scenario_schema(), indent=2))


@sim_app.command("generate")
def generate_command(
    nodes: Annotated[int, typer.Option("--nodes", min=1, help="Nodes node-1..N")] = 10,
    devices: Annotated[int, typer.Option("--devices", min=1, help="Devices spread over the nodes")] = 100,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sharing draw and of the devices unplugged")] = 0,
    shared_ratio: Annotated[
        float, typer.Option("--shared-ratio", min=0.0, max=1.0, help="Share of devices seen by 2-3 nodes")
    ] = 0.2,
    configurations: Annotated[
        int, typer.Option("--configurations", min=1, max=64, help="Device kinds, one Configuration each")
    ] = 2,
    pods: Annotated[int, typer.Option("--pods", min=0, help="Pods run through the scheduler")] = 5,
    transport: Annotated[
        str | None,
        typer.Option("--transport", help="unix or inprocess (default: inprocess from 50 nodes, else unix sockets)"),
    ] = None,
) -> None:
    """Print a generated scenario (YAML) whose expectations are known exactly: `devplace sim run` it."""
    import yaml

    from devplace.sim import generate_scenario

    async def work() -> int:
        document = generate_scenario(
            nodes=nodes,
            devices=devices,
            seed=seed,
            shared_ratio=shared_ratio,
            configurations=configurations,
            pods=pods,
            transport=transport,  # type: ignore[arg-type]  # checked by the generator, named in its error
        )
        typer.echo(yaml.safe_dump(document, sort_keys=False, width=120), nl=False)
        return 0

    run(work)


def register(app: typer.Typer) -> None:
    app.add_typer(sim_app)
