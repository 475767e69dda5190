"""The incremental decider decides exactly what `decisions.decide` decides from scratch, after any history."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from devplace.controller import _decisions as decisions
from devplace.controller import _incremental as incremental
from devplace.controller import _inputs as inputs
from devplace.controller import _plans as plans
from devplace.store._base import rfc3339
from tests.controller.samples import BROKER_JOB_SPEC, PLAIN_POD_SPEC, configuration, conflict, instance

START = 1_767_225_600.0
NAMES = ["cam-a", "cam-b", "cam-c", "cam-d", "cam-a", "cam-b", "cam-c", "cam-d", "akri-onvif"]
"""Mostly names of their own; `akri-onvif` (named like the Configuration) takes the full path."""
NODES = ["n1", "n2", "n3"]
STRATEGIES: list[dict[str, Any] | None] = [
    None,
    {"perNode": {}},
    {"job": {}},
    {"deployment": {"replicas": 2}},
    {"configuration": {"replicas": 2, "devicesPerPod": 1}},
    {"pool": {"size": 2}},
]

instance_op = st.tuples(
    st.just("instance"),
    st.sampled_from(NAMES),
    st.lists(st.sampled_from(NODES), max_size=3),
    st.booleans(),
    st.integers(1, 3),
    st.integers(0, 1),
)
pod_op = st.tuples(
    st.just("object"),
    st.integers(0, 50),
    st.sampled_from(["Running", "Pending", "Failed", "Succeeded", "delete", "deleting", "drift", "copy", "active"]),
)
time_op = st.tuples(st.just("time"), st.sampled_from([-400, -50, 0, 1, 100, 299, 301, 400]))
config_op = st.tuples(st.just("config"), st.integers(0, len(STRATEGIES) - 1), st.booleans(), st.integers(0, 2))
apply_op = st.tuples(st.just("apply"))
ops = st.lists(
    st.one_of(instance_op, instance_op, pod_op, pod_op, time_op, apply_op, apply_op, apply_op, config_op),
    min_size=1,
    max_size=40,
)


def _cfg(strategy: int, services: bool, variant: int) -> dict[str, Any]:
    chosen = STRATEGIES[strategy]
    job = BROKER_JOB_SPEC if chosen is not None and "job" in chosen else None
    pod = PLAIN_POD_SPEC if chosen is not None and ("configuration" in chosen or "pool" in chosen) else None
    return configuration(
        strategy=chosen,
        job=job,
        pod=pod,
        services=services,
        generation=1 + (variant == 2),
        conditions=[conflict("n3")] if variant == 1 else None,
    )


def _with(obj: Mapping[str, Any], **meta: Any) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], **meta}}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=config_op, history=ops)
@example(  # a Pending broker past its grace, then the clock goes back: it is not due any more
    start=("config", 1, True, 0),
    history=[("instance", "cam-a", ["n1"], False, 1, 0), ("apply",), ("time", 301), ("time", -400)],
)
@example(  # an old generation's Job is kept while its Instance is online, deleted when it goes offline
    start=("config", 2, True, 0),
    history=[
        ("instance", "cam-a", ["n1"], False, 1, 0),
        ("apply",),
        ("config", 2, True, 2),
        ("apply",),
        ("instance", "cam-a", [], False, 1, 0),
    ],
)
@example(  # a Job being deleted is not retained when its Instance comes back under a new generation
    start=("config", 0, False, 0),
    history=[
        ("config", 2, False, 0),
        ("instance", "cam-a", ["n1"], False, 1, 0),
        ("apply",),
        ("instance", "cam-a", [], False, 1, 0),
        ("object", 0, "deleting"),
        ("config", 2, False, 2),
        ("instance", "cam-a", ["n1"], False, 1, 0),
    ],
)
def test_incremental_decisions_equal_decisions_from_scratch(start: tuple[Any, ...], history: list[Any]) -> None:
    cfg = _cfg(*start[1:])
    insts: dict[str, inputs.InstanceFacts] = {}
    state: dict[plans.Key, Mapping[str, Any]] = {}
    now = START
    uids = 0
    decider = incremental.Decider()
    decision: decisions.Decision | None = None
    for op in [("apply",), *history, ("apply",)]:
        kind = op[0]
        if kind == "instance":
            _, name, nodes, shared, capacity, uid = op
            if not nodes and name in insts and uid:
                del insts[name]
            else:
                body = instance(name, nodes, shared=shared, capacity=capacity)
                body["metadata"]["uid"] += str(uid)
                insts[name] = inputs.InstanceFacts.from_wire(body)
        elif kind == "object" and state:
            _, index, change = op
            key = sorted(state)[index % len(state)]
            obj = state[key]
            if change == "delete":
                del state[key]
            elif change == "deleting":
                state[key] = _with(obj, deletionTimestamp=rfc3339(now))
            elif change == "drift":
                state[key] = _with(obj, annotations={"devplace.io/spec-hash": "other"})
            elif change == "copy":  # equal, but not the same object
                state = {k: copy.deepcopy(v) for k, v in state.items()}
            elif change == "active":
                state[key] = {**obj, "status": {"active": 1}}
            else:
                state[key] = {**obj, "status": {"phase": change}}
        elif kind == "time":
            now += op[1]
        elif kind == "config":
            cfg = {**_cfg(*op[1:]), "status": cfg.get("status", {})}
        elif kind == "apply" and decision is not None:
            after = plans.applied(decision.plan, state)
            state = {}
            for key, obj in after.items():
                if not (obj.get("metadata") or {}).get("uid"):
                    uids += 1
                    obj = _with(obj, uid=f"u{uids}", creationTimestamp=rfc3339(now))
                state[key] = obj
            if decision.status is not None:
                cfg = decision.status
        view = inputs.ConfigurationFacts.from_wire(cfg)
        existing = list(state.values())
        want = decisions.decide(view, list(insts.values()), existing, now=now)
        got = decider.decide(("default", "akri-onvif"), view, list(insts.values()), existing, now=now)
        assert got == want
        assert got.status == want.status
        assert got.wake_at == want.wake_at
        decision = got


def test_a_fresh_decider_and_a_warm_one_agree_after_an_unplug() -> None:
    cfg = inputs.ConfigurationFacts.from_wire(configuration(strategy={"perNode": {}}))
    insts = [inputs.InstanceFacts.from_wire(instance(f"cam-{i}", ["n1"], shared=False)) for i in range(20)]
    warm = incremental.Decider()
    first = warm.decide("k", cfg, insts, [], now=START)
    state = plans.applied(first.plan, {})
    existing = [{**o, "status": {"phase": "Running"}} for o in state.values()]
    second = warm.decide("k", cfg, insts, existing, now=START)
    existing = list(plans.applied(second.plan, {plans.key_of(o): o for o in existing}).values())
    warm.decide("k", cfg, insts, existing, now=START)
    later = warm.decide("k", cfg, insts[1:], existing, now=START + 1)
    assert later == incremental.Decider().decide("k", cfg, insts[1:], existing, now=START + 1)
    assert later == decisions.decide(cfg, insts[1:], existing, now=START + 1)
    assert [d.name for d in later.plan.deletes] == ["cam-0-pod", "cam-0-svc"]
