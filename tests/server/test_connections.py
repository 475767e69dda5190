"""Connection limits (`server.connections`) against real uvicorn on loopback: a request whose headers or body do not
arrive in time is closed (a late body answered 408 first when nothing was answered yet), one address holds at most
`per_client` connections, and requests that arrive in time, a long watch included, are untouched.

The timeouts here are short (0.3 s) so the tests are quick; each test waits for what the server does (a bound, not an
expectation of when) and asserts what the client received, never how long it took."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.server._app import create_app, running
from devplace.server._authn import TlsFiles
from devplace.server._connections import ConnectionLimits
from devplace.store import MemoryStore
from tests.server.certificates import Pki
from tests.servers import spawn_server

BOUND = 10.0  # seconds any wait for the server may take before the test fails
SHORT = 0.3
GET = b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"


@contextlib.asynccontextmanager
async def serving(memory_store: MemoryStore, clock: FakeClock, **limits: Any) -> AsyncIterator[tuple[str, int]]:
    app = create_app(memory_store, fleet_api=False, clock=clock)
    async with running(app, shutdown_timeout=0, connections=ConnectionLimits(**limits)) as url:
        yield url, int(url.rsplit(":", 1)[1])


async def until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (EOF, or a reset after what arrived)."""
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := await asyncio.wait_for(reader.read(1 << 16), BOUND):
            received += chunk
    return received


def response(received: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


# -- headers ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answered_first", "sent"),
    [(False, b""), (False, b"GET /healthz HTTP/1.1\r\nHost: te"), (True, b"GET /healthz HTTP/1.1\r\nHo")],
    ids=["nothing", "half-the-headers", "a-request-answered-then-half-the-next"],
)
async def test_a_connection_whose_request_headers_do_not_arrive_in_time_is_closed(
    memory_store: MemoryStore, clock: FakeClock, answered_first: bool, sent: bytes
) -> None:
    async with serving(memory_store, clock, header_timeout=SHORT) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            if answered_first:  # a kept-alive connection: its next request's first bytes start the bound
                writer.write(GET)
                status, _, body = response(await asyncio.wait_for(reader.readuntil(b"ok"), BOUND))
                assert (status, body) == (200, b"ok")
            writer.write(sent)
            await writer.drain()
            assert await until_closed(reader) == b""  # nothing more is sent: the server ends it, answering nothing
        finally:
            writer.close()


async def test_over_tls_a_connection_whose_headers_do_not_arrive_in_time_is_closed_too(
    memory_store: MemoryStore, clock: FakeClock, tmp_path: Path
) -> None:
    pki = Pki.create(tmp_path / "pki")
    server = pki.issue("server", "127.0.0.1", server=True)
    tls = TlsFiles(str(server.cert), str(server.key))
    app = create_app(memory_store, fleet_api=False, clock=clock)
    async with running(app, shutdown_timeout=0, tls=tls, connections=ConnectionLimits(header_timeout=SHORT)) as url:
        context = ssl.create_default_context(cafile=str(pki.ca.cert))
        reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]), ssl=context)
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHo")
            await writer.drain()
            assert await until_closed(reader) == b""
        finally:
            writer.close()


# -- bodies -----------------------------------------------------------------------------------------------------------


def post(length: int) -> bytes:
    return (
        f"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


async def test_a_body_that_stops_arriving_is_answered_408_and_closed(
    memory_store: MemoryStore, clock: FakeClock
) -> None:
    async with serving(memory_store, clock, body_idle_timeout=SHORT, body_timeout=BOUND) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(post(100) + b'{"apiVersion":')  # and then nothing
            await writer.drain()
            received = await until_closed(reader)
        finally:
            writer.close()
    status, headers, body = response(received)
    assert (status, headers["connection"]) == (408, "close")
    assert json.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the request body was not received in time; the connection is closed",
        "reason": "Timeout",
        "code": 408,
    }
    assert (await memory_store.list("ConfigMap", "default")).items == []  # nothing was written


async def test_a_trickled_body_is_answered_408_when_the_whole_body_is_late(
    memory_store: MemoryStore, clock: FakeClock
) -> None:
    """One byte at a time, each well within the idle bound: the total bound ends it."""
    async with serving(memory_store, clock, body_idle_timeout=BOUND, body_timeout=SHORT) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)

        async def trickle() -> None:
            writer.write(post(10_000))
            for _ in range(int(BOUND / 0.02)):
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(0.02)  # the client's pace, not a wait for the server

        trickling = asyncio.create_task(trickle())
        try:
            received = await until_closed(reader)
        finally:
            trickling.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await trickling
            writer.close()
    status, _, body = response(received)
    assert (status, json.loads(body)["reason"]) == (408, "Timeout")


async def test_a_body_still_trickling_after_its_answer_has_its_connection_cut(
    memory_store: MemoryStore, clock: FakeClock
) -> None:
    """A declared body over the size limit is answered 413 at once; a client that goes on sending it slowly is cut
    at the body bound (uvicorn alone would hold it: each byte stops its keep-alive timer)."""
    async with serving(memory_store, clock, body_idle_timeout=BOUND, body_timeout=SHORT) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)

        async def trickle() -> None:
            writer.write(post(50_000_000))
            for _ in range(int(BOUND / 0.02)):
                writer.write(b"x")
                await writer.drain()
                await asyncio.sleep(0.02)

        trickling = asyncio.create_task(trickle())
        try:
            received = await until_closed(reader)
        finally:
            trickling.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await trickling
            writer.close()
    status, _, body = response(received)
    assert (status, json.loads(body)["reason"]) == (413, "RequestEntityTooLarge")


# -- what arrives in time is untouched --------------------------------------------------------------------------------


async def test_requests_that_arrive_in_time_and_a_watch_longer_than_every_bound_are_served(
    memory_store: MemoryStore, clock: FakeClock
) -> None:
    limits = {"header_timeout": SHORT, "body_idle_timeout": SHORT, "body_timeout": SHORT}
    async with (
        serving(memory_store, clock, **limits) as (url, _),
        httpx2.AsyncClient(base_url=url, timeout=BOUND) as client,
    ):
        path = "/api/v1/namespaces/default/configmaps"
        request = client.build_request("GET", path, params={"watch": "1"}, headers={"Accept": "application/x-ndjson"})
        watch = await client.send(request, stream=True)
        try:
            await asyncio.sleep(3 * SHORT)  # the watch outlives every bound: they are for requests, not answers
            created = await client.post(path, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
            assert created.status_code == 201
            lines = watch.aiter_lines()
            event = json.loads(await asyncio.wait_for(anext(lines), BOUND))
            assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "a")
        finally:
            await watch.aclose()
        for _ in range(3):  # kept-alive connections between requests are uvicorn's keep-alive's, as before
            assert (await client.get("/healthz")).text == "ok"


# -- connections per address ------------------------------------------------------------------------------------------


async def test_one_address_holds_at_most_its_connection_limit_and_a_closed_one_frees_its_place(
    memory_store: MemoryStore, clock: FakeClock
) -> None:
    async with serving(memory_store, clock, per_client=2) as (_, port):
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)  # accepted by the kernel, then reset
            try:
                assert await until_closed(reader) == b""
            finally:
                writer.close()
            for held_reader, held_writer in held:  # the two within the limit are served
                held_writer.write(GET)
                status, _, body = response(await asyncio.wait_for(held_reader.readuntil(b"ok"), BOUND))
                assert (status, body) == (200, b"ok")
            held.pop()[1].close()
            for _ in range(int(BOUND * 100)):  # the server sees the close a moment later (a bound only)
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(GET)
                with contextlib.suppress(ConnectionResetError, asyncio.IncompleteReadError):
                    answer = await asyncio.wait_for(reader.readuntil(b"ok"), BOUND)
                    writer.close()
                    break
                writer.close()
                await asyncio.sleep(0.01)
            assert response(answer)[0] == 200
        finally:
            for _, held_writer in held:
                held_writer.close()


# -- configuration ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("header_timeout", 0, "must be a positive number of seconds or None, not 0"),
        ("body_idle_timeout", -1.0, "must be a positive number of seconds or None, not -1.0"),
        ("body_timeout", "60", "must be a positive number of seconds or None, not '60'"),
        ("per_client", 0, "must be at least 1, not 0"),
        ("per_client", 2.5, "must be a whole number or None, not 2.5"),
        ("per_client", True, "must be a whole number or None, not True"),
    ],
)
def test_connection_limits_refuse_a_bad_value_naming_the_field(field: str, value: Any, reason: str) -> None:
    with pytest.raises(errors.Invalid) as refused:
        ConnectionLimits(**{field: value})
    assert refused.value.message == f"{field}: {reason}"


def test_the_server_command_takes_the_connection_limits() -> None:
    args = ("--header-timeout", "0.3", "--body-idle-timeout", "5", "--body-timeout", "5")
    with spawn_server("memory", extra_args=(*args, "--max-connections-per-client", "64")) as url:
        port = int(url.rsplit(":", 1)[1])

        async def half_headers() -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(b"GET /healthz HTTP/1.1\r\nHo")
                await writer.drain()
                return await until_closed(reader)
            finally:
                writer.close()

        assert asyncio.run(half_headers()) == b""
        assert httpx2.get(f"{url}/healthz", timeout=BOUND).text == "ok"


def test_a_kept_alive_connection_may_idle_as_long_as_kube_apiserver_lets_it_and_uvicorn_alone_keeps_its_own() -> None:
    """A server that closes an idle connection first races the client's next request on it (a reset the client cannot
    tell from a failure): idle connections are kept 90 s, as kube-apiserver keeps them, not uvicorn's 5."""
    import uvicorn

    from devplace.server._authn import uvicorn_options

    async def app(scope: Any, receive: Any, send: Any) -> None:
        return None

    assert uvicorn.Config(app, **uvicorn_options(None, None)).timeout_keep_alive == 90
    assert uvicorn.Config(app, **uvicorn_options(None, None, None)).timeout_keep_alive == 5  # bench/hostile.py's
