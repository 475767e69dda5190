"""The node agent: discovery -> Instances, Instances -> device plugins, kubelet -> slot claims and releases.

One `Agent` per node, composed of parts over one set of informers (`caches.NodeCache`):
- `discoveries`: one discovery stream per Configuration, restarted (the old one closed first) when its handler,
  details or resolved properties change;
- `reconcilers`: the one loop that turns marked work into Instance writes (`instances.plan`) and plugin-set syncs;
- `pluginsets`: the IL and CL plugins the node wants and `clashes` allows, served, registered with the kubelet and
  re-registered when it restarts; a missing kubelet.sock is warned about and reported on the Node (`kubelets`);
- `releasers`: this node's slots freed when their pods end, or after the PodResources grace;
- `dra`: the kubelet's DRA plugin (prepare/unprepare by the same slot CAS, CDI, health), when `AgentConfig.dra`;
- `slices`: this node's local Instances published as its DRA ResourceSlice pool, under the same setting.
Per Configuration, `AgentConfig.device_paths` or its `devplace.io/device-paths` annotation (`api.device_paths`) turns
off one of the two paths: `dra` serves it no IL or CL plugin, `device-plugins` publishes none of its Instances.

Concurrency: everything runs on one event loop. Informer change handlers run synchronously and only mark work (a
dirty Configuration, the plugin set, a pod to release, a ListAndWatch to re-send); the parts do it. One `Supervisor`
owns every task: the long-running loops (informers, reconcile, timers, kubelet, release, handlers, discovery streams)
and every piece of in-flight work (claims, releases, PodResources looks, condition writes, retries). `is_idle` is
exact: False while any work is marked, in flight, or a ListAndWatch send or a due registration is pending.

Allocate first: while an Allocate is in flight (`hold`), ListAndWatch wake-ups (except forced ones, after a refusal)
and the PodResources look a claim asks for are recorded but not started; they start when the last Allocate in flight
has ended, i.e. its answer is on the wire. Nothing is lost: a held notification counts as pending.

Failure semantics: a store that cannot be reached when the agent starts is not a reason to exit: the first listing
is retried with the supervisor's backoff (`RESTART_BACKOFF`, on the injected clock), each failure logged, until it
answers (a misconfigured store, a bad URL or an SQLite file that cannot be opened, fails before this, at once). A
loop that crashes is logged and restarted by the supervisor after a real-time backoff (the failures it recovers from
are real: a store, a socket); one that keeps crashing (`MAX_RESTARTS` in a row) is fatal:
`supervisor.failure` is set, `await agent.failed()` returns it, and `devplace agent` exits non-zero so its process
manager restarts it. Grace periods (slot release, offline Instances) run on the injected Clock. `stop` leaves the
store as it is: held slots survive an agent restart, and the next agent derives what to release from the store and
the kubelet's PodResources.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devplace import errors
from devplace.agent import _samples as samples
from devplace.agent._caches import NodeCache, PodInfo
from devplace.agent._discoveries import Discoveries
from devplace.agent._dra import DraPlugin, dra_served
from devplace.agent._dracdi import DEFAULT_CDI_DIR
from devplace.agent._instances import InstanceRecord
from devplace.agent._pluginsets import PluginSet
from devplace.agent._reconcilers import Reconciler
from devplace.agent._release_rules import DeviceKey
from devplace.agent._releasers import Releaser
from devplace.agent._slices import SlicePublisher
from devplace.api import DevicePaths, device_paths, usage_problems
from devplace.clocks import Clock, SystemClock
from devplace.deviceplugin import DEVICE_PLUGIN_DIR, KUBELET_SOCKET_NAME, POD_RESOURCES_DIR, UNIX, Transport
from devplace.discovery import Device, HandlerRegistry, RegistrationServer
from devplace.store import Change, EventRecorder, Store
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

COMPONENT = "devplace-agent"
"""The agent's name on the Events it writes (`reportingComponent`; the node is the instance)."""

Key = tuple[str, str]

MAX_RESTARTS = 10
"""A loop that fails this many times in a row (without a healthy minute between) is fatal."""
RESTART_BACKOFF = (0.05, 5.0)
"""Seconds (real time) before a crashed loop is started again, doubling while it keeps crashing."""


@dataclass
class AgentConfig:
    node: str
    kubelet_dir: Path
    resource_prefix: str | None = None
    """An override of every extended resource's prefix; None: each Configuration's API group (`api.devices`)."""
    release_grace: float = 300.0
    offline_grace: float = 300.0
    podresources_poll: float = 10.0
    registration_socket: Path | None = None
    dra: bool | None = False
    """Serve the kubelet's DRA plugin API as driver devplace.io (`dra`): True, False, or None: when the store serves
    resource.k8s.io/v1 (`devplace agent`'s default)."""
    cdi_dir: Path = DEFAULT_CDI_DIR
    """Where the DRA plugin writes CDI spec files."""
    device_paths: DevicePaths = "both"
    """How a Configuration without the `devplace.io/device-paths` annotation is served (`api.device_paths`):
    `device-plugins` (none of its Instances in this node's ResourceSlices), `dra` (none of its IL or CL plugins) or
    `both` (safe under devplace's scheduler, which sees both paths' slots; not under a stock kube-scheduler)."""
    transport: Transport = UNIX
    """How the device plugins and PodResources reach the kubelet: grpc.aio over unix sockets, or a simulated fleet's
    in-process transport (`deviceplugin.InProcessTransport`: the same messages and calls, no sockets)."""


class Agent:
    """The devplace node agent (see the module docstring)."""

    def __init__(self, config: AgentConfig, store: Store, handlers: HandlerRegistry, clock: Clock) -> None:
        self.config = config
        self.store = store
        self.handlers = handlers
        self.clock = clock
        self.plugin_dir = Path(config.kubelet_dir) / DEVICE_PLUGIN_DIR
        self.kubelet_socket = self.plugin_dir / KUBELET_SOCKET_NAME
        self.podresources_socket = Path(config.kubelet_dir) / POD_RESOURCES_DIR / KUBELET_SOCKET_NAME
        self.supervisor = Supervisor(
            f"agent {config.node}", clock=SystemClock(), backoff=RESTART_BACKOFF, max_restarts=MAX_RESTARTS
        )
        self._cache = NodeCache(store, config.node, self.supervisor)
        self.events = EventRecorder(store, COMPONENT, clock, instance=config.node)
        """Events for users (`kubectl describe instance`): a claim refused, a device gone (never blocks)."""
        self.discoveries = Discoveries(config.node, self._cache, handlers, self.supervisor, clock, self._mark)
        self.plugins = PluginSet(
            self,
            config.resource_prefix,
            self.plugin_dir,
            self._cache,
            self.supervisor,
            clock,
            self._mark_plugins,
            config.device_paths,
            config.transport,
        )
        self.reconciler = Reconciler(
            config.node,
            config.offline_grace,
            self._cache,
            self.discoveries,
            self.supervisor,
            clock,
            self.plugins.sync,
            self.events,
        )
        self.releaser = Releaser(
            config.node,
            config.resource_prefix,
            config.release_grace,
            config.podresources_poll,
            self.podresources_socket,
            self._cache,
            self.supervisor,
            clock,
            lambda: self.plugins.holds > 0,
            config.transport,
        )
        self._registration: RegistrationServer | None = None
        self.slices = SlicePublisher(config.node, store, self._cache, self.supervisor, config.dra, config.device_paths)
        """This node's ResourceSlices (`AgentConfig.dra`; None: where the store keeps a probe slice)."""
        self.dra: DraPlugin | None = None
        """The kubelet's DRA plugin, while it is served (`AgentConfig.dra`)."""
        self._started = False
        self._cache.configurations.subscribe(self._configuration_changed)
        self._cache.instances.subscribe(self._instance_changed)
        self._cache.pods.subscribe(self._pod_changed)
        self._cache.source_listeners.append(self._source_changed)
        samples.observe(self)  # akri_instance_count, devices, slots: read at scrape time

    # -- PluginHost ----------------------------------------------------------------------------------------------

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
        return self.discoveries.device((namespace, record.configuration), instance)

    def allocated(self, keys: Iterable[DeviceKey]) -> None:
        self.releaser.allocated(keys)

    def dra_serves(self, record: InstanceRecord) -> bool:
        """Whether a DRA claim may hold slots of this Instance: this agent serves DRA and its Configuration is
        published to DRA too."""
        if self.dra is None:
            return False
        configuration = self._cache.configuration_obj(record.namespace, record.configuration)
        return device_paths(configuration, self.config.device_paths) != "device-plugins"

    def claim_refused(self, namespace: str, instance: str, reason: str) -> None:
        record = self._cache.instance(namespace, instance)
        regarding = record.obj if record is not None else {"kind": "Instance", "name": instance, "namespace": namespace}
        self.events.emit(regarding, "ClaimRefused", f"{self.node}: a slot claim was refused: {reason}", "Warning")

    def hold(self) -> Callable[[], None]:
        """Busy, with plugin wake-ups and PodResources looks held back, until the returned function is called."""
        release = self.supervisor.hold()
        self.plugins.holds += 1
        resumed = False

        def resume() -> None:
            nonlocal resumed
            if resumed:
                return
            resumed = True
            self.plugins.holds -= 1
            if self.plugins.holds == 0:
                self.plugins.release_held()
                self.releaser.release_held()
            release()

        return resume

    # -- lifecycle -----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """List the store, then start discovery, plugins and release loops; returns once the informers run."""
        if self._started:
            return
        self._started = True
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        await self._first_listing()
        if self.config.registration_socket is not None:
            self._registration = RegistrationServer(Path(self.config.registration_socket), self.handlers)
            await self._registration.start()
        release = self.supervisor.hold()
        try:
            await self.releaser.observe()
        finally:
            release()
        self.plugins.observe_kubelet()
        if self.config.dra or (self.config.dra is None and await dra_served(self.store)):
            self.dra = DraPlugin(self, self.store, Path(self.config.kubelet_dir), Path(self.config.cdi_dir), self.clock)
            try:
                await self.dra.start()
            except errors.Invalid as e:
                if self.config.dra:
                    raise  # asked for: the agent does not run without it
                log.error("%s: not serving the kubelet's DRA plugin API: %s", self.node, e)
                self.dra = None
        await self.slices.start()
        loop = self.supervisor.loop
        loop("reconcile", self.reconciler.run)
        loop("kubelet", self.plugins.watch_kubelet)
        loop("kubelet presence", self.plugins.presence.run)
        loop("release", self.releaser.run)
        loop("handlers", self.discoveries.watch_handlers)
        loop("events", self.events.run)

    async def _first_listing(self) -> None:
        """List the store and start the informers, retried while the store is `Unavailable` (module docstring)."""
        pause = RESTART_BACKOFF[0]
        while True:
            try:
                await self._cache.start()
                return
            except errors.Unavailable as e:
                log.warning("%s: the store is unavailable (%s); trying again in %.2fs", self.node, e.message, pause)
            await self.clock.sleep(pause)
            pause = min(pause * 2, RESTART_BACKOFF[1])

    async def stop(self) -> None:
        """Stop every task and plugin (sockets removed, discovery streams closed); the store is left as it is."""
        await self.discoveries.stop()
        await self.supervisor.stop()
        await self.plugins.stop()
        await self.releaser.close()
        if self.dra is not None:
            await self.dra.stop()
            self.dra = None
        if self._registration is not None:
            await self._registration.stop()
            self._registration = None
        self._started = False

    async def failed(self) -> BaseException:
        """Wait until a loop fails for good (`supervisor.failed`); the daemon exits non-zero on it."""
        return await self.supervisor.failed()

    def is_idle(self) -> bool:
        """No work marked, no reconcile, claim, release or registration in flight, every plugin list sent."""
        return (
            not self.reconciler.pending
            and self.supervisor.idle
            and not self.releaser.refreshing
            and not self.plugins.pending
            and not self.events.pending
            and not self.slices.pending
        )

    # -- change handlers (synchronous: they mark work) -------------------------------------------------------------

    def _mark(self, key: Key) -> None:
        self.reconciler.mark(key)

    def _mark_plugins(self) -> None:
        self.reconciler.mark_plugins()

    def _configuration_changed(self, change: Change[Any]) -> None:
        if _same_but_status(change.old, change.new):
            return  # the controller's counts or another node's conditions: nothing this node decides reads them
        self.reconciler.mark(change.key)
        self.reconciler.mark_plugins()
        self.plugins.notify("cl", change.key)

    def _source_changed(self, source: tuple[str, str, str]) -> None:
        for key in self._cache.sources.referrers(source):
            self.reconciler.mark(key)

    def _pod_changed(self, change: Change[PodInfo]) -> None:
        self.releaser.pod_changed(change)

    def _instance_changed(self, change: Change[InstanceRecord]) -> None:
        key = change.key
        old, record = change.old, change.new
        if (
            record is not None
            and record.usage.unreadable
            and (old is None or old.usage.unreadable != record.usage.unreadable)
        ):
            self._report_unreadable(record)
        node = self.node
        was = old is not None and node in old.nodes
        now = record is not None and node in record.nodes
        if old is not None and record is not None and old.configuration == record.configuration:
            configurations: Collection[str] = (record.configuration,)  # a watch event's usual case
        else:
            configurations = {r.configuration for r in (old, record) if r is not None}
        for configuration in configurations:
            cfg_key = (key[0], configuration)
            # A claim or release changes only holders: nothing for the Instance lifecycle to decide. An Instance that
            # lists this node neither before nor after (one no node lists: every agent's cache has those) is the
            # business of the node that left it last, which marks it offline and expires it on its own timer; at a
            # thousand nodes, every agent reconciling every such change was most of an unplug's work. A (re)started
            # agent reconciles them all once (`Reconciler.mark_all`).
            if (was or now) and not _same_lifecycle(old, record):
                self.reconciler.mark(cfg_key)
            self.plugins.notify_change("cl", cfg_key, old, record)
        self.plugins.notify_change("il", key, old, record)
        if was != now:
            self.reconciler.mark_plugins()

    def _report_unreadable(self, record: InstanceRecord) -> None:
        """Say once per change which slots of an Instance break the slot rules, and what this node does about it."""
        unreadable = set(record.usage.unreadable)
        found = [
            str(p)
            for p in usage_problems(record.name, record.usage.capacity, record.obj["spec"].get("deviceUsage"))
            if p.path.removeprefix("spec.deviceUsage.") in unreadable
        ]
        log.warning(
            "%s: Instance %s/%s breaks the slot rules (%s); %s repairs the slots it holds, leaves the others to "
            "their nodes, and serves the rest",
            self.node,
            record.namespace,
            record.name,
            "; ".join(found),
            self.node,
        )


_UNREAD_METADATA = ("resourceVersion", "managedFields")


def _same_but_status(old: Any, new: Any) -> bool:
    """Whether two cached Configurations (`caches.ConfiguredEntry`) differ at most in their status (and the metadata
    every write changes): a Configuration's status changes with every Instance count the controller writes, and at a
    thousand nodes a reconcile of every node per status write was most of the fleet's work."""
    if old is None or new is None:
        return False
    a, b = old.obj, new.obj
    if a.get("apiVersion") != b.get("apiVersion") or a.get("spec") != b.get("spec"):
        return False
    meta_a, meta_b = a.get("metadata") or {}, b.get("metadata") or {}
    keys = (set(meta_a) | set(meta_b)) - set(_UNREAD_METADATA)
    return all(meta_a.get(k) == meta_b.get(k) for k in keys)


def _same_lifecycle(old: InstanceRecord | None, new: InstanceRecord | None) -> bool:
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
