"""Discovery streams: one per Configuration and handler endpoint, restarted when what they were started with changes.

A Configuration's signature is the handler's name, the discoveryDetails and the resolved discoveryProperties
(`properties.resolve`, over the ConfigMaps and Secrets the cache keeps for them). `sync(key)` compares it with the
running one's and, when it differs, stops the old streams before new ones start: each old task is cancelled and
awaited, and the handler's async generator is closed (`aclose`), so an external handler sees its `Discover` stream
end at once instead of when the garbage collector gets to it, and two streams of one endpoint never overlap.

Several handlers may register one name (Akri merges them, `name@endpoint`): a Configuration streams from every
endpoint of its handler's name, and its device list is theirs together (the first endpoint's device wins where two
report the same Instance, as Akri keeps the first of a CDI name). An endpoint that registers later is asked too, one
that registers again in place of itself (same uid) is asked again, and one whose stream ends while others still
stream takes only its own devices away. When the last one ends the list is kept (so a handler that restarts does not
churn Instances) until the handler registers again.

Concurrency: `sync` is awaited by the reconciler, one Configuration at a time. Each endpoint's stream runs as a loop
of the agent's `Supervisor`; its device lists replace that endpoint's part of `devices[key]` and mark the
Configuration for reconciliation (`mark`), nothing else. Failure semantics: bad discoveryDetails, properties that do
not resolve, a handler that is not registered, or the last stream breaking become the node's DiscoveryFailed
condition on the Configuration (written by CAS), and the streams park; a missing or vanished handler is retried when
the node's handler registry changes (the `handlers` loop), unresolvable properties when an object they read changes;
never on a timer. A bug that escapes a stream is logged by the supervisor and the stream is started again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from devplace import errors, metrics
from devplace.agent import _conditions as conditions
from devplace.agent import _instances as instances
from devplace.agent import _properties as properties
from devplace.agent import _writes as writes
from devplace.agent._caches import NodeCache
from devplace.clocks import Clock
from devplace.discovery import Device, DiscoveryHandler, HandlerRegistry
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

Key = tuple[str, str]
Resolved = tuple[tuple[str, bytes | None], ...] | conditions.Failure
"""The resolved discoveryProperties, sorted by name, or why they do not resolve."""
Signature = tuple[str, str, Resolved]


@dataclass
class _Endpoint:
    handler: DiscoveryHandler
    """The registration being asked (a newer one of the same uid takes over when the stream ends)."""
    task: asyncio.Task[Any] | None = None


@dataclass
class _Run:
    """What one Configuration streams with: its signature, and one stream per endpoint of its handler's name."""

    signature: Signature
    task: asyncio.Task[Any] | None = None
    """The condition write when there is nothing to stream (properties that do not resolve, no handler)."""
    endpoints: dict[str, _Endpoint] = field(default_factory=dict)
    lists: dict[str, list[Device]] = field(default_factory=dict)
    """The latest list of each endpoint that has reported."""
    live: set[str] = field(default_factory=set)
    """Endpoints whose stream runs (not ended, not refused the details)."""
    invalid: conditions.Failure | None = None
    reported: bool = False


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
        """What the streams of `key` should run with now (None: the Configuration is gone)."""
        cfg = self.cache.configuration(*key)
        if cfg is None:
            return None
        handler = cfg.spec.discovery_handler
        resolved: Resolved
        try:
            values = properties.resolve(handler.discovery_properties, self.cache.source_values())
            resolved = tuple(sorted(values.items(), key=lambda item: item[0]))
        except errors.Invalid as e:
            resolved = conditions.Failure(conditions.INVALID_PROPERTIES, e.message)
        return (handler.name, handler.discovery_details, resolved)

    async def sync(self, key: Key) -> None:
        """Run the streams `key` should run: start, restart (the old ones closed first) or stop them."""
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
        name, _, resolved = signature
        run = self._runs[key] = _Run(signature)
        if isinstance(resolved, conditions.Failure):
            # nothing to discover with: say why, and wait for an object the properties read to change
            self._fail(key, run, resolved)
            return
        endpoints = self.handlers.endpoints(name)
        if not endpoints:
            self._waiting_for_handler.add(key)
            message = f"no discovery handler {name!r} registered on {self.node}"
            self._fail(key, run, conditions.Failure(conditions.HANDLER_NOT_FOUND, message))
            return
        for uid, handler in endpoints.items():
            self._start_endpoint(key, run, uid, handler)

    def _fail(self, key: Key, run: _Run, failure: conditions.Failure) -> None:
        self._started += 1
        run.task = self.supervisor.spawn(
            f"discovery {key[0]}/{key[1]} #{self._started}", lambda: self.set_failure(key, failure)
        )

    def _start_endpoint(self, key: Key, run: _Run, uid: str, handler: DiscoveryHandler) -> None:
        _, details, resolved = run.signature
        values = dict(resolved) if not isinstance(resolved, conditions.Failure) else {}
        self._started += 1
        label = f"discovery {key[0]}/{key[1]} {uid} #{self._started}"
        endpoint = run.endpoints[uid] = _Endpoint(handler)
        endpoint.task = self.supervisor.loop(label, lambda: self._discover(key, run, uid, endpoint, details, values))
        run.live.add(uid)

    async def _stop(self, key: Key) -> None:
        run = self._runs.pop(key, None)
        if run is None:
            return
        tasks = [t for t in (*(e.task for e in run.endpoints.values()), run.task) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _stop_endpoint(self, run: _Run, uid: str) -> bool:
        """Stop one endpoint's stream; whether it had devices (they are no longer in `run`)."""
        endpoint = run.endpoints.pop(uid)
        dropped = run.lists.pop(uid, None) is not None
        run.live.discard(uid)
        if endpoint.task is not None:
            endpoint.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await endpoint.task
        return dropped

    async def stop(self) -> None:
        for key in list(self._runs):
            await self._stop(key)

    def _publish(self, key: Key, run: _Run) -> None:
        """The endpoints' lists together become the Configuration's (the first endpoint's device wins a name)."""
        merged: dict[str, Device] = {}
        for uid in run.endpoints:
            for device in run.lists.get(uid, ()):
                merged.setdefault(instances.instance_name(key[1], device.id, self.node, device.shared), device)
        self.devices[key] = list(merged.values())
        self.device_maps[key] = merged
        self.mark(key)

    async def _discover(
        self,
        key: Key,
        run: _Run,
        uid: str,
        endpoint: _Endpoint,
        details: str,
        values: dict[str, bytes | None],
    ) -> None:
        """One endpoint's stream, for the life of the signature: never returns (it parks when it ends). When it
        ends and the endpoint has registered again meanwhile (a handler that restarted), the new one is asked."""
        while True:
            handler = endpoint.handler
            failure = await self._stream(key, run, uid, handler, details, values)
            if failure is run.invalid:
                await self.set_failure(key, failure)
                await _park()
            newer = self.handlers.endpoints(run.signature[0]).get(uid)
            if newer is None or newer is handler:
                break
            endpoint.handler = newer
        if run.live:
            # others still stream: only this endpoint's devices go (until it registers again)
            log.info("%s: discovery handler %s stopped streaming for %s/%s: %s", self.node, uid, *key, failure.message)
            if run.lists.pop(uid, None) is not None:
                self._publish(key, run)
            await _park()
        self._waiting_for_handler.add(key)
        await self.set_failure(key, failure)
        await _park()

    async def _stream(
        self,
        key: Key,
        run: _Run,
        uid: str,
        handler: DiscoveryHandler,
        details: str,
        values: dict[str, bytes | None],
    ) -> conditions.Failure:
        """Stream from one registration until it ends; why it ended (`run.invalid` for refused details)."""
        run.live.add(uid)
        stream: AsyncIterator[list[Device]] = handler.discover(details, values)
        asked: float | None = time.perf_counter()  # Akri's discovery metrics: until the first answer, or a failure
        try:
            async for devices in stream:
                if asked is not None:
                    metrics.discovery_response(handler.name, key[1], time.perf_counter() - asked)
                    asked = None
                run.lists[uid] = list(devices)
                self._publish(key, run)
                if not run.reported and run.invalid is None:
                    run.reported = True
                    await self.set_failure(key, None)
            raise errors.Unavailable(f"discovery handler {handler.name!r} ended its stream")
        except errors.Invalid as e:
            run.invalid = conditions.Failure(conditions.INVALID_DETAILS, e.message)
            return run.invalid
        except errors.DevplaceError as e:
            return conditions.Failure(conditions.HANDLER_UNAVAILABLE, e.message)
        except Exception as e:
            log.exception("%s: discovery for %s/%s from %s failed", self.node, *key, uid)
            return conditions.Failure(conditions.HANDLER_UNAVAILABLE, f"{type(e).__name__}: {e}")
        except asyncio.CancelledError:
            asked = None  # stopped, not failed
            raise
        finally:
            if asked is not None:
                metrics.discovery_response(handler.name, key[1], None)
            run.live.discard(uid)
            await _close(stream)

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
        """Follow the node's handler registry (a loop): a Configuration waiting for its handler starts again when
        the registry changes; the others stream from every endpoint of their handler's name as it is now."""
        while True:
            changed = self.handlers.current()
            # first, too: a (re)started loop may have missed a change while it was down
            for key in sorted(self._waiting_for_handler):
                self._waiting_for_handler.discard(key)
                await self._stop(key)
                self.mark(key)
            for key in sorted(self._runs):
                await self._follow(key)
            await changed.wait()

    async def _follow(self, key: Key) -> None:
        """Stream `key` from the endpoints registered for its handler now: a new one is asked, and one whose stream
        ended is asked again once it has registered again. A stream that still runs is left as it is, even if its
        endpoint registered again meanwhile (it takes the new registration over when it ends), and one that ended
        and is gone is left to its own stream's ending (its devices go, or the Configuration waits)."""
        run = self._runs.get(key)
        if run is None or not run.endpoints or key in self._waiting_for_handler:
            return
        registered = self.handlers.endpoints(run.signature[0])
        for uid, endpoint in list(run.endpoints.items()):
            now = registered.get(uid)
            if uid in run.live or now is None or now is endpoint.handler:
                continue
            dropped = await self._stop_endpoint(run, uid)
            if self._runs.get(key) is not run:
                return
            self._start_endpoint(key, run, uid, now)
            if dropped:
                self._publish(key, run)
        for uid, handler in registered.items():
            if uid not in run.endpoints:
                self._start_endpoint(key, run, uid, handler)


async def write_condition(cache: NodeCache, key: Key, decide: Callable[[dict[str, Any]], Any], what: str) -> bool:
    """CAS a condition change into Configuration `key` and cache the result; False if it could not be written (the
    Configuration is gone, or the store failed: logged, the next change of state tries again)."""
    try:
        stored = await writes.mutate_configuration(cache, key[0], key[1], decide)
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
