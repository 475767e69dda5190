"""Events' two views: the stored `v1` form and `events.k8s.io/v1`, converted field by field both ways."""

from __future__ import annotations

from devplace.kubeapi import events_fields, events_view, stored_event

STORED = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "p.1", "namespace": "default"},
    "involvedObject": {"kind": "Pod", "name": "p"},
    "reason": "Scheduled",
    "message": "bound",
    "type": "Normal",
    "reportingComponent": "devplace-scheduler",
    "reportingInstance": "s-0",
    "source": {"component": "devplace-scheduler"},
    "firstTimestamp": "2026-01-01T00:00:00Z",
    "lastTimestamp": "2026-01-01T00:01:00Z",
    "count": 2,
    "eventTime": "2026-01-01T00:00:00.000000Z",
    "series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
}


def test_the_events_view_renames_the_fields_and_converts_back_unchanged() -> None:
    view = events_view(STORED)
    assert view["apiVersion"] == "events.k8s.io/v1"
    assert (view["regarding"], view["note"], view["reportingController"]) == (
        {"kind": "Pod", "name": "p"},
        "bound",
        "devplace-scheduler",
    )
    assert (view["deprecatedCount"], view["deprecatedFirstTimestamp"]) == (2, "2026-01-01T00:00:00Z")
    assert "involvedObject" not in view
    assert stored_event(view) == STORED


def test_an_event_without_event_time_shows_its_first_time() -> None:
    legacy = {k: v for k, v in STORED.items() if k != "eventTime"}
    assert events_view(legacy)["eventTime"] == "2026-01-01T00:00:00.000000Z"


def test_field_selectors_on_the_view_name_the_stored_fields() -> None:
    assert events_fields("regarding.name=p,reason=Scheduled,reportingController!=x") == (
        "involvedObject.name=p,reason=Scheduled,reportingComponent!=x"
    )
    assert events_fields(None) is None
