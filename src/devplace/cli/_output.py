"""Rendering objects for people and for programs: tables, JSON, YAML, `describe` text, watch lines.

Pure functions from wire dicts (and the current time) to text, so every format is tested without a terminal.
Tables have kubectl's shape: NAMESPACE (for namespaced kinds), then the kind's columns as `devplace.kubeapi._tables`
defines them for the API server's Tables too (NAME, kind-specific columns, AGE; `-o wide` adds the priority-1 ones),
so `devplace get` and `kubectl get` print the same columns. `get brokers` is a view of Configurations: strategy and
the controller's desired/running/pending counts. On a terminal the CLI draws tables with rich; otherwise
`plain_table` aligns columns with spaces, which scripts can split on whitespace. Missing values show as `<none>`,
like kubectl.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from rich.table import Table

# rich and devplace.kubeapi load when a table is drawn: a daemon (`devplace agent`) imports this module and draws none

FORMATS = ("table", "wide", "json", "yaml", "name")
NONE = "<none>"

BROKER_HEADERS = ["NAMESPACE", "CONFIGURATION", "STRATEGY", "DESIRED", "RUNNING", "PENDING"]


def broker_summary(configuration: Mapping[str, Any]) -> dict[str, Any]:
    """One Configuration's brokers: its strategy and the controller's counts from `status.brokers` (None: not
    reported yet, e.g. no controller has seen it)."""
    from devplace.kubeapi import broker_counts, strategy_of

    meta = configuration.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return {
        "namespace": meta.get("namespace"),
        "configuration": meta.get("name"),
        "strategy": strategy_of(configuration),
        **broker_counts(configuration),
    }


def broker_rows(configurations: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """`devplace get brokers`: a row per Configuration under `BROKER_HEADERS`."""
    from devplace.kubeapi import BROKER_COUNTS, cell_text

    rows = []
    for configuration in configurations:
        summary = broker_summary(configuration)
        keys = ("namespace", "configuration", "strategy", *BROKER_COUNTS)
        rows.append([cell_text(summary[key]) for key in keys])
    return rows


def _created(obj: Mapping[str, Any]) -> float | None:
    meta = obj.get("metadata")
    raw = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return dt.datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def table(
    kind: str, items: Sequence[Mapping[str, Any]], *, namespaced: bool, now: float, wide: bool = False
) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of `devplace get`: NAMESPACE for namespaced kinds, then the kind's columns
    (`kubeapi.tables.columns`, the server's Table columns), the priority-1 ones only with `wide` (`-o wide`)."""
    from devplace.kubeapi import cell_text, columns

    cols = columns(kind, wide=wide)
    headers = (["NAMESPACE"] if namespaced else []) + [c.header for c in cols]
    rows = []
    for obj in items:
        meta = obj.get("metadata")
        lead = [cell_text(meta.get("namespace") if isinstance(meta, Mapping) else None)] if namespaced else []
        rows.append(lead + [cell_text(c.value(obj, now)) for c in cols])
    return headers, rows


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    lines = [
        "   ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in [headers, *rows]
    ]
    return "\n".join(lines)


def rich_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    from rich import box
    from rich.table import Table

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
    from devplace.kubeapi import age, cell_text, instance_usage

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
        lines.append(f"{'Slots:':<{width}}{cell_text(instance_usage(obj))} used")
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
