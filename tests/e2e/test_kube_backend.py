"""The agent, controller, scheduler and a kubelet-sim on the Kubernetes store backend (issue #12 item 5, Done when).

No kube-apiserver can be installed here, so `devplace server` on sqlite stands in for it: it writes a kubeconfig for
itself (`--write-kubeconfig`), and every other part is its own process opened with `--store kube:///that/kubeconfig`,
so they reach it only through Kubernetes API paths (`/api/v1/...`, `/apis/<group>/<version>/...`), Kubernetes
watches (JSON, bookmarks, resourceVersion) and `Status` errors, exactly as they would reach a cluster.

The run: a debugEcho Configuration with brokers and capacity 2. The agent discovers the device and writes its Instance;
the controller creates the node's broker Pod; the kubelet-sim admits it and calls Allocate on the agent's device
plugin, which claims a slot by compare-and-swap through the Kubernetes API. Then a Pod that asks for the Instance's
resource without a node is bound by the scheduler, admitted, and claims the second slot. The test reads through its
own `KubeStore` on the same kubeconfig. Waits poll with deadlines (bounds on a hang, never timing assertions); every
process is stopped by its PID.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from devplace.store import Store, open_store
from tests.processes import Daemon, Daemons, poll_until
from tests.servers import free_port

pytestmark = pytest.mark.slow

NODE = "node-a"
PREFIX = "akri.sh"
WAIT = 60.0
"""Seconds any one wait may take before the test fails as hung."""


def configuration() -> dict[str, Any]:
    broker = {"name": "broker", "image": "nginx", "resources": {"limits": {"{{PLACEHOLDER}}": "1"}}}
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "echo", "namespace": "default"},
        "spec": {
            "discoveryHandler": {"name": "debugEcho", "discoveryDetails": "descriptions: [echo-0]"},
            "capacity": 2,
            "brokerSpec": {"brokerPodSpec": {"containers": [broker]}},
        },
    }


def unbound_pod(resource: str) -> dict[str, Any]:
    limits = {resource: "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "consumer", "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "app", "resources": {"requests": limits, "limits": limits}}],
        },
    }


def phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_written(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


async def start_server(daemons: Daemons, db: Path, kubeconfig: Path) -> Daemon:
    port = free_port()
    args = ("--store", f"sqlite:///{db}", "--host", "127.0.0.1", "--port", str(port))
    server = await daemons.spawn(
        "server", "server", *args, "--write-kubeconfig", str(kubeconfig), "--log-level", "warning"
    )

    async def written() -> bool:
        return is_written(kubeconfig)

    await poll_until(written, "the server wrote its kubeconfig", timeout=WAIT, daemons=daemons)
    return server


async def test_the_agent_controller_and_scheduler_run_end_to_end_on_the_kube_backend(sock_dir: Path) -> None:
    kubeconfig = sock_dir / "kubeconfig"
    async with Daemons(sock_dir) as daemons:
        await start_server(daemons, sock_dir / "devplace.db", kubeconfig)
        kube = f"kube://{kubeconfig}"
        quiet = ("--log-level", "warning")
        node = ("--node", NODE, "--store", kube, "--kubelet-dir", str(sock_dir / NODE))
        await daemons.spawn("controller", "controller", "--store", kube, "--resource-prefix", PREFIX, *quiet)
        await daemons.spawn("scheduler", "scheduler", "--store", kube, *quiet)
        await daemons.spawn("kubelet", "kubelet-sim", *node, "--node-status-interval", "0.2", *quiet)
        await daemons.spawn("agent", "agent", *node, "--resource-prefix", PREFIX, *quiet)
        store = open_store(kube)
        try:
            await run(store, daemons)
        except BaseException:
            print(daemons.report(daemons.all, tail=3000))  # shown by pytest with the failure
            raise
        finally:
            await store.close()
        running = [d for d in daemons.all if d.running]
        codes = await asyncio.gather(*(d.stop() for d in running))
        unclean = [d for d, code in zip(running, codes, strict=True) if code != 0]
        assert not unclean, f"SIGTERM should stop every part with exit code 0\n{daemons.report(unclean)}"


async def run(store: Store, daemons: Daemons) -> None:
    async def wait(check: Any, what: str) -> Any:
        return await poll_until(check, what, timeout=WAIT, daemons=daemons)

    await store.create(configuration())

    async def instance() -> dict[str, Any] | None:
        found = (await store.list("Instance", "default")).items
        return found[0] if found and found[0]["spec"].get("nodes") == [NODE] else None

    discovered = await wait(instance, "the agent wrote the device's Instance through the Kubernetes API")
    name = discovered["metadata"]["name"]
    assert discovered["spec"]["configurationName"] == "echo"
    assert sorted(discovered["spec"]["deviceUsage"]) == [f"{name}-0", f"{name}-1"]

    async def holders() -> list[str]:
        current = await store.get("Instance", name, "default")
        return sorted(h for h in current["spec"]["deviceUsage"].values() if h)

    async def broker_claimed() -> list[dict[str, Any]] | None:
        pods = [p for p in (await store.list("Pod", "default")).items if p["metadata"]["name"] != "consumer"]
        running = [p for p in pods if phase(p) == "Running"]
        return running if running and await holders() == [NODE] else None

    (broker,) = await wait(broker_claimed, "the controller's broker runs and its Allocate claimed a slot")
    assert broker["spec"]["nodeName"] == NODE

    resource = f"{PREFIX}/{name}"
    await store.create(unbound_pod(resource))

    async def consumer_claimed() -> dict[str, Any] | None:
        pod = await store.get("Pod", "consumer", "default")
        return pod if phase(pod) == "Running" and await holders() == [NODE, NODE] else None

    consumer = await wait(consumer_claimed, "the scheduler bound the consumer and its Allocate claimed the other slot")
    assert consumer["spec"]["nodeName"] == NODE
