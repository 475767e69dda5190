"""ONVIF cameras written for the tests, on a network of two namespaces that the fixture creates and deletes.

`lan` (a fixture) makes two network namespaces joined by a veth pair: `cam` holds the cameras (10.77.0.2 and up),
`dh` the discovery handler (10.77.0.1); each has a multicast route on its end of the pair, so WS-Discovery's
239.255.255.250 goes from one to the other and nowhere else. Names are unique per test run and deleted by name.
Creating namespaces needs root (or CAP_NET_ADMIN); where they cannot be created the tests skip, saying so.

Code runs "in" a namespace on a `NetnsLoop`: a thread that entered the namespace (setns: the network namespace is
per thread, and a socket belongs to the namespace of the thread that made it) and runs its own event loop. The test's
loop awaits coroutines there with `run`. `Cameras` runs in `cam`: one WS-Discovery responder (UDP 3702, joined to the
group on the veth) answering Probes for NetworkVideoTransmitter as a camera does, resolving a declared prefix and
matching the local name when the prefix is undeclared (Akri's probe), and one HTTP server per camera answering the
ONVIF calls the handler makes (GetSystemDateAndTime, GetNetworkInterfaces; the latter checks a WS-UsernameToken
PasswordDigest when the camera has credentials).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import hashlib
import os
import secrets
import socket
import subprocess
import threading
import xml.etree.ElementTree as ET
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

SOAP12 = "http://www.w3.org/2003/05/soap-envelope"
WSA = "http://schemas.xmlsoap.org/ws/2004/08/addressing"
WSD = "http://schemas.xmlsoap.org/ws/2005/04/discovery"
DN = "http://www.onvif.org/ver10/network/wsdl"
TDS = "http://www.onvif.org/ver10/device/wsdl"
TT = "http://www.onvif.org/ver10/schema"
WSSE = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd"
WSU = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd"
GROUP = "239.255.255.250"
CLONE_NEWNET = 0x40000000
HANDLER_IP = "10.77.0.1"
CAMERA_IPS = ("10.77.0.2", "10.77.0.3", "10.77.0.4")


# -- namespaces --------------------------------------------------------------------------------------------------------


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@dataclass(frozen=True)
class Lan:
    cam: str
    dh: str


@contextlib.contextmanager
def make_lan() -> Iterator[Lan]:
    token = secrets.token_hex(3)
    lan = Lan(cam=f"dpcam{token}", dh=f"dpdh{token}")
    veth_dh, veth_cam = f"dpd{token}", f"dpc{token}"
    try:
        _ip("netns", "add", lan.cam)
    except (OSError, subprocess.CalledProcessError) as e:
        detail = e.stderr.decode().strip() if isinstance(e, subprocess.CalledProcessError) else str(e)
        pytest.skip(f"cannot create a network namespace here (needs root or CAP_NET_ADMIN): {detail}")
    try:
        _ip("netns", "add", lan.dh)
        _ip("link", "add", veth_dh, "type", "veth", "peer", "name", veth_cam)
        _ip("link", "set", veth_dh, "netns", lan.dh)
        _ip("link", "set", veth_cam, "netns", lan.cam)
        _ip("-n", lan.dh, "addr", "add", f"{HANDLER_IP}/24", "dev", veth_dh)
        for address in CAMERA_IPS:
            _ip("-n", lan.cam, "addr", "add", f"{address}/24", "dev", veth_cam)
        for ns, dev in ((lan.dh, veth_dh), (lan.cam, veth_cam)):
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "route", "add", "224.0.0.0/4", "dev", dev)
        yield lan
    finally:
        for ns in (lan.dh, lan.cam):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


class NetnsLoop:
    """A thread inside network namespace `netns` running its own event loop (module docstring)."""

    def __init__(self, netns: str) -> None:
        self.netns = netns
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"netns-{netns}", daemon=True)

    def _main(self) -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/run/netns/{self.netns}", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    errno = ctypes.get_errno()
                    raise OSError(errno, f"setns into {self.netns}: {os.strerror(errno)}")
            finally:
                os.close(fd)
        except BaseException as e:  # reported to the starting thread
            self._error = e
            self._ready.set()
            return
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on this namespace's loop; await it from the test's loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def stop(self) -> None:
        if self._thread.is_alive():

            async def cancel_all() -> None:
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(30)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)


# -- cameras -----------------------------------------------------------------------------------------------------------


@dataclass
class Camera:
    uuid: str
    ip: str
    mac: str
    scopes: tuple[str, ...] = ("onvif://www.onvif.org/type/video_encoder", "onvif://www.onvif.org/name/cam")
    port: int = 8000
    paths: tuple[str, ...] = ("/onvif/device_service",)
    credentials: tuple[str, str] | None = None
    on: bool = True
    date_status: int = 200
    address_prefix: str = "urn:uuid:"
    requests: list[tuple[str, str, bytes]] = field(default_factory=list)
    """(operation, Content-Type, body) of every request it answered."""

    @property
    def xaddrs(self) -> list[str]:
        return [f"http://{self.ip}:{self.port}{path}" for path in self.paths]


def _declared_prefixes(data: bytes) -> dict[str, str]:
    found: dict[str, str] = {}
    for _, (prefix, uri) in ET.iterparse(BytesIO(data), events=("start-ns",)):
        found.setdefault(prefix, uri)
    return found


def asks_for_transmitters(data: bytes) -> str | None:
    """The MessageID of a WS-Discovery Probe that a NetworkVideoTransmitter answers, else None. A typed prefix that
    is declared must map to ONVIF's network namespace; an undeclared one (Akri's `netwsdl`) is matched by local name,
    as cameras do."""
    try:
        root = ET.fromstring(data)
        prefixes = _declared_prefixes(data)
    except ET.ParseError:
        return None
    probe = root.find(f"{{{SOAP12}}}Body/{{{WSD}}}Probe")
    if probe is None:
        return None
    types = (probe.findtext(f"{{{WSD}}}Types") or "").split()
    for qname in types or ["any"]:
        prefix, _, local = qname.rpartition(":")
        if types and local != "NetworkVideoTransmitter":
            continue
        if types and prefix in prefixes and prefixes[prefix] != DN:
            continue
        return root.findtext(f"{{{SOAP12}}}Header/{{{WSA}}}MessageID") or ""
    return None


def probe_matches(camera: Camera, relates_to: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>'
        f'<SOAP-ENV:Envelope xmlns:SOAP-ENV="{SOAP12}" xmlns:wsa="{WSA}" xmlns:d="{WSD}" xmlns:dn="{DN}">'
        "<SOAP-ENV:Header>"
        f"<wsa:MessageID>urn:uuid:{secrets.token_hex(16)}</wsa:MessageID>"
        f"<wsa:RelatesTo>{relates_to}</wsa:RelatesTo>"
        "<wsa:To>http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous</wsa:To>"
        "<wsa:Action>http://schemas.xmlsoap.org/ws/2005/04/discovery/ProbeMatches</wsa:Action>"
        "</SOAP-ENV:Header>"
        "<SOAP-ENV:Body><d:ProbeMatches><d:ProbeMatch>"
        f"<wsa:EndpointReference><wsa:Address>{camera.address_prefix}{camera.uuid}</wsa:Address></wsa:EndpointReference>"
        "<d:Types>dn:NetworkVideoTransmitter</d:Types>"
        f"<d:Scopes>{' '.join(camera.scopes)}</d:Scopes>"
        f"<d:XAddrs>{' '.join(camera.xaddrs)}</d:XAddrs>"
        "<d:MetadataVersion>1</d:MetadataVersion>"
        "</d:ProbeMatch></d:ProbeMatches></SOAP-ENV:Body></SOAP-ENV:Envelope>"
    ).encode()


def _answer(operation: str, inner: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><env:Envelope xmlns:env="{SOAP12}" xmlns:tds="{TDS}" xmlns:tt="{TT}">'
        f"<env:Body><tds:{operation}Response>{inner}</tds:{operation}Response></env:Body></env:Envelope>"
    ).encode()


def date_and_time() -> bytes:
    return _answer(
        "GetSystemDateAndTime",
        "<tds:SystemDateAndTime><tt:DateTimeType>NTP</tt:DateTimeType><tt:DaylightSavings>false</tt:DaylightSavings>"
        "</tds:SystemDateAndTime>",
    )


def network_interfaces(ip: str, mac: str) -> bytes:
    return _answer(
        "GetNetworkInterfaces",
        '<tds:NetworkInterfaces token="eth0"><tt:Enabled>true</tt:Enabled>'
        f"<tt:Info><tt:Name>eth0</tt:Name><tt:HwAddress>{mac}</tt:HwAddress><tt:MTU>1500</tt:MTU></tt:Info>"
        "<tt:IPv4><tt:Enabled>true</tt:Enabled><tt:Config>"
        f"<tt:Manual><tt:Address>{ip}</tt:Address><tt:PrefixLength>24</tt:PrefixLength></tt:Manual>"
        "<tt:DHCP>false</tt:DHCP></tt:Config></tt:IPv4></tds:NetworkInterfaces>",
    )


NOT_AUTHORIZED = (
    f'<?xml version="1.0" encoding="UTF-8"?><env:Envelope xmlns:env="{SOAP12}" xmlns:ter="http://www.onvif.org/ver10/error">'
    "<env:Body><env:Fault><env:Code><env:Value>env:Sender</env:Value><env:Subcode><env:Value>ter:NotAuthorized"
    '</env:Value></env:Subcode></env:Code><env:Reason><env:Text xml:lang="en">Sender not authorized</env:Text>'
    "</env:Reason></env:Fault></env:Body></env:Envelope>"
).encode()


def token_ok(body: ET.Element, username: str, password: str) -> bool:
    """A WS-UsernameToken PasswordDigest: base64(SHA-1(nonce bytes + Created + password)), the nonce base64."""
    token = body.find(f"{{{SOAP12}}}Header/{{{WSSE}}}Security/{{{WSSE}}}UsernameToken")
    if token is None or token.findtext(f"{{{WSSE}}}Username") != username:
        return False
    nonce = base64.b64decode(token.findtext(f"{{{WSSE}}}Nonce") or "")
    created = token.findtext(f"{{{WSU}}}Created") or ""
    expected = base64.b64encode(hashlib.sha1(nonce + created.encode() + password.encode()).digest()).decode()
    return token.findtext(f"{{{WSSE}}}Password") == expected


class Cameras:
    """The cameras of one test, served on the `cam` namespace's loop (`start`, `stop` run there)."""

    def __init__(self, *cameras: Camera) -> None:
        self.cameras = list(cameras)
        self.probes: list[bytes] = []
        self._transport: asyncio.DatagramTransport | None = None
        self._servers: list[asyncio.Server] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("0.0.0.0", 3702))
        membership = socket.inet_aton(GROUP) + socket.inet_aton(CAMERA_IPS[0])
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
        sock.setblocking(False)
        cameras = self

        class Responder(asyncio.DatagramProtocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                cameras._transport = transport  # type: ignore[assignment]

            def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
                cameras.probes.append(data)
                message_id = asks_for_transmitters(data)
                if message_id is None or cameras._transport is None:
                    return
                for camera in cameras.cameras:
                    if camera.on:
                        cameras._transport.sendto(probe_matches(camera, message_id), addr)

        await loop.create_datagram_endpoint(Responder, sock=sock)
        for host, port in sorted({(c.ip, c.port) for c in self.cameras}):
            self._servers.append(await asyncio.start_server(self._http, host, port))

    async def stop(self) -> None:
        if self._transport is not None:
            self._transport.close()
        for server in self._servers:
            server.close()
            await server.wait_closed()

    def _camera(self, host: str, port: int, path: str) -> Camera | None:
        for camera in self.cameras:
            if camera.ip == host and camera.port == port and path in camera.paths:
                return camera
        return None

    async def _http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            _, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            host, port = writer.get_extra_info("sockname")[:2]
            camera = self._camera(host, port, path)
            if camera is None or not camera.on:
                return  # closed without an answer
            status, answer = self._answer(camera, headers.get("content-type", ""), body)
            writer.write(
                f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
                f"Content-Type: application/soap+xml; charset=utf-8\r\nContent-Length: {len(answer)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + answer
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _answer(self, camera: Camera, content_type: str, body: bytes) -> tuple[int, bytes]:
        root = ET.fromstring(body)
        request = root.find(f"{{{SOAP12}}}Body/*")
        operation = "" if request is None else request.tag.rpartition("}")[2]
        camera.requests.append((operation, content_type, body))
        if operation == "GetSystemDateAndTime":
            return camera.date_status, date_and_time()
        if operation == "GetNetworkInterfaces":
            if camera.credentials is not None and not token_ok(root, *camera.credentials):
                return 400, NOT_AUTHORIZED
            return 200, network_interfaces(camera.ip, camera.mac)
        return 400, NOT_AUTHORIZED
