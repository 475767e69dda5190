"""Node cleanup decisions: which nodes are gone, and what an Instance looks like without them.

Pure. A node named in an Instance is gone when
- its Node was deleted (the controller saw the deletion): at once;
- its Node is NotReady (condition Ready False or Unknown) for `grace` seconds, counted from the condition's
  `lastTransitionTime` (or from when the controller first noticed, when the Node gives none);
- no Node of that name exists and none has for `grace` seconds since the controller first noticed (an agent may
  write its Instance before its Node registers; a restarted controller starts counting again).
`without_nodes(instance, gone)` removes the gone nodes from `spec.nodes` and frees the slots they held in
`spec.deviceUsage` (holder `"<node>"` or `"C:<vdev>:<node>"` -> `""`, a retiring slot removed: `api.devices.released`,
the slot rules' one definition); an Instance no node sees any more is deleted
(Akri's rule; the agents that would delete it are gone with their nodes). It is the `decide` of a `cas`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any

from devplace.api import named_node, released
from devplace.controller import _inputs as inputs
from devplace.store import DELETE, Delete


@dataclass(frozen=True)
class NodeState:
    """A Node as cleanup sees it: ready or not, and since when it is not (None: unknown)."""

    name: str
    ready: bool
    not_ready_since: float | None = None


def node_state(obj: Mapping[str, Any]) -> NodeState:
    meta = obj.get("metadata") or {}
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            if condition.get("status") == "True":
                break
            return NodeState(str(meta.get("name") or ""), False, inputs.seconds_of(condition.get("lastTransitionTime")))
    return NodeState(str(meta.get("name") or ""), True)


def gone_nodes(
    referenced: Iterable[str],
    nodes: Mapping[str, NodeState],
    *,
    deleted: Set[str],
    noticed: Mapping[str, float],
    now: float,
    grace: float,
) -> tuple[frozenset[str], float | None]:
    """The referenced nodes that are gone, and when the next one would be (module docstring)."""
    gone: set[str] = set()
    wake_at: float | None = None
    for name in set(referenced):
        state = nodes.get(name)
        if state is not None and state.ready:
            continue
        if state is None and name in deleted:
            gone.add(name)
            continue
        since = state.not_ready_since if state is not None else None
        if since is None:
            since = noticed.get(name, now)
        due = since + grace
        if now >= due:
            gone.add(name)
        else:
            wake_at = due if wake_at is None else min(wake_at, due)
    return frozenset(gone), wake_at


def holder_node(holder: str) -> str | None:
    """The node of a slot holder: `"<node>"` (IL) or `"C:<vdev>:<node>"` (CL); None for a free slot."""
    return named_node(holder)


def nodes_of(instance: Mapping[str, Any]) -> set[str]:
    """Every node an Instance names: in `spec.nodes` and as a slot holder."""
    spec = instance.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    found = {n for n in spec.get("nodes") or [] if isinstance(n, str)}
    usage = spec.get("deviceUsage")
    for holder in usage.values() if isinstance(usage, Mapping) else ():
        node = holder_node(holder) if isinstance(holder, str) else None
        if node:
            found.add(node)
    return found


def without_nodes(instance: Mapping[str, Any], gone: frozenset[str]) -> dict[str, Any] | Delete | None:
    """`instance` without the gone nodes and their slots; `DELETE` when no node is left; None when untouched."""
    spec = instance.get("spec")
    if not isinstance(spec, Mapping) or not (nodes_of(instance) & gone):
        return None
    nodes = [n for n in spec.get("nodes") or [] if n not in gone]
    if not nodes:
        return DELETE
    out = copy.deepcopy(dict(instance))
    out["spec"]["nodes"] = nodes
    usage = spec.get("deviceUsage")
    if isinstance(usage, Mapping):
        capacity = spec.get("capacity", 1)
        out["spec"]["deviceUsage"] = released(
            str(out["metadata"].get("name")), capacity if isinstance(capacity, int) else 1, usage, gone
        )
    return out
