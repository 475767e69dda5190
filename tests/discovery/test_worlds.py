"""The simulated device world: plug/unplug bookkeeping, the `sim` handler's filters, and streams on change."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.discovery import Device, World
from devplace.discovery._worlds import SimDetails, parse_sim_details, select_devices

from .streams import next_of, pending_next, result_of


def test_plug_adds_nodes_and_devices_on_lists_by_id_with_properties() -> None:
    world = World()
    world.plug("gpu-2", ["node-a"], {"kind": "gpu"})
    world.plug("cam-1", ["node-a", "node-b"], {"kind": "camera"})
    world.plug("cam-1", ["node-c"])  # already plugged: adds a node, keeps properties
    assert world.devices_on("node-a") == [Device("cam-1", {"kind": "camera"}), Device("gpu-2", {"kind": "gpu"})]
    assert world.devices_on("node-c") == [Device("cam-1", {"kind": "camera"})]
    assert world.nodes_of("cam-1") == ["node-a", "node-b", "node-c"]
    assert world.devices_on("node-z") == []


def test_unplug_from_some_nodes_keeps_the_device_elsewhere_and_none_means_everywhere() -> None:
    world = World()
    world.plug("cam-1", ["node-a", "node-b"], {"kind": "camera"})
    world.unplug("cam-1", ["node-a", "node-x"])
    assert world.nodes_of("cam-1") == ["node-b"]
    world.unplug("cam-1")
    assert world.nodes_of("cam-1") == []
    assert world.devices_on("node-b") == []
    with pytest.raises(errors.NotFound, match="device 'cam-1' is not plugged in anywhere"):
        world.unplug("cam-1")


@pytest.mark.parametrize(
    ("device_id", "nodes", "path"), [("", ["a"], "device_id"), ("d", [], "nodes"), ("d", [""], "nodes")]
)
def test_plug_refuses_empty_names(device_id: str, nodes: list[str], path: str) -> None:
    world = World()
    with pytest.raises(errors.Invalid) as info:
        world.plug(device_id, nodes)
    assert info.value.fields[0].path == path
    assert world.devices_on("a") == []


def test_sim_details_default_to_all_devices_shared() -> None:
    assert parse_sim_details("") == SimDetails(kind=None, shared=True)
    assert parse_sim_details("kind: camera\nshared: false") == SimDetails(kind="camera", shared=False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: [a]", "discoveryDetails.kind: must be a string (quote it), got a list"),
        ("shared: 1", "discoveryDetails.shared: must be true or false, got a number 1"),
        ("kinds: camera", "discoveryDetails.kinds: unknown key (allowed: kind, shared)"),
        ("- camera", "discoveryDetails: must be a YAML mapping, got a list"),
    ],
)
def test_bad_sim_details_are_invalid_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        parse_sim_details(text)
    assert info.value.message.startswith(message)


@given(
    st.lists(st.tuples(st.text(min_size=1), st.sampled_from(["camera", "gpu", None])), unique_by=lambda t: t[0]),
    st.sampled_from(["camera", "gpu", None]),
    st.booleans(),
)
def test_select_keeps_exactly_the_matching_kind_and_stamps_shared(
    spec: list[tuple[str, str | None]], kind: str | None, shared: bool
) -> None:
    devices = [Device(i, {"kind": k} if k else {}) for i, k in spec]
    selected = select_devices(devices, SimDetails(kind=kind, shared=shared))
    assert [d.id for d in selected] == [i for i, k in spec if kind is None or k == kind]
    assert all(d.shared is shared for d in selected)


async def test_sim_stream_sends_full_list_on_every_change_touching_its_node() -> None:
    world = World()
    world.plug("cam-1", ["node-a"], {"kind": "camera"})
    stream = world.handler("node-a").discover("")
    assert await next_of(stream) == [Device("cam-1", {"kind": "camera"})]

    world.plug("gpu-1", ["node-a", "node-b"], {"kind": "gpu"})
    assert await next_of(stream) == [Device("cam-1", {"kind": "camera"}), Device("gpu-1", {"kind": "gpu"})]

    world.plug("gpu-1", ["node-a"], {"kind": "gpu", "memory": "16Gi"})  # new properties reach every node
    assert (await next_of(stream))[1] == Device("gpu-1", {"kind": "gpu", "memory": "16Gi"})

    world.unplug("cam-1")
    assert await next_of(stream) == [Device("gpu-1", {"kind": "gpu", "memory": "16Gi"})]
    await stream.aclose()


async def test_sim_stream_ignores_changes_on_other_nodes_and_of_other_kinds() -> None:
    world = World()
    stream = world.handler("node-a").discover("kind: camera\nshared: false")
    assert await next_of(stream) == []
    waiting = await pending_next(stream)
    world.plug("cam-9", ["node-b"], {"kind": "camera"})
    world.plug("gpu-1", ["node-a"], {"kind": "gpu"})
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done()
    world.plug("cam-1", ["node-a"], {"kind": "camera"})
    assert await result_of(waiting) == [Device("cam-1", {"kind": "camera"}, shared=False)]
    await stream.aclose()


async def test_sim_stream_raises_invalid_before_yielding_for_bad_details() -> None:
    stream = World().handler("node-a").discover("kind: 3")
    with pytest.raises(errors.Invalid, match=r"discoveryDetails\.kind"):
        await next_of(stream)


async def test_two_streams_of_one_node_both_see_a_change() -> None:
    world = World()
    handler = world.handler("node-a")
    first, second = handler.discover(""), handler.discover("kind: camera")
    assert await next_of(first) == await next_of(second) == []
    world.plug("cam-1", ["node-a"], {"kind": "camera"})
    assert await next_of(first) == await next_of(second) == [Device("cam-1", {"kind": "camera"})]
    await first.aclose()
    await second.aclose()
