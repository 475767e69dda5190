"""The brokers a Configuration wants, one function per strategy (DESIGN.md section 5, seed 002).

Pure: `brokers(configuration, instances, existing, ...)` -> the broker Pods / Jobs / pool ConfigMaps that should
exist, the brokers skipped (each with a reason for the Configuration's status), the objects to leave alone (an old
generation's Jobs) and when time alone could change the answer (a pool timeout). `existing` (the objects the
Configuration owns) is read only for the previous pool assignment, so pools stay stable.

- perNode: a Pod per (Instance, node in `nodes`), pinned by required node affinity, Akri's names and labels, the
  `{{PLACEHOLDER}}` resource key replaced by the Instance's resource. Nodes where the Configuration lost a
  resource-name clash get none (Skip `ResourceNameConflict`).
- job: a Job per online Instance, `<instance>-<generation>-job`; Jobs of earlier generations are left to finish.
- deployment: min(replicas, capacity) unpinned Pods per Instance requesting its resource (Skip `CapacityBound`
  for the rest).
- configuration: `replicas` unpinned Pods requesting `<prefix>/<configuration>: devicesPerPod`, while any device is
  online.
- pool (static): a pinned Pod per exact pool (`pools.assign_static`), requesting each member's resource; with
  `timeoutSeconds`, leftovers form a smaller pool once some have waited that long: the wait's start is kept in the
  Configuration's status (`status.pools.waitingSince`), so a restarted controller keeps counting from it.
- pool (dynamic): a pinned Pod per pool of up to `size`, whose members are listed in its ConfigMap (mounted at
  /etc/devplace/pool) and rewritten in place; the Pod requests no per-member resource, since a Pod's resources
  cannot change without restarting it.
- group: a pinned Pod per satisfiable group on one node, requesting each member's resource.
Every pooled or grouped broker gets a ConfigMap `<configuration>-pool-<id>` listing its Instances with their
brokerProperties (`instances.json`). Unpinned strategies keep off conflicting nodes (affinity `NotIn`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from devplace.api import PLACEHOLDER, resource_name, resource_prefix
from devplace.controller import _inputs as inputs
from devplace.controller import _names as names
from devplace.controller import _plans as plans
from devplace.controller import _pools as pools
from devplace.store import rfc3339

ClassMatches = Callable[[str, inputs.InstanceFacts], bool]
"""Does an Instance belong to a ResourceClass? (the resource-class selector engine, injected)."""


def no_classes(class_name: str, instance: inputs.InstanceFacts) -> bool:
    """The default `class_matches`: no Instance belongs to any class."""
    return False


@dataclass(frozen=True)
class Skip:
    """A broker not deployed, and why: `reason` is CamelCase, `node` "" when no node is concerned."""

    reason: str
    node: str
    message: str


@dataclass(frozen=True)
class Brokers:
    objects: tuple[plans.Desired, ...] = ()
    skips: tuple[Skip, ...] = ()
    retain: frozenset[plans.Key] = frozenset()
    wake_at: float | None = None
    waiting_since: float | None = None
    """Static pools with a timeout: since when leftovers have waited (kept in the Configuration's status)."""


_INSTANCES_KEY = "instances.json"


def brokers(
    configuration: inputs.ConfigurationFacts,
    instances: Iterable[inputs.InstanceFacts],
    existing: Sequence[Mapping[str, Any]] = (),
    *,
    prefix: str | None = None,
    now: float = 0.0,
    class_matches: ClassMatches = no_classes,
) -> Brokers:
    """The brokers `configuration` wants (module docstring). `instances` may include other Configurations' (groups
    read them); only the Configuration's own are deployed to otherwise."""
    if configuration.problem is not None or configuration.strategy is None:
        return Brokers()
    everyone = [i for i in instances if i.namespace == configuration.namespace]
    own = sorted((i for i in everyone if i.configuration == configuration.name), key=lambda i: i.name)
    build = _Builder(configuration, prefix)
    strategy = configuration.strategy
    if strategy == "perNode":
        return _per_node(build, own)
    if strategy == "job":
        return _jobs(build, own, existing)
    if strategy == "deployment":
        return _deployment(build, own)
    if strategy == "configuration":
        return _configuration(build, own)
    if strategy == "pool":
        if configuration.pool_mode == "dynamic":
            return _dynamic_pools(build, own, existing)
        return _static_pools(build, own, existing, now)
    if strategy == "group":
        return _groups(build, everyone, existing, class_matches)
    return Brokers(skips=(Skip("UnknownStrategy", "", f"strategy {strategy!r} is not known"),))


# -- bodies ------------------------------------------------------------------------------------------------------


_MEMO: dict[Hashable, plans.Desired] = {}
"""Bodies already built, by (Configuration fingerprint, object): the planner stays a pure function (a hit returns
an equal, never-mutated body), and a device change costs one lookup per unchanged broker instead of a rebuild."""
_MEMO_LIMIT = 200_000


def _copy(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


class _Builder:
    """Bodies of the objects one Configuration owns."""

    def __init__(self, configuration: inputs.ConfigurationFacts, prefix: str | None) -> None:
        self.cfg = configuration
        self.override = prefix
        self.prefix = resource_prefix(configuration.api_version, prefix)
        """The extended-resource prefix: the override, else the Configuration's API group (`api.devices`)."""
        c = configuration
        self.fingerprint = names.digest(
            [
                c.namespace,
                c.name,
                c.uid,
                c.api_version,
                c.generation,
                c.pod_spec,
                c.job_spec,
                c.replicas,
                c.devices_per_pod,
                sorted(c.conflicts),
                self.prefix,
            ],
            32,
        )

    def memo(self, key: Hashable, make: Callable[[], plans.Desired]) -> plans.Desired:
        full = (self.fingerprint, key)
        found = _MEMO.get(full)
        if found is None:
            if len(_MEMO) >= _MEMO_LIMIT:
                _MEMO.clear()
            found = _MEMO[full] = make()
        return found

    def labels(self, **extra: str) -> dict[str, str]:
        return {names.CONTROLLER_LABEL: names.CONTROLLER_VALUE, names.CONFIGURATION_LABEL: self.cfg.name, **extra}

    def resource(self, instance: str) -> str:
        return names.resource_name(self.prefix, instance)

    def member_resource(self, instance: inputs.InstanceFacts) -> str:
        """The resource of a pooled or grouped Instance: one of another Configuration (a group member) is named
        after its own group, as its node's agent names it."""
        if instance.configuration == self.cfg.name:
            return self.resource(instance.name)
        return resource_name(instance.api_version, instance.name, self.override)

    def metadata(self, name: str, labels: dict[str, str], owner: dict[str, Any], **annotations: str) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": name,
            "namespace": self.cfg.namespace,
            "labels": labels,
            "ownerReferences": [owner],
        }
        if annotations:
            meta["annotations"] = dict(annotations)
        return meta

    def pod(
        self,
        name: str,
        labels: dict[str, str],
        owner: dict[str, Any],
        *,
        node: str | None = None,
        avoid: frozenset[str] = frozenset(),
        placeholder: str | None = None,
        extra: Mapping[str, str] | None = None,
        config_map: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> plans.Desired:
        spec: dict[str, Any] = _copy(self.cfg.pod_spec or {})
        replaced = _replace_placeholder(spec, placeholder) if placeholder else False
        if extra and not replaced:
            _add_limits(spec, extra)
        _pin(spec, node, avoid)
        if config_map:
            _mount(spec, config_map)
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": self.metadata(name, labels, owner, **(annotations or {})),
            "spec": spec,
        }
        return plans.Desired(plans.stamped(body), "replace")

    def job(self, instance: inputs.InstanceFacts) -> plans.Desired:
        spec: dict[str, Any] = _copy(self.cfg.job_spec or {})
        template = spec.get("template")
        template_spec = template.get("spec") if isinstance(template, dict) else None
        if isinstance(template_spec, dict):
            _replace_placeholder(template_spec, self.resource(instance.name))
        labels = self.labels(**{names.INSTANCE_LABEL: instance.name})
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": self.metadata(
                names.job_name(instance.name, self.cfg.generation), labels, inputs.instance_owner(instance)
            ),
            "spec": spec,
        }
        return plans.Desired(plans.stamped(body), "keep")

    def pool_config_map(self, pool_id: str, node: str, members: Sequence[inputs.InstanceFacts]) -> plans.Desired:
        listing = [{"name": i.name, "brokerProperties": dict(sorted(i.broker_properties.items()))} for i in members]
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": self.metadata(
                names.pool_config_map_name(self.cfg.name, pool_id),
                self.labels(**{names.POOL_LABEL: pool_id, names.NODE_LABEL: node}),
                self.cfg.owner_reference(),
            ),
            "data": {_INSTANCES_KEY: json.dumps(listing, sort_keys=True)},
        }
        return plans.Desired(plans.stamped(body), "update")


def _replace_placeholder(pod_spec: dict[str, Any], resource: str) -> bool:
    """Replace the `{{PLACEHOLDER}}` resource key in every container; whether there was one."""
    found = False
    for group in ("initContainers", "containers"):
        for container in pod_spec.get(group) or []:
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            for kind in ("requests", "limits"):
                amounts = resources.get(kind)
                if isinstance(amounts, dict) and PLACEHOLDER in amounts:
                    resources[kind] = {(resource if k == PLACEHOLDER else k): v for k, v in amounts.items()}
                    found = True
    return found


def _add_limits(pod_spec: dict[str, Any], extra: Mapping[str, str]) -> None:
    containers = pod_spec.setdefault("containers", [])
    if not containers:
        containers.append({"name": "broker"})
    first = containers[0]
    limits = first.setdefault("resources", {}).setdefault("limits", {})
    limits.update(extra)


def _pin(pod_spec: dict[str, Any], node: str | None, avoid: frozenset[str]) -> None:
    fields: list[dict[str, Any]] = []
    if node is not None:
        fields.append({"key": "metadata.name", "operator": "In", "values": [node]})
    if avoid and node is None:
        fields.append({"key": "metadata.name", "operator": "NotIn", "values": sorted(avoid)})
    if not fields:
        return
    node_affinity = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [{**t, "matchFields": [*(t.get("matchFields") or []), *fields]} for t in terms]


def _mount(pod_spec: dict[str, Any], config_map: str) -> None:
    pod_spec.setdefault("volumes", []).append({"name": names.POOL_VOLUME, "configMap": {"name": config_map}})
    for container in pod_spec.get("containers") or []:
        container.setdefault("volumeMounts", []).append(
            {"name": names.POOL_VOLUME, "mountPath": names.POOL_MOUNT, "readOnly": True}
        )


# -- strategies --------------------------------------------------------------------------------------------------


def _conflict(build: _Builder, node: str, broker: str) -> Skip:
    return Skip(
        inputs.RESOURCE_NAME_CONFLICT,
        node,
        f"{broker}: {build.cfg.name} lost a resource-name clash on {node} and serves nothing there",
    )


def _per_node(build: _Builder, own: Sequence[inputs.InstanceFacts]) -> Brokers:
    objects: list[plans.Desired] = []
    skips: list[Skip] = []
    for instance in own:
        for node in instance.nodes:
            name = names.node_pod_name(instance.name, node, instance.shared or len(instance.nodes) > 1)
            if node in build.cfg.conflicts:
                skips.append(_conflict(build, node, name))
                continue
            objects.append(
                build.memo(("perNode", _identity(instance), node, name), _node_pod(build, instance, node, name))
            )
    return Brokers(tuple(objects), tuple(skips))


def _identity(instance: inputs.InstanceFacts) -> Hashable:
    """What an Instance's broker bodies depend on (besides the Configuration)."""
    return (instance.namespace, instance.name, instance.uid, instance.api_version, instance.capacity)


def _node_pod(build: _Builder, instance: inputs.InstanceFacts, node: str, name: str) -> Callable[[], plans.Desired]:
    def make() -> plans.Desired:
        labels = build.labels(**{names.INSTANCE_LABEL: instance.name, names.NODE_LABEL: node})
        owner = inputs.instance_owner(instance)
        return build.pod(name, labels, owner, node=node, placeholder=build.resource(instance.name))

    return make


def _jobs(build: _Builder, own: Sequence[inputs.InstanceFacts], existing: Sequence[Mapping[str, Any]]) -> Brokers:
    online = {i.name for i in own if i.nodes}
    objects = tuple(build.job(i) for i in own if i.nodes)
    wanted = {d.key for d in objects}
    retain = frozenset(
        plans.key_of(obj)
        for obj in existing
        if obj.get("kind") == "Job"
        and plans.key_of(obj) not in wanted
        and names.labels_of(obj).get(names.INSTANCE_LABEL) in online
        and not (obj.get("metadata") or {}).get("deletionTimestamp")  # already going: nothing to keep
    )
    return Brokers(objects, retain=retain)


def _deployment(build: _Builder, own: Sequence[inputs.InstanceFacts]) -> Brokers:
    cfg = build.cfg
    objects: list[plans.Desired] = []
    skips: list[Skip] = []
    for instance in own:
        if not instance.nodes:
            continue
        if set(instance.nodes) <= cfg.conflicts:
            for node in instance.nodes:
                skips.append(_conflict(build, node, f"{instance.name} replicas"))
            continue
        count = min(cfg.replicas, instance.capacity)
        if count < cfg.replicas:
            skips.append(
                Skip(
                    "CapacityBound",
                    "",
                    f"{instance.name}: {cfg.replicas} replicas requested, capacity {instance.capacity} runs {count}",
                )
            )
        resource = build.resource(instance.name)
        for index in range(count):
            objects.append(
                build.pod(
                    names.replica_pod_name(instance.name, index),
                    build.labels(**{names.INSTANCE_LABEL: instance.name}),
                    inputs.instance_owner(instance),
                    avoid=cfg.conflicts,
                    placeholder=resource,
                    extra={resource: "1"},
                )
            )
    return Brokers(tuple(objects), tuple(skips))


def _configuration(build: _Builder, own: Sequence[inputs.InstanceFacts]) -> Brokers:
    cfg = build.cfg
    if not any(i.nodes for i in own):
        if cfg.replicas:
            return Brokers(skips=(Skip("NoDevices", "", f"no device of {cfg.name} is online"),))
        return Brokers()
    resource = build.resource(cfg.name)
    objects = tuple(
        build.pod(
            names.configuration_pod_name(cfg.name, index),
            build.labels(),
            cfg.owner_reference(),
            avoid=cfg.conflicts,
            extra={resource: str(cfg.devices_per_pod)},
        )
        for index in range(cfg.replicas)
    )
    return Brokers(objects)


def _visibility(cfg: inputs.ConfigurationFacts, instances: Iterable[inputs.InstanceFacts]) -> dict[str, frozenset[str]]:
    return {i.name: frozenset(i.nodes) - cfg.conflicts for i in instances}


def _conflict_skips(build: _Builder, instances: Iterable[inputs.InstanceFacts]) -> list[Skip]:
    seen = sorted({n for i in instances for n in i.nodes if n in build.cfg.conflicts})
    return [_conflict(build, node, f"{build.cfg.name} pools") for node in seen]


def _previous_static(existing: Sequence[Mapping[str, Any]]) -> list[pools.Pool]:
    found: list[tuple[str, pools.Pool]] = []
    for obj in existing:
        if obj.get("kind") != "Pod":
            continue
        meta = obj.get("metadata") or {}
        raw = (meta.get("annotations") or {}).get(names.MEMBERS_ANNOTATION)
        node = names.labels_of(obj).get(names.NODE_LABEL)
        if not isinstance(raw, str) or not node:
            continue
        try:
            members = json.loads(raw)
            pool = pools.Pool(node, tuple(tuple(str(n) for n in group) for group in members))
        except (ValueError, TypeError):
            continue
        found.append((str(meta.get("name") or ""), pool))
    return [pool for _, pool in sorted(found)]


def _pooled(
    build: _Builder,
    chosen: Iterable[pools.Pool],
    by_name: Mapping[str, inputs.InstanceFacts],
    *,
    dynamic_ids: Mapping[pools.Pool, str] | None = None,
) -> list[plans.Desired]:
    objects: list[plans.Desired] = []
    for pool in chosen:
        members = [by_name[n] for n in pool.instances]
        if dynamic_ids is not None:
            pool_id = dynamic_ids[pool]
            extra: dict[str, str] = {}
            annotations: dict[str, str] = {}
        else:
            pool_id = names.digest([pool.node, [list(g) for g in pool.members]])
            extra = {build.member_resource(i): "1" for i in members}
            annotations = {names.MEMBERS_ANNOTATION: json.dumps([list(g) for g in pool.members])}
        config_map = build.pool_config_map(pool_id, pool.node, members)
        objects.append(config_map)
        objects.append(
            build.pod(
                names.pool_pod_name(build.cfg.name, pool_id),
                build.labels(**{names.POOL_LABEL: pool_id, names.NODE_LABEL: pool.node}),
                build.cfg.owner_reference(),
                node=pool.node,
                extra=extra,
                config_map=config_map.key[2],
                annotations=annotations,
            )
        )
    return objects


def _static_pools(
    build: _Builder, own: Sequence[inputs.InstanceFacts], existing: Sequence[Mapping[str, Any]], now: float
) -> Brokers:
    cfg = build.cfg
    online = [i for i in own if i.nodes]
    by_name = {i.name: i for i in online}
    visible = _visibility(cfg, online)
    needs = [pools.Need(frozenset(by_name), cfg.pool_size)]
    previous = _previous_static(existing)
    timed = cfg.pool_timeout is not None
    chosen = pools.assign_static(previous, needs, visible, keep_partial=timed)
    waiting = pools.leftovers(chosen, needs, visible)
    wake_at = since = None
    if waiting and cfg.pool_timeout is not None:
        since = cfg.pool_waiting_since if cfg.pool_waiting_since is not None else now
        due = since + cfg.pool_timeout
        if now >= due:
            chosen = pools.assign_static(previous, needs, visible, partial=True, keep_partial=True)
            waiting = pools.leftovers(chosen, needs, visible)
            since = None
        else:
            wake_at = due
    skips = _conflict_skips(build, online)
    if waiting:
        later = f"; a smaller pool forms at {rfc3339(wake_at)}" if wake_at is not None else ""
        skips.append(
            Skip(
                "PoolIncomplete",
                "",
                f"{len(waiting)} Instance(s) wait for a pool of {cfg.pool_size}: {', '.join(sorted(waiting))}{later}",
            )
        )
    return Brokers(tuple(_pooled(build, chosen, by_name)), tuple(skips), wake_at=wake_at, waiting_since=since)


def _previous_dynamic(existing: Sequence[Mapping[str, Any]]) -> dict[int, pools.Pool]:
    found: dict[int, pools.Pool] = {}
    for obj in existing:
        if obj.get("kind") != "ConfigMap":
            continue
        labels = names.labels_of(obj)
        raw_id, node = labels.get(names.POOL_LABEL, ""), labels.get(names.NODE_LABEL)
        if not raw_id.isdigit() or not node:
            continue
        try:
            listing = json.loads((obj.get("data") or {}).get(_INSTANCES_KEY) or "[]")
            members = tuple(str(entry["name"]) for entry in listing)
        except (ValueError, TypeError, KeyError):
            continue
        found.setdefault(int(raw_id), pools.Pool(node, (members,)))
    return found


def _dynamic_pools(
    build: _Builder, own: Sequence[inputs.InstanceFacts], existing: Sequence[Mapping[str, Any]]
) -> Brokers:
    cfg = build.cfg
    online = [i for i in own if i.nodes]
    by_name = {i.name: i for i in online}
    chosen = pools.assign_dynamic(_previous_dynamic(existing), by_name, _visibility(cfg, online), cfg.pool_size)
    ids = {pool: str(pool_id) for pool_id, pool in chosen.items()}
    objects = _pooled(build, chosen.values(), by_name, dynamic_ids=ids)
    return Brokers(tuple(objects), tuple(_conflict_skips(build, online)))


def _groups(
    build: _Builder,
    everyone: Sequence[inputs.InstanceFacts],
    existing: Sequence[Mapping[str, Any]],
    class_matches: ClassMatches,
) -> Brokers:
    cfg = build.cfg
    online = sorted((i for i in everyone if i.nodes), key=lambda i: i.name)
    by_name = {i.name: i for i in online}
    needs = []
    for member in cfg.members:
        if member.configuration is not None:
            candidates = frozenset(i.name for i in online if i.configuration == member.configuration)
        else:
            assert member.resource_class is not None
            candidates = frozenset(i.name for i in online if class_matches(member.resource_class, i))
        needs.append(pools.Need(candidates, member.count))
    visible = _visibility(cfg, online)
    chosen = pools.assign_static(_previous_static(existing), needs, visible)
    skips = _conflict_skips(build, online)
    if not chosen:
        wanted = ", ".join(
            f"{m.count} x {'configuration ' + m.configuration if m.configuration else 'class ' + str(m.resource_class)}"
            for m in cfg.members
        )
        skips.append(Skip("GroupUnsatisfiable", "", f"no node sees a whole group ({wanted})"))
    return Brokers(tuple(_pooled(build, chosen, by_name)), tuple(skips))
