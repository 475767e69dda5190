"""EMCO's names and their Kubernetes spellings (`devplace.placement._names`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace.api import _names as names
from devplace.placement._names import emco_name_problem, kube_name


@pytest.mark.parametrize("name", ["core-fwall-RAM-needs", "a", "A_b.c-9", "x" * 128])
def test_emco_names_allow_uppercase_and_underscores(name: str) -> None:
    assert emco_name_problem(name) is None


@pytest.mark.parametrize("name", ["", "-a", "a-", "a b", "a/b", "x" * 129, "é"])
def test_emco_names_refuse_the_rest(name: str) -> None:
    assert emco_name_problem(name) is not None


@given(st.text(min_size=1, max_size=80))
def test_kube_names_are_valid_or_empty_and_stable(name: str) -> None:
    derived = kube_name(name)
    assert derived == "" or names.dns1123_subdomain_problem(derived) is None
    assert kube_name(derived) == derived
    label = kube_name(name, label=True)
    assert label == "" or names.dns1123_label_problem(label) is None
