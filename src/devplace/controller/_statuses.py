"""The controller's part of a Configuration's status: broker counts and why brokers were skipped or refused.

Pure. `status_with(configuration, ...)` returns the Configuration with its new status, or None when the stored one
already says the same (so an unchanged state is never rewritten). The controller owns `status.brokers`
(`{desired, running, pending}`, read by `devplace get brokers`), `status.pools.waitingSince` (static pools with a
timeout: since when leftovers wait) and two condition types:
- `BrokersSkipped`: one entry per (reason, node), its message listing the brokers not deployed (the first ten).
- `InvalidConfiguration`: the Configuration in the store does not validate; nothing is deployed for it.
Conditions of other types (the agents' `DiscoveryFailed`, `ResourceNameConflict`) are kept as they are.
`lastTransitionTime` changes only when an entry's reason or message does.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from devplace.controller._strategies import Skip

BROKERS_SKIPPED = "BrokersSkipped"
INVALID_CONFIGURATION = "InvalidConfiguration"
CONTROLLER_CONDITIONS = frozenset({BROKERS_SKIPPED, INVALID_CONFIGURATION})
_LISTED = 10


def _conditions(skips: Iterable[Skip], problem: str | None, now: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if problem is not None:
        out.append(
            {
                "type": INVALID_CONFIGURATION,
                "status": "True",
                "reason": "Invalid",
                "message": problem,
                "lastTransitionTime": now,
            }
        )
    grouped: dict[tuple[str, str], list[str]] = {}
    for skip in skips:
        grouped.setdefault((skip.reason, skip.node), []).append(skip.message)
    for (reason, node), messages in sorted(grouped.items()):
        message = "; ".join(messages[:_LISTED])
        if len(messages) > _LISTED:
            message += f" (and {len(messages) - _LISTED} more)"
        entry: dict[str, Any] = {"type": BROKERS_SKIPPED, "status": "True", "reason": reason, "message": message}
        if node:
            entry["node"] = node
        entry["lastTransitionTime"] = now
        out.append(entry)
    return out


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return {k: v for k, v in a.items() if k != "lastTransitionTime"} == {
        k: v for k, v in b.items() if k != "lastTransitionTime"
    }


def status_with(
    configuration: Mapping[str, Any],
    *,
    brokers: Mapping[str, int] | None,
    skips: Iterable[Skip] = (),
    problem: str | None = None,
    waiting_since: str | None = None,
    now: str,
) -> dict[str, Any] | None:
    """`configuration` with the controller's status parts set (module docstring); None when nothing changes."""
    status = configuration.get("status")
    status = dict(status) if isinstance(status, Mapping) else {}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    others = [dict(c) for c in conditions if c.get("type") not in CONTROLLER_CONDITIONS]
    mine_before = [c for c in conditions if c.get("type") in CONTROLLER_CONDITIONS]
    mine = _conditions(skips, problem, now)
    for entry in mine:
        for old in mine_before:
            if _same(old, entry) and old.get("lastTransitionTime"):
                entry["lastTransitionTime"] = old["lastTransitionTime"]
    new_status = dict(status)
    if others or mine:
        new_status["conditions"] = [*others, *mine]
    else:
        new_status.pop("conditions", None)
    if brokers is None:
        new_status.pop("brokers", None)
    else:
        new_status["brokers"] = dict(brokers)
    if waiting_since is None:
        new_status.pop("pools", None)
    else:
        new_status["pools"] = {"waitingSince": waiting_since}
    if new_status == status:
        return None
    out = copy.deepcopy(dict(configuration))
    out["status"] = new_status
    return out
