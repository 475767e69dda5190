"""The agent as the kubelet's DRA plugin, driven by a stand-in kubelet built from its own protos.

The kubelet's side is compiled in the test (grpc_tools) from `.proto` text written for the tests
(`tests/fixtures/dra/kubelet/`) into a private descriptor pool, never from devplace's stubs: the agent must answer
messages it did not define, at the method paths a real kubelet calls. Claims with `status.allocation` are written
directly, as a scheduler would have written them; the slot a claim takes is checked in the Instance's deviceUsage.
The CDI oracle runs a real container (podman with runc, a static busybox as the root file system) with the CDI id
NodePrepareResources answered, and reads the env and device nodes inside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_tools import protoc

from devplace import errors
from devplace.agent import Agent, AgentConfig, instance_name
from devplace.api import dra_device
from devplace.clocks import FakeClock
from devplace.discovery import Device, HandlerRegistry, Signal
from devplace.discovery._devices import DeviceSpec, Mount
from devplace.store import DelegatingStore, MemoryStore, Store

from .conftest import Nodes, configuration, eventually

PROTOS = Path(__file__).resolve().parent.parent / "fixtures" / "dra" / "kubelet"
DRA_V1 = "k8s.io.kubelet.pkg.apis.dra.v1"
CLAIM = "cam-claim"


# -- the stand-in kubelet -------------------------------------------------------------------------------------


class KubeletProtos:
    """Message classes compiled from the fixture protos into a pool of their own."""

    def __init__(self, out: Path) -> None:
        target = out / "kubelet.pb"
        files = sorted(p.name for p in PROTOS.glob("*.proto"))
        code = protoc.main(["protoc", f"-I{PROTOS}", f"--descriptor_set_out={target}", *files])
        assert code == 0, f"protoc failed ({code})"
        self.pool = descriptor_pool.DescriptorPool()
        for file in descriptor_pb2.FileDescriptorSet.FromString(target.read_bytes()).file:
            self.pool.Add(file)

    def __call__(self, name: str) -> Any:
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(name))

    def enum(self, name: str) -> Any:
        return self.pool.FindEnumTypeByName(name)


class StandInKubelet:
    """The kubelet's calls: registration through the plugin registry, prepare, unprepare, the health stream."""

    def __init__(self, protos: KubeletProtos, kubelet_dir: Path) -> None:
        self.m = protos
        self.registry = kubelet_dir / "plugins_registry"
        self.endpoint = ""
        self.channel: grpc.aio.Channel | None = None

    def _unary(self, channel: grpc.aio.Channel, path: str, response: str) -> Any:
        return channel.unary_unary(
            path, request_serializer=lambda m: m.SerializeToString(), response_deserializer=self.m(response).FromString
        )

    async def register(self) -> Any:
        """Find the registration socket, GetInfo, NotifyRegistrationStatus; connect to the endpoint it names."""
        sockets = sorted(self.registry.glob("*.sock"))
        assert [s.name for s in sockets] == ["devplace.io-reg.sock"]
        async with grpc.aio.insecure_channel(f"unix://{sockets[0]}") as channel:
            info = await self._unary(
                channel, "/pluginregistration.Registration/GetInfo", "pluginregistration.PluginInfo"
            )(self.m("pluginregistration.InfoRequest")(), timeout=10)
            await self._unary(
                channel,
                "/pluginregistration.Registration/NotifyRegistrationStatus",
                "pluginregistration.RegistrationStatusResponse",
            )(self.m("pluginregistration.RegistrationStatus")(plugin_registered=True), timeout=10)
        self.endpoint = info.endpoint
        self.channel = grpc.aio.insecure_channel(f"unix://{info.endpoint}")
        return info

    async def prepare(self, *claims: tuple[str, str, str], package: str = DRA_V1) -> dict[str, Any]:
        assert self.channel is not None
        request = self.m(f"{package}.NodePrepareResourcesRequest")(
            claims=[self.m(f"{package}.Claim")(namespace=ns, name=name, uid=uid) for ns, name, uid in claims]
        )
        call = self._unary(
            self.channel, f"/{package}.DRAPlugin/NodePrepareResources", f"{package}.NodePrepareResourcesResponse"
        )
        response = await call(request, timeout=45)
        return dict(response.claims)

    async def unprepare(self, *claims: tuple[str, str, str]) -> dict[str, str]:
        assert self.channel is not None
        request = self.m(f"{DRA_V1}.NodeUnprepareResourcesRequest")(
            claims=[self.m(f"{DRA_V1}.Claim")(namespace=ns, name=name, uid=uid) for ns, name, uid in claims]
        )
        call = self._unary(
            self.channel, f"/{DRA_V1}.DRAPlugin/NodeUnprepareResources", f"{DRA_V1}.NodeUnprepareResourcesResponse"
        )
        response = await call(request, timeout=45)
        return {uid: answer.error for uid, answer in response.claims.items()}

    async def health(self, version: str = "v1alpha1") -> AsyncIterator[list[tuple[str, str, str, str]]]:
        """Each message of the `version` stream as (pool, device, health name, message)."""
        assert self.channel is not None
        status = self.m.enum(f"{version}.HealthStatus")
        call = self.channel.unary_stream(
            f"/{version}.DRAResourceHealth/NodeWatchResources",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=self.m(f"{version}.NodeWatchResourcesResponse").FromString,
        )
        async for message in call(self.m(f"{version}.NodeWatchResourcesRequest")()):
            yield [
                (d.device.pool_name, d.device.device_name, status.values_by_number[d.health].name, d.message)
                for d in message.devices
            ]

    async def close(self) -> None:
        if self.channel is not None:
            await self.channel.close(None)


# -- a device with a node and a mount, and the node around it -------------------------------------------------


class ProbeHandler:
    """A local discovery handler reporting `probe-1` (a device node and a mount) while it is plugged in."""

    name = "probe"

    def __init__(self, mount_source: Path) -> None:
        self.plugged = True
        self.mount_source = mount_source
        self.signal = Signal()

    def unplug(self) -> None:
        self.plugged = False
        self.signal.fire()

    async def discover(
        self, details: str, properties: Mapping[str, bytes | None] | None = None
    ) -> AsyncGenerator[list[Device], None]:
        while True:
            wake = self.signal.current()
            yield (
                [
                    Device(
                        "probe-1",
                        {"PROBE_DEVICE": "probe-1"},
                        shared=False,
                        mounts=(Mount("/probe", str(self.mount_source), read_only=True),),
                        device_specs=(DeviceSpec("/dev/devplace-probe", "/dev/zero", "rw"),),
                    )
                ]
                if self.plugged
                else []
            )
            await wake.wait()


class DraNode:
    def __init__(self, nodes: Nodes, agent: Agent, handler: ProbeHandler, cdi_dir: Path, instance: str) -> None:
        self.nodes = nodes
        self.agent = agent
        self.handler = handler
        self.cdi_dir = cdi_dir
        self.instance = instance
        self.device = dra_device(instance, {}).name

    @property
    def store(self) -> Store:
        return self.nodes.store

    async def usage(self) -> dict[str, str]:
        return dict((await self.store.get("Instance", self.instance, "default"))["spec"]["deviceUsage"])

    async def claim(self, name: str = CLAIM, device: str | None = None, **result: Any) -> str:
        """Create a ResourceClaim allocated to this node's probe device; its UID."""
        created = await self.store.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "probe", "exactly": {"deviceClassName": "probe"}}]}},
            }
        )
        created["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "probe",
                            "driver": "devplace.io",
                            "pool": "node-a",
                            "device": device or self.device,
                            **result,
                        }
                    ]
                }
            }
        }
        await self.store.update(created)
        return str(created["metadata"]["uid"])


@pytest.fixture
async def dra_node(nodes: Nodes, tmp_path: Path) -> DraNode:
    (tmp_path / "mounted").mkdir()
    (tmp_path / "mounted" / "hello").write_text("from the host\n")
    cdi_dir = tmp_path / "cdi"
    agent = await nodes.add("node-a", dra=True, cdi_dir=cdi_dir)
    handler = ProbeHandler(tmp_path / "mounted")
    agent.handlers.add(handler)
    await nodes.store.create(configuration("probes", capacity=1, handler="probe"))
    name = instance_name("probes", "probe-1", "node-a", False)

    async def exists() -> bool:
        with contextlib.suppress(Exception):
            await nodes.store.get("Instance", name, "default")
            return True
        return False

    for _ in range(500):
        if await exists():
            break
        await asyncio.sleep(0.01)
    await nodes.settle()
    return DraNode(nodes, agent, handler, cdi_dir, name)


@pytest.fixture
async def kubelet(dra_node: DraNode, tmp_path: Path) -> AsyncIterator[StandInKubelet]:
    stand_in = StandInKubelet(KubeletProtos(tmp_path), dra_node.nodes.root / "node-a")
    yield stand_in
    await stand_in.close()


HOLDER = f"D:default/{CLAIM}:node-a"


# -- registration, prepare, unprepare -------------------------------------------------------------------------


async def test_the_kubelet_registers_the_plugin_through_the_plugin_registry(
    dra_node: DraNode, kubelet: StandInKubelet
) -> None:
    info = await kubelet.register()
    assert info.type == "DRAPlugin"
    assert info.name == "devplace.io"
    assert info.endpoint == str(dra_node.nodes.root / "node-a" / "plugins" / "devplace.io" / "dra.sock")
    assert list(info.supported_versions) == [
        "v1.DRAPlugin",
        "v1beta1.DRAPlugin",
        "v1alpha1.DRAResourceHealth",
        "v1.DRAResourceHealth",
    ]
    await eventually(lambda: dra_node.agent.dra is not None and dra_node.agent.dra.registered is True)


async def test_prepare_takes_the_slot_for_the_claim_writes_cdi_and_answers_by_claim_uid(
    dra_node: DraNode, kubelet: StandInKubelet
) -> None:
    await kubelet.register()
    uid = await dra_node.claim()
    answers = await kubelet.prepare(("default", CLAIM, uid))
    assert list(answers) == [uid]
    assert answers[uid].error == ""
    [device] = answers[uid].devices
    cdi_id = f"devplace.io/probes={uid}-{dra_node.device}"
    assert (list(device.request_names), device.pool_name, device.device_name, list(device.cdi_device_ids)) == (
        ["probe"],
        "node-a",
        dra_node.device,
        [cdi_id],
    )
    assert await dra_node.usage() == {f"{dra_node.instance}-0": HOLDER}
    [spec_file] = sorted(dra_node.cdi_dir.iterdir())
    spec = json.loads(spec_file.read_text())
    assert spec["kind"] == "devplace.io/probes"
    [entry] = spec["devices"]
    assert entry["name"] == f"{uid}-{dra_node.device}"
    edits = entry["containerEdits"]
    assert "PROBE_DEVICE=probe-1" in edits["env"]
    assert edits["deviceNodes"] == [{"path": "/dev/devplace-probe", "hostPath": "/dev/zero", "permissions": "rw"}]
    assert edits["mounts"][0]["containerPath"] == "/probe"


async def test_a_1_33_kubelet_prepares_through_dra_v1beta1_and_gets_the_same_devices(
    dra_node: DraNode, kubelet: StandInKubelet
) -> None:
    await kubelet.register()
    uid = await dra_node.claim()
    answers = await kubelet.prepare(("default", CLAIM, uid), package="k8s.io.kubelet.pkg.apis.dra.v1beta1")
    [device] = answers[uid].devices
    assert (device.pool_name, device.device_name, list(device.cdi_device_ids)) == (
        "node-a",
        dra_node.device,
        [f"devplace.io/probes={uid}-{dra_node.device}"],
    )
    assert await dra_node.usage() == {f"{dra_node.instance}-0": HOLDER}


async def test_a_retried_prepare_answers_the_same_and_takes_nothing_more(
    dra_node: DraNode, kubelet: StandInKubelet
) -> None:
    await kubelet.register()
    uid = await dra_node.claim()
    first = await kubelet.prepare(("default", CLAIM, uid))
    before = await dra_node.store.get("Instance", dra_node.instance, "default")
    again = await kubelet.prepare(("default", CLAIM, uid))
    after = await dra_node.store.get("Instance", dra_node.instance, "default")
    assert again[uid] == first[uid]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert len(list(dra_node.cdi_dir.iterdir())) == 1


async def test_a_slot_the_scheduler_took_for_the_claim_is_confirmed_without_a_write(
    dra_node: DraNode, kubelet: StandInKubelet
) -> None:
    await kubelet.register()
    inst = await dra_node.store.get("Instance", dra_node.instance, "default")
    inst["spec"]["deviceUsage"] = {f"{dra_node.instance}-0": HOLDER}
    written = await dra_node.store.update(inst)
    uid = await dra_node.claim()
    answers = await kubelet.prepare(("default", CLAIM, uid))
    assert answers[uid].error == ""
    after = await dra_node.store.get("Instance", dra_node.instance, "default")
    assert after["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]


def _prepares(result: str) -> float:
    from devplace import metrics

    value = metrics.REGISTRY.get_sample_value("devplace_agent_prepare_duration_seconds_count", {"result": result})
    return value or 0.0


async def test_a_claim_on_a_device_whose_slot_is_taken_is_refused_naming_the_holder(
    dra_node: DraNode, kubelet: StandInKubelet
) -> None:
    await kubelet.register()
    inst = await dra_node.store.get("Instance", dra_node.instance, "default")
    inst["spec"]["deviceUsage"] = {f"{dra_node.instance}-0": "node-a"}  # the Instance-level plugin has it
    await dra_node.store.update(inst)
    uid = await dra_node.claim()
    refused_before = _prepares("refused")
    answers = await kubelet.prepare(("default", CLAIM, uid))
    assert _prepares("refused") == refused_before + 1  # devplace_agent_prepare_duration_seconds{result="refused"}
    assert answers[uid].error == (
        f"{dra_node.instance} has 0 free slot(s), claim default/{CLAIM} needs 1 more (held by node-a (instance level))"
    )
    assert list(answers[uid].devices) == []
    assert await dra_node.usage() == {f"{dra_node.instance}-0": "node-a"}
    assert not dra_node.cdi_dir.exists() or list(dra_node.cdi_dir.iterdir()) == []


async def test_a_claim_whose_uid_differs_from_the_stored_one_is_refused(
    dra_node: DraNode, kubelet: StandInKubelet
) -> None:
    await kubelet.register()
    uid = await dra_node.claim()
    answers = await kubelet.prepare(("default", CLAIM, "0b7c3b1e-0000-4000-8000-000000000000"))
    assert answers["0b7c3b1e-0000-4000-8000-000000000000"].error == (
        f"ResourceClaim default/{CLAIM} has UID {uid}, not 0b7c3b1e-0000-4000-8000-000000000000: it was deleted and "
        "created again"
    )
    assert await dra_node.usage() == {f"{dra_node.instance}-0": ""}


async def test_unprepare_frees_the_slot_and_removes_the_cdi_file_and_is_idempotent(
    dra_node: DraNode, kubelet: StandInKubelet
) -> None:
    await kubelet.register()
    uid = await dra_node.claim()
    await kubelet.prepare(("default", CLAIM, uid))
    assert await kubelet.unprepare(("default", CLAIM, uid)) == {uid: ""}
    assert await dra_node.usage() == {f"{dra_node.instance}-0": ""}
    assert list(dra_node.cdi_dir.iterdir()) == []
    assert await kubelet.unprepare(("default", CLAIM, uid)) == {uid: ""}


async def test_a_dra_held_slot_is_unhealthy_to_the_instance_level_plugin_and_never_released_by_its_grace(
    dra_node: DraNode, kubelet: StandInKubelet
) -> None:
    await kubelet.register()
    uid = await dra_node.claim()
    await kubelet.prepare(("default", CLAIM, uid))
    mini = dra_node.nodes.kubelets["node-a"]
    await eventually(lambda: mini.registered(f"devplace.io/{dra_node.instance}"), "the IL plugin's registration")
    plugin = mini.client(f"devplace.io/{dra_node.instance}")
    try:
        await plugin.watch()
        await eventually(lambda: plugin.latest == {f"{dra_node.instance}-0": "Unhealthy"}, "an Unhealthy slot")
    finally:
        await plugin.close()
    await dra_node.nodes.advance(400.0, step=100.0)  # past the PodResources release grace (300 s)
    assert await dra_node.usage() == {f"{dra_node.instance}-0": HOLDER}


# -- health ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v1alpha1", "v1"])
async def test_health_goes_unhealthy_on_the_stream_when_the_device_is_unplugged(
    dra_node: DraNode, kubelet: StandInKubelet, version: str
) -> None:
    await kubelet.register()
    uid = await dra_node.claim()
    await kubelet.prepare(("default", CLAIM, uid))
    seen: list[list[tuple[str, str, str, str]]] = []

    async def watch() -> None:
        async for message in kubelet.health(version):
            seen.append(message)

    task = asyncio.create_task(watch())
    try:
        await eventually(lambda: bool(seen), "the first health list")
        assert seen[0] == [("node-a", dra_node.device, "HEALTHY", "")]
        dra_node.handler.unplug()
        await eventually(lambda: seen[-1][0][2] == "UNHEALTHY", "an UNHEALTHY device")
        pool, device, _, message = seen[-1][0]
        assert (pool, device) == ("node-a", dra_node.device)
        assert dra_node.instance in message
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            await task


# -- restart --------------------------------------------------------------------------------------------------


async def test_a_claim_prepared_before_an_agent_restart_stays_prepared_and_is_freed_by_a_later_unprepare(
    dra_node: DraNode, kubelet: StandInKubelet
) -> None:
    await kubelet.register()
    uid = await dra_node.claim()
    first = await kubelet.prepare(("default", CLAIM, uid))
    [spec_file] = sorted(dra_node.cdi_dir.iterdir())
    await kubelet.close()
    agent = await dra_node.nodes.restart("node-a", dra=True, cdi_dir=dra_node.cdi_dir)
    agent.handlers.add(dra_node.handler)
    await dra_node.nodes.settle()
    assert spec_file.is_file()
    assert await dra_node.usage() == {f"{dra_node.instance}-0": HOLDER}
    assert agent.dra is not None
    assert list(agent.dra.claims) == [uid]
    await kubelet.register()
    again = await kubelet.prepare(("default", CLAIM, uid))
    assert again[uid] == first[uid]
    assert await kubelet.unprepare(("default", CLAIM, uid)) == {uid: ""}
    assert await dra_node.usage() == {f"{dra_node.instance}-0": ""}
    assert not spec_file.exists()


# -- the CDI oracle: a real container resolves the CDI id -----------------------------------------------------


BUSYBOX = Path("/bin/busybox")
SYSTEM_CDI_DIR = Path("/var/run/cdi")


@pytest.mark.skipif(os.geteuid() != 0, reason="podman runs containers as root here")
async def test_a_container_started_with_the_answered_cdi_id_sees_the_env_the_device_node_and_the_mount(
    dra_node: DraNode, kubelet: StandInKubelet, tmp_path: Path
) -> None:
    for tool in ("podman", "runc"):
        assert shutil.which(tool), f"{tool} is missing: run `make devices`"
    assert await asyncio.to_thread(BUSYBOX.is_file), (
        "a static busybox is missing: install busybox-static (`make devices`)"
    )
    # podman 4.3 reads CDI specs from /var/run/cdi only: the agent writes there, as on a real node
    agent = await dra_node.nodes.restart("node-a", dra=True, cdi_dir=SYSTEM_CDI_DIR)
    agent.handlers.add(dra_node.handler)
    await dra_node.nodes.settle()
    await kubelet.register()
    uid = await dra_node.claim()
    try:
        answers = await kubelet.prepare(("default", CLAIM, uid))
        [cdi_id] = answers[uid].devices[0].cdi_device_ids
        await _run_probe(cdi_id, tmp_path)
    finally:
        assert await kubelet.unprepare(("default", CLAIM, uid)) == {uid: ""}
    assert not [name for name in await asyncio.to_thread(os.listdir, SYSTEM_CDI_DIR) if uid in name]


async def _run_probe(cdi_id: str, tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, rootfs / "bin" / "busybox")
    for d in ("dev", "proc", "sys", "tmp", "probe"):
        (rootfs / d).mkdir(exist_ok=True)
    command = [
        "podman",
        "--runtime",
        "runc",
        "run",
        "--rm",
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1000:1000",
        "--network",
        "none",
        "--device",
        cdi_id,
        "--rootfs",
        str(rootfs),
        "/bin/busybox",
        "sh",
        "-c",
        "echo env=$PROBE_DEVICE; /bin/busybox ls -l /dev/devplace-probe; /bin/busybox cat /probe/hello",
    ]
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "env=probe-1"
    assert lines[1].startswith("crw")  # a character device node: /dev/zero's, at the CDI path
    assert lines[1].endswith("/dev/devplace-probe")
    assert lines[2] == "from the host"


# -- on by default where the store serves resource.k8s.io/v1 ---------------------------------------------------


class _NoDra(DelegatingStore):
    """A store like a cluster without resource.k8s.io/v1: ResourceSlices are not found."""

    async def list_page(self, kind: str, *args: Any, **kwargs: Any) -> Any:
        if kind == "ResourceSlice":
            raise errors.NotFound("the server could not find the requested resource (resourceslices)")
        return await super().list_page(kind, *args, **kwargs)


@pytest.mark.parametrize(("serves", "expected"), [(True, True), (False, False)])
async def test_dra_defaults_to_on_exactly_where_the_store_serves_resource_slices(
    memory_store: MemoryStore, clock: FakeClock, sock_dir: Path, tmp_path: Path, serves: bool, expected: bool
) -> None:
    store: Store = memory_store if serves else _NoDra(memory_store)
    agent = Agent(
        AgentConfig(node="node-a", kubelet_dir=sock_dir, dra=None, cdi_dir=tmp_path),
        store,
        HandlerRegistry("node-a"),
        clock,
    )
    await agent.start()
    try:
        assert (agent.dra is not None) is expected
        assert (sock_dir / "plugins_registry" / "devplace.io-reg.sock").exists() is expected
    finally:
        await agent.stop()
    assert not (sock_dir / "plugins_registry" / "devplace.io-reg.sock").exists()


@pytest.mark.parametrize("dra", [None, True])
async def test_a_kubelet_dir_too_deep_for_a_unix_socket_skips_dra_by_default_and_refuses_it_when_asked(
    memory_store: MemoryStore, clock: FakeClock, tmp_path: Path, dra: bool | None
) -> None:
    deep = tmp_path / ("d" * 100)
    agent = Agent(
        AgentConfig(node="node-a", kubelet_dir=deep, dra=dra, cdi_dir=tmp_path),
        memory_store,
        HandlerRegistry("node-a"),
        clock,
    )
    if dra:
        with pytest.raises(errors.Invalid) as refused:
            await agent.start()
        assert [f.path for f in refused.value.fields] == ["--kubelet-dir"]
        assert "a unix socket path holds at most 107" in refused.value.fields[0].reason
        await agent.stop()
        return
    await agent.start()
    try:
        assert agent.dra is None  # the device plugins run; the DRA plugin API is not served, with an error logged
    finally:
        await agent.stop()
