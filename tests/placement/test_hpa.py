"""The HPA placement controller: one test per rule of devplace.placement._hpa's docstring."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace.placement._hpa import (
    Consumer,
    Contended,
    InventoryUnavailable,
    MissingLabel,
    NoNodes,
    NoSingleNode,
    ReplicasShort,
    Requirement,
    ShortOf,
    hpa_candidates,
    optional_fits,
    show_amount,
)
from devplace.placement._inventory import ClusterInventory, ClusterRef, NodeInventory, milli
from tests.placement.samples import label, need

EDGE = "edge"


def ref(name: str) -> ClusterRef:
    return ClusterRef(EDGE, name)


RESOURCES = {"gpu": "nvidia.com/gpu", "qat": "intel.com/qat"}


def node(name: str, labels: dict[str, str] | None = None, **free: str) -> NodeInventory:
    """`node("n", cpu="8", gpu="1")`: free amounts by short name (gpu, qat) or resource name."""
    return NodeInventory(name, {RESOURCES.get(k, k): milli(v) for k, v in free.items()}, labels or {})


def cluster(name: str, *nodes: NodeInventory, problem: str | None = None) -> ClusterInventory:
    return ClusterInventory(ref(name), {}, tuple(nodes), problem)


def consumer(app: str, name: str, *reqs: Requirement, replicas: int = 1) -> Consumer:
    return Consumer(app, name, workload=name, container="main", replicas=replicas, requirements=reqs)


def allowed(cands: dict[str, Any], app: str, universe: list[ClusterInventory]) -> set[str]:
    return {r.name for r in cands[app].allowed_in([c.ref for c in universe])}


# -- qualification -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reqs", "nodes", "qualifies"),
    [
        ((need("cpu", "4"),), (node("n", cpu="4"),), True),
        ((need("cpu", "4"),), (node("n", cpu="3999m"),), False),
        ((need("cpu", None, "4"),), (node("n", cpu="3"),), False),  # limits stand in for absent requests
        ((need("cpu", "2", "8"),), (node("n", cpu="2"),), True),  # requests, not limits, must be free
        ((need("memory", "1G"),), (node("n", memory="1Gi"),), True),
        ((need("memory", "1Gi"),), (node("n", memory="1G"),), False),
        ((need("intel.com/qat", "1", "1"),), (node("n", cpu="8"),), False),
        ((label("avx", "true"),), (node("n", {"avx": "true"}),), True),
        ((label("avx", "true"),), (node("n", {"avx": "false"}),), False),
        ((label("avx", "true"), label("avx", "yes")), (node("n", {"avx": "yes"}),), True),  # one key: alternatives
        # one node must satisfy everything at once: cpu on one node and the GPU on another is not enough
        (
            (need("cpu", "4"), need("nvidia.com/gpu", "1", "1")),
            (node("a", cpu="8"), node("b", cpu="1", gpu="1")),
            False,
        ),
        ((need("cpu", "4"), need("nvidia.com/gpu", "1", "1")), (node("a", cpu="8"), node("b", cpu="4", gpu="1")), True),
        (
            (need("cpu", "1"), label("zone", "a")),
            (node("a", {"zone": "b"}, cpu="8"), node("b", {"zone": "a"}, cpu="500m")),
            False,
        ),
        ((), (node("n"),), True),  # a consumer with no requirements needs just a node
    ],
)
def test_a_cluster_qualifies_only_if_one_node_meets_every_mandatory_requirement(
    reqs: tuple[Requirement, ...], nodes: tuple[NodeInventory, ...], qualifies: bool
) -> None:
    fleet = [cluster("c", *nodes)]
    cands = hpa_candidates([consumer("app", "web", *reqs)], fleet)
    assert allowed(cands, "app", fleet) == ({"c"} if qualifies else set())


def test_optional_requirements_do_not_disqualify() -> None:
    fleet = [cluster("c", node("n", cpu="4"))]
    web = consumer("app", "web", need("cpu", "4"), need("nvidia.com/gpu", None, "1", mandatory=False, weight=9))
    assert allowed(hpa_candidates([web], fleet), "app", fleet) == {"c"}


@pytest.mark.parametrize(
    ("fleet", "reason"),
    [
        ([cluster("c", node("n", cpu="8"))], "no node has intel.com/qat >= 1 (max 0) for logger"),
        ([cluster("c", node("n", cpu="8", qat="1"), node("m", cpu="1"))], None),
    ],
)
def test_a_missing_resource_is_named_with_the_best_any_node_has(
    fleet: list[ClusterInventory], reason: str | None
) -> None:
    cands = hpa_candidates([consumer("analytics", "logger", need("intel.com/qat", "1", "1"))], fleet)
    got = cands["analytics"].reasons.get(ref("c"))
    assert (str(got) if got else None) == reason


def test_reasons_say_what_failed() -> None:
    fleet = [
        cluster("small", node("n", cpu="2", memory="1Gi")),
        cluster("plain", node("n", cpu="8", memory="16Gi")),
        cluster("split", node("a", cpu="8"), node("b", cpu="1", gpu="1")),
        cluster("empty"),
        cluster("gone", problem="http://x did not answer within 5 s"),
    ]
    web = consumer("app", "web", need("cpu", "4"), need("nvidia.com/gpu", "1", "1"))
    tagged = consumer("other", "tagged", label("zone", "a"))
    cands = hpa_candidates([web, tagged], fleet)
    reasons = {r.name: str(why) for r, why in cands["app"].reasons.items()}
    assert reasons == {
        "small": "no node has cpu >= 4 (max 2) for web",
        "plain": "no node has nvidia.com/gpu >= 1 (max 0) for web",
        "split": "no single node has cpu >= 4, nvidia.com/gpu >= 1 together for web",
        "empty": "has no schedulable nodes",
        "gone": "inventory unavailable: http://x did not answer within 5 s",
    }
    assert isinstance(cands["app"].reasons[ref("small")], ShortOf)
    assert isinstance(cands["app"].reasons[ref("split")], NoSingleNode)
    assert isinstance(cands["app"].reasons[ref("empty")], NoNodes)
    assert isinstance(cands["app"].reasons[ref("gone")], InventoryUnavailable)
    assert isinstance(cands["other"].reasons[ref("plain")], MissingLabel)
    assert str(cands["other"].reasons[ref("plain")]) == "no node has label zone=a for tagged"


# -- replicas, node by node ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "nodes", "qualifies"),
    [
        (2, (node("a", cpu="4"),), True),  # two replicas of 2 cpu share one node of 4
        (3, (node("a", cpu="4"),), False),
        (3, (node("a", cpu="4"), node("b", cpu="3")), True),
        (3, (node("a", cpu="3"), node("b", cpu="3"), node("c", cpu="1")), False),  # 3 cpu free in total is not 2+2+2
        (4, (node("a", cpu="3"), node("b", cpu="3"), node("c", cpu="5")), True),
    ],
)
def test_replicas_are_accounted_node_by_node(replicas: int, nodes: tuple[NodeInventory, ...], qualifies: bool) -> None:
    fleet = [cluster("c", *nodes)]
    cands = hpa_candidates([consumer("app", "web", need("cpu", "2"), replicas=replicas)], fleet)
    assert allowed(cands, "app", fleet) == ({"c"} if qualifies else set())
    if not qualifies:
        assert isinstance(cands["app"].reasons[ref("c")], ReplicasShort)


def test_the_consumers_of_one_app_share_the_cluster_they_go_to() -> None:
    fleet = [cluster("c", node("a", cpu="4"))]
    app = [consumer("app", "web", need("cpu", "3")), consumer("app", "db", need("cpu", "2"))]
    cands = hpa_candidates(app, fleet)
    assert allowed(cands, "app", fleet) == set()
    assert str(cands["app"].reasons[ref("c")]) == "only 0 of 1 replicas of db fit, counting node by node"


def test_replicas_short_names_how_many_fitted() -> None:
    fleet = [cluster("c", node("a", cpu="4"), node("b", cpu="2"))]
    cands = hpa_candidates([consumer("app", "web", need("cpu", "2"), replicas=4)], fleet)
    assert str(cands["app"].reasons[ref("c")]) == "only 3 of 4 replicas of web fit, counting node by node"


# -- contention ----------------------------------------------------------------------------------------------


def test_apps_contending_for_a_scarce_resource_get_disjoint_lists() -> None:
    fleet = [cluster(f"c{i}", node("n", cpu="16", qat="1")) for i in range(4)]
    a = consumer("analytics", "logger", need("intel.com/qat", "1", "1"))
    b = consumer("crypto", "vpn", need("intel.com/qat", "1", "1"))
    cands = hpa_candidates([a, b], fleet)
    left, right = allowed(cands, "analytics", fleet), allowed(cands, "crypto", fleet)
    assert left.isdisjoint(right)
    assert left | right == {"c0", "c1", "c2", "c3"}
    assert len(left) == len(right) == 2  # shared out round-robin, not all to the first
    lost = next(iter(right))
    why = cands["analytics"].reasons[ref(lost)]
    assert isinstance(why, Contended)
    assert str(why) == (
        "contends with crypto for intel.com/qat: they do not fit together, and the cluster went to crypto"
    )


def test_apps_that_fit_together_share_clusters() -> None:
    fleet = [cluster("c", node("n", cpu="16", qat="2"))]
    a = consumer("analytics", "logger", need("intel.com/qat", "1", "1"))
    b = consumer("crypto", "vpn", need("intel.com/qat", "1", "1"))
    cands = hpa_candidates([a, b], fleet)
    assert allowed(cands, "analytics", fleet) == allowed(cands, "crypto", fleet) == {"c"}


def test_an_app_that_cannot_fit_alone_is_not_called_contended() -> None:
    fleet = [cluster("c", node("n", cpu="4"))]
    small = consumer("small", "web", need("cpu", "1"))
    big = consumer("big", "db", need("cpu", "2"), replicas=3)
    cands = hpa_candidates([small, big], fleet)
    assert isinstance(cands["big"].reasons[ref("c")], ReplicasShort)


def test_a_failed_packing_leaves_no_trace_for_the_next_app() -> None:
    # "big" is tried first on c (fewest secured so far, then name) and fails half-way; "small" must still see
    # all of n1 and n2: EMCO's rollback of this accounting was broken by aliased maps.
    fleet = [cluster("c", node("n1", cpu="2"), node("n2", cpu="2"))]
    big = consumer("a-big", "db", need("cpu", "2"), replicas=3)
    small = consumer("b-small", "web", need("cpu", "2"), replicas=2)
    cands = hpa_candidates([big, small], fleet)
    assert allowed(cands, "b-small", fleet) == {"c"}
    assert allowed(cands, "a-big", fleet) == set()


# -- scores --------------------------------------------------------------------------------------------------


def test_optional_requirements_score_clusters_by_weight() -> None:
    fleet = [
        cluster("gpu", node("n", cpu="8", gpu="1")),
        cluster("plain", node("n", cpu="8")),
        cluster("turbo", node("n", {"turbo": "on"}, cpu="8")),
        cluster("split", node("a", cpu="8"), node("b", cpu="1", gpu="1")),
    ]
    web = consumer(
        "app",
        "web",
        need("cpu", "4"),
        need("nvidia.com/gpu", None, "1", mandatory=False, weight=9),
        label("turbo", "on", mandatory=False, weight=2),
    )
    cands = hpa_candidates([web], fleet)
    assert dict(cands["app"].scores) == {ref("gpu"): 9.0, ref("plain"): 0.0, ref("turbo"): 2.0, ref("split"): 0.0}
    assert [r.name for r in optional_fits(web, fleet[0])] == ["nvidia.com/gpu"]
    assert optional_fits(web, fleet[3]) == ()  # the GPU is not on a node that also has the cpu


def test_an_optional_resource_counts_only_if_every_replica_gets_it() -> None:
    fleet = [cluster("c", node("a", cpu="8", gpu="1"), node("b", cpu="8"))]
    web = consumer("app", "web", need("cpu", "1"), need("nvidia.com/gpu", "1", "1", mandatory=False), replicas=2)
    assert optional_fits(web, fleet[0]) == ()
    assert hpa_candidates([web], fleet)["app"].scores == {ref("c"): 0.0}


# -- representation ------------------------------------------------------------------------------------------


def test_candidates_use_the_shorter_list() -> None:
    fleet = [cluster(f"c{i}", node("n", cpu="8" if i else "1")) for i in range(10)]
    cands = hpa_candidates([consumer("app", "web", need("cpu", "4"))], fleet)
    assert cands["app"].deny == frozenset({ref("c0")})
    assert cands["app"].allow is None
    assert cands["app"].replicas is None  # no opinion on the replication count
    rare = hpa_candidates([consumer("app", "web", need("cpu", "2"))], [*fleet[:1], cluster("x", node("n", cpu="4"))])
    assert rare["app"].allow == frozenset({ref("x")})


def test_apps_without_consumers_get_no_candidate() -> None:
    assert hpa_candidates([], [cluster("c", node("n", cpu="1"))]) == {}


@pytest.mark.parametrize(
    ("resource", "amount", "shown"),
    [("memory", milli("16Gi"), "16Gi"), ("memory", milli("1G"), "1G"), ("cpu", 500, "500m"), ("cpu", 4000, "4")],
)
def test_amounts_are_shown_as_kubernetes_quantities(resource: str, amount: int, shown: str) -> None:
    assert show_amount(resource, amount) == shown


# -- invariants ----------------------------------------------------------------------------------------------

_cpus = st.integers(min_value=0, max_value=8)


@st.composite
def _fleets(draw: st.DrawFn) -> list[ClusterInventory]:
    clusters = []
    for c in range(draw(st.integers(min_value=1, max_value=4))):
        nodes = [
            NodeInventory(f"n{i}", {"cpu": draw(_cpus) * 1000, "example.com/acc": draw(st.integers(0, 2)) * 1000})
            for i in range(draw(st.integers(min_value=0, max_value=3)))
        ]
        clusters.append(ClusterInventory(ref(f"c{c}"), {}, tuple(nodes)))
    return clusters


@st.composite
def _consumers(draw: st.DrawFn) -> list[Consumer]:
    out = []
    for i in range(draw(st.integers(min_value=1, max_value=4))):
        reqs = [need("cpu", str(draw(st.integers(1, 4))))]
        if draw(st.booleans()):
            reqs.append(need("example.com/acc", "1", "1"))
        out.append(consumer(f"app{i % 3}", f"c{i}", *reqs, replicas=draw(st.integers(1, 3))))
    return out


def _brute_force_fits(units: list[tuple[int, int]], free: list[tuple[int, int]]) -> bool:
    """Does some assignment of units (cpu, acc) to nodes exist? Exhaustive; tiny inputs only."""
    if not units:
        return True
    (cpu, acc), rest = units[0], units[1:]
    for i, (fc, fa) in enumerate(free):
        if fc >= cpu and fa >= acc:
            left = list(free)
            left[i] = (fc - cpu, fa - acc)
            if _brute_force_fits(rest, left):
                return True
    return False


def _units(consumers: list[Consumer]) -> list[tuple[int, int]]:
    return [
        (dict(c.demand).get("cpu", 0), dict(c.demand).get("example.com/acc", 0))
        for c in consumers
        for _ in range(c.replicas)
    ]


@given(_fleets(), _consumers())
def test_apps_sharing_a_cluster_really_fit_there_together(
    fleet: list[ClusterInventory], consumers: list[Consumer]
) -> None:
    cands = hpa_candidates(consumers, fleet)
    for c in fleet:
        sharing = [app for app, cand in cands.items() if cand.admits(c.ref)]
        units = _units([k for k in consumers if k.app in sharing])
        free = [(n.free.get("cpu", 0), n.free.get("example.com/acc", 0)) for n in c.nodes]
        assert _brute_force_fits(units, free), (c.ref, sharing)


@given(_fleets(), _consumers())
def test_every_excluded_cluster_has_a_reason_and_admitted_ones_none(
    fleet: list[ClusterInventory], consumers: list[Consumer]
) -> None:
    cands = hpa_candidates(consumers, fleet)
    for cand in cands.values():
        for c in fleet:
            assert cand.admits(c.ref) == (c.ref not in cand.reasons)


@given(_fleets(), _consumers())
def test_a_cluster_no_app_fits_alone_is_never_admitted(
    fleet: list[ClusterInventory], consumers: list[Consumer]
) -> None:
    cands = hpa_candidates(consumers, fleet)
    for app, cand in cands.items():
        mine = _units([k for k in consumers if k.app == app])
        for c in fleet:
            free = [(n.free.get("cpu", 0), n.free.get("example.com/acc", 0)) for n in c.nodes]
            if cand.admits(c.ref):
                assert _brute_force_fits(mine, free)
