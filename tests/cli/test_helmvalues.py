"""Helm's `--set` grammar (the common cases) and its coalescing of values over a chart's defaults."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.cli._helmvalues import MAX_INDEX, apply_sets, lookup, merge, parse_path, typed


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("FALSE", False),
        ("null", None),
        ("0", 0),
        ("42", 42),
        ("-7", -7),
        ("0123", "0123"),  # a leading zero keeps it a string, as Helm does
        ("1.5", "1.5"),
        ("9223372036854775808", "9223372036854775808"),  # past int64: a string
        ("yes", "yes"),
        ("", ""),
    ],
)
def test_values_are_typed_as_helm_types_them(text: str, value: Any) -> None:
    assert typed(text) == value
    assert type(typed(text)) is type(value)


def test_sets_build_nested_maps_and_lists_in_order() -> None:
    found = apply_sets(
        {"keep": 1, "a": {"x": 1}},
        ["a.b.c=1,a.d=two", "list[1].name=n", "items={x,y\\,z}", "esc\\.aped=v\\=w", "a.x=3"],
    )
    assert found == {
        "keep": 1,
        "a": {"x": 3, "b": {"c": 1}, "d": "two"},
        "list": [None, {"name": "n"}],
        "items": ["x", "y,z"],
        "esc.aped": "v=w",
    }


def test_set_string_keeps_every_value_a_string() -> None:
    assert apply_sets({}, ["a=true,b=12"], as_string=True) == {"a": "true", "b": "12"}


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("novalue", "--set: 'novalue': expected KEY=VALUE"),
        ("a..b=1", "--set: 'a..b=1': a key is empty"),
        ("=1", "--set: '=1': a key is empty"),
        ("[0]=1", "--set: '[0]=1': an index needs a key before it"),
        ("a[x]=1", "--set: 'a[x]=1': list index 'x' is not a non-negative integer"),
        ("a[-1]=1", "--set: 'a[-1]=1': list index '-1' is not a non-negative integer"),
        ("a[0=1", "--set: 'a[0=1': 'a[0' has an unclosed ["),
        (f"a[{MAX_INDEX + 1}]=1", f"--set: 'a[{MAX_INDEX + 1}]=1': list index {MAX_INDEX + 1} is over the limit"),
    ],
)
def test_a_bad_set_names_the_pair_and_the_reason_and_changes_nothing(pair: str, message: str) -> None:
    values = {"scalar": 1, "map": {}, "list": []}
    with pytest.raises(errors.Invalid) as refused:
        apply_sets(values, ["ok=1", pair])
    assert refused.value.message.startswith(message)
    assert values == {"scalar": 1, "map": {}, "list": []}


def test_a_path_through_a_value_of_another_shape_replaces_it_as_helm_does() -> None:
    assert apply_sets({"scalar": 1, "map": {"k": 1}, "list": [1]}, ["scalar.b=1,map[1]=x,list.b=2"]) == {
        "scalar": {"b": 1},
        "map": [None, "x"],
        "list": {"b": 2},
    }


def test_merge_coalesces_maps_replaces_the_rest_and_null_deletes() -> None:
    defaults = {"a": {"b": 1, "c": [1, 2], "d": {"e": 1}}, "f": 1}
    assert merge(defaults, {"a": {"c": [3], "d": None, "g": 2}, "f": {"x": 1}}) == {
        "a": {"b": 1, "c": [3], "g": 2},
        "f": {"x": 1},
    }
    assert defaults == {"a": {"b": 1, "c": [1, 2], "d": {"e": 1}}, "f": 1}


_keys = st.text("abcXYZ_-", min_size=1, max_size=5)
_steps = st.lists(st.one_of(_keys, st.integers(0, 3)), min_size=1, max_size=4).filter(
    lambda steps: isinstance(steps[0], str)
)
_values = st.one_of(
    st.booleans().map(str),
    st.integers(-(2**40), 2**40).map(str),
    st.text("abc xyz./:_-", max_size=8).filter(lambda text: typed(text) == text),
)


def _path(steps: list[str | int]) -> str:
    text = ""
    for step in steps:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


@given(_steps, _values)
def test_a_set_value_is_found_at_its_path_typed(steps: list[str | int], value: str) -> None:
    path = _path(steps)
    assert parse_path(path) == steps
    assert lookup(apply_sets({}, [f"{path}={value}"]), path) == typed(value)
