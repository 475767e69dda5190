"""`devplace kubelet-sim` as a real process over a sqlite store shared with the test, with a tiny real device plugin
(grpc.aio on a unix socket) registering with it: it keeps its Node, admits the pods bound to it, records what Allocate
gave them in their status, takes that back when it restarts, and exits 0 on SIGTERM or 1 on a fatal failure.

Refusing bad options and the fatal-failure exit are checked in-process (no fresh interpreter needed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc.aio
import pytest
from typer.testing import CliRunner

from devplace.cli import app
from devplace.deviceplugin import _constants as constants
from devplace.deviceplugin.podresources.v1 import api_pb2 as pr_pb2
from devplace.deviceplugin.podresources.v1 import api_pb2_grpc as pr_grpc
from devplace.sim._kubelets import (
    ContainerAllocation,
    PodAllocation,
    SimKubelet,
    recorded_allocation,
    with_allocated_resources,
)
from devplace.store import Store, open_store
from tests.processes import Daemon, Daemons, poll_until
from tests.sim.plugins import FakePlugin

RES = "example.com/cam"
H = constants.HEALTHY


def pod(name: str, count: int) -> dict[str, Any]:
    wanted = {RES: str(count)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "main", "image": "app", "resources": {"requests": wanted, "limits": wanted}}],
        },
    }


class Node:
    """A kubelet-sim daemon for node-a over `store`, and a fake plugin offering d0 and d1 to it."""

    def __init__(self, daemons: Daemons, directory: Path, url: str, store: Store) -> None:
        self.daemons = daemons
        self.directory = directory
        self.url = url
        self.store = store
        self.plugin = FakePlugin(directory / constants.DEVICE_PLUGIN_DIR, RES, {"d0": H, "d1": H})
        self.kubelet: Daemon | None = None

    @property
    def socket(self) -> Path:
        return self.directory / constants.DEVICE_PLUGIN_DIR / constants.KUBELET_SOCKET_NAME

    async def start_kubelet(self) -> Daemon:
        if self.kubelet is None:
            args = ["--node", "node-a", "--store", self.url, "--kubelet-dir", str(self.directory)]
            self.kubelet = await self.daemons.spawn(
                "kubelet", "kubelet-sim", *args, "--device-order", "sorted", "--node-status-interval", "0"
            )
        else:
            await self.kubelet.start()

        async def serving() -> bool:
            try:
                await self.plugin.register(self.socket)
            except grpc.aio.AioRpcError:
                return False
            return True

        await poll_until(serving, "the plugin registered with the kubelet", timeout=60, daemons=self.daemons)
        return self.kubelet

    async def node(self) -> dict[str, Any] | None:
        node = await self.store.get("Node", "node-a", "")
        return node if node["status"]["allocatable"].get(RES) == "2" else None

    async def run(self, name: str, count: int) -> dict[str, Any]:
        await self.store.create(pod(name, count))

        async def decided() -> dict[str, Any] | None:
            found = await self.store.get("Pod", name, "default")
            return found if (found.get("status") or {}).get("phase") in ("Running", "Failed") else None

        result: dict[str, Any] = await poll_until(decided, f"pod {name} decided", timeout=60, daemons=self.daemons)
        return result

    async def pod_resources(self) -> dict[str, list[str]]:
        """Pod name -> device IDs, as the kubelet's PodResources List answers."""
        path = self.directory / constants.POD_RESOURCES_DIR / constants.KUBELET_SOCKET_NAME
        async with grpc.aio.insecure_channel(f"unix://{path}") as channel:
            listed = await pr_grpc.PodResourcesListerStub(channel).List(pr_pb2.ListPodResourcesRequest(), timeout=10)
        return {
            p.name: [d for c in p.containers for devices in c.devices for d in devices.device_ids]
            for p in listed.pod_resources
        }


@pytest.fixture
async def node(sock_dir: Path, tmp_path: Path) -> AsyncIterator[Node]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(url)
    async with Daemons(tmp_path) as daemons:
        node = Node(daemons, sock_dir / "k", url, store)
        await node.plugin.start()
        try:
            yield node
        finally:
            await node.plugin.stop()
            await store.close()


async def test_the_kubelet_sim_keeps_its_node_admits_a_pod_records_its_devices_and_exits_0_on_sigterm(
    node: Node,
) -> None:
    kubelet = await node.start_kubelet()
    await poll_until(node.node, "the Node advertises both devices", timeout=60, daemons=node.daemons)
    running = await node.run("p1", 1)
    assert running["status"]["phase"] == "Running"
    [container] = running["status"]["containerStatuses"]
    assert container["allocatedResourcesStatus"] == [{"name": RES, "resources": [{"resourceID": "d0", "health": H}]}]
    assert node.plugin.allocations == [["d0"]]
    assert await node.pod_resources() == {"p1": ["d0"]}
    assert await kubelet.stop() == 0
    output = kubelet.output()
    assert f"devplace kubelet-sim: node node-a, store {node.url}, kubelet dir {node.directory}\n" in output
    assert output.endswith("devplace kubelet-sim: stopped\n")
    assert not node.socket.exists()
    assert not (node.directory / constants.POD_RESOURCES_DIR / constants.KUBELET_SOCKET_NAME).exists()
    assert (await node.store.get("Node", "node-a", ""))["status"]["allocatable"][RES] == "2"  # left in the store


async def test_a_kubelet_sim_killed_and_started_again_takes_its_running_pods_devices_back(node: Node) -> None:
    kubelet = await node.start_kubelet()
    await poll_until(node.node, "the Node advertises both devices", timeout=60, daemons=node.daemons)
    assert (await node.run("p1", 1))["status"]["phase"] == "Running"
    await kubelet.kill()
    await node.start_kubelet()  # a new process, the plugin registered again
    assert await node.pod_resources() == {"p1": ["d0"]}  # so the agent would not release d0
    late = await node.run("p2", 2)  # d0 is still p1's: one device is free, not two
    assert (late["status"]["phase"], late["status"]["reason"]) == ("Failed", f"OutOf{RES}")
    assert (await node.run("p3", 1))["status"]["phase"] == "Running"
    assert node.plugin.allocations == [["d0"], ["d1"]]
    assert await node.pod_resources() == {"p1": ["d0"], "p3": ["d1"]}


def test_a_recorded_allocation_reads_back_what_the_running_status_recorded() -> None:
    record = PodAllocation("default", "p1", "uid-1")
    status = {"phase": "Running", "containerStatuses": [{"name": "main", "ready": True}, {"name": "side"}]}
    record.containers = [
        ContainerAllocation("init", init=True, devices={RES: ["d9"]}),
        ContainerAllocation("main", devices={RES: ["d0", "d1"], "example.com/gpu": []}),
        ContainerAllocation("side"),
    ]
    written = with_allocated_resources(status, record)
    assert written["containerStatuses"] == [
        {
            "name": "main",
            "ready": True,
            "allocatedResourcesStatus": [
                {"name": RES, "resources": [{"resourceID": "d0", "health": H}, {"resourceID": "d1", "health": H}]}
            ],
        },
        {"name": "side"},
    ]
    read = recorded_allocation({"metadata": {"name": "p1", "namespace": "default", "uid": "uid-1"}, "status": written})
    assert read is not None
    assert [(c.name, c.devices) for c in read.containers] == [("main", {RES: ["d0", "d1"]})]
    assert recorded_allocation({"metadata": {"name": "p1"}, "status": status}) is None


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--node", "Node_A"], 1, "--node: 'Node_A' must consist of lower case"),
        (["--node", "node-a", "--device-order", "shuffled"], 2, "'shuffled' is not one of random, sorted"),
        (["--node", "node-a", "--node-status-interval", "-1"], 2, "--node-status-interval"),
    ],
)
def test_the_kubelet_sim_refuses_bad_options_naming_them(
    tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["kubelet-sim", "--store", "memory", "--kubelet-dir", str(tmp_path), *args]
    )
    assert result.exit_code == code
    assert message in result.stderr


def test_the_kubelet_sim_exits_1_when_its_supervisor_reports_a_fatal_failure(
    sock_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def doomed() -> None:
        raise RuntimeError("the store is gone for good")

    async def start(self: SimKubelet) -> None:
        self.supervisor.loop("doomed", doomed, restart=False)

    monkeypatch.setattr(SimKubelet, "start", start)
    args = ["kubelet-sim", "--node", "node-a", "--store", f"sqlite:///{tmp_path}/x.db", "--kubelet-dir", str(sock_dir)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: devplace kubelet-sim: a loop failed for good: RuntimeError: the store is gone for good"
    )


pytestmark = pytest.mark.slow
