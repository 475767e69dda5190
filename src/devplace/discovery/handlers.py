"""Discovery handlers and the per-node registry that finds them by name.

A handler turns a Configuration's `discoveryDetails` (a YAML string the handler parses) and its resolved
`discoveryProperties` (name -> bytes, e.g. credentials; Akri's `DiscoverRequest.discovery_properties`) into an async
stream of the *full current device list*: one list on start and one on every change (consumers replace, never
merge). Bad details raise `errors.Invalid` from the stream before anything is yielded, so the agent can put a
condition on the Configuration instead of crashing. A stream may end with `errors.Unavailable` (an external handler
went away); the agent then waits for `HandlerRegistry.changed` and asks again.

The registry is per node and lives on one event loop; `add` replaces a handler of the same name (an external handler
re-registering after a restart), and every add or remove wakes `changed()` waiters.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Protocol

from devplace import errors
from devplace.discovery.devices import Device
from devplace.discovery.signals import Signal

__all__ = ["DiscoveryHandler", "HandlerRegistry"]


class DiscoveryHandler(Protocol):
    name: str

    def discover(
        self, details: str, properties: Mapping[str, bytes] | None = None
    ) -> AsyncGenerator[list[Device], None]:
        """Yield the full current device list on start and on every change; raise `errors.Invalid` for bad details
        before yielding anything. `properties` are the Configuration's resolved discoveryProperties (None or empty:
        none); a handler that has no use for them ignores them. The consumer stops a stream with `aclose`, so
        implementations are async generators."""
        ...


class HandlerRegistry:
    """The discovery handlers available on one node, by name."""

    def __init__(self, node: str) -> None:
        self.node = node
        self._handlers: dict[str, DiscoveryHandler] = {}
        self._changed = Signal()

    def add(self, handler: DiscoveryHandler) -> None:
        """Register `handler`, replacing any handler of the same name."""
        self._handlers[handler.name] = handler
        self._changed.fire()

    def remove(self, name: str) -> None:
        """Forget the handler called `name` (no-op if there is none)."""
        if self._handlers.pop(name, None) is not None:
            self._changed.fire()

    def get(self, name: str) -> DiscoveryHandler:
        try:
            return self._handlers[name]
        except KeyError:
            raise errors.NotFound(f"no discovery handler {name!r} registered on {self.node}") from None

    def names(self) -> list[str]:
        return sorted(self._handlers)

    async def changed(self) -> None:
        """Return when a handler is added or removed after this call."""
        await self._changed.wait()
