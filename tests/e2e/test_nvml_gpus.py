"""Seed 003 on the captured H200 (issue #24): the `nvml` handler in a node's agent, a ResourceClass, the scheduler and
the simulated kubelet, all real; NVML is the fake built from the capture.

A class `nvidia.high.mem` (Kind In nvidia-gpu, memory GtEq 30G) selects the H200 (141 GB); a pod asking for it is
bound to its node, and its Allocate carries the GPU's UUID and device nodes; a class asking 200G selects nothing and
the pod asking it says so. An XID then reaches the kubelet as the device turning Unhealthy, and stays so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devplace.discovery import Event, FakeNvml, GpuHandler
from devplace.sim import Fleet
from tests.discovery.test_gpus import until
from tests.discovery.test_nvml import CAPTURE, H200_UUID
from tests.e2e.scenarios import held, instances

GPUS = """
apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: gpus
spec:
  discoveryHandler:
    name: nvml
    discoveryDetails: ""
  deviceKind: nvidia-gpu
  capacity: 1
"""

CLASSES = """
apiVersion: devplace.io/v1alpha1
kind: ResourceClass
metadata:
  name: nvidia.high.mem
spec:
  resourceSelector:
    - matchExpressions:
        - {key: Kind, operator: In, values: [nvidia-gpu]}
        - {key: memory, operator: GtEq, values: [30G]}
---
apiVersion: devplace.io/v1alpha1
kind: ResourceClass
metadata:
  name: nvidia.huge.mem
spec:
  resourceSelector:
    - matchExpressions:
        - {key: Kind, operator: In, values: [nvidia-gpu]}
        - {key: memory, operator: GtEq, values: [200G]}
"""

NODES = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
"""The captured machine's device nodes (no /dev/nvidia-modeset there)."""


def node_root(tmp_path: Path) -> Path:
    for path in NODES:
        (tmp_path / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path.lstrip("/")).write_text("")
    return tmp_path


async def class_status(fleet: Fleet, name: str) -> dict[str, str]:
    obj = await fleet.get("ResourceClass", name)
    assert obj is not None
    return dict(obj.get("status") or {})


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any]:
    [condition] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    return dict(condition)


async def test_seed_003_on_the_captured_h200_class_selects_binds_allocates_and_xid_turns_it_unhealthy(
    tmp_path: Path,
) -> None:
    fake = FakeNvml.from_file(CAPTURE)
    gpus = GpuHandler(fake, root=node_root(tmp_path), wait_timeout=0.05)
    no_gpus = GpuHandler(FakeNvml.from_file(CAPTURE, library=False), root=tmp_path / "cpu-node")
    try:
        async with Fleet() as fleet:
            fleet.add_node("gpu-node")
            fleet.add_node("cpu-node")
            await fleet.settle()
            fleet.agent("gpu-node").handlers.add(gpus)
            fleet.agent("cpu-node").handlers.add(no_gpus)  # the same handler on a node without NVIDIA's driver
            await fleet.apply(GPUS)
            await fleet.apply(CLASSES)
            # NVML is read in a worker thread, which the fleet does not count as busy: wait for it, then settle
            await until(gpus, lambda: bool(gpus.gpus))
            await until(no_gpus, lambda: no_gpus.started)
            await fleet.settle()

            [instance] = await instances(fleet, "gpus")
            name = instance["metadata"]["name"]
            props = instance["spec"]["brokerProperties"]
            assert instance["spec"]["nodes"] == ["gpu-node"]
            assert instance["spec"]["shared"] is False
            assert (props["uuid"], props["productName"], props["memory"]) == (H200_UUID, "NVIDIA H200", "143771Mi")
            assert await class_status(fleet, "nvidia.high.mem") == {"allocatable": "1", "requested": "0"}
            assert await class_status(fleet, "nvidia.huge.mem") == {"allocatable": "0", "requested": "0"}

            pod = await fleet.run_pod("trainer", requests={"rc.devplace.io/nvidia.high.mem": 1})
            assert pod["spec"]["nodeName"] == "gpu-node"
            assert pod["status"]["phase"] == "Running"
            claimed = await fleet.get("Instance", name)
            assert claimed is not None
            assert held(claimed) == {f"{name}-0": "gpu-node"}
            allocation = fleet.kubelet("gpu-node").allocations()["default", "trainer"]
            response = allocation.containers[0].responses[f"akri.sh/{name}"]
            assert response.envs["NVIDIA_VISIBLE_DEVICES"] == H200_UUID
            assert [(d.host_path, d.container_path, d.permissions) for d in response.devices] == [
                (p, p, "rw") for p in NODES
            ]
            assert not any(key.startswith("devplace.io/") for key in response.envs)
            assert list(response.cdi_devices) == []  # the captured machine has no CDI spec

            huge = await fleet.run_pod("huge", requests={"rc.devplace.io/nvidia.huge.mem": 1})
            assert huge["status"].get("phase", "Pending") == "Pending"
            assert scheduled_condition(huge)["message"] == (
                "0/2 nodes are available: 2 no device matches class nvidia.huge.mem."
            )

            resource = f"akri.sh/{name}"
            assert fleet.kubelet("gpu-node").devices(resource) == {f"{name}-0": "Healthy"}
            fake.inject(Event(H200_UUID, 0x8, 79))
            await until(gpus, lambda: not gpus.health[H200_UUID].healthy)
            await fleet.settle()
            assert fleet.kubelet("gpu-node").devices(resource) == {f"{name}-0": "Unhealthy"}
            stored = await fleet.get("Instance", name)
            assert stored is not None
            assert stored["spec"]["brokerProperties"]["devplace.io/health-reason"] == "XID 79 (critical error)"
    finally:
        await gpus.close()
        await no_gpus.close()
