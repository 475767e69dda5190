"""The per-node handler registry: endpoints by name and uid (Akri's `name@endpoint`), replaced on re-add of the same
uid, kept side by side for different ones; waiters woken on every change."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

import pytest

from devplace import errors
from devplace.discovery import Device, DiscoveryHandler, HandlerRegistry


@dataclass
class _Fixed:
    name: str
    tag: str = ""

    async def discover(
        self, details: str, properties: Mapping[str, bytes] | None = None
    ) -> AsyncIterator[list[Device]]:
        yield [Device(self.tag or self.name, {})]


def test_get_of_unregistered_handler_names_it_and_the_node() -> None:
    registry = HandlerRegistry("node-a")
    with pytest.raises(errors.NotFound) as info:
        registry.get("udev")
    assert info.value.message == "no discovery handler 'udev' registered on node-a"


def test_add_replaces_a_handler_of_the_same_name_and_names_are_sorted() -> None:
    registry = HandlerRegistry("node-a")
    first, second = _Fixed("x", "1"), _Fixed("x", "2")
    registry.add(first)
    registry.add(_Fixed("a"))
    registry.add(second)
    assert registry.get("x") is second
    assert registry.names() == ["a", "x"]
    registry.remove("x")
    registry.remove("x")  # removing twice is a no-op
    assert registry.names() == ["a"]


@dataclass
class _Endpoint(_Fixed):
    uid: str = ""


def test_handlers_of_one_name_at_different_endpoints_are_kept_side_by_side_as_akri_merges_them() -> None:
    registry = HandlerRegistry("node-a")
    a, b = _Endpoint("udev", uid="udev@/a.sock"), _Endpoint("udev", uid="udev@/b.sock")
    registry.add(a)
    registry.add(b)
    assert registry.endpoints("udev") == {"udev@/a.sock": a, "udev@/b.sock": b}
    assert registry.get("udev") is b  # the newest
    again = _Endpoint("udev", "2", uid="udev@/a.sock")  # a restarted handler registers at its endpoint again
    registry.add(again)
    assert registry.endpoints("udev") == {"udev@/b.sock": b, "udev@/a.sock": again}
    assert not registry.discard(a)  # replaced: discarding the old one changes nothing
    assert registry.discard(b)  # one going away takes only itself
    assert registry.endpoints("udev") == {"udev@/a.sock": again}
    registry.remove("udev", "udev@/a.sock")
    assert registry.names() == []
    assert registry.endpoints("udev") == {}


def test_fixed_handler_satisfies_the_protocol() -> None:
    handler: DiscoveryHandler = _Fixed("x")
    assert handler.name == "x"


async def test_changed_returns_after_add_and_after_remove_but_not_before() -> None:
    registry = HandlerRegistry("node-a")
    waiter = asyncio.create_task(registry.changed())
    await asyncio.sleep(0)
    assert not waiter.done()
    registry.add(_Fixed("x"))
    await asyncio.wait_for(waiter, 1)

    waiter = asyncio.create_task(registry.changed())
    await asyncio.sleep(0)
    registry.remove("missing")
    await asyncio.sleep(0)
    assert not waiter.done()  # removing what is not there is no change
    registry.remove("x")
    await asyncio.wait_for(waiter, 1)
