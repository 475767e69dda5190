"""`Fleet`: the real parts of a cluster in one process, over any store, with simulated devices and fake time.

Per node it runs a real agent (`devplace.agent.Agent`) and a simulated kubelet (`SimKubelet`) that talk over real gRPC
on unix sockets under a short temporary directory (AF_UNIX paths are limited to 107 bytes; in /dev/shm where the
machine has that tmpfs, since a thousand nodes make tens of thousands of socket files, which a disk-backed /tmp
created 60x slower here), and a `sim` discovery handler reading a shared device `World`. Nothing is mocked: what a
test sees here is what a node would do.
`Fleet(transport="inprocess")` carries the same gRPC messages and calls between kubelets and agents in process
(`deviceplugin.InProcessTransport`, for hundreds of nodes); the default stays on real sockets.

Time: `fleet.clock` is a `FakeClock`. It moves only when told: `await fleet.clock.advance(s)` wakes sleepers (grace
periods, PodResources polls) but does not wait for the work they start, so callers `await fleet.settle()` afterwards;
`await fleet.advance(s)` does both, in steps of the PodResources poll period, so periodic work runs at every tick.

Settling: `settle()` is event-driven. Every part counts its pending work exactly (an agent's `is_idle` includes marked
work and pending ListAndWatch sends; a kubelet holds queued admissions, a due Node write and plugin handshakes on its
`Supervisor`), so the fleet is settled when no part is busy and the store revision did not move across a flush: a
few event-loop passes and a round trip on every plugin connection (a ListAndWatch message an agent has sent is on
its way to the kubelet; the round trip on the same connection arrives after it; in process nothing is ever in flight,
so there is no round trip: `SimKubelet.flush_plugins`). While parts are busy, `settle` sleeps until one of their
supervisors reports idle (`wait_idle`) or fails, and checks again; only a part without a supervisor is polled. It
raises `errors.Unavailable` naming the busy parts on timeout, and a part's fatal failure (a loop its supervisor could
not restart) as it is.

Memory: a fleet keeps every part's caches in one heap, almost all of it long-lived. While any fleet runs, Python's
cyclic collector runs its young generation every `YOUNG_COLLECTION_EVERY` allocations instead of 700 (and the older
generations accordingly less often): at 10,000 devices on 1,000 nodes the default spent 30% of the run collecting,
mostly passes over the whole heap that found nothing. The thresholds in force before are restored when the last
fleet stops.

Cluster-level parts join with `add_part(name, factory)`: any object with `start`, `stop` and `is_idle`, built from
the fleet's store and clock, started after the nodes and included in `settle` (through its `supervisor` when it has
one); `restart_part` replaces one with a fresh one. By default a fleet runs the real cluster-level parts:
`scheduler` (the resource-class `Scheduler`, which counts a device on a node only once the node advertises its
Instance-level resource, so it never binds a pod ahead of the kubelet's plugin), `classes` (`ClassMatcher`: group
members by `resourceClass`, on the scheduler's class engine) and `controller` (the broker `Controller`). Their CAS
retries and loop restarts run in real time, their timers (grace periods, pool timeouts) on the fake clock.
`Fleet(scheduler=False, controller=False)` runs nodes only.

Pods: `run_pod(name, node=...)` binds the pod itself; without `node` the scheduler places it, and the verdict may be
the scheduler's (Pending, `PodScheduled=False` with the per-node reasons). Nodes die with `stop_node` (agent and
kubelet stop, the Node is deleted) and return with `start_node`.

Writes go through the same boundary as the API server and `devplace apply`: `apply` validates every document
(`api.manifests.validated`, stored as written) before writing any, then runs the one apply plan
(`api.applies.plan_apply`) inside `store.cas` for each.
"""

from __future__ import annotations

import asyncio
import builtins
import gc
import inspect
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, cast

import devplace.placement  # noqa: F401  (registers the fleet kinds: `apply` and `list` take every kind)
from devplace import errors
from devplace.agent import Agent, AgentConfig
from devplace.api import (
    DevicePaths,
    dns1123_subdomain_problem,
    json_tree,
    lookup,
    normalize,
    parse_positioned,
    validated,
)
from devplace.clocks import FakeClock, SystemClock
from devplace.controller import ClassMatcher, Controller
from devplace.deviceplugin import TransportName, transport_named
from devplace.discovery import HandlerRegistry, World, builtin_registry
from devplace.scheduler import ADMISSION, POD_SCHEDULED, Scheduler, Strategy
from devplace.sim._kubelets import SimKubelet
from devplace.store import EventRecorder, InformerSet, Store, apply_object, open_store
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

_POLL = 0.005
"""How often a part without a supervisor is asked whether it is idle (real time)."""
_PASSES = 3
"""Event-loop passes `settle` lets run before it trusts an idle, unchanged fleet (callbacks due at once)."""


SCHEDULER = "scheduler"
CLASSES = "classes"
CONTROLLER = "controller"
"""Names of the cluster-level parts a fleet runs by default (`Fleet(scheduler=..., controller=...)`)."""


class Part(Protocol):
    """A cluster-level part the fleet runs beside its nodes (a controller, a scheduler): started after the nodes,
    stopped before them, and polled by `settle`. `start` may be a coroutine or a plain function."""

    def start(self) -> Any: ...

    async def stop(self) -> None: ...

    def is_idle(self) -> bool: ...


YOUNG_COLLECTION_EVERY = 50_000
"""The young-generation threshold of the cyclic collector while a fleet runs (module docstring)."""
_COLLECTION = (YOUNG_COLLECTION_EVERY, 20, 20)
_paced: list[tuple[int, int, int]] = []
"""The thresholds before the first running fleet paced collection, once per running fleet (the last restores)."""


def _pace_collection() -> None:
    _paced.append(gc.get_threshold())
    gc.set_threshold(*_COLLECTION)


def _unpace_collection() -> None:
    if _paced:
        before = _paced.pop()
        if not _paced:
            gc.set_threshold(*before)


def _scratch_parent() -> str:
    """Where a fleet's directory goes: /dev/shm when it is a writable directory (memory-backed), else /tmp; both
    short enough for AF_UNIX paths (module docstring)."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else "/tmp"


PartFactory = Callable[[Store, FakeClock], Part]
"""Builds a part once the fleet runs and its store exists."""


@dataclass
class _ClusterPart:
    name: str
    factory: PartFactory
    part: Part | None = None
    starting: asyncio.Task[None] | None = None


@dataclass
class _NodeParts:
    """One node's parts. The kubelet and agent config exist once the fleet runs (they need the store and root)."""

    name: str
    index: int
    handlers: HandlerRegistry
    kubelet: SimKubelet | None = None
    config: AgentConfig | None = None
    agent: Agent | None = None
    starting: asyncio.Task[None] | None = None
    down: bool = False
    """Taken down by `stop_node`: neither its kubelet nor its agent runs, and `settle` does not wait for them."""


class Fleet:
    """A simulated cluster: nodes (agent + kubelet each), a device world, a store and a fake clock."""

    def __init__(
        self,
        store: str | Store = "memory",
        *,
        resource_prefix: str | None = None,
        clock: FakeClock | None = None,
        release_grace: float = 300.0,
        offline_grace: float = 300.0,
        podresources_poll: float = 10.0,
        root: Path | None = None,
        scheduler: bool = True,
        controller: bool = True,
        strategy: Strategy = "firstFit",
        node_grace: float = 300.0,
        pending_grace: float = 300.0,
        dra: bool = False,
        device_paths: DevicePaths = "both",
        transport: TransportName = "unix",
    ) -> None:
        """`scheduler` runs the resource-class `Scheduler` (device-selection `strategy`); `controller` runs the broker
        `Controller` (with `node_grace` and `pending_grace`) and the `ClassMatcher` its group members by class use.
        Both are cluster-level parts, started after the nodes and waited for by `settle`. `dra`: every agent serves the
        kubelet's DRA plugin and publishes its local devices' ResourceSlices (the controller the shared ones), and
        every simulated kubelet prepares pods' ResourceClaims through it (CDI specs in
        `<kubelet dir>/cdi`). `device_paths`: the agents' and the controller's default for a Configuration without
        the `devplace.io/device-paths` annotation (`api.device_paths`; `both`: devplace's scheduler sees both paths).
        `transport`: how kubelets and agents talk: `unix` (the default: a real gRPC server per plugin, on unix
        sockets) or `inprocess` (`deviceplugin.InProcessTransport`: the same messages, calls and socket files without
        sockets, for fleets of hundreds of nodes; DRA's plugins stay on sockets)."""
        self.clock = clock or FakeClock()
        self.transport = transport_named(transport)
        self.world = World()
        self.resource_prefix = resource_prefix
        """An override of every extended resource's prefix; None: each Configuration's API group (`api.devices`)."""
        self.release_grace = release_grace
        self.offline_grace = offline_grace
        self.podresources_poll = podresources_poll
        self.dra = dra
        self.device_paths: DevicePaths = device_paths
        self._store_spec = store
        self._store: Store | None = None if isinstance(store, str) else store
        self._owns_store = isinstance(store, str)
        self._root = Path(root) if root is not None else None
        self._owns_root = root is None
        self._nodes: dict[str, _NodeParts] = {}
        self._parts_by_name: dict[str, _ClusterPart] = {}
        self._entered = False
        self.strategy: Strategy = strategy
        self.node_grace = node_grace
        self.pending_grace = pending_grace
        if scheduler:
            self.add_part(SCHEDULER, self._new_scheduler)
        if controller:
            self.add_part(CLASSES, lambda store, clock: ClassMatcher(store, clock))
            self.add_part(CONTROLLER, self._new_controller)

    # -- lifecycle -------------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._store is None:
            assert isinstance(self._store_spec, str)
            self._store = open_store(self._store_spec, clock=self.clock)
        InformerSet.of(self._store, wide=True)  # every part lives here: one list and one watch per kind
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="dpsim-", dir=_scratch_parent()))
        self._root.mkdir(parents=True, exist_ok=True)
        for parts in self._nodes.values():
            self._materialize(parts)
        self._entered = True
        _pace_collection()
        try:
            await asyncio.gather(*(self._start_node(parts) for parts in self._nodes.values() if not parts.down))
            for cluster_part in self._parts_by_name.values():
                await self._start_part(cluster_part)
        except BaseException:
            await self._shutdown()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._shutdown()

    async def _shutdown(self) -> None:
        if self._entered:
            _unpace_collection()
        self._entered = False
        for cluster_part in reversed(self._parts_by_name.values()):
            if cluster_part.starting is not None and not cluster_part.starting.done():
                cluster_part.starting.cancel()
                await asyncio.gather(cluster_part.starting, return_exceptions=True)
            if cluster_part.part is not None:
                await cluster_part.part.stop()
                cluster_part.part = None
        for parts in self._nodes.values():
            if parts.starting is not None and not parts.starting.done():
                parts.starting.cancel()
                await asyncio.gather(parts.starting, return_exceptions=True)
        for parts in self._nodes.values():
            if parts.agent is not None:
                await parts.agent.stop()
                parts.agent = None
        for parts in self._nodes.values():
            if parts.kubelet is not None:
                await parts.kubelet.stop()
        if self._owns_store and self._store is not None:
            await self._store.close()
            self._store = None
        if self._owns_root and self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    @property
    def store(self) -> Store:
        if self._store is None:
            raise errors.Unavailable("the fleet is not running: use `async with Fleet(...) as fleet`")
        return self._store

    @property
    def nodes(self) -> list[str]:
        return list(self._nodes)

    # -- nodes -----------------------------------------------------------------------------------------------------

    def add_node(self, name: str, *, down: bool = False) -> None:
        """Add a node (agent + kubelet). Starts on enter, or at once when the fleet runs (`settle` awaits it).
        With `down` it is added as `stop_node` leaves one (nothing runs, nothing is written) until `start_node`:
        `devplace up` restores a saved world so, without the node registering for a moment first."""
        problem = dns1123_subdomain_problem(name)
        if problem:
            raise errors.Invalid.field("name", problem)
        if name in self._nodes:
            raise errors.AlreadyExists(f"node {name} is already in the fleet")
        handlers = builtin_registry(name, world=self.world, clock=self.clock)
        parts = _NodeParts(name, len(self._nodes), handlers, down=down)
        self._nodes[name] = parts
        if self._entered:
            self._materialize(parts)
            if not down:
                parts.starting = asyncio.get_running_loop().create_task(self._start_node(parts), name=f"start-{name}")

    def _materialize(self, parts: _NodeParts) -> None:
        """Give a node its kubelet directory (short: `<root>/n<index>`), kubelet and agent config."""
        assert self._root is not None
        assert self._store is not None
        kubelet_dir = self._root / f"n{parts.index}"
        parts.config = AgentConfig(
            node=parts.name,
            kubelet_dir=kubelet_dir,
            resource_prefix=self.resource_prefix,
            release_grace=self.release_grace,
            offline_grace=self.offline_grace,
            podresources_poll=self.podresources_poll,
            dra=self.dra,
            cdi_dir=kubelet_dir / "cdi",
            device_paths=self.device_paths,
            transport=self.transport,
        )
        cdi_dirs = [kubelet_dir / "cdi"] if self.dra else None
        parts.kubelet = SimKubelet(
            parts.name, kubelet_dir, self._store, self.clock, cdi_dirs=cdi_dirs, transport=self.transport
        )

    async def _start_node(self, parts: _NodeParts) -> None:
        assert parts.kubelet is not None
        await parts.kubelet.start()
        await self._start_agent(parts)

    async def _start_agent(self, parts: _NodeParts) -> None:
        assert parts.config is not None
        agent = Agent(parts.config, self.store, parts.handlers, self.clock)
        await agent.start()
        parts.agent = agent

    def add_part(self, name: str, factory: PartFactory) -> None:
        """Run a cluster-level part (e.g. the controller or the scheduler) in this fleet; `settle` waits for it.

        `factory(store, clock)` builds it when the fleet runs: on enter, or at once when already running.
        """
        if name in self._parts_by_name:
            raise errors.AlreadyExists(f"part {name} is already in the fleet")
        cluster_part = _ClusterPart(name, factory)
        self._parts_by_name[name] = cluster_part
        if self._entered:
            cluster_part.starting = asyncio.get_running_loop().create_task(
                self._start_part(cluster_part), name=f"start-{name}"
            )

    async def _start_part(self, cluster_part: _ClusterPart) -> None:
        part = cluster_part.factory(self.store, self.clock)
        started = part.start()
        if inspect.isawaitable(started):
            await started
        cluster_part.part = part

    async def restart_part(self, name: str) -> None:
        """Stop a cluster-level part and start a fresh one from its factory (a controller or scheduler restart: it
        remembers nothing but what the store holds)."""
        cluster_part = self._parts_by_name.get(name)
        if cluster_part is None:
            raise errors.Invalid.field("name", f"no part {name!r} in this fleet")
        if cluster_part.starting is not None:
            await cluster_part.starting
        if cluster_part.part is not None:
            await cluster_part.part.stop()
            cluster_part.part = None
        await self._start_part(cluster_part)

    def _new_scheduler(self, store: Store, clock: FakeClock) -> Scheduler:
        # CAS retries and loop restarts in real time: the fake clock moves only when a test says so
        return Scheduler(
            store,
            clock,
            strategy=self.strategy,
            resource_prefix=self.resource_prefix,
            contention_clock=SystemClock(),
            advertised_only=True,
            events=EventRecorder(store, "devplace-scheduler", clock),
        )

    def _new_controller(self, store: Store, clock: FakeClock) -> Controller:
        matcher = self.classes
        controller = Controller(
            store,
            clock,
            resource_prefix=self.resource_prefix,
            node_grace=self.node_grace,
            pending_grace=self.pending_grace,
            class_matches=matcher,
            contention_clock=SystemClock(),
            events=EventRecorder(store, "devplace-controller", clock),
            dra_slices=self.dra,  # shared Instances' ResourceSlices, beside the agents' local ones
            device_paths=self.device_paths,
        )
        matcher.bind(controller)
        return controller

    @property
    def scheduler(self) -> Scheduler:
        """The running scheduler (`Fleet(scheduler=True)`, the default)."""
        return cast(Scheduler, self.part(SCHEDULER))

    @property
    def controller(self) -> Controller:
        """The running broker controller (`Fleet(controller=True)`, the default)."""
        return cast(Controller, self.part(CONTROLLER))

    @property
    def classes(self) -> ClassMatcher:
        """The class matcher behind the controller's group members by `resourceClass`."""
        return cast(ClassMatcher, self.part(CLASSES))

    def part(self, name: str) -> Part:
        cluster_part = self._parts_by_name.get(name)
        if cluster_part is None:
            raise errors.Invalid.field("name", f"no part {name!r} in this fleet")
        if cluster_part.part is None:
            raise errors.Unavailable(f"part {name} is not running")
        return cluster_part.part

    def _parts(self, node: str) -> _NodeParts:
        parts = self._nodes.get(node)
        if parts is None:
            known = ", ".join(self._nodes) or "none"
            raise errors.Invalid.field("node", f"no node {node!r} in this fleet (nodes: {known})")
        return parts

    def kubelet(self, node: str) -> SimKubelet:
        kubelet = self._parts(node).kubelet
        if kubelet is None:
            raise errors.Unavailable(f"node {node} has not started: use `async with Fleet(...) as fleet`")
        return kubelet

    def agent(self, node: str) -> Agent:
        agent = self._parts(node).agent
        if agent is None:
            raise errors.Unavailable(f"the agent of {node} is not running")
        return agent

    async def restart_agent(self, node: str) -> None:
        """Stop the node's agent and start a fresh one over the same store and kubelet (held slots survive)."""
        parts = self._parts(node)
        await self._await_start(parts)
        if parts.agent is not None:
            await parts.agent.stop()
            parts.agent = None
        await self._start_agent(parts)

    async def restart_kubelet(self, node: str, *, timeout: float = 10.0) -> None:
        """Restart the node's kubelet and wait until every plugin registered before is registered again."""
        kubelet = self.kubelet(node)
        await self._await_start(self._parts(node))
        before = list(kubelet.endpoints())
        await kubelet.restart()
        await kubelet.wait_registered(before, timeout=timeout)

    async def _await_start(self, parts: _NodeParts) -> None:
        if parts.starting is not None:
            await parts.starting

    async def stop_node(self, node: str, *, delete: bool = True) -> None:
        """Take a node down as a machine that died: its agent and kubelet stop without cleaning up anything they
        wrote, and with `delete` its Node object is deleted too (`kubectl delete node`), so the controller frees its
        slots and drops it from Instances at once (without: when the Node is NotReady past `node_grace`).
        `settle` does not wait for a node that is down; `start_node` brings it back."""
        parts = self._parts(node)
        await self._await_start(parts)
        parts.down = True
        if parts.agent is not None:
            await parts.agent.stop()
            parts.agent = None
        if parts.kubelet is not None:
            await parts.kubelet.stop()
        if delete:
            try:
                await self.store.delete("Node", node, "")
            except errors.NotFound:
                pass

    async def start_node(self, node: str) -> None:
        """Bring a node taken down by `stop_node` back: its kubelet (with the allocations it checkpointed) and a
        fresh agent start again, and the kubelet registers its Node anew."""
        parts = self._parts(node)
        if not parts.down:
            return
        parts.down = False
        await self._start_node(parts)

    def is_down(self, node: str) -> bool:
        return self._parts(node).down

    # -- the device world ------------------------------------------------------------------------------------------

    def plug(self, device_id: str, nodes: Sequence[str], properties: Mapping[str, str] | None = None) -> None:
        """Plug a device into nodes (a device seen by several nodes is shared); the `sim` handlers report it."""
        self.world.plug(device_id, list(nodes), properties)

    def unplug(self, device_id: str, nodes: Sequence[str] | None = None) -> None:
        """Unplug a device from `nodes` (None = everywhere)."""
        self.world.unplug(device_id, None if nodes is None else list(nodes))

    # -- objects ---------------------------------------------------------------------------------------------------

    async def apply(self, manifest: str | Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Create or CAS-update objects from YAML/JSON text, a dict or a list of dicts; returns them as stored.

        Every document is validated first: one bad document raises `errors.Invalid` (naming the document and the
        field) and nothing is written.
        """
        objects = self._validated(manifest)
        return [await self._apply_one(obj) for obj in objects]

    @staticmethod
    def _validated(manifest: str | Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        if isinstance(manifest, str):
            raw: list[tuple[str, Any]] = [(f"document {i}", doc) for i, doc in parse_positioned(manifest)]
        else:
            docs = [manifest] if isinstance(manifest, Mapping) else list(manifest)
            raw = [(f"document {i}", doc) for i, doc in enumerate(docs, start=1)]
        out = []
        for label, doc in raw:
            try:
                out.append(validated(json_tree(dict(doc) if isinstance(doc, Mapping) else doc)))
            except errors.Invalid as e:
                raise errors.Invalid(f"{label}: {e.message}", e.fields) from e
        return out

    async def _apply_one(self, obj: dict[str, Any]) -> dict[str, Any]:
        """`store.applies.apply_object` with the API server's admission rules, as `devplace apply` does (the CAS
        backoff runs in real time: the fake clock moves only when a test says so)."""
        applied = await apply_object(self.store, obj, admission=ADMISSION)
        meta = obj["metadata"]
        for note in applied.notes:
            log.info("%s %s/%s: %s", obj["kind"], meta.get("namespace") or "", meta["name"], note)
        return applied.object

    @staticmethod
    def _scope(kind: str, namespace: str | None) -> tuple[str, str]:
        info = lookup(kind)
        if info.namespaced:
            return info.kind, namespace or "default"
        if namespace:
            raise errors.Invalid.field("namespace", f"{info.kind} is cluster-scoped and takes no namespace")
        return info.kind, ""

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when absent (namespaced kinds default to `default`)."""
        kind, ns = self._scope(kind, namespace)
        try:
            return await self.store.get(kind, name, ns)
        except errors.NotFound:
            return None

    async def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Every object of `kind` (namespace None = all namespaces)."""
        info = lookup(kind)
        return (await self.store.list(info.kind, namespace if info.namespaced else None)).items

    async def delete(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """Delete an object; raises `errors.NotFound` when it is absent."""
        kind, ns = self._scope(kind, namespace)
        return await self.store.delete(kind, name, ns)

    # -- pods ------------------------------------------------------------------------------------------------------

    async def run_pod(
        self,
        name: str,
        node: str | None = None,
        requests: Mapping[str, int | str] | None = None,
        containers: Sequence[Mapping[str, Any]] | None = None,
        namespace: str = "default",
        *,
        spec: Mapping[str, Any] | None = None,
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        """Create a pod, wait for its verdict (event-driven, on a store watch), settle, and return the pod.

        With `node` the pod is bound to it and its kubelet admits it. Without, the pod is left to the scheduler, and
        the verdict may also be the scheduler's: `Pending` with condition `PodScheduled=False` (reason
        `Unschedulable`, the per-node message). `containers` is a list of `{name, requests}`; without it the pod has one
        container `main` asking `requests` (extended resources, classes `rc.devplace.io/<class>`, cpu, memory).
        `spec` adds pod spec fields (nodeSelector, affinity, ...). The returned pod's `status.phase` is `Running`,
        `Failed` with the kubelet's `reason` and `message`, or `Pending` with the scheduler's condition.
        """
        if node is not None:
            self._parts(node)
        elif SCHEDULER not in self._parts_by_name:
            raise errors.Invalid.field("node", "required: this fleet runs no scheduler to place the pod")
        specs = list(containers) if containers is not None else [{"name": "main", "requests": dict(requests or {})}]
        pod_spec: dict[str, Any] = {
            **dict(spec or {}),
            "restartPolicy": "Never",
            "containers": [self._container(c, i) for i, c in enumerate(specs)],
        }
        if node is not None:
            pod_spec["nodeName"] = node
        pod = normalize(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace},
                "spec": pod_spec,
            }
        )
        async with self.store.watch("Pod", namespace, fields=f"metadata.name={name}") as events:
            await self.store.create(pod)
            try:
                async with asyncio.timeout(timeout):
                    async for event in events:
                        if event.type != "DELETED" and _has_verdict(event.object):
                            break
            except TimeoutError:
                who = f"the kubelet of {node}" if node is not None else "neither the scheduler nor a kubelet"
                raise errors.Unavailable(f"{who} decided on pod {namespace}/{name} in {timeout}s") from None
        await self.settle(timeout)
        return await self.store.get("Pod", name, namespace)

    @staticmethod
    def _container(spec: Mapping[str, Any], index: int) -> dict[str, Any]:
        name = spec.get("name") or f"c{index}"
        wanted = {str(k): str(v) for k, v in (spec.get("requests") or {}).items()}
        return {"name": name, "image": "devplace/sim", "resources": {"requests": wanted, "limits": dict(wanted)}}

    # -- what kubelets see -----------------------------------------------------------------------------------------

    def available(self, node: str) -> dict[str, int]:
        """Per resource on `node`: Healthy devices not allocated to containers, as its kubelet sees them."""
        return self.kubelet(node).available()

    def capacity(self, node: str) -> dict[str, int]:
        return self.kubelet(node).capacity()

    def allocatable(self, node: str) -> dict[str, int]:
        return self.kubelet(node).allocatable()

    # -- time and settling -----------------------------------------------------------------------------------------

    async def advance(self, seconds: float, *, step: float | None = None, timeout: float = 10.0) -> None:
        """Move fake time forward in steps (default: the PodResources poll period), settling after each."""
        if seconds < 0:
            raise errors.Invalid.field("seconds", "time only moves forward")
        step = step or self.podresources_poll
        if step <= 0:
            raise errors.Invalid.field("step", "must be positive")
        left = seconds
        while left > 1e-9:
            tick = min(step, left)
            await self.clock.advance(tick)
            await self.settle(timeout)
            left -= tick

    def _running(self) -> builtins.list[tuple[str, Any]]:
        """(label, part) of every running kubelet, agent and cluster part."""
        out: builtins.list[tuple[str, Any]] = []
        for parts in self._nodes.values():
            if parts.down:
                continue
            if parts.kubelet is not None:
                out.append((f"kubelet {parts.name}", parts.kubelet))
            if parts.agent is not None:
                out.append((f"agent {parts.name}", parts.agent))
        out += [(c.name, c.part) for c in self._parts_by_name.values() if c.part is not None]
        return out

    def busy_parts(self) -> builtins.list[str]:
        """Parts with pending work right now (empty when the fleet is idle)."""
        out: builtins.list[str] = []
        for parts in self._nodes.values():
            if parts.starting is not None and not parts.starting.done():
                out.append(f"node {parts.name} (starting)")
                continue
            if parts.down:
                continue
            if parts.kubelet is not None and not parts.kubelet.is_idle():
                out.append(f"kubelet {parts.name} ({', '.join(parts.kubelet.busy_with())})")
            if parts.agent is None:
                out.append(f"agent {parts.name} (not running)")
            elif not parts.agent.is_idle():
                out.append(f"agent {parts.name}")
        for cluster_part in self._parts_by_name.values():
            if cluster_part.part is None:
                out.append(f"{cluster_part.name} (starting)")
            elif not cluster_part.part.is_idle():
                out.append(cluster_part.name)
        return out

    def _check_failures(self) -> None:
        """Raise a start that failed, or a part's fatal failure (its supervisor gave up restarting a loop)."""
        starts = [(f"node {p.name}", p.starting) for p in self._nodes.values()]
        starts += [(c.name, c.starting) for c in self._parts_by_name.values()]
        for label, task in starts:
            if task is not None and task.done() and not task.cancelled():
                failure = task.exception()
                if failure is not None:
                    raise errors.Unavailable(f"{label} failed to start: {failure}") from failure
        for _, part in self._running():
            supervisor = getattr(part, "supervisor", None)
            if isinstance(supervisor, Supervisor) and supervisor.failure is not None:
                raise supervisor.failure

    async def _flush(self) -> None:
        """Let what is due run: a few event-loop passes, then a round trip on every plugin connection, so a
        ListAndWatch message an agent has sent has reached its kubelet (which then counts the Node write as busy)."""
        for _ in range(_PASSES):
            await asyncio.sleep(0)
        kubelets = [p.kubelet for p in self._nodes.values() if p.kubelet is not None and p.agent is not None]
        await asyncio.gather(*(k.flush_plugins() for k in kubelets))
        for _ in range(_PASSES):
            await asyncio.sleep(0)

    async def settle(self, timeout: float = 10.0) -> None:
        """Wait until no part has pending work and the store revision is stable (module docstring); `Unavailable`
        names the busy parts on timeout, and a part's fatal failure is raised as it is."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self._check_failures()
                    if not self.busy_parts():
                        revision = await self.store.revision()
                        await self._flush()
                        if not self.busy_parts() and await self.store.revision() == revision:
                            self._check_failures()
                            return
                        continue
                    await self._wake()
        except TimeoutError:
            busy = self.busy_parts()
            detail = ", ".join(busy) if busy else "store revision still moving"
            raise errors.Unavailable(f"the fleet did not settle within {timeout}s: busy: {detail}") from None

    async def _wake(self) -> None:
        """Sleep until a busy part's supervisor is idle or fails, a start ends, or (for parts without a supervisor,
        or busy beyond what their supervisor counts) a short poll period passed."""
        waits: builtins.list[asyncio.Future[Any]] = []
        poll = False
        for _, part in self._running():
            if part.is_idle():
                continue
            supervisor = getattr(part, "supervisor", None)
            if isinstance(supervisor, Supervisor) and not supervisor.idle:
                waits.append(asyncio.ensure_future(supervisor.wait_idle()))
                waits.append(asyncio.ensure_future(supervisor.failed()))
            else:
                poll = True
        starts = [p.starting for p in self._nodes.values()] + [c.starting for c in self._parts_by_name.values()]
        pending_starts = [t for t in starts if t is not None and not t.done()]
        waits += [asyncio.ensure_future(asyncio.shield(t)) for t in pending_starts]
        if pending_starts and not waits:
            poll = True
        if not waits:
            await asyncio.sleep(_POLL if poll else 0)
            return
        try:
            await asyncio.wait(waits, timeout=_POLL if poll else None, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()
            await asyncio.gather(*waits, return_exceptions=True)


def _has_verdict(pod: Mapping[str, Any]) -> bool:
    """Running or Failed (the kubelet's verdict), or unbound with `PodScheduled=False` (the scheduler's)."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Running", "Failed"):
        return True
    if (pod.get("spec") or {}).get("nodeName"):
        return False
    return any(c.get("type") == POD_SCHEDULED and c.get("status") == "False" for c in status.get("conditions") or [])
