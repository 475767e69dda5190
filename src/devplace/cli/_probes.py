"""`--metrics-port`: a daemon's `/metrics`, `/livez` and `/readyz` on one small HTTP endpoint.

The agent, scheduler and controller are no web servers, so they get the least that answers a kubelet probe and a
Prometheus scrape: HTTP/1.1 GETs, one request per connection (`Connection: close`), on `--metrics-address`
(default 127.0.0.1; the manifests listen on 0.0.0.0 so the kubelet and Prometheus reach it). Off unless
`--metrics-port` is given (0 picks a free port; the banner line names the one bound).

- `/metrics`: the process's registry (`devplace.metrics`), Prometheus' text format.
- `/livez`: 200 `ok` while the process answers. A store that is gone does not make a part dead (a restart would
  not bring the store back), only unready.
- `/readyz`: 200 `ok` once the part has started and every list/watch feed that runs over the stores it reads has had
  its first listing (`informers`), and while its store answers its revision within `STORE_TIMEOUT` seconds
  (`store`); else 500. A standby copy under `--leader-elect` is ready when its store answers (it reads nothing until
  it leads), as kube-scheduler's standby copies are. `?verbose` lists each check as kube-apiserver does
  (`[+]store ok`, `readyz check passed`); a failing check's reason goes to the log, not to the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from devplace.store import Store

STORE_TIMEOUT = 5.0
"""Seconds the store may take to answer before `/readyz` fails."""
REQUEST_TIMEOUT = 5.0
"""Seconds a client may take to send its request head."""
MAX_HEAD = 8192


log = logging.getLogger(__name__)


@dataclass
class Health:
    """What `/readyz` checks for one daemon (module docstring)."""

    store: Store | None = None
    """The store the daemon opened: it must answer."""
    readers: list[Store] = field(default_factory=list)
    """The stores the part reads through informers (the opened one, or a fenced one under --leader-elect)."""
    started: bool = False
    standby: bool = False

    async def checks(self) -> dict[str, str | None]:
        """Each readiness check by name -> why it fails (None: it passes)."""
        from devplace.store import InformerSet

        results: dict[str, str | None] = {"ping": None}
        if self.standby:
            results["informers"] = None
        elif not self.started:
            results["informers"] = "the part has not started"
        else:
            feeds = [f for reader in self.readers for f in InformerSet.of(reader).feeds.values() if f.running]
            pending = sorted({f.kind for f in feeds if not f.synced})
            if not feeds:
                results["informers"] = "no informer runs yet"
            else:
                results["informers"] = f"not listed yet: {', '.join(pending)}" if pending else None
        results["store"] = None
        if self.store is not None:
            try:
                await asyncio.wait_for(self.store.revision(), STORE_TIMEOUT)
            except Exception as e:  # any failure to answer is unreadiness
                results["store"] = f"{type(e).__name__}: {e}"
        return results


def answer(status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> bytes:
    reasons = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error"}
    reason = reasons.get(status, "")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


async def respond(method: str, target: str, health: Health) -> bytes:
    """The whole response to one request (pure but for the checks it runs)."""
    if method not in ("GET", "HEAD"):
        return answer(405, b"only GET\n")
    url = urlsplit(target)
    query = parse_qs(url.query, keep_blank_values=True)
    if url.path == "/metrics":
        from devplace import metrics

        body = metrics.exposition()
        return answer(200, body if method == "GET" else b"", metrics.CONTENT_TYPE_LATEST)
    if url.path == "/livez":
        return answer(200, b"ok")
    if url.path != "/readyz":
        return answer(404, f"no such path {url.path}\n".encode())
    results = await health.checks()
    lines = []
    for name, failure in results.items():
        if failure is None:
            lines.append(f"[+]{name} ok")
        else:
            log.warning("readyz check %s failed: %s", name, failure)
            lines.append(f"[-]{name} failed: reason withheld")
    failed = any(f is not None for f in results.values())
    if failed:
        return answer(500, ("\n".join([*lines, "readyz check failed"]) + "\n").encode())
    if "verbose" in query:
        return answer(200, ("\n".join([*lines, "readyz check passed"]) + "\n").encode())
    return answer(200, b"ok")


async def _serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, health: Health) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        if len(request_line) != 3:
            writer.write(answer(400, b"bad request line\n"))
        else:
            writer.write(await respond(request_line[0], request_line[1], health))
        await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


class Endpoint:
    """The listening endpoint; `close()` stops it."""

    def __init__(self, server: asyncio.Server) -> None:
        self.server = server
        self.port: int = server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self.server.close()
        await self.server.wait_closed()


async def open_endpoint(address: str, port: int, health: Health) -> Endpoint:
    """Listen on `address`:`port` and answer probes and scrapes (module docstring)."""
    server = await asyncio.start_server(
        lambda r, w: _serve_one(r, w, health), address, port, limit=MAX_HEAD, reuse_address=True
    )
    return Endpoint(server)


async def maybe_open(address: str, port: int | None, health: Health, command: str) -> Endpoint | None:
    """`open_endpoint` when `--metrics-port` was given, with one line naming where; else None."""
    if port is None:
        return None
    from devplace import errors
    from devplace.cli._logs import announce

    try:
        endpoint = await open_endpoint(address, port, health)
    except OSError as e:
        raise errors.Unavailable(f"cannot listen on {address}:{port} for metrics: {e.strerror or e}") from e
    shown = f"[{address}]" if ":" in address else address
    announce(f"devplace {command}: metrics and probes on http://{shown}:{endpoint.port}")
    return endpoint
