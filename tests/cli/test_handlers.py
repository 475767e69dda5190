"""`devplace handler nvml`: the nvml handler as its own process over Akri's protocol (here answering from the captured
H200 with `--fake-nvml`), registered with an agent's Registration socket; SIGHUP re-reads NVML, SIGTERM stops it.
`devplace handler udev` likewise (in a umockdev testbed; what it finds: tests/discovery/test_udev.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from devplace import errors
from devplace.cli._app import app
from devplace.discovery import HandlerRegistry, RegistrationServer
from tests.discovery.onvifcams import Camera, Cameras, NetnsLoop, make_lan
from tests.discovery.opcuas import peers, url_of
from tests.discovery.streams import next_of, registry_until
from tests.discovery.test_gpus import H200_PROPERTIES
from tests.discovery.test_nvml import CAPTURE, H200_UUID
from tests.discovery.umockdevs import Umockdev, udev_handler_process
from tests.processes import poll_until, stop_child


async def test_the_stand_alone_handler_registers_serves_the_gpus_rereads_on_sighup_and_stops_on_sigterm(
    sock_dir: Path, tmp_path: Path
) -> None:
    registry = HandlerRegistry("node-a")
    registration = RegistrationServer(sock_dir / "reg.sock", registry)
    await registration.start()
    log = tmp_path / "handler.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "devplace.cli",
            "handler",
            "nvml",
            "--registration-socket",
            str(registration.socket_path),
            "--socket-dir",
            str(sock_dir / "handlers"),
            "--fake-nvml",
            str(CAPTURE),
            "--wait-timeout",
            "0.1",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env={**os.environ, "DP_DISABLE_HEALTHCHECKS": "48"},
        )
    try:
        await registry_until(registry, lambda: "nvml" in registry.names(), 60)
        [(uid, external)] = registry.endpoints("nvml").items()
        assert uid == f"nvml@{sock_dir / 'handlers' / 'nvml.sock'}"
        stream = external.discover("")
        [device] = await next_of(stream, 30)
        await stream.aclose()
        assert (device.id, device.shared, dict(device.properties)) == (H200_UUID, False, H200_PROPERTIES)

        def read_lines() -> list[str]:
            return [line for line in log.read_text().splitlines() if "nvml: 1 GPU(s): 0: NVIDIA H200" in line]

        async def read_twice() -> bool:
            return len(read_lines()) == 2

        assert len(read_lines()) == 1
        proc.send_signal(signal.SIGHUP)  # the operator's reset: NVML read afresh
        await poll_until(read_twice, "a second read of NVML after SIGHUP", timeout=30)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert not (sock_dir / "handlers" / "nvml.sock").exists()
        assert "devplace handler nvml: stopped" in log.read_text()
    finally:
        await stop_child(proc, sig=signal.SIGKILL)
        await registration.stop()


def test_a_capture_that_cannot_be_read_fails_at_once_naming_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["handler", "nvml", "--registration-socket", str(tmp_path / "reg.sock"), "--fake-nvml", str(tmp_path / "no")],
    )
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: capture: {tmp_path / 'no'}: not a readable NVML capture")


def test_a_malformed_xid_list_fails_at_once_naming_the_variable(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["handler", "nvml", "--registration-socket", str(tmp_path / "reg.sock"), "--fake-nvml", str(CAPTURE)],
        env={"DP_DISABLE_HEALTHCHECKS": "13,x"},
    )
    assert result.exit_code == 1
    assert result.stderr == "error: DP_DISABLE_HEALTHCHECKS: 'x' is neither an XID (a number) nor 'all'\n"


async def test_the_stand_alone_onvif_handler_probes_from_its_namespace_and_serves_the_camera_over_akris_protocol(
    sock_dir: Path, tmp_path: Path
) -> None:
    """`devplace handler onvif` in the handler's network namespace (`ip netns exec`), the agent's Registration socket
    on the host (a unix socket path reaches across network namespaces), a camera in the other namespace."""
    camera = Camera(uuid="5f5a69c2-e0ae-504f-829b-00fcdab169cc", ip="10.77.0.2", mac="aa:bb:cc:00:00:01")
    registry = HandlerRegistry("node-a")
    registration = RegistrationServer(sock_dir / "reg.sock", registry)
    await registration.start()
    with make_lan() as lan:
        cam = NetnsLoop(lan.cam)
        cam.start()
        cameras = Cameras(camera)
        await cam.run(cameras.start())
        log = tmp_path / "handler.log"
        handler = ["handler", "onvif", "--registration-socket", str(registration.socket_path)]
        handler += ["--socket-dir", str(sock_dir / "handlers"), "--interval", "0.2"]
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                *["ip", "netns", "exec", lan.dh, sys.executable, "-m", "devplace.cli", *handler],
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )
        try:
            await registry_until(registry, lambda: "onvif" in registry.names(), 60)
            [(uid, external)] = registry.endpoints("onvif").items()
            assert uid == f"onvif@{sock_dir / 'handlers' / 'onvif.sock'}"
            stream = external.discover("macAddresses: {items: ['AA:BB:CC:00:00:01']}")
            [device] = await next_of(stream, 30)
            await stream.aclose()
            url = "http://10.77.0.2:8000/onvif/device_service"
            assert (device.id, device.shared) == (f"{url}-{camera.uuid}", True)
            assert dict(device.properties) == {
                "ONVIF_DEVICE_SERVICE_URL": url,
                "ONVIF_DEVICE_UUID": camera.uuid,
                "ONVIF_DEVICE_IP_ADDRESS": "10.77.0.2",
                "ONVIF_DEVICE_MAC_ADDRESS": "aa:bb:cc:00:00:01",
            }
            bad = external.discover("scopes: {action: Exclude}")
            with pytest.raises(errors.Invalid) as refused:
                await next_of(bad, 30)
            assert "discoveryDetails.scopes.items: required" in refused.value.message
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 30) == 0
            assert not (sock_dir / "handlers" / "onvif.sock").exists()
            assert "devplace handler onvif: stopped" in log.read_text()
        finally:
            await stop_child(proc, sig=signal.SIGKILL)
            await registration.stop()
            await cam.run(cameras.stop())
            cam.stop()


async def test_the_stand_alone_opcua_handler_serves_the_servers_over_akris_protocol_until_their_discovery_server_stops(
    sock_dir: Path, tmp_path: Path
) -> None:
    """`devplace handler opcua` against a real asyncua discovery server on loopback with one server registered: the
    agent's side gets the server as a shared device, bad details come back Invalid naming the field, the device goes
    when the discovery server stops, SIGTERM stops the process."""
    registry = HandlerRegistry("node-a")
    registration = RegistrationServer(sock_dir / "reg.sock", registry)
    await registration.start()
    log = tmp_path / "handler.log"
    with peers() as opcua:
        lds = opcua.discovery_server()
        thermo = url_of(opcua.server("Thermo-A", path="/a/", register_at=url_of(lds)))
        handler = ["handler", "opcua", "--registration-socket", str(registration.socket_path)]
        handler += ["--socket-dir", str(sock_dir / "handlers"), "--interval", "0.1"]
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "devplace.cli", *handler, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out
            )
        try:
            await registry_until(registry, lambda: "opcua" in registry.names(), 60)
            [(uid, external)] = registry.endpoints("opcua").items()
            assert uid == f"opcua@{sock_dir / 'handlers' / 'opcua.sock'}"
            stream = external.discover(f"opcuaDiscoveryMethod: {{standard: {{discoveryUrls: ['{url_of(lds)}']}}}}")
            [device] = await next_of(stream, 30)
            assert (device.id, device.shared, dict(device.properties)) == (
                thermo,
                True,
                {"OPCUA_DISCOVERY_URL": thermo},
            )
            await opcua.stop(lds)
            assert await next_of(stream, 30) == []
            await stream.aclose()
            bad = external.discover("opcuaDiscoveryMethod: {standard: {discoveryUrls: ['opc.tcp://plc/']}}")
            with pytest.raises(errors.Invalid) as refused:
                await next_of(bad, 30)
            assert refused.value.message.startswith(
                "discoveryDetails.opcuaDiscoveryMethod.standard.discoveryUrls[0]: names no port"
            )
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 30) == 0
            assert not (sock_dir / "handlers" / "opcua.sock").exists()
            assert "devplace handler opcua: stopped" in log.read_text()
        finally:
            await stop_child(proc, sig=signal.SIGKILL)
            await registration.stop()


async def test_the_stand_alone_udev_handler_registers_not_shared_and_stops_on_sigterm(
    sock_dir: Path, tmp_path: Path
) -> None:
    testbed = await Umockdev.start()
    registry = HandlerRegistry("node-a")
    registration = RegistrationServer(sock_dir / "reg.sock", registry)
    await registration.start()
    log = tmp_path / "udev.log"
    proc = await udev_handler_process(testbed, registration.socket_path, sock_dir / "handlers", log)
    try:
        await registry_until(registry, lambda: "udev" in registry.names(), 60)
        [(uid, external)] = registry.endpoints("udev").items()
        assert (uid, external.shared) == (f"udev@{sock_dir / 'handlers' / 'udev.sock'}", False)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        assert not (sock_dir / "handlers" / "udev.sock").exists()
        assert "devplace handler udev: stopped" in log.read_text()
    finally:
        await stop_child(proc, sig=signal.SIGKILL)
        await registration.stop()
        await testbed.close()
