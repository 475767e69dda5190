"""The /v2 hierarchy (`devplace.placement._levels`): store names of EMCO paths."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from devplace.api import _names as names
from devplace.placement import _levels as levels


@given(st.lists(st.text(min_size=1, max_size=40), min_size=7, max_size=7))
def test_store_names_are_valid_and_distinct_per_path(path: list[str]) -> None:
    name = levels.HPA_REQUIREMENT.store_name(tuple(path))
    assert names.dns1123_label_problem(name) is None
    other = levels.HPA_REQUIREMENT.store_name((*path[:-1], path[-1] + "x"))
    assert other != name
    assert levels.HPA_INTENT.store_name(tuple(path[:5])) != levels.HPA_CONSUMER.store_name((*path[:5], ""))
