"""`devplace demo` (what `make demo` runs): the command of the narrated tour that `devplace.demo` holds.

Only the shell lives here: the options, the tour printing to stdout, and the CLI's own renderers (`output`) and apply
(`resources`) handed to the demo, which shows them but, sitting below the CLI in the layers, never imports them. A bad
input (`errors.Invalid` from the demo before any act) is one `error:` line; a failed expectation exits 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from devplace.cli import _output as output
from devplace.cli import _resources as resources
from devplace.cli._resources import StoreOption, run


def demo(
    store: StoreOption = None,
    act: Annotated[
        list[int] | None,
        typer.Option(
            "--act",
            min=1,
            max=5,
            help="Run only this act (repeatable): 1 store/API/CLI, 2 device sharing, 3 contention, 4 fleet placement, "
            "5 resource classes and brokers",
        ),
    ] = None,
    examples: Annotated[Path | None, typer.Option("--examples", help="Directory of manifests for act 1")] = None,
    fleet_example: Annotated[
        Path | None,
        typer.Option(
            "--fleet-example",
            help="The /v2 requests for act 4 [default: examples/fleet/seed-004.yaml]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """A narrated tour: store + API + CLI, device sharing (seed 000), contention (seed 001), fleet placement (seed 004),
    resource classes and brokers (seeds 003 and 002).

    Exits 1 if any outcome the tour expects does not happen.
    """
    from devplace.demo import ACTS, Tour, run_demo  # the demo loads every part: only this command pays for it

    acts = sorted(set(act)) if act else list(ACTS)
    tour = Tour.for_stdout(output)

    async def work() -> int:
        return await run_demo(tour, resources, store=store, acts=acts, examples=examples, fleet_example=fleet_example)

    run(work)


def register(app: typer.Typer) -> None:
    app.command()(demo)
