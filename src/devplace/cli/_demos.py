"""`devplace demo` (what `make demo` runs): the main job, `examples/demo.yaml`, run as `devplace sim run` runs it.

The demo is a scenario file: its `say:` lines narrate, its `expect:` blocks check, and this command only chooses what
to run and where. Every scenario given (default: `examples/demo.yaml`) is loaded and checked first, so a bad file is
one `error:` block (with line and column) and nothing runs; then each runs in order through
`devplace.demo.run_scenario`, printed by `devplace sim run`'s own plain printer (`say: ...`, `step N/M ...: ok|FAILED`,
a summary line per scenario).

Store: by default each scenario gets a fresh SQLite file in a temporary directory removed afterwards (the embedded
store, as `devplace server` uses it), so runs never see each other's objects. `--store URL` runs every scenario on that
store instead, one after another: a later scenario then sees what an earlier one left. The exit code is 1 when any
expectation of any scenario did not hold.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from devplace.cli._resources import StoreOption, run
from devplace.cli._sims import _Printer, _summary

DEMO = "demo.yaml"
"""The main job, under the source tree's `examples/` (`devplace.demo.scenario_path` finds it)."""


def demo(
    scenarios: Annotated[
        list[str] | None,
        typer.Argument(
            help="Scenario files to run in order (or names under examples/scenarios, e.g. seed-001) "
            "[default: examples/demo.yaml]",
            show_default=False,
        ),
    ] = None,
    store: StoreOption = None,
) -> None:
    """The main job: seeds 000-004 on one simulated cluster, narrated by the scenario's `say:` lines.

    Device sharing in both policies (seed 000), ten nodes contending for capacity 5 with brokers failing over
    (seed 001), brokers, pools and groups (seed 002), resource classes (seed 003) and fleet placement (seed 004).
    Exits 1 if any expectation does not hold.
    """
    from devplace.demo import run_scenario, scenario_path  # the demo loads every part: only this command pays for it
    from devplace.sim import load_scenario_file

    async def work() -> int:
        loaded = [load_scenario_file(scenario_path(name)) for name in scenarios or [DEMO]]
        began = time.perf_counter()
        failed: list[str] = []
        held = checked = 0
        with tempfile.TemporaryDirectory(prefix="devplace-demo-") as tmp:
            for index, scenario in enumerate(loaded):
                url = store or f"sqlite:///{Path(tmp) / f'{index + 1}-{scenario.name}.db'}"
                typer.echo(f"devplace demo: scenario {scenario.name} ({scenario.source}), store {url}")
                report = await run_scenario(scenario, store=url, on_step=_Printer(len(scenario.spec.steps)))
                typer.echo(_summary(report))
                ok, total = report.expectations
                held, checked = held + ok, checked + total
                if not report.ok:
                    failed.append(scenario.name)
        if len(loaded) > 1:
            verdict = f"FAILED: {', '.join(failed)}" if failed else "ok"
            typer.echo(
                f"demo: {verdict}: {held}/{checked} expectations held over {len(loaded)} scenarios "
                f"({time.perf_counter() - began:.1f} s)"
            )
        return 1 if failed else 0

    run(work)


def register(app: typer.Typer) -> None:
    app.command()(demo)
