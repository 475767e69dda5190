"""Sample wire objects and a bounded event reader shared by the store tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from devplace.store import Event

WATCH_BOUND = 5.0  # seconds: a bound on waiting for an event that must come, never an expectation of speed


def configmap(name: str, namespace: str = "default", *, labels: dict[str, str] | None = None, **data: str) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}


def node(name: str, *, labels: dict[str, str] | None = None, spec: dict | None = None) -> dict:
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec or {}}


def pod(name: str, namespace: str = "default", node_name: str = "", *, labels: dict[str, str] | None = None) -> dict:
    """A Pod bound to `node_name` (unbound when empty: no `spec.nodeName`)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


async def take(stream: AsyncIterator[Event], n: int) -> list[Event]:
    async def collect() -> list[Event]:
        return [await anext(stream) for _ in range(n)]

    return await asyncio.wait_for(collect(), WATCH_BOUND)


def summary(events: list[Event]) -> list[tuple[str, str, str, int]]:
    return [(e.type, e.object["kind"], e.object["metadata"]["name"], e.revision) for e in events]
