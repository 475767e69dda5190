"""Discovery handlers and the per-node registry that finds them by name.

A handler turns a Configuration's `discoveryDetails` (a YAML string the handler parses) and its resolved
`discoveryProperties` (name -> bytes, e.g. credentials; Akri's `DiscoverRequest.discovery_properties`) into an async
stream of the *full current device list*: one list on start and one on every change (consumers replace, never
merge). Bad details raise `errors.Invalid` from the stream before anything is yielded, so the agent can put a
condition on the Configuration instead of crashing. A stream may end with `errors.Unavailable` (an external handler
went away); the agent then waits for `HandlerRegistry.changed` and asks again.

The registry is per node and lives on one event loop. Several handlers may register the same name (Akri merges
them: two udev handlers on different sockets): each is one endpoint of that name, told apart by its `uid` (an
external handler's is `name@endpoint`, as Akri's; a built-in handler has no `uid` attribute and is its name). `add`
replaces only an endpoint of the same uid (a handler that restarted registers again), `discard` removes exactly one
endpoint, and every add or remove wakes `changed()` waiters. A discovery asks every endpoint of its handler name
and takes the devices of all of them (`devplace.agent._discoveries`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from typing import Protocol

from devplace import errors
from devplace.discovery._devices import Device
from devplace.discovery._signals import Signal

ResolvedProperties = Mapping[str, bytes | None]
"""Resolved discoveryProperties: name -> bytes, None for a property with neither value nor valueFrom (sent without
bytes, as Akri sends it)."""


class DiscoveryHandler(Protocol):
    name: str

    def discover(
        self, details: str, properties: ResolvedProperties | None = None
    ) -> AsyncGenerator[list[Device], None]:
        """Yield the full current device list on start and on every change; raise `errors.Invalid` for bad details
        before yielding anything. `properties` are the Configuration's resolved discoveryProperties (None or empty:
        none); a handler that has no use for them ignores them. The consumer stops a stream with `aclose`, so
        implementations are async generators."""
        ...


def endpoint_uid(handler: DiscoveryHandler) -> str:
    """The endpoint a handler is among those of its name: its `uid` attribute when it has one, else its name."""
    uid = getattr(handler, "uid", None)
    return uid if isinstance(uid, str) and uid else handler.name


class HandlerRegistry:
    """The discovery handlers available on one node: by name, each name one or more endpoints (by uid)."""

    def __init__(self, node: str) -> None:
        self.node = node
        self._handlers: dict[str, dict[str, DiscoveryHandler]] = {}
        self._changed = Signal()

    def add(self, handler: DiscoveryHandler) -> None:
        """Register `handler` as an endpoint of its name, replacing the endpoint of the same uid (if any)."""
        endpoints = self._handlers.setdefault(handler.name, {})
        endpoints.pop(endpoint_uid(handler), None)  # a re-registration counts as the newest
        endpoints[endpoint_uid(handler)] = handler
        self._changed.fire()

    def remove(self, name: str, uid: str | None = None) -> None:
        """Forget the endpoint `uid` of `name`, or every endpoint of `name` (no-op if there is none)."""
        endpoints = self._handlers.get(name)
        if endpoints is None:
            return
        if uid is None:
            del self._handlers[name]
        elif endpoints.pop(uid, None) is None:
            return
        elif not endpoints:
            del self._handlers[name]
        self._changed.fire()

    def discard(self, handler: DiscoveryHandler) -> bool:
        """Forget exactly `handler` if it is still registered (not when a newer endpoint of its uid replaced it)."""
        uid = endpoint_uid(handler)
        if self._handlers.get(handler.name, {}).get(uid) is not handler:
            return False
        self.remove(handler.name, uid)
        return True

    def get(self, name: str) -> DiscoveryHandler:
        """The newest endpoint registered as `name`; `errors.NotFound` when there is none."""
        endpoints = self._handlers.get(name)
        if not endpoints:
            raise errors.NotFound(f"no discovery handler {name!r} registered on {self.node}")
        return next(reversed(endpoints.values()))

    def endpoints(self, name: str) -> dict[str, DiscoveryHandler]:
        """Every endpoint registered as `name`, by uid, oldest first (empty when there is none)."""
        return dict(self._handlers.get(name, {}))

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def current(self) -> asyncio.Event:
        """The event the next add or remove sets (take it before looking, then wait on it: nothing is missed)."""
        return self._changed.current()

    async def changed(self) -> None:
        """Return when a handler is added or removed after this call."""
        await self._changed.wait()
