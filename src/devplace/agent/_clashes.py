"""Resource-name clashes on a node: which device plugins may run when two Configurations want the same name.

Resource names follow Akri and leave the namespace out: the CL plugin of Configuration `ns/cams` serves
`<prefix>/cams`, the IL plugin of Instance `ns/cams-1a2b3c` serves `<prefix>/cams-1a2b3c`. Configurations with the
same name in two namespaces (and their Instances, whose names hash only the device id, so the same device gives the
same name) therefore want the same resource name on a node. The kubelet keeps one endpoint per resource name
(whichever registered last), so serving both would hand pods the other namespace's devices at random.

The rule, decided here and nowhere else:
- Configurations are ranked by seniority: creationTimestamp, then namespace, then uid, then name. The order is total
  and reads only what every agent sees of the Configurations, so every node ranks them alike. A Configuration whose
  creationTimestamp is missing or unreadable (its plugins outliving it, say) ranks last.
- In that order, a Configuration is served when none of the resource names its plugins want is already served for
  a senior Configuration; it then takes all of them. Otherwise it serves NOTHING on this node: its CL plugin and all
  its IL plugins are withheld, so a pod never gets half of a Configuration, and the message names a clashing
  resource and the Configuration it is served for. A withheld Configuration takes no name, so it cannot make a
  third one lose (the Configuration a message names is always served).
- The ranking is not sticky: a senior Configuration that starts wanting a name (its devices appear on the node) takes
  it from a junior one, which is then withheld. Stickiness would depend on history, and nodes would disagree.

Only plugins the node wants take part: a Configuration with no device on this node clashes with nothing here.
Pure: plain data in, plain data out; `Agent._sync_plugins` applies it before starting or stopping plugins, and turns
the messages into per-node `ResourceNameConflict` conditions (`conditions`). Rules are tabled in
tests/agent/test_clashes.py.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PluginKey = tuple[str, str, str]
"""(kind, namespace, name): kind "cl" (name = the Configuration) or "il" (name = the Instance)."""

Key = tuple[str, str]


@dataclass(frozen=True)
class Owner:
    """The identity of the Configuration a plugin serves for (as the store stamped it)."""

    namespace: str
    name: str
    created: str = ""
    """metadata.creationTimestamp (RFC 3339); "" when unknown."""
    uid: str = ""

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)


@dataclass(frozen=True)
class Wanted:
    """A plugin the node wants to run: its key, the resource name it would register, and its Configuration."""

    plugin: PluginKey
    resource: str
    owner: Owner


@dataclass(frozen=True)
class Outcome:
    served: frozenset[PluginKey]
    """The plugins that may run."""
    withheld: Mapping[Key, str]
    """Per losing Configuration (namespace, name): why it serves nothing on this node."""


def seniority(owner: Owner) -> tuple[float, str, str, str]:
    """The sort key of the ranking: smaller is senior. Total over distinct (namespace, name)."""
    return (_seconds(owner.created), owner.namespace, owner.uid, owner.name)


def resolve(wanted: Iterable[Wanted]) -> Outcome:
    """Which plugins may run, and why each losing Configuration serves nothing (see the module docstring).

    The answer does not depend on the order of `wanted`. A Configuration's plugins never share a name in practice
    (an Instance is named `<configuration>-<6 hex>`); if two did, the Configuration could not be served whole and is
    withheld like any other loser.
    """
    by_owner: dict[Key, list[Wanted]] = {}
    owners: dict[Key, Owner] = {}
    for item in wanted:
        by_owner.setdefault(item.owner.key, []).append(item)
        known = owners.get(item.owner.key)
        # one identity per Configuration even if callers disagree: the senior-looking one, so the result is stable
        if known is None or seniority(item.owner) < seniority(known):
            owners[item.owner.key] = item.owner
    taken: dict[str, Owner] = {}
    served: set[PluginKey] = set()
    withheld: dict[Key, str] = {}
    for owner in sorted(owners.values(), key=seniority):
        items = sorted(by_owner[owner.key], key=lambda w: (w.plugin, w.resource))
        mine: set[str] = set()
        refusal: str | None = None
        for item in items:
            holder = taken.get(item.resource)
            if holder is not None:
                refusal = _message(item.resource, holder, owner)
                break
            if item.resource in mine:
                refusal = f"resource {item.resource} is wanted by two plugins of this Configuration"
                break
            mine.add(item.resource)
        if refusal is not None:
            withheld[owner.key] = refusal
            continue
        for item in items:
            taken[item.resource] = owner
            served.add(item.plugin)
    return Outcome(frozenset(served), withheld)


def _message(resource: str, holder: Owner, loser: Owner) -> str:
    if _seconds(holder.created) < _seconds(loser.created):
        why = "created first"
    else:
        why = "same creationTimestamp; ties go by namespace, then uid"
    return (
        f"resource {resource} is served for Configuration {holder.namespace}/{holder.name} ({why}); "
        "rename this Configuration"
    )


def _seconds(created: str) -> float:
    if not created:
        return math.inf
    try:
        parsed = dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return math.inf
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()
