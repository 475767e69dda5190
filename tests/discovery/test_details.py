"""discoveryDetails parsing refuses anything but a YAML mapping, naming discoveryDetails and the reason."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.discovery import _details as details


@pytest.mark.parametrize("text", ["", "   \n", "~", "null"])
def test_empty_details_are_an_empty_mapping(text: str) -> None:
    assert details.load_mapping(text) == {}


def test_yaml_syntax_error_names_the_line() -> None:
    with pytest.raises(errors.Invalid) as info:
        details.load_mapping("a: [1, 2\nb: c")
    assert info.value.fields[0].path == "discoveryDetails"
    assert "not valid YAML at line" in info.value.message


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("- a\n- b", "must be a YAML mapping, got a list"),
        ("just a string", "must be a YAML mapping, got a string"),
        ("3", "must be a YAML mapping, got a number"),
        ("1: a", "keys must be strings, got a number 1"),
    ],
)
def test_non_mapping_details_are_refused(text: str, reason: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        details.load_mapping(text)
    assert info.value.message == f"discoveryDetails: {reason}"


def test_unknown_key_is_refused_listing_the_allowed_ones() -> None:
    with pytest.raises(errors.Invalid) as info:
        details.refuse_unknown({"kinds": "x"}, ("kind", "shared"))
    assert info.value.message == "discoveryDetails.kinds: unknown key (allowed: kind, shared)"


def test_optional_values_check_their_types() -> None:
    assert details.optional_bool({}, "shared", True) is True
    assert details.optional_bool({"shared": False}, "shared", True) is False
    assert details.optional_str({"kind": "cam"}, "kind") == "cam"
    with pytest.raises(errors.Invalid, match=r"discoveryDetails.shared: must be true or false, got a string 'yes!'"):
        details.optional_bool({"shared": "yes!"}, "shared", True)
    with pytest.raises(errors.Invalid, match=r"discoveryDetails.kind: must be a string \(quote it\), got a number 3"):
        details.optional_str({"kind": 3}, "kind")


@given(st.text())
def test_load_mapping_returns_a_mapping_or_raises_invalid(text: str) -> None:
    refused: list[str] = []
    result: dict[str, object] = {}
    try:
        result = details.load_mapping(text)
    except errors.Invalid as e:
        refused = [f.path for f in e.fields]
    assert refused in ([], ["discoveryDetails"])
    assert isinstance(result, dict)
    assert all(isinstance(k, str) for k in result)
