"""`--log-format json|text` and `--log-level`: one JSON object per line with the object a log call carries, the
text format as before, and no library noise below debug."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from devplace.cli._logs import LIBRARIES, JsonFormatter, TextFormatter, configure_logging, object_fields
from tests.cli.test_daemons import NODE, POD, daemon, read, seed, stop, wait_for

__all__ = ["daemon"]  # the fixture, shared with test_daemons

POD_OBJECT = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"}}


def record(message: str, carried: Any = None, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom")
        except ValueError:
            exc_info = sys.exc_info()
    made = logging.LogRecord("devplace.agent._writes", logging.WARNING, __file__, 1, message, ("x",), exc_info)
    made.created = 1_700_000_000.25
    if carried is not None:
        made.object = carried
    return made


def test_a_json_line_has_time_level_logger_message_and_the_carried_objects_kind_namespace_and_name() -> None:
    line = JsonFormatter().format(record("claim refused for %s", POD_OBJECT))
    assert json.loads(line) == {
        "time": "2023-11-14T22:13:20.250Z",
        "level": "warning",
        "logger": "devplace.agent._writes",
        "message": "claim refused for x",
        "kind": "Pod",
        "namespace": "default",
        "name": "web",
    }
    assert "\n" not in line


def test_a_json_line_without_an_object_has_no_object_fields_and_carries_a_traceback_as_error() -> None:
    out = json.loads(JsonFormatter().format(record("failed %s", exc=True)))
    assert sorted(out) == ["error", "level", "logger", "message", "time"]
    assert out["error"].startswith("Traceback")
    assert out["error"].endswith("ValueError: boom")


@pytest.mark.parametrize(
    ("carried", "fields"),
    [
        (POD_OBJECT, {"kind": "Pod", "namespace": "default", "name": "web"}),
        (("Node", "", "node-a"), {"kind": "Node", "name": "node-a"}),
        ({"kind": "Node", "metadata": {"name": "node-a"}}, {"kind": "Node", "name": "node-a"}),
        ("not an object", {}),
        (None, {}),
    ],
)
def test_an_object_is_named_by_kind_namespace_and_name(carried: Any, fields: dict[str, str]) -> None:
    assert object_fields(carried) == fields


def test_the_text_format_is_as_before_with_the_object_after_the_message() -> None:
    line = TextFormatter().format(record("claim refused for %s", POD_OBJECT))
    assert re.fullmatch(r"\S+ \S+ WARNING devplace\.agent\._writes: claim refused for x \[Pod default/web\]", line)


def test_libraries_report_only_warnings_below_debug_and_everything_at_debug() -> None:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        configure_logging("info", "json", force=True)
        assert root.level == logging.INFO
        for name in LIBRARIES:
            assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
            assert logging.getLogger(name).isEnabledFor(logging.WARNING), name
        configure_logging("debug", "text", force=True)
        for name in LIBRARIES:
            assert logging.getLogger(name).isEnabledFor(logging.DEBUG), name
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name in LIBRARIES:
            logging.getLogger(name).setLevel(logging.NOTSET)


def test_a_daemon_with_log_format_json_writes_only_json_objects(daemon: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/devplace.db"
    seed(url, NODE, POD)
    proc, log = daemon("scheduler", "--store", url, "--log-format", "json", "--log-level", "debug")
    wait_for(lambda: read(url, "Pod")[0]["spec"].get("nodeName") == "node-a", proc, log)
    code, output = stop(proc, log)
    assert code == 0, output
    lines = [json.loads(line) for line in output.splitlines()]  # every line is one object
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    messages = [line["message"] for line in lines if line["logger"] == "devplace"]
    assert messages[-1] == "devplace scheduler: stopped"
    assert "devplace scheduler: name devplace-scheduler, strategy firstFit, store " + url in messages
