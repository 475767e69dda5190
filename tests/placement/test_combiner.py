"""The scheduler of controllers: intersections, unions, counts, scores, reasons, failures."""

from __future__ import annotations

import pytest

from devplace.placement._candidates import Because, Candidate
from devplace.placement._combiner import Outcome, combine
from devplace.placement._inventory import ClusterRef

U = [ClusterRef("edge", f"c{i}") for i in range(6)]


def c(*idx: int) -> frozenset[ClusterRef]:
    return frozenset(U[i] for i in idx)


def reasons(text: str, *idx: int) -> dict[ClusterRef, Because]:
    return {U[i]: Because(text) for i in idx}


def test_allows_intersect_and_denies_unite() -> None:
    one = Outcome("one", {"web": Candidate("web", allow=c(0, 1, 2, 3), reasons=reasons("not one", 4, 5))})
    two = Outcome("two", {"web": Candidate("web", deny=c(1), reasons=reasons("not two", 1))})
    three = Outcome("three", {"web": Candidate("web", deny=c(2, 5), reasons=reasons("not three", 2, 5))})
    decision = combine(["web"], U, [one, two, three])
    assert decision.ok
    web = decision.app("web")
    assert web.qualified == 2  # c0 and c3
    assert web.clusters == (U[0],)  # one cluster by default, lowest name on a tie
    assert {r: web.reason(r) for r in web.rejected} == {
        U[1]: "not two",
        U[2]: "not three",
        U[4]: "not one",
        U[5]: "not one; not three",
    }


def test_scores_pick_among_admitted_clusters() -> None:
    scored = Candidate("web", deny=frozenset(), scores={U[3]: 9.0, U[4]: 2.0})
    more = Candidate("web", deny=frozenset(), scores={U[4]: 8.0})
    decision = combine(["web"], U, [Outcome("a", {"web": scored}), Outcome("b", {"web": more})])
    assert decision.app("web").clusters == (U[4],)  # 2 + 8 beats 9
    assert decision.app("web").scores == {U[4]: 10.0}


def test_replication_count_and_required_clusters() -> None:
    generic = Candidate("web", 3, allow=c(0, 1, 2, 3), required=c(2))
    hpa = Candidate("web", deny=c(0), reasons=reasons("too small", 0), scores={U[3]: 1.0})
    decision = combine(["web"], U, [Outcome("generic", {"web": generic}), Outcome("hpa", {"web": hpa})])
    assert decision.app("web").clusters == (U[2], U[3], U[1])  # required first, then by score, then by name
    assert decision.app("web").wanted == 3


def test_not_enough_qualified_clusters_fails_with_reasons() -> None:
    generic = Candidate("web", 2, allow=c(0, 1), reasons=reasons("not selected", 2, 3, 4, 5))
    hpa = Candidate("web", deny=c(1), reasons=reasons("no node has cpu >= 4 (max 2) for web", 1))
    decision = combine(["web"], U, [Outcome("generic", {"web": generic}), Outcome("hpa", {"web": hpa})])
    assert not decision.ok
    assert decision.app("web").clusters == ()
    assert decision.errors == (
        "app web: needs 2 clusters, 1 qualifies: edge/c1: no node has cpu >= 4 (max 2) for web; "
        "edge/c2: not selected; edge/c3: not selected; edge/c4: not selected; edge/c5: not selected",
    )


def test_many_reasons_are_summarised() -> None:
    universe = [ClusterRef("edge", f"c{i:02d}") for i in range(20)]
    hpa = Candidate("web", allow=frozenset(), reasons={r: Because("full") for r in universe})
    error = combine(["web"], universe, [Outcome("hpa", {"web": hpa})]).errors[0]
    assert error.endswith("edge/c04: full (and 15 more)")
    assert error.startswith("app web: needs 1 cluster, 0 qualify: edge/c00: full;")


def test_a_rejected_required_cluster_fails_the_app() -> None:
    generic = Candidate("web", 1, allow=c(0), required=c(0))
    hpa = Candidate("web", deny=c(0), reasons=reasons("no node has intel.com/qat >= 1 (max 0) for logger", 0))
    decision = combine(["web"], U, [Outcome("generic", {"web": generic}), Outcome("hpa", {"web": hpa})])
    assert decision.errors == (
        "app web: required clusters were rejected: edge/c0: no node has intel.com/qat >= 1 (max 0) for logger",
    )


def test_controllers_that_disagree_on_the_count_fail_the_app() -> None:
    a = Outcome("a", {"web": Candidate("web", 1, deny=frozenset())})
    b = Outcome("b", {"web": Candidate("web", 2, deny=frozenset())})
    assert combine(["web"], U, [a, b]).errors == (
        "app web: controllers disagree on the replication count (a: 1, b: 2)",
    )


def test_a_failed_controller_fails_everything_with_its_name() -> None:
    good = Outcome("generic", {"web": Candidate("web", deny=frozenset())})
    bad = Outcome("hpa", error="timed out after 10 s")
    decision = combine(["web"], U, [good, bad])
    assert decision.errors == ("placement controller hpa failed: timed out after 10 s",)
    assert decision.apps == ()


def test_problems_and_unknown_apps_fail() -> None:
    odd = Outcome("x", {"ghost": Candidate("ghost", deny=frozenset())})
    broken = Outcome(
        "generic", {"web": Candidate("web", deny=frozenset(), problems=("allOf edge/c9 selects nothing",))}
    )
    decision = combine(["web"], U, [odd, broken])
    assert decision.errors == (
        "placement controller x returned a candidate for 'ghost', which is not an app of this composite app",
        "app web: allOf edge/c9 selects nothing",
    )


def test_no_clusters_at_all() -> None:
    assert combine(["web"], [], []).errors == ("app web: no clusters are registered",)


def test_unconstrained_apps_go_to_one_cluster() -> None:
    decision = combine(["a", "b"], U, [])
    assert [p.clusters for p in decision.apps] == [(U[0],), (U[0],)]


def test_a_missing_reason_falls_back_to_the_controller_name() -> None:
    decision = combine(["web"], U, [Outcome("hpa", {"web": Candidate("web", deny=c(1))})])
    assert decision.app("web").reason(U[1]) == "rejected by hpa"


@pytest.mark.parametrize("count", [0, 1, 3, 6])
def test_choices_are_distinct_and_admitted(count: int) -> None:
    cand = Candidate("web", count, deny=c(5), scores={U[2]: 3.0, U[4]: -1.0, U[1]: 3.0})
    chosen = combine(["web"], U, [Outcome("x", {"web": cand})]).app("web").clusters
    if count == 6:
        assert chosen == ()
    else:
        assert len(set(chosen)) == count
        assert U[5] not in chosen
        assert list(chosen) == [U[1], U[2], U[0], U[3], U[4]][:count]  # score, then name; negative last
