"""Partition candidates: the compact allow-or-deny form."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace.placement._candidates import Because, Candidate
from devplace.placement._inventory import ClusterRef

UNIVERSE = [ClusterRef("p", f"c{i}") for i in range(10)]


@pytest.mark.parametrize(
    ("allowed", "form", "size"),
    [
        (UNIVERSE[:2], "allow", 2),
        (UNIVERSE[:5], "allow", 5),  # a tie keeps the allow form
        (UNIVERSE[:6], "deny", 4),
        (UNIVERSE, "deny", 0),
        ([], "allow", 0),
    ],
)
def test_from_allowed_picks_the_shorter_list(allowed: list[ClusterRef], form: str, size: int) -> None:
    cand = Candidate.from_allowed("app", allowed, UNIVERSE)
    assert (cand.allow is not None, cand.deny is not None) == (form == "allow", form == "deny")
    assert cand.size == size


def test_a_candidate_needs_exactly_one_list() -> None:
    with pytest.raises(ValueError, match="exactly one of allow and deny"):
        Candidate("app")
    with pytest.raises(ValueError, match="exactly one of allow and deny"):
        Candidate("app", allow=frozenset(), deny=frozenset())


def test_replicas_cannot_be_negative() -> None:
    with pytest.raises(ValueError, match="replicas"):
        Candidate("app", -1, allow=frozenset())


def test_because_renders_its_text() -> None:
    assert str(Because("rejected by generic")) == "rejected by generic"


@given(st.sets(st.integers(min_value=0, max_value=9)))
def test_either_form_admits_exactly_the_allowed_clusters(indices: set[int]) -> None:
    allowed = {UNIVERSE[i] for i in indices}
    cand = Candidate.from_allowed("app", allowed, UNIVERSE)
    assert {c for c in UNIVERSE if cand.admits(c)} == allowed
    assert cand.allowed_in(UNIVERSE) == allowed
    assert cand.size == min(len(allowed), len(UNIVERSE) - len(allowed))  # always the shorter list
