"""Invariants of device sharing, checked over the Instance states a store watch delivered.

Used by the end-to-end tests (seed 001's contention, the broker state machine), so they check the same rules alike:

- No double booking: between two consecutive states of an Instance, no slot passes straight from one holder to
  another (an Instance-level hold `node-a` is not a Configuration-level hold `C:<vdev>:node-a`). Every change of a
  holder is a claim of a free slot or a release.
- The history is complete: `caught_up` waits (bounded, woken by each event) until the watch has delivered every
  change the store has made so far, so a check never runs over a history that is still behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devplace import errors
from devplace.store import Store


def transitions(states: Mapping[str, Sequence[Mapping[str, str]]]) -> Iterator[tuple[str, str, str, str]]:
    """(instance, slot, before, after) for every change of a slot's holder between consecutive states."""
    for name, seq in states.items():
        for before, after in itertools.pairwise(seq):
            for slot in sorted(set(before) | set(after)):
                old, new = before.get(slot, ""), after.get(slot, "")
                if old != new:
                    yield name, slot, old, new


def double_bookings(states: Mapping[str, Sequence[Mapping[str, str]]]) -> list[str]:
    """Slots that went from one holder straight to another between consecutive states of an Instance (a slot held by
    two parties at once). Empty when every change was a claim of a free slot or a release."""
    return [f"{name} {slot}: {old!r} -> {new!r}" for name, slot, old, new in transitions(states) if old and new]


@dataclass
class UsageHistory:
    """Every distinct deviceUsage state of every Instance, in the order a store watch delivered them."""

    states: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    revision: int = 0
    """The store revision of the last event `follow` saw (of any kind): the history is complete up to it."""
    error: str = ""
    """Why the watch ended, if it did."""
    _moved: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def record(self, event_type: str, obj: Mapping[str, Any]) -> None:
        name = obj["metadata"]["name"]
        usage = {} if event_type == "DELETED" else dict((obj.get("spec") or {}).get("deviceUsage") or {})
        seq = self.states.setdefault(name, [])
        if not seq or seq[-1] != usage:
            seq.append(usage)

    def latest(self) -> dict[str, dict[str, str]]:
        return {name: seq[-1] for name, seq in self.states.items() if seq}

    def transitions(self) -> Iterator[tuple[str, str, str, str]]:
        return transitions(self.states)

    def double_bookings(self) -> list[str]:
        return double_bookings(self.states)

    async def follow(self, store: Store, since: int) -> None:
        """Record every Instance state after `since`. Watches every kind, so `revision` keeps up with the store."""
        self.revision = since
        try:
            async with store.watch(since=since) as events:
                async for event in events:
                    if event.object.get("kind") == "Instance":
                        self.record(event.type, event.object)
                    self.revision = event.revision
                    self._moved.set()
        except errors.DevplaceError as e:
            self.error = e.message
            self._moved.set()
            raise

    async def caught_up(self, store: Store, timeout: float = 5.0) -> bool:
        """Wait until every change the store has made so far reached the history; False after `timeout` seconds or
        when the watch ended."""
        try:
            async with asyncio.timeout(timeout):
                while self.revision < await store.revision():
                    if self.error:
                        return False
                    self._moved.clear()
                    if self.revision >= await store.revision():
                        break
                    await self._moved.wait()
        except TimeoutError:
            return False
        return not self.error


@contextlib.asynccontextmanager
async def recording(store: Store) -> AsyncIterator[UsageHistory]:
    """Record every Instance state from now on while the block runs (the current ones first)."""
    history = UsageHistory()
    listed = await store.list("Instance")
    for obj in listed.items:
        history.record("ADDED", obj)
    history.revision = listed.revision
    task = asyncio.get_running_loop().create_task(history.follow(store, listed.revision), name="usage-history")
    try:
        yield history
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
