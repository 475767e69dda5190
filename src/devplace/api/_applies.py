"""Apply: what to write so the store holds a manifest. Pure: the CLI and the simulation run it inside `store.cas`.

`plan_apply(manifest, stored)` decides, for one validated manifest (as written, `manifests.validated`) and the object
as stored (None when absent):

- `Create(object)`: the manifest without server-owned metadata (`api.meta.SERVER_OWNED_METADATA`, the one list the
  API server and the store use too).
- `Update(object)`: the manifest owns everything the user writes; the store keeps what it or the parts own:
  - server-owned metadata (`resourceVersion`, `uid`, `generation`, timestamps, `managedFields`, ...) is the stored
    one;
  - `ownerReferences` and `finalizers` are kept when the manifest has none (controllers write them);
  - `status` is kept when the manifest has none;
  - an Instance's `spec.deviceUsage` is agent state, like status: every slot that still exists (a key of the
    manifest's `deviceUsage`, else `<name>-<i>` for `i < capacity`) keeps the holder the agents wrote, and the plan
    says so in a note (`kept 2 slot holders written by agents`); holders of slots the manifest removes are dropped,
    and a note says that too.
- `Unchanged`: the stored object already is what the update would write.

A manifest that carries `metadata.resourceVersion` pins it: the plan raises `Conflict` when the stored object is at
another revision, or absent (apply never re-decides past a user's precondition).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devplace import errors
from devplace.api._registry import SERVER_OWNED_METADATA

KEPT_WHEN_ABSENT = ("ownerReferences", "finalizers")
"""Metadata the parts write: a manifest that omits them leaves the stored ones."""


@dataclass(frozen=True)
class Create:
    object: dict[str, Any]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Update:
    object: dict[str, Any]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unchanged:
    notes: tuple[str, ...] = ()


Plan = Create | Update | Unchanged


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def plan_apply(manifest: Mapping[str, Any], stored: Mapping[str, Any] | None) -> Plan:
    """Create, update or leave the object so the store holds `manifest` (see the module docstring)."""
    meta = manifest.get("metadata") or {}
    pinned = meta.get("resourceVersion")
    if stored is None:
        if pinned:
            raise errors.Conflict(
                f"resourceVersion {pinned} is given but the object does not exist; "
                "remove metadata.resourceVersion to create it"
            )
        fresh = copy.deepcopy(dict(manifest))
        fresh["metadata"] = {k: v for k, v in fresh.get("metadata", {}).items() if k not in SERVER_OWNED_METADATA}
        return Create(fresh)
    stored_meta = stored.get("metadata") or {}
    if pinned and str(pinned) != str(stored_meta.get("resourceVersion")):
        raise errors.Conflict(
            f"resourceVersion {pinned} is stale: the object is at {stored_meta.get('resourceVersion')}"
        )
    merged = copy.deepcopy(dict(manifest))
    merged_meta = {k: v for k, v in (merged.get("metadata") or {}).items() if k not in SERVER_OWNED_METADATA}
    for key in SERVER_OWNED_METADATA:
        if key in stored_meta:
            merged_meta[key] = copy.deepcopy(stored_meta[key])
    for key in KEPT_WHEN_ABSENT:
        if key not in merged_meta and key in stored_meta:
            merged_meta[key] = copy.deepcopy(stored_meta[key])
    merged["metadata"] = merged_meta
    if "status" not in merged and "status" in stored:
        merged["status"] = copy.deepcopy(stored["status"])
    notes: tuple[str, ...] = ()
    if merged.get("kind") == "Instance" and isinstance(merged.get("spec"), dict):
        merged["spec"], notes = _keep_holders(merged["spec"], stored.get("spec") or {}, str(merged_meta.get("name")))
    if merged == dict(stored):
        return Unchanged(notes)
    return Update(merged, notes)


def _keep_holders(
    spec: dict[str, Any], stored_spec: Mapping[str, Any], name: str
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`spec` with the stored slot holders kept for every slot it still has; the notes saying what was kept."""
    held = {slot: holder for slot, holder in (stored_spec.get("deviceUsage") or {}).items() if holder}
    if not held:
        return spec, ()
    written = spec.get("deviceUsage")
    if isinstance(written, Mapping):
        usage = {str(slot): holder for slot, holder in written.items()}
    else:
        capacity = spec.get("capacity", 1)
        usage = {f"{name}-{i}": "" for i in range(capacity if isinstance(capacity, int) else 1)}
    kept = 0
    for slot, holder in held.items():
        if slot in usage:
            kept += usage[slot] != holder
            usage[slot] = holder
    dropped = sum(1 for slot in held if slot not in usage)
    notes = []
    if kept:
        notes.append(f"kept {_plural(kept, 'slot holder')} written by agents")
    if dropped:
        notes.append(f"dropped {_plural(dropped, 'slot holder')} of slots the manifest removes")
    return {**spec, "deviceUsage": usage}, tuple(notes)
