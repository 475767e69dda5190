"""The options every daemon command shares (`--log-level`, `--log-format`, `--metrics-port`, `--metrics-address`),
as typer annotations: kept apart from what they set up (`_logs`, `_probes`), which the agent's process
(`_agentruns`) runs without typer.
"""

from __future__ import annotations

from typing import Annotated

import typer

LogLevelOption = Annotated[str, typer.Option("--log-level", help="critical, error, warning, info or debug")]
LogFormatOption = Annotated[
    str, typer.Option("--log-format", help="text, or json: one object per line (time, level, logger, message)")
]
MetricsPortOption = Annotated[
    int | None,
    typer.Option(
        "--metrics-port",
        help="Serve /metrics, /livez and /readyz on this port (0: any free port) [default: off]",
        min=0,
        max=65535,
        show_default=False,
    ),
]
MetricsAddressOption = Annotated[
    str, typer.Option("--metrics-address", help="Address the --metrics-port endpoint listens on")
]
