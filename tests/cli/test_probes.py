"""`--metrics-port`: each daemon's /metrics, /livez and /readyz; scraped from real daemons and parsed.

Ready means: started, every running informer feed listed, the store answering. A store that is gone makes a part
unready, never dead (/livez stays 200)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from devplace import errors
from devplace.cli._probes import Endpoint, Health, open_endpoint
from devplace.store import Informer, MemoryStore
from tests.cli.test_daemons import CONFIGURATION, INSTANCE, NODE, POD, daemon, read, seed, stop, wait_for
from tests.scrapes import labels, series

__all__ = ["daemon"]  # the fixture, shared with test_daemons


class AwayStore(MemoryStore):
    """A store whose backend does not answer (an API server that is down)."""

    async def revision(self) -> int:
        raise errors.Unavailable("the backend did not answer")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


async def aget(url: str) -> tuple[int, str]:
    return await asyncio.to_thread(get, url)


@pytest.fixture
async def endpoint_for() -> AsyncIterator[Callable[[Health], Any]]:
    opened: list[Endpoint] = []

    async def open_for(health: Health) -> str:
        endpoint = await open_endpoint("127.0.0.1", 0, health)
        opened.append(endpoint)
        return f"http://127.0.0.1:{endpoint.port}"

    yield open_for
    for endpoint in opened:
        await endpoint.close()


async def test_a_part_is_ready_once_started_and_its_informers_listed(endpoint_for: Any) -> None:
    store = MemoryStore()
    health = Health(store, [store])
    base = await endpoint_for(health)
    assert await aget(f"{base}/livez") == (200, "ok")
    assert await aget(f"{base}/readyz?verbose") == (
        500,
        "[+]ping ok\n[-]informers failed: reason withheld\n[+]store ok\nreadyz check failed\n",
    )
    informer: Informer[Any] = Informer(store, "Pod")
    running = asyncio.ensure_future(informer.run())
    try:
        await informer.wait_synced()
        health.started = True
        assert await aget(f"{base}/readyz") == (200, "ok")
        assert await aget(f"{base}/readyz?verbose") == (
            200,
            "[+]ping ok\n[+]informers ok\n[+]store ok\nreadyz check passed\n",
        )
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert (await aget(f"{base}/nowhere"))[0] == 404


async def test_a_part_whose_store_is_gone_is_unready_but_alive(endpoint_for: Any) -> None:
    store = AwayStore()
    base = await endpoint_for(Health(store, [store], started=True))
    assert await aget(f"{base}/readyz?verbose") == (
        500,
        "[+]ping ok\n[-]informers failed: reason withheld\n[-]store failed: reason withheld\nreadyz check failed\n",
    )
    assert await aget(f"{base}/livez") == (200, "ok")


async def test_a_standby_copy_is_ready_while_its_store_answers(endpoint_for: Any) -> None:
    store = MemoryStore()
    base = await endpoint_for(Health(store, standby=True))
    assert await aget(f"{base}/readyz") == (200, "ok")


async def test_the_endpoint_serves_the_registry_in_prometheus_text_format(endpoint_for: Any) -> None:
    base = await endpoint_for(Health(MemoryStore()))
    status, text = await aget(f"{base}/metrics")
    assert status == 200
    assert ("process_resident_memory_bytes", labels()) in series(text)


# -- each daemon, scraped -----------------------------------------------------------------------------------------


def endpoint_of(proc: subprocess.Popen[bytes], log: Any, command: str) -> str:
    """The base URL the daemon's banner names (`--metrics-port 0` picks a free port)."""
    found: list[str] = []

    def named() -> bool:
        log.seek(0)
        match = re.search(rf"devplace {command}: metrics and probes on (http://127\.0\.0\.1:\d+)", log.read().decode())
        if match:
            found.append(match.group(1))
        return bool(match)

    wait_for(named, proc, log)
    return found[0]


def scrape_when_ready(base: str, proc: subprocess.Popen[bytes], log: Any) -> dict[Any, float]:
    wait_for(lambda: get(f"{base}/readyz")[0] == 200, proc, log)
    assert get(f"{base}/livez") == (200, "ok")
    status, text = get(f"{base}/metrics")
    assert status == 200
    return series(text)


def test_the_controller_exposes_akris_broker_pod_count_and_its_reconciles(daemon: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/devplace.db"
    seed(url, NODE, CONFIGURATION, INSTANCE)
    proc, log = daemon("controller", "--store", url, "--resource-prefix", "akri.sh", "--metrics-port", "0")
    base = endpoint_of(proc, log, "controller")
    wait_for(lambda: [p["metadata"]["name"] for p in read(url, "Pod")] == ["cam-a1b2c3-pod"], proc, log)
    wait_for(lambda: get(f"{base}/metrics")[1].count('akri_broker_pod_count{configuration="cam"') == 1, proc, log)
    scraped = scrape_when_ready(base, proc, log)
    assert scraped[("akri_broker_pod_count", labels(configuration="cam", node="node-a"))] == 1
    assert scraped[("controller_runtime_reconcile_total", labels(controller="configuration", result="success"))] >= 1
    assert scraped[("workqueue_adds_total", labels(name="devplace-controller"))] >= 1
    assert scraped[("devplace_store_cas_duration_seconds_count", labels(kind="Configuration", outcome="updated"))] >= 1
    code, output = stop(proc, log)
    assert code == 0, output


def test_the_scheduler_exposes_its_store_writes_and_is_ready_once_its_informers_listed(
    daemon: Any, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/devplace.db"
    seed(url, NODE, POD)
    proc, log = daemon("scheduler", "--store", url, "--metrics-port", "0")
    base = endpoint_of(proc, log, "scheduler")
    wait_for(lambda: read(url, "Pod")[0]["spec"].get("nodeName") == "node-a", proc, log)
    scraped = scrape_when_ready(base, proc, log)
    assert scraped[("devplace_store_cas_duration_seconds_count", labels(kind="Pod", outcome="updated"))] >= 1
    assert get(f"{base}/readyz?verbose")[1].endswith("[+]informers ok\n[+]store ok\nreadyz check passed\n")
    code, output = stop(proc, log)
    assert code == 0, output


def test_the_scheduler_counts_one_scheduled_attempt_for_one_bound_pod(daemon: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/devplace.db"
    seed(url, NODE, POD)
    proc, log = daemon("scheduler", "--store", url, "--metrics-port", "0")
    base = endpoint_of(proc, log, "scheduler")
    wait_for(lambda: read(url, "Pod")[0]["spec"].get("nodeName") == "node-a", proc, log)
    scraped = scrape_when_ready(base, proc, log)
    stop(proc, log)
    profile = labels(result="scheduled", profile="devplace-scheduler")
    assert scraped[("scheduler_schedule_attempts_total", profile)] == 1
    assert scraped[("scheduler_e2e_scheduling_duration_seconds_count", profile)] == 1
    assert scraped[("scheduler_pending_pods", labels(queue="active"))] == 0


ECHO_CONFIGURATION = {
    "apiVersion": "akri.sh/v0",
    "kind": "Configuration",
    "metadata": {"name": "echo", "namespace": "default"},
    "spec": {
        "discoveryHandler": {"name": "debugEcho", "discoveryDetails": "descriptions: [foo0, foo1, foo2]"},
        "capacity": 2,
    },
}


def test_the_agent_exposes_akris_instance_count_and_slots_per_configuration(
    daemon: Any, tmp_path: Path, sock_dir: Path
) -> None:
    url = f"sqlite:///{tmp_path}/devplace.db"
    seed(url, ECHO_CONFIGURATION)
    kubelet = sock_dir / "kubelet"  # short: unix socket paths are limited to 108 bytes
    (kubelet / "device-plugins").mkdir(parents=True)
    (kubelet / "pod-resources").mkdir()
    args = ["--node", "node-a", "--kubelet-dir", str(kubelet), "--registration-socket", str(sock_dir / "reg.sock")]
    proc, log = daemon("agent", "--store", url, *args, "--no-nvml", "--metrics-port", "0")
    base = endpoint_of(proc, log, "agent")
    wait_for(lambda: len(read(url, "Instance")) == 3, proc, log)
    wait_for(
        lambda: 'akri_instance_count{configuration="echo",is_shared="true"} 3.0' in get(f"{base}/metrics")[1], proc, log
    )
    scraped = scrape_when_ready(base, proc, log)
    assert scraped[("akri_instance_count", labels(configuration="echo", is_shared="true"))] == 3
    assert scraped[("devplace_discovered_devices", labels(configuration="echo"))] == 3
    assert scraped[("devplace_instance_slots", labels(configuration="echo", state="free"))] == 6
    assert scraped[("devplace_instance_slots", labels(configuration="echo", state="held"))] == 0
    success = labels(discovery_handler_name="debugEcho", result="Success")
    assert scraped[("akri_discovery_response_result", success)] == 1
    assert scraped[("akri_discovery_response_time_count", labels(configuration="echo"))] == 1
    code, output = stop(proc, log)
    assert code == 0, output
