"""opcua: OPC UA servers found through FindServers, as Akri's OPC UA discovery handler finds them.

The same handler runs in-process in `devplace agent` (registered as `opcua`) and as its own process speaking Akri's
discovery protocol (`devplace handler opcua`, through `devplace.discovery._serving`).

discoveryDetails, Akri's shape:

    opcuaDiscoveryMethod:
      standard:
        discoveryUrls: [opc.tcp://10.0.0.5:4840/]   # default: the local discovery server, opc.tcp://localhost:4840/
    applicationNames: {action: Include, items: [Thermostat]}  # optional; action Include (default) or Exclude

`opcuaDiscoveryMethod` is required (`standard: {}` takes the default URL). Stricter than Akri, so that a mistake is a
condition on the Configuration naming the field rather than a log line on one node: unknown keys, an empty
`discoveryUrls`, and a URL that is not `opc.tcp://host:port/...` with an explicit port are refused (Akri accepts them
and skips such a URL at every scan).

Discovery, as Akri's: every `interval` seconds (10, Akri's `DISCOVERY_INTERVAL_SECS`; settable), each discovery URL is
asked FindServers without a session (a local discovery server answers itself and the servers registered with it; any
server answers at least itself). Only applications of type Server are devices: Client, ClientAndServer and
DiscoveryServer applications are dropped, so the discovery server never appears. `applicationNames` compares the
application's name text exactly (Include keeps only the names listed, so Include with no items keeps none; Exclude
drops the names listed). A device's id and its one property `OPCUA_DISCOVERY_URL` are the application's first
`opc.tcp` discovery URL (else its first); applications without any are skipped with a log line. Devices are shared
(a server on the network is seen by every node that can reach it). A server registered with two discovery servers is
one device (Akri removes only adjacent repeats).

Gone: a server leaves the list at the first scan where no discovery URL lists it, or where the URL that listed it
does not answer (a stopped server asked directly; a stopped discovery server takes its registrants along). No grace
here: the agent keeps shared Instances through its offline grace.

Bounded I/O: each URL's exchange (TCP connect, Hello, OpenSecureChannel, FindServers, close) must finish within
`timeout` seconds (5; Akri bounds only the TCP connect, by 3 s, and its FindServers can hang for minutes). URLs are
asked concurrently. A URL that fails is logged once when it starts failing and once when it answers again, not at
every scan.

Unresolvable hosts: Akri replaces a server URL whose host does not resolve on the node with the discovery server's URL
plus the server's path, keeping the discovery server's host and port, which then names the discovery server, not
the server. devplace does not: the URL is reported as the server gave it (brokers' DNS may resolve what the node's
does not, e.g. a cluster Service name) and a warning says which URL did not resolve, once until it resolves again.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from devplace import errors
from devplace.clocks import Clock, SystemClock
from devplace.discovery import _details as d
from devplace.discovery._devices import Device
from devplace.discovery._handlers import ResolvedProperties

log = logging.getLogger(__name__)

HANDLER_NAME: Final = "opcua"
OPCUA_DISCOVERY_URL: Final = "OPCUA_DISCOVERY_URL"
OPC_TCP: Final = "opc.tcp"
LOCAL_DISCOVERY_SERVER: Final = "opc.tcp://localhost:4840/"
DISCOVERY_INTERVAL: Final = 10.0
"""Seconds between scans: Akri's `DISCOVERY_INTERVAL_SECS`."""
TIMEOUT: Final = 5.0

SERVER: Final = 0
"""OPC UA ApplicationType: Server 0, Client 1, ClientAndServer 2, DiscoveryServer 3."""

METHOD_PATH: Final = f"{d.ROOT}.opcuaDiscoveryMethod"
URLS_PATH: Final = f"{METHOD_PATH}.standard.discoveryUrls"
NAMES_PATH: Final = f"{d.ROOT}.applicationNames"


# -- discoveryDetails (pure) ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilterList:
    """Akri's FilterList: `items` (required) and `action`, Include (default) or Exclude, exact case."""

    items: tuple[str, ...]
    action: Literal["Include", "Exclude"] = "Include"

    def keeps(self, item: str) -> bool:
        return (item in self.items) == (self.action == "Include")


def keeps(names: FilterList | None, item: str) -> bool:
    """Akri's `should_include`: no list keeps everything."""
    return names is None or names.keeps(item)


@dataclass(frozen=True)
class OpcuaDetails:
    discovery_urls: tuple[str, ...] = (LOCAL_DISCOVERY_SERVER,)
    application_names: FilterList | None = None


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a discovery URL (None: it can): Akri needs `opc.tcp`, a host and an explicit port."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        return f"not a URL ({e})"
    if parts.scheme != OPC_TCP:
        return f"must be an {OPC_TCP}:// URL, got {url!r}"
    if not parts.hostname:
        return f"names no host: {url!r}"
    if port is None:
        return f"names no port (Akri needs one, e.g. {OPC_TCP}://{parts.hostname}:4840/): {url!r}"
    return None


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise errors.Invalid.field(path, f"must be a mapping, got {d._kind(value)}")
    return {str(k): v for k, v in value.items()}


def _refuse_unknown(value: Mapping[str, Any], allowed: tuple[str, ...], path: str) -> None:
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise errors.Invalid.field(f"{path}.{unknown[0]}", f"unknown key (allowed: {', '.join(allowed)})")


def _strings(value: Any, path: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise errors.Invalid.field(path, f"must be a list of strings, got {d._kind(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise errors.Invalid.field(f"{path}[{i}]", f"must be a string (quote it), got {d._kind(item)} {item!r}")
    return tuple(value)


def parse_filter_list(value: Any, path: str) -> FilterList:
    """A FilterList at `path`, or `errors.Invalid` naming the field."""
    raw = _mapping(value, path)
    _refuse_unknown(raw, ("items", "action"), path)
    if raw.get("items") is None:
        raise errors.Invalid.field(f"{path}.items", "required: the names to include or exclude")
    items = _strings(raw["items"], f"{path}.items")
    action = raw.get("action", "Include")
    if action not in ("Include", "Exclude"):
        raise errors.Invalid.field(f"{path}.action", f"must be Include or Exclude (exact case), got {action!r}")
    return FilterList(items, action)


def parse_details(text: str) -> OpcuaDetails:
    """Parse the opcua handler's discoveryDetails (module docstring); `errors.Invalid` naming the field otherwise."""
    raw = d.load_mapping(text)
    d.refuse_unknown(raw, ("opcuaDiscoveryMethod", "applicationNames"))
    if raw.get("opcuaDiscoveryMethod") is None:
        raise errors.Invalid.field(
            METHOD_PATH,
            f"required: e.g. opcuaDiscoveryMethod: {{standard: {{discoveryUrls: [{LOCAL_DISCOVERY_SERVER}]}}}}",
        )
    method = _mapping(raw["opcuaDiscoveryMethod"], METHOD_PATH)
    _refuse_unknown(method, ("standard",), METHOD_PATH)
    if "standard" not in method:
        raise errors.Invalid.field(METHOD_PATH, "must name a method: standard (the only one)")
    standard = _mapping(method["standard"], f"{METHOD_PATH}.standard")
    _refuse_unknown(standard, ("discoveryUrls",), f"{METHOD_PATH}.standard")
    urls: tuple[str, ...] = (LOCAL_DISCOVERY_SERVER,)
    if standard.get("discoveryUrls") is not None:
        urls = _strings(standard["discoveryUrls"], URLS_PATH)
        if not urls:
            raise errors.Invalid.field(
                URLS_PATH, f"names no URL (leave it out to ask the local discovery server {LOCAL_DISCOVERY_SERVER})"
            )
        for i, url in enumerate(urls):
            problem = url_problem(url)
            if problem is not None:
                raise errors.Invalid.field(f"{URLS_PATH}[{i}]", problem)
    names = None if raw.get("applicationNames") is None else parse_filter_list(raw["applicationNames"], NAMES_PATH)
    return OpcuaDetails(urls, names)


# -- from FindServers answers to devices (pure) ---------------------------------------------------------------------


@dataclass(frozen=True)
class Application:
    """One ApplicationDescription of a FindServers answer, in plain values."""

    name: str
    type: int
    discovery_urls: tuple[str, ...]
    uri: str = ""


def chosen_url(app: Application) -> str | None:
    """The URL Akri reports for `app`: its first `opc.tcp` discovery URL, else its first; None when it has none."""
    for url in app.discovery_urls:
        if url.startswith(OPC_TCP):
            return url
    return app.discovery_urls[0] if app.discovery_urls else None


def server_urls(answers: Iterable[Sequence[Application]], names: FilterList | None) -> list[str]:
    """The URLs of the Server applications `names` keeps, in answer order, each once."""
    found: dict[str, None] = {}
    for applications in answers:
        for app in applications:
            if app.type != SERVER or not keeps(names, app.name):
                continue
            url = chosen_url(app)
            if url is None:
                log.info("opcua: server %r (%s) lists no discovery URL: skipped", app.name, app.uri)
                continue
            found.setdefault(url, None)
    return list(found)


def opcua_device(url: str) -> Device:
    return Device(id=url, properties={OPCUA_DISCOVERY_URL: url}, shared=True)


def host_port(url: str) -> tuple[str, int | None] | None:
    """The host and port a server URL names (None: it names no host or does not parse)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname else None


# -- the I/O boundary -----------------------------------------------------------------------------------------------

Finder = Callable[[str, float], Awaitable[list[Application]]]
"""Ask one discovery URL FindServers within a timeout; `errors.Unavailable` when it does not answer."""
Resolver = Callable[[str, int | None, float], Awaitable[bool]]
"""Whether a host (and port) resolves on this node, within a timeout."""


async def find_servers(url: str, timeout: float) -> list[Application]:
    """FindServers at `url` without a session, through asyncua; the whole exchange bounded by `timeout`."""
    from asyncua.client.client import Client  # imported on first use: it takes most of a second

    client = Client(url, timeout=timeout)
    try:
        async with asyncio.timeout(timeout):
            await client.connect_sessionless()
            described = await client.find_servers()
            await client.close_secure_channel()
    except TimeoutError:
        raise errors.Unavailable(f"{url}: no answer within {timeout:g} s") from None
    except OSError as e:
        raise errors.Unavailable(f"{url}: {e.strerror or e}") from None
    except Exception as e:  # asyncua's status errors, and plain ones on a channel the server closed
        raise errors.Unavailable(f"{url}: {type(e).__name__}: {e}") from None
    finally:
        client.disconnect_socket()  # idempotent; also after a timeout cancelled the exchange half-way
    return [
        Application(
            name=a.ApplicationName.Text or "",
            type=int(a.ApplicationType),
            discovery_urls=tuple(u for u in a.DiscoveryUrls or () if u),
            uri=a.ApplicationUri or "",
        )
        for a in described
    ]


async def resolves(host: str, port: int | None, timeout: float) -> bool:
    try:
        async with asyncio.timeout(timeout):
            await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, TimeoutError):
        return False
    return True


# -- the handler (the shell) ----------------------------------------------------------------------------------------


class _Scan:
    """One stream's memory between scans: which URLs failed and which hosts did not resolve, to log changes once."""

    def __init__(self) -> None:
        self.failing: dict[str, str] = {}
        self.unresolved: set[str] = set()

    def answered(self, url: str) -> None:
        if self.failing.pop(url, None) is not None:
            log.info("opcua: %s answers FindServers again", url)

    def failed(self, url: str, problem: str) -> None:
        if url not in self.failing:
            log.warning("opcua: FindServers failed: %s (its servers leave the list until it answers)", problem)
        self.failing[url] = problem

    def resolution(self, url: str, ok: bool) -> None:
        if ok:
            self.unresolved.discard(url)
        elif url not in self.unresolved:
            self.unresolved.add(url)
            log.warning(
                "opcua: server URL %s names a host this node cannot resolve; reported as the server gave it "
                "(Akri would put the discovery server's host and port in its place, naming the wrong server)",
                url,
            )


class OpcuaHandler:
    """The `opcua` discovery handler (module docstring)."""

    name = HANDLER_NAME

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        interval: float = DISCOVERY_INTERVAL,
        timeout: float = TIMEOUT,
        finder: Finder | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self.interval = interval
        self.timeout = timeout
        self._clock: Clock = clock or SystemClock()
        self._find: Finder = finder or find_servers
        self._resolves: Resolver = resolver or resolves

    async def scan(self, details: OpcuaDetails, memory: _Scan | None = None) -> list[Device]:
        """One round: every discovery URL asked at once, the devices of the Server applications kept."""
        memory = memory or _Scan()
        found = await asyncio.gather(*(self._ask(url, memory) for url in details.discovery_urls))
        urls = server_urls(found, details.application_names)
        await asyncio.gather(*(self._check_host(url, memory) for url in urls))
        return [opcua_device(url) for url in urls]

    async def _ask(self, url: str, memory: _Scan) -> list[Application]:
        try:
            applications = await self._find(url, self.timeout)
        except errors.Unavailable as e:
            memory.failed(url, e.message)
            return []
        memory.answered(url)
        return applications

    async def _check_host(self, url: str, memory: _Scan) -> None:
        where = host_port(url)
        if where is not None:
            memory.resolution(url, await self._resolves(where[0], where[1], self.timeout))

    async def discover(
        self, details: str, properties: ResolvedProperties | None = None
    ) -> AsyncGenerator[list[Device], None]:
        """The OPC UA servers the details find, again whenever the list changes; `properties` are ignored (Akri's
        OPC UA handler reads none)."""
        parsed = parse_details(details)
        memory = _Scan()
        last: list[Device] | None = None
        while True:
            current = await self.scan(parsed, memory)
            if current != last:
                yield current
                last = current
            await self._clock.sleep(self.interval)
