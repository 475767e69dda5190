"""The narrated demo (`devplace demo`, what `make demo` runs): five acts that show and check the whole product.

It is its own package, between the CLI and the parts it runs (the API server, the simulator, the remote store), so
the CLI stays a thin shell over the parts: the `devplace demo` command (`devplace.cli._demos`) parses its options and
calls `run_demo` here, handing in the CLI's renderers and apply (`tours.Rendering`, `acts_stores.Applier`), which
the demo shows but, being below the CLI in the layers, never imports. The acts, and the server, simulator and remote
store they run, load only when the demo runs.

- `runs`: running the demo: the acts in order on one store served by an in-process API server, each act's failure
  reported and the next one still run; where the example files are.
- `tours`: the narrator, `Tour`: headings, steps, tables, and every expectation checked and kept for the verdict.
- `acts_stores`: act 1, the store, the API server and the CLI's apply.
- `acts_devices`: acts 2 and 3, device sharing and contention on simulated nodes (seeds 000 and 001).
- `acts_fleets`: act 4, hardware-aware fleet placement through `/v2` (seed 004).
- `acts_classes`: act 5, resource classes and brokers (seeds 003 and 002).

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.demo._runs import ACTS, run_demo
from devplace.demo._tours import Tour

__all__ = [
    "ACTS",
    "Tour",
    "run_demo",
]
