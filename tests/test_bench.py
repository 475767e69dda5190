"""Benchmarks stay runnable: each runs in quick mode and reports the ratios its issue asks for.

Figures are not checked (speed is measured in `make bench`, never asserted); structure and correctness are.
"""

from __future__ import annotations

import importlib
import json
from typing import Any


def quick(name: str) -> dict[str, Any]:
    result: dict[str, Any] = importlib.import_module(f"bench.{name}").run(quick=True)
    json.dumps(result)  # the runner writes it as JSON
    return result


def test_the_store_bench_reports_the_cas_ratio_against_a_bare_sqlite_transaction() -> None:
    ratios = quick("store")["ratios"]
    assert ratios["sqlite_update_vs_bare_update_p50"] > 0
    assert ratios["goal_update_ratio_max"] == 3


def test_the_server_bench_reports_each_operation_against_the_raw_backend() -> None:
    backends = quick("server")["backends"]
    assert set(backends) == {"memory", "sqlite"}
    for figures in backends.values():
        assert set(figures["remote_over_raw_p50"]) == {"create", "update", "get", "list", "watch_latency"}


def test_the_allocate_bench_measures_the_floor_and_never_double_books() -> None:
    result = quick("allocate")
    latency = result["allocate_latency"]
    assert latency["ratio_allocate_p50_to_floor"] > 0
    assert latency["floor_grpc_echo"]["n"] == latency["allocate"]["n"]
    assert result["contention"]["double_bookings"] == 0
    assert result["contention"]["claims"] > 0


def test_the_placement_bench_places_every_app_with_compact_candidates() -> None:
    result = quick("placement")
    assert result["decision_ok"] is True
    assert result["apps_placed"] == result["apps"]
    assert result["compact_entries"] <= result["naive_allow_entries"]
