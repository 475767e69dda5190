"""Limits: open watches per client (429), server-side list pages (continue tokens the remote store follows), and a
watch whose client stopped reading: dropped after the stall bound, and end to end (a `devplace server` process on
SQLite, 10,000 events written past a client that reads nothing) bounded in memory, with 410 when it reads again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from devplace import errors
from devplace.clocks import FakeClock, SystemClock
from devplace.server import _lists as lists
from devplace.server._app import create_app
from devplace.server._authn import Auth, Tokens
from devplace.store import MemoryStore
from devplace.store._remote import RemoteStore
from devplace.store._sqlite import SqliteStore
from tests.servers import serve_app

BOUND = 10.0
NDJSON = {"Accept": "application/x-ndjson"}


def config_map(name: str, size: int = 10, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"blob": "x" * size}}


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[MemoryStore]:
    backing = MemoryStore(clock=clock)
    yield backing
    await backing.close()


# -- watches per client -----------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def watching(client: httpx2.AsyncClient, path: str = "/api/v1/nodes", **headers: str) -> AsyncIterator[int]:
    """An open watch stream (yields its status code; the stream is closed on exit)."""
    request = client.build_request("GET", path, params={"watch": "1"}, headers={**NDJSON, **headers})
    response = await client.send(request, stream=True)
    try:
        yield response.status_code
    finally:
        await response.aclose()


async def test_a_client_over_its_watch_limit_gets_429_and_a_closed_watch_frees_its_place(
    store: MemoryStore, clock: FakeClock
) -> None:
    app = create_app(store, fleet_api=False, clock=clock, max_watches_per_client=2)
    async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=BOUND) as client:
        async with watching(client) as first, watching(client, "/store/watch") as second:
            assert (first, second) == (200, 200)
            refused = await client.get("/api/v1/pods", params={"watch": "true"}, headers=NDJSON)
            assert refused.status_code == 429
            status = refused.json()
            assert (status["kind"], status["reason"], status["code"]) == ("Status", "TooManyRequests", 429)
            assert status["details"]["retryAfterSeconds"] == 1
            assert refused.headers["Retry-After"] == "1"
            assert "address 127.0.0.1" in status["message"]
            assert (await client.get("/api/v1/pods")).status_code == 200  # lists are not watches
        for _ in range(int(BOUND * 100)):  # the server sees the client go a moment later (a bound only)
            async with watching(client) as again:
                if again == 200:
                    break
            await asyncio.sleep(0.01)
        assert again == 200


async def test_watches_count_per_user_when_clients_authenticate(store: MemoryStore, clock: FakeClock) -> None:
    tokens = Tokens.parse("a-token,alice,1,reader\nb-token,bob,2,reader\n")
    app = create_app(store, fleet_api=False, clock=clock, auth=Auth(tokens), max_watches_per_client=1)
    async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=BOUND) as client:
        alice = {"Authorization": "Bearer a-token"}
        async with watching(client, **alice) as first:
            assert first == 200
            second = await client.get("/api/v1/nodes", params={"watch": "1"}, headers={**NDJSON, **alice})
            assert second.status_code == 429
            assert "user alice" in second.json()["message"]
            async with watching(client, Authorization="Bearer b-token") as bobs:
                assert bobs == 200


async def test_the_remote_store_raises_a_refused_watch_as_unavailable(store: MemoryStore, clock: FakeClock) -> None:
    app = create_app(store, fleet_api=False, clock=clock, max_watches_per_client=1)
    async with serve_app(app) as url:
        remote = RemoteStore(url, clock=clock)
        try:
            async with remote.watch("Node", since=0):
                with pytest.raises(errors.TooManyRequests, match="too many open watches"):
                    async with remote.watch("Pod", since=0):
                        pass
        finally:
            await remote.close()


# -- list pages -------------------------------------------------------------------------------------------------------


async def test_the_server_pages_a_list_that_asks_for_no_limit_and_the_remote_store_follows(
    store: MemoryStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lists, "MAX_LIST_ITEMS", 3)
    for i in range(7):
        await store.create(config_map(f"cm-{i}", app="x" if i % 2 else "y"))
    app = create_app(store, fleet_api=False, clock=clock)
    async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=BOUND) as client:
        path = "/api/v1/namespaces/default/configmaps"
        first = (await client.get(path)).json()
        assert [c["metadata"]["name"] for c in first["items"]] == ["cm-0", "cm-1", "cm-2"]
        assert first["metadata"]["remainingItemCount"] == 4
        assert len((await client.get(path, params={"limit": "100"})).json()["items"]) == 3
        assert len((await client.get(path, params={"limit": "0"})).json()["items"]) == 3
        assert len((await client.get(path, params={"limit": "2"})).json()["items"]) == 2
        rest = (await client.get(path, params={"continue": first["metadata"]["continue"]})).json()
        assert [c["metadata"]["name"] for c in rest["items"]] == ["cm-3", "cm-4", "cm-5"]
        assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        remote = RemoteStore(url, clock=clock)
        try:
            listed = await remote.list("ConfigMap", "default")
            assert [c["metadata"]["name"] for c in listed.items] == [f"cm-{i}" for i in range(7)]
            assert listed.revision == int(first["metadata"]["resourceVersion"])
            selected = await remote.list("ConfigMap", None, "app=x")
            assert [c["metadata"]["name"] for c in selected.items] == ["cm-1", "cm-3", "cm-5"]
        finally:
            await remote.close()


async def test_the_remote_store_lists_again_when_its_continue_token_expires_between_pages(
    store: MemoryStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lists, "MAX_LIST_ITEMS", 2)
    for i in range(3):
        await store.create(config_map(f"cm-{i}"))
    app = create_app(store, fleet_api=False, clock=clock)
    async with serve_app(app) as url:
        remote = RemoteStore(url, clock=clock)
        pages: list[dict[str, str] | None] = []
        call = remote._call

        async def first_page_then_compact(method: str, path: str, **kwargs: Any) -> Any:
            pages.append(kwargs.get("params"))
            body = await call(method, path, **kwargs)
            if len(pages) == 1:  # history moves past the first page's revision before the second is asked for
                await store.create(config_map("cm-3"))
                await store.compact(await store.revision())
            return body

        monkeypatch.setattr(remote, "_call", first_page_then_compact)
        try:
            listed = await remote.list("ConfigMap", "default")
        finally:
            await remote.close()
    assert [c["metadata"]["name"] for c in listed.items] == ["cm-0", "cm-1", "cm-2", "cm-3"]
    assert [bool(p and p.get("continue")) for p in pages] == [False, True, False, True]


# -- a client that stops reading --------------------------------------------------------------------------------------


def _raw_watch(port: int, path: str, token: str | None = None) -> socket.socket:
    """A watch request on a socket with a tiny receive buffer, nothing read after the request."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/x-ndjson\r\n{auth}\r\n"
    sock.sendall(request.encode())
    return sock


async def test_a_watch_whose_client_stops_reading_is_dropped_and_frees_its_place(
    store: MemoryStore, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="devplace.server._limits")
    app = create_app(store, fleet_api=False, clock=clock, max_watches_per_client=1, watch_stall_timeout=0.2)
    await store.create(config_map("big"))
    async with serve_app(app) as url:
        port = int(url.rsplit(":", 1)[1])
        sock = _raw_watch(port, "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=1")
        try:
            for i in range(200):  # ~10 MB of events: more than any socket buffers hold
                current = await store.get("ConfigMap", "big", "default")
                current["data"] = {"blob": str(i) * 50_000}
                await store.update(current)
            for _ in range(int(BOUND * 100)):  # until the stall bound has passed (a bound, not an expectation)
                if any("dropping a watch" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.01)
            assert any("has read nothing for 0.2 s" in r.getMessage() for r in caplog.records)
            sock.settimeout(BOUND)
            received = 0
            with contextlib.suppress(ConnectionResetError):  # the server resets it: what was queued may be lost
                while chunk := await asyncio.to_thread(sock.recv, 1 << 16):  # what arrived, then the connection's end
                    received += len(chunk)
            assert 0 < received < 10_000_000
        finally:
            sock.close()
        async with httpx2.AsyncClient(base_url=url, timeout=BOUND) as client, watching(client) as again:
            assert again == 200


_TCP_STATES = {1: "ESTABLISHED", 7: "CLOSE", 8: "CLOSE_WAIT"}


def _tcp_state(sock: socket.socket) -> str:
    """The kernel's TCP state of `sock` (Linux `TCP_INFO`'s first byte), read without reading any data."""
    state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
    return _TCP_STATES.get(state, str(state))


async def test_a_dropped_watch_closes_its_connection_without_waiting_for_the_client_to_read(
    store: MemoryStore, clock: FakeClock
) -> None:
    """The server resets the connection of a watch it dropped at once: its queued bytes are freed, not kept until a
    client that reads nothing reads them; uvicorn has no incomplete response to complain about."""
    complaints: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: complaints.append(record.getMessage())  # type: ignore[method-assign]
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.addHandler(handler)
    app = create_app(store, fleet_api=False, clock=clock, watch_stall_timeout=0.2)
    await store.create(config_map("big"))
    try:
        async with serve_app(app) as url:
            sock = _raw_watch(
                int(url.rsplit(":", 1)[1]), "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=1"
            )
            try:
                for i in range(200):  # ~10 MB of events: more than any socket buffers hold
                    current = await store.get("ConfigMap", "big", "default")
                    current["data"] = {"blob": str(i) * 50_000}
                    await store.update(current)
                for _ in range(int(BOUND * 100)):  # until the server has closed it (a bound, not an expectation)
                    if _tcp_state(sock) != "ESTABLISHED":
                        break
                    await asyncio.sleep(0.01)
                assert _tcp_state(sock) == "CLOSE"  # reset by the server, though this client read nothing
            finally:
                sock.close()
    finally:
        uvicorn_log.removeHandler(handler)
    assert not [c for c in complaints if "without completing response" in c]


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _headers(sock: socket.socket) -> bytes:
    """Read a response's status line and headers (the watch is registered then); returns what came after them."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(4096)
        assert more, "the server closed the connection"
        data += more
    head, rest = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    return rest


def _chunked_lines(sock: socket.socket, data: bytes) -> list[dict[str, Any]]:
    """The NDJSON lines of a chunked body (`data`: what was already read of it) up to its last chunk."""
    body = b""
    while True:
        while b"\r\n" not in data:
            more = sock.recv(1 << 16)
            assert more, "the connection closed mid-chunk"
            data += more
        size_line, data = data.split(b"\r\n", 1)
        size = int(size_line, 16)
        while len(data) < size + 2:
            more = sock.recv(1 << 20)
            assert more, "the connection closed mid-chunk"
            data += more
        body += data[:size]
        data = data[size + 2 :]
        if size == 0:
            return [json.loads(line) for line in body.splitlines() if line.strip()]


@pytest.mark.slow
def test_a_client_that_reads_nothing_while_10000_events_pass_costs_bounded_memory_then_gets_410(
    tmp_path: Path,
) -> None:
    database = tmp_path / "store.db"
    kubeconfig = tmp_path / "kubeconfig"
    command = [
        sys.executable, "-m", "devplace.cli", "server", "--store", f"sqlite:///{database}", "--port", "0",
        "--write-kubeconfig", str(kubeconfig), "--watch-stall-timeout", "3600", "--log-level", "warning",
    ]  # fmt: skip
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    try:
        for _ in range(2000):  # the child's startup (a bound only)
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            if kubeconfig.exists():
                break
            time.sleep(0.01)
        url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        port = int(url.rsplit(":", 1)[1])

        async def write(count: int) -> int:
            writer = SqliteStore(str(database), clock=SystemClock())  # another process writing the server's file
            try:
                obj = await writer.create(config_map("churn"))
                for i in range(count):
                    obj["data"] = {"blob": f"{i:06d}" * 3_000}  # ~18 KB an event
                    obj = await writer.update(obj)
                return int(obj["metadata"]["resourceVersion"])
            finally:
                await writer.close()

        sock = _raw_watch(port, "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0")
        try:
            sock.settimeout(60)
            rest = _headers(sock)
            before = _rss(server.pid)
            head = asyncio.run(write(10_000))
            after = _rss(server.pid)
            httpx2.post(f"{url}/store/compact", json={"revision": head}, timeout=BOUND).raise_for_status()
            events = _chunked_lines(sock, rest)
        finally:
            sock.close()
        print(f"server RSS {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB over ~180 MB of events")
        assert after - before < 96 * 2**20, (before, after)
        assert events[-1]["type"] == "ERROR"
        assert events[-1]["object"]["code"] == 410
        assert len(events) < 10_000  # most of them were never queued for this client: it relists instead
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
