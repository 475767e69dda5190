"""`Fleet`: the real parts of a cluster in one process, over any store, with simulated devices and fake time.

Per node it runs a real agent (`devplace.agent.Agent`) and a simulated kubelet (`SimKubelet`) that talk over real gRPC
on unix sockets under a short temporary directory (AF_UNIX paths are limited to 107 bytes), and a `sim` discovery
handler reading a shared device `World`. Nothing is mocked: what a test sees here is what a node would do.

Time: `fleet.clock` is a `FakeClock`. It moves only when told: `await fleet.clock.advance(s)` wakes sleepers (grace
periods, PodResources polls) but does not wait for the work they start, so callers `await fleet.settle()` afterwards;
`await fleet.advance(s)` does both, in steps of the PodResources poll period, so periodic work runs at every tick.

Settling: `settle()` polls real time in small steps until every agent and kubelet reports idle and the store revision
stayed unchanged for several consecutive checks spanning a short quiet period (gRPC messages in flight are invisible
to `is_idle`, and the quiet period covers them). It raises `errors.Unavailable` naming the busy parts on timeout.

Cluster-level parts (the controller, the scheduler) join with `add_part(name, factory)`: any object with `start`,
`stop` and `is_idle`, built from the fleet's store and clock, started after the nodes and included in `settle`.

Writes go through the same boundary as the API server: `apply` validates every document with `devplace.api` before
writing any, then creates or compare-and-swap updates each.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import logging
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

from devplace import errors
from devplace.agent import Agent, AgentConfig
from devplace.api import names, registry
from devplace.api.manifests import load_documents
from devplace.clocks import FakeClock
from devplace.discovery import HandlerRegistry, World, builtin_registry
from devplace.sim.kubelets import SimKubelet
from devplace.store import Store, mutate, open_store

__all__ = ["Fleet", "Part", "PartFactory"]

log = logging.getLogger(__name__)

_POLL = 0.005
_STABLE_CHECKS = 4
_QUIET = 0.03
_SERVER_OWNED = ("resourceVersion", "uid", "generation", "creationTimestamp")


class Part(Protocol):
    """A cluster-level part the fleet runs beside its nodes (a controller, a scheduler): started after the nodes,
    stopped before them, and polled by `settle`."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def is_idle(self) -> bool: ...


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


def _comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(obj))
    meta = out.get("metadata") or {}
    for key in _SERVER_OWNED:
        meta.pop(key, None)
    return out


def _applied(wanted: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any] | None:
    """`wanted` as an update of `current`: the user's fields replace, status and server-owned metadata are kept."""
    merged = copy.deepcopy(dict(wanted))
    meta = dict(merged.get("metadata") or {})
    current_meta = current.get("metadata") or {}
    for key in ("ownerReferences", "finalizers"):
        if key not in meta and key in current_meta:
            meta[key] = copy.deepcopy(current_meta[key])
    meta["resourceVersion"] = current_meta.get("resourceVersion")
    merged["metadata"] = meta
    if "status" not in merged and "status" in current:
        merged["status"] = copy.deepcopy(current["status"])
    if _comparable(merged) == _comparable(current):
        return None
    return merged


class Fleet:
    """A simulated cluster: nodes (agent + kubelet each), a device world, a store and a fake clock."""

    def __init__(
        self,
        store: str | Store = "memory",
        *,
        resource_prefix: str = "devplace.io",
        clock: FakeClock | None = None,
        release_grace: float = 300.0,
        offline_grace: float = 300.0,
        podresources_poll: float = 10.0,
        root: Path | None = None,
    ) -> None:
        self.clock = clock or FakeClock()
        self.world = World()
        self.resource_prefix = resource_prefix
        self.release_grace = release_grace
        self.offline_grace = offline_grace
        self.podresources_poll = podresources_poll
        self._store_spec = store
        self._store: Store | None = None if isinstance(store, str) else store
        self._owns_store = isinstance(store, str)
        self._root = Path(root) if root is not None else None
        self._owns_root = root is None
        self._nodes: dict[str, _NodeParts] = {}
        self._parts_by_name: dict[str, _ClusterPart] = {}
        self._entered = False

    # -- lifecycle -------------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._store is None:
            assert isinstance(self._store_spec, str)
            self._store = open_store(self._store_spec, clock=self.clock)
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="dpsim-", dir="/tmp"))
        self._root.mkdir(parents=True, exist_ok=True)
        for parts in self._nodes.values():
            self._materialize(parts)
        self._entered = True
        try:
            await asyncio.gather(*(self._start_node(parts) for parts in self._nodes.values()))
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

    def add_node(self, name: str) -> None:
        """Add a node (agent + kubelet). Starts on enter, or at once when the fleet runs (`settle` awaits it)."""
        problem = names.dns1123_subdomain_problem(name)
        if problem:
            raise errors.Invalid.field("name", problem)
        if name in self._nodes:
            raise errors.AlreadyExists(f"node {name} is already in the fleet")
        handlers = builtin_registry(name, world=self.world, clock=self.clock)
        parts = _NodeParts(name, len(self._nodes), handlers)
        self._nodes[name] = parts
        if self._entered:
            self._materialize(parts)
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
        )
        parts.kubelet = SimKubelet(parts.name, kubelet_dir, self._store, self.clock)

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
        await part.start()
        cluster_part.part = part

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
            docs = load_documents(manifest)
            for doc in docs:
                if doc.error is not None:
                    fields = getattr(doc.error, "fields", ())
                    raise errors.Invalid(f"{doc.label}: {doc.error.message}", fields) from doc.error
            return [doc.obj for doc in docs if doc.obj is not None]
        raw = [manifest] if isinstance(manifest, Mapping) else list(manifest)
        out = []
        for i, obj in enumerate(raw, start=1):
            try:
                out.append(registry.normalize(dict(obj) if isinstance(obj, Mapping) else obj))
            except errors.Invalid as e:
                raise errors.Invalid(f"document {i}: {e.message}", e.fields) from e
        return out

    async def _apply_one(self, obj: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self.store.create(obj)
        except errors.AlreadyExists:
            pass
        meta = obj["metadata"]
        return await mutate(
            self.store, obj["kind"], meta["name"], meta.get("namespace") or "", lambda cur: _applied(obj, cur)
        )

    @staticmethod
    def _scope(kind: str, namespace: str | None) -> tuple[str, str]:
        info = registry.lookup(kind)
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
        info = registry.lookup(kind)
        return (await self.store.list(info.kind, namespace if info.namespaced else None)).items

    async def delete(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """Delete an object; raises `errors.NotFound` when it is absent."""
        kind, ns = self._scope(kind, namespace)
        return await self.store.delete(kind, name, ns)

    # -- pods ------------------------------------------------------------------------------------------------------

    async def run_pod(
        self,
        name: str,
        node: str,
        requests: Mapping[str, int] | None = None,
        containers: Sequence[Mapping[str, Any]] | None = None,
        namespace: str = "default",
        *,
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        """Create a pod bound to `node`, wait for the kubelet's verdict, settle, and return the pod.

        `containers` is a list of `{name, requests}`; without it the pod has one container `main` asking `requests`.
        The returned pod's `status.phase` is `Running`, or `Failed` with the kubelet's `reason` and `message`.
        """
        self._parts(node)
        specs = list(containers) if containers is not None else [{"name": "main", "requests": dict(requests or {})}]
        pod = registry.normalize(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Never",
                    "containers": [self._container(c, i) for i, c in enumerate(specs)],
                },
            }
        )
        await self.store.create(pod)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            current = await self.store.get("Pod", name, namespace)
            if (current.get("status") or {}).get("phase") in ("Running", "Failed"):
                break
            if loop.time() > deadline:
                raise errors.Unavailable(f"the kubelet of {node} did not admit pod {namespace}/{name} in {timeout}s")
            await asyncio.sleep(_POLL)
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

    def busy_parts(self) -> builtins.list[str]:
        """Parts with pending work right now (empty when the fleet is idle apart from in-flight messages)."""
        out: builtins.list[str] = []
        for parts in self._nodes.values():
            if parts.starting is not None and not parts.starting.done():
                out.append(f"node {parts.name} (starting)")
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

    async def settle(self, timeout: float = 10.0) -> None:
        """Wait until no part has pending work and the store revision is stable; `Unavailable` names the busy parts."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        stable_since: float | None = None
        checks = 0
        last_revision = -1
        while True:
            starts = [(f"node {p.name}", p.starting) for p in self._nodes.values()]
            starts += [(c.name, c.starting) for c in self._parts_by_name.values()]
            for label, task in starts:
                if task is not None and task.done() and not task.cancelled():
                    failure = task.exception()
                    if failure is not None:
                        raise errors.Unavailable(f"{label} failed to start: {failure}") from failure
            busy = self.busy_parts()
            revision = await self.store.revision()
            now = loop.time()
            if busy or revision != last_revision:
                stable_since, checks = None, 0
            else:
                stable_since = now if stable_since is None else stable_since
                checks += 1
                if checks >= _STABLE_CHECKS and now - stable_since >= _QUIET:
                    return
            last_revision = revision
            if now > deadline:
                detail = ", ".join(busy) if busy else f"store revision still moving (at {revision})"
                raise errors.Unavailable(f"the fleet did not settle within {timeout}s: busy: {detail}")
            await asyncio.sleep(_POLL)
