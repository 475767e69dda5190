"""`devplace server` as a real child process: it serves until SIGTERM, then closes its store and exits 0."""

from __future__ import annotations

import asyncio
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
import yaml
from typer.testing import CliRunner

from devplace.cli import app
from devplace.cli._servers import kubeconfig, listening_socket, server_url
from devplace.store import open_store
from tests.servers import free_port, spawn_server


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


def _command(store_url: str, port: int) -> list[str]:
    return [sys.executable, "-m", "devplace.cli", "server", "--store", store_url, "--port", str(port)]


def _start(store_url: str, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(_command(store_url, port), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


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


# -- --write-kubeconfig ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8080"),
        ("0.0.0.0", "http://127.0.0.1:8080"),
        ("::", "http://[::1]:8080"),
        ("::1", "http://[::1]:8080"),
        ("10.1.2.3", "http://10.1.2.3:8080"),
        ("localhost", "http://localhost:8080"),
    ],
)
def test_the_kubeconfig_names_an_address_a_local_client_can_reach(host: str, url: str) -> None:
    assert server_url(host, 8080) == url


def test_the_kubeconfig_has_one_current_context_and_a_user_without_credentials() -> None:
    config = yaml.safe_load(kubeconfig("http://127.0.0.1:8080"))
    assert config["current-context"] == "devplace"
    (context,) = config["contexts"]
    assert context == {
        "name": "devplace",
        "context": {"cluster": "devplace", "user": "devplace", "namespace": "default"},
    }
    assert config["clusters"] == [{"name": "devplace", "cluster": {"server": "http://127.0.0.1:8080"}}]
    assert config["users"] == [{"name": "devplace", "user": {}}]


def test_a_server_on_port_0_writes_a_kubeconfig_for_the_port_it_bound(tmp_path: Path) -> None:
    path = tmp_path / "kube" / "config"
    path.parent.mkdir()
    proc = subprocess.Popen(
        [
            *_command(f"sqlite:///{tmp_path}/k.db", 0),
            "--write-kubeconfig",
            str(path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        port = _bound_port(proc)  # the file is written before the startup line
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        config = yaml.safe_load(path.read_text())
        assert config["clusters"][0]["cluster"]["server"] == f"http://127.0.0.1:{port}"
        _wait_listening(proc, port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)


def test_a_kubeconfig_that_cannot_be_written_is_an_error_exit(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*_command(f"sqlite:///{tmp_path}/k.db", 0), "--write-kubeconfig", str(tmp_path / "missing" / "config")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 1
    assert stderr.decode().startswith(f"error: cannot write {tmp_path / 'missing' / 'config'}: ")


# -- wait-ready ----------------------------------------------------------------------------------------------------


def test_wait_ready_returns_once_a_server_started_in_the_background_answers(tmp_path: Path) -> None:
    port = free_port()
    proc = _start(f"sqlite:///{tmp_path}/w.db", port)  # started, not yet listening: wait-ready waits for it
    try:
        result = CliRunner().invoke(app, ["wait-ready", "--server", f"http://127.0.0.1:{port}", "--timeout", "60"])
        assert (result.exit_code, result.output) == (0, "")
        assert httpx2.get(f"http://127.0.0.1:{port}/api/v1/nodes", timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)


def test_wait_ready_takes_the_server_from_an_http_store_url(tmp_path: Path) -> None:
    with spawn_server(f"sqlite:///{tmp_path}/s.db") as base_url:
        result = CliRunner(env={"DEVPLACE_STORE": base_url}).invoke(app, ["wait-ready"])
    assert (result.exit_code, result.output) == (0, "")


def test_wait_ready_fails_naming_the_server_when_nothing_answers_in_time() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    result = CliRunner().invoke(app, ["wait-ready", "--server", url, "--timeout", "0.2"])
    assert result.exit_code == 1
    assert result.output.startswith(f"error: {url} is not ready after 0.2 s: the API server at {url} did not answer")


def test_wait_ready_refuses_a_store_that_is_no_server() -> None:
    result = CliRunner(env={"DEVPLACE_STORE": "memory"}).invoke(app, ["wait-ready"])
    assert result.exit_code == 2
    assert "'memory' is not an http(s):// URL of a devplace server" in result.output
