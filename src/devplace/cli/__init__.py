"""The `devplace` command: thin: it parses, calls the parts, prints.

- `app`: the typer application; each command group registers itself from its module;
- `resources`: `apply | get | describe | delete | watch` over any store;
- `output`: tables, JSON, YAML, describe text and watch lines;
- `explains`: `devplace explain pod NAME`;
- `crds`: `devplace crds`;
- `stores`: `devplace store backup | restore | export | import`;
- `renders`: `devplace render --akri-values`, on `akrivalues` (Akri's chart as rules) and `helmvalues` (`--set`);
- `emco`: `devplace fleet ...`, the /v2 client; `emcofiles`: emcoctl's resource files;
- `servers`: `devplace server` and `devplace wait-ready`; `agents`: `devplace agent`, which re-executes itself as
  `agentruns` (the agent's process without the typer application) once its options are checked;
- `daemons`: `devplace scheduler | controller`; `serves`: every daemon's run loop (start, wait for a signal or a
  failure, stop); `options`: the options every daemon shares (`--log-level`, `--metrics-port`...);
- `handlers`: `devplace handler nvml`, a built-in discovery handler as its own process;
- `kubelets`: `devplace kubelet-sim`;
- `demos`: `devplace demo` (`make demo`), which runs `examples/demo.yaml` as `devplace sim run` does;
- `sims`: `devplace sim run | check | schema`, scenario files; `ups`: `devplace up` (a simulated cluster that keeps
  running) and `devplace sim step` (one step sent to it);
- `configs`: every option from `DEVPLACE_<OPTION>` and `--config FILE`; `logs`: `--log-level`, `--log-format`;
  `probes`: `--metrics-port`'s `/metrics`, `/livez`, `/readyz`.

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

import os

# gRPC's C core logs connection teardown ("Got goaway") to stderr unless told otherwise, and reads this only
# before `grpc` is first imported; a user's own setting wins.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from devplace.cli._app import app, main

__all__ = [
    "app",
    "main",
]


def __getattr__(name: str) -> Any:
    """`app` and `main` on first use: a process that runs one part (`_agentruns`) imports its modules without the
    typer application and every other command."""
    if name in __all__:
        from devplace.cli import _app

        return getattr(_app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
