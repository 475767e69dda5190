"""The store's HTTP/1.1 client, against scripted loopback servers: framing, keep-alive, failures."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace.store import _exchanges as exchanges
from devplace.store._exchanges import ExchangeError, Exchanges

Answer = Callable[[bytes, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Scripted:
    """A loopback server that answers each request on a connection with the next answer of its script."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.requests: list[bytes] = []
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + (await reader.readexactly(length) if length else b"")
                self.requests.append(request)
                await self.answers.pop(0)(request, reader, writer)
                if writer.is_closing():
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def send(raw: bytes, *, close: bool = False) -> Answer:
    async def answer(request: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(raw)
        await writer.drain()
        if close:
            writer.close()

    return answer


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[list[Answer]], Awaitable[tuple[Scripted, str]]]]:
    servers: list[asyncio.Server] = []

    async def start(answers: list[Answer]) -> tuple[Scripted, str]:
        scripted = Scripted(answers)
        server = await asyncio.start_server(scripted.handle, "127.0.0.1", 0)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        return scripted, f"http://127.0.0.1:{port}"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def test_a_request_sends_its_host_headers_query_and_body_and_reads_a_content_length_answer(serve) -> None:
    server, url = await serve([send(b'HTTP/1.1 201 Created\r\nContent-Length: 9\r\nX-A: 1\r\n\r\n{"a": 10}')])
    client = Exchanges(url + "/base", headers={"Accept": "application/json"})
    reply = await client.request("POST", "/things", params={"q": "a b/c"}, content=b"{}", headers={"X-B": "2"})
    await client.aclose()
    assert (reply.status_code, reply.json(), reply.headers["x-a"]) == (201, {"a": 10}, "1")
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /base/things?q=a%20b%2Fc HTTP/1.1"
    assert sorted(lines[1:]) == sorted(
        [f"host: {url.removeprefix('http://')}", "accept: application/json", "x-b: 2", "content-length: 2"]
    )
    assert body == b"{}"


async def test_chunked_answers_are_joined_and_interim_answers_skipped(serve) -> None:
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    raw += b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"
    _, url = await serve([send(raw)])
    client = Exchanges(url)
    reply = await client.request("GET", "/")
    await client.aclose()
    assert (reply.status_code, reply.content) == (200, b"abcde")


async def test_a_connection_is_kept_alive_between_requests_unless_the_server_says_close(serve) -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    closing = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    server, url = await serve([send(ok), send(ok), send(closing, close=True), send(ok)])
    client = Exchanges(url)
    for _ in range(4):
        assert (await client.request("GET", "/")).content == b"ok"
    await client.aclose()
    assert server.connections == 2


async def test_an_answer_read_to_the_close_is_whole_and_its_connection_not_reused(serve) -> None:
    server, url = await serve([send(b"HTTP/1.1 200 OK\r\n\r\nall of it", close=True), send(b"HTTP/1.1 204 No\r\n\r\n")])
    client = Exchanges(url)
    assert (await client.request("GET", "/")).content == b"all of it"
    assert (await client.request("GET", "/")).status_code == 204
    await client.aclose()
    assert server.connections == 2


async def test_a_kept_alive_connection_the_server_closed_unread_is_replaced_and_the_request_sent_once_more(
    serve,
) -> None:
    async def close_unanswered(request: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()  # as a server closing an idle keep-alive connection as the request arrives

    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    server, url = await serve([send(ok), close_unanswered, send(ok)])
    client = Exchanges(url)
    assert (await client.request("GET", "/")).content == b"ok"
    assert (await client.request("PUT", "/x", content=b"1")).content == b"ok"
    await client.aclose()
    assert server.connections == 2
    assert [r.split(b"\r\n")[0] for r in server.requests] == [b"GET / HTTP/1.1", b"PUT /x HTTP/1.1", b"PUT /x HTTP/1.1"]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.1 answer"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "a malformed header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "IncompleteReadError"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "a malformed chunk size"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n", "a malformed Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n", "a malformed Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n", "a malformed chunk size"),
    ],
)
async def test_an_answer_that_is_not_well_formed_http_is_an_exchange_error(serve, raw: bytes, reason: str) -> None:
    _, url = await serve([send(raw, close=True)])
    client = Exchanges(url)
    with pytest.raises(ExchangeError, match=reason):
        await client.request("GET", "/")
    await client.aclose()


async def test_a_fresh_connection_closed_before_any_answer_is_an_error_not_a_resend(serve) -> None:
    async def close_unanswered(request: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server, url = await serve([close_unanswered, send(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")])
    client = Exchanges(url)
    with pytest.raises(ExchangeError, match="closed the connection before answering"):
        await client.request("POST", "/once", content=b"{}")
    await client.aclose()
    assert len(server.requests) == 1


async def test_a_server_that_does_not_answer_in_time_is_an_exchange_error(serve) -> None:
    async def never(request: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.Event().wait()

    _, url = await serve([never])
    client = Exchanges(url, timeout=0.05)
    with pytest.raises(ExchangeError, match=r"no answer within 0\.05s"):
        await client.request("GET", "/")
    await client.aclose()


async def test_a_refused_connection_is_an_exchange_error() -> None:
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()  # the port is free again: nothing listens on it
    client = Exchanges(f"http://127.0.0.1:{port}")
    with pytest.raises(ExchangeError, match="ConnectionRefusedError"):
        await client.request("GET", "/")
    await client.aclose()


async def test_a_stream_yields_lines_across_chunks_as_they_arrive_and_its_close_drops_the_connection(serve) -> None:
    gate = asyncio.Event()

    async def trickle(request: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b'{"a":', b' 1}\n{"b": 2}\n{"c"'):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        await writer.drain()
        await gate.wait()
        writer.write(b"5\r\n: 3}\n\r\n0\r\n\r\n")
        await writer.drain()

    _, url = await serve([trickle])
    client = Exchanges(url)
    stream = await client.stream("GET", "/watch")
    lines = stream.aiter_lines()
    assert [await anext(lines), await anext(lines)] == ['{"a": 1}', '{"b": 2}']
    gate.set()
    assert [line async for line in lines] == ['{"c": 3}']
    await stream.aclose()
    await client.aclose()


async def test_a_request_line_or_header_with_a_line_break_is_refused_before_sending(serve) -> None:
    server, url = await serve([])
    client = Exchanges(url)
    with pytest.raises(ValueError, match="line break"):
        await client.request("GET", "/", headers={"X-A": "1\r\nX-Injected: 2"})
    await client.aclose()
    assert server.requests == []


def test_only_http_and_https_urls_are_taken() -> None:
    with pytest.raises(ValueError, match="not an http"):
        Exchanges("ftp://example")


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
async def test_an_answer_over_the_body_limit_is_an_exchange_error_not_memory(
    serve, monkeypatch: pytest.MonkeyPatch, framing: str
) -> None:
    monkeypatch.setattr(exchanges, "_MAX_BODY", 1000)
    body = b"x" * 1001
    raw = {
        "length": b"HTTP/1.1 200 OK\r\nContent-Length: 1001\r\n\r\n" + body,
        "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1f4\r\n"
        + body[:500]
        + b"\r\n"
        + b"1f5\r\n"
        + body[:501]
        + b"\r\n0\r\n\r\n",
        "close": b"HTTP/1.1 200 OK\r\n\r\n" + body,
    }[framing]
    _, url = await serve([send(raw, close=True)])
    client = Exchanges(url)
    with pytest.raises(ExchangeError, match="over 1000 bytes"):
        await client.request("GET", "/")
    await client.aclose()


async def test_a_stream_joins_a_line_sent_in_many_pieces_and_refuses_one_over_the_line_limit(
    serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exchanges, "_MAX_LINE", 100)
    pieces = [b'{"a": "' + b"y" * 20, b"y" * 20, b'"}\n{"b"', b": 2}\n", b"z" * 60, b"z" * 60]
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    raw += b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    _, url = await serve([send(raw)])
    client = Exchanges(url)
    stream = await client.stream("GET", "/watch")
    lines = stream.aiter_lines()
    assert [await anext(lines), await anext(lines)] == ['{"a": "' + "y" * 40 + '"}', '{"b": 2}']
    with pytest.raises(ExchangeError, match="a line of the answer is over 100 bytes"):
        await anext(lines)
    await client.aclose()


# -- a stream's answer, framed as it arrives ---------------------------------------------------------------------------


def _chunked(pieces: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\nX-Trailer: 1\r\n\r\n"


def _fed(raw: bytes, cuts: list[int], method: str = "GET") -> exchanges._StreamedAnswer:
    """An answer fed `raw` split at `cuts`, as a socket may deliver it (no transport: nothing to pause)."""
    loop = asyncio.new_event_loop()
    answer = exchanges._StreamedAnswer(method, loop)
    loop.close()  # the answer's futures are only set and read here: nothing is ever scheduled on it
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(raw)}), len(raw)]
    for start, stop in itertools.pairwise(bounds):
        if stop > start:
            answer.data_received(raw[start:stop])
    return answer


_BODY_PIECES = st.lists(st.binary(min_size=1, max_size=40), max_size=8)
_CUTS = st.lists(st.integers(min_value=0, max_value=600), max_size=12)


@given(pieces=_BODY_PIECES, cuts=_CUTS)
def test_a_chunked_answer_split_anywhere_by_the_socket_gives_its_body_exactly_once(
    pieces: list[bytes], cuts: list[int]
) -> None:
    head = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    answer = _fed(head + _chunked(pieces), cuts)
    assert (answer.head.result().status, answer.done, answer.error) == (200, True, None)
    assert b"".join(answer.pieces) == b"".join(pieces)


@given(body=st.binary(max_size=200), cuts=_CUTS, framing=st.sampled_from(["length", "close"]))
def test_a_length_or_close_framed_answer_split_anywhere_gives_its_body_exactly(
    body: bytes, cuts: list[int], framing: str
) -> None:
    length = b"Content-Length: %d\r\n" % len(body) if framing == "length" else b""
    answer = _fed(b"HTTP/1.1 200 OK\r\n" + length + b"\r\n" + body + b"trailing junk", cuts)
    if framing == "close":
        answer.eof_received()
        assert b"".join(answer.pieces) == body + b"trailing junk"  # the close ends it: every byte is the body's
    else:
        assert b"".join(answer.pieces) == body  # what follows the declared length is not read as the body
    assert (answer.done, answer.error) == (True, None)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY", "not followed by a line break"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "a malformed chunk size"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "a malformed Content-Length"),
        (b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70_000, "head is over 65536 bytes"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 70_000, "framing line is over 65536"),
        (b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n", "head is over 65536 bytes"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 70_000 + b"\r\n", "framing line is over"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffff\r\n", "body is over"),
    ],
)
def test_a_malformed_stream_answer_is_kept_as_its_error_and_nothing_after_it_is_read(raw: bytes, reason: str) -> None:
    answer = _fed(raw + b"\r\n5\r\nhello\r\n", [len(raw)])  # the bad part arrives alone, then what follows
    assert answer.error is not None
    assert reason in str(answer.error)
    assert not answer.done
    assert b"hello" not in b"".join(answer.pieces)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "closed the connection before answering"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "ended in the middle of the answer"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", "ended in the middle of the answer"),
    ],
)
def test_a_connection_that_ends_before_the_answer_does_is_an_exchange_error(raw: bytes, reason: str) -> None:
    answer = _fed(raw, [])
    answer.eof_received()
    answer.connection_lost(None)
    assert answer.error is not None
    assert reason in str(answer.error)
    if not raw:
        with pytest.raises(ExchangeError, match=reason):
            answer.head.result()


async def test_a_stream_whose_reader_falls_behind_stops_reading_the_socket_and_loses_no_line(
    serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exchanges, "_PAUSE_AT", 4096)
    lines = [b'{"n": %d, "pad": "%s"}' % (i, b"p" * 200) for i in range(400)]
    sent = asyncio.Event()

    async def flood(request: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(_chunked([line + b"\n" for line in lines]))
        sent.set()
        await writer.drain()

    _, url = await serve([flood])
    client = Exchanges(url)
    stream = await client.stream("GET", "/watch")
    answer = stream._answer
    assert answer is not None
    await sent.wait()
    while not answer._paused:  # the reader takes nothing yet: the queue passes the mark and reading pauses
        await answer.wait()
    assert 4096 < answer._queued < 4096 + 256 * 1024  # what one read of the socket can add past the mark
    got = [line async for line in stream.aiter_lines()]
    assert got == [line.decode() for line in lines]
    await client.aclose()


async def test_a_stream_answered_with_an_error_is_read_whole_and_its_connection_closed(serve) -> None:
    status = b'{"kind":"Status","code":404}'
    server, url = await serve([send(b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(status), status))])
    client = Exchanges(url)
    stream = await client.stream("GET", "/watch", params={"watch": "1"})
    reply = await stream.aread()
    assert (reply.status_code, reply.json()) == (404, {"kind": "Status", "code": 404})
    assert client._open == set()
    with pytest.raises(ExchangeError, match="the stream is closed"):
        await stream.aread()
    await client.aclose()
    assert server.requests[0].split(b"\r\n")[0] == b"GET /watch?watch=1 HTTP/1.1"


async def test_a_stream_the_server_closes_before_answering_is_an_exchange_error(serve) -> None:
    async def close_unanswered(request: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    _, url = await serve([close_unanswered])
    client = Exchanges(url)
    with pytest.raises(ExchangeError, match="closed the connection before answering"):
        await client.stream("GET", "/watch")
    assert client._open == set()
    await client.aclose()
