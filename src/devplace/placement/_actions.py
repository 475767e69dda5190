"""The HPA action controller: patch each app's Kubernetes manifests for a chosen cluster. Pure.

For every consumer of the app, on its workload (Deployment, StatefulSet, DaemonSet, Job or Pod) and container:
- mandatory allocatable requirements become `resources.requests` / `limits` (as given; an extended resource, which
  Kubernetes does not overcommit, gets requests == limits); optional ones are added only on clusters where
  `hpa.optional_fits` says every replica fits with them (a GPU "if available").
- mandatory label requirements become `nodeSelector` entries; a key with several allowed values becomes a required
  `nodeAffinity` term `key In (v1, v2)` (added to every existing term, since terms are ORed) and leaves nodeSelector;
  optional label requirements met on the cluster become preferred node affinity (weight 10 x the requirement's).
- the intent's `replicas` sets `spec.replicas` (Deployment, StatefulSet) or `spec.parallelism` (Job).
Manifests are deep-copied per cluster; inputs are never changed. `target_problems` checks before placement that every
consumer names a workload and container that exist, so patching itself cannot fail on well-formed manifests.
`warnings` flags consumers that ask for exclusive CPUs (explicitly, or by giving cpu requests == limits) without what
the static CPU manager needs: cpu requests == limits, a whole number of cpus, memory requests == limits.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from devplace.api import Quantity
from devplace.placement._hpa import Consumer, Requirement, optional_fits
from devplace.placement._inventory import ClusterInventory
from devplace.placement._requirements import OVERCOMMITTABLE

Manifest = dict[str, Any]


def _pod_spec(obj: Mapping[str, Any]) -> Any:
    if obj.get("kind") == "Pod":
        return obj.get("spec")
    template = (obj.get("spec") or {}).get("template")
    return template.get("spec") if isinstance(template, dict) else None


def _find(manifests: Iterable[Mapping[str, Any]], kind: str, name: str) -> Mapping[str, Any] | None:
    for obj in manifests:
        if obj.get("kind") == kind and (obj.get("metadata") or {}).get("name") == name:
            return obj
    return None


def _container(pod: Mapping[str, Any], name: str | None) -> Any:
    for container in pod.get("containers") or []:
        if isinstance(container, dict) and container.get("name") == name:
            return container
    return None


def target_problems(consumers: Iterable[Consumer], manifests: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """Why consumers cannot be applied to their app's manifests (empty when all is well)."""
    problems = []
    for c in consumers:
        where = f"hpa resource consumer {c.intent}/{c.name}"
        if c.app not in manifests:
            problems.append(f"hpa intent {c.intent}: app {c.app!r} is not an app of the composite app")
            continue
        obj = _find(manifests[c.app], c.kind, c.workload)
        if obj is None:
            problems.append(f"{where}: app {c.app} has no {c.kind} {c.workload!r}")
            continue
        pod = _pod_spec(obj)
        if not isinstance(pod, dict):
            problems.append(f"{where}: {c.kind} {c.workload} has no pod spec")
            continue
        needs_container = any(r.allocatable for r in c.requirements)
        if needs_container and c.container is None:
            problems.append(f"{where}: container-name is required once an allocatable requirement exists")
        elif c.container is not None and _container(pod, c.container) is None:
            problems.append(f"{where}: {c.kind} {c.workload} has no container {c.container!r}")
    return problems


def workload_replicas(manifests: Sequence[Mapping[str, Any]], kind: str, name: str) -> int:
    """Pods one copy of the workload runs (DaemonSets count 1: at least one node must take one)."""
    obj = _find(manifests, kind, name)
    spec = (obj or {}).get("spec") or {}
    if kind in ("Deployment", "StatefulSet"):
        value = spec.get("replicas", 1)
    elif kind == "Job":
        value = spec.get("parallelism", 1)
    else:
        value = 1
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 1


def replicas_of(manifests: Iterable[Mapping[str, Any]]) -> int:
    """Pods the replicated workloads of an app ask for: Deployments, StatefulSets, Jobs (parallelism), bare Pods."""
    total = 0
    for obj in manifests:
        kind = obj.get("kind")
        name = (obj.get("metadata") or {}).get("name", "")
        if kind in ("Deployment", "StatefulSet", "Job", "Pod"):
            total += workload_replicas([obj], str(kind), str(name))
    return total


def _set_resources(container: dict[str, Any], reqs: Iterable[Requirement]) -> None:
    resources = container.setdefault("resources", {})
    for req in reqs:
        requests, limits = req.requests, req.limits
        if req.name not in OVERCOMMITTABLE:
            requests = limits = requests if requests is not None else limits
        if requests is not None:
            resources.setdefault("requests", {})[req.name] = str(requests)
            old_limit = (resources.get("limits") or {}).get(req.name)
            if limits is None and old_limit is not None and Quantity(old_limit) < requests:
                limits = requests  # the manifest's own limit would make the pod invalid
        if limits is not None:
            resources.setdefault("limits", {})[req.name] = str(limits)
            old_request = (resources.get("requests") or {}).get(req.name)
            if requests is None and old_request is not None and Quantity(old_request) > limits:
                resources["requests"][req.name] = str(limits)


def _require_labels(pod: dict[str, Any], needs: Mapping[str, set[str]]) -> None:
    selector = pod.setdefault("nodeSelector", {})
    expressions = []
    for key, values in sorted(needs.items()):
        if len(values) == 1:
            selector[key] = next(iter(values))
        else:
            selector.pop(key, None)
            expressions.append({"key": key, "operator": "In", "values": sorted(values)})
    if not selector:
        pod.pop("nodeSelector")
    if expressions:
        node_affinity = pod.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        terms = required.setdefault("nodeSelectorTerms", [])
        if not terms:
            terms.append({"matchExpressions": []})
        for term in terms:
            term.setdefault("matchExpressions", []).extend(copy.deepcopy(expressions))


def _prefer_labels(pod: dict[str, Any], reqs: Iterable[Requirement]) -> None:
    preferred = [
        {
            "weight": min(100, 10 * req.weight),
            "preference": {"matchExpressions": [{"key": req.name, "operator": "In", "values": [req.value or ""]}]},
        }
        for req in reqs
    ]
    if preferred:
        node_affinity = pod.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        node_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).extend(preferred)


def _patch(obj: Manifest, consumer: Consumer, extras: tuple[Requirement, ...]) -> None:
    pod = _pod_spec(obj)
    if not isinstance(pod, dict):
        return
    mandatory = [r for r in consumer.requirements if r.mandatory]
    allocatable = [r for r in mandatory if r.allocatable] + [r for r in extras if r.allocatable]
    if allocatable:
        container = _container(pod, consumer.container)
        if container is not None:
            _set_resources(container, allocatable)
    needs: dict[str, set[str]] = {}
    for req in mandatory:
        if not req.allocatable and req.value is not None:
            needs.setdefault(req.name, set()).add(req.value)
    if needs:
        _require_labels(pod, needs)
    _prefer_labels(pod, [r for r in extras if not r.allocatable])
    if consumer.set_replicas is not None:
        if consumer.kind in ("Deployment", "StatefulSet"):
            obj["spec"]["replicas"] = consumer.set_replicas
        elif consumer.kind == "Job":
            obj["spec"]["parallelism"] = consumer.set_replicas


def patch_manifests(
    manifests: Sequence[Mapping[str, Any]], consumers: Iterable[Consumer], cluster: ClusterInventory
) -> list[Manifest]:
    """The app's manifests as they should be applied on `cluster` (all of them; untouched ones are copied)."""
    out: list[Manifest] = [copy.deepcopy(dict(m)) for m in manifests]
    for consumer in consumers:
        obj = next(
            (m for m in out if m.get("kind") == consumer.kind and m["metadata"].get("name") == consumer.workload), None
        )
        if obj is not None:
            _patch(obj, consumer, optional_fits(consumer, cluster))
    return out


def _by_name(consumer: Consumer, name: str) -> Requirement | None:
    return next((r for r in consumer.requirements if r.allocatable and r.mandatory and r.name == name), None)


def warnings(consumer: Consumer) -> list[str]:
    """Exclusive-CPU checks (Kubernetes' static CPU manager pins only Guaranteed pods with whole cpus)."""
    cpu = _by_name(consumer, "cpu")
    cpu_pinned = cpu is not None and cpu.requests is not None and cpu.requests == cpu.limits
    if not (consumer.exclusive_cpus or cpu_pinned):
        return []
    who = f"hpa resource consumer {consumer.intent}/{consumer.name} asks for exclusive CPUs but"
    if cpu is None:
        return [f"{who} has no mandatory cpu requirement"]
    out = []
    requests = cpu.requests if cpu.requests is not None else cpu.limits
    limits = cpu.limits if cpu.limits is not None else cpu.requests
    if requests != limits:
        out.append(f"{who} cpu requests ({requests}) != limits ({limits})")
    if requests is not None and requests.milli_value() % 1000:
        out.append(f"{who} cpu {requests} is fractional (exclusive CPUs are whole cores)")
    memory = _by_name(consumer, "memory")
    if memory is None:
        out.append(f"{who} has no memory requirement (Guaranteed QoS needs memory requests == limits)")
    elif memory.limits is None or (memory.requests is not None and memory.requests != memory.limits):
        out.append(
            f"{who} memory requests ({memory.requests}) != limits ({memory.limits}) (Guaranteed QoS needs them equal)"
        )
    return out
