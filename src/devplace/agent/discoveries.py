"""Discovery streams: one per Configuration, restarted when what it was started with changes.

A stream's signature is the handler's name, the discoveryDetails and the resolved discoveryProperties
(`properties.resolve`, over the ConfigMaps and Secrets the cache keeps for them). `sync(key)` compares it with the
running stream's and, when it differs, stops the old stream before the new one starts: the old task is cancelled and
awaited, and the handler's async generator is closed (`aclose`), so an external handler sees its `Discover` stream
end at once instead of when the garbage collector gets to it, and two streams of one Configuration never overlap.

Concurrency: `sync` is awaited by the reconciler, one Configuration at a time. Each stream runs as a loop of the
agent's `Supervisor`; its device lists replace `devices[key]` and mark the Configuration for reconciliation
(`mark`), nothing else. Failure semantics: bad discoveryDetails, properties that do not resolve, a handler that is
not registered, or a stream that breaks become the node's DiscoveryFailed condition on the Configuration (written by
CAS), and the stream parks; a missing or vanished handler is retried when the node's handler registry changes (the
`handlers` loop), unresolvable properties when an object they read changes; never on a timer. A bug that escapes a
stream is logged by the supervisor and the stream is started again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from devplace import errors
from devplace.agent import conditions, instances, properties
from devplace.agent.caches import NodeCache
from devplace.clocks import Clock
from devplace.discovery import Device, HandlerRegistry
from devplace.supervisors import Supervisor

__all__ = ["Discoveries"]

log = logging.getLogger(__name__)

Key = tuple[str, str]
Resolved = tuple[tuple[str, bytes], ...] | conditions.Failure
"""The resolved discoveryProperties, sorted by name, or why they do not resolve."""
Signature = tuple[str, str, Resolved]


@dataclass
class _Run:
    signature: Signature
    task: asyncio.Task[Any]


class Discoveries:
    """The discovery streams of one node (see the module docstring)."""

    def __init__(
        self,
        node: str,
        cache: NodeCache,
        handlers: HandlerRegistry,
        supervisor: Supervisor,
        clock: Clock,
        mark: Callable[[Key], None],
    ) -> None:
        self.node = node
        self.cache = cache
        self.handlers = handlers
        self.supervisor = supervisor
        self.clock = clock
        self.mark = mark
        self.devices: dict[Key, list[Device]] = {}
        self.device_maps: dict[Key, dict[str, Device]] = {}
        self._runs: dict[Key, _Run] = {}
        self._waiting_for_handler: set[Key] = set()
        self._started = 0

    def device(self, key: Key, instance: str) -> Device | None:
        return self.device_maps.get(key, {}).get(instance)

    def signature(self, key: Key) -> Signature | None:
        """What the stream of `key` should run with now (None: the Configuration is gone)."""
        cfg = self.cache.configuration(*key)
        if cfg is None:
            return None
        handler = cfg.spec.discovery_handler
        resolved: Resolved
        try:
            values = properties.resolve(handler.discovery_properties, key[0], self.cache.source_values())
            resolved = tuple(sorted(values.items()))
        except errors.Invalid as e:
            resolved = conditions.Failure(conditions.INVALID_PROPERTIES, e.message)
        return (handler.name, handler.discovery_details, resolved)

    async def sync(self, key: Key) -> None:
        """Run the stream `key` should run: start, restart (the old one closed first) or stop it."""
        signature = self.signature(key)
        run = self._runs.get(key)
        if run is not None and signature is not None and run.signature == signature:
            return
        if run is not None:
            await self._stop(key)
        self._waiting_for_handler.discard(key)
        if signature is None:
            self.devices.pop(key, None)
            self.device_maps.pop(key, None)
            return
        name, details, resolved = signature
        self._started += 1
        label = f"discovery {key[0]}/{key[1]} #{self._started}"
        task: asyncio.Task[Any]
        if isinstance(resolved, conditions.Failure):
            # nothing to discover with: say why, and wait for an object the properties read to change
            failure = resolved
            task = self.supervisor.spawn(label, lambda: self.set_failure(key, failure))
        else:
            values = dict(resolved)
            task = self.supervisor.loop(label, lambda: self._discover(key, name, details, values))
        self._runs[key] = _Run(signature, task)

    async def _stop(self, key: Key) -> None:
        run = self._runs.pop(key, None)
        if run is None:
            return
        run.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run.task

    async def stop(self) -> None:
        for key in list(self._runs):
            await self._stop(key)

    async def _discover(self, key: Key, handler_name: str, details: str, values: dict[str, bytes]) -> None:
        """One stream, for the life of its signature: never returns (it parks after a failure, see the docstring)."""
        try:
            handler = self.handlers.get(handler_name)
        except errors.NotFound as e:
            self._waiting_for_handler.add(key)
            await self.set_failure(key, conditions.Failure(conditions.HANDLER_NOT_FOUND, e.message))
            await _park()
        failure: conditions.Failure
        stream: AsyncIterator[list[Device]] = handler.discover(details, values)
        try:
            first = True
            async for devices in stream:
                self.devices[key] = list(devices)
                self.device_maps[key] = {instances.instance_name(key[1], d.id, self.node, d.shared): d for d in devices}
                self.mark(key)
                if first:
                    first = False
                    await self.set_failure(key, None)
            raise errors.Unavailable(f"discovery handler {handler_name!r} ended its stream")
        except errors.Invalid as e:
            failure = conditions.Failure(conditions.INVALID_DETAILS, e.message)
        except errors.DevplaceError as e:
            self._waiting_for_handler.add(key)
            failure = conditions.Failure(conditions.HANDLER_UNAVAILABLE, e.message)
        except Exception as e:
            log.exception("%s: discovery for %s/%s failed", self.node, *key)
            self._waiting_for_handler.add(key)
            failure = conditions.Failure(conditions.HANDLER_UNAVAILABLE, f"{type(e).__name__}: {e}")
        finally:
            await _close(stream)
        await self.set_failure(key, failure)
        await _park()

    async def set_failure(self, key: Key, failure: conditions.Failure | None) -> None:
        """Make this node's DiscoveryFailed condition of `key` say `failure` (None: removed), by CAS."""
        cached = self.cache.configuration_obj(*key)
        if cached is None:
            return
        now = instances.timestamp(self.clock.now())
        if conditions.with_condition(cached, self.node, failure, now) is None:
            return
        release = self.supervisor.hold()
        try:
            await write_condition(
                self.cache, key, lambda obj: conditions.with_condition(obj, self.node, failure, now), "discovery"
            )
        finally:
            release()

    async def watch_handlers(self) -> None:
        """Restart the streams that wait for a handler whenever the node's handler registry changes (a loop)."""
        while True:
            # first, too: a (re)started loop may have missed a change while it was down
            for key in sorted(self._waiting_for_handler):
                self._waiting_for_handler.discard(key)
                await self._stop(key)
                self.mark(key)
            await self.handlers.changed()


async def write_condition(cache: NodeCache, key: Key, decide: Callable[[dict[str, Any]], Any], what: str) -> bool:
    """CAS a condition change into Configuration `key` and cache the result; False if it could not be written (the
    Configuration is gone, or the store failed: logged, the next change of state tries again)."""
    try:
        stored = await cache.mutate_configuration(key[0], key[1], decide)
    except errors.DevplaceError as e:
        log.warning("%s: could not write the %s condition of %s/%s: %s", cache.node, what, *key, e.message)
        return False
    return stored is not None


async def _close(stream: AsyncIterator[Any]) -> None:
    """Close a handler's stream (an async generator, by the DiscoveryHandler protocol), even while cancelled."""
    aclose = getattr(stream, "aclose", None)
    if aclose is None:
        return
    try:
        await asyncio.shield(aclose())
    except asyncio.CancelledError:
        raise
    except Exception:
        log.debug("closing a discovery stream failed", exc_info=True)


async def _park() -> NoReturn:
    """Wait until cancelled (a stream that failed waits for `sync` or the handlers loop to replace it)."""
    await asyncio.Event().wait()
    raise AssertionError("unreachable")
