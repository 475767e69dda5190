"""Generic placement (allOf / anyOf by cluster or label)."""

from __future__ import annotations

from devplace.placement._generic import AppIntent, ClusterSelector, NotSelected, generic_candidates
from devplace.placement._inventory import ClusterInventory, ClusterRef


def fleet() -> list[ClusterInventory]:
    return [
        ClusterInventory(ClusterRef("edge", "c1"), {"gpu": "true", "zone": "a"}),
        ClusterInventory(ClusterRef("edge", "c2"), {"zone": "b"}),
        ClusterInventory(ClusterRef("edge", "c3"), {"gpu": "", "zone": "a"}),
        ClusterInventory(ClusterRef("core", "c1"), {"gpu": "true"}),
    ]


def refs(*names: str) -> frozenset[ClusterRef]:
    return frozenset(ClusterRef(*n.split("/")) for n in names)


def test_all_of_named_clusters_are_required_and_counted() -> None:
    intent = AppIntent("web", "gpi/web", all_of=(ClusterSelector("edge", "c1"), ClusterSelector("core", "c1")))
    cand = generic_candidates([intent], fleet())["web"]
    assert cand.required == refs("edge/c1", "core/c1")
    assert cand.replicas == 2
    assert cand.allowed_in([c.ref for c in fleet()]) == refs("edge/c1", "core/c1")
    assert not cand.problems


def test_any_of_adds_one_cluster_from_its_pool() -> None:
    intent = AppIntent("web", "gpi/web", any_of=(ClusterSelector("edge", "c2"), ClusterSelector("edge", "c3")))
    cand = generic_candidates([intent], fleet())["web"]
    assert cand.replicas == 1
    assert cand.required == frozenset()
    assert cand.allowed_in([c.ref for c in fleet()]) == refs("edge/c2", "edge/c3")


def test_labels_select_every_cluster_of_the_provider_carrying_them() -> None:
    by_key = AppIntent("a", "gpi/a", all_of=(ClusterSelector("edge", label="gpu"),))
    by_value = AppIntent("b", "gpi/b", all_of=(ClusterSelector("edge", label="gpu=true"),))
    cands = generic_candidates([by_key, by_value], fleet())
    assert cands["a"].required == refs("edge/c1", "edge/c3")  # core/c1 is another provider's
    assert cands["b"].required == refs("edge/c1")


def test_all_of_and_any_of_combine() -> None:
    intent = AppIntent(
        "web", "gpi/web", all_of=(ClusterSelector("edge", "c1"),), any_of=(ClusterSelector("edge", label="zone=a"),)
    )
    cand = generic_candidates([intent], fleet())["web"]
    assert cand.required == refs("edge/c1")
    assert cand.replicas == 2  # c1 plus one more from the pool (c3; c1 is already required)
    assert cand.allowed_in([c.ref for c in fleet()]) == refs("edge/c1", "edge/c3")


def test_any_of_already_covered_by_all_of_adds_nothing() -> None:
    intent = AppIntent(
        "web", "gpi/web", all_of=(ClusterSelector("edge", "c1"),), any_of=(ClusterSelector("edge", "c1"),)
    )
    assert generic_candidates([intent], fleet())["web"].replicas == 1


def test_unselected_clusters_are_denied_with_the_intent_named() -> None:
    intent = AppIntent("web", "gpi/web", any_of=(ClusterSelector("edge", "c2"),))
    cand = generic_candidates([intent], fleet())["web"]
    why = cand.reasons[ClusterRef("edge", "c1")]
    assert isinstance(why, NotSelected)
    assert str(why) == "not selected by generic placement intent gpi/web"
    assert ClusterRef("edge", "c2") not in cand.reasons


def test_selecting_nothing_is_a_problem() -> None:
    missing = AppIntent("web", "gpi/web", all_of=(ClusterSelector("edge", "c9"),))
    no_label = AppIntent("db", "gpi/db", any_of=(ClusterSelector("edge", label="fpga"),))
    cands = generic_candidates([missing, no_label], fleet())
    assert cands["web"].problems == ("app intent gpi/web: allOf edge/c9 selects no registered cluster",)
    assert cands["db"].problems == ("app intent gpi/db: anyOf edge label fpga selects no registered cluster",)


def test_apps_without_intents_get_no_candidate() -> None:
    assert generic_candidates([], fleet()) == {}


def test_several_intents_of_one_app_merge() -> None:
    first = AppIntent("web", "gpi/a", all_of=(ClusterSelector("edge", "c1"),))
    second = AppIntent("web", "gpi/b", all_of=(ClusterSelector("edge", "c2"),))
    cand = generic_candidates([first, second], fleet())["web"]
    assert cand.required == refs("edge/c1", "edge/c2")
    assert cand.replicas == 2
    assert str(cand.reasons[ClusterRef("edge", "c3")]) == "not selected by generic placement intent gpi/a, gpi/b"
