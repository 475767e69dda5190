"""Issue #25 item 5, run as a user would: every part its own process (`devplace server`, `devplace scheduler`,
`devplace agent` with the built-in debugEcho discovery handler, `devplace kubelet-sim`), a ResourceClass pod applied
together with its Configuration.

The race the issue saw (the pod Failed for good in 4 of 5 runs: the scheduler chose the new Instance before the node's
kubelet had its Instance-level plugin) is made certain here: node-a's kubelet is down (restarting) while its agent
discovers the device and publishes the Instance, so the kubelet cannot have the plugin. The scheduler must not choose
a device the Node does not advertise: the pod waits, Pending with the reason, and once the kubelet is back and the
agent's plugin registered (the Node's allocatable changes) it is bound, admitted and Running.

Waits poll the server with deadlines (bounds on a hang, never timing assertions). Every process is stopped by its PID.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devplace.store import Store, open_store
from tests.processes import Cluster, Daemons, poll_until

pytestmark = pytest.mark.slow

WAIT = 60.0
CLASS = "debug.echo"
ANNOTATION = "scheduler.alpha.kubernetes.io/resClass_"

CONFIGURATION = {
    "apiVersion": "akri.sh/v0",
    "kind": "Configuration",
    "metadata": {"name": "echo", "namespace": "default"},
    "spec": {"discoveryHandler": {"name": "debugEcho", "discoveryDetails": "descriptions: [foo0]"}, "capacity": 1},
}
RESOURCE_CLASS = {
    "apiVersion": "devplace.io/v1alpha1",
    "kind": "ResourceClass",
    "metadata": {"name": CLASS},
    "spec": {"resourceSelector": [{"matchExpressions": [{"key": "Kind", "operator": "In", "values": ["debugEcho"]}]}]},
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "user", "namespace": "default"},
    "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "app", "resources": {"limits": {f"rc.devplace.io/{CLASS}": "1"}}}],
    },
}
NODE = {  # what node-a's kubelet registered before it went down
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a"}},
    "status": {
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    },
}


def scheduled(pod: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"), {})


async def test_a_class_pod_applied_with_its_configuration_waits_for_the_nodes_plugin_and_then_runs(
    sock_dir: Path,
) -> None:
    async with Daemons(sock_dir) as daemons:
        cluster = Cluster(daemons, f"sqlite:///{sock_dir}/devplace.db", sock_dir)
        await cluster.start_server()
        store = open_store(cluster.url)
        try:
            await store.create(NODE)
            await scenario(cluster, store)
        except BaseException:
            print(daemons.report(daemons.all, tail=3000))  # shown by pytest with the failure
            raise
        finally:
            await store.close()


async def scenario(cluster: Cluster, store: Store) -> None:
    daemons = cluster.daemons
    directory = cluster.kubelet_dir("node-a")
    directory.mkdir(parents=True, exist_ok=True)
    common = ("--node", "node-a", "--store", cluster.url, "--kubelet-dir", str(directory), "--log-level", "warning")
    cluster.scheduler = await daemons.spawn("scheduler", "scheduler", "--store", cluster.url, "--log-level", "warning")
    own = (  # nothing shared with other agents of this machine
        "--registration-socket",
        str(directory / "agent-registration.sock"),
        "--debug-echo-availability-file",
        str(directory / "debug-echo-availability.txt"),
    )
    cluster.agents["node-a"] = await daemons.spawn("agent-node-a", "agent", *common, *own)

    for obj in (CONFIGURATION, RESOURCE_CLASS, POD):  # applied together, as `devplace apply -f dir/` does
        await store.create(obj)

    async def instance() -> dict[str, Any] | None:
        items = (await store.list("Instance", "default")).items
        return next((i for i in items if i["spec"]["configurationName"] == "echo"), None)

    found = await poll_until(instance, "node-a's agent publishes the Instance", timeout=WAIT, daemons=daemons)
    name = found["metadata"]["name"]
    waiting = (
        f"0/1 nodes are available: 1 insufficient devices for class {CLASS}: want 1, 0 free, "
        "1 not in the node's allocatable."
    )

    async def pending_with_the_reason() -> bool:
        pod = await store.get("Pod", "user", "default")
        assert not pod["spec"].get("nodeName"), (
            f"bound to {pod['spec']['nodeName']} while node-a's kubelet does not advertise akri.sh/{name}: "
            f"{pod.get('status')}"
        )
        return bool(scheduled(pod).get("message") == waiting)

    await poll_until(pending_with_the_reason, "the pod waits for the plugin", timeout=WAIT, daemons=daemons)

    # the kubelet comes back: the agent's plugin registers, the Node's allocatable changes, the pod is decided again
    cluster.kubelets["node-a"] = await daemons.spawn("kubelet-node-a", "kubelet-sim", *common)

    async def decided() -> dict[str, Any] | None:
        pod = await store.get("Pod", "user", "default")
        phase = (pod.get("status") or {}).get("phase")
        assert phase != "Failed", f"the kubelet refused the pod: {pod['status']}"
        return pod if phase == "Running" else None

    pod = await poll_until(decided, "the pod runs", timeout=WAIT, daemons=daemons)
    assert pod["spec"]["nodeName"] == "node-a"
    assert {k: v for k, v in pod["metadata"]["annotations"].items() if k.startswith(ANNOTATION)} == {
        f"{ANNOTATION}{CLASS}_{name}": "1"
    }
    held = await store.get("Instance", name, "default")
    assert held["spec"]["deviceUsage"] == {f"{name}-0": "node-a"}
    node = await store.get("Node", "node-a")
    assert node["status"]["allocatable"][f"akri.sh/{name}"] == "1"
