"""The agent's view of the store: typed informers over what it reads.

`NodeCache` holds one `Informer` per kind the agent reads, each filtered by the store (on the server for the remote
backend), so an agent receives only what it needs:
- Configurations, all namespaces, each parsed into a `ConfiguredEntry` (the model and its wire object).
- The Instances that concern this node (`instance_routes`: those that list it or whose slots it holds, and those
  that list no node, which any agent of their Configuration may expire), all namespaces: an informer route, so in
  a `Fleet` of a thousand agents an Instance's change reaches the one to three agents it concerns, and an agent's
  cache and work grow with its own devices, not the cluster's. Each is parsed once into an `InstanceRecord`
  (against the record it replaces: unchanged parts are taken over, not parsed again), indexed by its Configuration
  and by the nodes it lists. `instance()` also reads one the route leaves out (a shared device's Instance another
  node made, which this node is about to join), parsed on demand.
- Pods bound to this node only (`spec.nodeName=<node>`).
- Only the ConfigMaps and Secrets that its Configurations' discoveryProperties read: one small informer per object
  (`namespace` + `metadata.name=<name>`), started when the first Configuration refers to it and stopped when none
  does, keeping only the object's data. An agent never receives the cluster's other Secrets.
An object that does not parse is absent (the informer logs it once); change handlers (`subscribe`) run on the event
loop after each change and only mark work.

The writes that keep this view current are in `writes`; they `record` what they wrote and read here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from devplace.agent import _properties as properties
from devplace.agent._configurations import ConfigurationView
from devplace.agent._instances import InstanceRecord
from devplace.store import Informer, Route, Store
from devplace.supervisors import Supervisor

Key = tuple[str, str]
Source = properties.Source
_SOURCE_SECTIONS = ("data", "binaryData", "stringData")


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    phase: str

    @property
    def terminated(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True)
class ConfiguredEntry:
    """A Configuration as the agent caches it: what the agent reads of it (`ConfigurationView`) and the wire object."""

    obj: dict[str, Any]
    model: ConfigurationView

    @property
    def references(self) -> frozenset[Source]:
        return properties.property_references(self.model.spec.discovery_handler.discovery_properties)


def parse_configuration(obj: dict[str, Any], previous: ConfiguredEntry | None) -> ConfiguredEntry:
    return ConfiguredEntry(obj, ConfigurationView.from_obj(obj))


def parse_instance(obj: dict[str, Any], previous: InstanceRecord | None) -> InstanceRecord:
    return InstanceRecord.from_wire(obj, previous=previous)


ORPHANED: Hashable = ("", "orphaned")
"""The route key of an Instance that lists no node (a tuple: never a node's name)."""


def instance_routes(obj: Mapping[str, Any]) -> set[Hashable]:
    """The nodes an Instance concerns, read from the wire object (it may be malformed: never raises): those it lists,
    those its slots name (a node that left still frees what it holds), `ORPHANED` when it lists none.

    A holder names its node last, after the last `:` (`node-a`, `C:<vdev>:node-a`, `D:<ns>/<claim>:node-a`; node
    names have no `:`), which is also what `api.named_node` reads from a holder that breaks the grammar: one string
    operation per slot, on every change of every Instance a process watches."""
    spec = obj.get("spec")
    if not (type(spec) is dict or isinstance(spec, Mapping)):  # a decoded object is a dict: no ABC check for it
        return {ORPHANED}
    nodes = spec.get("nodes")
    out: set[Hashable] = {n for n in nodes if isinstance(n, str)} if isinstance(nodes, list) else set()
    if not out:
        out.add(ORPHANED)
    usage = spec.get("deviceUsage")
    if type(usage) is dict or isinstance(usage, Mapping):
        for raw in usage.values():
            if raw and isinstance(raw, str):
                out.add(raw.rpartition(":")[2])
    return out


def parse_pod(obj: dict[str, Any], previous: PodInfo | None) -> PodInfo:
    meta = obj.get("metadata") or {}
    phase = (obj.get("status") or {}).get("phase") or "Pending"
    return PodInfo(meta.get("namespace") or "", meta["name"], str(meta.get("uid") or ""), str(phase))


def slim(obj: dict[str, Any], previous: Any) -> dict[str, Any]:
    """What the property resolver reads of a ConfigMap or Secret: its data, and enough metadata to say which."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {"metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}}
    for section in _SOURCE_SECTIONS:
        if section in obj:
            out[section] = obj[section]
    return out


class Sources:
    """The ConfigMaps and Secrets Configurations read, each through its own informer while someone reads it.

    `watch(configuration, sources)` says what a Configuration reads now; an informer starts (a supervised loop) for
    each newly read object and stops when no Configuration reads it any more. `on_change(source)` is called when a
    read object changes, appears, goes, or is first known (present or absent: `loaded`).
    """

    def __init__(self, store: Store, supervisor: Supervisor, on_change: Callable[[Source], None]) -> None:
        self.store = store
        self.supervisor = supervisor
        self.on_change = on_change
        self._informers: dict[Source, Informer[dict[str, Any]]] = {}
        self._tasks: dict[Source, list[asyncio.Task[Any]]] = {}
        self._referrers: dict[Source, set[Key]] = {}
        self._references: dict[Key, frozenset[Source]] = {}
        self._started = 0

    def referrers(self, source: Source) -> list[Key]:
        """The Configurations whose discoveryProperties read `source`, sorted."""
        return sorted(self._referrers.get(source, ()))

    def watched(self) -> list[Source]:
        """The sources an informer runs for now, sorted."""
        return sorted(self._informers)

    def informer(self, source: Source) -> Informer[dict[str, Any]] | None:
        return self._informers.get(source)

    def loaded(self, key: Key) -> bool:
        """Whether every source the Configuration `key` reads is known (present or absent)."""
        return all(self._informers[s].synced.is_set() for s in self._references.get(key, ()) if s in self._informers)

    def values(self) -> dict[Source, dict[str, Any]]:
        """Every read source the store has, by (kind, namespace, name)."""
        out: dict[Source, dict[str, Any]] = {}
        for source, informer in self._informers.items():
            obj = informer.get(source[1], source[2])
            if obj is not None:
                out[source] = obj
        return out

    def watch(self, key: Key, sources: frozenset[Source]) -> None:
        old = self._references.get(key, frozenset())
        if sources == old:
            return
        for source in sorted(old - sources):
            readers = self._referrers.get(source, set())
            readers.discard(key)
            if not readers:
                self._referrers.pop(source, None)
                self._stop(source)
        for source in sorted(sources - old):
            self._referrers.setdefault(source, set()).add(key)
            if source not in self._informers:
                self._start(source)
        if sources:
            self._references[key] = sources
        else:
            self._references.pop(key, None)

    def _start(self, source: Source) -> None:
        kind, namespace, name = source
        informer: Informer[dict[str, Any]] = Informer(
            self.store,
            kind,
            slim,
            namespace=namespace,
            fields=f"metadata.name={name}",
            name=f"{kind} {namespace}/{name}",
        )
        informer.subscribe(lambda change: self.on_change(source))
        self._informers[source] = informer
        self._started += 1
        label = f"source {kind} {namespace}/{name} #{self._started}"  # unique: a stopped one may still be ending

        async def loaded() -> None:
            await informer.wait_synced()
            self.on_change(source)  # known now, present or absent

        self._tasks[source] = [
            self.supervisor.loop(label, informer.run),
            self.supervisor.spawn(f"load {label}", loaded),
        ]

    def _stop(self, source: Source) -> None:
        informer = self._informers.pop(source, None)
        if informer is not None:
            informer.close()
        for task in self._tasks.pop(source, []):
            task.cancel()


class NodeCache:
    """Informers over what the agent reads, and typed accessors (see the module docstring)."""

    def __init__(self, store: Store, node: str, supervisor: Supervisor) -> None:
        self.store = store
        self.node = node
        self.supervisor = supervisor
        self.configurations: Informer[ConfiguredEntry] = Informer(store, "Configuration", parse_configuration)
        self.instances: Informer[InstanceRecord] = Informer(
            store,
            "Instance",
            parse_instance,
            indexes={
                "configuration": lambda r: [(r.namespace, r.configuration)],
                "node": lambda r: r.nodes,
            },
            route=Route(instance_routes, frozenset({node, ORPHANED})),
        )
        self.pods: Informer[PodInfo] = Informer(store, "Pod", parse_pod, fields=f"spec.nodeName={node}")
        self.sources = Sources(store, supervisor, self._source_changed)
        self.source_listeners: list[Callable[[Source], None]] = []
        self.configurations.subscribe(self._configuration_changed)

    # -- lifecycle -----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """List every kind once (so the agent starts on a full view), then keep each current under the supervisor."""
        for informer in (self.configurations, self.instances, self.pods):
            await informer.list_once()
        for informer in (self.configurations, self.instances, self.pods):
            self.supervisor.loop(f"informer {informer.name}", informer.run)

    # -- reads ---------------------------------------------------------------------------------------------------

    def instance(self, namespace: str, name: str) -> InstanceRecord | None:
        """The Instance, whether or not it concerns this node (module docstring)."""
        return self.instances.peek(namespace, name)

    def instances_of(self, namespace: str, configuration: str) -> list[InstanceRecord]:
        """The Configuration's Instances that concern this node."""
        return self.instances.by("configuration", (namespace, configuration))

    def visible(self, namespace: str, configuration: str) -> list[InstanceRecord]:
        """The Configuration's Instances that list this node."""
        return [r for r in self.instances_of(namespace, configuration) if self.node in r.nodes]

    def on_node(self) -> list[InstanceRecord]:
        """Every Instance that lists this node."""
        return self.instances.by("node", self.node)

    def configuration(self, namespace: str, name: str) -> ConfigurationView | None:
        entry = self.configurations.get(namespace, name)
        return None if entry is None else entry.model

    def configuration_obj(self, namespace: str, name: str) -> dict[str, Any] | None:
        entry = self.configurations.get(namespace, name)
        return None if entry is None else entry.obj

    def source_values(self) -> dict[Source, dict[str, Any]]:
        return self.sources.values()

    def api_versions(self) -> dict[Key, str]:
        """Every Configuration's apiVersion, by (namespace, name): what its extended resources are named by."""
        return {key: entry.model.api_version for key, entry in self.configurations.items()}

    # -- sources -------------------------------------------------------------------------------------------------

    def _configuration_changed(self, change: Any) -> None:
        entry: ConfiguredEntry | None = change.new
        self.sources.watch(change.key, frozenset() if entry is None else entry.references)

    def _source_changed(self, source: Source) -> None:
        for listener in list(self.source_listeners):
            listener(source)
