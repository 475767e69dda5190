"""The node agent: discovery -> Instances, Instances -> device plugins, kubelet -> slot claims and releases.

One `Agent` per node. It watches Configurations and Instances (all namespaces), Pods (those bound to its node) and
the ConfigMaps and Secrets that discoveryProperties read into a `NodeCache`, runs one discovery stream per
Configuration, and keeps, by compare-and-swap only:
- the Instances of what it discovers (`instances.plan`: create, join, leave, resize, expire),
- one IL plugin per Instance listing this node and one CL plugin per Configuration with a visible Instance
  (`plugins`, served and registered by `servers`), except where resource names clash (`clashes`: the senior
  Configuration is served; one that loses serves nothing here and gets this node's ResourceNameConflict condition,
  cleared when the clash goes away),
- this node's slots released when their pods go (`releases`).

Concurrency: everything runs on one event loop. Watch events and write results update the cache synchronously
and mark work (a dirty Configuration, a plugin set to resync, a pod to release); one reconciler task does the
Instance and plugin work in order, while Allocate calls (kubelet) and releases run concurrently with it; they meet
only in the store, through CAS, so no lock is needed. `is_idle` is exact: it is False while any work is marked or
any claim, release or registration is running.

Allocate first: while an Allocate is in flight (`hold`), ListAndWatch wake-ups (except forced ones, after a refusal)
and the PodResources look a claim asks for are recorded but not started; they start when the last Allocate in
flight has ended, i.e. its answer is on the wire. The kubelet admits one pod at a time, so this defers them by the
length of one RPC; nothing is lost (a held notification counts as pending, a held look keeps the agent busy).

Discovery restarts when its signature changes: the handler's name, the discoveryDetails and the resolved
discoveryProperties (`properties.resolve`), so editing a property, or a ConfigMap or Secret one reads, restarts the
stream with the new values; a change to such an object marks only the Configurations that read it.

Failure semantics: a store error in a reconcile is logged and the Configuration is retried after a short real
backoff; a broken discovery stream, bad discoveryDetails or discoveryProperties that do not resolve (a required
Secret missing, say) become a condition on the Configuration (a missing or vanished handler is retried when the
node's handler registry changes, unresolvable properties when an object they read changes, never on a timer); a
kubelet that is absent or restarts is noticed through kubelet.sock's identity, polled in real time (the kubelet is a
real peer even under a fake clock), and every plugin registers again. Grace periods (slot release, offline
Instances) run on the injected Clock. `stop` leaves the store as it is: held slots survive an agent restart, and the
next agent derives what to release from the store and the kubelet's PodResources.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from devplace import errors
from devplace.agent import clashes, conditions, instances, properties, releases, slots
from devplace.agent.caches import NodeCache
from devplace.agent.plugins import ConfigurationPlugin, DevicePlugin, InstancePlugin
from devplace.agent.releases import DeviceKey, HeldSlot, PodKey, resource_name
from devplace.agent.servers import PluginServer, endpoint_name, socket_identity
from devplace.clocks import Clock
from devplace.deviceplugin import DEVICE_PLUGIN_DIR, KUBELET_SOCKET_NAME, POD_RESOURCES_DIR
from devplace.deviceplugin.podresources.v1 import api_pb2 as pr_pb2
from devplace.deviceplugin.podresources.v1 import api_pb2_grpc as pr_grpc
from devplace.discovery import Device, HandlerRegistry, RegistrationServer
from devplace.store import Store, mutate

__all__ = ["Agent", "AgentConfig"]

log = logging.getLogger(__name__)

Key = tuple[str, str]
PluginKey = tuple[str, str, str]

KUBELET_POLL = 0.05
"""Seconds between looks at kubelet.sock (real time: kubelet restarts are real events even under a fake clock)."""

REGISTER_TIMEOUT = 5.0
REGISTER_ATTEMPTS = 8
PODRESOURCES_TIMEOUT = 5.0
_CREATE_CONCURRENCY = 32


@dataclass
class AgentConfig:
    node: str
    kubelet_dir: Path
    resource_prefix: str = "devplace.io"
    release_grace: float = 300.0
    offline_grace: float = 300.0
    podresources_poll: float = 10.0
    registration_socket: Path | None = None


Resolved = tuple[tuple[str, bytes], ...] | conditions.Failure
"""The resolved discoveryProperties, sorted by name, or why they do not resolve."""


@dataclass
class _Discovery:
    signature: tuple[str, str, Resolved]
    task: asyncio.Task[None]


class Agent:
    """The devplace node agent (see the module docstring)."""

    def __init__(self, config: AgentConfig, store: Store, handlers: HandlerRegistry, clock: Clock) -> None:
        self.config = config
        self.store = store
        self.handlers = handlers
        self.clock = clock
        self._cache = NodeCache(store, config.node)
        self._cache.listeners.append(self._on_change)
        self.plugin_dir = Path(config.kubelet_dir) / DEVICE_PLUGIN_DIR
        self.kubelet_socket = self.plugin_dir / KUBELET_SOCKET_NAME
        self.podresources_socket = Path(config.kubelet_dir) / POD_RESOURCES_DIR / KUBELET_SOCKET_NAME
        # discovery
        self._devices: dict[Key, list[Device]] = {}
        self._device_maps: dict[Key, dict[str, Device]] = {}
        self._discovery: dict[Key, _Discovery] = {}
        self._waiting_for_handler: set[Key] = set()
        # reconcile
        self._dirty: set[Key] = set()
        self._plugins_dirty = False
        self._wake = asyncio.Event()
        self._retry_at: dict[Key, float] = {}
        self._timers: dict[Key, tuple[float, asyncio.Task[None]]] = {}
        self._instance_config: dict[Key, str] = {}
        self._lifecycles: dict[Key, instances.InstanceRecord] = {}
        self._visible: set[Key] = set()
        # plugins
        self._servers: dict[PluginKey, PluginServer] = {}
        self._unregistered: dict[PluginKey, float] = {}
        self._registering: set[PluginKey] = set()
        self._register_failures: dict[PluginKey, int] = {}
        self._kubelet_identity: tuple[int, int] | None = None
        self._conflicts: dict[Key, str] = {}
        self._conflict_writers: set[Key] = set()
        # release
        self._seq = itertools.count(1)
        self._pod_devices: dict[PodKey, tuple[frozenset[DeviceKey], int]] = {}
        self._known_pods: set[PodKey] = set()
        self._running_seen: set[PodKey] = set()
        self._alloc_seq: dict[DeviceKey, int] = {}
        self._alloc_at: dict[DeviceKey, float] = {}
        self._absent_since: dict[DeviceKey, float] = {}
        self._refresh_again = False
        self._refreshing = False
        self._holds = 0
        self._held_wakes: set[PluginKey] = set()
        self._held_refresh = False
        self._pr_channel: grpc.aio.Channel | None = None
        self._podresources_present = False
        # lifecycle
        self._busy = 0
        self._tasks: list[asyncio.Task[Any]] = []
        self._spawned: set[asyncio.Task[Any]] = set()
        self._registration: RegistrationServer | None = None
        self._started = False

    # -- PluginHost -----------------------------------------------------------------------------------------

    @property
    def cache(self) -> NodeCache:
        return self._cache

    @property
    def node(self) -> str:
        return self.config.node

    def device(self, namespace: str, instance: str) -> Device | None:
        record = self._cache.instance(namespace, instance)
        if record is None:
            return None
        return self._device_maps.get((namespace, record.configuration), {}).get(instance)

    def allocated(self, keys: Iterable[DeviceKey]) -> None:
        """After an Allocate: remember when (release guards; at once, before any later pod event is seen), and look
        at PodResources again once the answer is out, so a re-offer to the same pod is seen as that pod's again
        (and its deletion still frees at once)."""
        seq = next(self._seq)
        now = self.clock.now()
        for key in keys:
            self._alloc_seq[key] = seq
            self._alloc_at[key] = now
            self._absent_since.pop(key, None)
        if self._holds:
            self._held_refresh = True
        else:
            self._request_refresh()

    def hold(self) -> Callable[[], None]:
        """Busy, with plugin wake-ups and PodResources looks held back, until the returned function is called."""
        self._busy += 1
        self._holds += 1
        resumed = False

        def resume() -> None:
            nonlocal resumed
            if resumed:
                return
            resumed = True
            self._busy -= 1
            self._holds -= 1
            if self._holds == 0:
                self._release_held()

        return resume

    def _release_held(self) -> None:
        wakes, self._held_wakes = self._held_wakes, set()
        for key in wakes:
            server = self._servers.get(key)
            if server is not None:
                server.plugin.wake()
        if self._held_refresh:
            self._held_refresh = False
            self._request_refresh()

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """List and watch the store, start discovery, plugins and release loops; returns once watches run."""
        if self._started:
            return
        self._started = True
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self._podresources_present = socket_identity(self.podresources_socket) is not None
        revisions: dict[str, int] = {}
        # Configurations first: the cache keeps only the ConfigMaps and Secrets they refer to
        for kind in ("Configuration", "Instance", "Pod", *properties.SOURCE_KINDS):
            listing = await self.store.list(kind)
            self._cache.replace_all(kind, listing.items)
            revisions[kind] = listing.revision
        for kind, revision in revisions.items():
            self._tasks.append(asyncio.create_task(self._watch(kind, revision), name=f"agent-watch-{kind}"))
        if self.config.registration_socket is not None:
            self._registration = RegistrationServer(Path(self.config.registration_socket), self.handlers)
            await self._registration.start()
        with self.working():
            await self._observe()
        for key in list(self._cache.configurations):
            self._mark(key)
        self._plugins_dirty = True
        self._tasks += [
            asyncio.create_task(self._reconcile_loop(), name="agent-reconcile"),
            asyncio.create_task(self._kubelet_loop(), name="agent-kubelet"),
            asyncio.create_task(self._release_loop(), name="agent-release"),
            asyncio.create_task(self._handlers_loop(), name="agent-handlers"),
        ]
        self._wake.set()

    async def stop(self) -> None:
        """Stop every task and plugin (sockets removed); the store is left as it is."""
        tasks = [*self._tasks, *self._spawned, *(d.task for d in self._discovery.values())]
        tasks += [t for _, t in self._timers.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._spawned.clear()
        self._discovery.clear()
        self._timers.clear()
        await asyncio.gather(*(s.stop() for s in self._servers.values()), return_exceptions=True)
        self._servers.clear()
        if self._pr_channel is not None:
            await self._pr_channel.close(None)
            self._pr_channel = None
        if self._registration is not None:
            await self._registration.stop()
            self._registration = None
        self._started = False

    def is_idle(self) -> bool:
        """No event queued, no reconcile, claim, release or registration in flight, every plugin list sent."""
        return (
            not self._dirty
            and not self._plugins_dirty
            and self._busy == 0
            and not self._refreshing
            and not any(s.plugin.pending for s in self._servers.values())
            and not (self._unregistered and self._kubelet_identity is not None and self._registration_due())
        )

    def _spawn(self, make: Callable[[], Awaitable[None]], name: str) -> None:
        """Run work in its own task, counted busy from this instant until it ends."""
        self._busy += 1

        async def run() -> None:
            try:
                await make()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: %s failed", self.node, name)
            finally:
                self._busy -= 1

        task = asyncio.create_task(run(), name=name)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    # -- watches --------------------------------------------------------------------------------------------

    async def _watch(self, kind: str, since: int) -> None:
        """Keep the cache of `kind` current: watch from `since`; relist on `Gone`; back off and relist on errors."""
        revision: int | None = since
        delay = 0.05
        while True:
            try:
                if revision is None:
                    listing = await self.store.list(kind)
                    self._cache.replace_all(kind, listing.items)
                    revision = listing.revision
                async for event in self.store.watch(kind, since=revision):
                    revision = event.revision
                    self._cache.apply(kind, event.type, event.object)
                    delay = 0.05
            except asyncio.CancelledError:
                raise
            except errors.Gone:
                revision = None
            except Exception as e:
                log.warning("%s: watch of %s failed (%s); relisting", self.node, kind, e)
                revision = None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _on_change(self, kind: str, key: Key) -> None:
        if kind == "Instance":
            self._instance_changed(key)
        elif kind == "Configuration":
            self._mark(key)
            self._plugins_dirty = True
            self._notify("cl", key)
            self._wake.set()
        elif kind == "Pod":
            self._pod_changed(key)
        elif kind in properties.SOURCE_KINDS:
            for configuration in self._cache.referrers((kind, *key)):
                self._mark(configuration)

    def _instance_changed(self, key: Key) -> None:
        record = self._cache.instance(*key)
        if record is not None:
            self._instance_config[key] = record.configuration
        configuration = self._instance_config.get(key)
        if record is None:
            self._instance_config.pop(key, None)
        if configuration is not None:
            # a claim or release changes only holders: nothing for the Instance lifecycle to decide
            if not _same_lifecycle(self._lifecycles.get(key), record):
                self._mark((key[0], configuration))
            self._notify("cl", (key[0], configuration))
        if record is None:
            self._lifecycles.pop(key, None)
        else:
            self._lifecycles[key] = record
        self._notify("il", key)
        visible = record is not None and self.node in record.nodes
        if visible != (key in self._visible):
            if visible:
                self._visible.add(key)
            else:
                self._visible.discard(key)
            self._plugins_dirty = True
            self._wake.set()

    def _notify(self, kind: str, key: Key, force: bool = False) -> None:
        plugin_key = (kind, *key)
        server = self._servers.get(plugin_key)
        if server is None:
            return
        if self._holds and not force:
            server.plugin.notify(wake=False)
            self._held_wakes.add(plugin_key)
        else:
            server.plugin.notify(force)

    def _mark(self, key: Key) -> None:
        self._dirty.add(key)
        self._wake.set()

    # -- discovery ------------------------------------------------------------------------------------------

    def _sync_discovery(self, key: Key) -> None:
        cfg = self._cache.configuration(*key)
        run = self._discovery.get(key)
        if cfg is None:
            if run is not None:
                run.task.cancel()
                del self._discovery[key]
            self._devices.pop(key, None)
            self._device_maps.pop(key, None)
            self._waiting_for_handler.discard(key)
            return
        handler = cfg.spec.discovery_handler
        resolved: Resolved
        try:
            values = properties.resolve(handler.discovery_properties, key[0], self._cache.sources)
            resolved = tuple(sorted(values.items()))
        except errors.Invalid as e:
            resolved = conditions.Failure(conditions.INVALID_PROPERTIES, e.message)
        signature = (handler.name, handler.discovery_details, resolved)
        if run is not None and run.signature == signature:
            return
        if run is not None:
            run.task.cancel()
        self._waiting_for_handler.discard(key)
        name = f"agent-discover-{key[0]}/{key[1]}"
        if isinstance(resolved, conditions.Failure):
            # nothing to discover with: say why, and wait for an object the properties read to change
            failure = resolved
            task = self._busy_task(lambda: self._set_failure(key, failure), name)
        else:
            task = asyncio.create_task(
                self._discover(key, handler.name, handler.discovery_details, dict(resolved)), name=name
            )
        self._discovery[key] = _Discovery(signature, task)

    def _busy_task(self, make: Callable[[], Awaitable[None]], name: str) -> asyncio.Task[None]:
        """Run `make()` in a task counted busy from this instant until it ends, even if cancelled before it starts."""
        self._busy += 1

        async def run() -> None:
            await make()

        def done(_: asyncio.Task[None]) -> None:
            self._busy -= 1

        task = asyncio.create_task(run(), name=name)
        task.add_done_callback(done)
        return task

    async def _discover(self, key: Key, handler_name: str, details: str, values: dict[str, bytes]) -> None:
        try:
            handler = self.handlers.get(handler_name)
        except errors.NotFound as e:
            self._waiting_for_handler.add(key)
            await self._set_failure(key, conditions.Failure(conditions.HANDLER_NOT_FOUND, e.message))
            return
        failure: conditions.Failure
        try:
            first = True
            async for devices in handler.discover(details, values):
                self._devices[key] = list(devices)
                self._device_maps[key] = {
                    instances.instance_name(key[1], d.id, self.node, d.shared): d for d in devices
                }
                self._mark(key)
                if first:
                    first = False
                    await self._set_failure(key, None)
            raise errors.Unavailable(f"discovery handler {handler_name!r} ended its stream")
        except asyncio.CancelledError:
            raise
        except errors.Invalid as e:
            failure = conditions.Failure(conditions.INVALID_DETAILS, e.message)
        except errors.DevplaceError as e:
            self._waiting_for_handler.add(key)
            failure = conditions.Failure(conditions.HANDLER_UNAVAILABLE, e.message)
        except Exception as e:
            log.exception("%s: discovery for %s/%s failed", self.node, *key)
            self._waiting_for_handler.add(key)
            failure = conditions.Failure(conditions.HANDLER_UNAVAILABLE, f"{type(e).__name__}: {e}")
        await self._set_failure(key, failure)

    async def _set_failure(self, key: Key, failure: conditions.Failure | None) -> None:
        cached = self._cache.configuration_objs.get(key)
        if cached is None:
            return
        now = instances.timestamp(self.clock.now())
        if conditions.with_condition(cached, self.node, failure, now) is None:
            return
        with self.working():
            await self._write_condition(
                key, lambda obj: conditions.with_condition(obj, self.node, failure, now), "discovery"
            )

    async def _write_condition(self, key: Key, decide: Callable[[dict[str, Any]], Any], what: str) -> bool:
        """CAS a condition change into Configuration `key` and cache the result; False if it could not be written
        (the Configuration is gone, or the store failed: logged, the next change of state tries again)."""
        try:
            stored = await mutate(self.store, "Configuration", key[1], key[0], decide)
        except errors.NotFound:
            return False
        except errors.DevplaceError as e:
            log.warning("%s: could not write the %s condition of %s/%s: %s", self.node, what, *key, e.message)
            return False
        self._cache.apply("Configuration", "MODIFIED", stored)
        return True

    async def _handlers_loop(self) -> None:
        while True:
            await self.handlers.changed()
            for key in list(self._waiting_for_handler):
                run = self._discovery.pop(key, None)
                if run is not None:
                    run.task.cancel()
                self._waiting_for_handler.discard(key)
                self._mark(key)

    # -- reconcile ------------------------------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._dirty or self._plugins_dirty:
                with self.working():
                    keys = sorted(self._dirty)
                    self._dirty.clear()
                    for key in keys:
                        try:
                            await self._cache.load_sources(key)  # store reads only for newly referenced objects
                        except asyncio.CancelledError:
                            raise
                        except Exception as e:
                            log.warning(
                                "%s: reading the ConfigMaps and Secrets of %s/%s failed (%s); retrying",
                                self.node,
                                *key,
                                e,
                            )
                            self._retry(key)
                        else:
                            self._sync_discovery(key)
                        try:
                            await self._reconcile(key)
                        except asyncio.CancelledError:
                            raise
                        except Exception as e:
                            log.warning("%s: reconcile of %s/%s failed (%s); retrying", self.node, *key, e)
                            self._retry(key)
                    if self._plugins_dirty:
                        self._plugins_dirty = False
                        await self._sync_plugins()

    def _retry(self, key: Key) -> None:
        async def later() -> None:
            await asyncio.sleep(0.2)
            self._mark(key)

        self._spawn(later, f"agent-retry-{key[0]}/{key[1]}")

    async def _reconcile(self, key: Key) -> None:
        namespace, name = key
        cfg = self._cache.configuration(namespace, name)
        devices = self._devices.get(key) if cfg is not None else None
        now = self.clock.now()
        plan = instances.plan(
            self.node, cfg, devices, self._cache.instances_of(namespace, name), now, self.config.offline_grace
        )
        if plan.empty:
            self._schedule(key, plan.next_deadline)
            return
        gone = cfg is None
        cfg_obj = self._cache.configuration_objs.get(key)
        jobs: list[Callable[[], Awaitable[None]]] = []
        if cfg_obj is not None:
            jobs += [functools.partial(self._create, cfg_obj, device) for device in plan.create]
        jobs += [functools.partial(self._join, namespace, inst) for inst in plan.join]
        if cfg is not None:
            jobs += [
                functools.partial(self._sync, namespace, inst, cfg.spec.capacity, dict(cfg.spec.broker_properties))
                for inst in plan.sync
            ]
        jobs += [functools.partial(self._mark_offline, namespace, inst, now) for inst in plan.mark_offline]
        jobs += [functools.partial(self._leave, namespace, inst, now, gone) for inst in plan.leave]
        jobs += [functools.partial(self._expire, namespace, inst, now, gone) for inst in plan.expire]
        await _bounded(jobs, _CREATE_CONCURRENCY)
        self._schedule(key, plan.next_deadline)

    async def _create(self, cfg_obj: dict[str, Any], device: Device) -> None:
        body = instances.new_instance(cfg_obj, device, self.node)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            stored = await self.store.create(body)
        except errors.AlreadyExists:
            await self._update(namespace, name, lambda o: instances.joined(o, self.node))
            return
        self._cache.apply("Instance", "ADDED", stored)

    async def _update(
        self, namespace: str, name: str, decide: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> None:
        try:
            await self._cache.mutate_instance(namespace, name, decide)
        except errors.NotFound:
            self._cache.forget("Instance", (namespace, name))

    async def _join(self, namespace: str, name: str) -> None:
        await self._update(namespace, name, lambda obj: instances.joined(obj, self.node))

    async def _sync(self, namespace: str, name: str, capacity: int, props: dict[str, str]) -> None:
        def sync(obj: dict[str, Any]) -> dict[str, Any] | None:
            if self.node not in (obj["spec"].get("nodes") or []):
                return None
            return instances.synced(obj, capacity, props)

        await self._update(namespace, name, sync)

    async def _mark_offline(self, namespace: str, name: str, now: float) -> None:
        await self._update(namespace, name, lambda obj: instances.marked_offline(obj, now))

    async def _leave(self, namespace: str, name: str, now: float, configuration_gone: bool) -> None:
        await self._cache.remove_instance(
            namespace, name, lambda obj: instances.left(obj, self.node, now, configuration_gone)
        )

    async def _expire(self, namespace: str, name: str, now: float, configuration_gone: bool) -> None:
        grace = self.config.offline_grace
        await self._cache.remove_instance(
            namespace, name, lambda obj: instances.expired(obj, now, grace, configuration_gone)
        )

    def _schedule(self, key: Key, deadline: float | None) -> None:
        """Reconcile `key` again at `deadline` (clock time), e.g. when an offline grace ends."""
        if deadline is None:
            return
        current = self._timers.get(key)
        if current is not None and current[0] <= deadline and not current[1].done():
            return
        if current is not None:
            current[1].cancel()

        async def wake() -> None:
            await self.clock.sleep(max(0.0, deadline - self.clock.now()))
            self._timers.pop(key, None)
            self._mark(key)

        self._timers[key] = (deadline, asyncio.create_task(wake(), name=f"agent-timer-{key[0]}/{key[1]}"))

    # -- plugins --------------------------------------------------------------------------------------------

    async def _sync_plugins(self) -> None:
        """Run exactly the plugins the node wants and `clashes.resolve` allows; say why the others are withheld."""
        wanted: dict[PluginKey, clashes.Wanted] = {}
        prefix = self.config.resource_prefix
        configurations: set[Key] = set()
        for key in sorted(self._visible):
            record = self._cache.instance(*key)
            if record is None:
                continue
            cfg_key = (key[0], record.configuration)
            wanted[("il", *key)] = clashes.Wanted(("il", *key), resource_name(prefix, key[1]), self._owner(cfg_key))
            configurations.add(cfg_key)
        for cfg_key in sorted(configurations):
            if self._cache.configuration(*cfg_key) is None:
                continue
            wanted[("cl", *cfg_key)] = clashes.Wanted(
                ("cl", *cfg_key), resource_name(prefix, cfg_key[1]), self._owner(cfg_key)
            )
        outcome = clashes.resolve(wanted.values())
        self._set_conflicts(outcome.withheld)
        served = outcome.served
        stale = [k for k in self._servers if k not in served]
        fresh = [k for k in sorted(served) if k not in self._servers]
        # losers first: the kubelet keeps one endpoint per resource name, the winner's must be the one it keeps
        await asyncio.gather(*(self._stop_plugin(k) for k in stale))
        await _bounded(
            [functools.partial(self._start_plugin, k, self._new_plugin(k)) for k in fresh], _CREATE_CONCURRENCY
        )

    def _owner(self, key: Key) -> clashes.Owner:
        """The identity `clashes` ranks a Configuration by (unknown when it is gone: it then ranks last)."""
        cfg = self._cache.configuration(*key)
        if cfg is None:
            return clashes.Owner(*key)
        meta = cfg.metadata
        return clashes.Owner(key[0], key[1], meta.creation_timestamp or "", meta.uid or "")

    def _new_plugin(self, key: PluginKey) -> DevicePlugin:
        kind, namespace, name = key
        prefix = self.config.resource_prefix
        if kind == "il":
            return InstancePlugin(self, namespace, name, prefix)
        return ConfigurationPlugin(self, namespace, name, prefix)

    def _set_conflicts(self, withheld: Mapping[Key, str]) -> None:
        """Make this node's ResourceNameConflict conditions say `withheld` (written only where they differ)."""
        self._conflicts = dict(withheld)
        now = instances.timestamp(self.clock.now())
        for key, cached in self._cache.configuration_objs.items():
            if key in self._conflict_writers:
                continue  # the running writer reads `_conflicts` again before each write
            if self._conflict_update(cached, now) is not None:
                self._conflict_writers.add(key)
                self._spawn(functools.partial(self._write_conflict, key), f"agent-conflict-{key[0]}/{key[1]}")

    def _conflict_update(self, obj: Mapping[str, Any], now: str) -> dict[str, Any] | None:
        """`obj` (a Configuration) with this node's ResourceNameConflict condition as `_conflicts` says, or None."""
        meta = obj.get("metadata") or {}
        message = self._conflicts.get((meta.get("namespace") or "", meta.get("name") or ""))
        failure = None if message is None else conditions.Failure(conditions.RESOURCE_NAME_TAKEN, message)
        return conditions.with_condition(obj, self.node, failure, now, conditions.RESOURCE_NAME_CONFLICT)

    async def _write_conflict(self, key: Key) -> None:
        """Write `key`'s condition by CAS until the stored one matches `_conflicts` (which may change meanwhile)."""
        try:
            while True:
                cached = self._cache.configuration_objs.get(key)
                now = instances.timestamp(self.clock.now())
                if cached is None or self._conflict_update(cached, now) is None:
                    return
                if not await self._write_condition(key, functools.partial(self._conflict_update, now=now), "conflict"):
                    return
        finally:
            self._conflict_writers.discard(key)

    async def _start_plugin(self, key: PluginKey, plugin: DevicePlugin) -> None:
        kind, namespace, name = key
        server = PluginServer(plugin, self.plugin_dir, endpoint_name(kind, namespace, name, self.plugin_dir))
        await server.start()
        self._servers[key] = server
        self._unregistered[key] = 0.0
        if socket_identity(self.kubelet_socket) is not None:
            await self._register(key)

    async def _stop_plugin(self, key: PluginKey) -> None:
        server = self._servers.pop(key, None)
        self._unregistered.pop(key, None)
        if server is not None:
            await server.stop()

    async def _register(self, key: PluginKey) -> None:
        server = self._servers.get(key)
        if server is None:
            self._unregistered.pop(key, None)
            return
        self._registering.add(key)
        try:
            await server.register(self.kubelet_socket, REGISTER_TIMEOUT)
        except errors.DevplaceError as e:
            failures = self._register_failures.get(key, 0) + 1
            self._register_failures[key] = failures
            if failures >= REGISTER_ATTEMPTS:
                log.warning(
                    "%s: giving up registering %s until the kubelet restarts: %s",
                    self.node,
                    server.resource_name,
                    e.message,
                )
                self._unregistered.pop(key, None)
                return
            log.info("%s: registering %s failed: %s", self.node, server.resource_name, e.message)
            self._unregistered[key] = asyncio.get_running_loop().time() + min(0.05 * 2**failures, 2.0)
            return
        finally:
            self._registering.discard(key)
        self._unregistered.pop(key, None)
        self._register_failures.pop(key, None)

    def _due_registrations(self) -> list[PluginKey]:
        """Unregistered plugins whose (re)try is due; one being registered now is not (it would register twice)."""
        now = asyncio.get_running_loop().time()
        return [k for k, at in self._unregistered.items() if at <= now and k not in self._registering]

    def _registration_due(self) -> bool:
        return bool(self._due_registrations())

    async def _kubelet_loop(self) -> None:
        while True:
            self._podresources_present = socket_identity(self.podresources_socket) is not None
            identity = socket_identity(self.kubelet_socket)
            if identity != self._kubelet_identity:
                self._kubelet_identity = identity
                if identity is not None:
                    with self.working():
                        await self._kubelet_restarted()
            elif identity is not None and self._unregistered and self._registration_due():
                due = self._due_registrations()
                with self.working():
                    await asyncio.gather(*(self._register(k) for k in due))
            await asyncio.sleep(KUBELET_POLL)

    async def _kubelet_restarted(self) -> None:
        """A (new) kubelet: restart servers whose socket it removed, then register every plugin again."""
        for key, server in list(self._servers.items()):
            if not server.socket_intact():
                await server.restart()
            self._unregistered[key] = 0.0
            self._register_failures.pop(key, None)
        await _bounded([functools.partial(self._register, k) for k in list(self._servers)], _CREATE_CONCURRENCY)

    # -- release --------------------------------------------------------------------------------------------

    def _pod_changed(self, key: PodKey) -> None:
        info = self._cache.pods.get(key)
        if info is not None and not info.terminated:
            self._known_pods.add(key)
            if info.phase == "Running" and key not in self._running_seen and key not in self._pod_devices:
                self._running_seen.add(key)
                self._request_refresh()
            return
        if key not in self._known_pods and key not in self._pod_devices:
            return
        self._known_pods.discard(key)
        self._running_seen.discard(key)
        entry = self._pod_devices.pop(key, None)
        self._spawn(lambda: self._release_pod(key, entry), f"agent-release-{key[0]}/{key[1]}")

    def _request_refresh(self) -> None:
        """List PodResources soon (coalesced): learn which devices a newly running pod holds."""
        if self._refreshing:
            self._refresh_again = True
            return
        if not self._podresources_present:
            return
        self._refreshing = True

        async def refresh() -> None:
            try:
                while True:
                    self._refresh_again = False
                    await self._observe()
                    if not self._refresh_again:
                        return
            finally:
                self._refreshing = False

        self._spawn(refresh, "agent-podresources-refresh")

    async def _observe(self) -> dict[PodKey, frozenset[DeviceKey]] | None:
        """One PodResources List: remember which pod uses which of our devices; None if the kubelet is away."""
        seq = next(self._seq)
        listing = await self._list_pod_resources()
        if listing is None:
            return None
        for pod, devices in listing.items():
            self._pod_devices[pod] = (devices, seq)
        for pod in list(self._pod_devices):
            if pod not in listing and pod not in self._cache.pods:
                del self._pod_devices[pod]
        return listing

    async def _list_pod_resources(self) -> dict[PodKey, frozenset[DeviceKey]] | None:
        if socket_identity(self.podresources_socket) is None:
            return None
        if self._pr_channel is None:
            self._pr_channel = grpc.aio.insecure_channel(f"unix://{self.podresources_socket}")
        stub = pr_grpc.PodResourcesListerStub(self._pr_channel)
        try:
            response = await stub.List(pr_pb2.ListPodResourcesRequest(), timeout=PODRESOURCES_TIMEOUT)
        except grpc.aio.AioRpcError as e:
            log.info("%s: PodResources List failed: %s", self.node, e.details())
            return None
        prefix = self.config.resource_prefix + "/"
        out: dict[PodKey, set[DeviceKey]] = {}
        for pod in response.pod_resources:
            for container in pod.containers:
                for devices in container.devices:
                    if devices.resource_name.startswith(prefix):
                        out.setdefault((pod.namespace, pod.name), set()).update(
                            (devices.resource_name, device_id) for device_id in devices.device_ids
                        )
        return {pod: frozenset(devices) for pod, devices in out.items()}

    async def _release_pod(self, key: PodKey, entry: tuple[frozenset[DeviceKey], int] | None) -> None:
        listing = await self._observe()
        devices: set[DeviceKey] = set(entry[0]) if entry else set()
        observed_at = entry[1] if entry else 0
        if listing is not None and key in listing:
            devices |= listing[key]
            observed_at = max(observed_at, self._pod_devices.get(key, (frozenset(), 0))[1])
        self._pod_devices.pop(key, None)
        others: set[DeviceKey] = set()
        if listing is not None:
            for pod, used in listing.items():
                if pod != key:
                    others |= used
        held = releases.held_by_node(self._cache.instances.values(), self.node, self.config.resource_prefix)
        for slot in releases.pod_release(devices, observed_at, others, self._alloc_seq, held):
            await self._free(slot)

    async def _release_loop(self) -> None:
        while True:
            await self.clock.sleep(self.config.podresources_poll)
            with self.working():
                try:
                    await self._grace_pass()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("%s: release pass failed", self.node)

    async def _grace_pass(self) -> None:
        listing = await self._observe()
        if listing is None:
            return
        in_use: set[DeviceKey] = set()
        for used in listing.values():
            in_use |= used
        held = releases.held_by_node(self._cache.instances.values(), self.node, self.config.resource_prefix)
        self._absent_since, due = releases.absences(
            held, in_use, self._absent_since, self._alloc_at, self.clock.now(), self.config.release_grace
        )
        for key in [k for k in self._alloc_at if k not in held]:
            self._alloc_at.pop(key, None)
            self._alloc_seq.pop(key, None)
        for slot in due:
            await self._free(slot)

    async def _free(self, held: HeldSlot) -> None:
        try:
            await self._cache.update_usage(
                held.namespace, held.instance, lambda record: slots.release_slot(record.usage, held.slot, held.holder)
            )
        except errors.NotFound:
            return
        self._absent_since.pop(held.device, None)
        log.info("%s: released %s (%s)", self.node, held.slot, held.holder)


def _same_lifecycle(old: instances.InstanceRecord | None, new: instances.InstanceRecord | None) -> bool:
    """Whether `instances.plan` reads the same of both (everything but who holds which slot)."""
    if old is None or new is None:
        return old is new
    return (
        old.configuration == new.configuration
        and old.shared == new.shared
        and old.nodes == new.nodes
        and old.usage.capacity == new.usage.capacity
        and old.usage.holders.keys() == new.usage.holders.keys()
        and old.broker_properties == new.broker_properties
        and old.offline_since == new.offline_since
    )


async def _bounded(jobs: list[Callable[[], Awaitable[None]]], limit: int) -> None:
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
