"""Node taints and pod tolerations, as kube-scheduler's TaintToleration and NodeUnschedulable plugins read them.

Pure: `node_taints` reads a Node wire dict once and `pod_tolerations` a Pod's (a malformed entry raises
`errors.Invalid` naming the field, e.g. `spec.tolerations[1].operator`); the plugins in `filters` and `scores` then
compare frozen values.

Matching (k8s.io/api core/v1 `Toleration.ToleratesTaint`), one toleration against one taint:
- a non-empty toleration effect must equal the taint's; an empty one matches every effect;
- a non-empty toleration key must equal the taint's; an empty key (only valid with Exists) matches every key, so
  `{operator: Exists}` alone tolerates every taint;
- operator Equal (or empty) needs equal values, Exists any value;
- Lt and Gt compare the values as int64 decimals (canonical: no sign but `-`, no leading zero); they stand behind
  Kubernetes' alpha gate TaintTolerationComparisonOperators, off by default, and are off here too
  (`comparisons=False`): such a toleration tolerates nothing, as on a cluster without the gate;
- `tolerationSeconds` does not matter for scheduling (it bounds how long a NoExecute taint is tolerated once running).

The filter considers only NoSchedule and NoExecute taints: the first taint (in the node's order) that no toleration
tolerates refuses the node with kube-scheduler's reason `node(s) had untolerated taint {<key>: <value>}`.
PreferNoSchedule taints only score: the fewer a node has that the pod does not tolerate, the better.

The node lifecycle taints (DESIGN decision, here because devplace runs no node lifecycle controller): on Kubernetes
the controller taints a Node from its conditions (TaintNodesByCondition) and kube-scheduler reads only the taints.
devplace's Nodes may carry the conditions without the taints (the simulated kubelet writes conditions, nobody writes
the taints), so `node_taints` adds, for every condition below that the Node shows and whose taint (same key and
effect) it does not already carry, the NoSchedule taint the controller would add, after the Node's own taints:

    Ready False                  node.kubernetes.io/not-ready
    Ready Unknown                node.kubernetes.io/unreachable
    MemoryPressure True          node.kubernetes.io/memory-pressure
    DiskPressure True            node.kubernetes.io/disk-pressure
    PIDPressure True             node.kubernetes.io/pid-pressure
    NetworkUnavailable True      node.kubernetes.io/network-unavailable
    spec.unschedulable: true     node.kubernetes.io/unschedulable

A Node with no Ready condition gets no taint (it is not known to be unready; the simulated kubelet always writes one).
The NoExecute taints the controller also adds for not-ready and unreachable are about eviction, which devplace does not
do, so they are not derived; where a real controller wrote them they are read like any taint. On a real cluster the
derived taints are the ones already there, so nothing changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devplace import errors

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)
OPERATORS = ("", "Equal", "Exists", "Lt", "Gt")

UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"

CONDITION_TAINTS: Mapping[tuple[str, str], str] = {
    ("Ready", "False"): NOT_READY,
    ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
}
"""(condition type, status) -> the key of the NoSchedule taint the node lifecycle controller adds for it."""

_DECIMAL = re.compile(r"^(0|-?[1-9][0-9]*)$")
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE

    def __str__(self) -> str:
        """kube-scheduler's rendering in its reasons: `{key: value}`."""
        return f"{{{self.key}: {self.value}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = ""
    """"" (Equal), Equal, Exists, Lt, Gt."""
    value: str = ""
    effect: str = ""
    """"" matches every effect."""


UNSCHEDULABLE_TAINT = Taint(UNSCHEDULABLE, "", NO_SCHEDULE)


def _int64(text: str) -> int | None:
    if not _DECIMAL.match(text):
        return None
    number = int(text)
    return number if _INT64[0] <= number <= _INT64[1] else None


def tolerates(toleration: Toleration, taint: Taint, *, comparisons: bool = False) -> bool:
    """Whether `toleration` tolerates `taint` (module docstring); `comparisons` enables Lt and Gt."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    operator = toleration.operator
    if operator in ("", "Equal"):
        return toleration.value == taint.value
    if operator == "Exists":
        return True
    if operator in ("Lt", "Gt") and comparisons:
        threshold, value = _int64(toleration.value), _int64(taint.value)
        if threshold is None or value is None:
            return False
        return value < threshold if operator == "Lt" else value > threshold
    return False


def tolerated(tolerations: Iterable[Toleration], taint: Taint, *, comparisons: bool = False) -> bool:
    """Whether any of `tolerations` tolerates `taint`."""
    return any(tolerates(t, taint, comparisons=comparisons) for t in tolerations)


def first_untolerated(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], effects: Iterable[str] = (NO_SCHEDULE, NO_EXECUTE)
) -> Taint | None:
    """The first of `taints` with one of `effects` that no toleration tolerates (FindMatchingUntoleratedTaint)."""
    wanted = frozenset(effects)
    for taint in taints:
        if taint.effect in wanted and not tolerated(tolerations, taint):
            return taint
    return None


def intolerable_preferences(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> int:
    """How many PreferNoSchedule taints no toleration (of effect PreferNoSchedule or empty) tolerates."""
    soft = [t for t in tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
    return sum(1 for taint in taints if taint.effect == PREFER_NO_SCHEDULE and not tolerated(soft, taint))


def untolerated_reason(taint: Taint) -> str:
    """kube-scheduler's TaintToleration reason for a node refused for `taint`."""
    return f"node(s) had untolerated taint {taint}"


# -- wire ------------------------------------------------------------------------------------------------------------


def _string(entry: Mapping[str, Any], name: str, path: str) -> str:
    value = entry.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise errors.Invalid.field(f"{path}.{name}", f"must be a string, not {type(value).__name__}")
    return value


def _list(obj: Any, path: str) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise errors.Invalid.field(path, f"must be a list, not {type(obj).__name__}")
    return obj


def condition_taints(conditions: Any, unschedulable: bool) -> list[Taint]:
    """The NoSchedule taints the node lifecycle controller keeps for these conditions (module docstring).

    Conditions are the kubelet's to write; an entry that is not a mapping of strings is skipped, not refused."""
    out: list[Taint] = []
    for condition in conditions if isinstance(conditions, list) else []:
        if not isinstance(condition, Mapping):
            continue
        key = CONDITION_TAINTS.get((str(condition.get("type")), str(condition.get("status"))))
        if key is not None:
            out.append(Taint(key, "", NO_SCHEDULE))
    if unschedulable:
        out.append(UNSCHEDULABLE_TAINT)
    return out


def node_taints(node: Mapping[str, Any]) -> tuple[Taint, ...]:
    """`spec.taints`, then the derived lifecycle taints it lacks (module docstring); Invalid names a bad taint."""
    spec = node.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise errors.Invalid.field("spec", "must be a mapping")
    taints: list[Taint] = []
    for i, entry in enumerate(_list(spec.get("taints"), "spec.taints")):
        path = f"spec.taints[{i}]"
        if not isinstance(entry, Mapping):
            raise errors.Invalid.field(path, "a taint must be a mapping")
        key = _string(entry, "key", path)
        if not key:
            raise errors.Invalid.field(f"{path}.key", "required")
        effect = _string(entry, "effect", path)
        if effect not in EFFECTS:
            raise errors.Invalid.field(f"{path}.effect", f"must be one of {', '.join(EFFECTS)}, not {effect!r}")
        taints.append(Taint(key, _string(entry, "value", path), effect))
    status = node.get("status") or {}
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    present = {(t.key, t.effect) for t in taints}
    for taint in condition_taints(conditions, bool(spec.get("unschedulable", False))):
        if (taint.key, taint.effect) not in present:
            present.add((taint.key, taint.effect))
            taints.append(taint)
    return tuple(taints)


def pod_tolerations(pod: Mapping[str, Any]) -> tuple[Toleration, ...]:
    """`spec.tolerations`; Invalid names a bad one (Kubernetes' validation: an operator and effect it knows, no value
    with Exists, and an empty key only with Exists)."""
    spec = pod.get("spec") or {}
    out: list[Toleration] = []
    for i, entry in enumerate(_list(spec.get("tolerations"), "spec.tolerations")):
        path = f"spec.tolerations[{i}]"
        if not isinstance(entry, Mapping):
            raise errors.Invalid.field(path, "a toleration must be a mapping")
        key, operator = _string(entry, "key", path), _string(entry, "operator", path)
        value, effect = _string(entry, "value", path), _string(entry, "effect", path)
        if operator not in OPERATORS:
            raise errors.Invalid.field(f"{path}.operator", f"must be Equal, Exists, Lt or Gt, not {operator!r}")
        if effect and effect not in EFFECTS:
            raise errors.Invalid.field(f"{path}.effect", f"must be empty or one of {', '.join(EFFECTS)}")
        if operator == "Exists" and value:
            raise errors.Invalid.field(f"{path}.value", "must be empty when operator is Exists")
        if not key and operator != "Exists":
            raise errors.Invalid.field(f"{path}.operator", "must be Exists when key is empty")
        seconds = entry.get("tolerationSeconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
            raise errors.Invalid.field(f"{path}.tolerationSeconds", "must be an integer")
        out.append(Toleration(key, operator, value, effect))
    return tuple(out)
