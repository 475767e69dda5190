"""The plugin set: exactly the device plugins the node wants and `clashes` allows, served and registered.

Wanted: one IL plugin per Instance listing this node, one CL plugin per Configuration with such an Instance, named
`<prefix>/<instance>` and `<prefix>/<configuration>`, the prefix the Configuration's API group unless the agent has an
override (`api.devices.resource_name`); a plugin whose resource name changes is started again under the new one.
A Configuration served through DRA only (`api.device_paths`: its `devplace.io/device-paths` annotation, else the
agent's default) wants no plugin here, so the kubelet advertises none of its resources; a change of the annotation
marks the set, which stops or starts its plugins (slots held through them stay held until released as usual).
`clashes.resolve` (pure) says which may run; a Configuration that loses serves nothing here and gets this node's
ResourceNameConflict condition (cleared when the clash goes away). `sync` stops the losers first (the kubelet keeps
one endpoint per resource name: the winner's must be the one it keeps), then starts the rest.

Failure semantics: a plugin whose server cannot start (gRPC cannot bind its socket, say) is logged and retried with
a growing real-time backoff; it never stops the reconciler or the other plugins. A registration the kubelet refuses
or does not answer is retried with backoff too, and given up after `REGISTER_ATTEMPTS` until the kubelet restarts.

The kubelet: `watch_kubelet` (a supervised loop) wakes on kubelet.sock being created or deleted (`sockets`: inotify,
or a slow poll where inotify is unavailable) and when a registration retry is due, so an idle agent costs nothing.
Every look tells `presence` (`kubelets`) whether the socket is there: a missing one is warned about and reported on
the Node.
When kubelet.sock's identity changes the kubelet restarted: servers whose socket it removed are restarted, and every
plugin registers again. Held slots are unaffected: they live in the store.

Allocate first: while an Allocate is in flight (`holds`), ListAndWatch wake-ups (except forced ones, after a refusal)
are recorded but not sent; `release_held` sends them once the last Allocate's answer is on the wire.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from devplace import errors
from devplace.agent import _clashes as clashes
from devplace.agent import _conditions as conditions
from devplace.agent import _instances as instances
from devplace.agent._caches import NodeCache
from devplace.agent._deviceplugins import ConfigurationPlugin, DevicePlugin, InstancePlugin, PluginHost
from devplace.agent._discoveries import write_condition
from devplace.agent._kubelets import KubeletPresence
from devplace.agent._reconcilers import CREATE_CONCURRENCY, bounded
from devplace.agent._release_rules import resource_of
from devplace.agent._servers import PluginServer, endpoint_name, socket_identity
from devplace.agent._sockets import DirectoryWatch
from devplace.agent._writes import CONTENTION_CLOCK
from devplace.api import DevicePaths, device_paths
from devplace.clocks import Clock
from devplace.deviceplugin import KUBELET_SOCKET_NAME, UNIX, Transport
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

Key = tuple[str, str]
PluginKey = tuple[str, str, str]

REGISTER_TIMEOUT = 5.0
REGISTER_ATTEMPTS = 8
START_ATTEMPTS = 8
"""Server starts retried on their own before waiting for the next change of the plugin set."""
KUBELET_FALLBACK_POLL = 1.0
"""Seconds between looks at kubelet.sock where inotify is unavailable (real time)."""


def _backoff(failures: int) -> float:
    return min(0.05 * 2.0**failures, 2.0)


class PluginSet:
    """The node's device plugins (see the module docstring)."""

    def __init__(
        self,
        host: PluginHost,
        prefix: str | None,
        plugin_dir: Path,
        cache: NodeCache,
        supervisor: Supervisor,
        clock: Clock,
        mark: Callable[[], None],
        paths: DevicePaths = "both",
        transport: Transport = UNIX,
    ) -> None:
        """`paths`: the device paths of a Configuration without the annotation (`api.device_paths`); `transport`: how
        plugins serve and register (`deviceplugin.Transport`)."""
        self.host = host
        self.transport = transport
        self.node = host.node
        self.prefix = prefix
        self.plugin_dir = plugin_dir
        self.kubelet_socket = plugin_dir / KUBELET_SOCKET_NAME
        self.cache = cache
        self.supervisor = supervisor
        self.clock = clock
        self.mark = mark
        self.paths: DevicePaths = paths
        self.servers: dict[PluginKey, PluginServer] = {}
        self.resources: dict[PluginKey, str] = {}
        """The resource name each wanted plugin registers (from the last `sync`)."""
        self.holds = 0
        self._held_wakes: set[PluginKey] = set()
        self._unregistered: dict[PluginKey, float] = {}
        self._registering: set[PluginKey] = set()
        self._register_failures: dict[PluginKey, int] = {}
        self._start_failures: dict[PluginKey, int] = {}
        self._kubelet_identity: tuple[int, int] | None = None
        self._conflicts: dict[Key, str] = {}
        self._conflict_writers: set[Key] = set()
        self._watch: DirectoryWatch | None = None
        self.presence = KubeletPresence(
            self.node, self.kubelet_socket, cache.store, supervisor, clock, CONTENTION_CLOCK
        )

    # -- idleness ------------------------------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        """A ListAndWatch send not made yet, or a plugin not registered with a present kubelet yet.

        A registration waiting for its retry is pending too, though nothing runs until the retry is due: a
        simulation settled while a plugin is unknown to its kubelet would see devices missing. Retries are bounded
        (`REGISTER_ATTEMPTS`), so this does not stay true forever."""
        if any(s.plugin.pending for s in self.servers.values()):
            return True
        return bool(self._unregistered) and self._kubelet_identity is not None

    # -- notifications -------------------------------------------------------------------------------------------

    def notify(self, kind: str, key: Key, force: bool = False) -> None:
        plugin_key = (kind, *key)
        server = self.servers.get(plugin_key)
        if server is None:
            return
        if self.holds and not force:
            server.plugin.notify(wake=False)
            self._held_wakes.add(plugin_key)
        else:
            server.plugin.notify(force)

    def notify_change(
        self, kind: str, key: Key, old: instances.InstanceRecord | None, new: instances.InstanceRecord | None
    ) -> None:
        """`notify`, for an Instance's change from `old` to `new`, unless the plugin's list cannot change by it
        (`DevicePlugin.changed_by`): its streams are not woken for nothing."""
        server = self.servers.get((kind, *key))
        if server is not None and server.plugin.changed_by(old, new):
            self.notify(kind, key)

    def release_held(self) -> None:
        wakes, self._held_wakes = self._held_wakes, set()
        for key in wakes:
            server = self.servers.get(key)
            if server is not None:
                server.plugin.wake()

    # -- the set -------------------------------------------------------------------------------------------------

    async def sync(self) -> None:
        """Run exactly the plugins the node wants and `clashes.resolve` allows; say why the others are withheld."""
        wanted: dict[PluginKey, clashes.Wanted] = {}
        configurations: dict[Key, instances.InstanceRecord] = {}
        api_versions = self.cache.api_versions()
        for record in self.cache.on_node():
            key = (record.namespace, record.name)
            cfg_key = (record.namespace, record.configuration)
            if device_paths(self.cache.configuration_obj(*cfg_key), self.paths) == "dra":
                continue  # served through DRA only (module docstring)
            wanted[("il", *key)] = clashes.Wanted(
                ("il", *key), resource_of(record, key[1], self.prefix, api_versions), self._owner(cfg_key)
            )
            configurations.setdefault(cfg_key, record)
        for cfg_key, record in sorted(configurations.items()):
            if cfg_key not in api_versions:
                continue
            wanted[("cl", *cfg_key)] = clashes.Wanted(
                ("cl", *cfg_key), resource_of(record, cfg_key[1], self.prefix, api_versions), self._owner(cfg_key)
            )
        self.resources = {key: w.resource for key, w in wanted.items()}
        outcome = clashes.resolve(wanted.values())
        self._set_conflicts(outcome.withheld)
        served = outcome.served
        stale = [
            k for k, server in self.servers.items() if k not in served or server.resource_name != self.resources[k]
        ]
        fresh = [k for k in sorted(served) if k not in self.servers or k in stale]
        for plugin in [k for k in self._start_failures if k not in served]:
            del self._start_failures[plugin]
        await asyncio.gather(*(self._stop_plugin(k) for k in stale))
        await bounded([functools.partial(self._start_plugin, k) for k in fresh], CREATE_CONCURRENCY)

    def _owner(self, key: Key) -> clashes.Owner:
        """The identity `clashes` ranks a Configuration by (unknown when it is gone: it then ranks last)."""
        cfg = self.cache.configuration(*key)
        if cfg is None:
            return clashes.Owner(*key)
        meta = cfg.metadata
        return clashes.Owner(key[0], key[1], meta.creation_timestamp or "", meta.uid or "")

    def _new_plugin(self, key: PluginKey) -> DevicePlugin:
        kind, namespace, name = key
        if kind == "il":
            return InstancePlugin(self.host, namespace, name, self.resources[key])
        return ConfigurationPlugin(self.host, namespace, name, self.resources[key])

    async def _start_plugin(self, key: PluginKey) -> None:
        kind, namespace, name = key
        server = PluginServer(
            self._new_plugin(key),
            self.plugin_dir,
            endpoint_name(kind, namespace, name, self.plugin_dir),
            self.transport,
        )
        try:
            await server.start()
        except Exception as e:
            self._start_failed(key, server, e)
            return
        self._start_failures.pop(key, None)
        self.servers[key] = server
        self._unregistered[key] = 0.0
        if socket_identity(self.kubelet_socket) is not None:
            await self._register(key)

    def _start_failed(self, key: PluginKey, server: PluginServer, error: Exception) -> None:
        failures = self._start_failures.get(key, 0) + 1
        self._start_failures[key] = failures
        if failures > START_ATTEMPTS:
            log.error(
                "%s: serving %s failed %d times (%s); trying again when the plugin set changes",
                self.node,
                server.resource_name,
                failures,
                error,
            )
            return
        delay = _backoff(failures)
        log.warning("%s: serving %s failed (%s); retrying in %.2fs", self.node, server.resource_name, error, delay)

        async def retry() -> None:
            await asyncio.sleep(delay)
            self.mark()

        self.supervisor.spawn(f"retry serving {server.resource_name}", retry)

    async def _stop_plugin(self, key: PluginKey) -> None:
        server = self.servers.pop(key, None)
        self._unregistered.pop(key, None)
        if server is not None:
            await server.stop()

    async def stop(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.servers.values()), return_exceptions=True)
        self.servers.clear()
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    # -- ResourceNameConflict conditions -----------------------------------------------------------------------

    def _set_conflicts(self, withheld: Mapping[Key, str]) -> None:
        """Make this node's ResourceNameConflict conditions say `withheld` (written only where they differ)."""
        self._conflicts = dict(withheld)
        now = instances.timestamp(self.clock.now())
        for key, entry in self.cache.configurations.items():
            if key in self._conflict_writers:
                continue  # the running writer reads `_conflicts` again before each write
            if self._conflict_update(entry.obj, now) is not None:
                self._conflict_writers.add(key)
                self.supervisor.spawn(f"conflict {key[0]}/{key[1]}", functools.partial(self._write_conflict, key))

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
                cached = self.cache.configuration_obj(*key)
                now = instances.timestamp(self.clock.now())
                if cached is None or self._conflict_update(cached, now) is None:
                    return
                decide = functools.partial(self._conflict_update, now=now)
                if not await write_condition(self.cache, key, decide, "conflict"):
                    return
        finally:
            self._conflict_writers.discard(key)

    # -- the kubelet ---------------------------------------------------------------------------------------------

    def observe_kubelet(self) -> None:
        """Take kubelet.sock's identity as known (at start: plugins started later register by themselves)."""
        self._kubelet_identity = socket_identity(self.kubelet_socket)

    async def watch_kubelet(self) -> None:
        """Follow kubelet.sock and due registration retries until cancelled (a supervised loop)."""
        watch = DirectoryWatch(self.plugin_dir, {KUBELET_SOCKET_NAME}, fallback_poll=KUBELET_FALLBACK_POLL)
        watch.start()
        self._watch = watch
        try:
            while True:
                await self.kubelet_pass()
                await watch.wait(self._next_registration_in())
        finally:
            watch.close()
            if self._watch is watch:
                self._watch = None

    async def kubelet_pass(self) -> None:
        """Look at kubelet.sock once: a new kubelet gets every plugin registered again; else due retries run."""
        identity = socket_identity(self.kubelet_socket)
        self.presence.observe(identity is not None)
        if identity != self._kubelet_identity:
            self._kubelet_identity = identity
            if identity is not None:
                release = self.supervisor.hold()
                try:
                    await self._kubelet_restarted()
                finally:
                    release()
        elif identity is not None and self._unregistered:
            due = self._due_registrations()
            if due:
                release = self.supervisor.hold()
                try:
                    await asyncio.gather(*(self._register(k) for k in due))
                finally:
                    release()

    async def _kubelet_restarted(self) -> None:
        """A (new) kubelet: restart servers whose socket it removed, then register every plugin again."""
        for key, server in list(self.servers.items()):
            if not server.socket_intact():
                await server.restart()
            self._unregistered[key] = 0.0
            self._register_failures.pop(key, None)
        await bounded([functools.partial(self._register, k) for k in list(self.servers)], CREATE_CONCURRENCY)

    async def _register(self, key: PluginKey) -> None:
        server = self.servers.get(key)
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
            self._unregistered[key] = asyncio.get_running_loop().time() + _backoff(failures)
            if self._watch is not None:
                self._watch.poke()  # the kubelet loop sleeps until the retry is due
            return
        finally:
            self._registering.discard(key)
        self._unregistered.pop(key, None)
        self._register_failures.pop(key, None)

    def _due_registrations(self) -> list[PluginKey]:
        """Unregistered plugins whose (re)try is due; one being registered now is not (it would register twice)."""
        now = asyncio.get_running_loop().time()
        return [k for k, at in self._unregistered.items() if at <= now and k not in self._registering]

    def _next_registration_in(self) -> float | None:
        waiting = [at for k, at in self._unregistered.items() if k not in self._registering]
        if not waiting or self._kubelet_identity is None:
            return None
        return max(0.0, min(waiting) - asyncio.get_running_loop().time())
