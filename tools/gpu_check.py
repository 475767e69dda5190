#!/usr/bin/env python3
"""The GPU check (issue #24): devplace's nvml handler, agent, simulated kubelet and scheduler, each its own process,
on a machine with a real NVIDIA GPU; seed 003's resource class end to end, checked against what NVML and CUDA say.

Runs on the GPU machine from the repo root, installing nothing (stdlib + devplace; build the wheels with
tools/gpu_wheels.sh):

    pip install --no-index --no-deps --target /tmp/dp .gpu-wheels/*.whl
    PYTHONPATH=/tmp/dp:src python3 tools/gpu_check.py

Steps, each bounded by its own timeout (the whole run well under 3 minutes):
1. NVML, read here through devplace's boundary (`Pynvml`): every GPU's UUID, name, memory and minor number, the
   expected values of everything below.
2. On an sqlite store in a temporary directory: `devplace kubelet-sim`, `devplace agent --no-nvml`, `devplace handler
   nvml` (registering with the agent over Akri's protocol) and `devplace scheduler`, as subprocesses.
3. A Configuration (handler nvml, deviceKind nvidia-gpu), ResourceClasses `nvidia.high.mem` (Kind In nvidia-gpu,
   memory GtEq 30G) and `nvidia.huge.mem` (memory GtEq 200G). Checks: one Instance per GPU with NVML's UUID, name and
   memory; the classes' allocatable counts; a pod asking `nvidia.high.mem` is bound and Running; the Allocate answer
   for its slot (asked again of the agent's plugin, a re-offer the agent grants as the kubelet's) carries
   NVIDIA_VISIBLE_DEVICES = that GPU's UUID and its device nodes, and ListAndWatch lists it Healthy; a pod asking
   `nvidia.huge.mem` stays Pending saying no device matches.
4. CUDA (torch if importable, else libcuda through ctypes), in child processes: with CUDA_VISIBLE_DEVICES = the
   allocated UUID exactly one GPU, with NVML's name and memory; with a made-up UUID none.
Nothing changes GPU settings. A short report goes to stdout and everything to $OUT/gpu_check.json (or --out); the
exit code is 1 when any check failed. `--fake CAPTURE` runs steps 1-3 against an NVML capture (nvml.json) instead of
the library and skips step 4: the dry run for machines without a GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

NODE = "gpu-node"
HIGH, HUGE = "nvidia.high.mem", "nvidia.huge.mem"
MADE_UP_UUID = "GPU-00000000-1111-2222-3333-444444444444"
CLASS_ANNOTATION = "scheduler.alpha.kubernetes.io/resClass_"
TOTAL_TIMEOUT = 170.0
START_TIMEOUT = 60.0
CUDA_TIMEOUT = 90.0


@dataclass
class Check:
    name: str
    ok: bool | None  # None: skipped
    detail: str = ""


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def add(self, name: str, ok: bool | None, detail: str = "") -> bool:
        self.checks.append(Check(name, ok, detail))
        return bool(ok)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok is not False for c in self.checks)

    def lines(self) -> list[str]:
        mark = {True: "PASS", False: "FAIL", None: "SKIP"}
        out = [f"{mark[c.ok]}  {c.name}" + (f": {c.detail}" if c.detail else "") for c in self.checks]
        out.append(f"gpu_check: {'ok' if self.ok else 'FAILED'} ({sum(c.ok is False for c in self.checks)} failed)")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [asdict(c) for c in self.checks], **self.facts}


# -- pure parts ---------------------------------------------------------------------------------------------------


def memory_close(cuda_bytes: int, nvml_bytes: int, tolerance: float = 0.01) -> bool:
    """CUDA's total memory and NVML's agree (CUDA may report slightly less than NVML on some drivers)."""
    return nvml_bytes > 0 and abs(cuda_bytes - nvml_bytes) <= tolerance * nvml_bytes


def chosen_instances(pod: dict[str, Any], klass: str) -> list[str]:
    """The Instances the scheduler annotated on `pod` for class `klass`."""
    prefix = f"{CLASS_ANNOTATION}{klass}_"
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return sorted(k.removeprefix(prefix) for k in annotations if k.startswith(prefix))


def present_nodes(minor: int) -> list[str]:
    """The GPU's own device node and the control node, those present on this machine."""
    return [p for p in (f"/dev/nvidia{minor}", "/dev/nvidiactl") if Path(p).exists()]


def pod_condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


def manifests(high: str = "30G", huge: str = "200G") -> list[dict[str, Any]]:
    def klass(name: str, memory: str) -> dict[str, Any]:
        return {
            "apiVersion": "devplace.io/v1alpha1",
            "kind": "ResourceClass",
            "metadata": {"name": name},
            "spec": {
                "resourceSelector": [
                    {
                        "matchExpressions": [
                            {"key": "Kind", "operator": "In", "values": ["nvidia-gpu"]},
                            {"key": "memory", "operator": "GtEq", "values": [memory]},
                        ]
                    }
                ]
            },
        }

    configuration = {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "gpus", "namespace": "default"},
        "spec": {
            "discoveryHandler": {"name": "nvml", "discoveryDetails": ""},
            "deviceKind": "nvidia-gpu",
            "capacity": 1,
        },
    }
    return [configuration, klass(HIGH, high), klass(HUGE, huge)]


def pod(name: str, klass: str) -> dict[str, Any]:
    wanted = {f"rc.devplace.io/{klass}": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "cuda", "resources": {"requests": wanted, "limits": wanted}}],
        },
    }


CUDA_PROBE = r"""
import ctypes, json, os
out = {"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "devices": []}
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    out["via"] = "torch " + torch.__version__
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        out["devices"].append({"name": props.name, "memory": int(props.total_memory)})
else:
    out["via"] = "libcuda"
    cuda = ctypes.CDLL("libcuda.so.1")
    rc = cuda.cuInit(0)
    if rc not in (0, 100):  # 100: CUDA_ERROR_NO_DEVICE, the answer for a UUID that is not there
        raise SystemExit(f"cuInit: CUDA error {rc}")
    count = ctypes.c_int(0)
    if rc == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        raise SystemExit("cuDeviceGetCount failed")
    for i in range(count.value):
        dev, name, mem = ctypes.c_int(), ctypes.create_string_buffer(256), ctypes.c_size_t()
        cuda.cuDeviceGet(ctypes.byref(dev), i)
        cuda.cuDeviceGetName(name, 256, dev)
        cuda.cuDeviceTotalMem_v2(ctypes.byref(mem), dev)
        out["devices"].append({"name": name.value.decode(), "memory": mem.value})
print(json.dumps(out))
"""


def cuda_sees(uuid: str, timeout: float = CUDA_TIMEOUT) -> dict[str, Any]:
    """What a fresh process with CUDA_VISIBLE_DEVICES=`uuid` sees (torch, else libcuda)."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": uuid}
    done = subprocess.run(
        [sys.executable, "-c", CUDA_PROBE], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip()[-2000:], "devices": None}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- NVML, read here ----------------------------------------------------------------------------------------------


def nvml_facts(fake: Path | None) -> list[dict[str, Any]]:
    """Every GPU as NVML describes it (through devplace's boundary: the real library, or the capture)."""
    from devplace.discovery import FakeNvml, Nvml, Pynvml

    nvml: Nvml = Pynvml() if fake is None else FakeNvml.from_file(fake)
    nvml.init()
    try:
        return [
            {
                "index": i,
                "uuid": str(nvml.attribute(i, "uuid")),
                "name": str(nvml.attribute(i, "name")),
                "memory": int(nvml.attribute(i, "memory")["total"]),
                "minor": int(nvml.attribute(i, "minor_number")),
            }
            for i in range(nvml.device_count())
        ]
    finally:
        nvml.shutdown()


# -- the processes ------------------------------------------------------------------------------------------------


class Processes:
    """devplace daemons as children, output in files under `logs`; stopped by their PIDs."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        logs.mkdir(parents=True, exist_ok=True)
        self.children: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, label: str, *args: str | Path) -> None:
        with (self.logs / f"{label}.log").open("wb") as out:
            self.children[label] = subprocess.Popen(
                [sys.executable, "-m", "devplace.cli", *map(str, args)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )

    def dead(self) -> list[str]:
        return [label for label, proc in self.children.items() if proc.poll() is not None]

    def tail(self, label: str, size: int = 3000) -> str:
        path = self.logs / f"{label}.log"
        return path.read_text(errors="replace")[-size:] if path.exists() else ""

    def stop(self, grace: float = 10.0) -> dict[str, int | None]:
        for proc in self.children.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.children.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return {label: proc.returncode for label, proc in self.children.items()}


async def until(what: str, probe: Any, timeout: float, procs: Processes) -> Any:
    """Poll `probe` (async) until it returns something truthy; fail naming `what` past `timeout` or when a daemon
    died (polling other processes' work, bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        found = await probe()
        if found:
            return found
        dead = procs.dead()
        if dead:
            raise RuntimeError(f"{what}: {', '.join(dead)} exited:\n" + "\n".join(procs.tail(d) for d in dead))
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        await asyncio.sleep(0.2)


async def allocate_again(kubelet_dir: Path, slot: str) -> tuple[Any, str]:
    """The agent's Allocate answer for `slot`, from the IL plugin that lists it, and its health there."""
    import grpc.aio

    from devplace.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc

    for socket in sorted((kubelet_dir / "device-plugins").glob("dp-il-*.sock")):
        async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
            stub = api_pb2_grpc.DevicePluginStub(channel)
            stream = stub.ListAndWatch(api_pb2.Empty(), timeout=10)
            first = await anext(aiter(stream))
            stream.cancel()
            health = {d.ID: d.health for d in first.devices}
            if slot not in health:
                continue
            request = api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=[slot])])
            answer = await stub.Allocate(request, timeout=10)
            return answer.container_responses[0], health[slot]
    raise RuntimeError(f"no Instance-level plugin lists {slot}")


# -- the run ------------------------------------------------------------------------------------------------------


async def check(report: Report, fake: Path | None, root: Path) -> None:
    from devplace.api import Quantity, normalize
    from devplace.store import open_store

    started = time.monotonic()
    gpus = nvml_facts(fake)
    report.facts["nvml"] = gpus
    if not report.add("NVML sees GPUs", bool(gpus), ", ".join(f"{g['name']} {g['uuid']}" for g in gpus) or "none"):
        return
    by_uuid = {g["uuid"]: g for g in gpus}

    url = f"sqlite:///{root / 'devplace.db'}"
    kubelet_dir, registration = root / "k", root / "akri" / "agent-registration.sock"
    procs = Processes(root / "logs")
    store = open_store(url)
    try:
        procs.start("kubelet-sim", "kubelet-sim", "--node", NODE, "--store", url, "--kubelet-dir", kubelet_dir)
        procs.start(
            "agent", "agent", "--node", NODE, "--store", url, "--kubelet-dir", kubelet_dir,
            "--registration-socket", registration, "--no-nvml",
            "--debug-echo-availability-file", root / "availability",
        )  # fmt: skip
        handler = ["handler", "nvml", "--registration-socket", registration, "--socket-dir", root / "handlers"]
        procs.start("handler", *handler, *(["--fake-nvml", fake] if fake is not None else []))
        procs.start("scheduler", "scheduler", "--store", url)
        for obj in manifests():
            await store.create(normalize(obj))

        async def instances() -> list[dict[str, Any]] | None:
            items = (await store.list("Instance", "default")).items
            return items if len(items) >= len(gpus) else None

        found = await until("one Instance per GPU", instances, START_TIMEOUT, procs)
        report.facts["seconds_to_instances"] = round(time.monotonic() - started, 2)
        props = {i["spec"]["brokerProperties"].get("uuid"): i for i in found}
        report.add("one Instance per GPU, id and uuid NVML's", set(props) == set(by_uuid), ", ".join(sorted(props)))
        for uuid, gpu in by_uuid.items():
            got = (props.get(uuid) or {"spec": {"brokerProperties": {}}})["spec"]["brokerProperties"]
            memory = Quantity(got.get("memory", "0")).value() if got.get("memory") else 0
            report.add(
                f"{uuid}: productName and memory NVML's",
                got.get("productName") == gpu["name"] and memory == gpu["memory"],
                f"{got.get('productName')!r} {got.get('memory')} ({memory} bytes; NVML {gpu['memory']})",
            )
        report.facts["properties"] = {u: i["spec"]["brokerProperties"] for u, i in props.items()}

        expected_high = sum(g["memory"] >= 30 * 10**9 for g in gpus)
        expected_huge = sum(g["memory"] >= 200 * 10**9 for g in gpus)

        async def statuses() -> dict[str, Any] | None:
            high = (await store.get("ResourceClass", HIGH)).get("status") or {}
            huge = (await store.get("ResourceClass", HUGE)).get("status") or {}
            ok = high.get("allocatable") == str(expected_high) and huge.get("allocatable") == str(expected_huge)
            return {"high": high, "huge": huge} if ok else None

        try:
            seen = await until("class status", statuses, START_TIMEOUT, procs)
            report.add(f"{HIGH} (memory GtEq 30G) selects the GPUs, {HUGE} (200G) none", True, json.dumps(seen))
        except TimeoutError as e:
            report.add(f"{HIGH} (memory GtEq 30G) selects the GPUs, {HUGE} (200G) none", False, str(e))

        await store.create(normalize(pod("trainer", HIGH)))

        async def running() -> dict[str, Any] | None:
            obj = await store.get("Pod", "trainer", "default")
            return obj if (obj.get("status") or {}).get("phase") in ("Running", "Failed") else None

        bound = await until("the pod asking for the class is admitted", running, START_TIMEOUT, procs)
        report.facts["seconds_to_running"] = round(time.monotonic() - started, 2)
        phase = bound["status"]["phase"]
        report.add("the pod is bound and Running", phase == "Running" and bound["spec"].get("nodeName") == NODE,
                   f"{phase} on {bound['spec'].get('nodeName')} {bound['status'].get('message', '')}")  # fmt: skip
        chosen = chosen_instances(bound, HIGH)
        if not report.add("the scheduler chose one device", len(chosen) == 1, ", ".join(chosen)):
            return
        [instance] = chosen
        allocated_uuid = next((u for u, i in props.items() if i["metadata"]["name"] == instance), None)
        response, health = await allocate_again(kubelet_dir, f"{instance}-0")
        visible = response.envs.get("NVIDIA_VISIBLE_DEVICES")
        report.facts["allocate"] = {
            "envs": dict(response.envs),
            "devices": [d.host_path for d in response.devices],
            "cdi_devices": [d.name for d in response.cdi_devices],
        }
        report.add("Allocate's NVIDIA_VISIBLE_DEVICES is the GPU's NVML UUID", visible == allocated_uuid in by_uuid,
                   f"{visible}")  # fmt: skip
        gpu = by_uuid.get(visible or "", gpus[0])
        wanted_nodes = present_nodes(gpu["minor"])
        got_nodes = [d.host_path for d in response.devices]
        report.add("Allocate's device nodes include the GPU's present on this machine",
                   all(p in got_nodes for p in wanted_nodes), ", ".join(got_nodes) or "none")  # fmt: skip
        report.add("ListAndWatch lists the slot Healthy", health == "Healthy", health)

        await store.create(normalize(pod("huge", HUGE)))

        async def refused() -> dict[str, Any] | None:
            condition = pod_condition(await store.get("Pod", "huge", "default"), "PodScheduled")
            return condition if condition and condition.get("status") == "False" else None

        condition = await until("the pod asking 200G is refused", refused, START_TIMEOUT, procs)
        message = str(condition.get("message", ""))
        matches_none = f"no device matches class {HUGE}" in message
        report.add(f"a pod asking {HUGE} stays Pending: no device matches", matches_none, message)

        if fake is not None:
            report.add("CUDA sees exactly the allocated GPU", None, "dry run (--fake): no GPU here")
            return
        sees = await asyncio.to_thread(cuda_sees, allocated_uuid or "")
        report.facts["cuda_allocated"] = sees
        devices = sees.get("devices")
        report.add(
            "CUDA with CUDA_VISIBLE_DEVICES=<allocated UUID> sees one GPU with NVML's name and memory",
            devices is not None
            and len(devices) == 1
            and devices[0]["name"] == gpu["name"]
            and memory_close(devices[0]["memory"], gpu["memory"]),
            json.dumps(sees)[:500],
        )
        other = await asyncio.to_thread(cuda_sees, MADE_UP_UUID)
        report.facts["cuda_made_up"] = other
        report.add("CUDA with a made-up UUID sees no GPU", other.get("devices") == [], json.dumps(other)[:500])
    finally:
        report.facts["exit_codes"] = await asyncio.to_thread(procs.stop)
        report.facts["seconds"] = round(time.monotonic() - started, 2)
        if not report.ok:
            report.facts["logs"] = {label: procs.tail(label) for label in procs.children}
        with contextlib.suppress(Exception):
            await store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--fake", type=Path, help="an NVML capture (nvml.json): dry run without a GPU, no CUDA step")
    parser.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT") or "."), help="where gpu_check.json goes"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (store, logs)")
    args = parser.parse_args(argv)
    report = Report()
    root = Path(tempfile.mkdtemp(prefix="gpuchk-", dir="/tmp"))  # short: unix socket paths are limited
    try:
        asyncio.run(asyncio.wait_for(check(report, args.fake, root), TOTAL_TIMEOUT))
    except Exception as e:  # a step that could not finish is a failed check, with its reason
        report.add("the run finished", False, f"{type(e).__name__}: {e}"[:3000])
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print("\n".join(report.lines()))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(json.dumps(report.to_json(), indent=1, default=str))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
