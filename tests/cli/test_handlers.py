"""`devplace handler nvml`: the nvml handler as its own process over Akri's protocol (here answering from the captured
H200 with `--fake-nvml`), registered with an agent's Registration socket; SIGHUP re-reads NVML, SIGTERM stops it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from typer.testing import CliRunner

from devplace.cli._app import app
from devplace.discovery import HandlerRegistry, RegistrationServer
from tests.discovery.streams import next_of, registry_until
from tests.discovery.test_gpus import H200_PROPERTIES
from tests.discovery.test_nvml import CAPTURE, H200_UUID
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
