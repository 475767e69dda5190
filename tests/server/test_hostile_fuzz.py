"""Fuzzing the API server (issue 10): hypothesis-generated requests against a real uvicorn on 127.0.0.1.

The generator, the judge and the server live in `bench.hostile` (the bench runs them longer): bodies (JSON and YAML,
nested, odd unicode, duplicate keys, aliases, bytes), headers, query strings, methods and paths over the resource
API, discovery and /v2; and Content-Length headers that lie. Every answer must be below 500, and every 4xx a `Status`
body with its code. The server runs in a child process with a loop-lag probe in its event loop (a task that sleeps
10 ms and records how late it wakes, and how much of that the server process was running): the worst lag over a test
must stay under 100 ms, a bound on how long any request may hold the loop, not a speed target. Examples are few and
derandomized (the same requests every run).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import hostile
from bench.hostile import HostileRequest

LAG_BOUND_MS = 100.0
FUZZ = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@pytest.fixture(scope="module")
def server() -> Iterator[hostile.ProbedServer]:
    with hostile.ProbedServer() as served:
        yield served


@pytest.fixture(scope="module")
def client(server: hostile.ProbedServer) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=server.url, timeout=30) as http:
        http.get("/healthz")  # the first request pays the client's own set-up
        yield http


def assert_loop_held_briefly(server: hostile.ProbedServer) -> None:
    """The probe's worst lag while the server process ran (`LoopLag`): a busy machine's wait for a core is no
    request's doing, and a shared 2-core CI box has plenty of it."""
    lag = server.lag()
    assert lag["ticks"] > 0
    assert lag["worst_held_ms"] < LAG_BOUND_MS, lag


def test_generated_requests_never_get_a_5xx_and_every_4xx_is_a_status(
    server: hostile.ProbedServer, client: httpx2.Client
) -> None:
    server.reset_lag()

    @FUZZ
    @given(hostile.requests())
    def one(request: HostileRequest) -> None:
        status, body = hostile.send(client, request)
        assert not hostile.problems(request, status, body)

    one()
    assert_loop_held_briefly(server)


_writes = st.builds(
    HostileRequest,
    method=st.sampled_from(("POST", "PUT", "PATCH")),
    path=st.sampled_from((*hostile.COLLECTIONS, "/api/v1/namespaces/default/configmaps/cm", "/v2/projects")),
    headers=st.sampled_from(hostile.CONTENT_TYPES).map(lambda media: (("content-type", media),)),
    body=hostile.bodies(),
)


def test_generated_bodies_on_write_paths_never_get_a_5xx(server: hostile.ProbedServer, client: httpx2.Client) -> None:
    """The same bodies, all sent where a body is read (the general generator mostly meets 404 and 405 first)."""
    server.reset_lag()

    @FUZZ
    @given(_writes)
    def one(request: HostileRequest) -> None:
        status, body = hostile.send(client, request)
        assert not hostile.problems(request, status, body)

    one()
    assert_loop_held_briefly(server)


def test_content_length_that_lies_never_gets_a_5xx(server: hostile.ProbedServer, client: httpx2.Client) -> None:
    """A body shorter than declared (then the client stops sending) or longer (the rest is a next request, which
    uvicorn refuses): the first answer, if any, is a 4xx `Status` or a success; the server stays healthy."""
    server.reset_lag()

    @settings(FUZZ, max_examples=40)
    @given(_writes, st.integers(-64, 64))
    def one(request: HostileRequest, delta: int) -> None:
        declared = max(0, len(request.body) + delta)
        answer = hostile.parse_first_response(hostile.send_with_length(server.url, request, declared))
        if answer is not None:
            status, body = answer
            assert not hostile.problems(request, status, body)

    one()
    assert client.get("/healthz").status_code == 200
    assert_loop_held_briefly(server)
