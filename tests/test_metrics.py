"""devplace.metrics: one registry, Kubernetes' and Akri's names, gauges sampled from live owners only."""

from __future__ import annotations

import gc

from prometheus_client import CollectorRegistry

from devplace import metrics
from tests.scrapes import delta, labels, registry, series


class Owner:
    def __init__(self, counts: dict[tuple[str, ...], float]) -> None:
        self.counts = counts


def test_a_sampled_gauge_sums_its_live_sources_and_forgets_one_whose_owner_is_gone() -> None:
    gauge = metrics.Sampled("test_sampled_things", "things", ("configuration",), registry=CollectorRegistry())
    a = Owner({("cam",): 2.0})
    b = Owner({("cam",): 3.0, ("gpu",): 1.0})
    gauge.add(a, lambda o: o.counts)
    remove_b = gauge.add(b, lambda o: o.counts)
    assert gauge.values() == {("cam",): 5.0, ("gpu",): 1.0}
    remove_b()
    assert gauge.values() == {("cam",): 2.0}
    del a
    gc.collect()
    assert gauge.values() == {}


def test_the_exposition_parses_and_has_kubernetes_and_akri_names_but_no_created_series() -> None:
    metrics.schedule_attempt("scheduled", 0.01, "test-profile")
    text = metrics.exposition().decode()
    names = {name for name, _ in series(text)}
    assert {"scheduler_schedule_attempts_total", "process_resident_memory_bytes"} <= names
    assert not any(name.endswith("_created") for name in names)
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    for family in (
        "apiserver_request_total",
        "apiserver_request_duration_seconds",
        "apiserver_longrunning_requests",
        "apiserver_registered_watchers",
        "scheduler_schedule_attempts_total",
        "scheduler_e2e_scheduling_duration_seconds",
        "scheduler_pending_pods",
        "workqueue_depth",
        "workqueue_adds_total",
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
        "akri_instance_count",
        "akri_discovery_response_result",  # Akri's name exactly: no _total
        "akri_discovery_response_time",
        "akri_broker_pod_count",
        "devplace_store_cas_duration_seconds",
        "devplace_store_cas_conflicts_total",
        "devplace_agent_allocate_duration_seconds",
        "devplace_instance_slots",
        "devplace_placement_plan_duration_seconds",
    ):
        assert family in families, family


def test_each_helper_counts_under_the_exact_labels_it_is_given() -> None:
    before = registry()
    metrics.schedule_attempt("unschedulable", 0.002, "p1")
    metrics.schedule_attempt("unschedulable", 0.003, "p1")
    metrics.reconciled("configuration", "error", 0.1)
    metrics.allocated("refused", 0.01)
    metrics.discovery_response("debugEcho", "cam", 0.3)
    metrics.discovery_response("debugEcho", "cam", None)
    after = registry()
    assert delta(before, after, "scheduler_schedule_attempts_total", result="unschedulable", profile="p1") == 2
    assert (
        delta(before, after, "scheduler_e2e_scheduling_duration_seconds_count", result="unschedulable", profile="p1")
        == 2
    )
    assert delta(before, after, "controller_runtime_reconcile_total", controller="configuration", result="error") == 1
    assert delta(before, after, "controller_runtime_reconcile_errors_total", controller="configuration") == 1
    assert delta(before, after, "devplace_agent_allocate_duration_seconds_count", result="refused") == 1
    assert delta(before, after, "devplace_agent_allocate_refusals_total") == 1
    assert (
        delta(before, after, "akri_discovery_response_result", discovery_handler_name="debugEcho", result="Success")
        == 1
    )
    assert (
        delta(before, after, "akri_discovery_response_result", discovery_handler_name="debugEcho", result="Fail") == 1
    )
    assert delta(before, after, "akri_discovery_response_time_bucket", configuration="cam", le="0.5") == 1
    assert delta(before, after, "akri_discovery_response_time_bucket", configuration="cam", le="0.25") == 0
    assert ("akri_discovery_response_time_count", labels(configuration="cam")) in after
