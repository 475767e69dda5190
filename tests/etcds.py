"""Real etcd servers for tests: Debian's `etcd` binary on free loopback ports with a temporary data directory.

    with running_etcd(directory) as server: ...     # a child process, stopped (terminate, then kill) by its PID
    server = shared_etcd()                          # one per test session, started on first use
    async with etcd_backend(tmp_path, clock) as store: ...   # the contract's `etcd` backend (tests/store/conftest.py)

`shared_etcd` serves every test that needs an etcd but not its own: each store opened by `etcd_backend` lives under a
fresh key prefix and counts its revisions from the etcd revision it started at, so it starts empty at revision 0 as
the contract says, and its keys are deleted when it closes. The shared server is stopped by `stop_shared_etcd` (a
session fixture calls it) or, as a backstop, when the interpreter exits. Without the binary, callers skip with
`ABSENT` (`make test` installs it: the Makefile's `etcd` target).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import grpc
import pytest

from devplace.clocks import FakeClock
from devplace.store import Store
from devplace.store._etcd import EtcdStore, parse_url
from devplace.store.etcdserverpb import rpc_pb2 as pb
from devplace.store.etcdserverpb import rpc_pb2_grpc as pb_grpc
from tests.servers import free_port

__all__ = [
    "ABSENT",
    "BINARY",
    "EtcdServer",
    "Tls",
    "etcd_backend",
    "head_revision",
    "make_tls",
    "running_etcd",
    "shared_etcd",
    "stop_shared_etcd",
    "wipe",
]

BINARY = shutil.which("etcd")
ABSENT = "Debian's etcd binary is not installed (`make test` installs the etcd-server package)"
# Room for the contract's largest object (1.5 MiB) and the transaction around it; etcd's default is exactly 1.5 MiB.
MAX_REQUEST_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Tls:
    """PEM files for an etcd that serves TLS and requires client certificates: a CA and what it signed."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_tls(directory: Path) -> Tls:
    """A throwaway CA, a server certificate for 127.0.0.1 and localhost, and a client certificate (openssl CLI)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is not installed")
    tls = Tls(
        *(directory / name for name in ("ca.pem", "server.pem", "server-key.pem", "client.pem", "client-key.pem"))
    )
    ca_key = directory / "ca-key.pem"

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, cwd=directory)

    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
        "-subj", "/CN=devplace test CA", "-keyout", str(ca_key), "-out", str(tls.ca))  # fmt: skip
    for cert, key, subject, extension in [
        (tls.server_cert, tls.server_key, "/CN=etcd", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
        (tls.client_cert, tls.client_key, "/CN=devplace", "extendedKeyUsage=clientAuth"),
    ]:
        request = directory / "request.csr"
        run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", subject,
            "-keyout", str(key), "-out", str(request))  # fmt: skip
        extfile = directory / "ext.cnf"
        extfile.write_text(extension + "\n")
        run("x509", "-req", "-in", str(request), "-CA", str(tls.ca), "-CAkey", str(ca_key), "-CAcreateserial",
            "-days", "2", "-extfile", str(extfile), "-out", str(cert))  # fmt: skip
    return tls


@dataclass
class EtcdServer:
    """A running etcd: its client endpoint (`host:port`), its data directory, its process, its TLS files if any."""

    endpoint: str
    data_dir: Path
    process: subprocess.Popen[bytes]
    tls: Tls | None = None

    @property
    def url(self) -> str:
        """The store URL of this server: with TLS, its query names the files; without, a key prefix path may follow."""
        if self.tls is None:
            return f"etcd://{self.endpoint}"
        return f"etcd://{self.endpoint}?cacert={self.tls.ca}&cert={self.tls.client_cert}&key={self.tls.client_key}"


@contextlib.contextmanager
def running_etcd(
    directory: Path,
    *,
    extra_args: tuple[str, ...] = (),
    tls: Tls | None = None,
    startup_timeout: float = 30.0,
    client_port: int | None = None,
    peer_port: int | None = None,
) -> Iterator[EtcdServer]:
    """Start etcd with its data under `directory` on free loopback ports; stop it by PID on exit.

    With `tls`, clients must speak TLS and show a certificate the CA signed. Fixed ports let a test start the same
    member again on the same data after stopping it.
    """
    if BINARY is None:
        pytest.skip(ABSENT)
    client = client_port or free_port()
    peer = peer_port or free_port()
    client_url = f"{'https' if tls else 'http'}://127.0.0.1:{client}"
    peer_url = f"http://127.0.0.1:{peer}"
    cmd = [
        BINARY,
        "--name=devplace-test",
        f"--data-dir={directory}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=devplace-test={peer_url}",
        f"--max-request-bytes={MAX_REQUEST_BYTES}",
        "--logger=zap",
        "--log-outputs=stderr",
        "--log-level=warn",
        *extra_args,
    ]
    if tls is not None:
        cmd += [
            f"--cert-file={tls.server_cert}",
            f"--key-file={tls.server_key}",
            f"--trusted-ca-file={tls.ca}",
            "--client-cert-auth",
        ]
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: a chatty server can never block on it
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        server = EtcdServer(f"127.0.0.1:{client}", directory, process, tls)
        try:
            _wait_healthy(server, log, startup_timeout)
            yield server
        finally:
            stop(server)


def _wait_healthy(server: EtcdServer, log: IO[bytes], timeout: float) -> None:
    """Poll etcd's /health (over TLS with the client certificate) until it answers true."""
    context = None
    scheme = "http"
    if server.tls is not None:
        scheme = "https"
        context = ssl.create_default_context(cafile=str(server.tls.ca))
        context.load_cert_chain(server.tls.client_cert, server.tls.client_key)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            log.seek(0)
            output = log.read().decode(errors="replace")
            raise RuntimeError(f"etcd exited with {server.process.returncode} during startup:\n{output}")
        try:
            with urllib.request.urlopen(f"{scheme}://{server.endpoint}/health", timeout=1, context=context) as reply:
                if b'"true"' in reply.read():
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)  # polling a child process's startup, bounded by `timeout`
    raise RuntimeError(f"etcd at {server.endpoint} did not become healthy within {timeout} s")


def stop(server: EtcdServer) -> None:
    """Terminate exactly this etcd process, then kill it if it does not exit."""
    process = server.process
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


_shared: contextlib.ExitStack | None = None
_shared_server: EtcdServer | None = None


def shared_etcd() -> EtcdServer:
    """The session's etcd, started on first use (skips the test when the binary is absent)."""
    global _shared, _shared_server
    if _shared_server is not None and _shared_server.process.poll() is None:
        return _shared_server
    if BINARY is None:
        pytest.skip(ABSENT)
    stack = contextlib.ExitStack()
    directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dp-etcd-")))
    _shared_server = stack.enter_context(running_etcd(directory))
    _shared = stack
    return _shared_server


def stop_shared_etcd() -> None:
    """Stop the session's etcd (by PID) and remove its data, if it was started."""
    global _shared, _shared_server
    if _shared is not None:
        stack, _shared, _shared_server = _shared, None, None
        stack.close()


atexit.register(stop_shared_etcd)


async def head_revision(endpoint: str) -> int:
    """etcd's current revision, read with a bare call (no store involved)."""
    async with grpc.aio.insecure_channel(endpoint) as channel:
        reply = await pb_grpc.KVStub(channel).Range(pb.RangeRequest(key=b"/"), timeout=10)
        revision: int = reply.header.revision
        return revision


async def wipe(endpoint: str, prefix: bytes) -> None:
    """Delete every key under `prefix`, with a bare call."""
    async with grpc.aio.insecure_channel(endpoint) as channel:
        end = prefix[:-1] + bytes([prefix[-1] + 1])
        await pb_grpc.KVStub(channel).DeleteRange(pb.DeleteRangeRequest(key=prefix, range_end=end), timeout=10)


_prefixes = itertools.count(1)


@contextlib.asynccontextmanager
async def etcd_backend(directory: Path, clock: FakeClock) -> AsyncIterator[Store]:
    """The contract's `etcd` backend: a fresh, empty store on the shared etcd (see the module docstring).

    `directory` is unused (etcd keeps its own data).
    """
    server = shared_etcd()
    prefix = f"/devplace-test-{os.getpid()}-{next(_prefixes)}"
    options = parse_url(f"{server.url}{prefix}")
    store = EtcdStore(options, clock=clock, revision_base=await head_revision(server.endpoint))
    try:
        yield store
    finally:
        await store.close()
        await wipe(server.endpoint, prefix.encode() + b"/")
