"""devplace.metrics: one registry, Kubernetes' and Akri's names, gauges sampled from live owners only."""

from __future__ import annotations

import gc
import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from devplace import metrics
from tests.scrapes import delta, labels, registry, series


class Owner:
    def __init__(self, counts: dict[tuple[str, ...], float]) -> None:
        self.counts = counts


def test_a_sampled_gauge_sums_its_live_sources_and_forgets_one_whose_owner_is_gone() -> None:
    gauge = metrics.Sampled("test_sampled_things", "things", ("configuration",), registry=metrics.Registry())
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


def test_a_histogram_scrapes_as_cumulative_buckets_ending_at_inf_with_count_and_sum() -> None:
    own = metrics.Registry()
    histogram = metrics.Histogram("test_latency_seconds", "latency", ("verb",), buckets=(0.1, 1, 5), registry=own)
    for value in (0.05, 0.1, 0.7, 3.0, 9.0):
        histogram.labels("GET").observe(value)
    histogram.labels("PUT")  # a series made, nothing observed
    scraped = series(own.exposition().decode())
    get = [scraped[("test_latency_seconds_bucket", labels(verb="GET", le=le))] for le in ("0.1", "1.0", "5.0", "+Inf")]
    assert get == [2, 3, 4, 5]  # 0.1 falls in le="0.1": a bound is inclusive
    assert scraped[("test_latency_seconds_count", labels(verb="GET"))] == 5
    assert scraped[("test_latency_seconds_sum", labels(verb="GET"))] == pytest.approx(12.85)
    assert scraped[("test_latency_seconds_bucket", labels(verb="PUT", le="+Inf"))] == 0
    assert own.get_sample_value("test_latency_seconds_count", {"verb": "GET"}) == 5
    assert own.get_sample_value("test_latency_seconds_count", {"verb": "DELETE"}) is None


def test_a_counter_is_exposed_with_total_once_and_an_unlabelled_one_shows_zero_before_any_count() -> None:
    own = metrics.Registry()
    plain = metrics.Counter("test_events_total", "events", registry=own)
    metrics.Counter("test_hits", "hits", ("code",), registry=own).labels("200").inc(2)
    text = own.exposition().decode()
    assert "# TYPE test_events_total counter" in text
    assert "# TYPE test_hits_total counter" in text
    assert series(text)[("test_events_total", labels())] == 0
    plain.inc()
    assert series(own.exposition().decode())[("test_events_total", labels())] == 1
    assert series(own.exposition().decode())[("test_hits_total", labels(code="200"))] == 2


def test_series_refuse_what_prometheus_would_not_take() -> None:
    own = metrics.Registry()
    counter = metrics.Counter("test_refused", "refused", ("a", "b"), registry=own)
    with pytest.raises(ValueError, match=r"1 label values for labels \['a', 'b'\]"):
        counter.labels("x")
    with pytest.raises(ValueError, match="only goes up"):
        counter.labels("x", "y").inc(-1)
    with pytest.raises(ValueError, match="not a Prometheus label name"):
        metrics.Counter("test_bad_label", "bad", ("le",), registry=own)
    with pytest.raises(ValueError, match="not increasing"):
        metrics.Histogram("test_bad_buckets", "bad", buckets=(1, 0.5), registry=own)
    assert "test_bad" not in own.exposition().decode()


@given(
    value=st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20),
    documentation=st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20).filter(
        lambda text: text == text.strip()  # the parser drops whitespace around a help text
    ),
    amount=st.floats(min_value=0, allow_infinity=True, allow_nan=False),
)
def test_any_label_value_help_text_and_count_survive_prometheus_clients_parser(
    value: str, documentation: str, amount: float
) -> None:
    own = metrics.Registry()
    metrics.Counter("test_text", documentation, ("key",), registry=own).labels(value).inc(amount)
    (family,) = text_string_to_metric_families(own.exposition().decode())
    assert family.documentation == documentation
    ((name, sample_labels, sample_value, *_),) = family.samples
    assert (name, sample_labels) == ("test_text_total", {"key": value})
    assert sample_value == amount or (math.isinf(amount) and math.isinf(sample_value))


def test_the_process_series_read_this_process() -> None:
    scraped = registry()
    rss = scraped[("process_resident_memory_bytes", labels())]
    with open("/proc/self/status", encoding="ascii") as status:
        vm_rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
    assert rss > 0
    assert rss % 4096 == 0
    assert abs(rss - vm_rss) < 64 * 2**20  # the same process, read moments apart
    assert scraped[("process_cpu_seconds_total", labels())] > 0
    assert scraped[("process_open_fds", labels())] >= 3
    major, minor = str(sys.version_info.major), str(sys.version_info.minor)
    (info,) = [key for key in scraped if key[0] == "python_info"]
    assert {("major", major), ("minor", minor)} <= info[1]


def test_importing_the_metrics_loads_no_http_server_machinery() -> None:
    """What replacing prometheus_client's import bought (issue #21): none of what its package loads."""
    heavy = ("prometheus_client", "http.server", "wsgiref", "urllib.request", "email")
    code = f"import sys, devplace.metrics; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
