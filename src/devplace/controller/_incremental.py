"""`decisions.decide`, incrementally: a pass recomputes only what changed since the previous pass.

`Decider.decide(key, configuration, instances, existing, now=...)` returns exactly what `decisions.decide` returns for
the same inputs (the property test in tests/controller/test_incremental.py checks it), but keeps, per Configuration,
what the last pass computed: each Instance's desired brokers and skips, each object key's plan entry (create,
update, delete, replace or nothing), its contribution to the broker counts and to the Services. A pass compares the
inputs to the remembered ones (by identity first, then by value, so a caller that passes fresh but equal objects gets
the same answer, only slower) and recomputes only the keys an Instance change, an object change or the passing of a
Pending broker's grace touches. Inputs must not be mutated in place once passed (the informers replace objects).

Incremental for the per-Instance strategies (`perNode`, `job`, `deployment`) and `configuration` (its
per-Configuration Pods are recomputed whole, which is cheap), with their Services. Everything else (`pool`,
`group`, a deleted or invalid Configuration, no strategy) and unusual inputs (duplicate keys or names, an Instance of
the Configuration in another namespace, an Instance named like its Configuration) take the full `decisions.decide`,
and the remembered state is dropped. A change of the Configuration's spec, generation or conflicts (anything but
its status) starts the Configuration's state from scratch. Nothing here is needed for correctness: a fresh `Decider`
(a restarted controller) computes everything from scratch.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, compress, repeat
from typing import Any, Literal

from devplace.controller import _decisions as decisions
from devplace.controller import _inputs as inputs
from devplace.controller import _names as names
from devplace.controller import _plans as plans
from devplace.controller import _services as services
from devplace.controller import _strategies as strategies
from devplace.store import rfc3339

_INCREMENTAL = frozenset({"perNode", "job", "deployment", "configuration"})
_CONFIGURATION_UNIT = ""
"""The unit (contributor) of a `configuration` strategy's Pods."""

Action = Literal["delete", "update", "replace", "create"]


@dataclass(frozen=True)
class _Entry:
    """One key's part of the plan and of the counts."""

    action: Action | None = None
    stored: Mapping[str, Any] | None = None
    want: plans.Desired | None = None
    deletion: plans.Deletion | None = None
    broker: bool = False
    running: int = 0
    pending: int = 0
    due: float | None = None
    retained: bool = False
    clocked: bool = False


_NOTHING = _Entry()


class _State:
    """What the last pass over one Configuration computed."""

    def __init__(self, fingerprint: Hashable, strategy: str | None) -> None:
        self.fingerprint = fingerprint
        self.strategy = strategy
        self.fresh = True
        self.now = float("-inf")
        self.instances: dict[str, inputs.InstanceFacts] = {}
        self.inst_ids: dict[int, str] = {}
        """id() of each known Instance -> its name."""
        self.names: list[str] = []
        self.online: set[str] = set()
        self.units: dict[str, tuple[tuple[plans.Desired, ...], tuple[strategies.Skip, ...]]] = {}
        self.unit_objects: dict[str, tuple[plans.Desired, ...]] = {}
        """Each unit's desired brokers (`units[u][0]`), to join them in order quickly."""
        self.skipping: set[str] = set()
        self.contributors: dict[plans.Key, dict[str, plans.Desired]] = {}
        self.stored: dict[plans.Key, Mapping[str, Any]] = {}
        self.ids: dict[int, plans.Key] = {}
        """id() of each stored object -> its key (valid while `stored[key] is` that object)."""
        self.objects: tuple[tuple[plans.Desired, ...], tuple[strategies.Skip, ...]] | None = None
        """The desired brokers and skips in strategy order, while no unit changed."""
        self.labelled: dict[str, set[plans.Key]] = {}
        self.serving: dict[plans.Key, str] = {}
        self.serving_counts: dict[str, int] = {}
        self.services: dict[plans.Key, plans.Desired] = {}
        self.entries: dict[plans.Key, _Entry] = {}
        self.actions: set[plans.Key] = set()
        self.timed: dict[plans.Key, float] = {}
        """Pending brokers not yet due: when each is."""
        self.clocked: set[plans.Key] = set()
        """Keys whose entry depends on the time (a Pending broker with a creation time)."""
        self.retained: set[plans.Key] = set()
        self.desired = 0
        self.running = 0
        self.pending = 0


def _label(obj: Mapping[str, Any] | None) -> str | None:
    if obj is None:
        return None
    value = names.labels_of(obj).get(names.INSTANCE_LABEL)
    return value if isinstance(value, str) else None


def _phase(pod: Mapping[str, Any]) -> str:
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if isinstance(phase, str) and phase else "Pending"


class Decider:
    """`decisions.decide` with memory (module docstring); one per controller, keyed by Configuration."""

    def __init__(
        self,
        settings: decisions.Settings | None = None,
        class_matches: strategies.ClassMatches = strategies.no_classes,
    ) -> None:
        self.settings = settings or decisions.Settings()
        self.class_matches = class_matches
        self._states: dict[Hashable, _State] = {}

    def forget(self, key: Hashable) -> None:
        self._states.pop(key, None)

    def _full(
        self,
        key: Hashable,
        configuration: inputs.ConfigurationFacts | None,
        instances: Iterable[inputs.InstanceFacts],
        existing: Sequence[Mapping[str, Any]],
        now: float,
    ) -> decisions.Decision:
        self._states.pop(key, None)
        return decisions.decide(
            configuration, instances, existing, settings=self.settings, now=now, class_matches=self.class_matches
        )

    def decide(
        self,
        key: Hashable,
        configuration: inputs.ConfigurationFacts | None,
        instances: Iterable[inputs.InstanceFacts],
        existing: Sequence[Mapping[str, Any]],
        *,
        now: float,
    ) -> decisions.Decision:
        """What `decisions.decide(configuration, instances, existing, ...)` returns (module docstring)."""
        if configuration is None or configuration.problem is not None or configuration.strategy not in _INCREMENTAL:
            return self._full(key, configuration, instances, existing, now)
        build = strategies._Builder(configuration, self.settings.resource_prefix)
        c = configuration
        fingerprint = (
            build.fingerprint,
            c.strategy,
            names.digest([c.instance_service_spec, c.configuration_service_spec], 32),
            self.settings.pending_grace,
        )
        state = self._states.get(key)
        if state is None or state.fingerprint != fingerprint:
            state = self._states[key] = _State(fingerprint, c.strategy)
        instances = instances if isinstance(instances, list) else list(instances)
        # Instances: the ones not known by identity, then the known ones gone (state is not touched yet)
        known, inst_ids = state.instances, state.inst_ids
        updates: dict[str, inputs.InstanceFacts | None] = {}
        unknown = list(compress(instances, map(operator.not_, map(inst_ids.__contains__, map(id, instances)))))
        for instance in unknown:
            if instance.configuration != c.name:
                continue
            if instance.namespace != c.namespace or instance.name in updates or instance.name == c.name:
                return self._full(key, configuration, instances, existing, now)
            updates[instance.name] = instance
        if len(set(map(id, instances))) != len(instances):
            return self._full(key, configuration, instances, existing, now)
        replaced = sum(n in known for n in updates)
        if replaced or len(instances) - len(unknown) != len(known):
            listed = set(map(id, instances))
            for n, was in known.items():
                if id(was) in listed:
                    if n in updates:
                        return self._full(key, configuration, instances, existing, now)
                elif n not in updates:
                    updates[n] = None
        # objects: the ones not known by identity; any key twice takes the full path
        ids = state.ids
        got = list(map(ids.get, map(id, existing)))
        fresh = {plans.key_of(o): o for o in compress(existing, map(operator.is_, got, repeat(None)))}
        keys: set[plans.Key | None] = set(got)
        keys.discard(None)
        keys.update(fresh)
        if len(keys) != len(existing):
            return self._full(key, configuration, instances, existing, now)
        try:
            return self._pass(state, build, updates, fresh, keys, now)
        except BaseException:
            self._states.pop(key, None)
            raise

    # -- one pass --------------------------------------------------------------------------------------------------

    def _pass(
        self,
        state: _State,
        build: strategies._Builder,
        updates: dict[str, inputs.InstanceFacts | None],
        fresh: dict[plans.Key, Mapping[str, Any]],
        keys: set[plans.Key | None],
        now: float,
    ) -> decisions.Decision:
        cfg = build.cfg
        dirty: set[plans.Key] = set()
        dirty_names: set[str] = set()
        # objects
        stored = state.stored
        for k, obj in fresh.items():
            old = stored.get(k)
            self._store(state, k, obj)  # an equal copy is taken in too: the next pass finds it by identity
            if old is None or old != obj:
                dirty.add(k)
        if len(stored) != len(keys):
            for k in stored.keys() - keys:
                self._store(state, k, None)
                dirty.add(k)
        # Instances
        was_online = bool(state.online)
        known, own = state.instances, state.instances
        for n, instance in updates.items():
            was = known.get(n)
            if was is not None:
                del state.inst_ids[id(was)]
            if instance is not None:
                state.inst_ids[id(instance)] = n
                known[n] = instance
                if was is not None and was == instance:  # an equal copy: taken in, nothing changed
                    continue
                if was is None:
                    bisect.insort(state.names, n)
            else:
                del known[n]
                state.names.pop(bisect.bisect_left(state.names, n))
            if instance is not None and instance.nodes:
                state.online.add(n)
            else:
                state.online.discard(n)
            if cfg.strategy != "configuration":
                made = self._unit(build, instance) if instance is not None else None
                self._contribute(state, n, made, dirty)
            dirty |= state.labelled.get(n, set())
            dirty_names.add(n)
        if cfg.strategy == "configuration" and (state.fresh or was_online != bool(state.online)):
            online = [own[n] for n in state.online][:1]
            self._contribute(state, _CONFIGURATION_UNIT, strategies._configuration(build, online), dirty)
        # time: Pending brokers whose grace ran out (all of them when the clock went back)
        if now < state.now:
            dirty |= state.clocked
        else:
            dirty |= {k for k, due in state.timed.items() if due <= now}
        state.now = now
        state.fresh = False
        # Services: who serves, from the brokers that are desired and Running
        for k in dirty:
            self._serve(state, k, dirty_names)
        spec = cfg.instance_service_spec
        for n in dirty_names:
            skey = ("Service", cfg.namespace, names.instance_service_name(n))
            instance = own.get(n)
            want = None
            if spec is not None and instance is not None and state.serving_counts.get(n):
                want = self._service(cfg, n, spec, instance)
            self._set_service(state, skey, want)
            dirty.add(skey)
        ckey = ("Service", cfg.namespace, names.configuration_service_name(cfg.name))
        cspec = cfg.configuration_service_spec
        want = None
        if cspec is not None and state.serving:
            want = services._service(
                cfg,
                ckey[2],
                cspec,
                {names.CONTROLLER_LABEL: names.CONTROLLER_VALUE, names.CONFIGURATION_LABEL: cfg.name},
                {names.CONFIGURATION_LABEL: cfg.name},
                cfg.owner_reference(),
            )
        self._set_service(state, ckey, want)
        dirty.add(ckey)
        # the plan, key by key
        for k in dirty:
            self._enter(state, k, now)
        return self._decision(state, cfg, now)

    def _store(self, state: _State, k: plans.Key, obj: Mapping[str, Any] | None) -> None:
        old = state.stored.get(k)
        if old is not None and state.ids.get(id(old)) == k:
            del state.ids[id(old)]
        if obj is not None:
            state.ids[id(obj)] = k
        before, after = _label(old), _label(obj)
        if before is not None and before != after:
            keys = state.labelled.get(before)
            if keys is not None:
                keys.discard(k)
                if not keys:
                    del state.labelled[before]
        if after is not None:
            state.labelled.setdefault(after, set()).add(k)
        if obj is None:
            state.stored.pop(k, None)
        else:
            state.stored[k] = obj

    def _unit(self, build: strategies._Builder, instance: inputs.InstanceFacts) -> strategies.Brokers:
        strategy = build.cfg.strategy
        if strategy == "perNode":
            return strategies._per_node(build, [instance])
        if strategy == "deployment":
            return strategies._deployment(build, [instance])
        assert strategy == "job"
        return strategies.Brokers((build.job(instance),)) if instance.nodes else strategies.Brokers()

    def _contribute(self, state: _State, unit: str, made: strategies.Brokers | None, dirty: set[plans.Key]) -> None:
        state.objects = None
        old_objects = state.units.get(unit, ((), ()))[0]
        for d in old_objects:
            contributors = state.contributors.get(d.key)
            if contributors is not None:
                contributors.pop(unit, None)
                if not contributors:
                    del state.contributors[d.key]
            dirty.add(d.key)
        if made is None:
            state.units.pop(unit, None)
            state.unit_objects.pop(unit, None)
            state.skipping.discard(unit)
            return
        state.units[unit] = (made.objects, made.skips)
        state.unit_objects[unit] = made.objects
        if made.skips:
            state.skipping.add(unit)
        else:
            state.skipping.discard(unit)
        for d in made.objects:
            state.contributors.setdefault(d.key, {}).setdefault(unit, d)
            dirty.add(d.key)

    def _broker(self, state: _State, k: plans.Key) -> plans.Desired | None:
        contributors = state.contributors.get(k)
        if not contributors:
            return None
        return contributors[min(contributors)] if len(contributors) > 1 else next(iter(contributors.values()))

    def _serve(self, state: _State, k: plans.Key, dirty_names: set[str]) -> None:
        if k[0] != "Pod":
            return
        obj = state.stored.get(k)
        label: str | None = None
        if obj is not None and self._broker(state, k) is not None and services._running(obj):
            label = names.labels_of(obj).get(names.INSTANCE_LABEL, "")
        before = state.serving.get(k)
        if before == label:
            return
        for name, step in ((before, -1), (label, 1)):
            if name is None:
                continue
            if name:
                count = state.serving_counts.get(name, 0) + step
                if count > 0:
                    state.serving_counts[name] = count
                else:
                    state.serving_counts.pop(name, None)
                dirty_names.add(name)
        if label is None:
            del state.serving[k]
        else:
            state.serving[k] = label

    def _service(
        self, cfg: inputs.ConfigurationFacts, name: str, spec: Mapping[str, Any], instance: inputs.InstanceFacts
    ) -> plans.Desired:
        selector = {names.INSTANCE_LABEL: name}
        base = {names.CONTROLLER_LABEL: names.CONTROLLER_VALUE, names.CONFIGURATION_LABEL: cfg.name}
        return services._service(
            cfg,
            names.instance_service_name(name),
            spec,
            {**base, **selector},
            selector,
            inputs.instance_owner(instance),
        )

    def _set_service(self, state: _State, k: plans.Key, want: plans.Desired | None) -> None:
        if want is None:
            state.services.pop(k, None)
        else:
            state.services[k] = want

    def _enter(self, state: _State, k: plans.Key, now: float) -> None:
        entry = self._entry(state, k, now)
        old = state.entries.get(k, _NOTHING)
        state.desired += entry.broker - old.broker
        state.running += entry.running - old.running
        state.pending += entry.pending - old.pending
        if entry is _NOTHING:
            state.entries.pop(k, None)
        else:
            state.entries[k] = entry
        for flag, keys in (
            (entry.action is not None, state.actions),
            (entry.retained, state.retained),
            (entry.clocked, state.clocked),
        ):
            if flag:
                keys.add(k)
            else:
                keys.discard(k)
        if entry.due is not None:
            state.timed[k] = entry.due
        else:
            state.timed.pop(k, None)

    def _entry(self, state: _State, k: plans.Key, now: float) -> _Entry:
        """`plans.plan` for one key (same branches, same order)."""
        stored = state.stored.get(k)
        broker = self._broker(state, k)
        want = broker if broker is not None else state.services.get(k)
        is_broker = broker is not None and k[0] in ("Pod", "Job")
        action: Action | None = None
        deletion = None
        due = None
        retained = False
        clocked = False
        if stored is not None:
            meta = stored.get("metadata") or {}
            uid = str(meta.get("uid") or "")
            if meta.get("deletionTimestamp"):
                pass
            elif want is None:
                if (
                    state.strategy == "job"
                    and stored.get("kind") == "Job"
                    and names.labels_of(stored).get(names.INSTANCE_LABEL) in state.online
                ):
                    retained = True
                else:
                    action, deletion = "delete", plans.Deletion(*k, uid, "not desired")
            else:
                reason = None
                if want.on_drift != "keep" and plans.drifted(stored, want):
                    if want.on_drift == "update":
                        action = "update"
                    else:
                        reason = "drifted from the Configuration"
                elif k[0] == "Pod":
                    phase = _phase(stored)
                    created = inputs.seconds_of(meta.get("creationTimestamp"))
                    grace = self.settings.pending_grace
                    if phase in ("Failed", "Succeeded"):
                        reason = f"broker {phase}"
                    elif phase == "Pending" and created is not None:
                        clocked = True
                        if now >= created + grace:
                            reason = f"broker Pending for more than {grace:g}s"
                        else:
                            due = created + grace
                if reason is not None:
                    action, deletion = "replace", plans.Deletion(*k, uid, reason)
        elif want is not None:
            action = "create"
        if not is_broker and action is None and not clocked and not retained:
            return _NOTHING
        running = pending = 0
        if is_broker:
            after = want.body if action in ("replace", "create") and want is not None else stored
            if after is not None:
                counted = plans.counts([after])
                running, pending = counted["running"], counted["pending"]
        return _Entry(action, stored, want, deletion, is_broker, running, pending, due, retained, clocked)

    def _decision(self, state: _State, cfg: inputs.ConfigurationFacts, now: float) -> decisions.Decision:
        creates: list[Mapping[str, Any]] = []
        fresh: list[Mapping[str, Any]] = []
        updates: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
        deletes: list[plans.Deletion] = []
        for k in sorted(state.actions):
            entry = state.entries[k]
            assert entry.action is not None
            if entry.deletion is not None:
                deletes.append(entry.deletion)
            if entry.action == "update" and entry.stored is not None and entry.want is not None:
                updates.append((entry.stored, entry.want.body))
            elif entry.action == "replace" and entry.want is not None:
                creates.append(entry.want.body)
            elif entry.action == "create" and entry.want is not None:
                fresh.append(entry.want.body)
        wake_at = min(state.timed.values()) if state.timed else None
        plan = plans.Plan(tuple(creates + fresh), tuple(updates), tuple(deletes), wake_at)
        if state.objects is None:
            if cfg.strategy == "configuration":
                state.objects = state.units.get(_CONFIGURATION_UNIT, ((), ()))
            else:
                state.objects = (
                    tuple(chain.from_iterable(map(state.unit_objects.__getitem__, state.names))),
                    tuple(chain.from_iterable(state.units[n][1] for n in sorted(state.skipping))),
                )
        objects, skips = state.objects
        chosen = strategies.Brokers(objects, skips, retain=frozenset(state.retained))
        return decisions.Decision(
            plan,
            wake_at,
            chosen,
            counts={"desired": state.desired, "running": state.running, "pending": state.pending},
            now=rfc3339(now),
            configuration=cfg.wire,
        )
