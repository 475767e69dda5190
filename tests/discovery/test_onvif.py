"""The `onvif` handler against cameras written in the tests, on a two-namespace network (tests/discovery/onvifcams.py):
Akri's probe reaches them by multicast, they answer, the handler calls GetSystemDateAndTime and GetNetworkInterfaces;
filters by IP, MAC, scope and uuid keep and drop as Akri's do; a camera that stops answering leaves the list; the
Configuration's credentials sign GetNetworkInterfaces. Multicast never leaves the namespaces.

Each round waits `discoveryTimeoutSeconds` (1 s, the least Akri allows) of real time for replies; the period between
rounds is on a FakeClock, advanced whenever the handler sleeps on it. Filter cases run as concurrent streams, so one
round serves them all. The bounds below only guard against a hung test; nothing asserts a duration.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from devplace.clocks import FakeClock
from devplace.discovery import Device
from devplace.discovery import _onvifwire as wire
from devplace.discovery._onvif import OnvifHandler
from devplace.store import Store
from tests.agent.conftest import Nodes, configuration

from .onvifcams import CAMERA_IPS, Camera, Cameras, Lan, NetnsLoop, make_lan

BOUND = 30.0

A = Camera(uuid="5f5a69c2-e0ae-504f-829b-00fcdab169cc", ip=CAMERA_IPS[0], mac="aa:bb:cc:00:00:01",
           scopes=("onvif://www.onvif.org/name/a", "onvif://www.onvif.org/location/hall"))  # fmt: skip
B = Camera(uuid="7A21DC67-8438-5588-1547-4D1349048438", ip=CAMERA_IPS[1], mac="aa:bb:cc:00:00:02",
           scopes=("onvif://www.onvif.org/name/b", "onvif://www.onvif.org/location/hall"))  # fmt: skip
C = Camera(uuid="6a67158b-42b1-400b-8afe-1bec9a5d7909", ip=CAMERA_IPS[2], mac="aa:bb:cc:00:00:03",
           scopes=("onvif://www.onvif.org/name/c",))  # fmt: skip


def fresh(camera: Camera, **changes: Any) -> Camera:
    """A copy of one of the cameras above (cameras record requests and can be switched off: one per test)."""
    fields = {k: getattr(camera, k) for k in ("uuid", "ip", "mac", "scopes", "port", "paths", "credentials")}
    return Camera(**(fields | changes))


def url(camera: Camera, i: int = 0) -> str:
    return camera.xaddrs[i]


@pytest.fixture(scope="module")
def lan() -> Iterator[Lan]:
    with make_lan() as made:
        yield made


class Network:
    """The test's side of the two namespaces: cameras served in `cam`, the handler's streams run in `dh`."""

    def __init__(self, lan: Lan) -> None:
        self.cam = NetnsLoop(lan.cam)
        self.dh = NetnsLoop(lan.dh)
        self.clock = FakeClock()
        self.handler = OnvifHandler(clock=self.clock, http_timeout=5.0)  # a loaded machine is no dead camera
        self._cameras: list[Cameras] = []
        self._streams: list[AsyncGenerator[list[Device], None]] = []

    async def serve(self, *cameras: Camera) -> Cameras:
        served = Cameras(*cameras)
        await self.cam.run(served.start())
        self._cameras.append(served)
        return served

    async def switch(self, camera: Camera, on: bool) -> None:
        async def flip() -> None:
            camera.on = on

        await self.cam.run(flip())

    def open(
        self, details: str = "", properties: Mapping[str, bytes | None] | None = None
    ) -> AsyncIterator[list[Device]]:
        stream = self.handler.discover(details, properties)
        self._streams.append(stream)
        return stream

    async def next_list(self, stream: AsyncIterator[list[Device]]) -> list[Device]:
        """The stream's next list, moving the FakeClock past every period the handler waits out meanwhile."""
        clock = self.clock

        async def step() -> list[Device]:
            task = asyncio.ensure_future(anext(stream))
            async with asyncio.timeout(BOUND):
                while not task.done():
                    if clock.pending_sleepers:
                        await clock.advance(self.handler.interval)
                    else:
                        await asyncio.sleep(0.01)  # a round's network I/O
            return task.result()

        return await self.dh.run(step())

    async def next_lists(self, *streams: AsyncIterator[list[Device]]) -> list[list[Device]]:
        """The next list of each stream, read concurrently (one round serves them all)."""

        async def steps() -> list[list[Device]]:
            async with asyncio.timeout(BOUND):
                return list(await asyncio.gather(*(anext(s) for s in streams)))

        return await self.dh.run(steps())

    async def close(self) -> None:
        async def close_streams() -> None:
            for stream in self._streams:
                await stream.aclose()

        await self.dh.run(close_streams())
        for cameras in self._cameras:
            await self.cam.run(cameras.stop())


@pytest.fixture
async def net(lan: Lan) -> AsyncIterator[Network]:
    network = Network(lan)
    network.cam.start()
    network.dh.start()
    try:
        yield network
    finally:
        try:
            await network.close()
        finally:
            network.dh.stop()
            network.cam.stop()


def ids(devices: list[Device]) -> list[str]:
    return [d.id for d in devices]


def uuids(devices: list[Device]) -> list[str]:
    return [d.properties[wire.DEVICE_UUID] for d in devices]


# -- against cameras on the namespaces' network -------------------------------------------------------------------


async def test_a_camera_is_one_shared_device_per_xaddr_with_akris_id_and_properties(net: Network) -> None:
    camera = fresh(B, paths=("/onvif/device_service", "/onvif/other"))
    cameras = await net.serve(camera)
    devices = await net.next_list(net.open())
    uid = camera.uuid.lower()  # the Address's uuid, lower-cased
    assert devices == [
        Device(
            id=f"{url(camera, i)}-{uid}",
            properties={
                wire.SERVICE_URL: url(camera, i),
                wire.DEVICE_UUID: uid,
                wire.IP_ADDRESS: camera.ip,
                wire.MAC_ADDRESS: camera.mac,
            },
            shared=True,
        )
        for i in (0, 1)
    ]
    [probe] = cameras.probes  # one probe per round, Akri's, its type prefix declared nowhere
    assert b"<d:Types>netwsdl:NetworkVideoTransmitter</d:Types>" in probe
    assert b"xmlns:netwsdl" not in probe
    action = 'application/soap+xml; charset=utf-8; action="http://www.onvif.org/ver10/device/wsdl/{}";'
    ops = ["GetNetworkInterfaces"] * 2 + ["GetSystemDateAndTime"] * 2  # per URL: liveness, then IP and MAC
    assert sorted((op, ct) for op, ct, _ in camera.requests) == [(op, action.format(op)) for op in ops]
    assert all(b"Security" not in body for op, _, body in camera.requests)  # no credentials, no token


FILTER_CASES: dict[str, str] = {
    "none": "",
    "ip include": "ipAddresses: {items: [10.77.0.3]}",
    "ip exclude": "ipAddresses: {action: Exclude, items: [10.77.0.3]}",
    "mac include, other case": "macAddresses: {items: ['AA:BB:CC:00:00:01']}",
    "mac exclude": "macAddresses: {action: Exclude, items: ['aa:bb:cc:00:00:01', 'aa:bb:cc:00:00:03']}",
    "scope include": "scopes: {items: ['onvif://www.onvif.org/location/hall']}",
    "scope exclude": "scopes: {action: Exclude, items: ['onvif://www.onvif.org/name/c']}",
    "scope prefix is no match": "scopes: {items: ['onvif://www.onvif.org/name']}",
    "uuid include, other case": "uuids: {items: ['7a21dc67-8438-5588-1547-4d1349048438']}",
    "uuid exclude": "uuids: {action: Exclude, items: ['5F5A69C2-E0AE-504F-829B-00FCDAB169CC']}",
    "exclude nothing": "ipAddresses: {action: Exclude, items: []}",
    "include nothing": "uuids: {items: []}",
    "two filters": "scopes: {items: ['onvif://www.onvif.org/location/hall']}\n"
    "macAddresses: {items: ['aa:bb:cc:00:00:02']}",
}


async def test_filters_by_ip_mac_scope_and_uuid_keep_and_drop_as_akris(net: Network) -> None:
    await net.serve(fresh(A), fresh(B), fresh(C))
    names = list(FILTER_CASES)
    lists = await net.next_lists(*(net.open(FILTER_CASES[name]) for name in names))
    a, b, c = A.uuid, B.uuid.lower(), C.uuid
    assert {name: uuids(devices) for name, devices in zip(names, lists, strict=True)} == {
        "none": [a, b, c],
        "ip include": [b],
        "ip exclude": [a, c],
        "mac include, other case": [a],
        "mac exclude": [b],
        "scope include": [a, b],
        "scope exclude": [a, b],
        "scope prefix is no match": [],
        "uuid include, other case": [b],
        "uuid exclude": [b, c],
        "exclude nothing": [a, b, c],
        "include nothing": [],
        "two filters": [b],
    }


async def test_a_camera_that_stops_answering_leaves_the_list_and_comes_back_when_it_answers(net: Network) -> None:
    a, b = fresh(A), fresh(B)
    await net.serve(a, b)
    stream = net.open()
    assert uuids(await net.next_list(stream)) == [a.uuid, b.uuid.lower()]
    await net.switch(b, on=False)
    assert uuids(await net.next_list(stream)) == [a.uuid]
    await net.switch(b, on=True)
    assert uuids(await net.next_list(stream)) == [a.uuid, b.uuid.lower()]


async def test_a_camera_that_fails_the_liveness_call_is_not_listed_nor_asked_more(net: Network) -> None:
    a, dead = fresh(A), fresh(B, date_status=500)
    await net.serve(a, dead)
    assert uuids(await net.next_list(net.open())) == [a.uuid]
    assert [op for op, _, _ in dead.requests] == ["GetSystemDateAndTime"]


async def test_get_network_interfaces_is_signed_with_the_configurations_credentials(net: Network) -> None:
    camera = fresh(A, credentials=("admin", "s3cret"))
    await net.serve(camera)
    key = camera.uuid.replace("-", "_")
    streams = {
        "none": net.open(),
        "by uuid": net.open("", {f"username_{key}": b"admin", f"password_{key}": b"s3cret"}),
        "default": net.open("", {"username_default": b"admin", "password_default": b"s3cret"}),
        "wrong, no filter": net.open("", {"username_default": b"admin", "password_default": b"nope"}),
        "wrong, ip filter": net.open(
            "ipAddresses: {items: [10.77.0.2]}", {"username_default": b"admin", "password_default": b"nope"}
        ),
    }
    lists = await net.next_lists(*streams.values())
    found = {name: [sorted(d.properties) for d in devices] for name, devices in zip(streams, lists, strict=True)}
    bare = sorted([wire.SERVICE_URL, wire.DEVICE_UUID])
    full = sorted([wire.SERVICE_URL, wire.DEVICE_UUID, wire.IP_ADDRESS, wire.MAC_ADDRESS])
    assert found == {
        "none": [bare],  # the camera refused: no IP and MAC, still a device
        "by uuid": [full],
        "default": [full],
        "wrong, no filter": [bare],
        "wrong, ip filter": [],  # an IP that is not known is dropped by an IP filter
    }
    signed = [body for op, _, body in camera.requests if op == "GetNetworkInterfaces" and b"UsernameToken" in body]
    assert len(signed) == 4
    assert all(b"#PasswordDigest" in body and b"s3cret" not in body for body in signed)


async def test_bad_details_are_refused_before_any_probe(net: Network) -> None:
    cameras = await net.serve(fresh(A))
    stream = net.open("ipAddresses: {items: 3}")

    async def first() -> object:
        try:
            return await anext(stream)
        except Exception as e:
            return e

    error = await net.dh.run(first())
    assert str(error) == "discoveryDetails.ipAddresses.items: must be a list of strings"
    assert cameras.probes == []


# -- the agent: bad details are a condition on the Configuration ----------------------------------------------------


@pytest.fixture
async def nodes(memory_store: Store, clock: FakeClock, sock_dir: Path) -> AsyncIterator[Nodes]:
    fleet = Nodes(memory_store, clock, sock_dir)
    yield fleet
    await fleet.close()


async def test_bad_onvif_details_put_a_condition_on_the_configuration_naming_the_field(nodes: Nodes) -> None:
    agent = await nodes.add("node-a")
    agent.handlers.add(OnvifHandler(clock=nodes.clock))
    await nodes.store.create(configuration(handler="onvif", details="uuids: {action: include, items: []}"))
    await nodes.settle()
    status = (await nodes.store.get("Configuration", "cams", "default"))["status"]
    [condition] = status["conditions"]
    assert (condition["type"], condition["reason"], condition["node"]) == (
        "DiscoveryFailed",
        "InvalidDiscoveryDetails",
        "node-a",
    )
    assert condition["message"].endswith(
        "discoveryDetails.uuids.action: must be Include or Exclude (exact case), got 'include'"
    )
    assert (await nodes.store.list("Instance")).items == []
    await nodes.store.create(configuration(name="echo", handler="debugEcho", details="descriptions: [foo0]"))
    await nodes.settle()  # the agent carries on: another Configuration still gets its Instance
    [instance] = (await nodes.store.list("Instance")).items
    assert instance["spec"]["configurationName"] == "echo"
