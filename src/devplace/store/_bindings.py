"""Binding a Pod through the `pods/binding` subresource (`api.bound_pod` says what it does to the Pod).

A store that talks to an API server (`remote`, `kube`) POSTs the Binding, so a scheduler binds on a real cluster,
where a Pod update may not set `spec.nodeName`. Every other store writes `api.bound_pod`'s result by compare-and-swap
on the Pod: the same outcome, the same refusals (409 `Conflict` for a Pod already bound), the one concurrency rule.
Store wrappers (`DelegatingStore`) pass a binding on to the store they wrap, and `FencedStore` refuses it like any
write when its lease is lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from devplace.api import bound_pod
from devplace.clocks import Clock
from devplace.store._base import Store, rfc3339
from devplace.store._cas import cas


@runtime_checkable
class BindingStore(Protocol):
    async def bind(self, body: Mapping[str, Any]) -> None:
        """POST `body` (a v1 Binding) to the Pod's `binding` subresource."""
        ...


async def bind_pod(store: Store, body: Mapping[str, Any], *, clock: Clock) -> None:
    """Bind the Pod `body` (a v1 Binding) names: through the store's own `bind` when it has one, else by CAS with
    `api.bound_pod`. `errors.Conflict` for a Pod already bound, `errors.NotFound` for a Pod that is gone."""
    if isinstance(store, BindingStore):
        await store.bind(body)
        return
    meta = body.get("metadata") or {}
    now = rfc3339(clock.now())
    await cas(
        store,
        "Pod",
        str(meta.get("name") or ""),
        str(meta.get("namespace") or "default"),
        lambda current: bound_pod(current, body, now),
        clock=clock,
    )
