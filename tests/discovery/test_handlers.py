"""The per-node handler registry: find by name, replace on re-add, wake waiters on every change."""

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
