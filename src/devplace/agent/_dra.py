"""The agent as the kubelet's DRA plugin for driver `devplace.io` (DESIGN.md section 6a; dra.md section 4).

Sockets (under the kubelet directory, the kubelet's layout):
- `plugins_registry/devplace.io-reg.sock`: `pluginregistration.Registration`. The kubelet finds the socket, calls
  GetInfo (type `DRAPlugin`, name = the driver, endpoint = the plugin socket's full path, the services served) and
  tells the outcome with NotifyRegistrationStatus (a refusal is logged; the kubelet retries on its own);
- `plugins/devplace.io/dra.sock`: DRAPlugin v1 and v1beta1 (1.32-1.33 kubelets), DRAResourceHealth v1alpha1 and v1.

NodePrepareResources, per claim (one claim's failure is its own error in the answer, never the others'):
1. GET the claim and check its UID (`draclaims.check_claim`); map its results of this driver to Instances
   (`draclaims.plan`);
2. for each Instance, one CAS through `writes.update_usage_for` (the Allocate path's) with `slots.claim_dra`: the
   slots already held for this claim on this node (`api.DRA`, `D:<namespace>/<claim>:<node>`: devplace's scheduler
   takes them before it writes the allocation) are confirmed, the missing ones taken from the free ones, and a slot
   someone else holds refuses the claim, naming the holder. Slots taken by this call are released again when a later
   Instance refuses, so a failed prepare holds nothing new;
3. a CDI spec file per device (`dracdi`), then the claim's prepared state (a small JSON under
   `plugins/devplace.io/claims/`, written atomically), then the answer: per device its request, pool, device,
   shareID and CDI ids.
A retried prepare (the kubelet retries on a timeout or a restart) finds the state and answers the same without a
write, as long as the allocation and the CDI files are unchanged; without the state (the agent stopped between the
CAS and the state write) it runs again and `claim_dra` takes nothing more.

NodeUnprepareResources frees every slot held for the claim on this node (by CAS, exact holder), removes the claim's
CDI files and its state; unpreparing an unknown claim succeeds. A claim whose name was taken by a newer claim (another
UID) prepared here keeps the slots (the holder names the claim, not the UID), and only the old files go.

State survives an agent restart: it is read back at start, so prepared claims keep answering (and reporting health)
and a later unprepare frees their slots. Claims of one UID are handled one at a time; different claims in parallel.

Health: every stream gets the full list of prepared devices at once, again whenever an Instance changes (the cache's
change handler `notify`s) and every `HEALTH_RESEND` seconds on the agent's clock (the kubelet shows a device Unknown
after 30 s without a report). A device is Healthy while its Instance exists, lists this node, its handler calls it
healthy (`devplace.io/health`) and this node's discovery still reports it; otherwise Unhealthy, with the reason.

Device-plugin consistency (the rule of `slots`): a DRA-held slot is taken to every IL and CL plugin (Unhealthy),
counts against capacity, and the PodResources-based release never frees it (`release_rules` reads IL and CL holders
only); only NodeUnprepareResources or the claim's lifecycle frees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc
import grpc.aio

from devplace import errors, metrics
from devplace.agent import _dracdi as cdi
from devplace.agent import _slots as slots
from devplace.agent import _writes as writes
from devplace.agent._caches import NodeCache
from devplace.agent._deviceplugins import container_response
from devplace.agent._draclaims import ClaimProblem, InstanceKey, Plan, Result, check_claim, device_index, plan
from devplace.agent._instances import InstanceRecord
from devplace.api import DRA, DRIVER
from devplace.clocks import Clock
from devplace.deviceplugin.dra.v1 import api_pb2 as dra_v1
from devplace.deviceplugin.dra.v1 import api_pb2_grpc as dra_v1_grpc
from devplace.deviceplugin.dra.v1beta1 import api_pb2 as dra_v1beta1
from devplace.deviceplugin.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from devplace.deviceplugin.drahealth.v1 import api_pb2 as health_v1
from devplace.deviceplugin.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from devplace.deviceplugin.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from devplace.deviceplugin.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from devplace.deviceplugin.pluginregistration.v1 import api_pb2 as reg_pb2
from devplace.deviceplugin.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from devplace.discovery import Device, Signal, device_healthy
from devplace.files import write_atomically
from devplace.store import Store

log = logging.getLogger(__name__)
_MAX_SOCKET_PATH = 107
"""sun_path holds 108 bytes with its terminating NUL."""

PLUGIN_TYPE = "DRAPlugin"
REGISTRY_DIR = "plugins_registry"
PLUGINS_DIR = "plugins"
SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth")
"""What GetInfo lists: the services served on the plugin socket (the kubelet prefers v1)."""
HEALTH_RESEND = 10.0
"""Seconds between two health lists when nothing changed (the kubelet's timeout is 30 s)."""

Context = grpc.aio.ServicerContext[Any, Any]


class DraHost(Protocol):
    """What the plugin needs from its agent."""

    @property
    def cache(self) -> NodeCache: ...

    @property
    def node(self) -> str: ...

    def device(self, namespace: str, instance: str) -> Device | None: ...


async def dra_served(store: Store) -> bool:
    """Whether the store serves DRA's kinds (resource.k8s.io/v1): a one-item listing of ResourceSlices answers."""
    try:
        await store.list_page("ResourceSlice", limit=1, max_bytes=1 << 20)
    except (errors.NotFound, errors.Invalid, errors.Forbidden) as e:
        log.info("the store does not serve resource.k8s.io/v1 ResourceSlices (%s): DRA is off", e.message)
        return False
    return True


@dataclass(frozen=True)
class Prepared:
    """One prepared device of a claim, as its state file keeps it."""

    request: str
    pool: str
    device: str
    share_id: str | None
    instance: InstanceKey
    configuration: str
    slots: tuple[str, ...]
    cdi_ids: tuple[str, ...]
    cdi_file: str

    def to_json(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "pool": self.pool,
            "device": self.device,
            "shareID": self.share_id,
            "instance": list(self.instance),
            "configuration": self.configuration,
            "slots": list(self.slots),
            "cdiIds": list(self.cdi_ids),
            "cdiFile": self.cdi_file,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Prepared:
        ns, name = raw["instance"]
        return cls(
            str(raw["request"]),
            str(raw["pool"]),
            str(raw["device"]),
            None if raw.get("shareID") is None else str(raw["shareID"]),
            (str(ns), str(name)),
            str(raw["configuration"]),
            tuple(str(s) for s in raw["slots"]),
            tuple(str(c) for c in raw["cdiIds"]),
            str(raw["cdiFile"]),
        )


@dataclass(frozen=True)
class ClaimState:
    uid: str
    namespace: str
    name: str
    devices: tuple[Prepared, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "namespace": self.namespace,
            "name": self.name,
            "devices": [d.to_json() for d in self.devices],
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ClaimState:
        return cls(
            str(raw["uid"]),
            str(raw["namespace"]),
            str(raw["name"]),
            tuple(Prepared.from_json(d) for d in raw["devices"]),
        )

    def matches(self, results: Sequence[Result]) -> bool:
        """Whether the state was prepared for exactly these allocation results."""
        mine = [(d.request, d.pool, d.device, d.share_id) for d in self.devices]
        return mine == [(r.request, r.pool, r.device, r.share_id) for r in results]


async def _first_of(*waits: Coroutine[Any, Any, Any]) -> None:
    """Return when the first of `waits` ends; the others are cancelled."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def request_name(request: str) -> str:
    """The request a result serves, without a firstAvailable subrequest (the kubelet matches `req`, not `req/sub`)."""
    return request.partition("/")[0]


class DraPlugin:
    """The DRA plugin of one node (module docstring)."""

    def __init__(
        self, host: DraHost, store: Store, kubelet_dir: Path, cdi_dir: Path, clock: Clock, driver: str = DRIVER
    ) -> None:
        self.host = host
        self.store = store
        self.clock = clock
        self.driver = driver
        self.cdi_dir = Path(cdi_dir)
        self.registry_socket = Path(kubelet_dir) / REGISTRY_DIR / f"{driver}-reg.sock"
        self.plugin_dir = Path(kubelet_dir) / PLUGINS_DIR / driver
        self.endpoint = self.plugin_dir / "dra.sock"
        self.state_dir = self.plugin_dir / "claims"
        self.claims: dict[str, ClaimState] = {}
        """Prepared claims by UID (mirrors the state files)."""
        self.registered: bool | None = None
        """The kubelet's last NotifyRegistrationStatus (None: none yet)."""
        self.registration_error = ""
        self.changed = Signal()
        self._locks: dict[str, asyncio.Lock] = {}
        self._servers: list[grpc.aio.Server] = []
        self._unsubscribe: Any = None

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Serve the plugin and its registration; `errors.Invalid` naming --kubelet-dir when a socket path is longer
        than a unix socket address holds (107 bytes), before anything is served."""
        for path in (self.endpoint, self.registry_socket):
            if len(str(path).encode()) > _MAX_SOCKET_PATH:
                raise errors.Invalid.field(
                    "--kubelet-dir",
                    f"the DRA socket {path} is {len(str(path).encode())} bytes long; a unix socket path holds at "
                    f"most {_MAX_SOCKET_PATH}",
                )
        self.load()
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self.registry_socket.parent.mkdir(parents=True, exist_ok=True)
        plugin = grpc.aio.server()
        dra_v1_grpc.add_DRAPluginServicer_to_server(_DraV1(self), plugin)
        dra_v1beta1_grpc.add_DRAPluginServicer_to_server(_DraV1beta1(self), plugin)
        health_v1alpha1_grpc.add_DRAResourceHealthServicer_to_server(_HealthV1alpha1(self), plugin)
        health_v1_grpc.add_DRAResourceHealthServicer_to_server(_HealthV1(self), plugin)
        registration = grpc.aio.server()
        reg_grpc.add_RegistrationServicer_to_server(_Registration(self), registration)
        for server, path in ((plugin, self.endpoint), (registration, self.registry_socket)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            server.add_insecure_port(f"unix://{path}")
            await server.start()
            self._servers.append(server)
        self._unsubscribe = self.host.cache.instances.subscribe(lambda change: self.notify())
        log.info(
            "%s: DRA plugin %s serving %s, registering at %s",
            self.host.node,
            self.driver,
            self.endpoint,
            self.registry_socket,
        )

    async def stop(self) -> None:
        """Stop serving and remove the sockets (the kubelet deregisters the plugin); prepared state stays."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        servers, self._servers = self._servers, []
        for server in servers:
            await server.stop(grace=None)
        for path in (self.registry_socket, self.endpoint):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self.changed.fire()

    def notify(self) -> None:
        self.changed.fire()

    # -- state -------------------------------------------------------------------------------------------------

    def load(self) -> None:
        """Read every claim's state file (a file that cannot be read is logged and left for unprepare)."""
        self.claims = {}
        for path in sorted(self.state_dir.glob("*.json")) if self.state_dir.is_dir() else []:
            try:
                state = ClaimState.from_json(json.loads(path.read_text()))
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("%s: cannot read prepared claim state %s: %s", self.host.node, path, e)
                continue
            self.claims[state.uid] = state

    def _forget(self, uid: str) -> None:
        cdi.remove([self.state_dir / f"{uid}.json"])
        self.claims.pop(uid, None)

    def _lock(self, uid: str) -> asyncio.Lock:
        lock = self._locks.get(uid)
        if lock is None:
            lock = self._locks[uid] = asyncio.Lock()
        return lock

    # -- prepare -----------------------------------------------------------------------------------------------

    async def prepare(self, namespace: str, name: str, uid: str) -> ClaimState:
        """Prepare one claim (module docstring); `ClaimProblem` or a devplace error says why not."""
        async with self._lock(uid):
            try:
                claim = await self.store.get("ResourceClaim", name, namespace)
            except errors.NotFound:
                raise ClaimProblem(f"ResourceClaim {namespace}/{name} not found") from None
            check_claim(claim, namespace, name, uid)
            wanted = plan(claim, device_index(self.host.cache.instances.values()), self.driver)
            known = self.claims.get(uid)
            if known is not None and known.matches(wanted.results) and self._files_intact(known):
                return known
            state = await self._prepare(namespace, name, uid, wanted)
            self.claims[uid] = state
            self.notify()
            return state

    def _files_intact(self, state: ClaimState) -> bool:
        return all((self.cdi_dir / d.cdi_file).is_file() for d in state.devices)

    async def _prepare(self, namespace: str, name: str, uid: str, wanted: Plan) -> ClaimState:
        holder = DRA(namespace, name, self.host.node)
        records: dict[InstanceKey, InstanceRecord] = {}
        spare: dict[InstanceKey, list[str]] = {}
        taken: list[tuple[InstanceKey, tuple[str, ...]]] = []
        try:
            for key, want in wanted.wants.items():
                record, claim = await self._claim(key, want.slots, want.count, holder)
                records[key] = record
                spare[key] = list(claim.slots[len(want.slots) :])  # the any-slot part, handed out in order below
                if claim.new:
                    taken.append((key, claim.new))
            devices: list[tuple[Prepared, cdi.Edits]] = []
            for result in wanted.results:
                if result.slot is not None:
                    mine = [result.slot]
                else:
                    mine, spare[result.instance] = (
                        spare[result.instance][: result.count],
                        spare[result.instance][result.count :],
                    )
                devices.append(self._device(uid, result, records[result.instance], mine))
            state = ClaimState(uid, namespace, name, tuple(d for d, _ in devices))
            # the CDI fsync takes milliseconds: off the event loop (which serves Allocate meanwhile), in one hop
            await asyncio.to_thread(self._write_files, state, [e for _, e in devices])
        except BaseException:
            await self._release_new(taken, holder)
            raise
        return state

    def _write_files(self, state: ClaimState, edits: Sequence[cdi.Edits]) -> None:
        """The claim's CDI specs (durable), then its state (atomic; it outlives the agent process, and after a
        reboot the kubelet prepares again anyway)."""
        for device, device_edits in zip(state.devices, edits, strict=True):
            cdi.write_spec(self.cdi_dir, device.configuration, state.uid, device.device, device_edits)
        data = json.dumps(state.to_json()).encode()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(self.state_dir / f"{state.uid}.json", data, mode=0o644, sync="none")

    async def _claim(
        self, key: InstanceKey, wanted: tuple[str, ...], count: int, holder: DRA
    ) -> tuple[InstanceRecord, slots.Claim]:
        node = self.host.node

        def decide(record: InstanceRecord) -> tuple[slots.Usage | None, slots.Claim]:
            decision = slots.claim_dra(record.usage, wanted, count, holder, node in record.nodes)
            if isinstance(decision, slots.Refusal):
                raise errors.Refused(decision.reason)
            return (decision.usage if decision.changed else None), decision

        try:
            return await writes.update_usage_for(self.host.cache, key[0], key[1], decide)
        except errors.NotFound:
            raise ClaimProblem(f"Instance {key[0]}/{key[1]} no longer exists") from None
        except errors.Refused as e:
            raise ClaimProblem(e.message) from None

    async def _release_new(self, taken: Sequence[tuple[InstanceKey, tuple[str, ...]]], holder: DRA) -> None:
        for (namespace, instance), new in taken:
            try:
                await self._release(namespace, instance, [(slot, holder) for slot in new])
            except errors.DevplaceError as e:
                log.warning("%s: could not give back %s of %s: %s", self.host.node, new, instance, e.message)

    def _device(self, uid: str, result: Result, record: InstanceRecord, mine: list[str]) -> tuple[Prepared, cdi.Edits]:
        """A prepared device and what its CDI spec gives a container (Allocate's answer for the same slots)."""
        device = self.host.device(record.namespace, record.name)
        response = container_response([(record, s) for s in mine], {record.name: device})
        edits = cdi.Edits(
            env=dict(response.envs),
            device_nodes=[(d.container_path, d.host_path, d.permissions) for d in response.devices],
            mounts=[(m.container_path, m.host_path, m.read_only) for m in response.mounts],
        )
        ids = (cdi.cdi_id(record.configuration, uid, result.device), *(c.name for c in response.cdi_devices))
        return Prepared(
            result.request,
            result.pool,
            result.device,
            result.share_id,
            result.instance,
            record.configuration,
            tuple(mine),
            ids,
            cdi.spec_file_name(record.configuration, uid, result.device),
        ), edits

    # -- unprepare ---------------------------------------------------------------------------------------------

    async def unprepare(self, namespace: str, name: str, uid: str) -> None:
        """Unprepare one claim (module docstring); idempotent."""
        async with self._lock(uid):
            state = self.claims.get(uid)
            if state is not None:
                namespace, name = state.namespace, state.name
            newer = any(s.uid != uid and (s.namespace, s.name) == (namespace, name) for s in self.claims.values())
            if not newer:
                await self._release_all(DRA(namespace, name, self.host.node))
            cdi.remove(cdi.claim_files(self.cdi_dir, uid))
            self._forget(uid)
            self._locks.pop(uid, None)
            self.notify()

    async def _release_all(self, holder: DRA) -> None:
        for record in self.host.cache.instances.values():
            held: list[tuple[str, slots.Holder]] = [(slot, holder) for slot in record.usage.slots_held_by(holder)]
            if held:
                with contextlib.suppress(errors.NotFound):
                    await self._release(record.namespace, record.name, held)

    async def _release(self, namespace: str, instance: str, held: list[tuple[str, slots.Holder]]) -> None:
        """Free `held` (slot, exact holder) of one Instance by CAS."""

        def decide(record: InstanceRecord) -> slots.Usage | None:
            return slots.release_slots(record.usage, held)

        await writes.update_usage(self.host.cache, namespace, instance, decide, slot_local=True)

    # -- health ------------------------------------------------------------------------------------------------

    def health(self) -> list[tuple[str, str, bool, str]]:
        """(pool, device, healthy, message) of every prepared device, sorted."""
        out: dict[tuple[str, str], tuple[bool, str]] = {}
        node = self.host.node
        for state in self.claims.values():
            for d in state.devices:
                namespace, instance = d.instance
                record = self.host.cache.instance(namespace, instance)
                if record is None:
                    verdict = (False, f"Instance {namespace}/{instance} is gone")
                elif node not in record.nodes:
                    verdict = (False, f"{node} no longer sees Instance {namespace}/{instance}")
                elif not device_healthy(record.broker_properties):
                    verdict = (False, f"the discovery handler reports Instance {namespace}/{instance} unhealthy")
                elif self.host.device(namespace, instance) is None:
                    verdict = (False, f"{node}'s discovery no longer reports Instance {namespace}/{instance}")
                else:
                    verdict = (True, "")
                key = (d.pool, d.device)
                before = out.get(key)
                out[key] = verdict if before is None or before[0] else before
        return [(pool, device, ok, why) for (pool, device), (ok, why) in sorted(out.items())]

    async def watch_health(self, module: Any) -> AsyncIterator[Any]:
        """The NodeWatchResources stream in `module`'s messages (v1alpha1 and v1 are field-for-field the same)."""
        last: list[tuple[str, str, bool, str]] | None = None
        sent_at = 0.0
        while True:
            wake = self.changed.current()
            current = self.health()
            now = self.clock.now()
            if current != last or now - sent_at >= HEALTH_RESEND:
                yield module.NodeWatchResourcesResponse(
                    devices=[
                        module.DeviceHealth(
                            device=module.DeviceIdentifier(pool_name=pool, device_name=device),
                            health=module.HEALTHY if ok else module.UNHEALTHY,
                            last_updated_time=int(now),
                            message=why[:1024],
                        )
                        for pool, device, ok, why in current
                    ]
                )
                last, sent_at = current, now
            if not self._servers:
                return
            await _first_of(wake.wait(), self.clock.sleep(max(0.0, sent_at + HEALTH_RESEND - now)))

    # -- RPC shells --------------------------------------------------------------------------------------------

    async def prepare_all(self, claims: Sequence[Any], module: Any) -> Any:
        answers = await asyncio.gather(*(self._prepare_one(c, module) for c in claims))
        return module.NodePrepareResourcesResponse(claims=dict(answers))

    async def _prepare_one(self, claim: Any, module: Any) -> tuple[str, Any]:
        started = time.perf_counter()
        try:
            state = await self.prepare(claim.namespace, claim.name, claim.uid)
        except ClaimProblem as e:
            metrics.prepared("refused", time.perf_counter() - started)
            return claim.uid, module.NodePrepareResourceResponse(error=str(e))
        except errors.DevplaceError as e:
            metrics.prepared("failed", time.perf_counter() - started)
            return claim.uid, module.NodePrepareResourceResponse(error=f"{type(e).__name__}: {e.message}")
        metrics.prepared("prepared", time.perf_counter() - started)
        devices = []
        for d in state.devices:
            fields: dict[str, Any] = {
                "request_names": [request_name(d.request)],
                "pool_name": d.pool,
                "device_name": d.device,
                "cdi_device_ids": list(d.cdi_ids),
            }
            if d.share_id is not None and "share_id" in module.Device.DESCRIPTOR.fields_by_name:
                fields["share_id"] = d.share_id
            devices.append(module.Device(**fields))
        return claim.uid, module.NodePrepareResourceResponse(devices=devices)

    async def unprepare_all(self, claims: Sequence[Any], module: Any) -> Any:
        answers = await asyncio.gather(*(self._unprepare_one(c, module) for c in claims))
        return module.NodeUnprepareResourcesResponse(claims=dict(answers))

    async def _unprepare_one(self, claim: Any, module: Any) -> tuple[str, Any]:
        try:
            await self.unprepare(claim.namespace, claim.name, claim.uid)
        except errors.DevplaceError as e:
            return claim.uid, module.NodeUnprepareResourceResponse(error=f"{type(e).__name__}: {e.message}")
        return claim.uid, module.NodeUnprepareResourceResponse()


class _DraV1(dra_v1_grpc.DRAPluginServicer):
    def __init__(self, plugin: DraPlugin) -> None:
        self.plugin = plugin

    async def NodePrepareResources(
        self, request: dra_v1.NodePrepareResourcesRequest, context: Context
    ) -> dra_v1.NodePrepareResourcesResponse:
        response: dra_v1.NodePrepareResourcesResponse = await self.plugin.prepare_all(request.claims, dra_v1)
        return response

    async def NodeUnprepareResources(
        self, request: dra_v1.NodeUnprepareResourcesRequest, context: Context
    ) -> dra_v1.NodeUnprepareResourcesResponse:
        response: dra_v1.NodeUnprepareResourcesResponse = await self.plugin.unprepare_all(request.claims, dra_v1)
        return response


class _DraV1beta1(dra_v1beta1_grpc.DRAPluginServicer):
    def __init__(self, plugin: DraPlugin) -> None:
        self.plugin = plugin

    async def NodePrepareResources(
        self, request: dra_v1beta1.NodePrepareResourcesRequest, context: Context
    ) -> dra_v1beta1.NodePrepareResourcesResponse:
        response: dra_v1beta1.NodePrepareResourcesResponse = await self.plugin.prepare_all(request.claims, dra_v1beta1)
        return response

    async def NodeUnprepareResources(
        self, request: dra_v1beta1.NodeUnprepareResourcesRequest, context: Context
    ) -> dra_v1beta1.NodeUnprepareResourcesResponse:
        response: dra_v1beta1.NodeUnprepareResourcesResponse = await self.plugin.unprepare_all(
            request.claims, dra_v1beta1
        )
        return response


class _HealthV1alpha1(health_v1alpha1_grpc.DRAResourceHealthServicer):
    def __init__(self, plugin: DraPlugin) -> None:
        self.plugin = plugin

    async def NodeWatchResources(
        self, request: health_v1alpha1.NodeWatchResourcesRequest, context: Context
    ) -> AsyncIterator[health_v1alpha1.NodeWatchResourcesResponse]:
        async for message in self.plugin.watch_health(health_v1alpha1):
            yield message


class _HealthV1(health_v1_grpc.DRAResourceHealthServicer):
    def __init__(self, plugin: DraPlugin) -> None:
        self.plugin = plugin

    async def NodeWatchResources(
        self, request: health_v1.NodeWatchResourcesRequest, context: Context
    ) -> AsyncIterator[health_v1.NodeWatchResourcesResponse]:
        async for message in self.plugin.watch_health(health_v1):
            yield message


class _Registration(reg_grpc.RegistrationServicer):
    def __init__(self, plugin: DraPlugin) -> None:
        self.plugin = plugin

    async def GetInfo(self, request: reg_pb2.InfoRequest, context: Context) -> reg_pb2.PluginInfo:
        return reg_pb2.PluginInfo(
            type=PLUGIN_TYPE,
            name=self.plugin.driver,
            endpoint=str(self.plugin.endpoint),
            supported_versions=list(SERVICES),
        )

    async def NotifyRegistrationStatus(
        self, request: reg_pb2.RegistrationStatus, context: Context
    ) -> reg_pb2.RegistrationStatusResponse:
        self.plugin.registered = request.plugin_registered
        self.plugin.registration_error = request.error
        if request.plugin_registered:
            log.info("%s: the kubelet registered DRA driver %s", self.plugin.host.node, self.plugin.driver)
        else:
            log.warning(
                "%s: the kubelet refused DRA driver %s: %s", self.plugin.host.node, self.plugin.driver, request.error
            )
        return reg_pb2.RegistrationStatusResponse()
