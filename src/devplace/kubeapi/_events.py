"""Events in their two API groups: `v1` (core) and `events.k8s.io/v1`, two views of the same objects.

Kubernetes stores an Event once and serves it in both groups, converting field by field; devplace stores the `v1`
form (what `kubectl describe` and `kubectl get events` read, and what `store.EventRecorder` writes) and converts
at the API server for a client of `events.k8s.io/v1`:

| v1 (stored)          | events.k8s.io/v1           |
|----------------------|----------------------------|
| involvedObject       | regarding                  |
| message              | note                       |
| reportingComponent   | reportingController        |
| source               | deprecatedSource           |
| firstTimestamp       | deprecatedFirstTimestamp   |
| lastTimestamp        | deprecatedLastTimestamp    |
| count                | deprecatedCount            |

`reason`, `type`, `action`, `related`, `series`, `eventTime` and `reportingInstance` have the same name in both.
An Event written without `eventTime` (a `v1` client's) shows its first time there (`events_view`).
A field selector given to the `events.k8s.io/v1` view names the new fields (`regarding.name`,
`reportingController`, ...) and is read as the stored fields it means (`events_fields`). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EVENTS_V1 = "events.k8s.io/v1"
"""The `events.k8s.io` view's group/version (the stored form is `v1`)."""

_RENAMED = (
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
)
_TO_VIEW = dict(_RENAMED)
_FROM_VIEW = {new: old for old, new in _RENAMED}


def _renamed(obj: Mapping[str, Any], names: Mapping[str, str], api_version: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        out[names.get(key, key)] = value
    out["apiVersion"] = api_version
    return out


def events_view(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored (`v1`) Event as `events.k8s.io/v1` shows it. `eventTime` is required there (the official client
    refuses an Event without one): an Event written without it shows when it was first seen (`firstTimestamp`, else
    its creation), in the microsecond form the field has."""
    view = _renamed(stored, _TO_VIEW, EVENTS_V1)
    if not view.get("eventTime"):
        seen = view.get("deprecatedFirstTimestamp") or (view.get("metadata") or {}).get("creationTimestamp")
        if isinstance(seen, str) and seen.endswith("Z") and "." not in seen:
            view["eventTime"] = seen[:-1] + ".000000Z"
    return view


def stored_event(view: Mapping[str, Any]) -> dict[str, Any]:
    """An `events.k8s.io/v1` Event in its stored (`v1`) form. A `v1`-only field it carries is kept as it is."""
    return _renamed(view, _FROM_VIEW, "v1")


def events_fields(fields: str | None) -> str | None:
    """A field selector on the `events.k8s.io/v1` view as one on the stored form (`regarding.name=x` ->
    `involvedObject.name=x`); the fields both forms share pass as they are."""
    if not fields:
        return fields
    terms = []
    for term in fields.split(","):
        name, rest = term, ""
        for operator in ("!=", "==", "="):
            if operator in term:
                name, _, value = term.partition(operator)
                rest = operator + value
                break
        head, dot, tail = name.strip().partition(".")
        head = _FROM_VIEW.get(head, head)
        terms.append(f"{head}{dot}{tail}{rest}")
    return ",".join(terms)
