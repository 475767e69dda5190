"""The device plugins the kubelet talks to: one per (Instance, node) and one per (Configuration, node).

Both are `DevicePlugin` servicers (kubelet device plugin API v1beta1) over the agent's cache; `servers.py` puts each
on its own unix socket and registers it. The decisions are in `slots`; this module is the thin shell around them:

- ListAndWatch sends the full list at once and again whenever the agent notifies a change (many changes collapse
  into one send; a send is skipped when the list did not change, unless forced after a refused Allocate, when the
  kubelet evidently had a stale view: Akri #849).
- Allocate claims by compare-and-swap on the Instance (`writes.update_usage`), re-deciding on every fresh
  copy (a refusal made on the cached copy is decided again on a fresh read before it stands). A refusal becomes a
  gRPC error through `devplace.deviceplugin._errors` (the one mapping), and every slot claimed earlier in the same
  request is released again, so a failed request holds nothing (also when the RPC is cancelled mid-request or fails
  on an unexpected error); the kubelet is sent a fresh list at once (forced), so it stops offering what it cannot
  have.
- Allocate is on the kubelet's pod admission path, so it does only what the answer needs: the pure decision on the
  cached record, one CAS, the response (kept and handed out again while the same slots of unchanged Instances are
  granted). What a claim sets off besides (ListAndWatch re-sends, a PodResources look) is held back by the agent
  (`PluginHost.hold`) until the RPC has ended, i.e. its answer is on the wire.
- IL: device ids are slot names. CL: device ids are virtual devices (`slots` explains them); each maps to a free
  slot of its Instance at Allocate time, and re-offering a vdev this node holds returns the same slot.

AllocateResponse per container: env vars from each Instance's brokerProperties, plain and suffixed with the
Instance's digest in upper case (`<KEY>_<DIGEST>`, as Akri does, so several devices' properties do not collide), but
not the reserved properties (`devplace.discovery.RESERVED`), and with the plain values of `JOINED_ENVS` joined by
commas across the container's devices (`NVIDIA_VISIBLE_DEVICES=uuid1,uuid2`); mounts and device nodes of the
discovered device; the CDI devices its `devplace.io/cdi-devices` names; annotations `devplace.io/slots` and
`devplace.io/instances`.

Health: a device whose handler says `devplace.io/health: Unhealthy` (read from the Instance's brokerProperties, so
every node agrees) has all its IL slots and CL virtual devices Unhealthy in ListAndWatch (`slots.il_health`,
`slots.cl_health`); the Instance's change wakes the streams like any other.

CL preference knob: the Configuration annotation `devplace.io/cl-preference: spread|pack` (default spread) steers
GetPreferredAllocation with `uniqueDevices: false`: spread a pod's devices over Instances, or fill one first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import grpc.aio

from devplace import errors, metrics
from devplace.agent import _slots as slots
from devplace.agent import _writes as writes
from devplace.agent._caches import NodeCache
from devplace.agent._instances import InstanceRecord
from devplace.agent._release_rules import DeviceKey
from devplace.deviceplugin import HEALTHY, UNHEALTHY, abort
from devplace.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from devplace.discovery import JOINED_ENVS, RESERVED, Device, Signal, cdi_devices, device_healthy

log = logging.getLogger(__name__)

ANNOTATION_SLOTS = "devplace.io/slots"
ANNOTATION_INSTANCES = "devplace.io/instances"
CL_PREFERENCE = "devplace.io/cl-preference"
_MESSAGES = 4096
"""At most this many encoded `Device` entries kept per plugin (the cache starts over past it: vdev names can churn)."""

Context = grpc.aio.ServicerContext[Any, Any]


class PluginHost(Protocol):
    """What a plugin needs from its agent."""

    @property
    def cache(self) -> NodeCache: ...

    @property
    def node(self) -> str: ...

    def device(self, namespace: str, instance: str) -> Device | None:
        """The device this node discovered for an Instance (for mounts and device nodes)."""
        ...

    def allocated(self, keys: Iterable[DeviceKey]) -> None:
        """Called after each container's successful claim (release bookkeeping)."""
        ...

    def claim_refused(self, namespace: str, instance: str, reason: str) -> None:
        """Called when a claim on an Instance is refused (an Event for users; never blocks)."""
        ...

    def dra_serves(self, record: InstanceRecord) -> bool:
        """Whether a DRA claim may hold slots of this Instance (it is published to DRA on this node)."""
        ...

    def hold(self) -> Callable[[], None]:
        """Count the agent busy and hold back unforced ListAndWatch wake-ups and the follow-up work of claims until
        the returned function is called (once, when the Allocate's answer is on its way), so `Agent.is_idle` stays
        exact and the answer is not queued behind work it does not need."""
        ...


def container_response(
    granted: Sequence[tuple[InstanceRecord, str]], devices: Mapping[str, Device | None]
) -> api_pb2.ContainerAllocateResponse:
    """The kubelet's answer for one container that got `granted` (Instance, slot) pairs; pure.

    `devices` maps Instance names to the discovered device (None when this node has no record of it).
    """
    envs: dict[str, str] = {}
    mounts: dict[tuple[str, str], api_pb2.Mount] = {}
    specs: dict[tuple[str, str], api_pb2.DeviceSpec] = {}
    cdi: dict[str, None] = {}
    instances: list[str] = []
    for record, _slot in granted:
        if record.name in instances:
            continue
        instances.append(record.name)
        suffix = record.digest.upper()
        cdi.update(dict.fromkeys(cdi_devices(record.broker_properties)))
        for key, value in sorted(record.broker_properties.items()):
            if key in RESERVED:
                continue
            before = envs.get(key)
            if key in JOINED_ENVS and before:
                if value not in before.split(","):
                    envs[key] = f"{before},{value}"
            else:
                envs[key] = value
            envs[f"{key}_{suffix}"] = value
        device = devices.get(record.name)
        if device is None:
            continue
        for m in device.mounts:
            mounts.setdefault(
                (m.container_path, m.host_path),
                api_pb2.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only),
            )
        for d in device.device_specs:
            specs.setdefault(
                (d.container_path, d.host_path),
                api_pb2.DeviceSpec(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions),
            )
    return api_pb2.ContainerAllocateResponse(
        envs=envs,
        mounts=list(mounts.values()),
        devices=list(specs.values()),
        cdi_devices=[api_pb2.CDIDevice(name=name) for name in cdi],
        annotations={
            ANNOTATION_SLOTS: ",".join(slot for _, slot in granted),
            ANNOTATION_INSTANCES: ",".join(instances),
        },
    )


def preference_of(annotations: Mapping[str, str]) -> slots.Preference:
    value = annotations.get(CL_PREFERENCE, "spread")
    if value == "pack":
        return "pack"
    if value != "spread":
        log.warning("%s=%r is neither 'spread' nor 'pack'; using 'spread'", CL_PREFERENCE, value)
    return "spread"


def _after_rpc(context: Context, resume: Callable[[], None]) -> bool:
    """Call `resume` once the RPC has ended (gRPC calls done-callbacks on every ending: answered, aborted, cancelled,
    timed out); False if `context` cannot, and the caller resumes at once."""
    add_done_callback = getattr(context, "add_done_callback", None)
    if add_done_callback is None:
        return False
    try:
        add_done_callback(lambda _context: resume())
    except Exception:  # an RPC that has already ended
        return False
    return True


ResponseKey = tuple[tuple[tuple[str, str, Mapping[str, str], Device | None], ...], ...]
"""Per container, per granted slot: (Instance, slot, its brokerProperties, the discovered device): all an
AllocateResponse is made of. Compared with ==, which is an identity check while nothing changed."""


class DevicePlugin(api_pb2_grpc.DevicePluginServicer):
    """Common shell: options, the ListAndWatch stream, Allocate with rollback. Subclasses decide."""

    preferred_allocation = False

    def __init__(self, host: PluginHost, namespace: str, name: str, resource: str) -> None:
        self.host = host
        self.namespace = namespace
        self.name = name
        self.resource_name = resource
        self._signal = Signal()
        self._generation = 0
        self._forced = 0
        self._streams: dict[int, int] = {}
        """The generation each open stream last sent (-1: nothing yet)."""
        self._behind = 0
        """How many open streams have not sent the current generation: `pending` in O(1) (a fleet's settle asks it
        of every plugin of every node, over and over)."""
        self._stream_ids = 0
        self._closed = False
        self._response: tuple[ResponseKey, api_pb2.AllocateResponse] | None = None
        self._messages: dict[tuple[str, bool], bytes] = {}

    # -- what subclasses provide ----------------------------------------------------------------------------

    def devices(self) -> list[slots.DeviceHealth]:
        raise NotImplementedError

    async def claim_container(self, ids: Sequence[str]) -> tuple[list[tuple[InstanceRecord, str]], list[Undo]]:
        """Claim one container's devices; returns (Instance, slot) per id and what to undo on a later failure."""
        raise NotImplementedError

    # -- notification ---------------------------------------------------------------------------------------

    def notify(self, force: bool = False, wake: bool = True) -> None:
        """The agent saw a change that may affect this plugin's list (force: send even if unchanged).

        `wake=False` records it (so `pending` is True) without waking the streams yet: `wake()` follows later.
        """
        self._generation += 1
        self._behind = len(self._streams)
        if force:
            self._forced = self._generation
        if wake:
            self.wake()

    def changed_by(self, old: InstanceRecord | None, new: InstanceRecord | None) -> bool:
        """Whether an Instance's change from `old` to `new` (the cache's records, None: absent) may change this
        plugin's list; a change that cannot is not notified (`PluginSet.notify_change`). Subclasses decide."""
        return True

    def wake(self) -> None:
        """Let the open streams send what they have not sent yet."""
        if self._streams:  # with no stream open there is nobody to wake; a new stream reads the state fresh
            self._signal.fire()

    def close(self) -> None:
        """End every ListAndWatch stream (the server is going away)."""
        self._closed = True
        self._signal.fire()

    def reopen(self) -> None:
        """Accept streams again after `close` (the server restarts on a fresh socket)."""
        self._closed = False

    @property
    def pending(self) -> bool:
        """A notification that an open stream has not sent yet."""
        return self._behind > 0

    def _sent(self, stream: int, generation: int | None) -> None:
        """Stream `stream` has sent `generation` (None: it closed); keeps `_behind` current."""
        before = self._streams.get(stream)
        if before is not None and before < self._generation:
            self._behind -= 1
        if generation is None:
            self._streams.pop(stream, None)
            return
        self._streams[stream] = generation
        if generation < self._generation:
            self._behind += 1

    # -- DevicePlugin service -------------------------------------------------------------------------------

    async def GetDevicePluginOptions(self, request: api_pb2.Empty, context: Context) -> api_pb2.DevicePluginOptions:
        return api_pb2.DevicePluginOptions(
            pre_start_required=False, get_preferred_allocation_available=self.preferred_allocation
        )

    async def ListAndWatch(  # type: ignore[override]  # the servicer yields wire form (its registration says so)
        self, request: api_pb2.Empty, context: Context
    ) -> AsyncIterator[bytes]:
        """The stream of device lists, each a ListAndWatchResponse in wire form: the server sends the bytes as they
        are (`servers.add_plugin_to_server`), so a send is neither parsed into a message nor serialized again."""
        self._stream_ids += 1
        stream = self._stream_ids
        self._sent(stream, -1)
        last: bytes | None = None
        try:
            while not self._closed:
                wake = self._signal.current()
                generation = self._generation
                current = self.encoded_devices()
                if current != last or self._forced > self._streams[stream]:
                    last = current
                    yield current
                self._sent(stream, generation)
                if generation == self._generation:
                    await wake.wait()
        finally:
            self._sent(stream, None)

    def encoded_devices(self) -> bytes:
        """`devices()` as a ListAndWatchResponse in wire form."""
        return b"".join([self._encoded(d.id, d.healthy) for d in self.devices()])

    def _encoded(self, device: str, healthy: bool) -> bytes:
        """An entry as one `devices` element of a ListAndWatchResponse in wire form, made once per (id, health).

        A response is the concatenation of its elements' encodings (protobuf's rule for a repeated field), so a
        send joins cached bytes (a tenth of building a hundred `Device` messages field by field), and two lists
        compare as bytes."""
        key = (device, healthy)
        found = self._messages.get(key)
        if found is None:
            if len(self._messages) > _MESSAGES:
                self._messages.clear()
            entry = api_pb2.Device(ID=device, health=HEALTHY if healthy else UNHEALTHY)
            found = self._messages[key] = api_pb2.ListAndWatchResponse(devices=[entry]).SerializeToString()
        return found

    async def GetPreferredAllocation(
        self, request: api_pb2.PreferredAllocationRequest, context: Context
    ) -> api_pb2.PreferredAllocationResponse:
        await self.refresh_for_preference()
        return api_pb2.PreferredAllocationResponse(
            container_responses=[
                api_pb2.ContainerPreferredAllocationResponse(
                    deviceIDs=self.prefer(
                        list(req.available_deviceIDs), list(req.must_include_deviceIDs), req.allocation_size
                    )
                )
                for req in request.container_requests
            ]
        )

    async def refresh_for_preference(self) -> None:
        """Bring what `prefer` reads up to date before it answers (nothing by default: the cache is enough)."""

    def prefer(self, available: list[str], must_include: list[str], size: int) -> list[str]:
        return slots.preferred_allocation(available, must_include, size, {})

    async def Allocate(self, request: api_pb2.AllocateRequest, context: Context) -> api_pb2.AllocateResponse:
        resume = self.host.hold()
        handed_over = False
        undo: list[Undo] = []
        started, result = time.perf_counter(), "failed"  # devplace.metrics: latency by result, refusals
        try:
            grants: list[list[tuple[InstanceRecord, str]]] = []
            for req in request.container_requests:
                ids = list(req.devices_ids)
                granted, done = await self.claim_container(ids)
                undo.extend(done)
                grants.append(granted)
                self.host.allocated([(self.resource_name, device_id) for device_id in ids])
            response = self._response_for(grants)
            handed_over = _after_rpc(context, resume)
            result = "allocated"
            return response
        except errors.DevplaceError as e:
            result = "refused" if isinstance(e, errors.Refused) else "failed"
            await self._rollback(undo)
            log.info("%s: Allocate refused: %s", self.resource_name, e.message)
            await abort(context, e)
        except BaseException:
            # cancelled (the kubelet's deadline passed) or a bug: the request failed all the same, so it holds nothing;
            # shielded so that a second cancellation cannot cut the rollback short
            await asyncio.shield(self._rollback(undo))
            raise
        finally:
            metrics.allocated(result, time.perf_counter() - started)
            if not handed_over:
                resume()

    def _response_for(self, grants: Sequence[Sequence[tuple[InstanceRecord, str]]]) -> api_pb2.AllocateResponse:
        """The AllocateResponse for these grants; the last one is handed out again while it would come out the same
        (nobody changes a response once built: gRPC only serializes it)."""
        key: ResponseKey = tuple(
            tuple(
                (record.name, slot, record.broker_properties, self.host.device(record.namespace, record.name))
                for record, slot in granted
            )
            for granted in grants
        )
        if self._response is not None and self._response[0] == key:
            return self._response[1]
        response = api_pb2.AllocateResponse(
            container_responses=[
                container_response(granted, {name: device for name, _, _, device in parts})
                for granted, parts in zip(grants, key, strict=True)
            ]
        )
        self._response = (key, response)
        return response

    async def PreStartContainer(
        self, request: api_pb2.PreStartContainerRequest, context: Context
    ) -> api_pb2.PreStartContainerResponse:
        return api_pb2.PreStartContainerResponse()

    # -- claims ---------------------------------------------------------------------------------------------

    async def _claim(
        self, instance: str, decide: ClaimDecision, *, slot_local: bool = False
    ) -> tuple[InstanceRecord, slots.Claim, list[Undo]]:
        """CAS loop around a pure claim (`slot_local`: it reads only the slots it takes, `writes.update_usage`); a
        refusal re-reads the Instance and forces a fresh list to the kubelet."""
        node = self.host.node

        def apply(record: InstanceRecord) -> tuple[slots.Usage | None, slots.Claim]:
            decision = decide(record.usage, node in record.nodes)
            if isinstance(decision, slots.Refusal):
                raise errors.Refused(decision.reason)
            return (decision.usage if decision.changed else None), decision

        cache = self.host.cache
        namespace = self.namespace_of(instance)
        try:
            record, claim = await writes.update_usage_for(cache, namespace, instance, apply, slot_local=slot_local)
        except (errors.NotFound, errors.Refused) as e:
            # the refusal was decided on a fresh read, now in the cache: the kubelet gets that list at once
            self.notify(force=True)
            if isinstance(e, errors.NotFound):
                raise errors.Refused(f"{instance} no longer exists") from e
            self.host.claim_refused(namespace, instance, e.message)
            raise
        undo = [(namespace, instance, slot, claim.usage.holders[slot]) for slot in claim.new]
        return record, claim, undo

    def namespace_of(self, instance: str) -> str:
        return self.namespace

    async def _rollback(self, undo: Sequence[Undo]) -> None:
        for namespace, instance, slot, holder in reversed(undo):

            def release(record: InstanceRecord, slot: str = slot, holder: slots.Holder = holder) -> slots.Usage | None:
                return slots.release_slot(record.usage, slot, holder)

            try:
                await writes.update_usage(self.host.cache, namespace, instance, release, slot_local=True)
            except errors.DevplaceError as e:
                log.warning("%s: could not roll back %s: %s", self.resource_name, slot, e.message)


Undo = tuple[str, str, str, slots.Holder]
"""(namespace, instance, slot, holder) claimed by this request: released again if a later part fails."""

ClaimDecision = Callable[[slots.Usage, bool], "slots.Claim | slots.Refusal"]
"""A pure claim over (usage, visible from this node)."""


class InstancePlugin(DevicePlugin):
    """IL plugin: resource `<prefix>/<instance>` (`api.devices.resource_name`), one device per slot."""

    preferred_allocation = True

    def __init__(self, host: PluginHost, namespace: str, instance: str, resource: str) -> None:
        super().__init__(host, namespace, instance, resource)
        self._fresh: InstanceRecord | None = None
        """The Instance as the store had it when GetPreferredAllocation asked (`refresh_for_preference`), for the
        one `prefer` that follows."""
        self._kept: tuple[slots.Usage, bool, list[tuple[str, bool]], bytes | None] | None = None
        """The last usage asked, its health, its (slot, healthy) pairs and, once a send made it, their wire form."""

    async def refresh_for_preference(self) -> None:
        """Read the Instance from the store when a DRA claim may hold one of its slots: the scheduler binds a
        device-path pod only after the claims of its burst took their slots, but this agent's cache (and so the
        kubelet's device list) may not show such a slot yet, and a preference read from the cache could name it: the
        pod would fail admission although another slot is free. A failed read keeps the cached view."""
        cached = self.host.cache.instance(self.namespace, self.name)
        if cached is None or not self.host.dra_serves(cached):
            return
        try:
            obj = await self.host.cache.store.get("Instance", self.name, self.namespace)
        except errors.DevplaceError:
            return
        self._fresh = InstanceRecord.from_wire(obj, previous=cached)

    def prefer(self, available: list[str], must_include: list[str], size: int) -> list[str]:
        """The slots to give, as this agent sees the Instance now: `must_include`, then slots this node may take
        (free, or its own), lowest first, then any. The kubelet's list of Healthy devices lags behind a slot that
        DRA (devplace's scheduler, a claim on this node) or another node has just taken; without a preference it
        may pick that slot and the pod fails admission although another slot is free."""
        takeable = {d.id for d in self.devices() if d.healthy}
        chosen = [d for d in must_include if d in available]

        def order(device: str) -> tuple[bool, int, str]:
            index = slots.slot_index(self.name, device)
            return (index is None, index if index is not None else 0, device)

        ordered = sorted(available, key=order)
        for d in [*(d for d in ordered if d in takeable), *ordered]:
            if len(chosen) >= size:
                break
            if d not in chosen:
                chosen.append(d)
        return chosen

    def devices(self) -> list[slots.DeviceHealth]:
        record = self._record()
        if record is None:
            return []
        return slots.il_health(record.usage, self.host.node, device_healthy(record.broker_properties))

    def encoded_devices(self) -> bytes:
        """`slots.il_states` in wire form: sent on every change of the Instance, so made from the usage directly."""
        record = self._record()
        if record is None:
            return b""
        states = self._states(record)
        kept = self._kept
        if kept is not None and kept[2] is states and kept[3] is not None:
            return kept[3]
        wire = b"".join([self._encoded(slot, healthy) for slot, healthy in states])
        if kept is not None and kept[2] is states:
            self._kept = (kept[0], kept[1], states, wire)
        return wire

    def changed_by(self, old: InstanceRecord | None, new: InstanceRecord | None) -> bool:
        """Whether the list of `new` differs from the list of `old`: a claim or a release of this node's own slot
        changes neither (a slot free or held by this node is Healthy either way)."""
        if old is None or new is None:
            return True
        return self._states(old) != self._states(new)

    def _states(self, record: InstanceRecord) -> list[tuple[str, bool]]:
        """`slots.il_states` of `record`, remembered for the last usage asked (a change's new record is asked by
        `changed_by`, then again by the send it wakes)."""
        healthy = device_healthy(record.broker_properties)
        kept = self._kept
        if kept is not None and kept[0] is record.usage and kept[1] == healthy:
            return kept[2]
        states = slots.il_states(record.usage, self.host.node, healthy)
        self._kept = (record.usage, healthy, states, None)
        return states

    def _record(self) -> InstanceRecord | None:
        record = self.host.cache.instance(self.namespace, self.name)
        fresh, self._fresh = self._fresh, None
        if fresh is not None and (record is None or fresh.resource_version > record.resource_version):
            record = fresh
        return record

    async def claim_container(self, ids: Sequence[str]) -> tuple[list[tuple[InstanceRecord, str]], list[Undo]]:
        node = self.host.node
        record, claim, undo = await self._claim(
            self.name, lambda usage, visible: slots.claim_slots(usage, ids, node, visible), slot_local=True
        )
        return [(record, slot) for slot in claim.slots], undo


def _room(usage: slots.Usage) -> bool:
    """Whether a slot of `usage` is free, seen without a look at each slot (an `exact` usage with fewer held than its
    capacity): with `uniqueDevices` its Instance's one vdev is then Healthy whoever holds the rest."""
    return usage.exact and usage.held < usage.capacity


@dataclass(eq=False, slots=True)
class _Part:
    """One Instance's part of a ConfigurationPlugin's list, kept while the Instance's usage and health stay."""

    usage: slots.Usage
    unique: bool
    sick: bool
    states: list[tuple[str, bool]]
    """(vdev, healthy), as `slots.cl_states_of` gives them."""
    wire: bytes | None = None
    """The part in wire form, once a send made it."""


class ConfigurationPlugin(DevicePlugin):
    """CL plugin: resource `<prefix>/<configuration>`, virtual devices over the Configuration's visible Instances."""

    preferred_allocation = True

    def __init__(self, host: PluginHost, namespace: str, configuration: str, resource: str) -> None:
        super().__init__(host, namespace, configuration, resource)
        self._parts: dict[str, _Part] = {}

    def _unique(self) -> bool:
        cfg = self.host.cache.configuration(self.namespace, self.name)
        return True if cfg is None else cfg.spec.unique_devices

    def devices(self) -> list[slots.DeviceHealth]:
        return [
            slots.DeviceHealth(vdev, healthy, part.usage.instance)
            for part in self._current_parts()
            for vdev, healthy in part.states
        ]

    def encoded_devices(self) -> bytes:
        """The parts' wire forms joined: each Instance's part is encoded once while it is kept."""
        out: list[bytes] = []
        for part in self._current_parts():
            if part.wire is None:
                part.wire = b"".join([self._encoded(vdev, healthy) for vdev, healthy in part.states])
            out.append(part.wire)
        return b"".join(out)

    def changed_by(self, old: InstanceRecord | None, new: InstanceRecord | None) -> bool:
        """Whether the change of one Instance changes this list: it joins or leaves the visible Instances of this
        Configuration, or its part (`slots.cl_states_of`) differs. With `uniqueDevices` (the default) a claim or
        a release of a slot most often changes nothing: the Instance's one vdev stays Healthy while a slot is free.
        The new part is kept for the send (if any) that follows."""
        if old is None or new is None:
            return True
        member = self._member(old)
        if member != self._member(new):
            return True
        if not member:
            return False
        unique = self._unique()
        if unique and old.broker_properties is new.broker_properties and _room(old.usage) and _room(new.usage):
            return False  # one vdev, Healthy in both (or Unhealthy in both: the same properties say the same health)
        return self._part(old, unique).states != self._part(new, unique).states

    def _member(self, record: InstanceRecord) -> bool:
        return (
            record.namespace == self.namespace and record.configuration == self.name and self.host.node in record.nodes
        )

    def _part(self, record: InstanceRecord, unique: bool) -> _Part:
        """The Instance's part of the list, kept while its usage, `unique` and its health stay the same."""
        sick = not device_healthy(record.broker_properties)
        kept = self._parts.get(record.name)
        if kept is None or kept.usage is not record.usage or kept.unique != unique or kept.sick != sick:
            kept = self._parts[record.name] = _Part(
                record.usage, unique, sick, slots.cl_states_of(record.usage, self.host.node, unique, sick)
            )
        return kept

    def _current_parts(self) -> list[_Part]:
        """`slots.cl_health` over the visible Instances by part, each Instance's part kept while its usage (a value
        the cache replaces only when the Instance's deviceUsage changes) and its health are the same: a claim
        recomputes one Instance's part, not the Configuration's."""
        visible = self.host.cache.visible(self.namespace, self.name)
        unique = self._unique()
        parts = {record.name: self._part(record, unique) for record in sorted(visible, key=lambda r: r.name)}
        self._parts = parts
        return list(parts.values())

    def prefer(self, available: list[str], must_include: list[str], size: int) -> list[str]:
        cfg = self.host.cache.configuration(self.namespace, self.name)
        preference = preference_of(cfg.metadata.annotations) if cfg is not None else "spread"
        instance_of = {d.id: d.instance for d in self.devices()}
        return slots.preferred_allocation(available, must_include, size, instance_of, preference)

    def _instance_of(self, ids: Sequence[str]) -> dict[str, str]:
        """The Instance behind each advertised vdev among `ids` (unknown ones are left out); O(len(ids))."""
        node = self.host.node
        unique = self._unique()
        out: dict[str, str] = {}
        for vdev in ids:
            for candidate in (vdev, vdev.rpartition("-")[0]):
                record = self.host.cache.instance(self.namespace, candidate)
                if record is None or record.configuration != self.name or node not in record.nodes:
                    continue
                if slots.cl_advertised(record.usage, vdev, node, unique):
                    out[vdev] = candidate
                    break
        return out

    async def claim_container(self, ids: Sequence[str]) -> tuple[list[tuple[InstanceRecord, str]], list[Undo]]:
        node = self.host.node
        instance_of = self._instance_of(ids)
        refusal = slots.check_unique_request(ids, instance_of, self._unique())
        if refusal is not None:
            self.notify(force=True)
            raise errors.Refused(refusal.reason)
        groups: dict[str, list[str]] = {}
        for vdev in ids:
            groups.setdefault(instance_of[vdev], []).append(vdev)
        granted: dict[str, tuple[InstanceRecord, str]] = {}
        undo: list[Undo] = []
        try:
            for instance, vdevs in groups.items():

                def decide(usage: slots.Usage, visible: bool, vdevs: list[str] = vdevs) -> slots.Claim | slots.Refusal:
                    return slots.claim_vdevs(usage, vdevs, node, visible)

                record, claim, done = await self._claim(instance, decide)
                undo.extend(done)
                for vdev, slot in zip(vdevs, claim.slots, strict=True):
                    granted[vdev] = (record, slot)
        except BaseException:  # a refusal, a cancellation or a bug: this container's claims go (see `Allocate`)
            await asyncio.shield(self._rollback(undo))
            raise
        return [granted[vdev] for vdev in ids], undo
