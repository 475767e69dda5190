"""The API server under hostile input: a fuzz run, the YAML alias bomb, and memory under large objects.

The figures, in one run:

- `fuzz`: hypothesis-generated requests (bodies: JSON and YAML, nested, odd unicode, duplicate keys, aliases, bytes;
  headers: content types and accepts real and made up; query strings: selectors, resourceVersion, watch,
  timeoutSeconds, limit, continue; methods and paths over the resource API, discovery and /v2) against a real uvicorn
  on loopback serving a memory store (`ProbedServer`, a child process). It counts answers by code, 5xx answers, 4xx
  answers without a `Status` body, and the server's worst event-loop lag: `LoopLag` is a task in the server's loop
  that sleeps 10 ms at a time and records how late it wakes. `FUZZ_EXAMPLES` requests or `FUZZ_SECONDS`, whichever
  ends first (both are parameters of `run_fuzz`). tests/server/test_hostile_fuzz.py runs the same generator, fewer
  examples, on every `make test`.
- `alias_bomb`: the issue's body shape (a ConfigMap whose YAML anchors nest 8 levels, 9 aliases a level: about 43
  million strings once expanded) posted to a probed server: the answer, the time to it, the loop's worst lag and the
  server's RSS and peak RSS before and after, and how often /healthz answered meanwhile (polled from a thread).
- `memory`: a `devplace server` child process per backend (memory, sqlite): RSS before, after `UPDATES` updates of a
  ConfigMap of `BIG_BYTES` (under the store's 1.5 MiB object limit), after deleting it, and the sqlite files'
  growth; and what a 2 MB ConfigMap gets (over the object limit: 413).
- `big_list`: `BIG_LIST_OBJECTS` ConfigMaps of `BIG_BYTES` (84 MB of JSON) on a probed server, then one list (paged
  as kubectl pages: following `continue`), three such lists at once, a Table list (kubectl's Accept) and a watch start
  without resourceVersion (an ADDED event per object, read until the last): for each, the server's worst loop hold
  and lag while it ran, and what the client read (`pages`: responses; `bytes`; `objects`: items, rows or events).
- `slowloris`: `SLOWLORIS["connections"]` slow clients, half trickling their request headers, half their bodies (a
  byte every `TRICKLE_EVERY` s, within the idle bound: only the total bounds end them), against two probed servers:
  uvicorn's own h11 protocol (`uvicorn`) and devplace's (`guarded`, `server.connections`, with `SLOW_LIMITS`). For
  each, the server's open file descriptors (`/proc/<pid>/fd`) and the connections the clients still hold before,
  while all are open, and after the bounds have passed, and how many bodies were answered 408; a third server caps
  connections per address (`per_client`: refused and held of `connections` opened at once); and simple GETs
  (keep-alive, `GET_CONNECTIONS` connections at once) on both protocols, rounds interleaved: requests a second and
  the server's CPU time per request (the protocol's cost, whatever else the machine runs).

Nothing here asserts a time; tests/test_bench.py checks the quick run counted what it reports.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import gc
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bench.measures import cpu_seconds
from devplace.server import ConnectionLimits
from devplace.server._app import create_app, running
from devplace.store import MemoryStore

__all__ = [
    "HostileRequest",
    "LoopLag",
    "ProbedServer",
    "alias_bomb",
    "big_list",
    "bodies",
    "nested",
    "parse_first_response",
    "problems",
    "requests",
    "run",
    "run_fuzz",
    "send",
    "send_with_length",
]

FUZZ_EXAMPLES, FUZZ_SECONDS = 3000, 300.0
UPDATES, BIG_BYTES, OVER_LIMIT_BYTES = 300, 1_400_000, 2_000_000
QUICK = {"fuzz_examples": 60, "fuzz_seconds": 60.0, "updates": 5, "big_bytes": 200_000}
LAG_PERIOD = 0.01  # the probe's sleep


# -- the loop-lag probe and the probed server ------------------------------------------------------------------------


class LoopLag:
    """A task that sleeps `LAG_PERIOD` at a time in the loop it runs in and records how late it wakes (seconds).

    Two figures per wake-up: the lag (wall time past the sleep), and how long the loop's thread itself ran meanwhile
    (the lag capped by that thread's CPU time): on a busy machine a process waits for a core, and a loop waits for
    the interpreter lock while a worker thread decodes; neither is a request holding the loop. `worst_held` is what
    the tests bound. The longest garbage collection meanwhile is recorded too (`gc.callbacks`): a collection stops
    every thread, whichever thread's allocation set it off."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.worst_held = 0.0
        self.ticks = 0
        self.worst_gc = 0.0
        self._epoch = 0  # a tick that began before a reset is not counted
        self._gc_started = 0.0

    def reset(self) -> None:
        self._epoch += 1
        self.worst = self.worst_held = self.worst_gc = 0.0
        self.ticks = 0

    def figures(self) -> dict[str, float]:
        return {
            "worst_ms": round(self.worst * 1000, 1),
            "worst_held_ms": round(self.worst_held * 1000, 1),
            "worst_gc_ms": round(self.worst_gc * 1000, 1),
            "ticks": self.ticks,
        }

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.worst_gc = max(self.worst_gc, time.perf_counter() - self._gc_started)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            epoch, started, cpu = self._epoch, loop.time(), time.thread_time()
            await asyncio.sleep(LAG_PERIOD)
            if epoch == self._epoch:
                lag = loop.time() - started - LAG_PERIOD
                self.worst = max(self.worst, lag)
                self.worst_held = max(self.worst_held, min(lag, time.thread_time() - cpu))
                self.ticks += 1


class ProbedServer:
    """`create_app` over a fresh MemoryStore, served by uvicorn on 127.0.0.1 in a child process with a `LoopLag`
    probe in its event loop (`python -m bench.hostile --serve`). A child of its own, so what the client does (the
    fuzzer's generation, its imports, its garbage collections: all hold this process's GIL) never shows as the
    server's lag. The child reports the probe at `GET /_probe/lag` and resets it on `DELETE`; it is stopped by PID.
    `connections`: the child's connection limits (None: uvicorn's own protocol, unbounded)."""

    def __init__(self, connections: ConnectionLimits | None = ConnectionLimits()) -> None:
        self.connections = connections
        self.url = ""
        self.pid = 0
        self._proc: subprocess.Popen[str] | None = None
        self._client: httpx2.Client | None = None

    def __enter__(self) -> ProbedServer:
        root = Path(__file__).resolve().parent.parent
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.hostile", "--serve", _limits_argument(self.connections)],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        self.url = self._proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.__exit__()
            raise RuntimeError(f"the probed server did not start (exit code {self._proc.poll()})")
        self.pid = self._proc.pid
        self._client = httpx2.Client(base_url=self.url, timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._client is not None:
            self._client.close()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)

    def lag(self) -> dict[str, float]:
        """`LoopLag.figures()` since the last reset."""
        assert self._client is not None
        figures: dict[str, float] = self._client.get(PROBE_PATH).json()
        return figures

    def reset_lag(self) -> None:
        assert self._client is not None
        self._client.delete(PROBE_PATH)


PROBE_PATH = "/_probe/lag"


def _limits_argument(connections: ConnectionLimits | None) -> str:
    return json.dumps(None if connections is None else dataclasses.asdict(connections))


async def _serve_probed(connections: ConnectionLimits | None = ConnectionLimits()) -> None:
    """The child of `ProbedServer`: prints its URL, then serves until terminated."""
    store = MemoryStore()
    lag = LoopLag()
    app = create_app(store)

    async def read_lag() -> dict[str, float]:
        return lag.figures()

    async def reset_lag() -> None:
        lag.reset()

    app.add_api_route(PROBE_PATH, read_lag, methods=["GET"])
    app.add_api_route(PROBE_PATH, reset_lag, methods=["DELETE"])
    gc.callbacks.append(lag.on_gc)
    probe = asyncio.create_task(lag.run())
    async with running(app, shutdown_timeout=0, connections=connections) as url:
        print(url, flush=True)
        await asyncio.Event().wait()  # until SIGTERM ends the process
    probe.cancel()


# -- hostile requests ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostileRequest:
    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    @property
    def target(self) -> str:
        """Path and query string, percent-encoded (lone surrogates as the bytes Python would give them)."""
        query = urllib.parse.urlencode(self.params, errors="surrogatepass")
        return f"{self.path}?{query}" if query else self.path

    def __str__(self) -> str:
        body = self.body if len(self.body) <= 200 else self.body[:200] + b"..."
        return f"{self.method} {self.target} {dict(self.headers)} {body!r}"


COLLECTIONS = (
    "/api/v1/nodes",
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/namespaces/default/pods",
    "/api/v1/pods",
    "/apis/devplace.io/v1alpha1/namespaces/default/configurations",
    "/apis/akri.sh/v0/namespaces/default/instances",
    "/apis/devplace.io/v1alpha1/resourceclasses",
    "/apis/apps/v1/namespaces/default/deployments",
    "/apis/batch/v1/namespaces/edge/jobs",
)
OTHER_PATHS = (
    "/healthz",
    "/version",
    "/api",
    "/api/v1",
    "/apis",
    "/apis/devplace.io/v1alpha1",
    "/openapi.json",
    "/openapi/v2",
    "/openapi/v3",
    "/store/revision",
    "/store/compact",
    "/store/watch",
    "/v2/projects",
    "/v2/projects/p1",
    "/v2/projects/p1/composite-apps",
    "/v2/projects/p1/composite-apps/ca/v1/apps",
    "/v2/cluster-providers",
    "/v2/cluster-providers/cp/clusters",
)
CONTENT_TYPES = (
    "application/json",
    "application/yaml",
    "application/json; charset=utf-8",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/vnd.kubernetes.protobuf",
    "text/plain",
    "multipart/form-data; boundary=x",
    "application/x-www-form-urlencoded",
    "",
)
ACCEPTS = (
    "application/json",
    "application/yaml",
    "application/json;as=Table;v=v1;g=meta.k8s.io",
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    "application/json;stream=watch",
    "application/x-ndjson",
    "application/vnd.kubernetes.protobuf",
    "*/*",
    "text/html",
)
KINDS = ("Node", "ConfigMap", "Pod", "Configuration", "Instance", "ResourceClass", "Deployment", "Job", "List", "")
API_VERSIONS = ("v1", "devplace.io/v1alpha1", "akri.sh/v0", "apps/v1", "batch/v1", "nope/v9", "")
ODD_STRINGS = ("", " ", "\x00", "\ud800", "\udfff", "\U0001f600", "é", "\u202e", "\ufeff", "a" * 300, "0", "-1")

_printable = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
_odd_text = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(ODD_STRINGS)
_names = st.sampled_from(("a", "cam", "node-a", "x" * 253, "Bad_Name", "p1")) | _odd_text
_numbers = st.sampled_from(
    ("0", "1", "-1", "+1", " 1", "1_0", "٣", "9223372036854775807", "9223372036854775808", "1e3")
)

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _odd_text
)
_json_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_odd_text, children, max_size=4),
    max_leaves=16,
)
_metadata = st.fixed_dictionaries(
    {"name": _names},
    optional={
        "namespace": st.sampled_from(("default", "edge", "", "Bad")) | _odd_text,
        "labels": st.dictionaries(_odd_text, _odd_text, max_size=3),
        "annotations": st.dictionaries(_odd_text, _odd_text, max_size=3),
        "resourceVersion": _numbers | _odd_text,
        "uid": _odd_text,
        "generation": _scalars,
        "deletionTimestamp": st.sampled_from(("2020-01-01T00:00:00Z", "")) | _odd_text,
        "deletionGracePeriodSeconds": _scalars,
        "managedFields": _json_values,
        "selfLink": _odd_text,
        "finalizers": st.lists(_odd_text, max_size=2),
    },
)
_objects = st.fixed_dictionaries(
    {"apiVersion": st.sampled_from(API_VERSIONS), "kind": st.sampled_from(KINDS), "metadata": _metadata},
    optional={"spec": _json_values, "data": st.dictionaries(_odd_text, _odd_text, max_size=3), "status": _json_values},
)


def _json_text(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


def _yaml_text(value: Any) -> bytes:
    try:
        return yaml.safe_dump(value, allow_unicode=True).encode("utf-8", "surrogatepass")
    except yaml.YAMLError:
        return _json_text(value, True)


def nested(levels: int, opener: str = "{") -> bytes:
    """A JSON text whose containers nest `levels` deep (an object holding `spec`, then `{"a": ...}` or `[...]`)."""
    if levels < 2:
        return b"{}"
    inner = levels - 1
    body = '{"a":' * (inner - 1) + "{}" + "}" * (inner - 1) if opener == "{" else "[" * inner + "]" * inner
    return f'{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"deep"}},"spec":{body}}}'.encode()


def alias_bomb(levels: int = 8, fanout: int = 9) -> bytes:
    """A ConfigMap in YAML whose anchors nest `levels` deep, each level aliasing the one before `fanout` times."""
    names = "abcdefghijklmnopqrstuvwxyz"
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: lol}", "data:", "  x: y", "spec:"]
    lines.append(f"  {names[0]}: &{names[0]} [" + ",".join(["lol"] * fanout) + "]")
    for prev, cur in itertools.pairwise(names[:levels]):
        lines.append(f"  {cur}: &{cur} [" + ",".join([f"*{prev}"] * fanout) + "]")
    return ("\n".join(lines) + "\n").encode()


def _duplicated(key: str, first: Any, second: Any, wrap: int) -> bytes:
    inner = f"{{{json.dumps(key)}: {json.dumps(first)}, {json.dumps(key)}: {json.dumps(second)}}}"
    for _ in range(wrap):
        inner = f'{{"spec": {inner}}}'
    return inner.encode("utf-8", "surrogatepass")


_bodies = st.one_of(
    st.builds(_json_text, _objects, st.booleans()),
    st.builds(_yaml_text, _objects),
    st.builds(_json_text, _json_values, st.booleans()),
    st.builds(_duplicated, _odd_text, _json_values, _json_values, st.integers(0, 3)),
    st.builds(nested, st.integers(90, 1200), st.sampled_from("{[")),
    st.builds(alias_bomb, st.integers(1, 9), st.integers(1, 9)),
    st.binary(max_size=256),
    st.text(max_size=64).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.just(b""),
)
_query_values = (
    _numbers
    | _odd_text
    | st.sampled_from(("true", "false", "1", "app=x", "app in (a,b)", "!a", "=", "a!=b"))
    | st.builds(  # a continue token as the server writes them (base64 of JSON), holding what a decoder may not take
        lambda payload: base64.urlsafe_b64encode(payload).decode().rstrip("="),
        st.sampled_from((b"[" * 3000, b'{"v": 1, "rv": 1, "ns": "\\ud800", "name": "a"}', b"{}", b"\xff")),
    )
)
_queries = st.lists(
    st.tuples(
        st.sampled_from(
            (
                "labelSelector",
                "fieldSelector",
                "resourceVersion",
                "resourceVersionMatch",
                "watch",
                "timeoutSeconds",
                "limit",
                "continue",
                "allowWatchBookmarks",
                "dryRun",
                "fieldManager",
                "force",
            )
        ),
        _query_values,
    ),
    max_size=4,
)
_headers = st.lists(
    st.tuples(
        st.sampled_from(("content-type", "accept", "x-odd")),
        st.sampled_from(CONTENT_TYPES + ACCEPTS) | st.text(_printable, max_size=40).map(str.strip),
    ),
    max_size=3,
)


def _item(collection: str, name: str) -> str:
    return f"{collection}/{urllib.parse.quote(name, safe='', errors='surrogatepass')}"


_paths = st.one_of(
    st.sampled_from(COLLECTIONS),
    st.builds(_item, st.sampled_from(COLLECTIONS), _names),
    st.sampled_from(OTHER_PATHS),
    st.lists(_odd_text, min_size=1, max_size=5).map(
        lambda parts: "/" + "/".join(urllib.parse.quote(p, safe="", errors="surrogatepass") for p in parts)
    ),
)


def bodies() -> st.SearchStrategy[bytes]:
    """Any body the fuzz run may send (module docstring)."""
    return _bodies


def requests() -> st.SearchStrategy[HostileRequest]:
    """Any request the fuzz run may send (module docstring)."""
    return st.builds(
        HostileRequest,
        method=st.sampled_from(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")),
        path=_paths,
        params=_queries.map(tuple),
        headers=_headers.map(tuple),
        body=_bodies,
    )


# -- sending and judging ---------------------------------------------------------------------------------------------

_STREAMING = ("stream=watch", "ndjson")


def send(client: httpx2.Client, request: HostileRequest) -> tuple[int, bytes]:
    """The status and body of `request`; a streaming (watch) answer is closed once its headers are in."""
    url = str(client.base_url).rstrip("/") + request.target  # absolute: a path may start with //
    built = client.build_request(request.method, url, headers=list(request.headers), content=request.body)
    response = client.send(built, stream=True)
    try:
        if any(marker in response.headers.get("content-type", "") for marker in _STREAMING):
            return response.status_code, b""
        return response.status_code, response.read()
    finally:
        response.close()


def problems(request: HostileRequest, status: int, body: bytes) -> list[str]:
    """What is wrong with an answer: a 5xx, or a 4xx without a `Status` body carrying its code (HEAD has no body).

    One 5xx is Kubernetes' own answer, not a failure: 504 with a `ResourceVersionTooLarge` cause, for a read from a
    revision the store has not reached (the issue's item 4; a HEAD has no body to show the cause)."""
    too_large = b'"ResourceVersionTooLarge"' in body or (
        request.method == "HEAD" and any(name == "resourceVersion" for name, _ in request.params)
    )
    if status >= 500 and not (status == 504 and too_large):
        return [f"{status} for {request}: {body[:300]!r}"]
    if status < 400 or request.method == "HEAD":
        return []
    try:
        status_body = json.loads(body)
    except ValueError:
        return [f"{status} without a JSON body for {request}: {body[:300]!r}"]
    if not (
        isinstance(status_body, dict)
        and status_body.get("kind") == "Status"
        and status_body.get("code") == status
        and isinstance(status_body.get("reason"), str)
        and isinstance(status_body.get("message"), str)
    ):
        return [f"{status} without a Status body for {request}: {body[:300]!r}"]
    return []


def send_with_length(base_url: str, request: HostileRequest, declared: int, timeout: float = 10.0) -> bytes:
    """Send `request` over a raw socket declaring `Content-Length: declared`, whatever the body's length; a body
    shorter than declared is followed by a half-close (the server sees the client stop). Returns what came back."""
    url = urllib.parse.urlsplit(base_url)
    head = [f"{request.method} {request.target} HTTP/1.1", f"Host: {url.netloc}", f"Content-Length: {declared}"]
    head += [f"{name}: {value}" for name, value in request.headers if name.lower() not in ("content-length", "host")]
    with socket.create_connection((url.hostname, url.port), timeout=timeout) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + request.body)
        if len(request.body) < declared:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        with contextlib.suppress(TimeoutError, ConnectionError):
            while b"\r\n\r\n" not in received or not _first_response_complete(received):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
    return received


def _first_response_complete(received: bytes) -> bool:
    head, _, rest = received.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(rest) >= int(value)
    return True


def parse_first_response(received: bytes) -> tuple[int, bytes] | None:
    """The status and body of the first HTTP response in `received` (None when nothing came back)."""
    if not received:
        return None
    head, _, rest = received.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, rest if length is None else rest[:length]


# -- the figures -----------------------------------------------------------------------------------------------------


@dataclass
class FuzzFigures:
    requests: int = 0
    codes: Counter[int] = field(default_factory=Counter)
    found: list[str] = field(default_factory=list)

    def to_json(self, lag: dict[str, float], seconds: float) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "seconds": round(seconds, 1),
            "answers_5xx": sum(n for code, n in self.codes.items() if code >= 500),
            "problems": len(self.found),
            "first_problems": self.found[:5],
            "codes": {str(code): n for code, n in sorted(self.codes.items())},
            "loop_lag_max_ms": lag["worst_ms"],
            "loop_held_max_ms": lag["worst_held_ms"],
            "loop_lag_ticks": lag["ticks"],
            "longest_gc_ms": lag["worst_gc_ms"],
        }


def run_fuzz(examples: int = FUZZ_EXAMPLES, seconds: float = FUZZ_SECONDS) -> dict[str, Any]:
    """Send up to `examples` generated requests for at most `seconds` to a probed server; count what came back."""
    figures = FuzzFigures()
    with ProbedServer() as server, httpx2.Client(base_url=server.url, timeout=30) as client:
        server.reset_lag()
        started = time.monotonic()

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(requests())
        def one(request: HostileRequest) -> None:
            if time.monotonic() - started > seconds:
                return
            status, body = send(client, request)
            figures.requests += 1
            figures.codes[status] += 1
            figures.found.extend(problems(request, status, body))

        one()
        return figures.to_json(server.lag(), time.monotonic() - started)


_YAML = {"content-type": "application/yaml"}


def _bomb(body: bytes) -> dict[str, Any]:
    """Post `body` to a probed server while another thread polls /healthz; the answer, lag, RSS peak, health."""
    with ProbedServer() as server, httpx2.Client(base_url=server.url, timeout=300) as client:
        before, peak_before = _status_kib(server.pid, "VmRSS"), _status_kib(server.pid, "VmHWM")
        health: list[float] = []
        done = threading.Event()

        def poll_health() -> None:
            with httpx2.Client(base_url=server.url, timeout=300) as health_client:
                while not done.is_set():
                    started = time.perf_counter()
                    health_client.get("/healthz")
                    health.append(time.perf_counter() - started)
                    done.wait(0.01)

        poller = threading.Thread(target=poll_health)
        server.reset_lag()
        poller.start()
        started = time.perf_counter()
        try:
            response = client.post("/api/v1/namespaces/default/configmaps", content=body, headers=_YAML)
        finally:
            elapsed = time.perf_counter() - started
            done.set()
            poller.join()
        status = response.json()
        return {
            "body_bytes": len(body),
            "code": response.status_code,
            "reason": status.get("reason"),
            "message": str(status.get("message", ""))[:200],
            "answer_ms": round(elapsed * 1000, 1),
            **{f"loop_{name}": value for name, value in server.lag().items() if name != "ticks"},
            "rss_before_mib": round(before / 1024, 1),
            "rss_peak_before_mib": round(peak_before / 1024, 1),  # the process's peak so far (start-up included)
            "rss_peak_after_mib": round(_status_kib(server.pid, "VmHWM") / 1024, 1),
            "healthz_answers_meanwhile": len(health),
            "healthz_max_ms": round(max(health, default=0.0) * 1000, 1),
        }


@contextlib.contextmanager
def _served(store_url: str) -> Iterator[tuple[str, int]]:
    """`devplace server` as a child process on a free loopback port: (base URL, PID); terminated (then killed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "devplace.cli", "server", "--store", store_url, "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"devplace server exited with {proc.returncode}")
            with contextlib.suppress(httpx2.TransportError):
                if httpx2.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("devplace server did not become healthy")
            time.sleep(0.05)  # polling a child's startup, bounded by the deadline
        yield base_url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _status_kib(pid: int, field_name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field_name} for {pid}")


def _config_map(size: int, version: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "default"},
        "data": {"blob": f"{version:08d}" + "x" * (size - 8)},
    }


def _memory(store_url: str, db: Path | None, updates: int, size: int) -> dict[str, Any]:
    path = "/api/v1/namespaces/default/configmaps"
    with _served(store_url) as (base_url, pid), httpx2.Client(base_url=base_url, timeout=120) as client:
        rss = {"before_mib": _status_kib(pid, "VmRSS")}
        disk_before = _disk(db)
        created = client.post(path, json=_config_map(size, 0))
        created.raise_for_status()
        rv = created.json()["metadata"]["resourceVersion"]
        codes: Counter[int] = Counter()
        for version in range(1, updates + 1):
            obj = _config_map(size, version)
            obj["metadata"]["resourceVersion"] = rv
            answer = client.put(f"{path}/big", json=obj)
            codes[answer.status_code] += 1
            if answer.status_code == 200:
                rv = answer.json()["metadata"]["resourceVersion"]
        rss["after_updates_mib"] = _status_kib(pid, "VmRSS")
        disk_after = _disk(db)
        client.delete(f"{path}/big").raise_for_status()
        rss["after_delete_mib"] = _status_kib(pid, "VmRSS")
        over = client.post(path, json={**_config_map(OVER_LIMIT_BYTES, 0), "metadata": {"name": "over"}})
        figures: dict[str, Any] = {name: round(kib / 1024, 1) for name, kib in rss.items()}
        figures.update(
            {
                "object_bytes": len(json.dumps(_config_map(size, 0))),
                "updates": updates,
                "update_codes": {str(code): n for code, n in sorted(codes.items())},
                "two_mb_object_code": over.status_code,
                "rss_peak_mib": round(_status_kib(pid, "VmHWM") / 1024, 1),
            }
        )
        if db is not None:
            figures["sqlite_growth_mib"] = round((disk_after - disk_before) / (1 << 20), 1)
        return figures


def _disk(db: Path | None) -> int:
    if db is None:
        return 0
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


# -- big lists -------------------------------------------------------------------------------------------------------

BIG_LIST_OBJECTS = 60  # ConfigMaps of BIG_BYTES each: 84 MB of JSON in all
QUICK_BIG_LIST = {"objects": 6, "bytes": BIG_BYTES}  # few objects, but big: the lists still come in several pages
TABLE_ACCEPT = "application/json;as=Table;g=meta.k8s.io;v=v1"
_BIG_PATH = "/api/v1/namespaces/default/configmaps"


def _list_all(base_url: str, accept: str | None = None) -> dict[str, int]:
    """Page through the ConfigMaps as kubectl does (following `continue`): pages, bytes and objects (or rows) read."""
    read = {"pages": 0, "bytes": 0, "objects": 0}
    headers = {"accept": accept} if accept else {}
    with httpx2.Client(base_url=base_url, timeout=300, headers=headers) as client:
        token = ""
        while True:
            response = client.get(_BIG_PATH, params={"continue": token} if token else {})
            response.raise_for_status()
            body = response.json()
            read["pages"] += 1
            read["bytes"] += len(response.content)
            read["objects"] += len(body.get("rows" if accept == TABLE_ACCEPT else "items") or [])
            token = str(body["metadata"].get("continue") or "")
            if not token:
                return read


def _lists_at_once(base_url: str, count: int) -> dict[str, int]:
    """`count` clients paging through the list at the same time (threads); what they read, summed."""
    results: list[dict[str, int]] = []

    def one() -> None:
        results.append(_list_all(base_url))

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if len(results) != count:
        raise RuntimeError(f"{count - len(results)} of the {count} lists failed")
    return {name: sum(r[name] for r in results) for name in ("pages", "bytes", "objects")}


def _watch_start(base_url: str, objects: int) -> dict[str, int]:
    """A Kubernetes watch without a resourceVersion: the ADDED event of every object, read until the last one."""
    read = {"pages": 1, "bytes": 0, "objects": 0}
    params = {"watch": "1", "timeoutSeconds": "120"}
    with (
        httpx2.Client(base_url=base_url, timeout=300) as client,
        client.stream("GET", _BIG_PATH, params=params, headers={"accept": "application/json"}) as response,
    ):
        response.raise_for_status()
        for line in response.iter_lines():
            read["bytes"] += len(line) + 1
            if json.loads(line)["type"] == "ADDED":
                read["objects"] += 1
            if read["objects"] == objects:
                return read
    raise RuntimeError(f"the watch ended after {read['objects']} of {objects} ADDED events")


def big_list(objects: int = BIG_LIST_OBJECTS, size: int = BIG_BYTES) -> dict[str, Any]:
    """`objects` ConfigMaps of `size` bytes on a probed server, then: one list, three lists at once, a Table list
    (kubectl's), a watch start without resourceVersion (an ADDED event per object). For each, the server's worst
    loop hold and lag while it ran (`LoopLag`) and what the client read (pages, bytes, objects or rows)."""
    with ProbedServer() as server, httpx2.Client(base_url=server.url, timeout=300) as client:
        for i in range(objects):
            obj = _config_map(size, i)
            obj["metadata"]["name"] = f"big-{i:03d}"
            client.post(_BIG_PATH, json=obj).raise_for_status()
        figures: dict[str, Any] = {"objects": objects, "object_bytes": len(json.dumps(_config_map(size, 0)))}
        for name, read in (
            ("one_list", lambda: _list_all(server.url)),
            ("three_lists", lambda: _lists_at_once(server.url, 3)),
            ("table_list", lambda: _list_all(server.url, TABLE_ACCEPT)),
            ("watch_start", lambda: _watch_start(server.url, objects)),
        ):
            server.reset_lag()
            time.sleep(3 * LAG_PERIOD)  # the probe's tick under way at the reset is not counted: let a new one begin
            started = time.perf_counter()
            got = read()
            elapsed = time.perf_counter() - started
            lag = server.lag()
            figures[name] = {
                **got,
                "seconds": round(elapsed, 2),
                "loop_held_max_ms": lag["worst_held_ms"],
                "loop_lag_max_ms": lag["worst_ms"],
                "loop_lag_ticks": lag["ticks"],
            }
        figures["loop_held_max_ms"] = max(
            figures[name]["loop_held_max_ms"] for name in ("one_list", "three_lists", "table_list", "watch_start")
        )
        return figures


# -- slowloris -------------------------------------------------------------------------------------------------------

SLOWLORIS = {"connections": 1500, "cap": 256, "gets": 20_000}
QUICK_SLOWLORIS = {"connections": 20, "cap": 5, "gets": 400}
SLOW_LIMITS = ConnectionLimits(header_timeout=1.0, body_idle_timeout=1.0, body_timeout=2.0, per_client=1_000_000)
TRICKLE_EVERY = 0.25  # seconds between a slow client's bytes
SETTLE = 1.0  # seconds past the bounds before the "after" figures
GET_CONNECTIONS, GET_ROUNDS = 4, 3
_GET = b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n"
_GOT = b"\r\n\r\nok"


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


async def _until_closed(reader: asyncio.StreamReader) -> bytes:
    """What the server sends until it ends the connection (EOF or reset)."""
    received = b""
    with contextlib.suppress(ConnectionError):
        while chunk := await reader.read(1 << 16):
            received += chunk
    return received


class _SlowClient:
    """One connection trickling its request's headers (`body=False`) or its body, a byte every `TRICKLE_EVERY` s,
    until the server ends it or `stop` is set."""

    def __init__(self, port: int, body: bool) -> None:
        self.port = port
        self.body = body
        self.ended: asyncio.Future[bytes] | None = None

    @property
    def held(self) -> bool:
        return self.ended is not None and not self.ended.done()

    @property
    def answered_408(self) -> bool:
        return self.ended is not None and self.ended.done() and self.ended.result().startswith(b"HTTP/1.1 408")

    async def run(self, opened: asyncio.Event, stop: asyncio.Event) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        if self.body:
            head = b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: bench\r\nContent-Length: 1000000\r\n"
            writer.write(head + b"Content-Type: application/json\r\n\r\n{")
        else:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: bench\r\nX-Slow: ")
        self.ended = asyncio.ensure_future(_until_closed(reader))
        stopping = asyncio.ensure_future(stop.wait())
        opened.set()
        try:
            while not self.ended.done() and not stop.is_set():
                await asyncio.wait({self.ended, stopping}, timeout=TRICKLE_EVERY)
                if not self.ended.done() and not stop.is_set():
                    writer.write(b" ")
        finally:
            stopping.cancel()
            writer.close()
            with contextlib.suppress(ConnectionError):
                await self.ended


async def _slow_clients(url: str, pid: int, count: int, limits: ConnectionLimits) -> dict[str, Any]:
    """`count` slow clients (half headers, half bodies) against the server at `url`: fds and held connections before,
    while all are open, and `SETTLE` s past the longest bound; bodies answered 408."""
    fds_before = _open_fds(pid)
    stop = asyncio.Event()
    clients = [_SlowClient(_port(url), body=i % 2 == 1) for i in range(count)]
    opened = [asyncio.Event() for _ in clients]
    started = time.perf_counter()
    tasks = [asyncio.create_task(c.run(o, stop)) for c, o in zip(clients, opened, strict=True)]
    await asyncio.gather(*(o.wait() for o in opened))
    open_seconds = time.perf_counter() - started
    await asyncio.sleep(TRICKLE_EVERY)  # the server has accepted them all (within every bound: SLOW_LIMITS)
    during = {"fds_during": _open_fds(pid), "held_during": sum(c.held for c in clients)}
    bounds = [b for b in (limits.header_timeout, limits.body_idle_timeout, limits.body_timeout) if b is not None]
    await asyncio.sleep(max(bounds, default=0.0) + SETTLE - (time.perf_counter() - started))
    after = {"fds_after": _open_fds(pid), "held_after": sum(c.held for c in clients)}
    stop.set()
    await asyncio.gather(*tasks)
    return {
        "fds_before": fds_before,
        **during,
        **after,
        "answered_408": sum(c.answered_408 for c in clients),
        "seconds_to_open_all": round(open_seconds, 2),
    }


async def _capped(url: str, pid: int, count: int, cap: int) -> dict[str, Any]:
    """`count` connections opened at once that send nothing, to a server that takes `cap` of them from one address:
    how many it reset, how many it holds."""
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    refused_at_connect = 0
    for _ in range(count):
        try:
            opened.append(await asyncio.open_connection("127.0.0.1", _port(url)))
        except ConnectionResetError:  # the reset can beat the handshake's last step: refused all the same
            refused_at_connect += 1
    ended = [asyncio.ensure_future(_until_closed(reader)) for reader, _ in opened]
    for _ in range(1000):  # until every one over the cap has been reset (a bound only)
        await asyncio.sleep(0.01)
        if refused_at_connect + sum(e.done() for e in ended) >= count - cap:
            break
    await asyncio.sleep(0.1)  # and any further reset would have arrived
    refused = refused_at_connect + sum(e.done() for e in ended)
    figures = {"opened": count, "refused": refused, "held": sum(not e.done() for e in ended)}
    figures["fds_during"] = _open_fds(pid)
    for _, writer in opened:
        writer.close()
    await asyncio.gather(*ended)
    return figures


async def _gets(url: str, count: int) -> int:
    """`count` GET /healthz over `GET_CONNECTIONS` kept-alive connections at once; the answers read."""
    answered = 0

    async def one_connection(n: int) -> None:
        nonlocal answered
        reader, writer = await asyncio.open_connection("127.0.0.1", _port(url))
        try:
            for _ in range(n):
                writer.write(_GET)
                await reader.readuntil(_GOT)
                answered += 1
        finally:
            writer.close()

    await asyncio.gather(*(one_connection(count // GET_CONNECTIONS) for _ in range(GET_CONNECTIONS)))
    return answered


def _get_figures(servers: dict[str, ProbedServer], count: int) -> dict[str, Any]:
    """Simple GETs on each server, `GET_ROUNDS` rounds interleaved (the machine's other load falls on both alike):
    the median round's requests a second and server CPU microseconds a request."""
    rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in servers}
    for _ in range(GET_ROUNDS):
        for name, server in servers.items():
            cpu, started = cpu_seconds(server.pid), time.perf_counter()
            answered = asyncio.run(_gets(server.url, count))
            elapsed, used = time.perf_counter() - started, cpu_seconds(server.pid) - cpu
            rounds[name].append((answered / elapsed, used / answered * 1e6))
    figures: dict[str, Any] = {}
    for name, measured in rounds.items():
        figures[name] = {
            "gets": count // GET_CONNECTIONS * GET_CONNECTIONS,
            "rps": round(sorted(r for r, _ in measured)[len(measured) // 2]),
            "cpu_us_per_get": round(sorted(c for _, c in measured)[len(measured) // 2], 1),
        }
    return figures


def slowloris(connections: int, cap: int, gets: int) -> dict[str, Any]:
    """The `slowloris` figure (module docstring)."""
    capped = ConnectionLimits(header_timeout=60.0, per_client=cap)
    with ProbedServer(None) as plain, ProbedServer(SLOW_LIMITS) as guarded, ProbedServer(capped) as limited:
        servers = {"uvicorn": plain, "guarded": guarded}
        figures: dict[str, Any] = {
            "connections": connections,
            "limits": dataclasses.asdict(SLOW_LIMITS),
            "trickle_every_s": TRICKLE_EVERY,
        }
        for name, server in servers.items():
            limits = SLOW_LIMITS if name == "guarded" else ConnectionLimits.unlimited()
            figures[name] = asyncio.run(_slow_clients(server.url, server.pid, connections, limits))
        figures["per_client"] = {"cap": cap, **asyncio.run(_capped(limited.url, limited.pid, connections, cap))}
        figures["gets"] = _get_figures(servers, gets)
    get = figures["gets"]
    figures["ratios"] = {
        "guarded_over_uvicorn_cpu_per_get": round(
            get["guarded"]["cpu_us_per_get"] / get["uvicorn"]["cpu_us_per_get"], 3
        ),
        "guarded_over_uvicorn_rps": round(get["guarded"]["rps"] / get["uvicorn"]["rps"], 3),
    }
    return figures


def run(quick: bool = False, *, fuzz_examples: int | None = None, fuzz_seconds: float | None = None) -> dict[str, Any]:
    sizes = QUICK if quick else {"fuzz_examples": FUZZ_EXAMPLES, "fuzz_seconds": FUZZ_SECONDS}
    examples = fuzz_examples or int(sizes["fuzz_examples"])
    seconds = fuzz_seconds or float(sizes["fuzz_seconds"])
    updates = int(QUICK["updates"]) if quick else UPDATES
    size = int(QUICK["big_bytes"]) if quick else BIG_BYTES
    with tempfile.TemporaryDirectory(prefix="devplace-bench-hostile-") as tmp:
        db = Path(tmp) / "hostile.db"
        memory = {
            "memory": _memory("memory", None, updates, size),
            "sqlite": _memory(f"sqlite:///{db}", db, updates, size),
        }
    return {
        "fuzz": run_fuzz(examples, seconds),
        "alias_bomb": _bomb(alias_bomb(8, 9)),
        "memory": memory,
        "big_list": big_list(QUICK_BIG_LIST["objects"], QUICK_BIG_LIST["bytes"]) if quick else big_list(),
        "slowloris": slowloris(**(QUICK_SLOWLORIS if quick else SLOWLORIS)),
        "cpus": os.cpu_count(),
    }


if __name__ == "__main__":
    if "--serve" in sys.argv:
        limits = json.loads(sys.argv[sys.argv.index("--serve") + 1]) if len(sys.argv) > 2 else {}
        asyncio.run(_serve_probed(None if limits is None else ConnectionLimits(**limits)))
    else:
        print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
