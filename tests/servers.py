"""Real API servers for tests: in-process uvicorn on loopback, or a `devplace server` subprocess.

    async with serve_app(create_app(store)) as base_url: ...     # same event loop, port 0, stopped on exit
    with spawn_server("sqlite:////tmp/x.db") as base_url: ...    # a child process, terminated (then killed) by PID
    async with remote_backend(tmp_path, clock) as store: ...      # a RemoteStore over a served MemoryStore

Both bind 127.0.0.1 only. `spawn_server` waits for /healthz before yielding and reports the child's stderr if it
dies during startup.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO

import httpx2
from fastapi import FastAPI

from devplace.clocks import FakeClock
from devplace.server._app import create_app, running
from devplace.store import MemoryStore, Store
from devplace.store._remote import RemoteStore

__all__ = ["anonymous_kubeconfig", "free_port", "remote_backend", "serve_app", "spawn_server"]


@contextlib.asynccontextmanager
async def serve_app(app: FastAPI) -> AsyncIterator[str]:
    """Run `app` under a real uvicorn server on 127.0.0.1 (a free port) in this event loop; yields the base URL.

    Open streams (watches) are cut as soon as the block exits: tests never need uvicorn's grace period.
    """
    async with running(app, host="127.0.0.1", port=0, shutdown_timeout=0) as base_url:
        yield base_url


def anonymous_kubeconfig(path: Path, base_url: str) -> Path:
    """Write a kubeconfig at `path` whose one context is `base_url` with no credentials (a server without auth)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "devplace", "cluster": {"server": base_url}}],
        "users": [{"name": "devplace", "user": {}}],
        "contexts": [{"name": "devplace", "context": {"cluster": "devplace", "user": "devplace"}}],
        "current-context": "devplace",
    }
    path.write_text(json.dumps(config))  # JSON is YAML: kubectl reads it as a kubeconfig
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def spawn_server(store_url: str, *, startup_timeout: float = 20.0, extra_args: tuple[str, ...] = ()) -> Iterator[str]:
    """Run `python -m devplace.cli server --store URL` on a free loopback port; yields its base URL."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "devplace.cli",
        "server",
        "--store",
        store_url,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *extra_args,
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: a chatty server can never block on it
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        base_url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(proc, log, base_url, startup_timeout)
            yield base_url
        finally:
            _stop(proc)


def _wait_healthy(proc: subprocess.Popen[bytes], log: IO[bytes], base_url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with httpx2.Client(base_url=base_url, timeout=1.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log.seek(0)
                output = log.read().decode(errors="replace")
                raise RuntimeError(f"devplace server exited with {proc.returncode} during startup:\n{output}")
            try:
                if client.get("/healthz").status_code == 200:
                    return
            except httpx2.TransportError:
                pass
            time.sleep(0.05)  # polling a child process's startup, bounded by `timeout`
    raise RuntimeError(f"devplace server at {base_url} did not become healthy within {timeout} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate exactly this child, then kill it if it does not exit."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.asynccontextmanager
async def remote_backend(directory: Path, clock: FakeClock) -> AsyncIterator[Store]:
    """The store contract's `remote` backend: a RemoteStore against a real uvicorn serving a fresh MemoryStore.

    `directory` is unused (the backing store is in memory); the backing store and the client share `clock`.
    """
    backing = MemoryStore(clock=clock)
    try:
        async with serve_app(create_app(backing, fleet_api=False)) as base_url:
            remote = RemoteStore(base_url, clock=clock)
            try:
                yield remote
            finally:
                await remote.close()
    finally:
        await backing.close()
