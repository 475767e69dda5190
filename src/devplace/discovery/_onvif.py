"""onvif: ONVIF cameras (NetworkVideoTransmitters) found by WS-Discovery, as Akri's ONVIF handler finds them.

The same handler runs in-process in `devplace agent` (registered as `onvif`, unless `--no-onvif`) and as its own
process speaking Akri's discovery protocol (`devplace handler onvif`, through `devplace.discovery._serving`). Cameras
are shared: several nodes on one network see the same camera, one Instance lists them all.

A round, per Discover stream, every `interval` seconds (10, Akri's fixed period; on the injected clock):
1. a fresh UDP socket on `0.0.0.0:0` sends one Probe to 239.255.255.250:3702 and collects unicast replies for
   `discoveryTimeoutSeconds` (real time: it is the network's answer window);
2. every XAddr of every ProbeMatch the `scopes` filter keeps is a candidate service URL (`_onvifwire.service_urls`);
3. each must answer a GetSystemDateAndTime POST with 200 and well-formed XML within `http_timeout` (1 s), else it is
   not there this round (a camera that stops answering leaves the list at the next round: no grace, as in Akri);
4. a URL not already reported goes through the `uuids` filter, GetNetworkInterfaces (with the Configuration's
   credentials, `_onvifwire.Credentials`), then the `ipAddresses` and `macAddresses` filters. A URL already reported
   keeps its device (and properties) while it keeps answering; one that was filtered out is tried again next round
   (Akri retries it too while nothing else changes, so a camera whose GetNetworkInterfaces failed once is not lost).
The stream yields the full list (sorted by id) after the first round, then only when it changed.

Failures stay inside the round: a probe that cannot be sent (no multicast route, no network) is a round that finds
nothing, logged once per distinct error (Akri's task panics and the stream ends); a malformed reply is skipped; a
camera's HTTP failure (refused, timeout, not 200, not XML, a bad URL) is that camera's alone. Bad details raise
`errors.Invalid` before any I/O. Nothing here ends the stream but the consumer.

Multicast needs the node's network: in a pod, `hostNetwork: true` (deploy/kubernetes/onvif-handler.yaml).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Final

from devplace.clocks import Clock, SystemClock
from devplace.discovery import _onvifwire as wire
from devplace.discovery._devices import Device
from devplace.discovery._handlers import ResolvedProperties

if TYPE_CHECKING:
    import httpx2

log = logging.getLogger(__name__)

DISCOVERY_INTERVAL: Final = 10.0
HTTP_TIMEOUT: Final = 1.0
MAX_BODY: Final = 1024 * 1024
"""Answers longer than this are not an ONVIF device service's (an answer is a few KiB)."""


class _Replies(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.replies: list[bytes] = []

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        self.replies.append(data[: wire.MAX_REPLY])


def iso_millis(now: float) -> str:
    """UTC time with milliseconds and `Z`, as Akri writes a UsernameToken's Created."""
    whole = int(now)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((now - whole) * 1000):03d}Z"


class OnvifHandler:
    """The `onvif` discovery handler (module docstring). `group` is WS-Discovery's multicast address and port."""

    name = wire.HANDLER_NAME

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        interval: float = DISCOVERY_INTERVAL,
        http_timeout: float = HTTP_TIMEOUT,
        group: tuple[str, int] = (wire.WS_DISCOVERY_GROUP, wire.WS_DISCOVERY_PORT),
    ) -> None:
        self.interval = interval
        self.http_timeout = http_timeout
        self.group = group
        self._clock: Clock = clock or SystemClock()
        self._probe_error: str | None = None

    async def discover(
        self, details: str, properties: ResolvedProperties | None = None
    ) -> AsyncGenerator[list[Device], None]:
        parsed = wire.parse_details(details)
        credentials = wire.Credentials.from_properties(properties or {})
        import httpx2  # on first use: 85 ms the agent need not spend without an ONVIF Configuration

        reported: dict[str, Device] = {}  # service URL -> its device
        last: list[Device] | None = None
        limits = httpx2.Limits(max_connections=None, max_keepalive_connections=64)  # no camera waits for a slot
        async with httpx2.AsyncClient(trust_env=False, follow_redirects=False, limits=limits) as client:
            while True:
                live = await self.round(parsed, client)
                for url in list(reported):
                    if live.get(url) != reported[url].properties[wire.DEVICE_UUID]:
                        del reported[url]
                fresh = [(url, uid) for url, uid in live.items() if url not in reported]
                admitted = await asyncio.gather(*(self.admit(parsed, credentials, client, u, i) for u, i in fresh))
                for (url, _), device in zip(fresh, admitted, strict=True):
                    if device is not None:
                        reported[url] = device
                current = sorted(reported.values(), key=lambda x: x.id)
                if current != last:
                    yield current
                    last = current
                await self._clock.sleep(self.interval)

    async def round(self, details: wire.OnvifDetails, client: httpx2.AsyncClient) -> dict[str, str]:
        """The live service URLs (-> uuid) of one probe: scopes filtered, GetSystemDateAndTime answered."""
        replies = await self.probe(details.discovery_timeout_seconds)
        matches: list[wire.ProbeMatch] = []
        for reply in replies:
            try:
                matches.extend(wire.parse_probe_matches(reply))
            except ValueError as e:
                log.debug("onvif: ignoring a probe reply: %s", e)
        candidates = wire.service_urls(matches, details.scopes)
        urls = list(candidates)
        answers = await asyncio.gather(*(self.responds(client, url) for url in urls))
        return {url: candidates[url] for url, ok in zip(urls, answers, strict=True) if ok}

    async def probe(self, timeout: float) -> list[bytes]:
        """Send one Probe to the group and collect the replies for `timeout` seconds (none if it cannot be sent)."""
        loop = asyncio.get_running_loop()
        message = wire.probe_message(f"uuid:{uuid.uuid4()}")
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        except OSError as e:
            self._probe_failed(e)
            return []
        transport: asyncio.DatagramTransport | None = None
        try:
            sock.setblocking(False)
            sock.bind(("0.0.0.0", 0))
            transport, protocol = await loop.create_datagram_endpoint(_Replies, sock=sock)
            await loop.sock_sendto(sock, message, self.group)
        except OSError as e:
            if transport is not None:
                transport.close()
            else:
                sock.close()
            self._probe_failed(e)
            return []
        if self._probe_error is not None:
            log.info("onvif: probes are sent again")
            self._probe_error = None
        try:
            await asyncio.sleep(timeout)  # the network's answer window: real time, whatever the clock
        finally:
            transport.close()
        return protocol.replies

    def _probe_failed(self, e: OSError) -> None:
        text = f"{type(e).__name__}: {e}"
        if text != self._probe_error:
            log.warning(
                "onvif: cannot send the WS-Discovery probe to %s:%d (%s); no cameras until it can "
                "(multicast needs a route to 224.0.0.0/4, in a pod hostNetwork)",
                *self.group,
                text,
            )
            self._probe_error = text

    async def post(self, client: httpx2.AsyncClient, url: str, operation: str, body: bytes) -> bytes:
        """POST a SOAP request; the answer's body if it is 200 within `http_timeout`, else `ValueError`."""
        import httpx2

        headers = {"Content-Type": wire.content_type(operation)}
        try:
            async with asyncio.timeout(self.http_timeout):
                async with client.stream("POST", url, content=body, headers=headers) as response:
                    if response.status_code != 200:
                        raise ValueError(f"{operation}: HTTP {response.status_code}, not 200")
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size > MAX_BODY:
                            raise ValueError(f"{operation}: answer over {MAX_BODY} bytes")
                        chunks.append(chunk)
                    return b"".join(chunks)
        except TimeoutError:
            raise ValueError(f"{operation}: no answer within {self.http_timeout}s") from None
        except (httpx2.HTTPError, httpx2.InvalidURL, OSError) as e:
            raise ValueError(f"{operation}: {type(e).__name__}: {e}") from None

    async def responds(self, client: httpx2.AsyncClient, url: str) -> bool:
        """GetSystemDateAndTime answered 200 with well-formed XML: the camera is there."""
        try:
            wire.parse_xml(await self.post(client, url, wire.GET_SYSTEM_DATE_AND_TIME, wire.date_and_time_message()))
        except ValueError as e:
            log.debug("onvif: %s does not answer: %s", url, e)
            return False
        return True

    async def interfaces(
        self, client: httpx2.AsyncClient, url: str, credential: tuple[str, str | None] | None
    ) -> tuple[str, str] | None:
        """(IP, MAC) from GetNetworkInterfaces (with a UsernameToken when there is a credential); None on failure."""
        token = None
        if credential is not None:
            username, password = credential
            token = wire.username_token(username, password or "", str(uuid.uuid4()), iso_millis(self._clock.now()))
        try:
            body = await self.post(client, url, wire.GET_NETWORK_INTERFACES, wire.network_interfaces_message(token))
            return wire.parse_network_interfaces(body)
        except ValueError as e:
            log.info("onvif: no IP and MAC from %s: %s", url, e)
            return None

    async def admit(
        self,
        details: wire.OnvifDetails,
        credentials: wire.Credentials,
        client: httpx2.AsyncClient,
        url: str,
        uid: str,
    ) -> Device | None:
        """The device for a new live URL, or None when a filter drops it (uuids before asking the camera anything)."""
        if not wire.uuid_kept(details, uid):
            return None
        return wire.camera_device(details, url, uid, await self.interfaces(client, url, credentials.get(uid)))
