"""Diffing desired against existing: each rule a row, and the convergence property."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from devplace.controller import _plans as plans

NOW = 1_767_225_600.0
OLD = "2025-12-31T23:00:00Z"  # an hour before NOW
NEW = "2025-12-31T23:59:00Z"  # a minute before NOW


def want(kind: str, name: str, value: str = "v1", on_drift: plans.OnDrift = "replace") -> plans.Desired:
    body = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "default"}, "spec": {"v": value}}
    return plans.Desired(plans.stamped(body), on_drift)


def stored(desired: plans.Desired, uid: str = "u1", **extra: Any) -> dict[str, Any]:
    body = dict(desired.body)
    meta = {**body["metadata"], "uid": uid, "resourceVersion": "7", "creationTimestamp": extra.pop("created", NEW)}
    return {**body, "metadata": meta, **extra}


def names(objs: Any) -> list[str]:
    return sorted(plans.key_of(o)[2] for o in objs)


def test_missing_is_created_and_unwanted_is_deleted_by_uid() -> None:
    extra = stored(want("Pod", "old"), uid="u-old")
    plan = plans.plan([want("Pod", "new")], [extra], now=NOW)
    assert names(plan.creates) == ["new"]
    assert [(d.name, d.uid) for d in plan.deletes] == [("old", "u-old")]


def test_a_current_object_is_left_alone() -> None:
    w = want("Pod", "p")
    assert len(plans.plan([w], [stored(w, status={"phase": "Running"})], now=NOW)) == 0


def test_drift_replaces_a_pod_updates_a_service_and_keeps_a_job() -> None:
    pod, svc, job = want("Pod", "p", "v2"), want("Service", "s", "v2", "update"), want("Job", "j", "v2", "keep")
    existing = [stored(want("Pod", "p")), stored(want("Service", "s", on_drift="update")), stored(want("Job", "j"))]
    plan = plans.plan([pod, svc, job], existing, now=NOW)
    assert [d.name for d in plan.deletes] == ["p"]
    assert names(plan.creates) == ["p"]
    assert [plans.key_of(s)[2] for s, _ in plan.updates] == ["s"]
    merged = plans.merged(*plan.updates[0])
    assert merged["spec"] == {"v": "v2"}
    assert merged["metadata"]["resourceVersion"] == "7"


def test_an_update_keeps_what_the_server_filled_in() -> None:
    svc = want("Service", "s", "v2", "update")
    current = stored(want("Service", "s", on_drift="update"))
    current["spec"] = {**current["spec"], "clusterIP": "10.0.0.7"}
    current["metadata"]["annotations"] = {**current["metadata"]["annotations"], "someone/else": "x"}
    merged = plans.merged(current, svc.body)
    assert merged["spec"] == {"clusterIP": "10.0.0.7", "v": "v2"}
    assert merged["metadata"]["annotations"]["someone/else"] == "x"


def test_failed_and_long_pending_brokers_are_replaced() -> None:
    failed, pending_old, pending_new = want("Pod", "f"), want("Pod", "o"), want("Pod", "n")
    existing = [
        stored(failed, status={"phase": "Failed"}),
        stored(pending_old, created=OLD, status={"phase": "Pending"}),
        stored(pending_new, created=NEW),
    ]
    plan = plans.plan([failed, pending_old, pending_new], existing, now=NOW, pending_grace=300)
    assert sorted(d.name for d in plan.deletes) == ["f", "o"]
    assert names(plan.creates) == ["f", "o"]
    assert plan.wake_at == NOW - 60 + 300


def test_retained_and_terminating_objects_are_left_alone() -> None:
    retained = stored(want("Job", "old-job"))
    terminating = stored(want("Pod", "going"))
    terminating["metadata"]["deletionTimestamp"] = NEW
    plan = plans.plan(
        [want("Pod", "going")], [retained, terminating], now=NOW, retain=frozenset({("Job", "default", "old-job")})
    )
    assert len(plan) == 0


# -- convergence ----------------------------------------------------------------------------------------------------

KINDS = st.sampled_from([("Pod", "replace"), ("Service", "update"), ("ConfigMap", "update"), ("Job", "keep")])
NAMES = st.sampled_from([f"n{i}" for i in range(8)])
VALUES = st.sampled_from(["a", "b", "c"])
PHASES = st.sampled_from(["Running", "Pending", "Failed", "Succeeded"])
CREATED = st.sampled_from([OLD, NEW])


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[plans.Desired], list[dict[str, Any]]]:
    desired = {}
    for (kind, mode), name, value in draw(st.lists(st.tuples(KINDS, NAMES, VALUES), max_size=10)):
        desired[(kind, name)] = want(kind, name, value, mode)  # type: ignore[arg-type]
    existing = {}
    for i, ((kind, mode), name, value, phase, created) in enumerate(
        draw(st.lists(st.tuples(KINDS, NAMES, VALUES, PHASES, CREATED), max_size=10))
    ):
        existing[(kind, name)] = stored(
            want(kind, name, value, mode),
            uid=f"u{i}",
            created=created,
            status={"phase": phase},  # type: ignore[arg-type]
        )
    return list(desired.values()), list(existing.values())


@given(worlds())
def test_a_plan_applied_to_existing_yields_desired(world: tuple[list[plans.Desired], list[dict[str, Any]]]) -> None:
    desired, existing = world
    plan = plans.plan(desired, existing, now=NOW)
    after = plans.applied(plan, {plans.key_of(o): o for o in existing})
    assert set(after) == {d.key for d in desired}
    for d in desired:
        if d.on_drift != "keep":
            assert plans._spec_hash(after[d.key]) == d.digest
    # and it is a fixed point: nothing more to do once applied (fresh Pods count as just created)
    fresh = {
        k: ({**v, "metadata": {**v["metadata"], "uid": v["metadata"].get("uid") or "new", "creationTimestamp": NEW}})
        for k, v in after.items()
    }
    fresh = {
        k: v if k[0] != "Pod" or v.get("status", {}).get("phase") in ("Running", "Pending") else {**v, "status": {}}
        for k, v in fresh.items()
    }
    assert len(plans.plan(desired, list(fresh.values()), now=NOW)) == 0
