"""Rendering objects for people and for programs: tables, JSON, YAML, `describe` text, watch lines.

Pure functions from wire dicts (and the current time) to text, so every format is tested without a terminal.
Tables have kubectl's shape: NAMESPACE (for namespaced kinds), NAME, a few kind-specific columns, AGE
(`get brokers` is a view of Configurations: strategy and the controller's desired/running/pending counts). On a
terminal the CLI draws them with rich; otherwise `plain_table` aligns columns with spaces, which scripts can
split on whitespace. Missing values show as `<none>`, like kubectl.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from rich import box
from rich.table import Table

__all__ = [
    "BROKER_HEADERS",
    "FORMATS",
    "age",
    "broker_rows",
    "broker_summary",
    "describe",
    "event_line",
    "json_line",
    "label_of",
    "list_document",
    "plain_table",
    "rich_table",
    "table",
    "to_json",
    "to_yaml",
]

FORMATS = ("table", "json", "yaml", "name")
NONE = "<none>"

Getter = Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True)
class Column:
    header: str
    value: Getter


def _dig(obj: Mapping[str, Any], *path: str) -> Any:
    cur: Any = obj
    for part in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _text(value: Any) -> str:
    if value is None or value == "" or value == [] or value == {}:
        return NONE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    if isinstance(value, Mapping):
        return ",".join(f"{k}={_text(v)}" for k, v in value.items())
    return str(value)


def _spec(*path: str, default: Any = None) -> Getter:
    def get(obj: Mapping[str, Any]) -> str:
        value = _dig(obj, "spec", *path)
        return _text(default if value is None else value)

    return get


def _instance_usage(obj: Mapping[str, Any]) -> str:
    usage = _dig(obj, "spec", "deviceUsage") or {}
    capacity = _dig(obj, "spec", "capacity") or len(usage) or 1
    used = sum(1 for holder in usage.values() if holder)
    return f"{used}/{capacity}"


def _node_status(obj: Mapping[str, Any]) -> str:
    for cond in _dig(obj, "status", "conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return "Ready" if cond.get("status") == "True" else "NotReady"
    return "Unknown"


def _pod_status(obj: Mapping[str, Any]) -> str:
    return _text(_dig(obj, "status", "phase") or "Pending")


def _ratio(done: tuple[str, ...], want: tuple[str, ...], default_want: int = 1) -> Getter:
    def get(obj: Mapping[str, Any]) -> str:
        return f"{_dig(obj, *done) or 0}/{_dig(obj, *want) or default_want}"

    return get


def _strategy(obj: Mapping[str, Any]) -> str:
    strategy = _dig(obj, "spec", "brokerStrategy")
    if isinstance(strategy, Mapping) and strategy:
        return ",".join(str(k) for k in strategy)
    broker = _dig(obj, "spec", "brokerSpec") or {}
    if "brokerJobSpec" in broker:
        return "job"
    return "perNode" if "brokerPodSpec" in broker else NONE


_KIND_COLUMNS: dict[str, list[Column]] = {
    "Configuration": [
        Column("HANDLER", _spec("discoveryHandler", "name")),
        Column("CAPACITY", _spec("capacity", default=1)),
        Column("UNIQUE", _spec("uniqueDevices", default=True)),
        Column("BROKERS", _strategy),
    ],
    "Instance": [
        Column("CONFIG", _spec("configurationName")),
        Column("SHARED", _spec("shared", default=False)),
        Column("NODES", _spec("nodes")),
        Column("USED/CAPACITY", _instance_usage),
    ],
    "ResourceClass": [
        Column("ALLOCATABLE", lambda o: _text(_dig(o, "status", "allocatable"))),
        Column("REQUESTED", lambda o: _text(_dig(o, "status", "requested"))),
        Column("STRATEGY", _spec("selectionStrategy")),
    ],
    "Node": [Column("STATUS", _node_status)],
    "Pod": [Column("STATUS", _pod_status), Column("NODE", _spec("nodeName"))],
    "Service": [Column("TYPE", _spec("type", default="ClusterIP"))],
    "ConfigMap": [Column("DATA", lambda o: str(len(o.get("data") or {})))],
    "Job": [Column("COMPLETIONS", _ratio(("status", "succeeded"), ("spec", "completions")))],
    "Deployment": [Column("READY", _ratio(("status", "readyReplicas"), ("spec", "replicas")))],
}


BROKER_HEADERS = ["NAMESPACE", "CONFIGURATION", "STRATEGY", "DESIRED", "RUNNING", "PENDING"]
_BROKER_COUNTS = ("desired", "running", "pending")


def broker_summary(configuration: Mapping[str, Any]) -> dict[str, Any]:
    """One Configuration's brokers: its strategy and the controller's counts from `status.brokers` (None: not
    reported yet, e.g. no controller has seen it)."""
    counts = _dig(configuration, "status", "brokers")
    counts = counts if isinstance(counts, Mapping) else {}
    strategy = _strategy(configuration)
    return {
        "namespace": _dig(configuration, "metadata", "namespace"),
        "configuration": _dig(configuration, "metadata", "name"),
        "strategy": None if strategy == NONE else strategy,
        **{key: counts.get(key) for key in _BROKER_COUNTS},
    }


def broker_rows(configurations: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """`devplace get brokers`: a row per Configuration under `BROKER_HEADERS`."""
    rows = []
    for configuration in configurations:
        summary = broker_summary(configuration)
        rows.append([_text(summary[key]) for key in ("namespace", "configuration", "strategy", *_BROKER_COUNTS)])
    return rows


def age(seconds: float) -> str:
    """kubectl-style age: `45s`, `12m`, `5h`, `3d`."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 3 * 3600:
        return f"{s // 60}m"
    if s < 48 * 3600:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def _created(obj: Mapping[str, Any]) -> float | None:
    raw = _dig(obj, "metadata", "creationTimestamp")
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return dt.datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def columns_for(kind: str, *, namespaced: bool, now: float) -> list[Column]:
    def age_of(obj: Mapping[str, Any]) -> str:
        created = _created(obj)
        return NONE if created is None else age(now - created)

    cols = [Column("NAMESPACE", lambda o: _text(_dig(o, "metadata", "namespace")))] if namespaced else []
    cols.append(Column("NAME", lambda o: _text(_dig(o, "metadata", "name"))))
    cols.extend(_KIND_COLUMNS.get(kind, []))
    cols.append(Column("AGE", age_of))
    return cols


def table(
    kind: str, items: Sequence[Mapping[str, Any]], *, namespaced: bool, now: float
) -> tuple[list[str], list[list[str]]]:
    cols = columns_for(kind, namespaced=namespaced, now=now)
    return [c.header for c in cols], [[c.value(obj) for c in cols] for obj in items]


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    lines = [
        "   ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in [headers, *rows]
    ]
    return "\n".join(lines)


def rich_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    out = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header in headers:
        out.add_column(header, no_wrap=header in ("NAME", "NAMESPACE"))
    for row in rows:
        out.add_row(*row)
    return out


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2)


def json_line(obj: Any) -> str:
    """Compact one-line JSON (watch events on a pipe: NDJSON)."""
    return json.dumps(obj, separators=(",", ":"))


def to_yaml(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, allow_unicode=True).rstrip("\n")


def list_document(items: Sequence[Mapping[str, Any]], revision: int) -> dict[str, Any]:
    """What `get -o json|yaml` prints for several objects (kubectl's `List`)."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": str(revision)}, "items": list(items)}


def label_of(obj: Mapping[str, Any]) -> str:
    """`Configuration default/akri-debug-echo`, `Node node-a`: how every CLI message names an object."""
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else "object"
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    name = meta.get("name") if isinstance(meta.get("name"), str) and meta.get("name") else "<unnamed>"
    ns = meta.get("namespace")
    return f"{kind} {ns}/{name}" if isinstance(ns, str) and ns else f"{kind} {name}"


def _indented(value: Any, indent: str = "  ") -> list[str]:
    return [indent + line for line in to_yaml(value).splitlines()]


def describe(obj: Mapping[str, Any], *, now: float) -> str:
    """kubectl-describe-like text: identity and metadata first, then spec and status as indented YAML."""
    meta = obj.get("metadata") or {}
    created = _created(obj)
    when = NONE if created is None else f"{meta.get('creationTimestamp')} ({age(now - created)} ago)"

    def mapping(value: Any) -> str:
        return "\n".join(f"{k}={v}" for k, v in value.items()) if value else NONE

    rows = [
        ("Name", meta.get("name")),
        ("Namespace", meta.get("namespace")),
        ("Kind", f"{obj.get('kind')} ({obj.get('apiVersion')})"),
        ("Labels", mapping(meta.get("labels"))),
        ("Annotations", mapping(meta.get("annotations"))),
        ("Created", when),
        ("Resource Version", meta.get("resourceVersion")),
        ("Generation", meta.get("generation")),
        ("UID", meta.get("uid")),
    ]
    owners = meta.get("ownerReferences") or []
    if owners:
        rows.append(("Owners", "\n".join(f"{o.get('kind')}/{o.get('name')}" for o in owners)))
    width = max(len(k) for k, _ in rows) + 2
    lines: list[str] = []
    for key, value in rows:
        if key == "Namespace" and value is None:
            continue
        text = NONE if value is None or value == "" else str(value)
        first, *rest = text.splitlines() or [NONE]
        lines.append(f"{key + ':':<{width}}{first}")
        lines.extend(" " * width + line for line in rest)
    if obj.get("kind") == "Instance":
        lines.append(f"{'Slots:':<{width}}{_instance_usage(obj)} used")
    skip = {"apiVersion", "kind", "metadata"}
    for key, value in obj.items():
        if key in skip:
            continue
        lines.append(f"{key[:1].upper() + key[1:]}:")
        lines.extend(_indented(value) if value not in (None, {}, []) else ["  " + NONE])
    return "\n".join(lines)


def event_line(event_type: str, obj: Mapping[str, Any], revision: int) -> str:
    """One watch event for a person: `ADDED     Configuration default/x  (revision 7)`."""
    return f"{event_type:<9} {label_of(obj)}  (revision {revision})"
