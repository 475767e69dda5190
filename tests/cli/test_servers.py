"""`devplace server` as a real child process: it serves until SIGTERM, then closes its store and exits 0."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2

from devplace.cli.servers import listening_socket
from devplace.store import open_store
from tests.servers import spawn_server


def test_a_spawned_server_serves_the_store_it_was_given(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/served.db"
    with spawn_server(url) as base_url:
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
        created = httpx2.post(f"{base_url}/api/v1/nodes", json=node, timeout=10)
        assert created.status_code == 201
        assert httpx2.get(f"{base_url}/version", timeout=10).json()["devplace"]

    async def read() -> list[str]:
        store = open_store(url)
        try:
            return [o["metadata"]["name"] for o in (await store.list("Node")).items]
        finally:
            await store.close()

    assert asyncio.run(read()) == ["n"]


def _start(store_url: str, port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "devplace.cli", "server", "--store", store_url, "--port", str(port)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _bound_port(proc: subprocess.Popen[bytes]) -> int:
    """The port a server started with `--port 0` bound, from its startup line (no free-port race)."""
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    assert "listening on http://127.0.0.1:" in line, line + proc.stderr.read().decode()
    return int(line.rsplit(":", 1)[1])


def _wait_listening(proc: subprocess.Popen[bytes], port: int) -> None:
    for _ in range(400):  # bounded poll of a child's startup
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError("the server never became healthy")


def test_sigterm_stops_the_server_cleanly_with_exit_code_0(tmp_path: Path) -> None:
    proc = _start(f"sqlite:///{tmp_path}/x.db", 0)
    try:
        _wait_listening(proc, _bound_port(proc))
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, stderr.decode()
    assert b"Traceback" not in stderr  # the startup line was checked by _bound_port


def test_a_port_in_use_is_an_error_exit(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _start(f"sqlite:///{tmp_path}/x.db", port)
        try:
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    assert proc.returncode == 1
    (line,) = stderr.decode().splitlines()
    assert line.startswith(f"error: cannot listen on 127.0.0.1:{port}: ")
    assert "address already in use" in line.lower()


def test_the_listening_socket_says_tcp_so_asyncio_turns_nagle_off_for_each_connection() -> None:
    with listening_socket("127.0.0.1", 0) as sock:
        assert (sock.family, sock.type, sock.proto) == (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    with listening_socket("::1", 0) as sock:
        assert sock.family == socket.AF_INET6
