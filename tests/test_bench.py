"""Benchmarks stay runnable: each runs in quick mode and reports the ratios its issue asks for.

Speed is not checked (it is measured in `make bench`, never asserted); what each benchmark counted and computed is:
a benchmark that measured nothing, or reported a figure it did not compute from its samples, fails here.
"""

from __future__ import annotations

import importlib
import itertools
import json
import logging
import shutil
from typing import Any

import pytest


def quick(name: str) -> dict[str, Any]:
    result: dict[str, Any] = importlib.import_module(f"bench.{name}").run(quick=True)
    json.dumps(result)  # the runner writes it as JSON
    return result


def test_the_store_bench_reports_the_cas_ratio_it_measured_against_a_bare_sqlite_transaction() -> None:
    result = quick("store")
    n, sqlite, bare, ratios = result["n_objects"], result["sqlite"], result["sqlite_bare"], result["ratios"]
    for backend in (result["memory"], sqlite):
        assert {op: backend[op]["n"] for op in ("create", "update", "get", "watch_latency")} == dict.fromkeys(
            ("create", "update", "get", "watch_latency"), n
        )
        assert all(0 < figures["p50_us"] <= figures["p99_us"] for figures in backend.values())
    assert bare["update"]["n"] > 0
    assert ratios["sqlite_update_vs_bare_update_p50"] == round(sqlite["update"]["p50_us"] / bare["update"]["p50_us"], 2)


def test_the_server_bench_reports_each_operation_against_the_raw_backend() -> None:
    backends = quick("server")["backends"]
    assert set(backends) == {"memory", "sqlite"}
    for figures in backends.values():
        assert set(figures["remote_over_raw_p50"]) == {"create", "update", "get", "list", "watch_latency"}


def test_the_allocate_bench_measures_the_floor_and_audits_every_claim(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    result = quick("allocate")  # raises when its auditor saw a slot held twice or a slot leaked
    # it is the agents' kubelet on purpose: no warning per node that kubelet.sock is missing, and the level is back
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert logging.getLogger("devplace.agent._kubelets").level == logging.NOTSET
    latency, contention = result["allocate_latency"], result["contention"]
    assert latency["allocate"]["n"] == latency["floor_grpc_echo"]["n"] > 0
    assert latency["ratio_allocate_p50_to_floor"] > 0
    assert contention["claims"] > 0
    # every claim is an Instance write the auditor's watch must have seen (and every release another one)
    assert contention["instance_states_audited"] >= contention["claims"]


def test_the_placement_bench_places_every_app_with_compact_candidates() -> None:
    result = quick("placement")
    assert result["decision_ok"] is True
    assert result["apps_placed"] == result["apps"]
    assert result["compact_entries"] <= result["naive_allow_entries"]


def test_the_idle_bench_measures_a_settled_fleet_that_writes_nothing() -> None:
    result = quick("idle")
    assert result["instances"] == result["configurations"] == 2
    assert result["device_plugins"] == result["nodes"] * result["configurations"] * 2  # an IL and a CL plugin each
    assert result["store_writes_while_idle"] == 0
    assert result["idle_wall_seconds"] >= 1.0
    per_second = result["idle_cpu_seconds"] / result["idle_wall_seconds"]
    assert result["cpu_per_wall_second"] == pytest.approx(per_second, abs=1e-4)


def test_the_watch_cost_bench_shows_a_pod_watch_never_woken_by_config_map_writes() -> None:
    result = quick("watch_cost")
    for backend in ("memory", "sqlite"):
        figures = result[backend]
        assert figures["writes"] == 2000
        assert figures["pod_events_delivered"] == figures["pod_wakeups"] == 0
        assert figures["writes_with_pod_watch"]["control_pod_seen"] is True
        assert figures["pod_watch_without_writes"]["pod_wakeups_during_run"] == 0
        assert figures["writes_only"]["cpu_seconds"] > 0


def test_the_scheduler_bench_compares_every_device_strategy_and_counts_the_work_of_a_refusal() -> None:
    result = quick("scheduler")
    assert set(result["devices"]) >= {"firstFit", "binpack", "spread", "optimal"}
    assert result["goals_met"]["optimal_never_below_greedy"] is True
    # a pod asking 11 devices of nodes that have 10: device selection looks at each node's 10 devices once, no more
    assert result["no_solution"]["devices_examined_per_node"] == 10


def test_the_controller_bench_deploys_every_broker_and_counts_the_writes_a_change_costs() -> None:
    result = quick("controller")
    assert (
        result["broker_pods"] == 1100
    )  # 1000 Instances, 100 of them shared by two nodes: a broker per (Instance, node)
    # one local device unplugged, through the real Controller: two writes, however many brokers the fleet has

    assert result["shell"]["change_writes"] == 2
    # the same change in the decision bench: its broker Pod and its Service deleted, the broker counts written
    assert result["change_unplug_local"]["writes"] == 3


def test_the_hostile_bench_counts_what_it_sent_and_what_the_bomb_and_big_objects_got() -> None:
    result = quick("hostile")
    fuzz = result["fuzz"]
    assert fuzz["requests"] == sum(fuzz["codes"].values()) > 0
    assert fuzz["answers_5xx"] == sum(n for code, n in fuzz["codes"].items() if int(code) >= 500)
    assert fuzz["loop_lag_ticks"] > 0
    assert result["alias_bomb"]["code"] == 400  # refused before expansion
    for backend in ("memory", "sqlite"):
        memory = result["memory"][backend]
        assert memory["update_codes"] == {"200": memory["updates"]}
        assert memory["two_mb_object_code"] == 413  # over the store's 1.5 MiB object limit
    assert "sqlite_growth_mib" in result["memory"]["sqlite"]
    slow = result["slowloris"]
    assert slow["uvicorn"]["held_after"] == slow["connections"]  # uvicorn alone lets every slow client stay
    assert 0 <= slow["guarded"]["held_after"] <= slow["guarded"]["held_during"] <= slow["connections"]
    assert 0 <= slow["guarded"]["answered_408"] <= slow["connections"] // 2  # the body tricklers, at most
    capped = slow["per_client"]
    assert (capped["held"], capped["refused"]) == (capped["cap"], capped["opened"] - capped["cap"])
    gets = slow["gets"]
    assert gets["uvicorn"]["gets"] == gets["guarded"]["gets"] > 0
    assert slow["ratios"]["guarded_over_uvicorn_rps"] == round(gets["guarded"]["rps"] / gets["uvicorn"]["rps"], 3)
    big = result["big_list"]
    one, three, table, watch = (big[name] for name in ("one_list", "three_lists", "table_list", "watch_start"))
    assert one["objects"] == table["objects"] == watch["objects"] == big["objects"] > 0
    assert one["pages"] == table["pages"] > 1  # paged by bytes: a few big objects a page
    assert (three["objects"], three["pages"], three["bytes"]) == (
        3 * one["objects"],
        3 * one["pages"],
        3 * one["bytes"],
    )
    assert min(one["bytes"], watch["bytes"]) > big["objects"] * big["object_bytes"]  # each read carried every object
    assert big["loop_held_max_ms"] == max(f["loop_held_max_ms"] for f in (one, three, table, watch))


def test_the_distributed_bench_allocates_through_both_stores_and_audits_every_claim_of_its_load() -> None:
    result = quick("distributed")  # raises when its audit saw a slot held twice, or a granted claim it did not see
    allocate = result["allocate"]
    for store in ("etcd", "sqlite"):
        assert allocate[store]["allocate"]["n"] == allocate[store]["remote_update"]["n"] > 0
    etcd, sqlite = allocate["etcd"]["allocate"], allocate["sqlite"]["allocate"]
    assert result["ratios"]["allocate_etcd_over_sqlite_p50"] == round(etcd["p50_us"] / sqlite["p50_us"], 2)
    assert result["cas"]["etcd"]["cas_update"]["n"] == result["cas"]["etcd"]["bare_txn"]["n"] > 0
    load = result["load"]
    assert load["double_holds"] == 0
    assert 0 < load["claims_granted"] <= load["instance_states_audited"]  # each claim is a state the audit saw
    nodes = load["nodes"]
    assert load["processes"] == {"server": 1, "controller": 1, "scheduler": 1, "kubelet-sim": nodes, "agent": nodes}
    assert set(load["rss_mib"]) == set(load["processes"])
    assert all(0 < figures["mean"] <= figures["max"] for figures in load["rss_mib"].values())


@pytest.mark.skipif(not shutil.which("etcd"), reason="no etcd binary (`make test` installs etcd-server)")
def test_the_etcd_bench_reports_the_cas_ratio_it_measured_against_a_bare_etcd_txn() -> None:
    result = quick("etcd")
    cas, listing, ratios = result["cas"], result["list"], result["ratios"]
    assert cas["cas_update"]["n"] == cas["bare_txn"]["n"] == result["objects"]["cas"]
    assert all(0 < figures["p50_us"] <= figures["p99_us"] for figures in (*cas.values(), *listing.values()))
    assert ratios["cas_update_over_bare_txn_p50"] == round(cas["cas_update"]["p50_us"] / cas["bare_txn"]["p50_us"], 2)
    assert ratios["list_over_bare_range_p50"] == round(listing["list"]["p50_us"] / listing["bare_range"]["p50_us"], 2)


def test_the_nvml_bench_watches_eight_gpus_without_spinning_and_times_xids_to_the_kubelet() -> None:
    result = quick("nvml")
    steady, xids = result["steady_state"], result["xid_to_unhealthy"]
    assert (steady["gpus"], steady["nvml_inits"], steady["nvml_reads"]) == (8, 1, 8 * 11)  # read once, every attribute
    assert steady["event_waits_in_window"] <= steady["window_seconds"] / steady["wait_timeout_seconds"] + 1
    assert steady["cpu_per_wall_second"] == pytest.approx(steady["cpu_seconds"] / steady["window_seconds"], abs=2e-5)
    assert (xids["gpus"], xids["samples"], xids["resets"]) == (8, 8, 1)
    assert 0 < xids["p50_seconds"] <= xids["p99_seconds"] <= xids["max_seconds"]
    assert xids["p99_within_1s"] is (xids["p99_seconds"] <= 1.0)


def test_the_udev_bench_discovers_through_real_libudev_and_times_adds_to_the_instance_and_kubelet() -> None:
    result = quick("udev")
    per_device, ratios = result["us_per_device"], result["ratio_to_bare"]
    # 30 adapters of 3 devices, the controller and the root hub; the rules find the ttys and the usb_devices
    assert (result["adapters"], result["devices_enumerated"], result["rules"], result["devices_found"]) == (
        30,
        92,
        10,
        60,
    )
    assert ratios == {
        "match": round(per_device["match"] / per_device["bare"], 2),
        "to_instances": round(per_device["to_instances"] / per_device["bare"], 2),
    }
    for latency in (result["add_to_handler_list"], result["add_to_instance"], result["add_to_kubelet"]):
        assert latency["samples"] == 4
        assert 0 < latency["p50_seconds"] <= latency["p99_seconds"] <= latency["max_seconds"]
        assert latency["p99_within_1s"] is (latency["p99_seconds"] <= 1.0)


def test_the_http_clients_bench_compares_the_stores_exchanges_with_httpx2_on_the_same_server() -> None:
    result = quick("httpclients")
    assert set(result["put_client_cpu_us"]) == {"exchanges", "httpx2"}
    assert all(v > 0 for v in result["put_client_cpu_us"].values())
    assert result["ratios"]["exchanges_over_httpx2_put"] == round(
        result["put_client_cpu_us"]["exchanges"] / result["put_client_cpu_us"]["httpx2"], 3
    )
    assert set(result["watch_event_client_cpu_us"]) == {"exchanges", "httpx2"}


def test_the_cel_bench_reports_cached_against_first_time_verdicts_and_the_library_scores() -> None:
    result = quick("cel")
    per_device = result["per_device"]
    assert per_device["hits"] + per_device["misses"] == 2 * per_device["devices"] * per_device["classes"]
    assert per_device["first_us"] > 0
    assert per_device["cached_us"] > 0
    assert result["ratios"]["first_over_cached"] == per_device["first_over_cached"]
    assert result["libraries"]["cel-expr-python"]["conformant"] == result["libraries"]["vectors"]
    hostile = result["hostile"]
    assert {"nested_5000_deep", "one_megabyte", "over_the_cost_budget", "quadratic_over_attributes"} <= set(hostile)
    assert "too complex" in hostile["over_the_cost_budget"]["reason"]
    assert hostile["claim_selectors"] == 18
    assert hostile["claim_s"] > 0


def test_the_footprint_bench_measures_an_idle_agent_with_three_devices_and_the_import_cost() -> None:
    result = quick("footprint")
    assert result["devices"] == 3
    assert result["samples"] >= 2
    assert 0 < result["agent_rss_mib"] < 1024
    imports = result["import_rss_mib"]
    assert imports["bare_interpreter"] < min(imports["devplace.agent"], imports["devplace.cli._agentruns"])
    assert imports["devplace.cli._agentruns"] < imports["devplace.cli._app"]  # the runner leaves the commands out


def test_the_dra_allocate_bench_fills_the_cluster_and_never_fits_an_unsatisfiable_claim() -> None:
    result = quick("dra_allocate")
    fill = result["fill"]
    assert fill["scheduled"] == fill["pods"] == 200
    assert fill["pods_per_s"] > 0
    assert fill["filter_calls"] >= fill["pods"]
    sampling = result["fill_kubernetes_sampling"]
    assert sampling["scheduled"] == sampling["pods"]
    assert sampling["filter_calls"] == sampling["pods"] * sampling["feasible_nodes_per_pod"]
    worst = result["worst"]
    assert worst["filters"] == 2 * worst["claims"]
    assert worst["wrong_fits"] == 0
    assert worst["undecided"] == 0
    assert 0 < worst["filter_us_p50"] <= worst["filter_us_p99"] <= worst["filter_us_max"]
    assert set(worst["per_family_us_p99"]) == set(importlib.import_module("bench.dra_allocate").FAMILIES)


@pytest.mark.slow
def test_the_dra_scheduler_bench_binds_every_pod_with_its_claim_through_the_server_and_measures_quality() -> None:
    result = quick("dra_scheduler")
    shape = result["shape"]
    served = result["through_server_on_etcd"]
    assert served["fill"]["bound"] == served["fill"]["pods"] == shape["pods"]
    assert served["fill"]["wrong"] == 0
    assert served["steady"]["bound_at_end"] == shape["pods"]
    spent = served["fill"]["cpu_ms_per_pod"]
    assert set(spent) == {"server", "etcd", "this_process"}
    assert all(ms > 0 for ms in spent.values())
    floors = served["floors"]
    etcd, request = floors["etcd_five_transactions_per_pod"], floors["server_request_without_store_work"]
    assert floors["five_writes_cpu_ms_per_pod"] == round(
        etcd["etcd_cpu_ms_per_pod"] + etcd["client_cpu_ms_per_pod"] + 5 * request["server_cpu_ms_per_request"], 3
    )
    assert floors["spent_ms_per_pod"] == round(sum(spent.values()), 3)
    assert etcd["pods_per_s"] > 0
    assert request["requests_per_s"] > 0
    assert floors["budget_ms_per_pod"] > 0
    memory = result["memory_store"]
    assert memory["dra"]["bound"] == shape["pods"]
    assert memory["dra"]["wrong"] == 0
    assert result["dra_over_classic_in_memory"] == round(
        memory["dra"]["pods_per_s"] / memory["classic_device_path"]["pods_per_s"], 3
    )
    quality = result["quality"]
    placed = quality["placed"]
    strategies = ("firstFit", "binpack", "spread", "optimal")
    assert placed["optimum"] >= max(placed[s] for s in strategies) > 0
    assert quality["over_optimum"] == {s: round(placed[s] / placed["optimum"], 4) for s in strategies}


def test_the_dra_prepare_bench_reports_prepare_against_its_floor_measured_in_the_same_run() -> None:
    result = quick("dra_prepare")  # raises when a prepare failed
    assert result["prepare"]["n"] == result["echo"]["n"] == result["cdi_write"]["n"] == result["n"]
    floor = sum(result[k]["p50_us"] for k in ("echo", "get", "cas", "cdi_write"))
    assert result["floor_p50_us"] == round(floor, 1)
    assert result["ratio_prepare_p50_to_floor"] == round(result["prepare"]["p50_us"] / floor, 2)


def test_the_dra_slices_bench_counts_one_slice_write_per_local_device_change() -> None:
    result = quick("dra_slices")
    changes = result["changes"]
    assert set(changes) == {"local_property", "local_gone", "local_new", "shared_property", "shared_node_left"}
    assert all(figures["n"] > 0 for figures in changes.values())
    for kind in ("local_property", "local_gone", "local_new"):
        assert changes[kind]["writes_max"] == 1, kind
    assert changes["shared_property"]["writes_max"] == 1
    assert changes["shared_node_left"]["writes_max"] == 2  # the slice it left and the one it joined
    assert sum(figures["writes_outside_holding_slices"] for figures in changes.values()) == 0
    assert result["local_goal_met"] is True
    assert result["shared_goal_met"] is True
    initial = result["initial"]
    assert initial["writes"] == initial["slices"] + initial["probe_writes"]  # one create per slice, nothing rewritten


def test_the_sim_bench_runs_every_generated_size_and_reports_the_growth_it_measured() -> None:
    result = quick("sim")
    sizes = result["sizes"]
    assert [s["devices"] for s in sizes] == [10, 20, 40]
    assert [s["nodes"] for s in sizes] == [1, 2, 4]
    assert result["skipped"] == []
    for size in sizes:
        assert size["finished"] is True
        assert size["ok"] is True  # every generated expectation held
        assert size["steps_done"] == size["steps_total"] == len(size["steps"])
        assert size["seconds_per_event"] == round(size["wall_seconds"] / size["events"], 5)
        assert 0 < size["settle_seconds"] < size["wall_seconds"]
        assert size["peak_mib"] > 0
        assert size["peak_rss_mib"] > size["peak_mib"]
        assert size["tracemalloc_overhead"] > 0
        assert size["transport"] == "unix"  # small fleets stay on real sockets
    for small, big in itertools.pairwise(sizes):
        growth = result["growth"][f"{big['devices']}/{small['devices']}"]
        assert growth["wall"] == round(big["wall_seconds"] / small["wall_seconds"], 2)
        assert growth["peak_memory"] == round(big["peak_mib"] / small["peak_mib"], 2)
        assert growth["within_goal"] == (growth["wall"] <= 12 and growth["peak_memory"] <= 12)
    largest = result["largest_settled"]
    assert (largest["devices"], largest["settle_seconds"]) == (40, sizes[-1]["settle_seconds"])
    assert largest["under_a_minute"] is (sizes[-1]["settle_seconds"] < 60)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is absent (`make test` installs it)")
def test_the_dashboard_bench_reads_the_pages_own_measures_of_a_render_and_each_watch_event() -> None:
    result = quick("dashboard")
    assert result["instances"] == 50
    assert result["slots"] == 200
    assert 0 < result["render_ms"] <= result["first_render_ms"]
    assert result["elements"] >= result["instances"] * (2 + 4)  # a row, its cells and its 4 slot chips at least
    assert result["event_ms"]["n"] == result["event_frame_ms"]["n"] == result["write_to_visible_ms"]["n"] == 3
    assert result["event_ms"]["p50"] <= result["event_ms"]["max"]
    # the ratio is taken before the times are rounded to 0.1 ms for the report: within what that rounding allows
    render, floor = result["render_ms"], result["floor_render_ms"]
    low, high = (render - 0.05) / (floor + 0.05), (render + 0.05) / max(floor - 0.05, 1e-9)
    assert low - 0.005 <= result["ratios"]["render_over_floor"] <= high + 0.005
    assert result["meets"]["event_p95_under_50ms"] == (result["event_ms"]["p95"] < 50)


def test_the_up_bench_times_kubectl_s_first_answer_and_a_clean_stop() -> None:
    result = quick("up")
    assert result["answered"] == result["runs"] == 1
    assert result["clean_exits"] == 1
    assert result["first_answer_s"] >= result["kubeconfig_s"] > 0
