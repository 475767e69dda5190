"""Binding a Pod to a Node: what Kubernetes' `pods/binding` subresource does to the Pod, as one pure function.

A scheduler binds by POSTing a `Binding` (`{metadata: {name, namespace, uid?, annotations?}, target: {kind: Node,
name}}`) to `/api/v1/namespaces/{ns}/pods/{name}/binding`; a real API server refuses to change `spec.nodeName` through
a Pod update, so this is the only way a scheduler binds on a real cluster. `bound_pod(pod, binding)` is the Pod after
the binding, as Kubernetes' registry writes it: `spec.nodeName` set, the Binding's annotations merged over the Pod's,
and condition `PodScheduled=True`. Refused, changing nothing:
- a Binding without a target node name (`Invalid` naming `target.name`), a target of another kind (`target.kind`);
- a Pod already bound (`Conflict`: `pod ns/name is already assigned to node "n"`; Kubernetes answers 409 the same way,
  also when the node is the same one);
- a Pod being deleted (`Conflict`), a Binding whose `metadata.uid` is not the Pod's (`Conflict`: the Pod was replaced).
The caller writes the result by compare-and-swap (the server's route, and `store.bind_pod` for stores without the
subresource), so two schedulers binding one Pod at once give one binding and one 409.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devplace import errors

POD_SCHEDULED = "PodScheduled"


def binding(namespace: str, name: str, node: str, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The `v1` Binding wire dict that binds Pod `namespace/name` to `node`."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def bound_pod(pod: Mapping[str, Any], body: Mapping[str, Any], now: str) -> dict[str, Any]:
    """`pod` bound as `body` (a Binding) asks; see the module docstring for what is refused. `now` (RFC 3339) dates
    the PodScheduled condition when it changes."""
    body_meta = body.get("metadata")
    if body_meta is None:
        body_meta = {}
    if not isinstance(body_meta, Mapping):
        raise errors.Invalid.field("metadata", "must be an object")
    target = body.get("target")
    if not isinstance(target, Mapping):
        raise errors.Invalid.field("target", "required: the node to bind to ({kind: Node, name: ...})")
    node = target.get("name")
    if not isinstance(node, str) or not node:
        raise errors.Invalid.field("target.name", "required, the name of a Node")
    kind = target.get("kind")
    if kind not in (None, "", "Node"):
        raise errors.Invalid.field("target.kind", f"must be Node, not {kind!r}")
    meta = dict(pod.get("metadata") or {})
    key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
    spec = dict(pod.get("spec") or {})
    current = spec.get("nodeName")
    if current:
        raise errors.Conflict(
            f'Operation cannot be fulfilled on pods/binding "{meta.get("name")}": pod {key} is '
            f'already assigned to node "{current}"'
        )
    if meta.get("deletionTimestamp"):
        raise errors.Conflict(f"pod {key} is being deleted, cannot be assigned to a host")
    want_uid = body_meta.get("uid")
    if want_uid and want_uid != meta.get("uid"):
        raise errors.Conflict(f"pod {key}: the binding is for uid {want_uid}, the pod's is {meta.get('uid')}")
    extra = body_meta.get("annotations") or {}
    if not isinstance(extra, Mapping) or not all(isinstance(v, str) for v in extra.values()):
        raise errors.Invalid.field("metadata.annotations", "must map names to strings")
    if extra:
        meta["annotations"] = {**(meta.get("annotations") or {}), **extra}
    spec["nodeName"] = node
    status = dict(pod.get("status") or {})
    conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    scheduled = {"type": POD_SCHEDULED, "status": "True", "lastTransitionTime": now}
    for i, c in enumerate(conditions):
        if c.get("type") == POD_SCHEDULED:
            if c.get("status") == "True":
                scheduled["lastTransitionTime"] = c.get("lastTransitionTime") or now
            conditions[i] = scheduled
            break
    else:
        conditions.append(scheduled)
    status["conditions"] = conditions
    return {**pod, "metadata": meta, "spec": spec, "status": status}
