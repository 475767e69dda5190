"""udev devices end to end: `devplace handler udev` seeing a umockdev testbed through real libudev, registered with a
node agent (real Registration socket), whose Instances and device plugins a mini kubelet lists (real gRPC).

- add and remove uevents reach the Instances and the kubelet's device list;
- the handler process killed mid-stream: the agent keeps the last devices (past the offline grace, on its fake clock)
  with a condition saying the handler is gone, and takes the restarted handler's registration and stream;
- bad discoveryDetails (in-process `udev` handler, and a stored rule apply would have refused) become a condition on
  the Configuration naming the field; nothing crashes and other Configurations carry on;
- `kubectl apply` of a rule Akri cannot parse is refused with 422 naming the field and the rule.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devplace.agent import instance_name
from devplace.clocks import FakeClock
from devplace.discovery import UdevHandler
from devplace.store import Store
from tests.agent.conftest import PREFIX, Nodes, PluginClient, configuration, eventually
from tests.discovery.umockdevs import TTYUSB0, VIDEO0, Umockdev, add_serial, add_webcam, udev_handler_process
from tests.processes import stop_child
from tests.servers import anonymous_kubeconfig, spawn_server

NODE = "node-a"
BOUND = 60.0  # other processes' work is waited for this long at most; never a timed assertion
SERIALS = yaml.safe_dump({"udevRules": ['SUBSYSTEM=="tty", ATTRS{idVendor}=="0403"']})


@pytest.fixture
async def nodes(memory_store: Store, clock: FakeClock, sock_dir: Path) -> AsyncIterator[Nodes]:
    fleet = Nodes(memory_store, clock, sock_dir)
    yield fleet
    await fleet.close()


@pytest.fixture
async def testbed() -> AsyncIterator[Umockdev]:
    bed = await Umockdev.start()
    await add_webcam(bed)
    await add_serial(bed)
    yield bed
    await bed.close()


def akri_name(configuration: str, device_id: str, node: str) -> str:
    """Akri's Instance name for a device one node sees: 3-byte blake2b of the id with the node appended."""
    return f"{configuration}-{hashlib.blake2b(f'{device_id}{node}'.encode(), digest_size=3).hexdigest()}"


async def instances(store: Store) -> dict[str, dict[str, Any]]:
    return {i["metadata"]["name"]: i for i in (await store.list("Instance")).items}


async def condition(store: Store, name: str = "cams") -> list[tuple[str, str]]:
    cfg = await store.get("Configuration", name, "default")
    return [(c["reason"], c["message"]) for c in (cfg.get("status") or {}).get("conditions", [])]


async def until(check: Any, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BOUND
    while not await check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_udev_add_and_remove_reach_instances_and_the_kubelets_device_list(
    nodes: Nodes, testbed: Umockdev, tmp_path: Path
) -> None:
    registration = nodes.root / "reg.sock"
    await nodes.add(NODE, registration_socket=registration)
    await nodes.store.create(configuration(handler="udev", details=SERIALS, capacity=1))
    proc = await udev_handler_process(testbed, registration, nodes.root / "handlers", tmp_path / "udev.log")
    kubelet = nodes.kubelets[NODE]
    first = instance_name("cams", TTYUSB0, NODE, False)
    client: PluginClient | None = None
    try:
        await until(lambda: _has(nodes.store, [first]), "the first Instance")
        await eventually(lambda: kubelet.registered(f"{PREFIX}/cams"), "the CL plugin", timeout=BOUND)
        client = kubelet.client(f"{PREFIX}/cams")
        await client.watch()
        await eventually(lambda: len(client.healthy()) == 1, "one device listed", timeout=BOUND)
        stored = (await instances(nodes.store))[first]
        assert (first, stored["spec"]["brokerProperties"], stored["spec"]["shared"]) == (
            akri_name("cams", TTYUSB0, NODE),
            {"UDEV_DEVNODE": "/dev/ttyUSB0", "UDEV_DEVPATH": TTYUSB0},
            False,
        )
        response = await client.allocate(client.healthy())
        assert [(d.host_path, d.container_path, d.permissions) for d in response.container_responses[0].devices] == [
            ("/dev/ttyUSB0", "/dev/ttyUSB0", "rwm")
        ]

        plugged = await add_serial(testbed, port="1-4", index=1)  # an add uevent
        second = instance_name("cams", plugged, NODE, False)
        await until(lambda: _has(nodes.store, [first, second]), "the plugged adapter's Instance")
        await eventually(lambda: len(client.latest) == 2, "two devices listed", timeout=BOUND)

        await testbed.remove(TTYUSB0)  # a remove uevent
        await until(lambda: _has(nodes.store, [second]), "the unplugged adapter's Instance gone")
        await eventually(lambda: len(client.latest) == 1, "one device listed again", timeout=BOUND)
        assert await condition(nodes.store) == []
    finally:
        if client is not None:
            await client.close()
        await stop_child(proc)


async def _has(store: Store, names: list[str]) -> bool:
    return sorted(await instances(store)) == sorted(names)


async def test_a_killed_handler_leaves_its_devices_until_the_restarted_one_streams_again(
    nodes: Nodes, testbed: Umockdev, tmp_path: Path
) -> None:
    registration = nodes.root / "reg.sock"
    agent = await nodes.add(NODE, registration_socket=registration)
    rules = yaml.safe_dump({"udevRules": ['KERNEL=="video0"', 'KERNEL=="ttyUSB0"']})
    await nodes.store.create(configuration(handler="udev", details=rules))
    log = tmp_path / "udev.log"
    proc = await udev_handler_process(testbed, registration, nodes.root / "handlers", log)
    names = sorted(instance_name("cams", x, NODE, False) for x in (VIDEO0, TTYUSB0))
    try:
        await until(lambda: _has(nodes.store, names), "both Instances")
        await nodes.settle()
        await stop_child(proc, sig=9)  # SIGKILL, mid-stream
        await until(lambda: _reason(nodes.store, "DiscoveryHandlerUnavailable"), "the handler-gone condition")
        await nodes.advance(agent.config.offline_grace + 60)
        assert sorted(await instances(nodes.store)) == names  # kept: the devices did not go, the handler did

        proc = await udev_handler_process(testbed, registration, nodes.root / "handlers", log)
        await until(lambda: _no_condition(nodes.store), "the condition cleared by the new stream")
        assert sorted(await instances(nodes.store)) == names
        assert sorted(agent.handlers.endpoints("udev")) == [f"udev@{nodes.root / 'handlers' / 'udev.sock'}"]
        await testbed.remove(VIDEO0)  # and the new stream is live
        await until(lambda: _has(nodes.store, [instance_name("cams", TTYUSB0, NODE, False)]), "video0 gone")
        assert agent.supervisor.failure is None
    finally:
        await stop_child(proc)


async def _reason(store: Store, reason: str) -> bool:
    return [r for r, _ in await condition(store)] == [reason]


async def _no_condition(store: Store) -> bool:
    return await condition(store) == []


async def test_bad_udev_details_become_a_condition_naming_the_field_and_crash_nothing(nodes: Nodes) -> None:
    agent = await nodes.add(NODE)
    agent.handlers.add(UdevHandler())  # the in-process handler, as `devplace agent` registers it
    # the store takes what the API server's apply would refuse (an Akri CRD takes it too): the node must cope
    await nodes.store.create(configuration("bad-rule", handler="udev", details="udevRules: ['NAME==\"x\"']"))
    await nodes.store.create(configuration("bad-key", handler="udev", details="udevRules: []\npermissions: x"))
    await nodes.store.create(configuration("fine", handler="udev", details="udevRules: []"))
    await nodes.settle()
    await until(lambda: _two_failed(nodes.store), "both conditions")
    assert await condition(nodes.store, "bad-rule") == [
        (
            "InvalidDiscoveryDetails",
            "discoveryDetails.udevRules[0]: udev rule 'NAME==\"x\"' at character 1: unsupported field NAME "
            "(discovery matches devices; it assigns and runs nothing)",
        )
    ]
    assert await condition(nodes.store, "bad-key") == [
        ("InvalidDiscoveryDetails", "discoveryDetails.permissions: must be one of r, w, m, rw, rm, wm, rwm, got 'x'")
    ]
    assert await condition(nodes.store, "fine") == []
    assert (agent.supervisor.failure, agent.supervisor.restarts) == (None, {})


async def _two_failed(store: Store) -> bool:
    return bool(await condition(store, "bad-rule")) and bool(await condition(store, "bad-key"))


KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_apply_of_a_rule_akri_cannot_parse_is_refused_with_422_naming_field_and_rule(tmp_path: Path) -> None:
    assert KUBECTL is not None
    manifest = yaml.safe_dump(
        {
            "apiVersion": "akri.sh/v0",
            "kind": "Configuration",
            "metadata": {"name": "webcams"},
            "spec": {
                "discoveryHandler": {
                    "name": "udev",
                    "discoveryDetails": yaml.safe_dump({"udevRules": ['KERNEL=="video[0-9]*", RUN+="/bin/x"']}),
                }
            },
        }
    )
    with spawn_server(f"sqlite:///{tmp_path}/devplace.db") as base_url:
        kubeconfig = anonymous_kubeconfig(tmp_path / "kubeconfig", base_url)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}
        done = subprocess.run(
            [KUBECTL, "apply", "-f", "-", "-v=6"], input=manifest, capture_output=True, text=True, env=env, timeout=90
        )
        listed = subprocess.run(
            [KUBECTL, "get", "configurations.akri.sh", "-o", "name"], capture_output=True, text=True, env=env
        )
    assert done.returncode == 1
    assert "422" in done.stderr
    assert (
        'The Configuration "webcams" is invalid: spec.discoveryHandler.discoveryDetails: udevRules[0]: udev rule '
        '\'KERNEL=="video[0-9]*", RUN+="/bin/x"\' at character 24: unsupported field RUN'
    ) in done.stderr
    assert listed.stdout == ""
