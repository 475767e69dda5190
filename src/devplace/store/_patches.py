"""Conditional JSON patches: a write whose compare is on the fields its decision read, not on the whole object.

A `cas` compares the whole object (its resourceVersion). On an object many writers change at once (a shared
Instance's `deviceUsage`, where every node that sees it claims and frees slots), most such writes lose to a write of
another field: each loss costs a refused write, a fresh read and a new decision, and under load the retries outnumber
the writes that land. An RFC 6902 JSON patch whose `test` operations name exactly what the decision rested on (for a
slot claim: the Instance's uid, nodes and capacity, and the old holder of each slot it changes) fails only when one of
those changed. The API server applies it by its own compare-and-swap on the stored object, so the store still sees
nothing but compare-and-swaps (DESIGN.md section 3) and no write is blind: a failed `test` changes nothing. `cas`
sends a decision's patch (`Decided.patch`) and writes the whole object when it fails.

A store that talks to an API server (`remote`, `kube`) offers it (`JsonPatchStore`: the PATCH with
`application/json-patch+json`, as `kubectl patch --type=json` sends it; a failed test is 422 `Invalid` from devplace's
server and from Kubernetes). The other stores have no round trip to save and do not offer it: their callers use `cas`.
Store wrappers (`DelegatingStore`, `FencedStore`) do not offer it either, so a fenced part never writes around its
fence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeGuard, runtime_checkable


@runtime_checkable
class JsonPatchStore(Protocol):
    async def json_patch(
        self,
        kind: str,
        name: str,
        namespace: str,
        ops: Sequence[Mapping[str, Any]],
        *,
        api_version: str | None = None,
    ) -> dict[str, Any]:
        """Apply `ops` (RFC 6902) to the stored object, all or nothing; the object written. A failed `test` is
        `errors.Invalid` and writes nothing; `errors.NotFound` when the object does not exist."""
        ...


def takes_patches(store: object) -> TypeGuard[JsonPatchStore]:
    """`isinstance(store, JsonPatchStore)`, decided once per class: a runtime protocol check walks the class's
    attributes every time, and an agent asks on every claim and every release."""
    kind = type(store)
    found = _PATCHING.get(kind)
    if found is None:
        found = _PATCHING[kind] = isinstance(store, JsonPatchStore)
    return found


_PATCHING: dict[type, bool] = {}
