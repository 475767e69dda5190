"""Rules a write must pass that need what is already stored (Kubernetes' admission), checked before the write.

The API server applies them to every create and update, and `devplace apply` and `Fleet.apply` apply them
themselves, so they hold on any store (an embedded SQLite file as well as a server). Each rule is a refusal with the
field path; a refused write writes nothing.

- A ResourceClass's `spec` is immutable (seed 003: "post created object is immutable"): an update whose spec differs
  from the stored one is refused with `spec: field is immutable`. Specs are compared as the model reads them, so a
  rewrite that only spells the same spec differently (an omitted empty `values`) is no change.
- A new ResourceClass's `classRef`s must name stored classes and form no cycle: the new class is resolved together
  with the stored ones by the scheduler's own resolution (`scheduler.classes.resolve_each`) and refused with the
  field of its first bad reference (`spec.resourceSelector[0].classRef: class 'x' (referenced by 'y') does not
  exist`, `...: cycle y -> y`). A name that is already taken is left to the store (409 AlreadyExists).
Since specs never change, a class accepted at creation stays valid until a class it references is deleted; the
scheduler then refuses it with the same reason until that class exists again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devplace import errors
from devplace.api import ResourceClass, update_problems
from devplace.scheduler._classes import resolve_each
from devplace.store import Admission, Store


def _spec(obj: Mapping[str, Any]) -> Any:
    """The spec as the model reads it (defaults applied), or as written when it does not validate."""
    try:
        return ResourceClass.from_obj(obj).spec.to_wire()
    except errors.Invalid:
        return obj.get("spec")


def admit_update(current: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Refuse replacing `current` by `new` when a rule forbids it (module docstring); pure."""
    if new.get("kind") == "ResourceClass" and _spec(current) != _spec(new):
        raise errors.Invalid.field("spec", "field is immutable")
    found = list(update_problems(current, new))  # the DRA kinds' immutable fields (api.dra)
    if found:
        raise errors.Invalid("; ".join(str(f) for f in found), found)


async def admit_create(store: Store, new: Mapping[str, Any]) -> None:
    """Refuse creating `new` when it conflicts with what `store` holds (module docstring)."""
    if new.get("kind") != "ResourceClass":
        return
    name = str(new["metadata"]["name"])
    stored = {str(o["metadata"]["name"]): o.get("spec") for o in (await store.list("ResourceClass", "")).items}
    if name in stored:
        return  # the store answers AlreadyExists
    refused = resolve_each({**stored, name: new.get("spec")})[1]
    if name in refused:
        raise refused[name]


ADMISSION = Admission(create=admit_create, update=admit_update)
"""These rules as `store.applies.apply_object` takes them (`devplace apply`, `Fleet.apply`)."""
