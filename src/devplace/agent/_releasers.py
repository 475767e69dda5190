"""Releasing this node's slots: at once when their pod ends, else after the PodResources grace (`release_rules`).

The device-plugin API has no Deallocate, so the releaser learns which pod uses which device from the kubelet's
PodResources API (a List when a pod starts running, after each Allocate, and every `podresources_poll` seconds
while the node holds a slot) and frees, by CAS on the exact holder it saw, (a) the slots of a pod of this node that is
deleted or terminates, and (b) held slots absent from every listing for `release_grace` seconds. The decisions are
pure (`release_rules`); this module is the I/O around them. Every due slot of one Instance is freed in one write (one
CAS per Instance).

Concurrency: pod changes arrive through the Pod informer's change handler (synchronous: it only spawns the release);
each release and each PodResources look is a piece of the supervisor's in-flight work, so `Agent.is_idle` counts it.
Looks are coalesced (one at a time, one more if asked meanwhile) and held back while an Allocate is in flight
(`holding`): they start once its answer is on the wire. Failure semantics: a kubelet that does not answer is "no
listing" (nothing is freed on it); a store error in a release is logged, and the grace pass tries again next period.
The grace pass is a supervised loop on the injected clock, so a simulation runs the grace instantly.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

import grpc
import grpc.aio

from devplace import errors
from devplace.agent import _release_rules as releases
from devplace.agent import _slots as slots
from devplace.agent import _writes as writes
from devplace.agent._caches import NodeCache, PodInfo
from devplace.agent._release_rules import DeviceKey, HeldSlot, PodKey
from devplace.agent._servers import socket_identity
from devplace.api import RESOURCE_PREFIXES
from devplace.clocks import Clock
from devplace.deviceplugin import UNIX, Transport
from devplace.deviceplugin.podresources.v1 import api_pb2 as pr_pb2
from devplace.deviceplugin.podresources.v1 import api_pb2_grpc as pr_grpc
from devplace.store import Change
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

PODRESOURCES_TIMEOUT = 5.0


class Releaser:
    """Frees this node's slots whose pods are gone (see the module docstring)."""

    def __init__(
        self,
        node: str,
        prefix: str | None,
        release_grace: float,
        podresources_poll: float,
        podresources_socket: Path,
        cache: NodeCache,
        supervisor: Supervisor,
        clock: Clock,
        holding: Callable[[], bool],
        transport: Transport = UNIX,
    ) -> None:
        self.node = node
        self.transport = transport
        self.prefix = prefix
        self.release_grace = release_grace
        self.podresources_poll = podresources_poll
        self.podresources_socket = podresources_socket
        self.cache = cache
        self.supervisor = supervisor
        self.clock = clock
        self.holding = holding
        self._seq = itertools.count(1)
        self._pod_devices: dict[PodKey, tuple[frozenset[DeviceKey], int]] = {}
        self._known_pods: set[PodKey] = set()
        self._running_seen: set[PodKey] = set()
        self._alloc_seq: dict[DeviceKey, int] = {}
        self._alloc_at: dict[DeviceKey, float] = {}
        self._absent_since: dict[DeviceKey, float] = {}
        self._refresh_again = False
        self.refreshing = False
        self._held_refresh = False
        self._channel: grpc.aio.Channel | None = None
        self._stub: pr_grpc.PodResourcesListerAsyncStub | None = None

    # -- events --------------------------------------------------------------------------------------------------

    def pod_changed(self, change: Change[PodInfo]) -> None:
        key = change.key
        info = change.new
        if info is not None and not info.terminated:
            self._known_pods.add(key)
            if info.phase == "Running" and key not in self._running_seen and key not in self._pod_devices:
                self._running_seen.add(key)
                self.request_refresh()
            return
        if key not in self._known_pods and key not in self._pod_devices:
            return
        self._known_pods.discard(key)
        self._running_seen.discard(key)
        entry = self._pod_devices.pop(key, None)
        self.supervisor.spawn(f"release {key[0]}/{key[1]}", lambda: self._release_pod(key, entry))

    def allocated(self, keys: Iterable[DeviceKey]) -> None:
        """After an Allocate: remember when (release guards; at once, before any later pod event is seen), and look
        at PodResources again once the answer is out, so a re-offer to the same pod is seen as that pod's again."""
        seq = next(self._seq)
        now = self.clock.now()
        for key in keys:
            self._alloc_seq[key] = seq
            self._alloc_at[key] = now
            self._absent_since.pop(key, None)
        if self.holding():
            self._held_refresh = True
        else:
            self.request_refresh()

    def release_held(self) -> None:
        if self._held_refresh:
            self._held_refresh = False
            self.request_refresh()

    def request_refresh(self) -> None:
        """List PodResources soon (coalesced): learn which devices a newly running pod holds."""
        if self.refreshing:
            self._refresh_again = True
            return
        if socket_identity(self.podresources_socket) is None:
            return
        self.refreshing = True

        async def refresh() -> None:
            try:
                while True:
                    self._refresh_again = False
                    await self.observe()
                    if not self._refresh_again:
                        return
            finally:
                self.refreshing = False

        self.supervisor.spawn("podresources refresh", refresh)

    # -- PodResources --------------------------------------------------------------------------------------------

    async def observe(self) -> dict[PodKey, frozenset[DeviceKey]] | None:
        """One PodResources List: remember which pod uses which of our devices; None if the kubelet is away."""
        seq = next(self._seq)
        listing = await self._list_pod_resources()
        if listing is None:
            return None
        for pod, devices in listing.items():
            self._pod_devices[pod] = (devices, seq)
        for pod in list(self._pod_devices):
            if pod not in listing and pod not in self.cache.pods:
                del self._pod_devices[pod]
        return listing

    async def _list_pod_resources(self) -> dict[PodKey, frozenset[DeviceKey]] | None:
        if socket_identity(self.podresources_socket) is None:
            return None
        if self._channel is None or self._stub is None:
            self._channel = self.transport.channel(f"unix://{self.podresources_socket}")
            self._stub = pr_grpc.PodResourcesListerStub(self._channel)  # made once: a stub makes a callable per method
        stub = self._stub
        try:
            response = await stub.List(pr_pb2.ListPodResourcesRequest(), timeout=PODRESOURCES_TIMEOUT)
        except grpc.aio.AioRpcError as e:
            log.info("%s: PodResources List failed: %s", self.node, e.details())
            return None
        prefixes = tuple(f"{p}/" for p in ((self.prefix,) if self.prefix else RESOURCE_PREFIXES))
        out: dict[PodKey, set[DeviceKey]] = {}
        for pod in response.pod_resources:
            for container in pod.containers:
                for devices in container.devices:
                    if devices.resource_name.startswith(prefixes):
                        out.setdefault((pod.namespace, pod.name), set()).update(
                            (devices.resource_name, device_id) for device_id in devices.device_ids
                        )
        return {pod: frozenset(devices) for pod, devices in out.items()}

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close(None)
            self._channel = self._stub = None

    # -- releases ------------------------------------------------------------------------------------------------

    def _held(self) -> dict[DeviceKey, HeldSlot]:
        return releases.held_by_node(self.cache.instances.values(), self.node, self.prefix, self.cache.api_versions())

    async def _release_pod(self, key: PodKey, entry: tuple[frozenset[DeviceKey], int] | None) -> None:
        listing = await self.observe()
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
        await self._free(releases.pod_release(devices, observed_at, others, self._alloc_seq, self._held()))

    async def run(self) -> None:
        """The grace pass every `podresources_poll` seconds (clock time), until cancelled (a supervised loop)."""
        while True:
            await self.clock.sleep(self.podresources_poll)
            release = self.supervisor.hold()
            try:
                await self._grace_pass()
            except errors.DevplaceError as e:
                log.warning("%s: release pass failed: %s", self.node, e.message)
            finally:
                release()

    async def _grace_pass(self) -> None:
        """Free the held slots absent from PodResources for the grace. A node that holds no slot has nothing to free
        and does not ask the kubelet: an idle agent's pass costs no gRPC call (an isolated one costs the agent about
        a millisecond of CPU: `bench/footprint.py`'s idle agent, looking every 0.1 s, spent 10-16 ms a second on
        them)."""
        if not releases.holds_any(self.cache.instances.values(), self.node):
            self._absent_since = {}
            self._alloc_at.clear()
            self._alloc_seq.clear()
            return
        listing = await self.observe()
        if listing is None:
            return
        in_use: set[DeviceKey] = set()
        for used in listing.values():
            in_use |= used
        held = self._held()
        for key in in_use:
            self._alloc_at.pop(key, None)  # listed: its absence, if it comes, starts at an observation
        self._absent_since, due = releases.absences(
            held, in_use, self._absent_since, self._alloc_at, self.clock.now(), self.release_grace
        )
        for key in [k for k in self._alloc_at if k not in held]:
            self._alloc_at.pop(key, None)
            self._alloc_seq.pop(key, None)
        await self._free(due)

    async def _free(self, due: Iterable[HeldSlot]) -> None:
        """Free `due`, one CAS per Instance: every due slot of an Instance goes in the same write."""
        by_instance: dict[tuple[str, str], list[HeldSlot]] = {}
        for held in due:
            by_instance.setdefault((held.namespace, held.instance), []).append(held)
        for (namespace, name), group in by_instance.items():
            await self._free_instance(namespace, name, group)

    async def _free_instance(self, namespace: str, name: str, group: list[HeldSlot]) -> None:
        pairs = [(held.slot, held.holder) for held in group]
        try:
            await writes.update_usage(
                self.cache, namespace, name, lambda record: slots.release_slots(record.usage, pairs), slot_local=True
            )
        except errors.NotFound:
            return
        for held in group:
            self._absent_since.pop(held.device, None)
            log.info("%s: released %s (%s)", self.node, held.slot, held.holder)
