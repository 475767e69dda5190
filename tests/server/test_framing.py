"""Requests refused for their framing before any route, authentication or body reader runs (issue 20, item 4): both
Content-Length and chunked Transfer-Encoding (400, connection closed), more query parameters than the server takes
(400 naming the query), a request head over the server's limit (431). Raw bytes on a socket to a real uvicorn on
127.0.0.1, since HTTP clients will not send most of these; each refusal is a `Status` and stores nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devplace.server import _framing as framing
from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.servers import serve_app

PODS = "/api/v1/namespaces/default/pods"
BOUND = 10.0  # seconds any exchange may take before the test gives up (a bound, not an assertion)
POD = json.dumps(
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "m", "image": "x"}]},
    }
).encode()


@pytest.fixture
async def address(memory_store: MemoryStore) -> AsyncIterator[tuple[str, int]]:
    async with serve_app(create_app(memory_store, fleet_api=False)) as url:
        host, _, port = url.removeprefix("http://").rpartition(":")
        yield host, int(port)


class Exchange:
    """One connection: send raw bytes, read one response (status, headers, body), and whether the server closed."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def response(self, request: bytes) -> tuple[int, dict[str, str], bytes]:
        self.writer.write(request)
        await self.writer.drain()
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), BOUND)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines if line)}
        if headers.get("transfer-encoding") == "chunked":
            body = await asyncio.wait_for(self._chunks(), BOUND)
        else:
            body = await asyncio.wait_for(self.reader.readexactly(int(headers.get("content-length", "0"))), BOUND)
        return int(status_line.split()[1]), headers, body

    async def _chunks(self) -> bytes:
        body = b""
        while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
            body += (await self.reader.readexactly(size + 2))[:-2]
        await self.reader.readuntil(b"\r\n")  # the (empty) trailer section's end
        return body

    async def closed(self) -> bool:
        return await asyncio.wait_for(self.reader.read(1), BOUND) == b""


async def exchange(address: tuple[str, int]) -> Exchange:
    reader, writer = await asyncio.open_connection(*address)
    return Exchange(reader, writer)


def status_of(code: int, body: bytes, reason: str) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(body)
    assert (status["kind"], status["status"], status["code"], status["reason"]) == ("Status", "Failure", code, reason)
    return status


def chunked(body: bytes) -> bytes:
    return f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"


async def test_a_request_with_content_length_and_chunked_encoding_is_400_and_the_connection_closes(
    address: tuple[str, int], memory_store: MemoryStore
) -> None:
    """Two framings in one request are how requests are smuggled past a proxy that reads the other one (RFC 9112
    6.1): the server answers neither, and closes, since it cannot know where the next request would start."""
    conn = await exchange(address)
    head = f"POST {PODS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(POD)}\r\n"
    code, headers, body = await conn.response(head.encode() + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(POD))
    assert code == 400
    status = status_of(400, body, "BadRequest")
    assert [c["field"] for c in status["details"]["causes"]] == ["Transfer-Encoding"]
    assert "Content-Length" in status["message"]
    assert headers["connection"] == "close"
    assert await conn.closed()
    assert await memory_store.revision() == 0


async def test_chunked_encoding_alone_is_read() -> None:
    """The rule refuses the pair, not chunked bodies (the check reads only headers)."""
    assert framing.framing_problem([(b"transfer-encoding", b"chunked")], b"", b"GET", b"/") is None
    problem = framing.framing_problem(
        [(b"content-length", b"5"), (b"transfer-encoding", b"chunked")], b"", b"POST", b"/api/v1/nodes"
    )
    assert problem is not None
    assert problem[0] == 400


async def test_more_query_parameters_than_the_server_takes_is_400_naming_the_query(
    address: tuple[str, int],
) -> None:
    conn = await exchange(address)
    most = "&".join(f"p{i}=1" for i in range(framing.MAX_QUERY_PARAMETERS))
    code, _, _ = await conn.response(f"GET /api/v1/nodes?{most} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert code == 200
    code, _, body = await conn.response(f"GET /api/v1/nodes?{most}&one=more HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    status = status_of(400, body, "BadRequest")
    assert code == 400
    assert [c["field"] for c in status["details"]["causes"]] == ["query"]
    assert f"{framing.MAX_QUERY_PARAMETERS + 1} query parameters" in status["message"]


async def test_a_request_head_over_the_limit_is_431_even_when_it_arrives_whole(address: tuple[str, int]) -> None:
    """uvicorn (h11) bounds only a head that is still arriving; one that arrives in one read passed unchecked."""
    conn = await exchange(address)
    fits = b"x" * (framing.MAX_HEADER_BYTES // 2)
    code, _, _ = await conn.response(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + fits + b"\r\n\r\n")
    assert code == 200
    over = b"x" * (framing.MAX_HEADER_BYTES + 1024)
    assert len(over) < framing.H11_MAX_INCOMPLETE_EVENT_SIZE  # so h11 never cuts it first, however it arrives
    code, _, body = await conn.response(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + over + b"\r\n\r\n")
    assert code == 431
    status = status_of(431, body, "RequestHeaderFieldsTooLarge")
    assert str(framing.MAX_HEADER_BYTES) in status["message"]
