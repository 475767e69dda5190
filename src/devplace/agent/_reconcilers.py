"""Instance reconciliation: what this node discovers becomes Instances, by compare-and-swap only.

Work is level-triggered: change handlers and discovery streams `mark` a Configuration dirty (or the plugin set), and
one loop does the marked work in order: per Configuration, the discovery stream is synced (`discoveries`) and
`instances.plan` (pure) decides what to create, join, leave, sync (capacity, cdiName, device properties), mark
offline or expire; the plan's writes run concurrently (bounded), each a CAS that re-decides on the fresh object.
Then the plugin set follows (`pluginsets`). Allocate calls and releases run concurrently with this loop; they meet
only in the store, through CAS, so no lock is needed.

Failure semantics: a store error in one Configuration's reconcile is logged and that Configuration is marked again
after a short real-time backoff (the store is a real peer). A bug that escapes the loop is restarted by the
supervisor, and a restarted loop marks everything, so work popped by the crashed round is not lost. Marks and
deadlines (an offline grace ending, on the injected clock) are one `WorkQueue` (devplace.queues): a deadline marks the
Configuration when its time comes; taking a key drops its deadline and the pass sets the next one.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from devplace import errors
from devplace.agent import _instances as instances
from devplace.agent import _writes as writes
from devplace.agent._caches import NodeCache
from devplace.agent._discoveries import Discoveries
from devplace.clocks import Clock
from devplace.discovery import Device
from devplace.queues import WorkQueue
from devplace.store import EventRecorder
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

Key = tuple[str, str]
PLUGINS: Key = ("", "")
"""The queue key of the plugin set (no Configuration has an empty name); synced after the batch's Configurations."""

CREATE_CONCURRENCY = 32
RETRY_PAUSE = 0.2
"""Seconds (real time) before a Configuration whose reconcile failed on a store error is tried again."""


class Reconciler:
    """The one loop that does marked work (see the module docstring)."""

    def __init__(
        self,
        node: str,
        offline_grace: float,
        cache: NodeCache,
        discoveries: Discoveries,
        supervisor: Supervisor,
        clock: Clock,
        sync_plugins: Callable[[], Awaitable[None]],
        events: EventRecorder | None = None,
    ) -> None:
        self.node = node
        self.offline_grace = offline_grace
        self.cache = cache
        self.discoveries = discoveries
        self.supervisor = supervisor
        self.clock = clock
        self._sync_plugins = sync_plugins
        self.events = events
        self.queue: WorkQueue[Key] = WorkQueue(clock, name="devplace-agent")

    @property
    def pending(self) -> bool:
        """Work is marked or due and not yet done."""
        return not self.queue.idle

    def mark(self, key: Key) -> None:
        self.queue.mark(key)

    def mark_plugins(self) -> None:
        self.queue.mark(PLUGINS)

    def mark_all(self) -> None:
        for key, _ in self.cache.configurations.items():
            self.queue.mark(key)
        for record in self.cache.instances.values():
            self.queue.mark((record.namespace, record.configuration))
        self.mark_plugins()

    # -- the loops -----------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Do marked work until cancelled (a supervised loop; a (re)start marks everything)."""
        self.mark_all()
        while True:
            keys = sorted(await self.queue.get_batch())
            release = self.supervisor.hold()
            try:
                for key in keys:
                    if key != PLUGINS:
                        await self._configuration(key)
                if PLUGINS in keys:
                    await self._sync_plugins()
            finally:
                for key in keys:
                    self.queue.done(key)
                release()

    def schedule(self, key: Key, deadline: float | None) -> None:
        """Reconcile `key` again at `deadline` (clock time), e.g. when an offline grace ends (the earliest wins)."""
        if deadline is not None:
            self.queue.mark_at(key, deadline)

    # -- one Configuration -----------------------------------------------------------------------------------------

    async def _configuration(self, key: Key) -> None:
        if self.cache.sources.loaded(key):  # else the informer of a newly read source marks it once it has listed
            try:
                await self.discoveries.sync(key)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("%s: starting discovery for %s/%s failed (%s); retrying", self.node, *key, e)
                self._retry(key)
        try:
            await self._reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("%s: reconcile of %s/%s failed (%s); retrying", self.node, *key, e)
            self._retry(key)

    def _retry(self, key: Key) -> None:
        async def later() -> None:
            await asyncio.sleep(RETRY_PAUSE)
            self.mark(key)

        self.supervisor.spawn(f"retry {key[0]}/{key[1]}", later)

    async def _reconcile(self, key: Key) -> None:
        namespace, name = key
        cfg = self.cache.configuration(namespace, name)
        devices = self.discoveries.devices.get(key) if cfg is not None else None
        now = self.clock.now()
        plan = instances.plan(
            self.node,
            cfg,
            devices,
            self.cache.instances_of(namespace, name),
            now,
            self.offline_grace,
            lookup=lambda instance: self.cache.instance(namespace, instance),
        )
        if plan.empty:
            self.schedule(key, plan.next_deadline)
            return
        gone = cfg is None
        cfg_obj = self.cache.configuration_obj(namespace, name)
        jobs: list[Callable[[], Awaitable[None]]] = []
        if cfg_obj is not None:
            jobs += [functools.partial(self._create, cfg_obj, device) for device in plan.create]
        jobs += [functools.partial(self._join, namespace, inst) for inst in plan.join]
        if cfg is not None:
            jobs += [
                functools.partial(
                    self._sync,
                    namespace,
                    inst,
                    cfg.spec.capacity,
                    dict(cfg.spec.broker_properties),
                    plan.device_properties.get(inst),
                )
                for inst in plan.sync
            ]
        self._tell(namespace, plan.mark_offline, "DeviceUnavailable", "no longer discovers the device", "Warning")
        self._tell(namespace, plan.leave, "DeviceGone", "left the Instance: its device is gone here", "Normal")
        jobs += [functools.partial(self._mark_offline, namespace, inst, now) for inst in plan.mark_offline]
        jobs += [functools.partial(self._leave, namespace, inst, now, gone) for inst in plan.leave]
        jobs += [functools.partial(self._expire, namespace, inst, now, gone) for inst in plan.expire]
        await bounded(jobs, CREATE_CONCURRENCY)
        self.schedule(key, plan.next_deadline)

    def _tell(
        self, namespace: str, names: Sequence[str], reason: str, note: str, type: Literal["Normal", "Warning"]
    ) -> None:
        """An Event on each named Instance (for `kubectl describe`); never blocks."""
        if self.events is None:
            return
        for name in names:
            record = self.cache.instance(namespace, name)
            regarding = record.obj if record is not None else {"kind": "Instance", "name": name, "namespace": namespace}
            self.events.emit(regarding, reason, f"{self.node} {note}", type)

    async def _create(self, cfg_obj: dict[str, Any], device: Device) -> None:
        body = instances.new_instance(cfg_obj, device, self.node)
        try:
            await writes.create_instance(self.cache, body)
        except errors.AlreadyExists:
            meta = body["metadata"]
            await self._join(meta["namespace"], meta["name"])

    async def _join(self, namespace: str, name: str) -> None:
        await writes.mutate_instance(self.cache, namespace, name, lambda obj: instances.joined(obj, self.node))

    async def _sync(
        self,
        namespace: str,
        name: str,
        capacity: int,
        props: dict[str, str],
        device_properties: Mapping[str, str] | None,
    ) -> None:
        def sync(obj: dict[str, Any]) -> dict[str, Any] | None:
            if self.node not in (obj["spec"].get("nodes") or []):
                return None
            return instances.synced(obj, self.node, capacity, props, device_properties)

        await writes.mutate_instance(self.cache, namespace, name, sync)

    async def _mark_offline(self, namespace: str, name: str, now: float) -> None:
        await writes.mutate_instance(self.cache, namespace, name, lambda obj: instances.marked_offline(obj, now))

    async def _leave(self, namespace: str, name: str, now: float, configuration_gone: bool) -> None:
        await writes.mutate_instance(
            self.cache,
            namespace,
            name,
            lambda obj: instances.left(obj, self.node, now, configuration_gone),
        )

    async def _expire(self, namespace: str, name: str, now: float, configuration_gone: bool) -> None:
        grace = self.offline_grace
        await writes.mutate_instance(
            self.cache,
            namespace,
            name,
            lambda obj: instances.expired(obj, now, grace, configuration_gone),
        )


async def bounded(jobs: list[Callable[[], Awaitable[None]]], limit: int) -> None:
    """Run `jobs` with at most `limit` at a time; the first error is raised after all have finished."""
    if not jobs:
        return
    semaphore = asyncio.Semaphore(limit)

    async def run(job: Callable[[], Awaitable[None]]) -> None:
        async with semaphore:
            await job()

    results = await asyncio.gather(*(run(job) for job in jobs), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
