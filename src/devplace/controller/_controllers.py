"""The controller's I/O shell: informers in, one reconcile queue keyed by Configuration, CAS writes out.

Level-triggered. Any change to a Configuration, an Instance or an object the controller owns marks that
Configuration dirty; the worker takes dirty keys one at a time, recomputes what should exist from the caches
(`decisions.decide`, pure; through `incremental.Decider`, which gives the same answer but recomputes only what changed
since its previous pass), and applies the difference: `create` (AlreadyExists is success: another controller, or
this one before a restart, made it), `cas` update, `cas` DELETE of the uid decided on (NotFound is success). Writes
are recorded into the caches at once, so the next pass sees them without waiting for the watch. Nothing but timers
and the decider's memo (a cache: a fresh controller computes from scratch) is remembered between passes, so a
controller restarted mid-way, or two running at once, converge to the same objects with the same deterministic names
and never duplicate one.

Dirty keys and timers are one `WorkQueue` (devplace.queues): a key is never reconciled twice at once, node cleanup
(`_NODES_KEY`) goes before Configurations, and timers (a Pending broker due for recreation, a pool timeout, a node's
NotReady grace) run on the injected `Clock`: at the due time the key is marked dirty again. Each pass sets the key's
next timer afresh (taking a key drops its pending one). Node cleanup (`nodes`) runs when Nodes or Instances change:
a gone node is removed from every Instance that names it and its slots are freed, each Instance by CAS.
Every loop runs under one `Supervisor`; a write that fails for another reason is logged and retried after
`retry_after` seconds (on the clock).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from devplace import errors, metrics
from devplace.api import DevicePaths
from devplace.clocks import Clock
from devplace.controller import _claims as claims
from devplace.controller import _decisions as decisions
from devplace.controller import _incremental as incremental
from devplace.controller import _inputs as inputs
from devplace.controller import _names as names
from devplace.controller import _nodes as nodes
from devplace.controller import _plans as plans
from devplace.controller import _strategies as strategies
from devplace.controller._slices import SharedSlices
from devplace.queues import WorkQueue
from devplace.store import DELETE, Change, Delete, EventRecorder, Informer, ObjKey, Store, Written, cas
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

_OWNED_KINDS = ("Pod", "Job", "Service", "ConfigMap")
_NODES_KEY: ObjKey = ("", "")
"""The timer key of node cleanup (no Configuration has an empty name)."""
_WRITES_AT_ONCE = 64


def _owner_key(obj: Mapping[str, Any]) -> list[ObjKey]:
    meta = obj.get("metadata") or {}
    cfg = names.labels_of(obj).get(names.CONFIGURATION_LABEL)
    return [(str(meta.get("namespace") or ""), cfg)] if cfg else []


def _broker_pods(controller: Controller) -> dict[tuple[str, ...], float]:
    """Akri's `akri_broker_pod_count{configuration,node}` from the controller's informer of its Pods."""
    counts: dict[tuple[str, ...], float] = {}
    for pod in controller.owned["Pod"].values():
        labels = names.labels_of(pod)
        key = (labels.get(names.CONFIGURATION_LABEL, ""), labels.get(names.NODE_LABEL, ""))
        counts[key] = counts.get(key, 0.0) + 1
    return counts


class Controller:
    """Deploys brokers and Services for Configurations and cleans up after vanished nodes (module docstring)."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        resource_prefix: str | None = None,
        node_grace: float = 300.0,
        pending_grace: float = 300.0,
        namespace: str | None = None,
        class_matches: strategies.ClassMatches = strategies.no_classes,
        retry_after: float = 1.0,
        name: str = "controller",
        contention_clock: Clock | None = None,
        events: EventRecorder | None = None,
        dra: bool = True,
        dra_slices: bool | None = False,
        device_paths: DevicePaths = "both",
    ) -> None:
        """`contention_clock` paces CAS retries after a lost race and loop restarts (default: `clock`); a simulation
        under a fake `clock` passes a real one, since nobody advances fake time for a retry.

        `dra`: also keep ResourceClaims in step with their pods (`claims.ClaimLifecycle`); False for a store that does
        not serve `resource.k8s.io/v1`. `dra_slices`: publish shared Instances as ResourceSlices (`slices`; None:
        where the store keeps a probe slice). `device_paths`: how a Configuration without the
        `devplace.io/device-paths` annotation is served (`api.device_paths`; `device-plugins`: its shared Instances
        are in no slice)."""
        self.store = store
        self.clock = clock
        self.contention_clock = contention_clock or clock
        self.settings = decisions.Settings(resource_prefix=resource_prefix, pending_grace=pending_grace)
        self.decider = incremental.Decider(self.settings, class_matches)
        """Decides each pass like `decisions.decide`, recomputing only what changed since the last one."""
        self.node_grace = node_grace
        self.class_matches = class_matches
        self.retry_after = retry_after
        self.supervisor = Supervisor(name, clock=self.contention_clock)
        self.events = events
        """Events on Configurations for users (`kubectl describe`): each broker created and deleted."""
        self.writes = 0
        self.passes = 0
        """Reconcile passes run (one Configuration each)."""
        """Store writes made (creates, updates, deletes, status and Instance CAS writes), for benches and tests."""
        self.configurations: Informer[inputs.ConfigurationFacts] = Informer(
            store,
            "Configuration",
            lambda obj, _: inputs.ConfigurationFacts.from_wire(obj),
            namespace=namespace,
            indexes={"group": lambda c: [c.namespace] if c.strategy == "group" else []},
        )
        self.instances: Informer[inputs.InstanceFacts] = Informer(
            store,
            "Instance",
            lambda obj, _: inputs.InstanceFacts.from_wire(obj),
            namespace=namespace,
            indexes={
                "configuration": lambda i: [(i.namespace, i.configuration)],
                "namespace": lambda i: [i.namespace],
                "node": lambda i: sorted(nodes.nodes_of(i.wire)),
            },
        )
        selector = f"{names.CONTROLLER_LABEL}={names.CONTROLLER_VALUE}"
        self.owned: dict[str, Informer[dict[str, Any]]] = {
            kind: Informer(store, kind, namespace=namespace, selector=selector, indexes={"configuration": _owner_key})
            for kind in _OWNED_KINDS
        }
        self.nodes: Informer[nodes.NodeState] = Informer(store, "Node", lambda obj, _: nodes.node_state(obj))
        self._informers: list[Informer[Any]] = [self.configurations, self.instances, *self.owned.values(), self.nodes]
        self.queue: WorkQueue[ObjKey] = WorkQueue(clock, name="devplace-controller")
        """Configurations to reconcile, and `_NODES_KEY` for node cleanup; their timers."""
        metrics.BROKER_PODS.add(self, _broker_pods)
        self._deleted_nodes: set[str] = set()
        self._noticed: dict[str, float] = {}
        self._node_refs: dict[str, int] = {}
        """Node name -> how many Instances name it (kept by the Instance handler)."""
        self._ready = False
        self._recording = False
        self._unsubscribe: list[Callable[[], None]] = []
        self.slices = SharedSlices(store, self.supervisor, dra_slices, namespace, device_paths)
        """Shared Instances as ResourceSlices with a nodeSelector (`slices.SharedSlices`)."""
        self.claim_lifecycle = (
            claims.ClaimLifecycle(
                store, clock, retry_after=retry_after, contention_clock=self.contention_clock, name=f"{name}:claims"
            )
            if dra
            else None
        )
        """ResourceClaims made from templates, released when their pods go (None without `dra`)."""

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        # Views of feeds other parts already filled (a restart in the same process) hold Instances whose arrival no
        # handler heard: count the nodes they name now, as `_on_instance` counts every later change.
        self._node_refs = {}
        for _, instance in self.instances.items():
            self._count_nodes(instance, 1)
        self._unsubscribe = [
            self.configurations.subscribe(self._on_configuration),
            self.instances.subscribe(self._on_instance),
            self.nodes.subscribe(self._on_node),
            *(informer.subscribe(self._on_owned) for informer in self.owned.values()),
        ]
        for informer in self._informers:
            self.supervisor.loop(f"informer:{informer.name}", informer.run)
        self.supervisor.loop("reconcile", self._work)
        self.slices.start()
        if self.events is not None:
            self.supervisor.loop("events", self.events.run)
        if self.claim_lifecycle is not None:
            self.claim_lifecycle.start()

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        self.slices.stop()
        await self.supervisor.stop()
        if self.claim_lifecycle is not None:
            await self.claim_lifecycle.stop()

    def is_idle(self) -> bool:
        """Synced, nothing dirty, no reconcile in flight, no timer due (timers may still be set for later)."""
        return (
            self._ready
            and self.queue.idle
            and (self.events is None or not self.events.pending)
            and (self.claim_lifecycle is None or self.claim_lifecycle.is_idle())
            and not self.slices.pending
        )

    # -- events -> dirty keys ----------------------------------------------------------------------------------

    def _mark(self, key: ObjKey) -> None:
        if key[1] and not self._recording:
            self.queue.mark(key)

    def _mark_nodes(self) -> None:
        self.queue.mark(_NODES_KEY, urgent=True)

    def _on_configuration(self, change: Change[inputs.ConfigurationFacts]) -> None:
        self._mark(change.key)

    def _count_nodes(self, instance: inputs.InstanceFacts, step: int) -> None:
        for node in nodes.nodes_of(instance.wire):
            count = self._node_refs.get(node, 0) + step
            if count > 0:
                self._node_refs[node] = count
            else:
                self._node_refs.pop(node, None)

    def _on_instance(self, change: Change[inputs.InstanceFacts]) -> None:
        for instance, step in ((change.old, -1), (change.new, 1)):
            if instance is not None:
                self._count_nodes(instance, step)
                self._mark((instance.namespace, instance.configuration))
                for group in self.configurations.by("group", instance.namespace):
                    self._mark((group.namespace, group.name))
        self._mark_nodes()

    def _on_owned(self, change: Change[dict[str, Any]]) -> None:
        for obj in (change.old, change.new):
            if obj is not None:
                for key in _owner_key(obj):
                    self._mark(key)

    def _on_node(self, change: Change[nodes.NodeState]) -> None:
        name = change.key[1]
        if change.new is None:
            self._deleted_nodes.add(name)
        else:
            self._deleted_nodes.discard(name)
        self._mark_nodes()

    def classes_changed(self) -> None:
        """Hook for whoever backs `class_matches`: the ResourceClasses changed, so every `group` Configuration (the
        only strategy that reads classes) is reconciled again. The controller does not watch classes itself."""
        for configuration in self.configurations.values():
            if configuration.strategy == "group":
                self._mark((configuration.namespace, configuration.name))

    def _set_timer(self, key: ObjKey, at: float | None) -> None:
        """Called once per pass of `key`, while the queue has no timer for it (taking a key drops its timer)."""
        if at is not None:
            self.queue.mark_at(key, at)

    # -- loops -------------------------------------------------------------------------------------------------

    async def _work(self) -> None:
        await asyncio.gather(*(informer.wait_synced() for informer in self._informers))
        for key, _ in self.configurations.items():
            self._mark(key)
        for informer in self.owned.values():  # Configurations deleted while no controller ran: their leftovers
            for obj in informer.values():
                for key in _owner_key(obj):
                    self._mark(key)
        self._mark_nodes()
        self._ready = True
        async for key in self.queue:
            started, result = time.perf_counter(), "error"
            try:
                if key == _NODES_KEY:
                    await self._clean_nodes()
                else:
                    await self._reconcile(key)
                result = "success"
            finally:
                metrics.reconciled(
                    "node" if key == _NODES_KEY else "configuration", result, time.perf_counter() - started
                )
                self.queue.done(key)
                await asyncio.sleep(0)  # let watch events in between passes

    # -- one Configuration -------------------------------------------------------------------------------------

    def _existing(self, key: ObjKey) -> list[dict[str, Any]]:
        return [obj for informer in self.owned.values() for obj in informer.by("configuration", key)]

    def _instances_for(
        self, configuration: inputs.ConfigurationFacts | None, key: ObjKey
    ) -> list[inputs.InstanceFacts]:
        if configuration is not None and configuration.strategy == "group":
            return self.instances.by("namespace", key[0])
        return self.instances.by("configuration", key)

    async def _reconcile(self, key: ObjKey) -> None:
        self.passes += 1
        configuration = self.configurations.get(*key)
        existing = self._existing(key)
        if configuration is None and not existing:
            self.decider.forget(key)
            self._set_timer(key, None)
            return
        decision = self.decider.decide(
            key, configuration, self._instances_for(configuration, key), existing, now=self.clock.now()
        )
        failed = await self._apply(decision.plan)
        if configuration is not None and decision.status is not None:
            failed |= not await self._guard(lambda: self._write_status(key, decision), f"status of {key[0]}/{key[1]}")
        wake_at = decision.wake_at
        if failed:
            retry = self.clock.now() + self.retry_after
            wake_at = retry if wake_at is None else min(wake_at, retry)
        self._set_timer(key, wake_at)

    async def _guard(self, write: Callable[[], Awaitable[None]], what: str) -> bool:
        try:
            await write()
        except (errors.AlreadyExists, errors.NotFound):
            pass
        except errors.DevplaceError as e:
            log.warning("controller: %s failed: %s; retrying in %.1fs", what, e, self.retry_after)
            return False
        return True

    async def _apply(self, plan: plans.Plan) -> bool:
        """Carry out a plan: deletes, then updates, then creates; returns whether any write failed."""
        steps: list[tuple[Callable[[], Awaitable[None]], str]] = [
            (functools.partial(self._delete, d), f"delete {d.kind} {d.namespace}/{d.name}") for d in plan.deletes
        ]
        results = await self._run(steps)
        steps = [(functools.partial(self._update, s, w), f"update {plans.key_of(s)}") for s, w in plan.updates]
        results += await self._run(steps)
        steps = [(functools.partial(self._create, body), f"create {plans.key_of(body)}") for body in plan.creates]
        results += await self._run(steps)
        return not all(results)

    async def _run(self, steps: Sequence[tuple[Callable[[], Awaitable[None]], str]]) -> list[bool]:
        results: list[bool] = []
        for start in range(0, len(steps), _WRITES_AT_ONCE):
            chunk = steps[start : start + _WRITES_AT_ONCE]
            results += await asyncio.gather(*(self._guard(write, what) for write, what in chunk))
        return results

    def _record_own(self, informer: Informer[Any], obj: Mapping[str, Any], *, deleted: bool = False) -> None:
        """Take the result of one of this reconcile's own writes into the cache without marking its Configuration
        dirty again: the decision already accounted for it (its status counts the applied plan). Changes by
        anybody else still arrive through the watch and mark it."""
        self._recording = True
        try:
            informer.record(obj, deleted=deleted)
        finally:
            self._recording = False

    def _count(self, written: Written[Any]) -> None:
        if written.action != "unchanged":
            self.writes += 1

    async def _create(self, body: Mapping[str, Any]) -> None:
        kind = str(body["kind"])
        try:
            created = await self.store.create(body)
            self.writes += 1
        except errors.AlreadyExists:  # somebody else's: take it in as news (it may differ from what we wanted)
            meta = body["metadata"]
            self.owned[kind].record(await self.store.get(kind, meta["name"], meta.get("namespace") or ""))
            return
        self._record_own(self.owned[kind], created)
        self._tell(created, "SuccessfulCreate", "Created")

    def _tell(self, broker: Mapping[str, Any], reason: str, verb: str) -> None:
        """An Event on the Configuration that owns `broker`, as Kubernetes' controllers tell of what they create
        ("Created pod: x"); never blocks."""
        if self.events is None:
            return
        kind, _, name = plans.key_of(broker)
        for namespace, configuration in _owner_key(broker):
            facts = self.configurations.get(namespace, configuration)
            regarding: dict[str, Any] = {"kind": "Configuration", "name": configuration, "namespace": namespace}
            if facts is not None:
                regarding |= {"apiVersion": facts.api_version, "uid": facts.uid}
            self.events.emit(regarding, reason, f"{verb} {kind.lower()}: {name}")

    async def _update(self, stored: Mapping[str, Any], want: Mapping[str, Any]) -> None:
        kind, namespace, name = plans.key_of(stored)

        def decide(current: dict[str, Any]) -> dict[str, Any] | None:
            return plans.merged(current, want) if plans.drifted(current, want) else None

        written = await cas(self.store, kind, name, namespace, decide, first=stored, clock=self.contention_clock)
        self._count(written)
        self._record_own(self.owned[kind], written.object)

    async def _delete(self, deletion: plans.Deletion) -> None:
        informer = self.owned[deletion.kind]

        def decide(current: dict[str, Any]) -> Delete | None:
            return DELETE if str((current.get("metadata") or {}).get("uid") or "") == deletion.uid else None

        try:
            written = await cas(
                self.store,
                deletion.kind,
                deletion.name,
                deletion.namespace,
                decide,
                first=informer.get(deletion.namespace, deletion.name),
                clock=self.contention_clock,
            )
        except errors.NotFound:
            informer.forget(deletion.namespace, deletion.name)
            return
        self._count(written)
        self._record_own(informer, written.object, deleted=written.action == "deleted")
        if written.action == "deleted":
            self._tell(written.object, "SuccessfulDelete", "Deleted")

    async def _write_status(self, key: ObjKey, decision: decisions.Decision) -> None:
        cached = self.configurations.get(*key)
        written = await cas(
            self.store,
            "Configuration",
            key[1],
            key[0],
            decision.status_for,
            first=cached.wire if cached is not None else None,
            clock=self.contention_clock,
        )
        self._count(written)
        if written.action == "updated":
            self._record_own(self.configurations, written.object)

    # -- node cleanup ------------------------------------------------------------------------------------------

    def _referenced_nodes(self) -> list[str]:
        return sorted(self._node_refs)

    async def _clean_nodes(self) -> None:
        now = self.clock.now()
        referenced = self._referenced_nodes()
        # only nodes an Instance still names matter: forget the rest, so node churn does not grow these for ever
        self._deleted_nodes.intersection_update(referenced)
        for name in [n for n in self._noticed if n not in self._node_refs]:
            del self._noticed[name]
        states = {name: state for (_, name), state in self.nodes.items()}
        for name in referenced:
            state = states.get(name)
            if state is not None and state.ready:
                self._noticed.pop(name, None)
            else:
                self._noticed.setdefault(name, now)
        gone, wake_at = nodes.gone_nodes(
            referenced, states, deleted=self._deleted_nodes, noticed=self._noticed, now=now, grace=self.node_grace
        )
        failed = False
        if gone:
            keys = sorted({k for node in gone for k in self.instances.keys_by("node", node)})
            steps = [
                (functools.partial(self._without, k, gone), f"node cleanup of Instance {k[0]}/{k[1]}") for k in keys
            ]
            failed = not all(await self._run(steps))
        if failed:
            retry = now + self.retry_after
            wake_at = retry if wake_at is None else min(wake_at, retry)
        self._set_timer(_NODES_KEY, wake_at)

    async def _without(self, key: ObjKey, gone: frozenset[str]) -> None:
        cached = self.instances.get(*key)

        def decide(current: dict[str, Any]) -> dict[str, Any] | Delete | None:
            return nodes.without_nodes(current, gone)

        written = await cas(
            self.store,
            "Instance",
            key[1],
            key[0],
            decide,
            first=dict(cached.wire) if cached is not None else None,
            clock=self.contention_clock,
        )
        self._count(written)
        if written.action != "unchanged":
            self.instances.record(written.object, deleted=written.action == "deleted")
