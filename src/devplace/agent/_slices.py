"""This node's ResourceSlices: its local Instances published as one DRA pool named after the node (DESIGN.md section
6a; the rules are `api.draslices`', the writes `store.write_pool`'s).

Which devices: every Instance that is not shared and lists this node (a shared Instance is published once, by the
controller, with a nodeSelector: under NodeRestriction a node may write only slices with its own `nodeName`). An
Instance its handler reports Unhealthy (`devplace.io/health`, `discovery.device_healthy`: an NVML XID, ...) or no
longer reports at all (the offline-since annotation, in its grace) is unhealthy: a device taint where the store keeps
taints, left out where it does not. A node that stops seeing a device drops it at
the next pass; a node with no local device has no slice. An Instance whose Configuration is served through device
plugins only (`api.device_paths`: its `devplace.io/device-paths` annotation, else the agent's default `paths`) is left
out, so nothing allocates it through DRA; a change of the annotation rewrites the pool at the next pass.

On or off: `mode` True publishes, False does not, None (the default) publishes when the store serves ResourceSlices
(`store.probe_support`, which also says whether capacity slots become consumable capacity or N devices, and whether
taints are kept). The probe runs once, at start.

Level-triggered: a change to a local Instance, a Configuration or one of this node's slices (the kubelet wipes them
when the plugin leaves, an admin edits one) marks the pool dirty; one loop recomputes the pool from the caches and
writes only what `api.plan_pool` says changed. A pass that fails (the store unreachable, races lost) raises and the
supervisor restarts the loop, which marks the pool again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from devplace import errors
from devplace.agent._caches import NodeCache
from devplace.agent._instances import InstanceRecord
from devplace.api import DevicePaths, SliceSupport, device_paths, instance_devices, local_pool
from devplace.discovery import device_healthy
from devplace.store import Change, Informer, Store, probe_support, write_pool
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)


def is_local(record: InstanceRecord | None, node: str) -> bool:
    return record is not None and not record.shared and node in record.nodes


class SlicePublisher:
    """This node's pool of local devices (module docstring)."""

    def __init__(
        self,
        node: str,
        store: Store,
        cache: NodeCache,
        supervisor: Supervisor,
        mode: bool | None,
        paths: DevicePaths = "both",
    ) -> None:
        self.node = node
        self.paths: DevicePaths = paths
        """The device paths of a Configuration without the annotation (module docstring)."""
        self.store = store
        self.cache = cache
        self.supervisor = supervisor
        self.mode = mode
        self.spec = local_pool(node)
        self.support: SliceSupport | None = None
        """What the store keeps (None: not publishing)."""
        self.slices: Informer[dict[str, Any]] = Informer(store, "ResourceSlice", fields=f"spec.nodeName={node}")
        self.writes = 0
        """Slice writes made (creates, updates, deletes), for benches and tests."""
        self._dirty = asyncio.Event()
        self._busy = False

    @property
    def pending(self) -> bool:
        return self.support is not None and (self._dirty.is_set() or self._busy)

    async def start(self) -> None:
        """Probe the store (unless off), then list this node's slices and start the loop."""
        if self.mode is False:
            return
        support = await probe_support(self.store, self.node)
        if support is None:
            if self.mode:
                raise errors.Unavailable(f"{self.node}: --dra was asked for, but the store refuses ResourceSlices")
            return
        self.support = support
        log.info(
            "%s: publishing ResourceSlices (consumable capacity: %s, device taints: %s)",
            self.node,
            support.consumable,
            support.taints,
        )
        await self.slices.list_once()
        self.slices.subscribe(self._slice_changed)
        self.cache.instances.subscribe(self._instance_changed)
        self.cache.configurations.subscribe(self._configuration_changed)
        self.supervisor.loop("informer ResourceSlice", self.slices.run)
        self.supervisor.loop("slices", self.run)

    def mark(self) -> None:
        if self.support is not None:
            self._dirty.set()

    def _instance_changed(self, change: Change[InstanceRecord]) -> None:
        if is_local(change.old, self.node) or is_local(change.new, self.node):
            self.mark()

    def _configuration_changed(self, change: Change[Any]) -> None:
        self.mark()

    def _slice_changed(self, change: Change[dict[str, Any]]) -> None:
        self.mark()

    async def run(self) -> None:
        self._dirty.set()
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            self._busy = True
            try:
                await self.sync()
            finally:
                self._busy = False

    def devices(self) -> list[dict[str, Any]]:
        """The pool's devices from the caches (module docstring)."""
        assert self.support is not None
        out: list[dict[str, Any]] = []
        for record in sorted(self.cache.on_node(), key=lambda r: (r.namespace, r.name)):
            if not is_local(record, self.node):
                continue
            configuration = self.cache.configuration_obj(record.namespace, record.configuration)
            if device_paths(configuration, self.paths) == "device-plugins":
                continue
            try:
                unhealthy = record.offline_since is not None or not device_healthy(record.broker_properties)
                out += instance_devices(record.obj, configuration, support=self.support, unhealthy=unhealthy)
            except errors.Invalid as e:
                log.warning("%s: Instance %s/%s is not published: %s", self.node, record.namespace, record.name, e)
        return out

    async def sync(self) -> None:
        """One pass: the pool's slices made to list `devices()`."""
        self.writes += await write_pool(self.store, self.spec, self.devices(), self.slices.values(), self._record)

    def _record(self, obj: Mapping[str, Any], deleted: bool) -> None:
        self.slices.record(obj, deleted=deleted)
