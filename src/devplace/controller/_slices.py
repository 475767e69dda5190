"""Shared Instances as ResourceSlices: a device several nodes reach is published once, by the controller, in a slice
whose `nodeSelector` names the nodes that see it (DESIGN.md section 6a). Under NodeRestriction no node may write
such a slice, so the agents publish only their local devices (`agent.slices`) and this part the shared ones.

Pools: one per set of nodes (`api.shared_pool`: a slice has one selector, and a pool per node set keeps a change to
one shared device from touching another set's slices); every slice carries the label
`devplace.io/slice-publisher=controller`, by which this part lists its own. A device whose node set changes moves
pools; a pool whose last device goes is deleted; an Instance no node lists is in no pool. An Instance that is offline
(its nodes' handlers stopped reporting it, within the grace) or that its handler reports Unhealthy
(`discovery.device_healthy`) is tainted unhealthy where taints are kept, and left out where they are not. An
Instance whose Configuration is served through device plugins only (`api.device_paths`: its
`devplace.io/device-paths` annotation, else this part's default `paths`) is in no pool, so nothing allocates it
through DRA; a change of the annotation rewrites the pools at the next pass.

Slices are cluster-scoped and this part deletes the shared pools it does not want: one controller per cluster
publishes them (`--leader-elect`); a controller confined to a namespace would take the others' devices for gone.

On or off: `mode` as the agent's (True, False, None: where the store keeps a probe slice, `store.probe_support`).
Level-triggered like the rest of the controller: a change to an Instance, a Configuration or one of its slices marks
the pass dirty; one loop recomputes every shared pool from the caches and writes what `api.plan_pool` says changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from devplace import errors
from devplace.api import PUBLISHER_LABEL, DevicePaths, SliceSupport, device_paths, instance_devices, shared_pool
from devplace.discovery import device_healthy
from devplace.store import Change, Informer, Store, probe_support, write_pool
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

OFFLINE_SINCE = "devplace.io/offline-since"
"""`agent.instances.OFFLINE_SINCE` (the controller does not import the agent)."""


def _pool_of(obj: Mapping[str, Any]) -> str:
    return str(((obj.get("spec") or {}).get("pool") or {}).get("name") or "")


def _shared_nodes(obj: Mapping[str, Any]) -> tuple[str, ...] | None:
    spec = obj.get("spec") or {}
    nodes = spec.get("nodes") or []
    if not spec.get("shared") or not nodes:
        return None
    return tuple(sorted({str(n) for n in nodes}))


class SharedSlices:
    """The shared pools (module docstring)."""

    def __init__(
        self,
        store: Store,
        supervisor: Supervisor,
        mode: bool | None,
        namespace: str | None = None,
        paths: DevicePaths = "both",
    ) -> None:
        self.store = store
        self.paths: DevicePaths = paths
        """The device paths of a Configuration without the annotation (module docstring)."""
        self.supervisor = supervisor
        self.mode = mode
        self.support: SliceSupport | None = None
        self.instances: Informer[dict[str, Any]] = Informer(store, "Instance", namespace=namespace)
        self.configurations: Informer[dict[str, Any]] = Informer(store, "Configuration", namespace=namespace)
        self.slices: Informer[dict[str, Any]] = Informer(
            store, "ResourceSlice", selector=f"{PUBLISHER_LABEL}=controller", indexes={"pool": lambda s: [_pool_of(s)]}
        )
        self.writes = 0
        """Slice writes made, for benches and tests."""
        self._dirty = asyncio.Event()
        self._busy = False
        self._starting = False
        self._unsubscribe: list[Any] = []

    @property
    def pending(self) -> bool:
        return self._starting or (self.support is not None and (self._dirty.is_set() or self._busy))

    def start(self) -> None:
        """Start the loop (it probes the store first), unless off."""
        if self.mode is False:
            return
        self._starting = True
        self.supervisor.loop("shared slices", self.run)

    def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []

    async def _begin(self) -> bool:
        """Probe the store, then list and watch what the passes read; False: not publishing (module docstring)."""
        try:
            support = await probe_support(self.store, None)
            if support is None:
                if self.mode:
                    raise errors.Unavailable("--dra was asked for, but the store refuses ResourceSlices")
                return False
            for informer in (self.instances, self.configurations, self.slices):
                await informer.list_once()
            if not self._unsubscribe:
                for informer in (self.instances, self.configurations, self.slices):
                    self._unsubscribe.append(informer.subscribe(self._changed))
                    self.supervisor.loop(f"slices informer:{informer.name}", informer.run)
            self.support = support
            return True
        finally:
            self._starting = False

    def _changed(self, change: Change[Any]) -> None:
        self._dirty.set()

    async def run(self) -> None:
        if self.support is None and not await self._begin():
            await asyncio.Event().wait()  # off: parked until the controller stops
        self._dirty.set()
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            self._busy = True
            try:
                await self.sync()
            finally:
                self._busy = False

    def pools(self) -> dict[tuple[str, ...], list[dict[str, Any]]]:
        """Per node set, the devices of the shared Instances those nodes see."""
        assert self.support is not None
        out: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for (namespace, name), obj in sorted(self.instances.items()):
            nodes = _shared_nodes(obj)
            if nodes is None:
                continue
            spec = obj.get("spec") or {}
            configuration = self.configurations.get(namespace, str(spec.get("configurationName") or ""))
            if device_paths(configuration, self.paths) == "device-plugins":
                continue
            offline = OFFLINE_SINCE in ((obj.get("metadata") or {}).get("annotations") or {})
            healthy = device_healthy(spec.get("brokerProperties") or {})
            try:
                devices = instance_devices(obj, configuration, support=self.support, unhealthy=offline or not healthy)
            except errors.Invalid as e:
                log.warning("shared Instance %s/%s is not published: %s", namespace, name, e)
                continue
            out.setdefault(nodes, []).extend(devices)
        return out

    async def sync(self) -> None:
        """One pass over every shared pool, and the pools no node set has any more."""
        wanted = [(shared_pool(nodes), devices) for nodes, devices in self.pools().items()]
        names = {spec.pool for spec, _ in wanted}
        for spec, devices in wanted:
            self.writes += await write_pool(self.store, spec, devices, self.slices.by("pool", spec.pool), self._record)
        stale = sorted({_pool_of(s) for s in self.slices.values()} - names)
        for pool in stale:
            slices = self.slices.by("pool", pool)
            if slices:
                spec = shared_pool(_selector_nodes(slices[0]))
                if spec.pool == pool:
                    self.writes += await write_pool(self.store, spec, [], slices, self._record)
                    continue
            for item in slices:  # not a pool this part would name: delete its slices as they are
                try:
                    meta = item["metadata"]
                    self._record(
                        await self.store.delete(
                            "ResourceSlice", meta["name"], resource_version=meta.get("resourceVersion")
                        ),
                        True,
                    )
                    self.writes += 1
                except errors.NotFound:
                    self.slices.forget("", str(item["metadata"]["name"]))
                except errors.Conflict:
                    self._dirty.set()  # changed meanwhile: the next pass decides on the fresh one

    def _record(self, obj: Mapping[str, Any], deleted: bool) -> None:
        self.slices.record(obj, deleted=deleted)


def _selector_nodes(obj: Mapping[str, Any]) -> list[str]:
    """The nodes a slice's selector names (`api.shared_pool`: matchFields for one node, matchExpressions for more)."""
    terms = (((obj.get("spec") or {}).get("nodeSelector") or {}).get("nodeSelectorTerms")) or [{}]
    term = terms[0] or {}
    requirements = term.get("matchFields") or term.get("matchExpressions") or [{}]
    return [str(v) for v in (requirements[0] or {}).get("values") or []]
