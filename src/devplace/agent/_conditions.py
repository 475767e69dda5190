"""Per-node conditions on a Configuration's status: why it does not work, or is not served, on a node.

Two condition types, each entry `{type, status: "True", reason, message, node, lastTransitionTime}`, one per
(type, node): several agents write the same Configuration, each only its own entries, each by compare-and-swap.
- `DiscoveryFailed`: bad discoveryDetails, discoveryProperties that do not resolve (a required Secret or key
  missing), a handler that is not registered on the node, or a handler that went away must not crash the agent; they
  become this entry. A node whose discovery works again removes it. Written by the discovery side of the agent only.
- `ResourceNameConflict`: the Configuration lost a resource-name clash on the node (`clashes`) and serves nothing
  there. Removed when the clash goes away. Written by the plugin side of the agent only: a separate type, so the two
  writers never overwrite each other's entry (one entry with two writers would flap).
Pure: the agent applies `with_condition` inside `store.cas`.

One condition goes on the agent's Node instead (`with_node_condition`, a Kubernetes NodeCondition: `{type, status,
reason, message, lastHeartbeatTime, lastTransitionTime}`, one per type): `DevplaceKubeletMissing` while the
kubelet's registration socket is missing (`devplace.agent._kubelets`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DISCOVERY_FAILED = "DiscoveryFailed"
INVALID_DETAILS = "InvalidDiscoveryDetails"
INVALID_PROPERTIES = "InvalidDiscoveryProperties"
HANDLER_NOT_FOUND = "DiscoveryHandlerNotFound"
HANDLER_UNAVAILABLE = "DiscoveryHandlerUnavailable"

RESOURCE_NAME_CONFLICT = "ResourceNameConflict"
RESOURCE_NAME_TAKEN = "ResourceNameTaken"
"""The reason of a ResourceNameConflict entry: a resource name is served for a senior Configuration."""

KUBELET_MISSING = "DevplaceKubeletMissing"
"""The Node condition type the agent sets while `device-plugins/kubelet.sock` is missing."""
KUBELET_SOCKET_MISSING = "KubeletSocketMissing"
"""Its reason."""


@dataclass(frozen=True)
class Failure:
    """Why a condition holds on a node: its reason (CamelCase) and a message for people."""

    reason: str
    message: str


def with_condition(
    obj: Mapping[str, Any], node: str, failure: Failure | None, now: str, condition_type: str = DISCOVERY_FAILED
) -> dict[str, Any] | None:
    """`obj` (a Configuration) with this node's `condition_type` condition set to `failure` (None: removed).

    Returns None when the stored condition already says the same, so an unchanged state is never rewritten.
    `now` (RFC 3339) becomes `lastTransitionTime` only when the condition is new or changes.
    Entries of other types or other nodes are kept as they are.
    """
    status = dict(obj.get("status") or {})
    conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]

    def is_mine(c: Mapping[str, Any]) -> bool:
        return c.get("type") == condition_type and c.get("node") == node

    mine = [c for c in conditions if is_mine(c)]
    others = [c for c in conditions if not is_mine(c)]
    if failure is None:
        if not mine:
            return None
        new_conditions = others
    else:
        current = mine[0] if len(mine) == 1 else None
        if current and current.get("reason") == failure.reason and current.get("message") == failure.message:
            return None
        entry = {
            "type": condition_type,
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


def with_node_condition(
    node: Mapping[str, Any], condition_type: str, failure: Failure | None, now: str
) -> dict[str, Any] | None:
    """`node` (a Node) with its `condition_type` condition set to `failure` (None: removed), or None when it already
    says so. Only that entry changes: every other condition and field is kept as stored (the kubelet owns them)."""
    status = node.get("status")
    status = status if isinstance(status, Mapping) else {}
    raw = status.get("conditions")
    conditions = list(raw) if isinstance(raw, list) else []
    mine = [c for c in conditions if isinstance(c, Mapping) and c.get("type") == condition_type]
    others = [c for c in conditions if not (isinstance(c, Mapping) and c.get("type") == condition_type)]
    if failure is None:
        if not mine:
            return None
        new_conditions = others
    else:
        current = mine[0] if len(mine) == 1 else None
        if (
            current is not None
            and current.get("status") == "True"
            and current.get("reason") == failure.reason
            and current.get("message") == failure.message
        ):
            return None
        entry = {
            "type": condition_type,
            "status": "True",
            "reason": failure.reason,
            "message": failure.message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        new_conditions = [*others, entry]
    out = copy.deepcopy(dict(node))
    new_status = dict(status)
    if new_conditions:
        new_status["conditions"] = new_conditions
    else:
        new_status.pop("conditions", None)
    out["status"] = new_status
    return out
