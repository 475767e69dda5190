"""One Configuration reconciled, decided purely: Akri's end-to-end checks as tables, status, deletion, bad input."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devplace.controller import _decisions as decisions
from devplace.controller import _inputs as inputs
from devplace.controller import _plans as plans
from tests.controller.samples import PLAIN_POD_SPEC, cfg_view, configuration, instance, views

NOW = 1_767_225_600.0


def decide(cfg: dict[str, Any] | None, insts: list[dict[str, Any]], existing: list[Any]) -> decisions.Decision:
    return decisions.decide(cfg_view(cfg) if cfg else None, views(*insts), existing, now=NOW)


def converge(
    cfg: dict[str, Any] | None, insts: list[dict[str, Any]], existing: list[Any], *, running: bool = True
) -> tuple[dict[plans.Key, Mapping[str, Any]], decisions.Decision]:
    """Decide and apply until nothing changes; the 'kubelet' marks every Pod Running."""
    state = {plans.key_of(o): o for o in existing}
    for _ in range(6):
        decision = decide(cfg, insts, list(state.values()))
        if not len(decision.plan) and decision.status is None:
            return state, decision
        cfg = decision.status or cfg
        state = plans.applied(decision.plan, state)
        if running:
            state = {
                k: ({**v, "status": {"phase": "Running"}, "metadata": {**v["metadata"], "uid": k[2]}})
                if k[0] == "Pod"
                else {**v, "metadata": {**v["metadata"], "uid": k[2]}}
                for k, v in state.items()
            }
    raise AssertionError("did not converge")


def names_by_kind(state: Mapping[plans.Key, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for kind, _, name in sorted(state):
        out.setdefault(kind, []).append(name)
    return out


TWO = [instance("akri-onvif-8120fe", ["node-a"], shared=False), instance("akri-onvif-a19705", ["node-b"], shared=False)]


def test_akri_two_instances_give_two_brokers_two_instance_services_one_configuration_service() -> None:
    state, decision = converge(configuration(), TWO, [])
    assert names_by_kind(state) == {
        "Pod": ["akri-onvif-8120fe-pod", "akri-onvif-a19705-pod"],
        "Service": ["akri-onvif-8120fe-svc", "akri-onvif-a19705-svc", "akri-onvif-svc"],
    }
    svc = state[("Service", "default", "akri-onvif-8120fe-svc")]
    assert svc["spec"]["selector"] == {"akri.sh/instance": "akri-onvif-8120fe"}
    assert svc["spec"]["ports"] == [{"name": "grpc", "port": 80, "targetPort": 8083}]
    assert state[("Service", "default", "akri-onvif-svc")]["spec"]["selector"] == {
        "akri.sh/configuration": "akri-onvif"
    }
    assert decision.status is None  # converged: the status written on the way is current
    assert decision.brokers.skips == ()


def test_services_wait_for_a_running_broker() -> None:
    state, _ = converge(configuration(), TWO, [], running=False)
    assert names_by_kind(state) == {"Pod": ["akri-onvif-8120fe-pod", "akri-onvif-a19705-pod"]}


def test_akri_all_devices_offline_removes_brokers_and_services() -> None:
    state, _ = converge(configuration(), TWO, [])
    offline = [instance("akri-onvif-8120fe", []), instance("akri-onvif-a19705", [])]
    after, _ = converge(configuration(), offline, list(state.values()))
    assert after == {}


def test_akri_configuration_deleted_deletes_everything_it_owns() -> None:
    state, _ = converge(configuration(), TWO, [])
    decision = decide(None, TWO, list(state.values()))
    assert decision.plan.creates == ()
    assert len(decision.plan.deletes) == 5
    assert plans.applied(decision.plan, state) == {}


def test_a_device_coming_back_brings_its_broker_back() -> None:
    state, _ = converge(configuration(), TWO, [])
    gone, _ = converge(configuration(), TWO[:1], list(state.values()))
    assert names_by_kind(gone)["Pod"] == ["akri-onvif-8120fe-pod"]
    back, _ = converge(configuration(), TWO, list(gone.values()))
    assert names_by_kind(back) == names_by_kind(state)


def test_status_counts_brokers_and_says_why_some_were_skipped() -> None:
    cfg = configuration(strategy={"deployment": {"replicas": 3}}, capacity=2)
    insts = [instance("akri-onvif-8120fe", ["node-a"], capacity=2)]
    first = decide(cfg, insts, [])
    assert first.status is not None
    status = first.status["status"]
    assert status["brokers"] == {"desired": 2, "running": 0, "pending": 2}  # counted after the plan
    (condition,) = status["conditions"]
    assert condition["type"] == "BrokersSkipped"
    assert condition["reason"] == "CapacityBound"
    assert "3 replicas requested" in condition["message"]
    _state, last = converge(cfg, insts, [])
    assert last.status is None


def test_status_keeps_the_agents_conditions() -> None:
    agent = {"type": "DiscoveryFailed", "status": "True", "reason": "X", "message": "m", "node": "node-a"}
    cfg = configuration(conditions=[agent])
    decision = decide(cfg, TWO, [])
    assert decision.status is not None
    assert decision.status["status"]["conditions"] == [agent]


def test_an_invalid_configuration_in_the_store_gets_a_condition_and_nothing_else() -> None:
    bad = configuration(strategy={"pool": {"size": 3}})  # {{PLACEHOLDER}} with a pool: refused
    existing = [{"kind": "Pod", "metadata": {"name": "x-pod", "namespace": "default", "uid": "u"}}]
    decision = decide(bad, TWO, existing)
    assert len(decision.plan) == 0
    assert decision.status is not None
    (condition,) = decision.status["status"]["conditions"]
    assert condition["type"] == "InvalidConfiguration"
    assert "spec.brokerSpec.brokerPodSpec.containers[0].resources" in condition["message"]


def test_a_changed_broker_spec_replaces_the_brokers() -> None:
    state, _ = converge(configuration(), TWO, [])
    changed = configuration(pod={**PLAIN_POD_SPEC})
    decision = decide(changed, TWO, list(state.values()))
    assert {d.name for d in decision.plan.deletes} >= {"akri-onvif-8120fe-pod", "akri-onvif-a19705-pod"}
    assert all(d.reason == "drifted from the Configuration" for d in decision.plan.deletes if d.kind == "Pod")


def test_a_broker_pending_too_long_or_failed_is_recreated_and_the_next_due_time_is_known() -> None:
    state, _ = converge(configuration(), TWO, [], running=False)
    pods = {k: v for k, v in state.items() if k[0] == "Pod"}
    created = "2026-01-01T00:00:00Z"
    aged = {k: {**v, "metadata": {**v["metadata"], "creationTimestamp": created}} for k, v in pods.items()}
    key_a, key_b = sorted(aged)
    aged[key_b] = {**aged[key_b], "status": {"phase": "Failed"}}
    start = inputs.seconds_of(created)
    assert start is not None
    early = decisions.decide(cfg_view(configuration()), views(*TWO), list(aged.values()), now=start + 299)
    assert [d.name for d in early.plan.deletes] == [key_b[2]]
    assert early.wake_at == start + 300
    late = decisions.decide(cfg_view(configuration()), views(*TWO), list(aged.values()), now=start + 300)
    assert sorted(d.name for d in late.plan.deletes) == sorted([key_a[2], key_b[2]])
    assert sorted(plans.key_of(c)[2] for c in late.plan.creates) == sorted([key_a[2], key_b[2]])
