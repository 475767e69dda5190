"""Shared pieces of the end-to-end scenarios: manifests, slot readers, and an Instance history recorder."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from devplace.sim import Fleet
from devplace.store import Store

__all__ = [
    "InstanceHistory",
    "cl_holder_node",
    "configuration",
    "held",
    "il",
    "instances",
    "recording",
    "usage",
]

_CL = re.compile(r"^C:(?P<vdev>.+):(?P<node>[^:]+)$")


def configuration(
    name: str = "akri-onvif", *, capacity: int = 2, unique: bool = True, details: str = "", namespace: str = "default"
) -> str:
    """An Akri-style Configuration manifest using the simulated world's `sim` discovery handler."""
    return f"""
apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: {name}
  namespace: {namespace}
spec:
  discoveryHandler:
    name: sim
    discoveryDetails: {details!r}
  capacity: {capacity}
  uniqueDevices: {"true" if unique else "false"}
"""


async def instances(fleet: Fleet, configuration_name: str | None = None) -> list[dict[str, Any]]:
    """Instances sorted by name, optionally of one Configuration."""
    items = await fleet.list("Instance")
    if configuration_name is not None:
        items = [i for i in items if i["spec"]["configurationName"] == configuration_name]
    return sorted(items, key=lambda i: i["metadata"]["name"])


def usage(instance: dict[str, Any]) -> dict[str, str]:
    return dict(instance["spec"].get("deviceUsage") or {})


def held(instance: dict[str, Any]) -> dict[str, str]:
    """Slots that somebody holds, with their holder strings."""
    return {slot: holder for slot, holder in usage(instance).items() if holder}


def cl_holder_node(holder: str) -> str | None:
    """The node of a Configuration-level holder `C:<vdev>:<node>`, or None for any other holder."""
    match = _CL.match(holder)
    return match["node"] if match else None


def il(fleet: Fleet, instance: dict[str, Any]) -> str:
    """The Instance-level resource name of an Instance."""
    return f"{fleet.resource_prefix}/{instance['metadata']['name']}"


@dataclass
class InstanceHistory:
    """Every state every Instance went through, as a store watch delivered them."""

    states: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    revision: int = 0
    """The store revision of the last event `follow` saw (of any kind): the history is complete up to it."""

    def record(self, event_type: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        self.states.setdefault(name, []).append({} if event_type == "DELETED" else usage(obj))

    async def follow(self, store: Store, since: int) -> None:
        """Record every Instance state after `since`. Watches every kind, so `revision` keeps up with the store."""
        self.revision = since
        async for event in store.watch(since=since):
            if event.object.get("kind") == "Instance":
                self.record(event.type, event.object)
            self.revision = event.revision

    async def caught_up(self, store: Store, timeout: float = 5.0) -> None:
        """Wait (a bounded poll) until every change the store has made so far has reached the history."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.revision < (wanted := await store.revision()):
            if loop.time() > deadline:
                raise AssertionError(f"the Instance watch is at revision {self.revision}, the store at {wanted}")
            await asyncio.sleep(0.001)

    def transitions(self) -> Iterator[tuple[str, str, str, str]]:
        """(instance, slot, before, after) for every change of a slot's holder between consecutive states."""
        for name, states in self.states.items():
            for before, after in itertools.pairwise(states):
                for slot in sorted(set(before) | set(after)):
                    old, new = before.get(slot, ""), after.get(slot, "")
                    if old != new:
                        yield name, slot, old, new

    def double_bookings(self) -> list[str]:
        """Slots that went from one holder straight to another: a slot held by two parties at once."""
        return [
            f"{name} {slot}: {old!r} -> {new!r}"
            for name, slot, old, new in self.transitions()
            if old and new and old != new
        ]


@asynccontextmanager
async def recording(store: Store) -> Any:
    """Record every Instance state from now on, through a store watch, while the block runs."""
    history = InstanceHistory()
    listed = await store.list("Instance")
    for obj in listed.items:
        history.record("ADDED", obj)
    task = asyncio.create_task(history.follow(store, listed.revision))
    try:
        yield history
        await history.caught_up(store)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
