"""`--log-format text|json` and `--log-level` of every long-running command: one setup, on stderr.

JSON is one object per line, as log collectors (Loki, Fluent Bit, Cloud Logging) read it:
`{"time": "2026-01-02T03:04:05.678Z", "level": "info", "logger": "devplace.agent._writes", "message": "..."}`, plus
`kind`, `namespace` and `name` when the log call carries an object as `extra={"object": obj}` (a wire dict with
`kind` and `metadata`, or a `(kind, namespace, name)` tuple), and `error` (the traceback) when it carries an
exception. Text is the format the commands always had, `TIME LEVEL LOGGER: message`, with ` [Kind ns/name]` after
the message when an object is carried.

The lines a command itself prints (`devplace agent: node ...`, `devplace agent: stopped`, `error: ...`) go through
`announce`: as they always were in text, as log objects (logger `devplace`) in JSON, so a JSON log has no line
that is not an object.

No library noise: below `--log-level debug` the libraries' loggers (uvicorn, its access log, grpc, httpx, httpcore,
asyncua, asyncio) report warnings and errors only; at debug they report everything, and the API server writes an
access log.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any

LOG_FORMATS = ("text", "json")
LIBRARIES = ("uvicorn", "uvicorn.error", "uvicorn.access", "grpc", "httpx", "httpcore", "asyncua", "asyncio")


_json = False


def object_fields(carried: Any) -> dict[str, str]:
    """`kind`, `namespace` and `name` of an object carried by a log call (empty when there is none)."""
    if isinstance(carried, tuple) and len(carried) == 3:
        kind, namespace, name = carried
        fields = {"kind": str(kind), "namespace": str(namespace), "name": str(name)}
    elif isinstance(carried, Mapping):
        meta = carried.get("metadata") or {}
        fields = {
            "kind": str(carried.get("kind") or ""),
            "namespace": str(meta.get("namespace") or "") if isinstance(meta, Mapping) else "",
            "name": str(meta.get("name") or "") if isinstance(meta, Mapping) else "",
        }
    else:
        return {}
    return {k: v for k, v in fields.items() if v}


def _time(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per record (module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update(object_fields(getattr(record, "object", None)))
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """`TIME LEVEL LOGGER: message [Kind ns/name]`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        fields = object_fields(getattr(record, "object", None))
        if fields:
            where = "/".join(v for v in (fields.get("namespace"), fields.get("name")) if v)
            line += f" [{fields.get('kind', '?')} {where}]"
        return line


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a record comes (a test runner may swap it between commands)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def parse_level(log_level: str) -> int:
    """`--log-level` as a logging level (a bad name is a usage error naming the option)."""
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        import typer  # a usage error where a command checks it; the agent's process never gets here (`_agentruns`)

        raise typer.BadParameter(
            f"{log_level!r} is not one of critical, error, warning, info, debug", param_hint="--log-level"
        )
    return level


def configure_logging(log_level: str, log_format: str = "text", *, force: bool = False) -> int:
    """Log to stderr at `log_level` in `log_format`; libraries quiet below debug (module docstring). Returns the
    level. Where the process has set logging up already (a handler on the root logger that is not ours: a test
    runner's, an embedding program's), it is left as it is, as `logging.basicConfig` leaves it, unless `force`."""
    global _json
    level = parse_level(log_level)
    if log_format not in LOG_FORMATS:
        import typer  # as in `parse_level`

        raise typer.BadParameter(f"{log_format!r} is not one of text, json", param_hint="--log-format")
    root = logging.getLogger()
    if not force and any(not isinstance(h, _StderrHandler) for h in root.handlers):
        return level
    _json = log_format == "json"
    handler = _StderrHandler()
    handler.setFormatter(JsonFormatter() if _json else TextFormatter())
    for old in list(root.handlers):
        if isinstance(old, _StderrHandler):  # ours, from an earlier command in this process; others are kept
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in LIBRARIES:
        library = logging.getLogger(name)
        library.setLevel(level if level <= logging.DEBUG else max(level, logging.WARNING))
        library.handlers.clear()
        library.propagate = True
    return level


def announce(line: str, *, error: bool = False) -> None:
    """A command's own line on stderr (module docstring): printed as is in text, a log object in JSON."""
    if _json:
        logging.getLogger("devplace").log(logging.ERROR if error else logging.INFO, line)
    else:
        print(line, file=sys.stderr, flush=True)
