"""A scenario step's `expect` block checked against what the simulated cluster holds: pure, over plain data.

`Observed` is a snapshot the runner takes after a step (the stored objects of the kinds the block reads, what each
running node's kubelet sees as available, the last fleet decision, the step's error); `check` compares every key of
the block with it and returns one `Mismatch` per field that differs, each naming the field (`holders.akri-onvif/cam-1`)
with what was wanted and what was there, so a failed scenario says exactly what went wrong and where.

Slot holders are read as a reader says them (`holder_label`): `free`, `<node>` for an Instance-level slot, `<node>
(CL)` for a Configuration-level one (`C:<vdev>:<node>`), `claim <ns>/<name>` for a DRA claim (`D:<ns>/<claim>:<node>`).
A device is named `<configuration>/<device id>`; its Instances are found by recomputing the agent's Instance names
(`agent.instance_name`), so a shared device is one Instance and a local device seen by two nodes is two, summed.
`slots` counts a device's free and held slots and its distinct holders: what a race decides (ten nodes for five
slots) without naming its winners, which a file cannot know in advance. `fields` reads any field of a stored object
(or of the last fleet decision) by path and compares it exactly: class status, annotations, a pending pod's reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devplace.agent import instance_name
from devplace.api import lookup
from devplace.sim._scenarios import (
    DECISION,
    Expect,
    FieldStep,
    parse_count_key,
    parse_field_path,
    parse_object_key,
)

Obj = dict[str, Any]


@dataclass(frozen=True)
class Mismatch:
    """One expectation that did not hold: the field, what was wanted, what was there."""

    field: str
    wanted: Any
    got: Any

    def to_wire(self) -> dict[str, Any]:
        return {"field": self.field, "wanted": self.wanted, "got": self.got}

    def __str__(self) -> str:
        return f"{self.field}: wanted {self.wanted!r}, got {self.got!r}"


@dataclass(frozen=True)
class Observed:
    """What a step left behind. `objects`: kind (canonical, `Pod`) -> every stored object of it; `available`: node ->
    resource -> free devices its kubelet sees (running nodes only); `resource_prefix`: how Instance-level resources
    are named (`<prefix>/<instance>`), per Configuration; `decision`: the last plan or instantiate document."""

    objects: Mapping[str, Sequence[Obj]] = field(default_factory=dict)
    available: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    resource_prefix: Mapping[str, str] = field(default_factory=dict)
    decision: Mapping[str, Any] | None = None
    error: str | None = None


def kinds_read(expect: Expect) -> set[str]:
    """The canonical kinds `check` needs in `Observed.objects` for this block."""
    kinds: set[str] = set()
    for key in expect.counts or {}:
        parsed = parse_count_key(key)
        if parsed is not None:
            kinds.add(lookup(parsed[0]).kind)
    for key in expect.fields or {}:
        target = parse_object_key(key) if key != DECISION else None
        if target is not None:
            kinds.add(lookup(target[0]).kind)
    if expect.phases:
        kinds.add("Pod")
    if (
        expect.holders
        or expect.slots
        or any(r.startswith("device:") for rs in (expect.available or {}).values() for r in rs)
    ):
        kinds.add("Instance")
    return kinds


def holder_label(holder: str) -> str:
    """A deviceUsage value as a reader says it."""
    if not holder:
        return "free"
    if holder.startswith("C:") and holder.count(":") >= 2:
        return f"{holder.rsplit(':', 1)[1]} (CL)"
    if holder.startswith("D:") and holder.count(":") >= 2:
        return f"claim {holder[2:].rsplit(':', 1)[0]}"
    return holder


def device_instances(instances: Sequence[Obj], configuration: str, device: str) -> list[Obj]:
    """The Instances of `device` under `configuration` (one when shared, one per node when local)."""
    out = []
    for inst in instances:
        spec = inst.get("spec") or {}
        if spec.get("configurationName") != configuration:
            continue
        shared = bool(spec.get("shared"))
        name = inst["metadata"]["name"]
        if any(instance_name(configuration, device, node, shared) == name for node in [*(spec.get("nodes") or []), ""]):
            out.append(inst)
    return out


def holders_of(instances: Sequence[Obj]) -> dict[str, int]:
    """Slots per holder label over these Instances."""
    counts: Counter[str] = Counter()
    for inst in instances:
        for holder in ((inst.get("spec") or {}).get("deviceUsage") or {}).values():
            counts[holder_label(str(holder))] += 1
    return dict(sorted(counts.items()))


def _matches(obj: Obj, kind: str, filters: Mapping[str, str]) -> bool:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    labels = meta.get("labels") or {}
    for key, value in filters.items():
        if key == "phase":
            got: Any = (obj.get("status") or {}).get("phase", "Pending")
        elif key == "node":
            if kind == "Instance":
                if value not in (spec.get("nodes") or []):
                    return False
                continue
            got = spec.get("nodeName", "")
        elif key == "namespace":
            got = meta.get("namespace", "")
        elif key == "configuration" and kind == "Instance":
            got = spec.get("configurationName", "")
        elif key == "configuration":
            got = labels.get("akri.sh/configuration", "")
        else:
            got = labels.get(key)
        if got != value:
            return False
    return True


def _pod(objects: Sequence[Obj], ref: str) -> Obj | None:
    namespace, _, name = ref.rpartition("/")
    namespace = namespace or "default"
    return next(
        (
            p
            for p in objects
            if p["metadata"]["name"] == name and p["metadata"].get("namespace", "default") == namespace
        ),
        None,
    )


def device_resource(key: str, observed: Observed) -> str | None:
    """A resource name as the kubelet knows it; `device:<cfg>/<id>` -> its Instance-level resource (None: absent)."""
    if not key.startswith("device:"):
        return key
    configuration, _, device = key[7:].partition("/")
    found = device_instances(observed.objects.get("Instance", ()), configuration, device)
    if not found:
        return None
    prefix = observed.resource_prefix.get(configuration, "akri.sh")
    return f"{prefix}/{found[0]['metadata']['name']}"


def _app(decision: Mapping[str, Any] | None, name: str) -> Mapping[str, Any]:
    return next((a for a in (decision or {}).get("apps") or [] if a.get("name") == name), {})


def _cluster(entry: Mapping[str, Any]) -> str:
    return f"{entry.get('clusterProvider', '')}/{entry.get('cluster', '')}"


def _stored(observed: Observed, key: str) -> Obj | None:
    parsed = parse_object_key(key)
    assert parsed is not None  # refused when the scenario was loaded
    info = lookup(parsed[0])
    namespace = (parsed[1] or "default") if info.namespaced else ""
    return next(
        (
            o
            for o in observed.objects.get(info.kind, ())
            if o["metadata"]["name"] == parsed[2] and (o["metadata"].get("namespace") or "") == namespace
        ),
        None,
    )


def field_value(value: Any, path: Sequence[FieldStep]) -> Any:
    """What `path` (`parse_field_path`) reaches in `value`; None when any step finds nothing."""
    for step in path:
        if isinstance(step, int):
            value = value[step] if isinstance(value, list) and -len(value) <= step < len(value) else None
        elif isinstance(step, tuple):
            name, wanted = step
            items = value if isinstance(value, list) else []
            value = next((i for i in items if isinstance(i, dict) and str(i.get(name)) == wanted), None)
        else:
            value = value.get(step) if isinstance(value, Mapping) else None
        if value is None:
            return None
    return value


def check(expect: Expect, observed: Observed) -> list[Mismatch]:
    """Every field of `expect` that `observed` does not satisfy (empty: all held)."""
    out: list[Mismatch] = []
    if expect.error is not None:
        if observed.error is None or expect.error not in observed.error:
            out.append(Mismatch("error", expect.error, observed.error))
    elif observed.error is not None:
        out.append(Mismatch("error", None, observed.error))
    for key, wanted in (expect.counts or {}).items():
        parsed = parse_count_key(key)
        assert parsed is not None  # refused when the scenario was loaded
        kind = lookup(parsed[0]).kind
        got = sum(1 for o in observed.objects.get(kind, ()) if _matches(o, kind, parsed[1]))
        if got != wanted:
            out.append(Mismatch(f"counts.{key}", wanted, got))
    for ref, wanted_phase in (expect.phases or {}).items():
        pod = _pod(observed.objects.get("Pod", ()), ref)
        got_phase = None if pod is None else (pod.get("status") or {}).get("phase", "Pending")
        if got_phase != wanted_phase:
            out.append(Mismatch(f"phases.{ref}", wanted_phase, got_phase))
    for key, wanted_holders in (expect.holders or {}).items():
        configuration, _, device = key.partition("/")
        got_holders = holders_of(device_instances(observed.objects.get("Instance", ()), configuration, device))
        if got_holders != dict(sorted(wanted_holders.items())):
            out.append(Mismatch(f"holders.{key}", dict(sorted(wanted_holders.items())), got_holders))
    for key, wanted_slots in (expect.slots or {}).items():
        configuration, _, device = key.partition("/")
        held = holders_of(device_instances(observed.objects.get("Instance", ()), configuration, device))
        tally = {
            "free": held.get("free", 0),
            "held": sum(n for label, n in held.items() if label != "free"),
            "holders": sum(1 for label in held if label != "free"),
        }
        for name, wanted_count in wanted_slots.items():
            if tally[name] != wanted_count:
                out.append(Mismatch(f"slots.{key}.{name}", wanted_count, tally[name]))
    for node, resources in (expect.available or {}).items():
        seen = observed.available.get(node)
        for key, wanted_count in resources.items():
            resource = device_resource(key, observed)
            got_count: int | None = None
            if seen is not None:
                got_count = 0 if resource is None else seen.get(resource, 0)
            if got_count != wanted_count:
                out.append(Mismatch(f"available.{node}.{key}", wanted_count, got_count))
    for key, paths in (expect.fields or {}).items():
        target: Any = observed.decision if key == DECISION else _stored(observed, key)
        for path, wanted_value in paths.items():
            steps = parse_field_path(path)
            assert steps is not None  # refused when the scenario was loaded
            got_value = field_value(target, steps)
            if got_value != wanted_value:
                out.append(Mismatch(f"fields.{key}.{path}", wanted_value, got_value))
    for app, clusters in (expect.placement or {}).items():
        got_clusters = sorted(_cluster(c) for c in _app(observed.decision, app).get("clusters") or [])
        if got_clusters != sorted(clusters):
            out.append(Mismatch(f"placement.{app}", sorted(clusters), got_clusters))
    for app, reasons in (expect.rejected or {}).items():
        rejected = {_cluster(r): str(r.get("reason", "")) for r in _app(observed.decision, app).get("rejected") or []}
        for cluster, text in reasons.items():
            reason = rejected.get(cluster)
            if reason is None or text not in reason:
                out.append(Mismatch(f"rejected.{app}.{cluster}", text, reason))
    return out
