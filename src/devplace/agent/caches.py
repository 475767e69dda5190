"""The agent's view of the store: Configurations and Instances (all namespaces), Pods bound to its node, and the
ConfigMaps and Secrets that Configurations' discoveryProperties refer to.

Filled by the agent's watches and by the results of its own writes, whichever is newer by resourceVersion (store
revisions are global and monotonic, so "newer" is well defined; deletions leave a tombstone so a late write result
cannot resurrect a deleted object). Every Instance is parsed once here into an `InstanceRecord`; an object that
does not parse is logged and treated as absent, never trusted.

Instance writes go through `update_usage` (who holds which slot: claims and releases), `mutate_instance` (anything
else) and `remove_instance`: a compare-and-swap on the cached copy first (one store round trip when the cache is
current, the common case for Allocate), then the store's read-decide-write loop on `Conflict`. The decision is re-run
on every fresh copy, so it is always made on the state it overwrites.
Listeners are called synchronously on every change, on the event loop, with the kind and key that changed.

ConfigMaps and Secrets (`sources`): a cluster may hold many (and large) ones, a node needs the few its Configurations
name, so only referenced objects are kept, and only their data (`data`, `binaryData`, `stringData`). An index
(kind, namespace, name) -> Configuration keys says who refers to what (`referrers`). Events of other ConfigMaps and
Secrets are dropped, so an object that becomes referenced may be unknown: `load_sources` reads it once; from then on
the watch keeps it current. An object is "loaded" when the cache knows it, present or absent.

Speed (Allocate is on the kubelet's pod admission path): `update_usage` decides on the parsed record, writes an object
that shares everything but `spec.deviceUsage` with the cached one, and caches the result as that record with the new
usage, so a claim parses, validates and copies nothing. A watch event is parsed against the record it replaces, so
parts whose wire form did not change (usually all but deviceUsage) are taken over instead of parsed again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from devplace import errors
from devplace.agent import properties, slots
from devplace.agent.instances import Delete, InstanceRecord
from devplace.api import Configuration
from devplace.store import Store, mutate

__all__ = ["Decide", "DecideDelete", "DecideUsage", "NodeCache", "PodInfo"]

log = logging.getLogger(__name__)

Key = tuple[str, str]
Decide = Callable[[dict[str, Any]], dict[str, Any] | None]
DecideDelete = Callable[[dict[str, Any]], dict[str, Any] | Delete | None]
DecideUsage = Callable[[InstanceRecord], slots.Usage | None]
Listener = Callable[[str, Key], None]
Source = properties.Source
_SOURCE_SECTIONS = ("data", "binaryData", "stringData")

_TOMBSTONES = 50_000


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    phase: str

    @property
    def terminated(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


def _rv(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _with_usage(obj: dict[str, Any], usage: slots.Usage) -> dict[str, Any]:
    """A new object sharing everything but `spec.deviceUsage` with `obj` (which is left untouched)."""
    return {**obj, "spec": {**obj["spec"], "deviceUsage": usage.to_wire()}}


def _key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def _slim(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the property resolver reads of a ConfigMap or Secret: its data, and enough metadata to say which."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {
        "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta},
    }
    for section in _SOURCE_SECTIONS:
        if section in obj:
            out[section] = obj[section]
    return out


class NodeCache:
    def __init__(self, store: Store, node: str) -> None:
        self.store = store
        self.node = node
        self.configurations: dict[Key, Configuration] = {}
        self.configuration_objs: dict[Key, dict[str, Any]] = {}
        self.instances: dict[Key, InstanceRecord] = {}
        self.pods: dict[Key, PodInfo] = {}
        self.sources: dict[Source, dict[str, Any]] = {}
        self._by_configuration: dict[Key, set[str]] = {}
        self._referrers: dict[Source, set[Key]] = {}
        self._references: dict[Key, frozenset[Source]] = {}
        self._loaded: set[Source] = set()
        self._revisions: dict[tuple[str, str, str], int] = {}
        self._tombstones: dict[tuple[str, str, str], int] = {}
        self.listeners: list[Listener] = []
        self._invalid: dict[tuple[str, str, str], str] = {}

    # -- reads ----------------------------------------------------------------------------------------------

    def instance(self, namespace: str, name: str) -> InstanceRecord | None:
        return self.instances.get((namespace, name))

    def instances_of(self, namespace: str, configuration: str) -> list[InstanceRecord]:
        names = self._by_configuration.get((namespace, configuration), set())
        return [self.instances[(namespace, n)] for n in sorted(names) if (namespace, n) in self.instances]

    def visible(self, namespace: str, configuration: str) -> list[InstanceRecord]:
        """The Configuration's Instances that list this node."""
        return [r for r in self.instances_of(namespace, configuration) if self.node in r.nodes]

    def configuration(self, namespace: str, name: str) -> Configuration | None:
        return self.configurations.get((namespace, name))

    def referrers(self, source: Source) -> list[Key]:
        """The Configurations whose discoveryProperties read `source` (a ConfigMap or Secret), sorted."""
        return sorted(self._referrers.get(source, ()))

    def unloaded(self, key: Key) -> list[Source]:
        """The sources the Configuration `key` refers to that the cache does not know yet (neither seen nor absent)."""
        return sorted(s for s in self._references.get(key, ()) if s not in self._loaded)

    # -- updates --------------------------------------------------------------------------------------------

    def _fresh(self, kind: str, key: Key, rv: int) -> bool:
        full = (kind, *key)
        return rv > self._revisions.get(full, -1) and rv > self._tombstones.get(full, -1)

    def apply(self, kind: str, event_type: str, obj: Mapping[str, Any], *, own: bool = False) -> None:
        """One watch event or write result (`own`: this agent's write; skips re-validation); older -> ignored."""
        key = _key(obj)
        full = (kind, *key)
        if kind in properties.SOURCE_KINDS and full not in self._referrers:
            return  # no Configuration reads it: not kept
        rv = _rv(obj)
        if not self._fresh(kind, key, rv):
            return
        if event_type == "DELETED":
            self._invalid.pop(full, None)
            self._revisions.pop(full, None)
            self._tombstones[full] = rv
            if len(self._tombstones) > _TOMBSTONES:
                for old in sorted(self._tombstones, key=self._tombstones.__getitem__)[: _TOMBSTONES // 2]:
                    del self._tombstones[old]
            self._drop(kind, key)
        else:
            self._revisions[full] = rv
            self._put(kind, key, obj, own)
        for listener in list(self.listeners):
            listener(kind, key)

    def _put(self, kind: str, key: Key, obj: Mapping[str, Any], own: bool = False) -> None:
        if kind == "Instance":
            try:
                record = InstanceRecord.from_wire(obj, validate=not own, previous=self.instances.get(key))
            except (errors.Invalid, KeyError, TypeError, ValueError) as e:
                self._refuse(kind, key, str(e))
                return
            self._put_instance(key, record)
        elif kind == "Configuration":
            try:
                configuration = Configuration.from_obj(obj)
            except errors.Invalid as e:
                self._refuse(kind, key, e.message)
                return
            self.configurations[key] = configuration
            self.configuration_objs[key] = dict(obj)
            self._invalid.pop((kind, *key), None)
            self._index(key, properties.references(configuration.spec.discovery_handler.discovery_properties, key[0]))
        elif kind == "Pod":
            spec = obj.get("spec") or {}
            if spec.get("nodeName") != self.node:
                self.pods.pop(key, None)
                return
            meta = obj.get("metadata") or {}
            phase = (obj.get("status") or {}).get("phase") or "Pending"
            self.pods[key] = PodInfo(key[0], key[1], str(meta.get("uid") or ""), str(phase))
        elif kind in properties.SOURCE_KINDS:
            self.sources[(kind, *key)] = _slim(obj)
            self._loaded.add((kind, *key))

    def _index(self, key: Key, sources: frozenset[Source]) -> None:
        """Record which sources the Configuration `key` reads; a source nobody reads any more is forgotten."""
        old = self._references.get(key, frozenset())
        if sources == old:
            return
        for source in old - sources:
            readers = self._referrers.get(source, set())
            readers.discard(key)
            if not readers:
                self._referrers.pop(source, None)
                self.sources.pop(source, None)
                self._loaded.discard(source)
                self._revisions.pop(source, None)
        for source in sources - old:
            self._referrers.setdefault(source, set()).add(key)
        if sources:
            self._references[key] = sources
        else:
            self._references.pop(key, None)

    def _put_instance(self, key: Key, record: InstanceRecord) -> None:
        old = self.instances.get(key)
        if old is not None and old.configuration != record.configuration:
            self._by_configuration.get((key[0], old.configuration), set()).discard(key[1])
        self._invalid.pop(("Instance", *key), None)
        self.instances[key] = record
        self._by_configuration.setdefault((key[0], record.configuration), set()).add(key[1])

    def _apply_record(self, record: InstanceRecord) -> None:
        """Cache a record this agent parsed or built itself (a write result or a fresh read); older -> ignored."""
        key = (record.namespace, record.name)
        if not self._fresh("Instance", key, record.resource_version):
            return
        self._revisions[("Instance", *key)] = record.resource_version
        self._put_instance(key, record)
        for listener in list(self.listeners):
            listener("Instance", key)

    def _refuse(self, kind: str, key: Key, reason: str) -> None:
        """An object that does not parse is treated as absent; said once per distinct reason, not per event."""
        full = (kind, *key)
        if self._invalid.get(full) != reason:
            self._invalid[full] = reason
            log.warning("ignoring %s %s/%s: %s", kind, key[0], key[1], reason)
        self._drop(kind, key)

    def _drop(self, kind: str, key: Key) -> None:
        if kind == "Instance":
            old = self.instances.pop(key, None)
            if old is not None:
                self._by_configuration.get((key[0], old.configuration), set()).discard(key[1])
        elif kind == "Configuration":
            self.configurations.pop(key, None)
            self.configuration_objs.pop(key, None)
            self._index(key, frozenset())
        elif kind == "Pod":
            self.pods.pop(key, None)
        elif kind in properties.SOURCE_KINDS:
            self.sources.pop((kind, *key), None)
            if (kind, *key) in self._referrers:
                self._loaded.add((kind, *key))  # known to be absent

    def replace_all(self, kind: str, items: list[dict[str, Any]]) -> set[Key]:
        """A relist: the cached objects of `kind` become exactly `items`; returns every key that changed or went."""
        current: set[Key]
        if kind == "Instance":
            current = set(self.instances)
        elif kind == "Configuration":
            current = set(self.configurations)
        elif kind in properties.SOURCE_KINDS:
            current = {(ns, name) for k, ns, name in self.sources if k == kind}
            items = [obj for obj in items if (kind, *_key(obj)) in self._referrers]
            self._loaded.update(s for s in self._referrers if s[0] == kind)  # what the listing lacks is absent
        else:
            current = set(self.pods)
        seen = {_key(obj) for obj in items}
        for obj in items:
            key = _key(obj)
            self._revisions.pop((kind, *key), None)
            self._tombstones.pop((kind, *key), None)
            self._put(kind, key, obj)
            self._revisions[(kind, *key)] = _rv(obj)
        for key in current - seen:
            self._revisions.pop((kind, *key), None)
            self._drop(kind, key)
        touched = current | seen
        for key in touched:
            for listener in list(self.listeners):
                listener(kind, key)
        return touched

    async def load_sources(self, key: Key) -> None:
        """Read the sources of Configuration `key` that the cache does not know yet (one store read each).

        A read races with the watch harmlessly: a result older than what the watch delivered is ignored, and
        `NotFound` only says "absent" for an object the watch has not shown since.
        """
        for source in self.unloaded(key):
            kind, namespace, name = source
            try:
                obj = await self.store.get(kind, name, namespace)
            except errors.NotFound:
                if source in self._referrers:
                    self._loaded.add(source)
                continue
            self.apply(kind, "MODIFIED", obj)
            if source in self._referrers:
                self._loaded.add(source)  # when the read was older than a deletion the watch showed: absent

    # -- writes (compare-and-swap) --------------------------------------------------------------------------

    async def update_usage(self, namespace: str, name: str, decide: DecideUsage) -> InstanceRecord:
        """Change who holds which slot of an Instance, by CAS; returns the record written (or, when `decide` changes
        nothing, the one it decided on).

        `decide` gets the parsed record (the cached one first, a fresh validated read after a `Conflict` or when
        the cache has none) and returns the new usage, or None for "nothing to change"; it may raise to refuse,
        and then nothing is written. Raises `NotFound` when the Instance does not exist.
        """
        key = (namespace, name)
        cached = self.instances.get(key)
        if cached is not None:
            usage = decide(cached)
            if usage is None:
                return cached
            try:
                stored = await self.store.update(_with_usage(cached.obj, usage))
            except errors.Conflict:
                pass
            else:
                record = cached.with_usage(stored, usage)
                self._apply_record(record)
                return record
        decided: list[tuple[InstanceRecord, slots.Usage | None]] = []

        def on_fresh(obj: dict[str, Any]) -> dict[str, Any] | None:
            record = InstanceRecord.from_wire(obj, previous=self.instances.get(key))
            usage = decide(record)
            decided[:] = [(record, usage)]
            return None if usage is None else _with_usage(obj, usage)

        stored = await mutate(self.store, "Instance", name, namespace, on_fresh)
        record, usage = decided[0]
        if usage is not None:
            record = record.with_usage(stored, usage)
        self._apply_record(record)
        return record

    async def mutate_instance(self, namespace: str, name: str, decide: Decide) -> dict[str, Any]:
        """Apply `decide` to the Instance until a CAS lands (first on the cached copy); returns the stored object.

        `decide` must not change its argument (the first attempt gets the cached object itself, saving a copy on
        the Allocate path); it returns a new object, or None for "nothing to change". The result is the cache's:
        callers read it and never change it either.
        """
        cached = self.instances.get((namespace, name))
        if cached is not None:
            wanted = decide(cached.obj)
            if wanted is None:
                return cached.obj
            try:
                stored = await self.store.update(wanted)
            except errors.Conflict:
                pass
            else:
                self.apply("Instance", "MODIFIED", stored, own=True)
                return stored
        stored = await mutate(self.store, "Instance", name, namespace, decide)
        self.apply("Instance", "MODIFIED", stored, own=True)
        return stored

    async def remove_instance(self, namespace: str, name: str, decide: DecideDelete, attempts: int = 16) -> None:
        """Like `mutate_instance`, but the decision may also delete (with its resourceVersion as precondition)."""
        for _ in range(attempts):
            try:
                current = await self.store.get("Instance", name, namespace)
            except errors.NotFound:
                return
            outcome = decide(current)
            try:
                if outcome is None:
                    return
                if isinstance(outcome, Delete):
                    gone = await self.store.delete(
                        "Instance", name, namespace, resource_version=outcome.resource_version
                    )
                    self.apply("Instance", "DELETED", gone)
                else:
                    stored = await self.store.update(outcome)
                    self.apply("Instance", "MODIFIED", stored, own=True)
                return
            except errors.Conflict:
                continue
            except errors.NotFound:
                return
        raise errors.Conflict(f"Instance {namespace}/{name}: gave up after {attempts} conflicting writes")

    async def refresh_instance(self, namespace: str, name: str) -> None:
        """Re-read one Instance (after a refused Allocate the cache may be behind the store)."""
        try:
            obj = await self.store.get("Instance", name, namespace)
        except errors.NotFound:
            self.forget("Instance", (namespace, name))
            return
        self.apply("Instance", "MODIFIED", obj)

    def forget(self, kind: str, key: Key) -> None:
        """Drop an object the store no longer has (learnt from a read, not a watch event) and notify."""
        full = (kind, *key)
        self._tombstones[full] = max(self._tombstones.get(full, -1), self._revisions.pop(full, -1))
        self._drop(kind, key)
        for listener in list(self.listeners):
            listener(kind, key)
