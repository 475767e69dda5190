"""Prometheus metrics: every series devplace exposes, defined once, in one registry per process.

Names and labels follow the components an operator already scrapes, so their dashboards and alerts read devplace:
kube-apiserver (`apiserver_request_total{verb,resource,code}`, `apiserver_request_duration_seconds`,
`apiserver_longrunning_requests`, `apiserver_registered_watchers`), kube-scheduler (`scheduler_schedule_attempts_total
{result,profile}`, `scheduler_e2e_scheduling_duration_seconds`, `scheduler_pending_pods{queue}`), client-go's work
queue (`workqueue_depth{name}`, `workqueue_adds_total`, `workqueue_queue_duration_seconds`,
`workqueue_work_duration_seconds`), controller-runtime (`controller_runtime_reconcile_total{controller,result}`,
`controller_runtime_reconcile_errors_total`, `controller_runtime_reconcile_time_seconds`) and Akri's agent and
controller (`akri_instance_count{configuration,is_shared}`, `akri_discovery_response_result{discovery_handler_name,
result}` with results `Success`/`Fail`, `akri_discovery_response_time{configuration}` with Akri's buckets,
`akri_broker_pod_count{configuration,node}`; Akri's counter keeps its name without `_total`: `ExactCounter`). What
only devplace has is named `devplace_*`: the store's compare-and-swap (latency by kind and outcome, lost races), the
agent's Allocate (latency by result, refusals), discovered devices and slots free/held per Configuration, the
placement plan's duration.

Cardinality is bounded: labels are verbs, kinds, resources the server serves, results, queue and controller names,
Configuration names and node names (as Akri labels them), never a Pod's or any other object's name.

One registry per process (`REGISTRY`), not prometheus_client's global default: what `/metrics` shows is exactly
devplace's series plus the process collector (`process_resident_memory_bytes`, ...), whatever a library registers in
the default one; every part of a process adds to the same series, as Go components share their legacy registry (in a
`Fleet` simulation the agents' counts sum). Tests read differences before and after what they do, so tests running
earlier in the same process do not disturb them.

Gauges that describe state (instances, slots, broker pods, queue depths, pending pods) are sampled at scrape time
from sources the parts register (`Sampled.add`, weakly held: a part that is gone drops out of the sum), so keeping
them costs nothing on the hot paths and they cannot drift from what the parts hold.

Importing this module costs about 3 MiB of resident memory (prometheus_client and the http.server it pulls in); the
node agent's idle RSS with it is in README's Status section.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric, UnknownMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

__all__ = [
    "CONTENT_TYPE_LATEST",
    "REGISTRY",
    "ExactCounter",
    "Sampled",
    "allocated",
    "discovery_response",
    "exposition",
    "prepared",
    "reconciled",
    "schedule_attempt",
]

disable_created_metrics()  # type: ignore[no-untyped-call]  # no `*_created` series: Kubernetes components expose none
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)

Labels = tuple[str, ...]
Source = Callable[[Any], Mapping[Labels, float]]


class Sampled:
    """A gauge read at scrape time: the sum, per label set, of what each registered source reports."""

    def __init__(self, name: str, documentation: str, labels: Labels, registry: CollectorRegistry = REGISTRY) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = labels
        self._sources: dict[int, tuple[weakref.ref[Any], Source]] = {}
        self._lock = threading.Lock()
        self._next = 0
        registry.register(self)

    def add(self, owner: Any, source: Source) -> Callable[[], None]:
        """Count `source(owner)` in this gauge while `owner` lives; returns the function that stops counting it."""
        with self._lock:
            token = self._next
            self._next += 1
            self._sources[token] = (weakref.ref(owner), source)

        def remove() -> None:
            with self._lock:
                self._sources.pop(token, None)

        return remove

    def values(self) -> dict[Labels, float]:
        """The current sums per label set (sources whose owner is gone are dropped)."""
        with self._lock:
            sources = list(self._sources.items())
        totals: dict[Labels, float] = {}
        for token, (ref, source) in sources:
            owner = ref()
            if owner is None:
                with self._lock:
                    self._sources.pop(token, None)
                continue
            for labels, value in source(owner).items():
                totals[labels] = totals.get(labels, 0.0) + value
        return totals

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(self.name, self.documentation, labels=self.labels)]

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labels)
        for labels, value in sorted(self.values().items()):
            family.add_metric(list(labels), value)
        return [family]


class ExactCounter:
    """A counter exposed under its name exactly, with no `_total` (prometheus_client adds one to every counter): for
    Akri's `akri_discovery_response_result`, which Akri's Rust client exposes so. Typed `untyped` in the text format,
    which Prometheus stores and rates as it does a counter."""

    def __init__(self, name: str, documentation: str, labels: Labels, registry: CollectorRegistry = REGISTRY) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = labels
        self._counts: dict[Labels, float] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def inc(self, *values: str) -> None:
        with self._lock:
            self._counts[values] = self._counts.get(values, 0.0) + 1

    def describe(self) -> Iterable[Metric]:
        return [UnknownMetricFamily(self.name, self.documentation, labels=self.labels)]

    def collect(self) -> Iterable[Metric]:
        family = UnknownMetricFamily(self.name, self.documentation, labels=self.labels)
        with self._lock:
            counts = sorted(self._counts.items())
        for values, count in counts:
            family.add_metric(list(values), count)
        return [family]


def exposition() -> bytes:
    """The registry in Prometheus' text format (content type `CONTENT_TYPE_LATEST`)."""
    return generate_latest(REGISTRY)


# -- the API server (server/_metrics.py observes) ------------------------------------------------------------------

_REQUEST_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 60)

API_REQUESTS = Counter(
    "apiserver_request_total",
    "Requests by verb, resource and HTTP response code (kube-apiserver's)",
    ("verb", "resource", "code"),
    registry=REGISTRY,
)
API_REQUEST_DURATION = Histogram(
    "apiserver_request_duration_seconds",
    "Response latency by verb and resource, long-running requests (WATCH) excluded",
    ("verb", "resource"),
    buckets=_REQUEST_BUCKETS,
    registry=REGISTRY,
)
LONGRUNNING = Sampled(
    "apiserver_longrunning_requests",
    "Long-running requests (watches) open now, by verb and resource",
    ("verb", "resource"),
)
WATCHERS = Sampled("apiserver_registered_watchers", "Watches open now, by kind", ("kind",))

# -- the store's compare-and-swap (store/_cas.py) ------------------------------------------------------------------

STORE_CAS_DURATION = Histogram(
    "devplace_store_cas_duration_seconds",
    "One read-decide-write (store.cas) from first read to outcome, by kind and outcome "
    "(updated, deleted, unchanged, conflict: gave up, refused, failed; patched: a conditional JSON patch that landed)",
    ("kind", "outcome"),
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
    registry=REGISTRY,
)
STORE_CAS_CONFLICTS = Counter(
    "devplace_store_cas_conflicts_total",
    "Compare-and-swap writes that lost a race (each one a CAS retry), by kind",
    ("kind",),
    registry=REGISTRY,
)

# -- work queues (queues.py), client-go's names ---------------------------------------------------------------------

_QUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(10))  # client-go's: 10 ns .. 1 s, by decades

WORKQUEUE_DEPTH = Sampled("workqueue_depth", "Keys queued now (not counting those being processed)", ("name",))
WORKQUEUE_ADDS = Counter(
    "workqueue_adds_total", "Keys queued (coalesced marks not counted)", ("name",), registry=REGISTRY
)
WORKQUEUE_QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds",
    "How long a key stays queued before it is handed out",
    ("name",),
    buckets=_QUEUE_BUCKETS,
    registry=REGISTRY,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long processing a key takes (handed out to done)",
    ("name",),
    buckets=_QUEUE_BUCKETS,
    registry=REGISTRY,
)

# -- the scheduler -------------------------------------------------------------------------------------------------

_E2E_BUCKETS = tuple(0.001 * 2**i for i in range(15))  # kube-scheduler's: 1 ms .. 16 s

SCHEDULE_ATTEMPTS = Counter(
    "scheduler_schedule_attempts_total",
    "Scheduling attempts by result (scheduled, unschedulable, error) and profile (the scheduler's name)",
    ("result", "profile"),
    registry=REGISTRY,
)
E2E_SCHEDULING_DURATION = Histogram(
    "scheduler_e2e_scheduling_duration_seconds",
    "One scheduling attempt, decision and binding, by result and profile",
    ("result", "profile"),
    buckets=_E2E_BUCKETS,
    registry=REGISTRY,
)
PENDING_PODS = Sampled(
    "scheduler_pending_pods",
    "Pending pods by queue (active: to decide, unschedulable: waiting for a change)",
    ("queue",),
)
SCHEDULE_RESULTS = ("scheduled", "unschedulable", "error")


def schedule_attempt(result: str, seconds: float, profile: str) -> None:
    """Count one scheduling attempt (`result` one of `SCHEDULE_RESULTS`) and its duration."""
    SCHEDULE_ATTEMPTS.labels(result, profile).inc()
    E2E_SCHEDULING_DURATION.labels(result, profile).observe(seconds)


# -- controllers (controller-runtime's names) ------------------------------------------------------------------------

RECONCILES = Counter(
    "controller_runtime_reconcile_total",
    "Reconcile passes by controller and result (success, error, requeue_after)",
    ("controller", "result"),
    registry=REGISTRY,
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total", "Reconcile passes that failed", ("controller",), registry=REGISTRY
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "How long one reconcile pass takes",
    ("controller",),
    buckets=(
        0.005,
        0.01,
        0.025,
        0.05,
        0.1,
        0.15,
        0.2,
        0.25,
        0.3,
        0.35,
        0.4,
        0.45,
        0.5,
        0.6,
        0.7,
        0.8,
        0.9,
        1,
        1.25,
        2,
        5,
    ),
    registry=REGISTRY,
)
BROKER_PODS = Sampled(
    "akri_broker_pod_count", "Broker Pods by Configuration and node (Akri's)", ("configuration", "node")
)


def reconciled(controller: str, result: str, seconds: float) -> None:
    """Count one reconcile pass of `controller` (`result`: success, error or requeue_after) and its duration."""
    RECONCILES.labels(controller, result).inc()
    if result == "error":
        RECONCILE_ERRORS.labels(controller).inc()
    RECONCILE_TIME.labels(controller).observe(seconds)


# -- the node agent ------------------------------------------------------------------------------------------------

ALLOCATE_DURATION = Histogram(
    "devplace_agent_allocate_duration_seconds",
    "The device plugins' Allocate, by result (allocated, refused, failed)",
    ("result",),
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
    registry=REGISTRY,
)
ALLOCATE_REFUSALS = Counter(
    "devplace_agent_allocate_refusals_total", "Allocate calls refused (a slot held elsewhere, gone)", registry=REGISTRY
)
PREPARE_DURATION = Histogram(
    "devplace_agent_prepare_duration_seconds",
    "DRA NodePrepareResources per claim, by result (prepared, refused, failed)",
    ("result",),
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
    registry=REGISTRY,
)
INSTANCES = Sampled(
    "akri_instance_count",
    "Instances visible to this node, by Configuration and sharing (Akri's)",
    ("configuration", "is_shared"),
)
DEVICES = Sampled("devplace_discovered_devices", "Devices discovery reports now, by Configuration", ("configuration",))
SLOTS = Sampled(
    "devplace_instance_slots",
    "Slots of the Instances this node sees, by Configuration and state (free, held)",
    ("configuration", "state"),
)
DISCOVERY_RESULTS = ExactCounter(
    "akri_discovery_response_result",
    "Discovery streams by handler and result (Success: the handler answered, Fail: it did not) (Akri's)",
    ("discovery_handler_name", "result"),
)
DISCOVERY_TIME = Histogram(
    "akri_discovery_response_time",
    "Seconds from asking a discovery handler to its first answer, by Configuration (Akri's buckets)",
    ("configuration",),
    buckets=(0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 60.0),
    registry=REGISTRY,
)


def allocated(result: str, seconds: float) -> None:
    """Count one Allocate (`result`: allocated, refused or failed) and its duration."""
    ALLOCATE_DURATION.labels(result).observe(seconds)
    if result == "refused":
        ALLOCATE_REFUSALS.inc()


def prepared(result: str, seconds: float) -> None:
    """Count one DRA claim preparation (`result`: prepared, refused or failed) and its duration."""
    PREPARE_DURATION.labels(result).observe(seconds)


def discovery_response(handler: str, configuration: str, seconds: float | None) -> None:
    """A discovery stream's first answer (`seconds` after it was asked) or its failure before any (None)."""
    if seconds is None:
        DISCOVERY_RESULTS.inc(handler, "Fail")
        return
    DISCOVERY_RESULTS.inc(handler, "Success")
    DISCOVERY_TIME.labels(configuration).observe(seconds)


# -- placement -----------------------------------------------------------------------------------------------------

PLACEMENT_PLAN_DURATION = Histogram(
    "devplace_placement_plan_duration_seconds",
    "Evaluating a placement (a deployment intent group) by operation (plan, instantiate)",
    ("operation",),
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
