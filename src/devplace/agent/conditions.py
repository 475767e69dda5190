"""Per-node conditions on a Configuration's status: why discovery does not work on a node.

Bad discoveryDetails, discoveryProperties that do not resolve (a required Secret or key missing), a handler that is
not registered on the node, or a handler that went away must not crash the agent; they become `status.conditions`
entries `{type: DiscoveryFailed, status: "True", reason, message, node}`, one per node (several agents write the
same Configuration, each only its own entry, each by compare-and-swap).
A node whose discovery works again removes its entry. Pure: the agent applies `with_condition` inside `mutate`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DISCOVERY_FAILED",
    "HANDLER_NOT_FOUND",
    "HANDLER_UNAVAILABLE",
    "INVALID_DETAILS",
    "INVALID_PROPERTIES",
    "DiscoveryFailure",
    "with_condition",
]

DISCOVERY_FAILED = "DiscoveryFailed"
INVALID_DETAILS = "InvalidDiscoveryDetails"
INVALID_PROPERTIES = "InvalidDiscoveryProperties"
HANDLER_NOT_FOUND = "DiscoveryHandlerNotFound"
HANDLER_UNAVAILABLE = "DiscoveryHandlerUnavailable"


@dataclass(frozen=True)
class DiscoveryFailure:
    reason: str
    message: str


def with_condition(
    obj: Mapping[str, Any], node: str, failure: DiscoveryFailure | None, now: str
) -> dict[str, Any] | None:
    """`obj` (a Configuration) with this node's DiscoveryFailed condition set to `failure` (None: removed).

    Returns None when the stored condition already says the same, so an unchanged state is never rewritten.
    `now` (RFC 3339) becomes `lastTransitionTime` only when the condition is new or changes.
    """
    status = dict(obj.get("status") or {})
    conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    mine = [c for c in conditions if c.get("type") == DISCOVERY_FAILED and c.get("node") == node]
    others = [c for c in conditions if not (c.get("type") == DISCOVERY_FAILED and c.get("node") == node)]
    if failure is None:
        if not mine:
            return None
        new_conditions = others
    else:
        current = mine[0] if len(mine) == 1 else None
        if current and current.get("reason") == failure.reason and current.get("message") == failure.message:
            return None
        entry = {
            "type": DISCOVERY_FAILED,
            "status": "True",
            "reason": failure.reason,
            "message": failure.message,
            "node": node,
            "lastTransitionTime": now,
        }
        new_conditions = [*others, entry]
    out = copy.deepcopy(dict(obj))
    new_status = dict(status)
    if new_conditions:
        new_status["conditions"] = new_conditions
    else:
        new_status.pop("conditions", None)
    out["status"] = new_status
    return out
