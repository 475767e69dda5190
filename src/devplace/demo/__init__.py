"""Scenarios over the simulated fleet, and what people see of them: `devplace sim run`, `devplace demo` (what
`make demo` runs: `examples/demo.yaml`, the main job), `devplace up`.

It is its own package, between the CLI and the parts it runs (the API server, the simulator), so the CLI stays a thin
shell over the parts: the commands (`devplace.cli._sims`, `_demos`, `_ups`) parse their options and call in here. The
demo is a scenario file like any other: its `say:` lines narrate, its `expect:` blocks check.

- `timelines`: running a scenario file (`devplace sim run`): `ScenarioRun` steps a `sim.Fleet`, samples the cluster
  after every step, checks each `expect` block, and returns a `Report`.
- `plots`: PNG plots of a run (`devplace sim run --plots DIR`, matplotlib from the `report` extra): availability and
  pods over simulated time, held/allocatable per node, the fleet decision; `write_plots` returns each `Plot` with the
  series it drew, so tests check a picture through its data.
- `liveviews`: the live view on a terminal (rich): `LiveView(total_steps).on_step` redraws progress, nodes x
  resources, slot holders, brokers and pending pods after every step.
- `ups`: `devplace up`: `Up` keeps a scenario's fleet running with the API server, the `/sim/v1` control routes
  (one step at a time), a ticker that moves simulated time with wall time, and the world saved beside the store.

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.demo._liveviews import LiveView
from devplace.demo._plots import Plot, Series, write_plots
from devplace.demo._timelines import Report, Sample, ScenarioRun, StepRecord, run_scenario, scenario_path
from devplace.demo._ups import SIM_PATH, Up, up_scenario, world_file

__all__ = [
    "SIM_PATH",
    "LiveView",
    "Plot",
    "Report",
    "Sample",
    "ScenarioRun",
    "Series",
    "StepRecord",
    "Up",
    "run_scenario",
    "scenario_path",
    "up_scenario",
    "world_file",
    "write_plots",
]
