"""A simulated kubelet that speaks the real protocols: Registration, DevicePlugin (as client) and PodResources.

It reproduces the kubelet behaviour devplace's agent depends on (shared/reference/kubelet-protocols.md):

- Registration on `<kubelet_dir>/device-plugins/kubelet.sock`: version `v1beta1` only; an extended resource name only;
  a resource held by another *live* endpoint is refused, while a re-registration of the same endpoint, or one whose
  predecessor is gone (stream ended or socket removed), replaces it.
- For every registered plugin: dial `<kubelet_dir>/device-plugins/<endpoint>`, GetDevicePluginOptions, then consume
  ListAndWatch, both failing fast: a plugin that went away before or during this handshake (its socket gone or
  refusing) is dropped at once instead of holding the kubelet busy. Capacity = every advertised device, allocatable =
  the Healthy ones; the Node object in the store follows, and a resource whose plugin goes is removed from it at once.
- Pods bound to the node (`spec.nodeName`) are admitted once, serially, in watch order (admission decisions are the
  pure functions in `devplace.sim._admissions`): too few Healthy free devices -> `Failed` with reason
  `OutOf<resource>`; otherwise per container and resource: GetPreferredAllocation when offered, Allocate (an error
  fails the pod with `UnexpectedAdmissionError`), PreStartContainer when required, then `Running`. Devices of init
  containers are offered again to later containers, as the kubelet does. A request for a resource class
  (`rc.devplace.io/<class>`) is served from the devices the scheduler annotated on the pod (seed 003): Allocate on
  those devices' Instance-level plugins, with free device IDs picked as for any request; a class request the
  annotations do not cover fails the pod with `UnexpectedAdmissionError`.
- A Running pod's status names the devices each container got (`containerStatuses[].allocatedResourcesStatus`,
  Kubernetes' own field), so an auditor outside the process sees every Allocate that succeeded. With `recover=True`
  a fresh kubelet (a restarted `devplace kubelet-sim`) takes the devices of Running pods back from there, as a real
  one reads its checkpoint, so PodResources keeps listing them. A status write the store does not answer is tried
  again until it lands. The Node is written at most every `node_status_interval` seconds (default: at once).
- There is no Deallocate: a pod's devices are forgotten when it is deleted or reaches Succeeded/Failed, and plugins
  learn that only through PodResources (List, GetAllocatableResources, Get on
  `<kubelet_dir>/pod-resources/kubelet.sock`).
- With `cdi_dirs`, DRA (`drakubelets`): a pod's ResourceClaims are prepared through the DRA plugins of the plugin
  registry once its devices are allocated (a failure fails the pod with `UnexpectedAdmissionError`), and unprepared
  in the background after the last pod using them stops or goes.
- `restart()` drops every plugin connection and recreates both sockets; allocations survive (the real kubelet
  checkpoints them), so plugins must notice the new kubelet.sock and register again.

Concurrency: the kubelet's `Supervisor` runs its loops: a Pod `Informer` filtered on the server
(`spec.nodeName=<node>`, so other nodes' pods never reach it), one loop that admits the pods it reports serially in
change order (so two pods on a node never pick the same device), one that writes the Node. One task per plugin
consumes its ListAndWatch stream. A loop that fails is logged and restarted with backoff: an unexpected error while
admitting restarts the admission loop, which first takes every cached pod again, as a relist would (pods already
seen are skipped). Queued admissions, a Node write due and a plugin handshake are held as busy on the supervisor, so
`is_idle()` is exact and `supervisor.wait_idle()` wakes the simulation harness when the kubelet has nothing to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import grpc
import grpc.aio

from devplace import errors
from devplace.clocks import Clock
from devplace.deviceplugin import (
    DEVICE_PLUGIN_DIR,
    HEALTHY,
    KUBELET_SOCKET_NAME,
    POD_RESOURCES_DIR,
    PRE_START_CONTAINER_TIMEOUT,
    UNIX,
    VERSION,
    Transport,
    abort,
    from_rpc_error,
)
from devplace.deviceplugin.podresources.v1 import api_pb2 as pr_pb2
from devplace.deviceplugin.podresources.v1 import api_pb2_grpc as pr_grpc
from devplace.deviceplugin.v1beta1 import api_pb2 as dp_pb2
from devplace.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from devplace.sim import _admissions as admissions
from devplace.sim import _nodes as nodes
from devplace.sim._drakubelets import DraClient, DraFailure
from devplace.store import Change, Informer, Store, cas, rfc3339
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

_RPC_TIMEOUT = 10.0
_STATUS_RETRY = (0.05, 2.0)
"""First and longest pause (seconds) between tries of a pod status write the store did not answer."""
_TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass
class ContainerAllocation:
    """Devices the kubelet gave one container, per resource, and what Allocate answered for them."""

    name: str
    init: bool = False
    devices: dict[str, list[str]] = field(default_factory=dict)
    responses: dict[str, dp_pb2.ContainerAllocateResponse] = field(default_factory=dict)


@dataclass
class PodAllocation:
    """One admitted pod, as the kubelet checkpoints it."""

    namespace: str
    name: str
    uid: str
    containers: list[ContainerAllocation] = field(default_factory=list)

    def devices(self, resource: str) -> set[str]:
        return {d for c in self.containers for d in c.devices.get(resource, ())}


def with_allocated_resources(status: dict[str, Any], record: PodAllocation) -> dict[str, Any]:
    """`status` with each container's devices in `containerStatuses[].allocatedResourcesStatus` (Kubernetes'
    ResourceStatus: per resource, the device IDs Allocate succeeded for, Healthy when admitted). So what the kubelet
    allocated is visible outside it (auditors read it), and a restarted kubelet takes it back (`recorded_allocation`)
    as a real one reads its checkpoint file."""
    devices = {c.name: c.devices for c in record.containers if not c.init}
    statuses = []
    for container in status.get("containerStatuses") or []:
        held = devices.get(container.get("name"), {})
        allocated = [
            {"name": resource, "resources": [{"resourceID": d, "health": HEALTHY} for d in ids]}
            for resource, ids in sorted(held.items())
            if ids
        ]
        statuses.append({**container, "allocatedResourcesStatus": allocated} if allocated else container)
    return {**status, "containerStatuses": statuses} if statuses else status


def recorded_allocation(pod: Mapping[str, Any]) -> PodAllocation | None:
    """The allocation `with_allocated_resources` recorded in a pod's status, or None when it records none."""
    meta = pod.get("metadata") or {}
    record = PodAllocation(str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("uid") or ""))
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        if not isinstance(container, Mapping):
            continue
        devices = {
            str(resource["name"]): [
                str(r["resourceID"])
                for r in resource.get("resources") or []
                if isinstance(r, Mapping) and r.get("resourceID")
            ]
            for resource in container.get("allocatedResourcesStatus") or []
            if isinstance(resource, Mapping) and resource.get("name")
        }
        if any(devices.values()):
            record.containers.append(ContainerAllocation(str(container.get("name") or ""), devices=devices))
    return record if record.containers else None


@dataclass
class _Endpoint:
    """A registered plugin: where it lives, what it offers, and the task reading its ListAndWatch stream."""

    resource: str
    endpoint: str
    path: Path
    options: dp_pb2.DevicePluginOptions | None = None
    devices: dict[str, str] = field(default_factory=dict)
    synced: bool = False
    task: asyncio.Task[None] | None = None
    stub: dp_grpc.DevicePluginAsyncStub | None = None
    handshake: Callable[[], None] | None = None
    """Releases the kubelet's busy hold once the first device list arrived (or the stream ended)."""

    def synced_now(self) -> None:
        self.synced = True
        if self.handshake is not None:
            self.handshake()

    @property
    def live(self) -> bool:
        return self.task is not None and not self.task.done() and self.path.exists()


class _AdmissionFailure(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class _Registration(dp_grpc.RegistrationServicer):
    def __init__(self, kubelet: SimKubelet) -> None:
        self._kubelet = kubelet

    async def Register(
        self, request: dp_pb2.RegisterRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> dp_pb2.Empty:
        try:
            self._kubelet._register(request)
        except errors.DevplaceError as e:
            await abort(context, e)
        return dp_pb2.Empty()


class _PodResources(pr_grpc.PodResourcesListerServicer):
    def __init__(self, kubelet: SimKubelet) -> None:
        self._kubelet = kubelet

    async def List(
        self, request: pr_pb2.ListPodResourcesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pr_pb2.ListPodResourcesResponse:
        pods = [self._kubelet._pod_resources(p) for p in self._kubelet._pods.values()]
        return pr_pb2.ListPodResourcesResponse(pod_resources=pods)

    async def GetAllocatableResources(
        self, request: pr_pb2.AllocatableResourcesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pr_pb2.AllocatableResourcesResponse:
        devices = [
            pr_pb2.ContainerDevices(
                resource_name=ep.resource,
                device_ids=sorted(d for d, h in ep.devices.items() if h == HEALTHY),
            )
            for ep in sorted(self._kubelet._endpoints.values(), key=lambda e: e.resource)
        ]
        return pr_pb2.AllocatableResourcesResponse(devices=devices)

    async def Get(
        self, request: pr_pb2.GetPodResourcesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pr_pb2.GetPodResourcesResponse:
        pod = self._kubelet._pods.get((request.pod_namespace, request.pod_name))
        if pod is None:
            await abort(
                context, errors.NotFound(f"pod {request.pod_namespace}/{request.pod_name} not found on this node")
            )
        return pr_pb2.GetPodResourcesResponse(pod_resources=self._kubelet._pod_resources(pod))


class SimKubelet:
    """The kubelet of one simulated node. `start()`, then plugins register and pods bound to `node` get admitted."""

    def __init__(
        self,
        node: str,
        kubelet_dir: Path,
        store: Store,
        clock: Clock,
        *,
        base_resources: Mapping[str, str] = nodes.DEFAULT_BASE_RESOURCES,
        device_order: Literal["random", "sorted"] = "random",
        seed: int | str | None = None,
        resource_class_prefix: str = admissions.RESOURCE_CLASS_PREFIX,
        node_status_interval: float = 0.0,
        recover: bool = False,
        cdi_dirs: Sequence[Path] | None = None,
        transport: Transport = UNIX,
    ) -> None:
        """`device_order`: how free devices are offered when the plugin states no preference. "random" (default) is
        what a real kubelet does (it takes them from an unordered set), from a generator seeded with `seed` (default:
        the node name) so runs repeat; "sorted" gives the lowest IDs first, for tests that want exact picks.
        `node_status_interval`: least seconds between two Node writes, on `clock` (0, the default: each change at
        once; a real kubelet reports every 10 s), so a busy node's health changes cost one write per interval.
        `recover`: take the devices of Running pods bound to this node back from their status when first seen (a
        kubelet process that restarted; off by default: a simulated kubelet object keeps its allocations itself).
        `cdi_dirs`: speak DRA (`drakubelets`): pods' ResourceClaims are prepared through the DRA plugins registered
        in `<kubelet_dir>/plugins_registry/` before the pod runs, their CDI ids resolved in these directories, and
        unprepared after the last pod using them stops (None, the default: pods' claims are not looked at).
        `transport`: how Registration, PodResources and the plugins' DevicePlugin service are carried (real gRPC on
        unix sockets by default; `deviceplugin.InProcessTransport` for a fleet at scale; DRA stays on sockets)."""
        self.node = node
        self.transport = transport
        self.kubelet_dir = Path(kubelet_dir)
        self.store = store
        self.clock = clock
        self._base_resources = dict(base_resources)
        self._device_order = device_order
        self.resource_class_prefix = resource_class_prefix
        self.node_status_interval = node_status_interval
        self._recover = recover
        self._random = random.Random(node if seed is None else seed)
        self.dra = None if cdi_dirs is None else DraClient(node, self.kubelet_dir, store, cdi_dirs)
        self._endpoints: dict[str, _Endpoint] = {}
        self._pods: dict[tuple[str, str], PodAllocation] = {}
        self._seen: set[str] = set()
        self._servers: list[grpc.aio.Server] = []
        self._background: set[asyncio.Task[None]] = set()
        self.supervisor = Supervisor(f"kubelet {node}", backoff=(0.05, 1.0))
        """Owns the kubelet's loops and counts its pending work (restart backoff in real time: it waits on I/O)."""
        self._pods_cache: Informer[dict[str, Any]] = Informer(
            store, "Pod", fields=f"spec.nodeName={node}", name=f"kubelet {node} pods"
        )
        self._pods_cache.subscribe(self._on_pod_change)
        self._queue: deque[Change[dict[str, Any]]] = deque()
        self._queued = asyncio.Event()
        self._queue_hold: Callable[[], None] | None = None
        self._node_dirty = asyncio.Event()
        self._node_hold: Callable[[], None] | None = None
        self._admitting = False
        self._started = False
        self.registrations = 0
        """How many Register calls were accepted since start (tests read it to see plugins re-register)."""

    # -- paths ---------------------------------------------------------------------------------------------------

    @property
    def registration_socket(self) -> Path:
        return self.kubelet_dir / DEVICE_PLUGIN_DIR / KUBELET_SOCKET_NAME

    @property
    def pod_resources_socket(self) -> Path:
        return self.kubelet_dir / POD_RESOURCES_DIR / KUBELET_SOCKET_NAME

    # -- lifecycle -----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Serve both sockets, start admitting pods; returns once the pod watch is established."""
        if self._started:
            return
        self._started = True
        if self.dra is not None:
            await self.dra.wipe_slices()  # the kubelet starts with no slices of its node: its drivers publish anew
        await self._serve()
        self._mark_node_dirty()
        self.supervisor.loop("node", self._write_node_forever)
        self.supervisor.loop("pods", self._pods_cache.run)
        self.supervisor.loop("admissions", self._admit_forever)
        dra = self.dra
        if dra is not None:
            self.supervisor.loop("dra registry", lambda: dra.watch_registry(self.clock))
        await self._pods_cache.wait_synced()

    async def stop(self) -> None:
        """Stop serving and forget plugin connections; the store is left as it is."""
        if not self._started:
            return
        self._started = False
        await self.supervisor.stop()
        await self._unserve()
        if self.dra is not None:
            await self.dra.close()

    async def restart(self) -> None:
        """Like a kubelet restart: drop plugin connections, recreate both sockets; held allocations survive.

        While the new sockets are bound, placeholder files hold the old sockets' inodes, so the new kubelet.sock gets a
        different inode number: plugins that watch the inode see the restart, as they would on a real node.
        """
        await self._unserve()
        placeholders = [path.with_name(path.name + ".restarting") for path in self._socket_paths()]
        for placeholder in placeholders:
            placeholder.touch()
        try:
            await self._serve()
        finally:
            for placeholder in placeholders:
                placeholder.unlink(missing_ok=True)
        self._mark_node_dirty()

    def _socket_paths(self) -> tuple[Path, Path]:
        return (self.registration_socket, self.pod_resources_socket)

    async def _serve(self) -> None:
        for path in self._socket_paths():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
        registration = self.transport.server()
        dp_grpc.add_RegistrationServicer_to_server(_Registration(self), registration)
        registration.add_insecure_port(f"unix://{self.registration_socket}")
        lister = self.transport.server()
        pr_grpc.add_PodResourcesListerServicer_to_server(_PodResources(self), lister)
        lister.add_insecure_port(f"unix://{self.pod_resources_socket}")
        await lister.start()
        await registration.start()
        self._servers = [registration, lister]

    async def _unserve(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            await server.stop(None)
        endpoints = list(self._endpoints.values())
        self._endpoints.clear()
        for ep in endpoints:
            await self._close_endpoint(ep)
        await asyncio.gather(*self._background, return_exceptions=True)  # closers of replaced endpoints
        for path in self._socket_paths():
            path.unlink(missing_ok=True)

    def is_idle(self) -> bool:
        """Started, pods listed, and no admission, Node write or plugin handshake pending (`supervisor` counts them)."""
        return self._started and self._pods_cache.synced.is_set() and self.supervisor.idle

    def busy_with(self) -> list[str]:
        """What keeps this kubelet from being idle, for error messages."""
        out = []
        if not self._started:
            out.append("not started")
        if not self._pods_cache.synced.is_set():
            out.append("pods not listed yet")
        if self._admitting or self._queue:
            out.append(f"admitting pods ({len(self._queue) + self._admitting} pending)")
        if self._node_hold is not None:
            out.append("writing the Node")
        out.extend(f"handshake with {ep.endpoint}" for ep in self._endpoints.values() if not ep.synced)
        return out

    async def flush_plugins(self) -> None:
        """Round-trip every plugin connection (GetDevicePluginOptions): a ListAndWatch message a plugin wrote before
        this call has reached the kubelet when it returns, since frames on one connection arrive in order. A plugin
        that does not answer, or whose connection closes meanwhile, is skipped (its stream ends on its own).

        In process (`InProcessTransport`) nothing is ever in flight: a plugin's stream computes its next message when
        this kubelet asks for it, and stays `pending` (its agent busy) until this kubelet, having taken the message in
        (the Node marked dirty, synchronously), asks for the next one. There is nothing to flush, and at a thousand
        nodes the round trips were most of a settled step's time."""
        if self.transport.name == "inprocess":
            return

        async def ping(ep: _Endpoint) -> None:
            if ep.stub is not None and ep.synced:
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await ep.stub.GetDevicePluginOptions(dp_pb2.Empty(), timeout=_RPC_TIMEOUT)

        # Each ping is its own task: a connection closed under it (a plugin replaced) cancels its call, which must
        # end that ping only, not the caller.
        pings = [asyncio.ensure_future(ping(ep)) for ep in list(self._endpoints.values())]
        await asyncio.gather(*pings, return_exceptions=True)

    # -- what the kubelet sees -------------------------------------------------------------------------------------

    def capacity(self) -> dict[str, int]:
        """Per registered resource: every advertised device."""
        return {r: len(ep.devices) for r, ep in sorted(self._endpoints.items())}

    def allocatable(self) -> dict[str, int]:
        """Per registered resource: the Healthy devices."""
        return {r: sum(1 for h in ep.devices.values() if h == HEALTHY) for r, ep in sorted(self._endpoints.items())}

    def available(self) -> dict[str, int]:
        """Per registered resource: Healthy devices not allocated to any container."""
        return {r: len(self._free(r)) for r in sorted(self._endpoints)}

    def devices(self, resource: str) -> dict[str, str]:
        """Device ID -> health, as the plugin for `resource` last advertised it ({} when not registered)."""
        ep = self._endpoints.get(resource)
        return dict(ep.devices) if ep else {}

    def endpoints(self) -> dict[str, str]:
        """Registered resource -> plugin socket file name."""
        return {r: ep.endpoint for r, ep in sorted(self._endpoints.items())}

    def allocations(self) -> dict[tuple[str, str], PodAllocation]:
        """(namespace, pod) -> what each of its containers holds."""
        return dict(self._pods)

    def _allocated(self, resource: str) -> set[str]:
        return {d for pod in self._pods.values() for d in pod.devices(resource)}

    def _free(self, resource: str, also_taken: set[str] | None = None) -> list[str]:
        ep = self._endpoints.get(resource)
        if ep is None:
            return []
        taken = self._allocated(resource) | (also_taken or set())
        return admissions.free_devices(ep.devices, taken, HEALTHY)

    # -- registration and plugin streams ---------------------------------------------------------------------------

    def _register(self, request: dp_pb2.RegisterRequest) -> None:
        if request.version != VERSION:
            raise errors.Invalid.field(
                "version", f"unsupported device plugin API version {request.version!r} (this kubelet speaks v1beta1)"
            )
        if not admissions.is_extended_resource(request.resource_name):
            raise errors.Invalid.field(
                "resource_name", f"{request.resource_name!r} is not an extended resource name (domain/name)"
            )
        if not request.endpoint or "/" in request.endpoint:
            raise errors.Invalid.field(
                "endpoint", f"{request.endpoint!r} must be a socket file name in the device-plugins directory"
            )
        current = self._endpoints.get(request.resource_name)
        if current is not None and current.endpoint != request.endpoint and current.live:
            raise errors.AlreadyExists(
                f"resource {request.resource_name} is already registered by live endpoint {current.endpoint}"
            )
        ep = _Endpoint(
            request.resource_name,
            request.endpoint,
            self.kubelet_dir / DEVICE_PLUGIN_DIR / request.endpoint,
            handshake=self.supervisor.hold(),
        )
        self._endpoints[request.resource_name] = ep
        if current is not None:
            closing = asyncio.get_running_loop().create_task(self._close_endpoint(current))
            self._background.add(closing)
            closing.add_done_callback(self._background.discard)
        ep.task = asyncio.get_running_loop().create_task(self._consume(ep), name=f"kubelet-lw-{request.endpoint}")
        self.registrations += 1
        log.debug("%s: registered %s at %s", self.node, ep.resource, ep.endpoint)

    async def _close_endpoint(self, ep: _Endpoint) -> None:
        if ep.task is not None and not ep.task.done():
            ep.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ep.task

    async def _consume(self, ep: _Endpoint) -> None:
        """The handshake (GetDevicePluginOptions, then the first ListAndWatch list), then the stream until it ends.

        Both calls fail fast instead of waiting for the plugin's socket to be ready: a plugin registers only once it
        serves, so a socket that refuses or is gone means the plugin went away (stopped between its Register and our
        dial, or between the two calls). The endpoint is then dropped and its handshake ends, as a real kubelet drops
        an endpoint whose ListAndWatch fails; a fresh plugin registers again. Waiting instead held the handshake busy
        until the RPC timeout, or forever for ListAndWatch, which has none."""
        channel = self.transport.channel(f"unix://{ep.path}")
        try:
            stub = dp_grpc.DevicePluginStub(channel)
            ep.stub = stub
            ep.options = await stub.GetDevicePluginOptions(dp_pb2.Empty(), timeout=_RPC_TIMEOUT)
            async for response in stub.ListAndWatch(dp_pb2.Empty()):
                ep.devices = {d.ID: d.health for d in response.devices}
                self._mark_node_dirty()
                ep.synced_now()
        except grpc.aio.AioRpcError as e:
            log.debug("%s: plugin %s for %s went away: %s", self.node, ep.endpoint, ep.resource, e.code())
        finally:
            if self._endpoints.get(ep.resource) is ep:
                del self._endpoints[ep.resource]
                self._mark_node_dirty()
            ep.synced_now()
            await channel.close(None)

    # -- the Node object -------------------------------------------------------------------------------------------

    def _mark_node_dirty(self) -> None:
        self._node_dirty.set()
        if self._node_hold is None:
            self._node_hold = self.supervisor.hold()

    async def _write_node_forever(self) -> None:
        while True:
            await self._node_dirty.wait()
            self._node_dirty.clear()
            try:
                await self._write_node()
            except errors.DevplaceError as e:
                log.warning("%s: could not write the Node: %s", self.node, e)
                self._node_dirty.set()
                await asyncio.sleep(0.05)  # real time: the store is what failed
            if not self._node_dirty.is_set() and self._node_hold is not None:
                self._node_hold()
                self._node_hold = None
            if self.node_status_interval > 0:
                await self.clock.sleep(self.node_status_interval)

    async def _write_node(self) -> None:
        capacity, allocatable = self.capacity(), self.allocatable()
        try:
            await cas(
                self.store,
                "Node",
                self.node,
                "",
                lambda current: nodes.with_extended_resources(current, capacity, allocatable),
            )
        except errors.NotFound:
            fresh = nodes.new_node(
                self.node, capacity, allocatable, rfc3339(self.clock.now()), base=self._base_resources
            )
            try:
                await self.store.create(fresh)
            except errors.AlreadyExists:
                self._mark_node_dirty()

    # -- pods ------------------------------------------------------------------------------------------------------

    def _on_pod_change(self, change: Change[dict[str, Any]]) -> None:
        """Informer handler (must not await): queue the change for the admission loop, held busy until admitted."""
        self._queue.append(change)
        if self._queue_hold is None:
            self._queue_hold = self.supervisor.hold()
        self._queued.set()

    async def _admit_forever(self) -> None:
        # (Re)started: take every cached pod again, as a relist would; pods already seen are skipped.
        self._queue.extend(Change(key, None, pod) for key, pod in self._pods_cache.items())
        while True:
            if not self._queue:
                if self._queue_hold is not None:
                    self._queue_hold()
                    self._queue_hold = None
                self._queued.clear()
                await self._queued.wait()
                continue
            change = self._queue.popleft()
            if change.new is None:
                assert change.old is not None
                await self._on_pod_event("DELETED", change.old)
            else:
                await self._on_pod_event("MODIFIED" if change.old is not None else "ADDED", change.new)

    async def _on_pod_event(self, type_: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        uid = str(meta.get("uid") or "")
        if type_ == "DELETED":
            self._forget(key, uid)
            self._seen.discard(uid)
            return
        if (pod.get("spec") or {}).get("nodeName") != self.node:
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in _TERMINAL_PHASES:
            self._forget(key, uid)
            self._seen.add(uid)
            return
        if uid in self._seen:
            return
        self._seen.add(uid)
        if phase not in (None, "", "Pending"):
            # running before this kubelet knew it: nothing to admit; with `recover`, the devices its status records
            # are this kubelet's again
            restored = recorded_allocation(pod) if self._recover else None
            if restored is not None and key not in self._pods:
                self._pods[key] = restored
            return
        self._admitting = True
        try:
            await self._admit(pod)
        except errors.DevplaceError as e:
            log.warning("%s: admitting pod %s/%s failed: %s", self.node, key[0], key[1], e)
        finally:
            self._admitting = False

    def _forget(self, key: tuple[str, str], uid: str) -> None:
        pod = self._pods.get(key)
        if pod is not None and (not uid or pod.uid == uid):
            del self._pods[key]
        if self.dra is not None and self.dra.uses_claims(uid):
            self._spawn(self.dra.release_pod(uid))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` in the background, counted busy on the supervisor until it ends."""
        release = self.supervisor.hold()
        task = asyncio.create_task(work)
        self._background.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._background.discard(finished)
            release()
            if not finished.cancelled() and finished.exception() is not None:
                log.warning("%s: background work failed: %s", self.node, finished.exception())

        task.add_done_callback(done)

    async def _admit(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        record = PodAllocation(meta.get("namespace") or "", meta["name"], str(meta.get("uid") or ""))
        try:
            await self._allocate_pod(pod, record)
        except _AdmissionFailure as failure:
            log.info("%s: pod %s/%s rejected: %s", self.node, record.namespace, record.name, failure.message)
            status = admissions.failed_status(failure.reason, failure.message, rfc3339(self.clock.now()))
            await self._write_pod_status(record, status)
            return
        self._pods[(record.namespace, record.name)] = record
        status = admissions.running_status([c.name for c in record.containers if not c.init], rfc3339(self.clock.now()))
        status = with_allocated_resources(status, record)
        if not await self._write_pod_status(record, status):
            self._forget((record.namespace, record.name), record.uid)

    async def _allocate_pod(self, pod: dict[str, Any], record: PodAllocation) -> None:
        try:
            needs = admissions.pod_needs(pod)
            selections = admissions.class_selections((pod.get("metadata") or {}).get("annotations") or {})
        except errors.Invalid as e:
            raise _AdmissionFailure("UnexpectedAdmissionError", f"invalid resource request: {e.message}") from e
        if selections:
            by_device = {resource.partition("/")[2]: resource for resource in sorted(self._endpoints, reverse=True)}
            needs = admissions.expand_resource_classes(needs, selections, by_device, self.resource_class_prefix)
        unserved = admissions.unserved_classes(needs, selections, self.node, self.resource_class_prefix)
        if unserved is not None:
            raise _AdmissionFailure("UnexpectedAdmissionError", unserved)
        wanted = admissions.effective_needs(needs)
        free = {resource: self._free(resource) for resource in wanted}
        short = admissions.shortfall(wanted, free, self.capacity())
        if short is not None:
            raise _AdmissionFailure(short.reason, short.message)
        taken: dict[str, set[str]] = {}
        reusable: dict[str, list[str]] = {}
        for need in needs:
            container = ContainerAllocation(need.name, init=need.init)
            for resource, count in need.resources.items():
                pool = reusable.get(resource, [])
                ids, response = await self._allocate_container(resource, count, pool, taken.get(resource, set()))
                container.devices[resource] = ids
                container.responses[resource] = response
                taken.setdefault(resource, set()).update(ids)
                if need.init:
                    reusable[resource] = list(dict.fromkeys([*pool, *ids]))
                else:
                    reusable[resource] = [d for d in pool if d not in ids]
            record.containers.append(container)
        if self.dra is not None and (pod.get("spec") or {}).get("resourceClaims"):
            try:
                await self.dra.prepare_pod(pod)  # the kubelet prepares a pod's claims before its containers start
            except DraFailure as e:
                raise _AdmissionFailure("UnexpectedAdmissionError", str(e)) from e

    async def _allocate_container(
        self, resource: str, count: int, reusable: Sequence[str], taken_by_pod: set[str]
    ) -> tuple[list[str], dp_pb2.ContainerAllocateResponse]:
        ep = self._endpoints.get(resource)
        if ep is None or ep.stub is None:
            raise _AdmissionFailure("UnexpectedAdmissionError", f"no device plugin is registered for {resource}")
        reuse = list(reusable)[:count]
        candidates = self._free(resource, also_taken=taken_by_pod)
        if self._device_order == "random":
            self._random.shuffle(candidates)
        preferred: list[str] | None = None
        if ep.options is not None and ep.options.get_preferred_allocation_available:
            request = dp_pb2.PreferredAllocationRequest(
                container_requests=[
                    dp_pb2.ContainerPreferredAllocationRequest(
                        available_deviceIDs=sorted({*candidates, *reuse}),
                        must_include_deviceIDs=reuse,
                        allocation_size=count,
                    )
                ]
            )
            try:
                answer = await ep.stub.GetPreferredAllocation(request, timeout=_RPC_TIMEOUT)
                if answer.container_responses:
                    preferred = list(answer.container_responses[0].deviceIDs)
            except grpc.aio.AioRpcError as e:
                log.debug("%s: GetPreferredAllocation for %s failed (advisory): %s", self.node, resource, e.details())
        try:
            ids = admissions.pick_devices(candidates, count, reuse=reuse, preferred=preferred)
        except errors.Refused as e:
            raise _AdmissionFailure(admissions.out_of_reason(resource), e.message) from e
        try:
            allocated = await ep.stub.Allocate(
                dp_pb2.AllocateRequest(container_requests=[dp_pb2.ContainerAllocateRequest(devices_ids=ids)]),
                timeout=_RPC_TIMEOUT,
            )
            if ep.options is not None and ep.options.pre_start_required:
                await ep.stub.PreStartContainer(
                    dp_pb2.PreStartContainerRequest(devices_ids=ids), timeout=PRE_START_CONTAINER_TIMEOUT
                )
        except grpc.aio.AioRpcError as e:
            raise _AdmissionFailure(
                "UnexpectedAdmissionError",
                f"Allocate failed due to {e.details() or e.code()}, which is unexpected",
            ) from e
        if len(allocated.container_responses) != 1:
            raise _AdmissionFailure(
                "UnexpectedAdmissionError",
                f"Allocate for {resource} answered {len(allocated.container_responses)} containers, expected 1",
            )
        return ids, allocated.container_responses[0]

    async def _write_pod_status(self, record: PodAllocation, status: dict[str, Any]) -> bool:
        """CAS the pod's status; False when the pod is gone or was replaced by another of the same name.

        A store that does not answer (an API server restarting) is tried again with backoff until it does, as the
        kubelet's status manager does: the verdict is never dropped, or the pod would stay Pending with its devices
        allocated. Admissions wait meanwhile (they are serial)."""

        def decide(current: dict[str, Any]) -> dict[str, Any] | None:
            if str(current["metadata"].get("uid") or "") != record.uid:
                raise errors.NotFound(f"pod {record.namespace}/{record.name} was replaced")
            return {**current, "status": admissions.merged_status(current.get("status"), status)}

        delay = _STATUS_RETRY[0]
        while True:
            try:
                written = await cas(self.store, "Pod", record.name, record.namespace, decide)
                break
            except errors.NotFound:
                return False
            except errors.Unavailable as e:
                log.warning("%s: status of pod %s/%s not written yet: %s", self.node, record.namespace, record.name, e)
                await asyncio.sleep(delay)  # real time: the store is what failed
                delay = min(delay * 2, _STATUS_RETRY[1])
        self._pods_cache.record(written.object)
        return True

    # -- hooks for tests and the harness ---------------------------------------------------------------------------

    async def reallocate(
        self, pod_namespace: str, pod_name: str
    ) -> dict[str, dict[str, dp_pb2.ContainerAllocateResponse]]:
        """Call Allocate again for every container of an admitted pod with the devices it already holds.

        This is what a kubelet does after a restart or for a second container reusing devices: the plugin must accept
        a re-offer of what it already gave (Akri #843). Returns container -> resource -> response; a refusal raises
        the devplace error the plugin sent.
        """
        pod = self._pods.get((pod_namespace, pod_name))
        if pod is None:
            raise errors.NotFound(f"pod {pod_namespace}/{pod_name} holds no devices on {self.node}")
        out: dict[str, dict[str, dp_pb2.ContainerAllocateResponse]] = {}
        for container in pod.containers:
            for resource, ids in container.devices.items():
                ep = self._endpoints.get(resource)
                if ep is None or ep.stub is None:
                    raise errors.Unavailable(f"no device plugin is registered for {resource} on {self.node}")
                request = dp_pb2.AllocateRequest(container_requests=[dp_pb2.ContainerAllocateRequest(devices_ids=ids)])
                try:
                    response = await ep.stub.Allocate(request, timeout=_RPC_TIMEOUT)
                except grpc.aio.AioRpcError as e:
                    raise from_rpc_error(e) from e
                container.responses[resource] = response.container_responses[0]
                out.setdefault(container.name, {})[resource] = response.container_responses[0]
        return out

    def forget_pod(self, pod_namespace: str, pod_name: str) -> None:
        """Drop a pod's containers as if they vanished under a still-running pod (a crashed runtime).

        The store is untouched and the pod is not admitted again, so its devices simply disappear from PodResources:
        the case the agent may only resolve with its release grace period.
        """
        if self._pods.pop((pod_namespace, pod_name), None) is None:
            raise errors.NotFound(f"pod {pod_namespace}/{pod_name} holds no devices on {self.node}")

    async def wait_registered(self, resources: Sequence[str], timeout: float = 10.0) -> None:
        """Wait (real time, bounded) until every resource has a plugin that sent its device list."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            missing = [r for r in resources if r not in self._endpoints or not self._endpoints[r].synced]
            if not missing:
                return
            if loop.time() >= deadline:
                raise errors.Unavailable(f"{self.node}: plugins did not register again: {', '.join(missing)}")
            await asyncio.sleep(0.01)

    def _pod_resources(self, pod: PodAllocation) -> pr_pb2.PodResources:
        containers = [
            pr_pb2.ContainerResources(
                name=c.name,
                devices=[
                    pr_pb2.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in sorted(c.devices.items())
                ],
            )
            for c in pod.containers
            if not c.init
        ]
        return pr_pb2.PodResources(name=pod.name, namespace=pod.namespace, containers=containers)
