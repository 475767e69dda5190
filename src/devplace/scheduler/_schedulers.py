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
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from devplace import errors
from devplace.api import resource_name
from devplace.clocks import Clock
from devplace.queues import WorkQueue
from devplace.scheduler._assumptions import Assumed
from devplace.scheduler._classes import (
    ANNOTATION_PREFIX,
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
from devplace.scheduler._nodes import NodeInfo, Resources, node_info
from devplace.scheduler._pods import PodInfo, pending_key, pod_info
from devplace.scheduler._selection import DeviceIndex
from devplace.store import Change, EventRecorder, Informer, ObjKey, Store, cas, rfc3339
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

POD_SCHEDULED = "PodScheduled"
_WRITES_AT_ONCE = 128
BURST_LIMIT = 512
"""Pods decided in one burst at most: about 0.1-0.2 s of event-loop time on the benchmark's clusters. More queued pods
wait for the next burst (in pending order), so informer events and other tasks run in between."""
_TERMINAL = frozenset({"Succeeded", "Failed"})


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

    @property
    def counted(self) -> bool:
        """Bound and not terminated: its requests and device slots count against its node."""
        return bool(self.node) and not self.terminal


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
    return PodState(
        key=key,
        wire=obj,
        spec=spec,
        node=str(spec.get("nodeName") or ""),
        scheduler_name=spec.get("schedulerName"),
        terminal=phase in _TERMINAL,
        info=info,
        invalid=invalid,
        slots=slots,
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
    ) -> None:
        """`contention_clock` paces CAS retries after a lost race and loop restarts (default: `clock`); a simulation
        under a fake `clock` passes a real one, since nobody advances fake time for a retry.

        `advertised_only` (the default; see "Devices a node offers" in the module docstring): a device serves a pod
        on a node only as far as the Node advertises its Instance-level resource. False counts every device on every
        node its Instance lists: only for stores whose Nodes no kubelet writes (what-if tools, tests of other
        rules); on a cluster the kubelet would fail such a pod."""
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
            indexes={"node": lambda p: [p.node] if p.counted else []},
        )
        self.nodes: Informer[NodeInfo] = Informer(store, "Node", lambda obj, _: node_info(obj))
        self.instances: Informer[dict[str, Any]] = Informer(
            store,
            "Instance",
            indexes={"configuration": lambda i: [_configuration_of(i)]},
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
        self.queue: WorkQueue[str] = WorkQueue(clock)
        """Pods (by key) to decide, and their retries after store failures (timers on the clock)."""
        self._unschedulable: set[str] = set()
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
        blocker = self._blocker(state)
        if blocker is not None:
            return [NodeVerdict(n.name, blocker) for n in cluster.nodes]
        assert state.info is not None
        if state.counted:  # explain a bound pod as if it were pending: take its own share off its node first
            cluster = _without(cluster, state)
        config = replace(self.config, percentage_of_nodes_to_score=100)
        decision = schedule_one(state.info, cluster, self.assumed, config)  # reads `assumed`, changes nothing
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
        self._node_infos[name] = info
        return info

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
        if old is not None and old.counted and (new is None or not new.counted or new.node != old.node):
            self._requeue_unschedulable()  # a bound pod went: room on its node and its devices
        key = new.key if new is not None else old.key if old is not None else ""
        if new is None or new.node or not self.ours(new):
            self.queue.forget(key)  # its retry too
            self._unschedulable.discard(key)
            self.assumed.forget(key)  # gone, or bound: the snapshot counts it from now on
            return
        if old is None or old.node or old.spec != new.spec or not self.ours(old):
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
            blocker = self._blocker(state)
            if blocker is not None:
                out.append((state, Unschedulable(state.key, blocker)))
            else:
                assert state.info is not None
                placeable[state.key] = state
        if placeable:
            self.bursts += 1
            cluster = self.snapshot()
            infos = [s.info for s in placeable.values() if s.info is not None]
            decisions = schedule_burst(infos, cluster, self.assumed, self.config, self._start)
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
        self._unschedulable.difference_update(keys)  # decided again now: a refusal below marks it again
        writes: list[Awaitable[None]] = []
        for state, decision in self.decide(keys):
            if isinstance(decision, Binding):
                writes.append(self._bind(state, decision))
            else:
                self._unschedulable.add(state.key)
                writes.append(self._refuse(state, decision.message))
        for start in range(0, len(writes), _WRITES_AT_ONCE):
            await asyncio.gather(*writes[start : start + _WRITES_AT_ONCE])

    async def _bind(self, state: PodState, binding: Binding) -> None:
        now = rfc3339(self.clock.now())

        def decide(current: dict[str, Any]) -> dict[str, Any] | None:
            spec = current.get("spec") or {}
            if spec.get("nodeName") or spec != state.spec:
                return None  # bound meanwhile (dropped), or changed (decided again below)
            meta = dict(current.get("metadata") or {})
            annotations = {
                k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(ANNOTATION_PREFIX)
            }
            annotations.update(binding.annotations)
            meta["annotations"] = annotations
            status = _with_condition(current, _scheduled_condition("True", None, None), now)
            out = {**current, "metadata": meta, "spec": {**spec, "nodeName": binding.node}}
            if status is not None:
                out["status"] = status
            return out

        try:
            written = await self._cas("Pod", state.key, decide, state.wire)
        except errors.NotFound:
            self.assumed.forget(state.key)
            return
        except errors.DevplaceError as e:
            log.warning("%s: binding %s to %s failed: %s", self.name, state.key, binding.node, e)
            self.assumed.forget(state.key)
            self._retry_later(state.key)
            return
        self.pods.record(written.object)
        if written.action != "unchanged" and self.events is not None:
            namespace, name = _split_key(state.key)
            note = f"Successfully assigned {namespace}/{name} to {binding.node}"
            self.events.emit(written.object, "Scheduled", note, "Normal", action="Binding")
        if written.action == "unchanged":
            self.assumed.forget(state.key)
            fresh = self.pods.get(*_split_key(state.key))
            if fresh is not None and not fresh.node and self.ours(fresh):
                self._queue(state.key)  # the pod changed under the decision: decide again

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
        namespace, name = _split_key(key) if kind == "Pod" else ("", key)
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
                writes = [
                    self._write_status(name, status.to_wire())
                    for name, status in sorted(statuses.items())
                    if (state := self.classes.get("", name)) is not None and state.status != status.to_wire()
                ]
                for start in range(0, len(writes), _WRITES_AT_ONCE):
                    await asyncio.gather(*writes[start : start + _WRITES_AT_ONCE])
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


def _extended(state: PodState | None) -> Mapping[str, int]:
    """The extended resources a counted pod requests of its node (an Instance-level resource, for a broker)."""
    if state is None or not state.counted or state.info is None:
        return {}
    return state.info.requests.extended


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
