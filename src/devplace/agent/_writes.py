"""The agent's writes: every change it makes to an Instance or a Configuration, each one `store.cas`.

Writes are `store.cas` (the one read-decide-write loop): the first decision is made on the cached wire object
(`first=`), so a claim on a current cache is one round trip; a `Conflict` or a refusal made on the cached copy is
decided again on a fresh read, never trusted as final (a slot the cache thinks is taken may be free by now). Every
write result, and every fresh read a decision was made on, goes back into the informer (`record`), newer revision
wins, so the cache never goes back in time and a late write result cannot resurrect a deleted object.

Contention backoff uses `SystemClock`, not the agent's clock: the peers an agent races with are real processes (or
real tasks) even in a simulation, and a simulation's `FakeClock` moves only when told, so a backoff on it would
stall a write until the scenario next advances time. Grace periods stay on the agent's clock (see `agents`).

Speed (Allocate is on the kubelet's pod admission path): `update_usage` decides on the parsed record, writes an object
that shares everything but `spec.deviceUsage` with the cached one, and caches the result as that record with the new
usage, so a claim parses, validates and copies nothing.

Contention: every node that sees a shared Instance claims and frees its slots, so a CAS on the whole object mostly loses
to writes of other slots (measured in `bench/distributed.py`: about one lost write and one fresh read per write that
landed). A decision that rests on single slots (`slot_local`: an Instance-level claim, a release; the usage `exact`, so
a free slot is claimable whatever the others hold) offers `store.cas` its write also as a JSON patch whose `test`
operations are what it read: the Instance's uid, nodes and capacity, and each changed slot's old holder (`slot_patch`).
Through an API server (remote, kube) the patch is sent and loses only to a change of those fields; one that fails is
written as the whole object, so refusals and retries stay the CAS's. Configuration-level and DRA claims read other
slots (who else the holder holds) and offer no patch.

These are functions over the `caches.NodeCache` they keep current: Allocate's claim (`deviceplugins`) and the
releaser's frees go through `update_usage`, the reconciler's Instance lifecycle through `create_instance` and
`mutate_instance`, the per-node conditions through `mutate_configuration`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from devplace import errors
from devplace.agent import _slots as slots
from devplace.agent._caches import NodeCache
from devplace.agent._instances import InstanceRecord
from devplace.clocks import SystemClock
from devplace.store import Decided, Delete, Written, cas, takes_patches

Decide = Callable[[dict[str, Any]], dict[str, Any] | Delete | None]
DecideUsage = Callable[[InstanceRecord], slots.Usage | None]
V = TypeVar("V")

CONTENTION_CLOCK = SystemClock()
"""Paces CAS retries against other writers (real peers: see the module docstring)."""


def _with_usage(obj: dict[str, Any], usage: slots.Usage) -> dict[str, Any]:
    """A new object sharing everything but `spec.deviceUsage` with `obj` (which is left untouched)."""
    return {**obj, "spec": {**obj["spec"], "deviceUsage": usage.to_wire()}}


def slot_patch(record: InstanceRecord, usage: slots.Usage) -> list[dict[str, Any]] | None:
    """The JSON patch that writes `usage` over `record` for a decision that rests on single slots: `test` the
    Instance's uid, nodes and capacity and each changed slot's old holder, then `replace` those slots. None when the
    decision cannot rest on single slots (the record's usage is not `exact`, or `usage` has other slots)."""
    old = record.obj["spec"].get("deviceUsage")
    if not record.usage.exact or not isinstance(old, dict) or usage.holders.keys() != old.keys():
        return None
    meta, spec = record.obj["metadata"], record.obj["spec"]
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
        {"op": "test", "path": "/spec/nodes", "value": spec.get("nodes")},
        {"op": "test", "path": "/spec/capacity", "value": spec.get("capacity")},
    ]
    for slot, raw in usage.to_wire().items():
        if raw != old[slot]:
            path = "/spec/deviceUsage/" + slot.replace("~", "~0").replace("/", "~1")  # RFC 6901
            ops += [{"op": "test", "path": path, "value": old[slot]}, {"op": "replace", "path": path, "value": raw}]
    return ops


async def update_usage(
    cache: NodeCache, namespace: str, name: str, decide: DecideUsage, *, slot_local: bool = False
) -> InstanceRecord:
    """Change who holds which slot of an Instance, by CAS; returns the record written (or, when `decide` changes
    nothing, the one it decided on).

    `decide` gets the parsed record (the cached one first, then a fresh validated read after a `Conflict`, a
    refusal, or when the cache has none) and returns the new usage, or None for "nothing to change"; it may raise
    `errors.Refused`, and then nothing is written (a refusal on the cached record is decided again on a fresh
    read first). Raises `NotFound` when the Instance does not exist. `slot_local`: whether `decide` reads only the
    slots it changes (module docstring: then the write may be a conditional patch).
    """
    record, _ = await update_usage_for(
        cache, namespace, name, lambda record: (decide(record), None), slot_local=slot_local
    )
    return record


async def update_usage_for(
    cache: NodeCache,
    namespace: str,
    name: str,
    decide: Callable[[InstanceRecord], tuple[slots.Usage | None, V]],
    *,
    slot_local: bool = False,
) -> tuple[InstanceRecord, V]:
    """`update_usage` whose `decide` also returns a value (the claim it made), handed back with the record: the
    value of the decision the write rests on."""
    cached = cache.instance(namespace, name)
    patching = slot_local and takes_patches(cache.store)

    def on(obj: dict[str, Any]) -> Decided[tuple[InstanceRecord, slots.Usage | None, V]]:
        if cached is not None and obj is cached.obj:
            record = cached
        else:
            record = InstanceRecord.from_wire(obj, previous=cache.instances.get(namespace, name))
            cache.instances.record(obj, parsed=record)  # the cache catches up with what was read
        usage, value = decide(record)
        if usage is None:
            return Decided(None, (record, usage, value))
        patch = slot_patch(record, usage) if patching else None
        return Decided(_with_usage(obj, usage), (record, usage, value), patch)

    written = await _cas_instance(cache, namespace, name, on, cached)
    record, usage, value = written.value
    if written.action == "updated" and usage is not None:
        record = record.with_usage(written.object, usage)
        cache.instances.record(written.object, parsed=record)
    elif written.action == "patched":  # other slots may have changed too: the written object is read as it is
        record = InstanceRecord.from_wire(written.object, previous=cache.instances.get(namespace, name))
        cache.instances.record(written.object, parsed=record)
    return record, value


async def mutate_instance(cache: NodeCache, namespace: str, name: str, decide: Decide) -> dict[str, Any] | None:
    """Apply `decide` to the Instance until a CAS lands (first on the cached copy); returns the stored object, or
    None when the Instance is deleted or gone. `decide` must not change its argument; it returns a new object,
    `DELETE` (on the condition that the object is still the one it decided on), or None."""
    cached = cache.instance(namespace, name)
    try:
        written = await _cas_instance(cache, namespace, name, lambda obj: Decided(decide(obj), None), cached)
    except errors.NotFound:
        return None
    if written.action == "deleted":
        cache.instances.record(written.object, deleted=True)
        return None
    if written.action == "updated":
        previous = cache.instances.get(namespace, name)
        cache.instances.record(
            written.object, parsed=InstanceRecord.from_wire(written.object, validate=False, previous=previous)
        )
    elif cached is None or written.object is not cached.obj:
        cache.instances.record(written.object)  # a fresh read: the cache catches up
    return written.object


async def _cas_instance(
    cache: NodeCache,
    namespace: str,
    name: str,
    decide: Callable[[dict[str, Any]], Decided[V]],
    cached: InstanceRecord | None,
) -> Written[V]:
    """`store.cas` on an Instance, first on the cached copy; an Instance found gone is forgotten (and `NotFound`
    raised)."""
    try:
        return await cas(
            cache.store,
            "Instance",
            name,
            namespace,
            decide,
            first=None if cached is None else cached.obj,
            clock=CONTENTION_CLOCK,
        )
    except errors.NotFound:
        cache.instances.forget(namespace, name)
        raise


async def create_instance(cache: NodeCache, body: Mapping[str, Any]) -> dict[str, Any]:
    """Create an Instance (`AlreadyExists` when someone else did) and cache it."""
    stored = await cache.store.create(body)
    cache.instances.record(stored, parsed=InstanceRecord.from_wire(stored, validate=False))
    return stored


async def mutate_configuration(cache: NodeCache, namespace: str, name: str, decide: Decide) -> dict[str, Any] | None:
    """CAS a change of a Configuration (first on the cached copy) and cache the result; None when it is gone."""
    first = cache.configuration_obj(namespace, name)
    try:
        written = await cas(cache.store, "Configuration", name, namespace, decide, first=first, clock=CONTENTION_CLOCK)
    except errors.NotFound:
        cache.configurations.forget(namespace, name)
        return None
    cache.configurations.record(written.object)
    return written.object
