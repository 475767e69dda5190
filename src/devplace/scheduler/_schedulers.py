"""The scheduler's I/O shell: informers in, one event-driven decision queue, CAS writes out (DESIGN.md section 6).

Inputs: informers over Pods, Nodes, Instances, Configurations and ResourceClasses, each parsed once into the plain
values of the decision core (`pod_info`, `node_info`, `device_of`, `resolve_each`). Handlers only mark work:
- a pending pod of ours (no `spec.nodeName`; `spec.schedulerName` absent or ours) that is new or whose spec changed
  is queued; pods bound elsewhere or meant for another scheduler are left alone;
- a change that can make room (a Node added or changed, a Device changed: an Instance or its Configuration, a class
  spec, a bound pod gone or terminated) re-queues every pod found unschedulable, as kube-scheduler moves its
  unschedulable queue back to the active queue. Status-only writes (our own PodScheduled conditions, class status)
  re-queue nothing, so there are no write storms.

The worker takes what is queued (at most `BURST_LIMIT` pods, the first in `pending_order`) and decides it as one burst
over one snapshot (`Snapshot`, built once per burst and cached while nothing changed), in `pending_order`, each
decision assumed (`Assumed`) before the next.
Then the writes, concurrently:
- a binding is ONE cas on the Pod: `spec.nodeName`, the `resClass_<class>_<device>=<qty>` annotations and condition
  `PodScheduled=True`. The decision is checked against the pod as read: bound meanwhile -> dropped; spec changed ->
  queued again (re-decided on the next burst). A write that fails forgets the assumption (and is retried after
  `retry_after` seconds on the clock when the store failed, at once when the pod changed).
- an unschedulable pod gets `PodScheduled=False`, reason `Unschedulable`, the message of the decision (`0/12 nodes
  are available: 7 no device matches class nvidia.high.mem, 5 insufficient cpu.`), written only when it differs.
  A pod waiting only for a claim its template makes (the claim lifecycle creates it a moment later) is gated, as
  kube-scheduler's DRA PreEnqueue gates it: no write, no Event, no attempt counted; the claim's creation (the pod's
  `status.resourceClaimStatuses`) queues it again. Writing the condition cost one API write per such pod, a sixth of
  the writes of a pod with a template claim.

Accounting (why `Assumed` is forgotten as soon as the informer shows the pod bound): a node's requests are those of its
bound, non-terminated pods; a device's slots in use are, as in `classes.class_status`, the larger of the slots its
Instance shows held and the quantity bound pods' annotations put on it. So a binding is counted by the snapshot the
moment it is seen, whether the kubelet has claimed the slot yet or not, and a restarted scheduler counts every binding
made before it started: it never double-books.

Devices a node offers (issue #25, kube-scheduler's rule that a pod goes only where the node's allocatable has what it
needs): the kubelet serves a class request by Allocate on the chosen devices' Instance-level plugins, so a device
counts on a node only as far as the Node's `status.allocatable` (else `status.capacity`) has its resource
`<prefix>/<instance>` free: the advertised count (Healthy slots: free, or held by this node) less the slots pods bound
there hold through annotations and the pods bound there requesting the resource directly. A node that offers none of a
device (its plugin not registered yet, or registered with nothing Healthy) does not see it (`Device.waiting`); one that
offers fewer slots than the Instance has free is held to that (`Device.limits`). A pod that needs such a device stays
Pending with the reason (`insufficient devices for class C: want 1, 0 free, 1 not in the node's allocatable`) and is
decided again when the Node's allocatable changes. Without this a pod applied together with its Configuration was
bound before the kubelet had the plugin and failed for good (`OutOf<resource>` or `UnexpectedAdmissionError`).

ResourceClass status (`allocatable`, `requested`; devices visible from no known Node are not counted) is recomputed
after every change that can move it and written by cas only where it differs from the stored one.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from devplace import errors, metrics
from devplace.api import DRA, DRIVER, Verdicts, binding, dra_taken, instance_without_claims, resource_name, slot_index
from devplace.clocks import Clock
from devplace.queues import WorkQueue
from devplace.scheduler._allocations import Snapshot as ClaimSnapshot
from devplace.scheduler._assumptions import Assumed
from devplace.scheduler._claimchecks import ClaimCheck
from devplace.scheduler._claims import Pool, gather_pools
from devplace.scheduler._classes import (
    ClassStatus,
    ResolvedClass,
    Strategy,
    parse_binding_annotations,
    resolve_each,
)
from devplace.scheduler._decisions import (
    Binding,
    Config,
    NodeVerdict,
    Snapshot,
    Unschedulable,
    schedule_burst,
    schedule_one,
)
from devplace.scheduler._devices import Device, device_of
from devplace.scheduler._extended import Ask, asks, extended_classes
from devplace.scheduler._extended import claim_name as extended_claim_name
from devplace.scheduler._filters import NodeCheck
from devplace.scheduler._nodes import NodeInfo, Resources, node_info
from devplace.scheduler._podclaims import (
    DELETE_PROTECTION,
    PodClaims,
    allocation_of,
    claim_name,
    claim_refs,
    claimed_names,
    claims_for,
    with_consumer,
)
from devplace.scheduler._pods import PodInfo, pending_key, pod_info
from devplace.scheduler._selection import DeviceIndex
from devplace.store import Change, EventRecorder, Informer, ObjKey, Store, bind_pod, cas, rfc3339
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

POD_SCHEDULED = "PodScheduled"
_WRITES_AT_ONCE = 128
BURST_LIMIT = 512
"""Pods decided in one burst at most: about 0.1-0.2 s of event-loop time on the benchmark's clusters. More queued pods
wait for the next burst (in pending order), so informer events and other tasks run in between."""
_TERMINAL = frozenset({"Succeeded", "Failed"})
_NAMESPACED = frozenset({"Pod", "ResourceClaim", "Instance"})


@dataclass(frozen=True)
class PodState:
    """A Pod as the shell needs it: where it is bound, who schedules it, what it asks for and holds."""

    key: str
    wire: dict[str, Any] = field(hash=False, compare=False)
    spec: Any = field(hash=False)
    node: str = ""
    scheduler_name: str | None = None
    terminal: bool = False
    info: PodInfo | None = None
    invalid: str | None = None
    """Why the pod's spec cannot be scheduled (a bad quantity, selector or class request), when it cannot."""
    slots: Mapping[str, int] = field(default_factory=dict, hash=False)
    """Device -> slots, from the binding annotations (bound pods)."""
    claims: frozenset[str] = frozenset()
    """`namespace/name` of the ResourceClaims the pod names and that are known (`podclaims.claimed_names`)."""
    claim_statuses: Any = field(default=None, hash=False)
    """`status.resourceClaimStatuses`: where the claims made from templates are recorded (the pod waits for them)."""
    started: bool = False
    """Its kubelet has admitted it (phase Running or later)."""

    @property
    def counted(self) -> bool:
        """Bound and not terminated: its requests and device slots count against its node."""
        return bool(self.node) and not self.terminal

    @property
    def admitting(self) -> bool:
        """Bound, and its kubelet has not decided on it yet (the device plugin's slots for it are not chosen)."""
        return self.counted and not self.started


def pod_state(obj: dict[str, Any], previous: PodState | None) -> PodState:
    meta = obj.get("metadata") or {}
    key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise errors.Invalid.field("spec", "must be a mapping")
    info: PodInfo | None = None
    invalid: str | None = None
    if previous is not None and previous.info is not None and _same_asks(previous.spec, spec):
        info = previous.info  # spec unchanged: its parse still holds
    else:
        try:
            info = pod_info(obj)
        except errors.Invalid as e:
            invalid = e.message
    slots: dict[str, int] = {}
    try:
        for (_, device), qty in parse_binding_annotations(meta.get("annotations") or {}).items():
            slots[device] = slots.get(device, 0) + qty
    except errors.Invalid:
        slots = {}  # another party's malformed annotation: the kubelet refuses that pod, the count ignores it
    phase = (obj.get("status") or {}).get("phase")
    has_claims = bool(spec.get("resourceClaims"))
    return PodState(
        key=key,
        wire=obj,
        spec=spec,
        node=str(spec.get("nodeName") or ""),
        scheduler_name=spec.get("schedulerName"),
        terminal=phase in _TERMINAL,
        started=phase not in (None, "", "Pending"),
        info=info,
        invalid=invalid,
        slots=slots,
        claims=frozenset(claimed_names([obj])) if has_claims else frozenset(),
        claim_statuses=(obj.get("status") or {}).get("resourceClaimStatuses") if has_claims else None,
    )


def _same_asks(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """The same spec but for `nodeName` (a binding changes only that): the parse of the first still holds."""
    if old == new:
        return True
    if old.get("nodeName") == new.get("nodeName"):
        return False
    return {**old, "nodeName": None} == {**new, "nodeName": None}


@dataclass(frozen=True)
class _ClassState:
    spec: Any = field(hash=False)
    status: Any = field(hash=False)


def _class_state(obj: dict[str, Any], previous: _ClassState | None) -> _ClassState:
    return _ClassState(obj.get("spec"), obj.get("status"))


def _split_key(key: str) -> ObjKey:
    namespace, _, name = key.partition("/")
    return namespace, name


def _scheduled_condition(status: str, reason: str | None, message: str | None) -> dict[str, Any]:
    condition: dict[str, Any] = {"type": POD_SCHEDULED, "status": status}
    if reason is not None:
        condition["reason"] = reason
    if message is not None:
        condition["message"] = message
    return condition


def _with_condition(pod: Mapping[str, Any], want: dict[str, Any], now: str) -> dict[str, Any] | None:
    """The pod's `status` with condition `want` set (None when it already reads so); the transition time moves only
    when the condition's status does."""
    status = dict(pod.get("status") or {})
    conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    for i, current in enumerate(conditions):
        if current.get("type") != want["type"]:
            continue
        same = {k: current.get(k) for k in ("status", "reason", "message")} == {
            k: want.get(k) for k in ("status", "reason", "message")
        }
        if same:
            return None
        when = current.get("lastTransitionTime") if current.get("status") == want["status"] else now
        conditions[i] = {**want, "lastTransitionTime": when or now}
        break
    else:
        conditions.append({**want, "lastTransitionTime": now})
    status["conditions"] = conditions
    return status


class Scheduler:
    """Binds pending pods to nodes and devices; keeps ResourceClass status current (module docstring)."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        name: str = "devplace-scheduler",
        strategy: Strategy = "firstFit",
        resource_prefix: str | None = None,
        config: Config | None = None,
        retry_after: float = 1.0,
        contention_clock: Clock | None = None,
        advertised_only: bool = True,
        events: EventRecorder | None = None,
        dra: bool = True,
    ) -> None:
        """`contention_clock` paces CAS retries after a lost race and loop restarts (default: `clock`); a simulation
        under a fake `clock` passes a real one, since nobody advances fake time for a retry.

        `advertised_only` (the default; see "Devices a node offers" in the module docstring): a device serves a pod
        on a node only as far as the Node advertises its Instance-level resource. False counts every device on every
        node its Instance lists: only for stores whose Nodes no kubelet writes (what-if tools, tests of other
        rules); on a cluster the kubelet would fail such a pod.

        `dra`: allocate ResourceClaims (watches ResourceClaims, ResourceSlices and DeviceClasses); False for a store
        that does not serve `resource.k8s.io/v1` (a pod with claims then waits, saying so)."""
        self.store = store
        self.clock = clock
        self.contention_clock = contention_clock or clock
        self.advertised_only = advertised_only
        self.events = events
        """Events on Pods for users (`kubectl describe pod`): `Scheduled`, `FailedScheduling` (never blocks)."""
        self.name = name
        self.resource_prefix = resource_prefix
        """An override of the extended-resource prefix of Instance resources (`<prefix>/<instance>`, which nodes
        advertise and the resources filter checks like any other extended resource); None: the Configuration's API
        group (`api.devices.resource_name`), as the agent names them."""
        self.config = replace(config or Config(), strategy=strategy)
        self.retry_after = retry_after
        self.supervisor = Supervisor(name, clock=self.contention_clock)
        self.assumed = Assumed()
        self.writes = 0
        """Store writes made (bindings, conditions, class status), for benches and tests."""
        self.bursts = 0
        """Bursts decided (each over one snapshot), for benches and tests."""
        self.pods: Informer[PodState] = Informer(
            store,
            "Pod",
            pod_state,
            indexes={"node": lambda p: [p.node] if p.counted else [], "claims": lambda p: sorted(p.claims)},
        )
        self.nodes: Informer[NodeInfo] = Informer(store, "Node", lambda obj, _: node_info(obj))
        self.instances: Informer[dict[str, Any]] = Informer(
            store,
            "Instance",
            indexes={"configuration": lambda i: [_configuration_of(i)], "claims": _dra_holders},
        )
        self.configurations: Informer[dict[str, Any]] = Informer(store, "Configuration")
        self.classes: Informer[_ClassState] = Informer(store, "ResourceClass", _class_state)
        self._informers: list[Informer[Any]] = [
            self.pods,
            self.nodes,
            self.instances,
            self.configurations,
            self.classes,
        ]
        self.dra = dra
        self.claims: Informer[dict[str, Any]] = Informer(store, "ResourceClaim")
        self.slices: Informer[dict[str, Any]] = Informer(store, "ResourceSlice")
        self.device_classes: Informer[dict[str, Any]] = Informer(store, "DeviceClass")
        if dra:
            self._informers += [self.claims, self.slices, self.device_classes]
        self._claim_snapshot: ClaimSnapshot | None = None
        """The DRA view (slices, DeviceClasses, allocated claims and the allocations this scheduler assumed): kept
        across bursts while nothing it reads moved but by this scheduler's own decisions coming back through the
        claims informer, so its memo of verdicts (`claimchecks`) lasts; rebuilt after any other change of them."""
        self._instance_devices: dict[str, list[tuple[str, str, int | None, bool]]] | None = None
        self._extended_map: dict[str, str] | None = None
        """Extended resource -> the DeviceClass serving it (`extended.extended_classes`; rebuilt with the classes)."""
        self._devplace_devices: dict[tuple[str, str], Mapping[str, Any]] | None = None
        """(pool, device) -> attributes of devplace's own slice devices (where a result's Instance slot is)."""
        self._claim_pools: list[Pool] | None = None
        """The slices gathered into pools (parsed once; rebuilt when a slice or a DeviceClass changes)."""
        self._claims_assumed: dict[str, dict[str, Any]] = {}
        """Claim -> the allocation decided for it and not yet seen by the claims informer."""
        self._claim_checks: dict[str, ClaimCheck] = {}
        self._dra_taken: dict[str, dict[str, int]] = {}
        """Pod -> the Instance slots its assumed claim allocations take (in `assumed` too, for the device path)."""
        self._verdicts = Verdicts()
        self.queue: WorkQueue[str] = WorkQueue(clock, name="devplace-scheduler")
        """Pods (by key) to decide, and their retries after store failures (timers on the clock)."""
        self._unschedulable: set[str] = set()
        metrics.PENDING_PODS.add(
            self,
            lambda s: {("active",): float(len(s.queue)), ("unschedulable",): float(len(s._unschedulable))},
        )
        self._ready = False
        self._start = 0
        self._status_dirty = False
        self._status_wake = asyncio.Event()
        self._status_working = False
        self._unsubscribe: list[Callable[[], None]] = []
        # snapshot caches, invalidated by the handlers
        self._node_infos: dict[str, NodeInfo] = {}
        self._devices: dict[ObjKey, Device | None] = {}
        self._resources: dict[ObjKey, str] = {}
        """Instance -> its Instance-level resource name (dropped with `_devices`' entry)."""
        self._matches: dict[str, frozenset[str]] = {}
        """Device name -> the classes matching it (cleared per device when it changes, entirely when classes do)."""
        self._quiet = asyncio.Event()
        """Set while the decision loop waits for work: class status is computed then, not in a binding storm."""
        self._resolved: tuple[dict[str, ResolvedClass], dict[str, errors.Invalid]] | None = None
        self._cluster: Snapshot | None = None
        self._index: DeviceIndex | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._unsubscribe = [
            self.pods.subscribe(self._on_pod),
            self.nodes.subscribe(self._on_node),
            self.instances.subscribe(self._on_instance),
            self.configurations.subscribe(self._on_configuration),
            self.classes.subscribe(self._on_class),
        ]
        if self.dra:
            self._unsubscribe += [
                self.claims.subscribe(self._on_claim),
                self.slices.subscribe(self._on_dra_input),
                self.device_classes.subscribe(self._on_dra_input),
            ]
        for informer in self._informers:
            self.supervisor.loop(f"informer:{informer.name}", informer.run)
        self.supervisor.loop("schedule", self._work)
        self.supervisor.loop("class-status", self._status_loop)
        if self.events is not None:
            self.supervisor.loop("events", self.events.run)

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        await self.supervisor.stop()

    def is_idle(self) -> bool:
        """Synced, no pod queued for a decision, no decision or write in flight, class status written.

        Retries waiting for their time (after a store failure) do not count: they are timers, not work."""
        return (
            self._ready
            and self.queue.idle
            and not self._status_dirty
            and not self._status_working
            and self.supervisor.idle
            and (self.events is None or not self.events.pending)
        )

    # -- reads ---------------------------------------------------------------------------------------------------

    def ours(self, pod: PodState) -> bool:
        return pod.scheduler_name is None or pod.scheduler_name == self.name

    def snapshot(self) -> Snapshot:
        """The cluster as the informers show it now (nodes with their bound pods, devices with their bound slots,
        classes); cached until something it reads changes."""
        if self._cluster is None:
            nodes = tuple(self._node(name) for _, name in sorted(self.nodes.keys()))
            resolved = self._classes()[0]
            if self._index is None:
                devices = self._visible_devices({n.name for n in nodes})
                self._index = DeviceIndex(devices, resolved, self._matches)
                for name, matched in self._index.classes_of.items():
                    self._matches[name] = matched
            self._cluster = Snapshot(nodes, self._index, resolved)
        return self._cluster

    def explain(self, pod_key: str) -> list[NodeVerdict]:
        """Why pod `namespace/name` can (reason None) or cannot go to each node now, every node in name order.

        Pure: evaluates the pod against the current snapshot and assumptions, every node, and changes nothing.
        `errors.NotFound` for an unknown pod; a pod that cannot be evaluated at all (an invalid spec, a class that
        does not exist) gets that reason on every node."""
        state = self.pods.get(*_split_key(pod_key))
        if state is None:
            raise errors.NotFound(f"pod {pod_key} not found")
        cluster = self.snapshot()
        blocker = self._blocker(state) or (None if state.counted else self._claims_blocker(state))
        if blocker is not None:
            return [NodeVerdict(n.name, blocker) for n in cluster.nodes]
        assert state.info is not None
        if state.counted:  # explain a bound pod as if it were pending: take its own share off its node first
            cluster = _without(cluster, state)
        config = replace(self.config, percentage_of_nodes_to_score=100)
        extra = None if state.counted else self._claim_check(state.info)
        self._claim_checks.clear()
        info = state.info if state.counted else self._decided_info(state)
        # reads `assumed` and the DRA snapshot, changes nothing
        decision = schedule_one(info, cluster, self.assumed, config, extra=extra)
        refused = {v.node: v.reason for v in decision.verdicts}
        if isinstance(decision, Unschedulable) and not decision.verdicts:
            return [NodeVerdict(n.name, decision.message) for n in cluster.nodes]
        return [NodeVerdict(n.name, refused.get(n.name)) for n in cluster.nodes]

    # -- snapshot pieces -----------------------------------------------------------------------------------------

    def _node(self, name: str) -> NodeInfo:
        cached = self._node_infos.get(name)
        if cached is not None:
            return cached
        base = self.nodes.get("", name)
        assert base is not None
        requested = Resources()
        for pod in self.pods.by("node", name):
            if pod.info is not None:
                requested = requested + pod.info.requests
        info = replace(base, requested=requested)
        offered = self._dra_capped(name, info.allocatable.extended)
        if offered is not None:
            info = replace(info, allocatable=replace(info.allocatable, extended=offered))
        self._node_infos[name] = info
        return info

    def _dra_capped(self, node: str, offered: Mapping[str, int]) -> dict[str, int] | None:
        """`offered` with each Instance-level resource of a device DRA also serves held to what its plugin on `node`
        can offer by the Instance's slots now (free, or held by the node's own plugin): the node's allocatable lags
        behind a slot a DRA claim has just taken until its kubelet hears the plugin again, and a pod admitted on it
        would fail `OutOf<resource>`. None when nothing is capped."""
        if not self._devplace_slices():
            return None
        out: dict[str, int] | None = None
        known = self.instances.keys()
        namespaces = {n: ns for ns, n in known}
        for resource, instance in self._dra_resources().items():
            if resource not in offered or instance not in namespaces:
                continue
            obj = self.instances.get(namespaces[instance], instance)
            usage = ((obj or {}).get("spec") or {}).get("deviceUsage") or {}
            if not usage:
                continue  # not written yet by the node's agent: its allocatable is all there is to go by
            can = sum(1 for s, h in usage.items() if h in ("", node) and slot_index(instance, s) is not None)
            if can < offered[resource]:
                out = dict(offered) if out is None else out
                out[resource] = can
        return out

    def _device(self, key: ObjKey) -> Device | None:
        if key in self._devices:
            return self._devices[key]
        instance = self.instances.get(*key)
        device: Device | None = None
        if instance is not None:
            configuration = self.configurations.get(*_configuration_of(instance))
            try:
                device = device_of(instance, configuration)
            except errors.Invalid as e:
                log.warning("%s: ignoring Instance %s/%s: %s", self.name, key[0], key[1], e.message)
        self._devices[key] = device
        return device

    def _resource(self, key: ObjKey, instance: str) -> str:
        """The Instance-level resource of an Instance: named after its Configuration's group (its own when the
        Configuration is not known), or the override."""
        cached = self._resources.get(key)
        if cached is not None:
            return cached
        obj = self.instances.get(*key)
        configuration = self.configurations.get(*_configuration_of(obj)) if obj is not None else None
        api_version = str((configuration or obj or {}).get("apiVersion") or "")
        name = self._resources[key] = resource_name(api_version, instance, self.resource_prefix)
        return name

    def _visible_devices(self, nodes: set[str]) -> list[Device]:
        """Devices some known node sees, their free slots reduced by what bound pods' annotations put on them, and
        (`advertised_only`) what each node offers of them (module docstring)."""
        annotated: dict[str, int] = {}
        here: dict[tuple[str, str], int] = {}
        for pod in self.pods.values():
            if pod.counted:
                for name, n in pod.slots.items():
                    annotated[name] = annotated.get(name, 0) + n
                    here[pod.node, name] = here.get((pod.node, name), 0) + n
        out: list[Device] = []
        for key in self.instances.keys():  # noqa: SIM118  # a snapshot of the keys
            device = self._device(key)
            if device is None or device.nodes.isdisjoint(nodes):
                continue
            bound = annotated.get(device.name, 0)
            if bound > device.held:
                device = replace(device, free_slots=device.free_slots[: max(0, device.capacity - bound)])
            if self.advertised_only:
                device = self._offered(key, device, nodes, here)
            out.append(device)
        return out

    def _offered(self, key: ObjKey, device: Device, nodes: set[str], here: Mapping[tuple[str, str], int]) -> Device:
        """`device` seen from the known nodes that offer it, held to what each offers (module docstring). A device
        with no free slot is left as it is: no node can offer it, and its reason is that none is free."""
        free = device.free
        if free == 0:
            return device
        resource = self._resource(key, device.name)
        serving: list[str] = []
        waiting: list[str] = []
        limits: dict[str, int] = {}
        for name in device.nodes:
            if name not in nodes:
                continue
            node = self._node(name)
            advertised = node.allocatable.extended.get(resource)
            offered = 0
            if advertised is not None:
                offered = advertised - here.get((name, device.name), 0)
                if node.requested.extended:
                    offered -= node.requested.extended.get(resource, 0)
            if offered <= 0:
                waiting.append(name)
                continue
            serving.append(name)
            if offered < free:
                limits[name] = offered
        if not waiting and not limits and len(serving) == len(device.nodes):
            return device
        return replace(device, nodes=frozenset(serving), waiting=frozenset(waiting), limits=limits)

    def _classes(self) -> tuple[dict[str, ResolvedClass], dict[str, errors.Invalid]]:
        if self._resolved is None:
            specs = {name: state.spec for (_, name), state in self.classes.items()}
            self._resolved = resolve_each(specs)
        return self._resolved

    def _blocker(self, state: PodState) -> str | None:
        """A reason the pod cannot be placed on any node, known before any node is evaluated."""
        if state.info is None:
            return f"invalid pod: {state.invalid}"
        refused = self._classes()[1]
        for cls in state.info.classes:
            if cls in refused:
                return f'resource class "{cls}" is invalid: {refused[cls].message}'
        return None

    # -- events -> work ------------------------------------------------------------------------------------------

    def _queue(self, key: str) -> None:
        self.queue.mark(key)

    def _requeue_unschedulable(self) -> None:
        for key in sorted(self._unschedulable):
            self.queue.mark(key)
        self._unschedulable.clear()

    def _devices_changed(self) -> None:
        self._index = None
        self._cluster = None
        self._mark_status()

    def _mark_status(self) -> None:
        self._status_dirty = True
        self._status_wake.set()

    def _on_pod(self, change: Change[PodState]) -> None:
        old, new = change.old, change.new
        for state in (old, new):
            if state is not None and state.counted:
                self._node_infos.pop(state.node, None)
                self._cluster = None
        held_before = old.slots if old is not None and old.counted else {}
        held_after = new.slots if new is not None and new.counted else {}
        if held_before != held_after or (self.advertised_only and _extended(old) != _extended(new)):
            self._devices_changed()  # slots held, or (a broker's direct request) what its node offers, moved
        was_admitting = old is not None and old.admitting
        now_admitting = new is not None and new.admitting
        if held_before != held_after and self._devplace_slices():
            self._claim_snapshot = None  # the device path's holdings, which DRA counts too, moved
        elif was_admitting != now_admitting and self._asks_dra_device(new if now_admitting else old):
            self._claim_snapshot = None  # an admission on a device DRA also serves began or ended
            if was_admitting:
                self._requeue_unschedulable()  # DRA may take the device's free slots again
        if old is not None and old.counted and (new is None or not new.counted or new.node != old.node):
            self._requeue_unschedulable()  # a bound pod went: room on its node and its devices
        key = new.key if new is not None else old.key if old is not None else ""
        if new is None or new.node or not self.ours(new):
            self.queue.forget(key)  # its retry too
            self._unschedulable.discard(key)
            self._forget_assumed(key)  # gone, or bound: the snapshot counts it from now on
            return
        if (
            old is None
            or old.node
            or old.spec != new.spec
            or not self.ours(old)
            or old.claim_statuses != new.claim_statuses
        ):
            self._unschedulable.discard(key)
            self._queue(key)

    def _on_node(self, change: Change[NodeInfo]) -> None:
        if change.old is not None and change.new is not None and change.old == change.new:
            return  # a heartbeat or a status field the scheduler does not read
        self._node_infos.pop(change.key[1], None)
        if change.old is None or change.new is None:
            self._devices_changed()  # the set of visible devices depends on the known nodes
        elif self.advertised_only and change.old.allocatable.extended != change.new.allocatable.extended:
            self._devices_changed()  # what the node offers of its devices changed (a plugin, a health update)
        self._cluster = None
        self._requeue_unschedulable()

    def _on_instance(self, change: Change[dict[str, Any]]) -> None:
        usage_before = ((change.old or {}).get("spec") or {}).get("deviceUsage")
        usage_after = ((change.new or {}).get("spec") or {}).get("deviceUsage")
        if usage_before != usage_after and change.key[1] in self._devplace_slices():
            self._claim_snapshot = None  # slots of a device DRA also serves moved
            self._node_infos.clear()  # and what nodes can offer of it (`_dra_capped`)
            self._cluster = None
        before = self._devices.pop(change.key, None)
        self._resources.pop(change.key, None)
        after = self._device(change.key) if change.new is not None else None
        if before is not None and after == before:
            return  # nothing the scheduler reads changed
        for device in (before, after):
            if device is not None and (after is None or device.attributes != after.attributes):
                self._matches.pop(device.name, None)
        self._devices_changed()
        self._requeue_unschedulable()

    def _on_configuration(self, change: Change[dict[str, Any]]) -> None:
        if change.old is not None and change.new is not None and change.old.get("spec") == change.new.get("spec"):
            return
        for key in self.instances.keys_by("configuration", change.key):
            self._devices.pop(key, None)
            self._resources.pop(key, None)
            self._matches.pop(key[1], None)
        self._devices_changed()
        self._requeue_unschedulable()

    def _on_class(self, change: Change[_ClassState]) -> None:
        if change.old is not None and change.new is not None and change.old.spec == change.new.spec:
            return  # a status write (ours): nothing to decide again
        self._resolved = None
        self._matches.clear()
        self._devices_changed()
        self._requeue_unschedulable()

    def _on_claim(self, change: Change[dict[str, Any]]) -> None:
        key = f"{change.key[0]}/{change.key[1]}"
        old = allocation_of(change.old) if change.old is not None else None
        new = allocation_of(change.new) if change.new is not None else None
        assumed = self._claims_assumed.get(key)
        if old != new and not (old is None and new is not None and new == assumed):
            self._claim_snapshot = None  # devices held moved (beyond what this scheduler assumed already)
        if new is not None or change.new is None:
            self._claims_assumed.pop(key, None)  # the informer shows what was decided (or the claim is gone)
        for state in self.pods.by("claims", key):
            if not state.node and self.ours(state) and state.key not in self.assumed:  # not one being bound now
                self._unschedulable.discard(state.key)
                self._queue(state.key)
        if old is not None and new is None:
            self._requeue_unschedulable()  # devices freed

    def _on_dra_input(self, change: Change[dict[str, Any]]) -> None:
        if change.old is not None and change.new is not None and change.old.get("spec") == change.new.get("spec"):
            return
        self._claim_snapshot = None
        self._claim_pools = None
        self._devplace_devices = None
        self._instance_devices = None
        self._extended_map = None
        self._requeue_unschedulable()

    # -- DRA ---------------------------------------------------------------------------------------------------------

    def _claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A claim as the informer shows it, with the allocation decided for it and not yet seen laid over."""
        claim = self.claims.get(namespace, name)
        assumed = self._claims_assumed.get(f"{namespace}/{name}")
        if claim is None or assumed is None or allocation_of(claim) is not None:
            return claim
        return {**claim, "status": {**(claim.get("status") or {}), "allocation": assumed}}

    def claim_snapshot(self) -> ClaimSnapshot:
        """The DRA view for this burst: slices, DeviceClasses, allocated claims (assumed allocations included)."""
        if self._claim_snapshot is None:
            allocated: list[dict[str, Any]] = [c for c in self.claims.values() if allocation_of(c) is not None]
            for key, allocation in self._claims_assumed.items():
                current = self.claims.get(*_split_key(key))
                if current is None or allocation_of(current) is None:
                    allocated.append({"status": {"allocation": allocation}})
            allocated.extend(self._device_path_holdings())
            if self._claim_pools is None:
                self._claim_pools = gather_pools(self.slices.values())
            self._claim_snapshot = ClaimSnapshot(
                (), self.device_classes.values(), allocated, verdicts=self._verdicts, pools=self._claim_pools
            )
        return self._claim_snapshot

    def _devplace_slices(self) -> dict[str, list[tuple[str, str, int | None, bool]]]:
        """Instance -> its devices in devplace's slices: (pool, device, slot or None, shared) (cached with the
        slices)."""
        found = self._instance_devices
        if found is None:
            found = self._instance_devices = {}
            for piece in self.slices.values():
                spec = piece.get("spec") or {}
                if spec.get("driver") != DRIVER:
                    continue
                pool = str((spec.get("pool") or {}).get("name") or "")
                for device in spec.get("devices") or ():
                    attrs = device.get("attributes") or {}
                    instance = _attribute(attrs, "instance")
                    if isinstance(instance, str) and instance:
                        slot = _attribute(attrs, "slot")
                        entry = (
                            pool,
                            str(device.get("name") or ""),
                            slot if isinstance(slot, int) else None,
                            bool(device.get("allowMultipleAllocations")),
                        )
                        found.setdefault(instance, []).append(entry)
        return found

    def _device_path_holdings(self) -> list[dict[str, Any]]:
        """What the device path holds of devplace's DRA devices, as allocations DRA must not give again (one truth):
        per Instance, the slots its Instance-level and Configuration-level holders have, or (when more) the slots
        bound pods' annotations and this scheduler's device-path decisions promise; on the device of a held slot
        (N-devices form), the Instance's one device (capacity 1), or a share of `slots` (consumable form)."""
        by_instance = self._devplace_slices()
        if not by_instance:
            return []
        promised: dict[str, int] = {}
        admitting: set[str] = set()
        resources = self._dra_resources()
        for pod in self.pods.values():
            if pod.counted:
                asked = set(pod.slots)
                for device, n in pod.slots.items():
                    promised[device] = promised.get(device, 0) + n
                if pod.info is not None:  # a pod asking the Instance's resource itself (a broker, a user's pod)
                    for name, n in pod.info.requests.extended.items():
                        if name in resources:
                            promised[resources[name]] = promised.get(resources[name], 0) + n
                            asked.add(resources[name])
                if pod.admitting:
                    admitting |= asked
        for record in self.assumed.pods():  # decided, not yet seen bound: what they ask of the Instances directly
            if record.node_counted:
                for name, n in record.requests.extended.items():
                    if name in resources:
                        promised[resources[name]] = promised.get(resources[name], 0) + n
        dra_assumed: dict[str, int] = {}
        for taken in self._dra_taken.values():
            for device, n in taken.items():
                dra_assumed[device] = dra_assumed.get(device, 0) + n
        for device, n in self.assumed.taken.items():
            classic = n - dra_assumed.get(device, 0)
            if classic > 0:
                promised[device] = promised.get(device, 0) + classic
        results: list[dict[str, Any]] = []
        for (_, name), instance in self.instances.items():
            devices = by_instance.get(name)
            if not devices:
                continue
            usage = (instance.get("spec") or {}).get("deviceUsage") or {}
            held_slots = sorted(
                s
                for s, h in usage.items()
                if isinstance(h, str) and h and not h.startswith("D:") and slot_index(name, s) is not None
            )
            count = max(len(held_slots), promised.get(name, 0))
            if name in admitting:
                # a device-path pod of this device is being admitted: its kubelet picks its slot from a list that
                # may still show a free one DRA would take, so DRA takes none of this device's slots until it is
                count = max(count, sum(1 for s in usage if slot_index(name, s) is not None))
            if count <= 0:
                continue
            pool, device, _, shared = devices[0]
            if shared:
                results.append(
                    {
                        "request": "device-plugins",
                        "driver": DRIVER,
                        "pool": pool,
                        "device": device,
                        "shareID": f"device-plugins-{name}",
                        "consumedCapacity": {"slots": str(count)},
                    }
                )
                continue
            by_slot = {slot: (p, d) for p, d, slot, _ in devices if slot is not None}
            if not by_slot:
                results.append({"request": "device-plugins", "driver": DRIVER, "pool": pool, "device": device})
                continue
            indexes = [i for s in held_slots if (i := slot_index(name, s)) is not None]
            free_order = [i for i in sorted(by_slot) if i not in indexes]
            for i in (indexes + free_order)[:count]:
                if i in by_slot:
                    p, d = by_slot[i]
                    results.append({"request": "device-plugins", "driver": DRIVER, "pool": p, "device": d})
        if not results:
            return []
        return [{"status": {"allocation": {"devices": {"results": results}}}}]

    def _claims_blocker(self, state: PodState) -> str | None:
        """Why a pod with ResourceClaims cannot be decided now (module docstring of `podclaims`), or None."""
        if not claim_refs(state.wire):
            return None
        if not self.dra:
            return "the pod has ResourceClaims and this scheduler runs without DRA (--no-dra)"
        resolved = claims_for(state.wire, self._claim)
        if isinstance(resolved, str):
            return resolved
        try:
            ClaimCheck(self.claim_snapshot(), resolved, first_fit=True)
        except errors.Invalid as e:
            return f"invalid resource claim: {e.message}"
        return None

    def _extended_asks(self, state: PodState) -> tuple[Ask, ...]:
        """The pod's asks for extended resources a DeviceClass serves (`extended`), unless the claim made for them
        exists already (then it is one of the pod's claims, `_pod_claims`)."""
        if not self.dra:
            return ()
        if self._extended_map is None:
            self._extended_map = extended_classes(self.device_classes.values())
        if not self._extended_map:
            return ()
        found = asks(state.wire, self._extended_map)
        if found and self.claims.get(_split_key(state.key)[0], extended_claim_name(state.wire)) is not None:
            return ()
        return found

    def _pod_claims(self, state: PodState) -> PodClaims | str:
        """The pod's claims (`podclaims.claims_for`), the claim made for its extended resources included."""
        resolved = claims_for(state.wire, self._claim) if claim_refs(state.wire) else PodClaims(())
        if isinstance(resolved, str):
            return resolved
        namespace = _split_key(state.key)[0]
        made = self._claim(namespace, extended_claim_name(state.wire)) if self.dra else None
        if made is not None:
            resolved = PodClaims((*resolved.claims, (f"{namespace}/{made['metadata']['name']}", made)))
        return resolved

    def _decided_info(self, state: PodState) -> PodInfo:
        """The pod as the decision core sees it: extended resources a DeviceClass serves are the claims filter's
        (`ClaimCheck`: the device plugin's free amount where a node offers them, DRA elsewhere), not the resources
        filter's."""
        assert state.info is not None
        wanted = self._extended_asks(state)
        if not wanted:
            return state.info
        names = {a.resource for a in wanted}
        extended = {k: v for k, v in state.info.requests.extended.items() if k not in names}
        return replace(state.info, requests=replace(state.info.requests, extended=extended))

    def _claim_check(self, info: PodInfo) -> NodeCheck | None:
        """The DRA filter of one pod, made just before its decision (so it sees the burst's earlier allocations)."""
        state = self.pods.get(info.namespace, info.name)
        if state is None:
            return None
        wanted = self._extended_asks(state)
        namespace = _split_key(state.key)[0]
        made = self.claims.get(namespace, extended_claim_name(state.wire)) if self.dra else None
        if not claim_refs(state.wire) and not wanted and made is None:
            return None
        resolved = self._pod_claims(state)
        if isinstance(resolved, str):
            reason = resolved
            return lambda node: reason
        if not resolved.claims and not wanted:
            return None
        strategy = self.config.strategy
        check = ClaimCheck(
            self.claim_snapshot(),
            resolved,
            first_fit=strategy == "firstFit",
            strategy=strategy,
            pod=state.wire,
            extended=wanted,
        )
        self._claim_checks[info.key] = check
        return check

    def _asks_dra_device(self, state: PodState | None) -> bool:
        """Whether a pod asks the device path for a device DRA also serves (slots of it, or its resource)."""
        asked = state.info.requests.extended if state is not None and state.info is not None else {}
        if state is None or not (state.slots or asked) or not self._devplace_slices():
            return False  # most often: a pod with claims only, or asking no extended resource
        if set(state.slots) & set(self._devplace_slices()):
            return True
        return any(name in asked for name in self._dra_resources())

    def _dra_resources(self) -> dict[str, str]:
        """The Instance-level resource of each Instance DRA also serves -> the Instance."""
        by_instance = self._devplace_slices()
        keys = self.instances.keys()
        return {self._resource(key, key[1]): key[1] for key in keys if key[1] in by_instance}

    def _reserve(self, decision: Binding) -> Binding:
        """After a decision is assumed (`schedule_burst`): a pod's claims reserved in the DRA snapshot and the slots
        they take assumed for the device path too; a device-path decision on a device DRA also serves makes the DRA
        snapshot be made again (it counts `assumed`), so the next pod of the burst sees it either way."""
        check = self._claim_checks.pop(decision.pod, None)
        if check is None:
            if self._devplace_slices():
                state = self.pods.get(*_split_key(decision.pod))
                asked = set(state.info.requests.extended) if state is not None and state.info is not None else set()
                if set(decision.slots()) & set(self._devplace_slices()) or asked & set(self._dra_resources()):
                    self._claim_snapshot = None
            return decision
        decision = check.reserve(decision)
        taken: dict[str, int] = {}
        for key, allocation in decision.claims:
            if allocation is not None:
                self._claims_assumed[key] = dict(allocation)
                for _, instance, _, count in self._slot_wants(allocation):
                    taken[instance] = taken.get(instance, 0) + count
        self._dra_taken[decision.pod] = taken
        decision = replace(decision, claim_slots=taken)
        state = self.pods.get(*_split_key(decision.pod))
        if taken and state is not None and state.info is not None:
            # the device path sees the slots taken twice over until the Instance shows them: as device slots (class
            # requests) and as the Instance-level resources they would have been (direct requests on the node)
            info = self._decided_info(state)
            by_resource = {instance: resource for resource, instance in self._dra_resources().items()}
            extra = {by_resource[i]: n for i, n in taken.items() if i in by_resource}
            if extra:
                amounts = dict(info.requests.extended)
                for resource, n in extra.items():
                    amounts[resource] = amounts.get(resource, 0) + n
                info = replace(info, requests=replace(info.requests, extended=amounts))
            self.assumed.assume(info, decision.node, decision.slots(), self.snapshot().devices)
        return decision

    def _forget_assumed(self, key: str) -> None:
        self.assumed.forget(key)
        self._dra_taken.pop(key, None)

    def _forget_claims(self, decision: Binding) -> None:
        for key, allocation in decision.claims:
            if allocation is not None and self._claims_assumed.get(key) == allocation:
                del self._claims_assumed[key]
                self._claim_snapshot = None

    # -- the decision loop -----------------------------------------------------------------------------------------

    async def _work(self) -> None:
        await asyncio.gather(*(informer.wait_synced() for informer in self._informers))
        for state in self.pods.values():
            if not state.node and self.ours(state):
                self.queue.mark(state.key)
        self._mark_status()
        self._ready = True
        while True:
            if self.queue.idle:
                self._quiet.set()
            keys = await self.queue.get_batch(BURST_LIMIT, order=self._pending_order)
            self._quiet.clear()
            try:
                await self._burst(keys)
            finally:
                for key in keys:
                    self.queue.done(key)
            await asyncio.sleep(0)  # let watch events in between bursts

    def decide(self, keys: list[str]) -> list[tuple[PodState, Binding | Unschedulable]]:
        """One burst: decide the pods `keys` names (those still pending and ours) over one snapshot, each decision
        assumed before the next. Changes only `assumed` (and the rotation start)."""
        states = [s for k in keys if (s := self.pods.get(*_split_key(k))) is not None and not s.node and self.ours(s)]
        out: list[tuple[PodState, Binding | Unschedulable]] = []
        placeable: dict[str, PodState] = {}
        for state in states:
            spec_blocker = self._blocker(state)
            blocker = spec_blocker or self._claims_blocker(state)
            if blocker is not None:
                gated = spec_blocker is None and _awaits_template_claim(state.wire)
                out.append((state, Unschedulable(state.key, blocker, gated=gated)))
            else:
                assert state.info is not None
                placeable[state.key] = state
        if placeable:
            self.bursts += 1
            cluster = self.snapshot()
            infos = [self._decided_info(s) for s in placeable.values() if s.info is not None]
            decisions = schedule_burst(
                infos, cluster, self.assumed, self.config, self._start, self._claim_check, self._reserve
            )
            self._claim_checks.clear()
            for decision in decisions:
                self._start = decision.next_start
                out.append((placeable[decision.pod], decision))
        return out

    def _pending_order(self, key: str) -> tuple[int, tuple[int, datetime, str, str] | str]:
        """Which queued pods make the next burst when more than `BURST_LIMIT` are queued: the first in pending order
        (pods that cannot be decided at all first: they cost nothing), so one burst never holds the loop for long."""
        state = self.pods.get(*_split_key(key))
        info = None if state is None else state.info
        return (0, key) if info is None else (1, pending_key(info))

    async def _burst(self, keys: list[str]) -> None:
        started = time.perf_counter()
        self._unschedulable.difference_update(keys)  # decided again now: a refusal below marks it again
        claims: list[Callable[[], Awaitable[None]]] = []
        writes: list[Callable[[], Awaitable[None]]] = []
        for state, decision in self.decide(keys):
            if isinstance(decision, Binding):
                bind = functools.partial(self._bind, state, decision, started)
                (claims if decision.claims else writes).append(bind)
            else:
                self._unschedulable.add(state.key)
                if decision.gated:
                    continue  # PreEnqueue: the claim lifecycle is making its claim (module docstring)
                metrics.schedule_attempt("unschedulable", time.perf_counter() - started, self.name)
                writes.append(functools.partial(self._refuse, state, decision.message))
        # Pods with claims first: their slots are taken before any device-path pod of the burst is bound, so the
        # kubelet admitting one (GetPreferredAllocation reads the Instance from the store) never picks such a slot.
        # Each write starts only when its turn comes (a stop part-way leaves no coroutine made and never awaited).
        for batch in (claims, writes):
            for start in range(0, len(batch), _WRITES_AT_ONCE):
                await asyncio.gather(*(write() for write in batch[start : start + _WRITES_AT_ONCE]))

    async def _bind(self, state: PodState, decision: Binding, started: float) -> None:
        """Commit one decision in kube-scheduler's order: the claims first (`_commit_claims`), then the binding through
        `pods/binding` (`store.bind_pod`). A failure part-way leaves nothing a restart cannot finish: a claim allocated
        and reserved for this pod is used as it is when the pod is decided again, and released by the claim lifecycle
        when the pod goes instead."""
        namespace, name = _split_key(state.key)
        if decision.claims:
            try:
                await self._commit_claims(state, decision)
            except errors.DevplaceError as e:
                log.warning("%s: reserving the claims of %s on %s failed: %s", self.name, state.key, decision.node, e)
                self._forget_claims(decision)
                self._forget_assumed(state.key)
                if isinstance(e, errors.Conflict):
                    # a claim or a slot moved under the decision, and this scheduler's informers may not show it
                    # yet: decide again when they do (any device or claim change), or after the retry delay
                    self._unschedulable.add(state.key)
                    self._retry_later(state.key)
                elif not isinstance(e, errors.NotFound):
                    self._retry_later(state.key)
                return
        body = binding(namespace, name, decision.node, decision.annotations)
        uid = (state.wire.get("metadata") or {}).get("uid")
        if uid:
            body["metadata"]["uid"] = uid
        try:
            await bind_pod(self.store, body, clock=self.contention_clock)
        except (errors.NotFound, errors.Conflict) as e:
            log.info("%s: %s was not bound to %s: %s", self.name, state.key, decision.node, e)
            self._forget_assumed(state.key)  # gone, or bound by someone else: the informer shows which
            return
        except errors.DevplaceError as e:
            log.warning("%s: binding %s to %s failed: %s", self.name, state.key, decision.node, e)
            metrics.schedule_attempt("error", time.perf_counter() - started, self.name)
            self._forget_assumed(state.key)
            self._retry_later(state.key)
            return
        self.writes += 1
        metrics.schedule_attempt("scheduled", time.perf_counter() - started, self.name)
        if self.events is not None:
            note = f"Successfully assigned {namespace}/{name} to {decision.node}"
            self.events.emit(state.wire, "Scheduled", note, "Normal", action="Binding")

    async def _commit_claims(self, state: PodState, decision: Binding) -> None:
        """Each claim of the decision: a claim this decision allocates gets its Instance slots (devplace's own devices,
        `_take_slots`), then ONE write of the delete-protection finalizer, `status.allocation` and `reservedFor`
        (kube-scheduler writes the finalizer first and the status after it; one CAS does both or neither); a claim
        allocated before only gains the pod in `reservedFor`. `errors.Conflict` when a claim was allocated
        differently meanwhile or a slot is taken: the slots this call took are released again."""
        taken: list[str] = []
        if decision.extended_claim is not None:
            try:
                created = await self.store.create(decision.extended_claim)
                self.writes += 1
                self.claims.record(created)
            except errors.AlreadyExists:
                pass  # made before a failure part-way: reserved below like any claim of the pod
        try:
            for key, allocation in decision.claims:
                namespace, name = _split_key(key)
                held: set[ObjKey] = set()
                if allocation is not None:
                    taken.append(key)
                    held = await self._take_slots(namespace, name, allocation, decision.node)
                await self._reserve_claim(namespace, name, allocation, state.wire)
                if allocation is not None:  # slots an interrupted earlier try took elsewhere are stale now
                    await self._release_slots(namespace, name, keep=held)
            if decision.extended_status is not None:
                await self._extended_status(state, decision.extended_status)
        except errors.DevplaceError:
            for key in taken:
                claim = self.claims.get(*_split_key(key))
                if claim is None or allocation_of(claim) is None:
                    await self._release_slots(*_split_key(key))
            raise

    async def _extended_status(self, state: PodState, want: Mapping[str, Any]) -> None:
        """The pod's `status.extendedResourceClaimStatus`, before the binding (kube-scheduler's PreBind)."""

        def decide(current: dict[str, Any]) -> dict[str, Any] | None:
            status = dict(current.get("status") or {})
            if status.get("extendedResourceClaimStatus") == want:
                return None
            status["extendedResourceClaimStatus"] = dict(want)
            return {**current, "status": status}

        written = await self._cas("Pod", state.key, decide, state.wire)
        self.pods.record(written.object)

    async def _reserve_claim(
        self, namespace: str, name: str, allocation: Mapping[str, Any] | None, pod: Mapping[str, Any]
    ) -> None:
        def decide(current: dict[str, Any]) -> dict[str, Any] | None:
            status = dict(current.get("status") or {})
            stored = allocation_of(current)
            if allocation is not None and stored is not None and stored != allocation:
                raise errors.Conflict(f"ResourceClaim {namespace}/{name} was allocated meanwhile")
            if allocation is None and stored is None:
                raise errors.Conflict(f"ResourceClaim {namespace}/{name} was deallocated meanwhile")
            meta = dict(current.get("metadata") or {})
            if meta.get("deletionTimestamp"):
                raise errors.Conflict(f"ResourceClaim {namespace}/{name} is being deleted")
            finalizers = list(meta.get("finalizers") or [])
            if allocation is not None and DELETE_PROTECTION not in finalizers:
                meta["finalizers"] = [*finalizers, DELETE_PROTECTION]
            if allocation is not None:
                status["allocation"] = dict(allocation)
            status["reservedFor"] = with_consumer(current, pod)
            out = {**current, "metadata": meta, "status": status}
            return None if out == current else out

        written = await self._cas("ResourceClaim", f"{namespace}/{name}", decide, self.claims.get(namespace, name))
        self.claims.record(written.object)

    def _slot_wants(self, allocation: Mapping[str, Any]) -> list[tuple[str, str, int | None, int]]:
        """What an allocation takes of devplace's Instances: (namespace, instance, slot or None, count) per device of
        devplace's driver whose slice names its Instance (`instance` attribute; `slot` for the N-devices form)."""
        attributes = self._devplace_devices
        if attributes is None:
            attributes = self._devplace_devices = {}
            for piece in self.slices.values():
                spec = piece.get("spec") or {}
                if spec.get("driver") != DRIVER:
                    continue
                pool = str((spec.get("pool") or {}).get("name") or "")
                for device in spec.get("devices") or ():
                    attributes[(pool, str(device.get("name") or ""))] = device.get("attributes") or {}
        out: list[tuple[str, str, int | None, int]] = []
        for result in (allocation.get("devices") or {}).get("results") or ():
            if result.get("driver") != DRIVER or result.get("adminAccess"):
                continue
            attrs = attributes.get((str(result.get("pool") or ""), str(result.get("device") or "")))
            if attrs is None:
                continue
            instance = _attribute(attrs, "instance")
            if not isinstance(instance, str) or not instance:
                continue
            known = self.instances.keys()
            namespace = next((ns for ns, n in known if n == instance), None)
            if namespace is None:
                continue
            slot = _attribute(attrs, "slot")
            if result.get("shareID"):
                consumed = (result.get("consumedCapacity") or {}).get("slots")
                count = int(str(consumed)) if consumed is not None and str(consumed).isdigit() else 1
                out.append((namespace, instance, None, count))
            else:
                out.append((namespace, instance, slot if isinstance(slot, int) else 0, 1))
        return out

    async def _take_slots(self, namespace: str, claim: str, allocation: Mapping[str, Any], node: str) -> set[ObjKey]:
        """Hold the allocation's slots of devplace's Instances for the claim; the Instances held."""
        holder = DRA(namespace, claim, node)
        held: set[ObjKey] = set()
        for ns, instance, slot, count in self._slot_wants(allocation):
            held.add((ns, instance))

            def decide(
                current: dict[str, Any], instance: str = instance, slot: int | None = slot, count: int = count
            ) -> dict[str, Any] | None:
                spec = dict(current.get("spec") or {})
                usage = spec.get("deviceUsage") or {}
                want = dra_taken(instance, usage, holder, slot=slot, count=count)
                return None if want == usage else {**current, "spec": {**spec, "deviceUsage": want}}

            written = await self._cas("Instance", f"{ns}/{instance}", decide, self.instances.get(ns, instance))
            self.instances.record(written.object)
        return held

    async def _release_slots(self, namespace: str, claim: str, *, keep: Collection[ObjKey] = ()) -> None:
        """Free every slot held for claim `namespace/claim` on Instances other than `keep` (best effort: the claim
        lifecycle repeats it for a claim left unallocated). With `keep` the claim's allocation just written: a
        scheduler stopped between its slot write and its claim write (killed, or a leader paused past its lease whose
        cleanup the fence refuses) leaves a slot held for the claim, which this scheduler may allocate elsewhere; the
        lifecycle frees slots of unallocated claims only, so without this the device would stay held."""
        for key in self.instances.keys_by("claims", f"{namespace}/{claim}"):
            instance = self.instances.get(*key)
            if key in keep or instance is None:
                continue

            def decide(current: dict[str, Any]) -> dict[str, Any] | None:
                return instance_without_claims(current, [(namespace, claim)])

            try:
                await self._cas("Instance", f"{key[0]}/{key[1]}", decide, instance)
            except errors.DevplaceError as e:
                log.warning("%s: releasing the slots of claim %s/%s failed: %s", self.name, namespace, claim, e)

    async def _refuse(self, state: PodState, message: str) -> None:
        now = rfc3339(self.clock.now())
        want = _scheduled_condition("False", "Unschedulable", message)
        if _with_condition(state.wire, want, now) is None:
            return  # already says so: no write

        def decide(current: dict[str, Any]) -> dict[str, Any] | None:
            if (current.get("spec") or {}).get("nodeName"):
                return None
            status = _with_condition(current, want, now)
            return None if status is None else {**current, "status": status}

        try:
            written = await self._cas("Pod", state.key, decide, state.wire)
        except errors.NotFound:
            return
        except errors.DevplaceError as e:
            log.warning("%s: writing why %s is pending failed: %s", self.name, state.key, e)
            self._retry_later(state.key)
            return
        self.pods.record(written.object)
        if written.action != "unchanged" and self.events is not None:
            self.events.emit(written.object, "FailedScheduling", message, "Warning", action="Scheduling")

    async def _cas(
        self,
        kind: str,
        key: str,
        decide: Callable[[dict[str, Any]], dict[str, Any] | None],
        first: Mapping[str, Any] | None,
    ) -> Any:
        namespace, name = _split_key(key) if kind in _NAMESPACED else ("", key)
        written = await cas(self.store, kind, name, namespace, decide, first=first, clock=self.contention_clock)
        if written.action != "unchanged":
            self.writes += 1
        return written

    # -- retries after store failures ------------------------------------------------------------------------------

    def _retry_later(self, key: str) -> None:
        self.queue.mark_at(key, self.clock.now() + self.retry_after)

    # -- class status --------------------------------------------------------------------------------------------

    def class_statuses(self) -> dict[str, ClassStatus]:
        """Every valid class's status from the current snapshot (module docstring)."""
        index = self.snapshot().devices
        out = {name: [0, 0] for name in index.classes}
        for name, device in index.devices.items():
            used = device.capacity - index.free[name]
            for cls in index.classes_of[name]:
                out[cls][0] += device.capacity
                out[cls][1] += used
        return {name: ClassStatus(a, r) for name, (a, r) in out.items()}

    async def _status_loop(self) -> None:
        while True:
            if not self._status_dirty:
                self._status_wake.clear()
                await self._status_wake.wait()
                continue
            await self._quiet.wait()  # after the burst's bindings are written: one status pass for all of them
            self._status_working = True
            try:
                self._status_dirty = False
                statuses = self.class_statuses()
                wanted = [
                    (name, status.to_wire())
                    for name, status in sorted(statuses.items())
                    if (state := self.classes.get("", name)) is not None and state.status != status.to_wire()
                ]
                for start in range(0, len(wanted), _WRITES_AT_ONCE):
                    await asyncio.gather(
                        *(self._write_status(n, w) for n, w in wanted[start : start + _WRITES_AT_ONCE])
                    )
            finally:
                self._status_working = False
            await asyncio.sleep(0)

    async def _write_status(self, name: str, want: dict[str, str]) -> None:
        state = self.classes.get("", name)
        spec = None if state is None else state.spec

        def decide(current: dict[str, Any]) -> dict[str, Any] | None:
            if current.get("spec") != spec or current.get("status") == want:
                return None  # the spec moved on: the next pass decides on it
            return {**current, "status": want}

        try:
            written = await self._cas("ResourceClass", name, decide, None)
        except errors.NotFound:
            return
        except errors.DevplaceError as e:
            log.warning("%s: writing the status of class %s failed: %s", self.name, name, e)
            return
        self.classes.record(written.object)


def _attribute(attributes: Mapping[str, Any], name: str) -> Any:
    """A slice device attribute's value (`{int|bool|string|version: v}`), bare or under devplace's domain."""
    raw = attributes.get(name) or attributes.get(f"{DRIVER}/{name}")
    if not isinstance(raw, Mapping):
        return None
    for kind in ("string", "int", "bool", "version"):
        if kind in raw:
            return raw[kind]
    return None


def _extended(state: PodState | None) -> Mapping[str, int]:
    """The extended resources a counted pod requests of its node (an Instance-level resource, for a broker)."""
    if state is None or not state.counted or state.info is None:
        return {}
    return state.info.requests.extended


def _dra_holders(instance: Mapping[str, Any]) -> list[str]:
    """`namespace/claim` of the claims an Instance's slots are held for (`D:<namespace>/<claim>:<node>`)."""
    usage = (instance.get("spec") or {}).get("deviceUsage") or {}
    return sorted({v[2:].rpartition(":")[0] for v in usage.values() if isinstance(v, str) and v.startswith("D:")})


def _configuration_of(instance: Mapping[str, Any]) -> ObjKey:
    meta = instance.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str((instance.get("spec") or {}).get("configurationName") or ""))


def _without(cluster: Snapshot, state: PodState) -> Snapshot:
    """`cluster` with a bound pod's requests taken off its node (device slots stay: explain is about nodes)."""
    assert state.info is not None
    nodes = tuple(
        replace(n, requested=n.requested - state.info.requests) if n.name == state.node else n for n in cluster.nodes
    )
    return Snapshot(nodes, cluster.devices, cluster.classes)


def _awaits_template_claim(pod: Mapping[str, Any]) -> bool:
    """Whether one of the pod's template entries has no claim made yet (`status.resourceClaimStatuses` lacks it)."""
    return any(ref.template is not None and claim_name(pod, ref) is None for ref in claim_refs(pod))
