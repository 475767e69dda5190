"""The `opcua` handler: Akri's discoveryDetails (every bad one refused naming its field), the Server-type and
application-name rules over plain records, and real asyncua peers on 127.0.0.1: a discovery server with servers
registered, servers asked directly, servers that stop or unregister, a server URL whose host does not resolve, and the
in-process path through an agent into Instances (with bad details as a condition on the Configuration).

The peers (tests/discovery/opcuas.py) are shared by the module: a discovery server `LDS` with `Thermo-A` and
`Thermo-B` (Servers) and `Console-C` (ClientAndServer) registered. Tests that stop or unregister a server start their
own. Rounds run on the FakeClock; reads of a stream are bounded against a hang, never timed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import yaml
from asyncua import ua
from asyncua.client.client import Client
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.agent import _instances as instances
from devplace.clocks import FakeClock
from devplace.discovery import Device, OpcuaHandler, builtin_registry
from devplace.discovery._opcua import (
    LOCAL_DISCOVERY_SERVER,
    OPCUA_DISCOVERY_URL,
    Application,
    FilterList,
    OpcuaDetails,
    chosen_url,
    keeps,
    parse_details,
    server_urls,
)
from devplace.store import Store
from tests.agent.conftest import Nodes, configuration
from tests.processes import poll_until
from tests.servers import free_port

from .opcuas import Peers, peers, unregister, url_of

BOUND = 30.0  # seconds a stream may take to answer; guards against a hung test, not a timing assertion
INTERVAL = 10.0


def details(*urls: str, names: dict[str, Any] | None = None) -> str:
    raw: dict[str, Any] = {"opcuaDiscoveryMethod": {"standard": {"discoveryUrls": list(urls)}}}
    if names is not None:
        raw["applicationNames"] = names
    return yaml.safe_dump(raw)


def device(url: str) -> Device:
    return Device(id=url, properties={OPCUA_DISCOVERY_URL: url}, shared=True)


# -- discoveryDetails ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("opcuaDiscoveryMethod: {standard: {}}", OpcuaDetails((LOCAL_DISCOVERY_SERVER,))),
        ("opcuaDiscoveryMethod: {standard: }", OpcuaDetails(("opc.tcp://localhost:4840/",))),
        (  # Akri's own example (discovery_handler.rs)
            "opcuaDiscoveryMethod:\n  standard:\n    discoveryUrls:\n    - opc.tcp://127.0.0.1:4855/\n"
            'applicationNames:\n  action: Include\n  items:\n  - "Some application name"\n',
            OpcuaDetails(("opc.tcp://127.0.0.1:4855/",), FilterList(("Some application name",), "Include")),
        ),
        (
            "opcuaDiscoveryMethod: {standard: {discoveryUrls: ['opc.tcp://[::1]:4840', 'opc.tcp://plc:4841/x']}}\n"
            "applicationNames: {items: [A, B]}",
            OpcuaDetails(("opc.tcp://[::1]:4840", "opc.tcp://plc:4841/x"), FilterList(("A", "B"), "Include")),
        ),
        (
            "opcuaDiscoveryMethod: {standard: {}}\napplicationNames: {action: Exclude, items: []}",
            OpcuaDetails((LOCAL_DISCOVERY_SERVER,), FilterList((), "Exclude")),
        ),
    ],
)
def test_details_read_as_akri_reads_them_with_the_local_discovery_server_as_default(
    text: str, expected: OpcuaDetails
) -> None:
    assert parse_details(text) == expected


URLS = "discoveryDetails.opcuaDiscoveryMethod.standard.discoveryUrls"
NAMES = "discoveryDetails.applicationNames"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "discoveryDetails.opcuaDiscoveryMethod: required: e.g. opcuaDiscoveryMethod: {standard: {discoveryUrls:"),
        ("applicationNames: {items: [a]}", "discoveryDetails.opcuaDiscoveryMethod: required"),
        ("colour: red", "discoveryDetails.colour: unknown key (allowed: opcuaDiscoveryMethod, applicationNames)"),
        ("[a, b", "discoveryDetails: not valid YAML"),
        ("opcuaDiscoveryMethod: standard", "discoveryDetails.opcuaDiscoveryMethod: must be a mapping, got a string"),
        ("opcuaDiscoveryMethod: {}", "discoveryDetails.opcuaDiscoveryMethod: must name a method: standard"),
        ("opcuaDiscoveryMethod: {scan: {}}", "discoveryDetails.opcuaDiscoveryMethod.scan: unknown key"),
        (
            "opcuaDiscoveryMethod: {standard: {urls: []}}",
            "discoveryDetails.opcuaDiscoveryMethod.standard.urls: unknown",
        ),
        ("opcuaDiscoveryMethod: {standard: {discoveryUrls: []}}", f"{URLS}: names no URL (leave it out to ask"),
        (
            "opcuaDiscoveryMethod: {standard: {discoveryUrls: opc.tcp://a:1/}}",
            f"{URLS}: must be a list of strings, got a string",
        ),
        ("opcuaDiscoveryMethod: {standard: {discoveryUrls: [4840]}}", f"{URLS}[0]: must be a string (quote it)"),
        (details("opc.tcp://a:1/", "http://plc:80/"), f"{URLS}[1]: must be an opc.tcp:// URL, got 'http://plc:80/'"),
        (details("opc.tcp://plc/"), f"{URLS}[0]: names no port (Akri needs one, e.g. opc.tcp://plc:4840/)"),
        (details("opc.tcp://:4840/"), f"{URLS}[0]: names no host"),
        (details("opc.tcp://plc:99999/"), f"{URLS}[0]: not a URL (Port out of range"),
        (details("opc.tcp://a:1/", names={"items": ["A"], "action": "include"}), f"{NAMES}.action: must be Include"),
        (details("opc.tcp://a:1/", names={"action": "Exclude"}), f"{NAMES}.items: required"),
        (details("opc.tcp://a:1/", names={"items": "A"}), f"{NAMES}.items: must be a list of strings, got a string"),
        (details("opc.tcp://a:1/", names={"items": [7]}), f"{NAMES}.items[0]: must be a string (quote it), got a"),
        (details("opc.tcp://a:1/", names={"items": [], "mode": "x"}), f"{NAMES}.mode: unknown key"),
        ("opcuaDiscoveryMethod: {standard: {}}\napplicationNames: [A]", f"{NAMES}: must be a mapping, got a list"),
    ],
)
def test_bad_details_are_invalid_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        parse_details(text)
    assert info.value.message.startswith(message), info.value.message


hosts = st.sampled_from(["127.0.0.1", "localhost", "plc-7.factory.example", "[::1]", "10.0.0.5"])
urls = st.builds(
    "opc.tcp://{}:{}{}".format, hosts, st.integers(1, 65535), st.sampled_from(["", "/", "/UA/Server", "/a/b/"])
)
filters = st.none() | st.builds(
    FilterList,
    st.lists(st.text(min_size=0, max_size=8), max_size=3).map(tuple),
    st.sampled_from(["Include", "Exclude"]),
)


@given(st.lists(urls, min_size=1, max_size=4), filters)
def test_any_akri_shaped_details_round_trip_through_yaml(chosen: list[str], names: FilterList | None) -> None:
    raw: dict[str, Any] = {"opcuaDiscoveryMethod": {"standard": {"discoveryUrls": chosen}}}
    if names is not None:
        raw["applicationNames"] = {"items": list(names.items), "action": names.action}
    assert parse_details(yaml.safe_dump(raw)) == OpcuaDetails(tuple(chosen), names)


@given(st.text(max_size=200))
def test_any_text_parses_or_is_invalid_naming_a_field_under_discovery_details(text: str) -> None:
    try:
        parse_details(text)
    except errors.Invalid as e:
        message = e.message
    else:
        return
    assert message.startswith("discoveryDetails")


# -- Server applications, names, URLs (pure) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "kept"),
    [
        (None, ["Thermo-A", "Thermo-B"]),
        (FilterList(("Thermo-A",)), ["Thermo-A"]),
        (FilterList(("Thermo-A",), "Exclude"), ["Thermo-B"]),
        (FilterList((), "Include"), []),  # Include with no items keeps nothing (Akri's rule)
        (FilterList((), "Exclude"), ["Thermo-A", "Thermo-B"]),
        (FilterList(("thermo-a", "Thermo-A ")), []),  # exact text: no case folding, no trimming
    ],
)
def test_the_application_name_filter_follows_akris_keep_and_drop_rules(
    names: FilterList | None, kept: list[str]
) -> None:
    assert [n for n in ("Thermo-A", "Thermo-B") if keeps(names, n)] == kept


def app(name: str, *urls: str, kind: int = 0) -> Application:
    return Application(name=name, type=kind, discovery_urls=urls)


def test_only_server_applications_are_devices_and_each_url_is_reported_once() -> None:
    lds = [
        app("LDS", "opc.tcp://lds:4840/", kind=3),
        app("A", "opc.tcp://a:1/"),
        app("Client", "opc.tcp://cl:1/", kind=1),
        app("Both", "opc.tcp://both:1/", kind=2),
        app("B", "opc.tcp://b:1/"),
    ]
    direct = [app("B", "opc.tcp://b:1/"), app("A", "opc.tcp://a:1/")]  # registered twice: not adjacent
    assert server_urls([lds, direct], None) == ["opc.tcp://a:1/", "opc.tcp://b:1/"]


@pytest.mark.parametrize(
    ("discovery_urls", "chosen"),
    [
        (("http://a/", "opc.tcp://a:1/", "opc.tcp://a:2/"), "opc.tcp://a:1/"),  # the first opc.tcp one
        (("https://a/", "opc.https://a/"), "https://a/"),  # else the first
        ((), None),
    ],
)
def test_a_server_is_reported_by_its_first_opc_tcp_discovery_url(
    discovery_urls: tuple[str, ...], chosen: str | None
) -> None:
    assert chosen_url(app("A", *discovery_urls)) == chosen


def test_a_server_without_discovery_urls_is_skipped() -> None:
    assert server_urls([[app("A"), app("B", "opc.tcp://b:1/")]], None) == ["opc.tcp://b:1/"]


applications = st.builds(
    Application,
    name=st.sampled_from(["A", "B", "C"]),
    type=st.integers(0, 3),
    discovery_urls=st.lists(st.sampled_from(["opc.tcp://a:1/", "opc.tcp://b:1/", "http://c/"]), max_size=2).map(tuple),
)


@given(st.lists(st.lists(applications, max_size=5), max_size=3), filters)
def test_reported_urls_are_unique_and_each_is_a_kept_servers_chosen_url(
    answers: list[list[Application]], names: FilterList | None
) -> None:
    found = server_urls(answers, names)
    assert len(found) == len(set(found))
    candidates = [chosen_url(a) for answer in answers for a in answer if a.type == 0 and keeps(names, a.name)]
    assert found == list(dict.fromkeys(u for u in candidates if u is not None))


# -- real peers -----------------------------------------------------------------------------------------------------


class World:
    def __init__(self, opened: Peers) -> None:
        self.peers = opened
        self.lds = opened.discovery_server()
        self.lds_url = url_of(self.lds)
        self.a = url_of(opened.server("Thermo-A", path="/a/", register_at=self.lds_url))
        self.b = url_of(opened.server("Thermo-B", path="/b/", register_at=self.lds_url))
        self.c = url_of(opened.server("Console-C", kind=ua.ApplicationType.ClientAndServer, register_at=self.lds_url))


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with peers() as opened:
        yield World(opened)


async def next_list(stream: AsyncIterator[list[Device]], clock: FakeClock) -> list[Device]:
    """The stream's next list, moving the FakeClock one interval whenever the handler waits for its next round."""
    task = asyncio.ensure_future(anext(stream))
    try:
        async with asyncio.timeout(BOUND):
            while not task.done():
                if clock.pending_sleepers:
                    await clock.advance(INTERVAL)
                else:
                    await asyncio.sleep(0.01)  # the handler is talking to the peers (real I/O)
        return task.result()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_a_discovery_server_yields_one_shared_device_per_server_registered_with_it(
    world: World, clock: FakeClock
) -> None:
    async with aclosing(OpcuaHandler(clock=clock).discover(details(world.lds_url))) as stream:
        assert await next_list(stream, clock) == [device(world.a), device(world.b)]  # no LDS, no ClientAndServer


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ({"items": ["Thermo-A"]}, ["a"]),
        ({"items": ["Thermo-A"], "action": "Exclude"}, ["b"]),
        ({"items": [], "action": "Include"}, []),
        ({"items": [], "action": "Exclude"}, ["a", "b"]),
        ({"items": ["Console-C", "LDS"]}, []),  # the filter cannot bring back what is not a Server
    ],
)
async def test_the_application_name_filter_chooses_among_the_registered_servers(
    world: World, clock: FakeClock, names: dict[str, Any], expected: list[str]
) -> None:
    handler = OpcuaHandler(clock=clock)
    async with aclosing(handler.discover(details(world.lds_url, names=names))) as stream:
        assert await next_list(stream, clock) == [device(getattr(world, x)) for x in expected]


async def test_a_server_asked_directly_answers_for_itself_and_one_found_twice_is_one_device(
    world: World, clock: FakeClock
) -> None:
    async with aclosing(OpcuaHandler(clock=clock).discover(details(world.a, world.lds_url, world.c))) as stream:
        assert await next_list(stream, clock) == [device(world.a), device(world.b)]


async def test_a_url_that_does_not_answer_is_logged_once_and_the_others_still_count(
    world: World, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    dead = f"opc.tcp://127.0.0.1:{free_port()}/"
    handler = OpcuaHandler(clock=clock)
    with caplog.at_level(logging.INFO, logger="devplace.discovery._opcua"):
        async with aclosing(handler.discover(details(dead, world.lds_url))) as stream:
            assert await next_list(stream, clock) == [device(world.a), device(world.b)]
            await clock.advance(INTERVAL)  # a second round, with the same outcome: no new list, no new line
            await clock.advance(INTERVAL)
    failures = [r.getMessage() for r in caplog.records if "FindServers failed" in r.getMessage()]
    assert len(failures) == 1
    assert failures[0].startswith(f"opcua: FindServers failed: {dead}: ")


async def test_a_server_that_stops_leaves_the_list_at_the_next_round(world: World, clock: FakeClock) -> None:
    going = world.peers.server("Thermo-D")
    url = url_of(going)
    async with aclosing(OpcuaHandler(clock=clock).discover(details(url, world.a))) as stream:
        assert await next_list(stream, clock) == [device(url), device(world.a)]
        await world.peers.stop(going)
        assert await next_list(stream, clock) == [device(world.a)]


async def test_a_server_that_unregisters_from_the_discovery_server_leaves_the_list(
    world: World, clock: FakeClock
) -> None:
    going = world.peers.server("Thermo-E", path="/e/", register_at=world.lds_url)
    url = url_of(going)
    try:
        async with aclosing(OpcuaHandler(clock=clock).discover(details(world.lds_url))) as stream:
            assert await next_list(stream, clock) == [device(world.a), device(world.b), device(url)]
            await world.peers.arun(unregister(going, world.lds_url))
            assert await next_list(stream, clock) == [device(world.a), device(world.b)]
    finally:
        await world.peers.stop(going)


async def register_by_hand(lds_url: str, uri: str, url: str, online: bool) -> None:
    """What a server elsewhere sends a discovery server: RegisterServer naming its URL (here, one nobody serves)."""
    client = Client(lds_url)
    await client.connect_sessionless()
    try:
        registered = ua.RegisteredServer(
            ServerUri=uri,
            ServerNames=[ua.LocalizedText("PLC-7")],
            ServerType=ua.ApplicationType.Server,
            DiscoveryUrls=[url],
            IsOnline=online,
        )
        await client.uaclient.register_server(registered)
    finally:
        await client.disconnect_sessionless()


async def test_a_server_url_whose_host_does_not_resolve_is_reported_as_given_with_one_warning(
    world: World, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    plc = "opc.tcp://plc-7.invalid:4855/UA/PLC"
    await register_by_hand(world.lds_url, "urn:devplace-tests:plc-7", plc, online=True)
    try:
        with caplog.at_level(logging.WARNING, logger="devplace.discovery._opcua"):
            async with aclosing(OpcuaHandler(clock=clock).discover(details(world.lds_url))) as stream:
                # Akri would report the discovery server's host and port with the PLC's path: another server's URL
                assert await next_list(stream, clock) == [device(world.a), device(world.b), device(plc)]
                await clock.advance(INTERVAL)
                await clock.advance(INTERVAL)
        warnings = [r.getMessage() for r in caplog.records if "cannot resolve" in r.getMessage()]
        assert warnings == [
            f"opcua: server URL {plc} names a host this node cannot resolve; reported as the server gave it "
            "(Akri would put the discovery server's host and port in its place, naming the wrong server)"
        ]
    finally:
        await register_by_hand(world.lds_url, "urn:devplace-tests:plc-7", plc, online=False)


async def test_bad_details_raise_invalid_before_any_list_and_end_the_stream(clock: FakeClock) -> None:
    stream = OpcuaHandler(clock=clock).discover(details("opc.tcp://plc/"))
    with pytest.raises(errors.Invalid) as info:
        await asyncio.wait_for(anext(stream), BOUND)
    assert (
        info.value.message == f"{URLS}[0]: names no port (Akri needs one, e.g. opc.tcp://plc:4840/): 'opc.tcp://plc/'"
    )
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(stream), BOUND)


def test_the_node_registry_holds_opcua_when_the_agent_runs_it() -> None:
    assert "opcua" in builtin_registry("node-a", opcua=OpcuaHandler()).names()
    assert "opcua" not in builtin_registry("node-a").names()


# -- through the agent into Instances -------------------------------------------------------------------------------


@pytest.fixture
async def nodes(memory_store: Store, clock: FakeClock, sock_dir: Path) -> AsyncIterator[Nodes]:
    fleet = Nodes(memory_store, clock, sock_dir)
    yield fleet
    await fleet.close()


async def opcua_node(nodes: Nodes) -> None:
    agent = await nodes.add("node-a")
    agent.handlers.add(OpcuaHandler(clock=nodes.clock))


async def instances_of(store: Store, cfg: str, count: int) -> list[dict[str, Any]]:
    async def listed() -> list[dict[str, Any]] | None:
        found = [i for i in (await store.list("Instance")).items if i["spec"]["configurationName"] == cfg]
        return found if len(found) == count else None

    return sorted(
        await poll_until(listed, f"{count} Instance(s) of {cfg}", timeout=BOUND, interval=0.01),
        key=lambda i: i["metadata"]["name"],
    )


async def test_through_the_agent_each_server_is_a_shared_instance_named_as_akri_names_it(
    world: World, nodes: Nodes
) -> None:
    await opcua_node(nodes)
    await nodes.store.create(configuration("thermos", capacity=1, handler="opcua", details=details(world.lds_url)))
    found = await instances_of(nodes.store, "thermos", 2)
    expected = sorted((instances.instance_name("thermos", u, "node-a", True), u) for u in (world.a, world.b))
    assert [(i["metadata"]["name"], i["spec"]["brokerProperties"][OPCUA_DISCOVERY_URL]) for i in found] == expected
    assert [(i["spec"]["shared"], i["spec"]["nodes"]) for i in found] == [(True, ["node-a"])] * 2


async def conditions(store: Store, name: str) -> list[dict[str, Any]]:
    cfg = await store.get("Configuration", name, "default")
    found = (cfg.get("status") or {}).get("conditions") or []
    return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in found]


async def test_bad_details_are_a_condition_on_the_configuration_naming_the_field_and_crash_nothing(
    world: World, nodes: Nodes
) -> None:
    await opcua_node(nodes)
    bad = details(world.lds_url, names={"items": ["Thermo-A"], "action": "Only"})
    await nodes.store.create(configuration("broken", handler="opcua", details=bad))
    await nodes.store.create(configuration("thermos", handler="opcua", details=details(world.a)))

    async def condition() -> list[dict[str, Any]]:
        return await conditions(nodes.store, "broken")

    assert await poll_until(condition, "a condition on broken", timeout=BOUND, interval=0.01) == [
        {
            "type": "DiscoveryFailed",
            "status": "True",
            "reason": "InvalidDiscoveryDetails",
            "message": "discoveryDetails.applicationNames.action: must be Include or Exclude (exact case), got 'Only'",
            "node": "node-a",
        }
    ]
    assert len(await instances_of(nodes.store, "thermos", 1)) == 1  # the agent and its other discoveries go on
    cfg = await nodes.store.get("Configuration", "broken", "default")
    cfg["spec"]["discoveryHandler"]["discoveryDetails"] = details(world.lds_url, names={"items": ["Thermo-A"]})
    await nodes.store.update(cfg)
    [fixed] = await instances_of(nodes.store, "broken", 1)
    assert fixed["spec"]["brokerProperties"][OPCUA_DISCOVERY_URL] == world.a
    assert await conditions(nodes.store, "broken") == []
