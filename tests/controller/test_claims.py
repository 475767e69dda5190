"""The ResourceClaim lifecycle's pure decisions (`controller._claims`): claims made from templates, consumers that
went, deallocation, a template's claim deleted with its pod, Instance slots held for claims that are gone."""

from __future__ import annotations

from typing import Any

from devplace.controller._claims import (
    DELETE_PROTECTION,
    POD_CLAIM_NAME,
    claim_name_for,
    claim_statuses,
    claims_to_make,
    settled,
    stale_holders,
)
from devplace.store import DELETE

TEMPLATE = {
    "metadata": {"name": "gpu", "namespace": "default"},
    "spec": {"metadata": {"labels": {"team": "a"}}, "spec": {"devices": {"requests": [{"name": "g"}]}}},
}


def pod(name: str = "p", uid: str = "u-1", phase: str | None = None, **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}], **spec},
    }
    if phase is not None:
        out["status"] = {"phase": phase}
    return out


def allocated(owner: dict[str, Any] | None, reserved: list[dict[str, Any]]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "c", "namespace": "default", "finalizers": [DELETE_PROTECTION]}
    if owner is not None:
        meta["ownerReferences"] = [
            {"kind": "Pod", "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"], "controller": True}
        ]
    return {
        "metadata": meta,
        "status": {"allocation": {"devices": {"results": [{"device": "d"}]}}, "reservedFor": reserved},
    }


def lookup(*pods: dict[str, Any]) -> Any:
    by_name = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
    return lambda namespace, name: by_name.get((namespace, name))


def test_a_template_entry_gets_one_claim_named_the_same_on_every_try_and_owned_by_the_pod() -> None:
    made, missing = claims_to_make(pod(), lambda name: TEMPLATE if name == "gpu" else None)
    again, _ = claims_to_make(pod(), lambda name: TEMPLATE)
    assert missing == []
    assert made == again
    [claim] = made
    assert claim["metadata"]["name"] == claim_name_for(pod(), "gpu")
    assert claim["metadata"]["name"].startswith("p-gpu-")
    assert len(claim["metadata"]["name"]) == len("p-gpu-") + 5
    assert claim["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u-1", "controller": True, "blockOwnerDeletion": True}
    ]
    assert claim["metadata"]["annotations"] == {POD_CLAIM_NAME: "gpu"}
    assert claim["metadata"]["labels"] == {"team": "a"}
    assert claim["spec"] == TEMPLATE["spec"]["spec"]
    assert claim_statuses(pod()) == [{"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]
    # another pod of the same name (a new uid) gets another claim
    assert claim_name_for(pod(uid="u-2"), "gpu") != claim["metadata"]["name"]


def test_a_missing_template_is_reported_and_a_finished_or_bound_pod_gets_no_claim() -> None:
    assert claims_to_make(pod(), lambda name: None) == ([], ["gpu"])
    assert claims_to_make(pod(phase="Succeeded"), lambda name: TEMPLATE) == ([], [])
    assert claims_to_make(pod(nodeName="n"), lambda name: TEMPLATE) == ([], [])


def test_consumers_that_went_or_finished_leave_reserved_for_and_the_claim_stays_for_the_rest() -> None:
    live, done = pod("a", "u-a"), pod("b", "u-b", phase="Failed")
    reserved = [{"resource": "pods", "name": n, "uid": u} for n, u in (("a", "u-a"), ("b", "u-b"), ("c", "u-c"))]
    out = settled(allocated(None, reserved), lookup(live, done))
    assert isinstance(out, dict)
    assert out["status"]["reservedFor"] == [{"resource": "pods", "name": "a", "uid": "u-a"}]
    assert out["status"]["allocation"] == {"devices": {"results": [{"device": "d"}]}}
    assert out["metadata"]["finalizers"] == [DELETE_PROTECTION]


def test_a_claim_reserved_for_nobody_is_deallocated_and_loses_its_finalizer() -> None:
    replaced = pod("a", "u-new")  # the pod of that name now is another one
    out = settled(allocated(None, [{"resource": "pods", "name": "a", "uid": "u-old"}]), lookup(replaced))
    assert isinstance(out, dict)
    assert "status" not in out
    assert "finalizers" not in out["metadata"]
    assert settled(out, lookup()) is None  # settled stays settled


def test_a_templates_claim_goes_with_its_pod_and_stays_while_the_pod_runs() -> None:
    owner = pod()
    claim = allocated(owner, [])
    assert settled(claim, lookup()) is DELETE
    assert settled(claim, lookup(pod(phase="Succeeded"))) is DELETE
    kept = settled(claim, lookup(owner))  # the pod is there and not yet scheduled again: deallocated, not deleted
    assert isinstance(kept, dict)
    assert "status" not in kept


def test_slots_held_for_a_claim_that_is_gone_are_freed_at_once_and_for_an_unallocated_one_after_the_grace() -> None:
    instance = {"spec": {"deviceUsage": {"i-0": "D:default/gone:n", "i-1": "D:default/pending:n", "i-2": "n"}}}
    claims = {("default", "pending"): {"metadata": {"name": "pending"}}}

    def claim(namespace: str, name: str) -> Any:
        return claims.get((namespace, name))

    release, watching = stale_holders(instance, claim, {}, 100.0, 30.0)
    assert release == [("default", "gone")]
    assert watching == {"D:default/pending:n": 100.0}
    release, watching = stale_holders(instance, claim, watching, 129.0, 30.0)
    assert release == [("default", "gone")]
    assert watching == {"D:default/pending:n": 100.0}
    release, watching = stale_holders(instance, claim, watching, 130.0, 30.0)
    assert release == [("default", "gone"), ("default", "pending")]
    assert watching == {}
    claims[("default", "pending")] = {"status": {"allocation": {"devices": {}}}}
    assert stale_holders(instance, claim, {}, 200.0, 30.0) == ([("default", "gone")], {})
