"""A pod's ResourceClaims as the scheduler and the claim lifecycle see them (issue #25; shared/reference/dra.md
section 3). Pure: wire dicts in, plain values out.

A pod names its claims in `spec.resourceClaims[]`: each entry `name` has either `resourceClaimName` (a claim made
by a user, possibly shared by several pods) or `resourceClaimTemplateName` (a claim made for this pod from the
template, by the claim lifecycle in `devplace controller`, as Kubernetes' resourceclaim controller does: named
`<pod>-<entry>-<5 characters>`, owned by the pod, recorded in the pod's `status.resourceClaimStatuses`).

`claims_for(pod, claims)` resolves a pod's entries to the stored claims, or says why the pod must wait (Kubernetes'
PreEnqueue/PreFilter reasons): a template's claim not created yet, a claim not found, one being deleted, one made
for another pod, one reserved for the maximum number of consumers. The scheduler then keeps claims already allocated
(the node must be one their allocation's nodeSelector admits) apart from those it must allocate.

`reserved_for(claim, pod)`, `with_consumer`, `without_consumers`: `status.reservedFor` (at most
`MAX_CONSUMERS`, Kubernetes' ResourceClaimReservedForMaxSize).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_CONSUMERS = 256
"""Kubernetes' ResourceClaimReservedForMaxSize."""

DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
"""The finalizer the scheduler puts on a claim before it writes an allocation (kube-scheduler's)."""

POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
"""The annotation on a claim made from a template: the pod's `spec.resourceClaims[].name` it was made for."""


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """One entry of a pod's `spec.resourceClaims`."""

    name: str
    claim: str | None
    template: str | None


def claim_refs(pod: Mapping[str, Any]) -> tuple[ClaimRef, ...]:
    """The pod's `spec.resourceClaims` entries (malformed ones skipped: admission refuses them)."""
    out: list[ClaimRef] = []
    for raw in (pod.get("spec") or {}).get("resourceClaims") or ():
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            continue
        claim = raw.get("resourceClaimName")
        template = raw.get("resourceClaimTemplateName")
        out.append(
            ClaimRef(
                raw["name"],
                claim if isinstance(claim, str) and claim else None,
                template if isinstance(template, str) and template else None,
            )
        )
    return tuple(out)


def claim_name(pod: Mapping[str, Any], ref: ClaimRef) -> str | None:
    """The claim `ref` stands for: its `resourceClaimName`, or for a template entry the name the pod's
    `status.resourceClaimStatuses` records (None until the claim lifecycle made it)."""
    if ref.claim is not None:
        return ref.claim
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
        if isinstance(status, Mapping) and status.get("name") == ref.name:
            made = status.get("resourceClaimName")
            return made if isinstance(made, str) and made else None
    return None


def pod_uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def consumer(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The `reservedFor` entry naming `pod`."""
    meta = pod.get("metadata") or {}
    return {"resource": "pods", "name": str(meta.get("name") or ""), "uid": pod_uid(pod)}


def reserved_for(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    uid = pod_uid(pod)
    name = (pod.get("metadata") or {}).get("name")
    for entry in (claim.get("status") or {}).get("reservedFor") or ():
        if not isinstance(entry, Mapping) or entry.get("resource") != "pods":
            continue
        if (entry.get("uid") == uid) if uid else (entry.get("name") == name):
            return True
    return False


def owned_by(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether `claim` was made for `pod` (a controlling ownerReference with the pod's uid)."""
    uid = pod_uid(pod)
    for owner in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(owner, Mapping) and owner.get("kind") == "Pod" and owner.get("controller"):
            return not uid or owner.get("uid") == uid
    return False


def allocation_of(claim: Mapping[str, Any]) -> Mapping[str, Any] | None:
    allocation = (claim.get("status") or {}).get("allocation")
    return allocation if isinstance(allocation, Mapping) and allocation else None


@dataclass(frozen=True, slots=True)
class PodClaims:
    """A pod's claims, resolved: `(namespace/name, claim wire)` per entry, in the pod's order."""

    claims: tuple[tuple[str, Mapping[str, Any]], ...]

    @property
    def allocated(self) -> tuple[tuple[str, Mapping[str, Any]], ...]:
        return tuple((k, c) for k, c in self.claims if allocation_of(c) is not None)

    @property
    def unallocated(self) -> tuple[tuple[str, Mapping[str, Any]], ...]:
        return tuple((k, c) for k, c in self.claims if allocation_of(c) is None)


def claims_for(pod: Mapping[str, Any], lookup: Callable[[str, str], Mapping[str, Any] | None]) -> PodClaims | str:
    """The pod's claims (`lookup(namespace, name)` reads one), or why the pod waits (module docstring)."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    out: list[tuple[str, Mapping[str, Any]]] = []
    seen: set[str] = set()
    for ref in claim_refs(pod):
        name = claim_name(pod, ref)
        if name is None:
            return f'waiting for the ResourceClaim of entry "{ref.name}" (template "{ref.template}") to be created'
        claim = lookup(namespace, name)
        if claim is None:
            return f'resourceclaim "{name}" not found'
        if (claim.get("metadata") or {}).get("deletionTimestamp"):
            return f'resourceclaim "{name}" is being deleted'
        if ref.template is not None and not owned_by(claim, pod):
            pod_key = f"{namespace}/{meta.get('name')}"
            return f'resourceclaim "{name}" was not created for pod {pod_key} (it has another owner)'
        if allocation_of(claim) is not None and not reserved_for(claim, pod):
            count = len((claim.get("status") or {}).get("reservedFor") or ())
            if count >= MAX_CONSUMERS:
                return f'resourceclaim "{name}" is in use by {count} consumers, the most one claim may have'
        key = f"{namespace}/{name}"
        if key not in seen:
            seen.add(key)
            out.append((key, claim))
    return PodClaims(tuple(out))


def with_consumer(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`status.reservedFor` with `pod` added (unchanged when it is there already)."""
    current = [dict(e) for e in (claim.get("status") or {}).get("reservedFor") or () if isinstance(e, Mapping)]
    if reserved_for(claim, pod):
        return current
    return [*current, consumer(pod)]


def without_consumers(claim: Mapping[str, Any], keep: Callable[[Mapping[str, Any]], bool]) -> list[dict[str, Any]]:
    """`status.reservedFor` keeping the entries `keep` accepts."""
    return [dict(e) for e in (claim.get("status") or {}).get("reservedFor") or () if isinstance(e, Mapping) and keep(e)]


def claimed_names(pods: Iterable[Mapping[str, Any]]) -> set[str]:
    """`namespace/name` of every claim the pods name (resolved entries only)."""
    out: set[str] = set()
    for pod in pods:
        namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
        for ref in claim_refs(pod):
            name = claim_name(pod, ref)
            if name is not None:
                out.add(f"{namespace}/{name}")
    return out
