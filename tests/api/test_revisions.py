"""The one resourceVersion parser: canonical decimal digits up to 2**63-1, everything else Invalid naming the field."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.api._revisions import MAX_REVISION, parse_revision

_CANONICAL = re.compile(r"0|[1-9][0-9]*")


@given(st.integers(0, MAX_REVISION))
def test_every_revision_reads_back_from_its_decimal_text_and_as_an_int(value: int) -> None:
    assert parse_revision("resourceVersion", str(value)) == value
    assert parse_revision("resourceVersion", value) == value


@given(st.text(max_size=25) | st.from_regex(r"\A[ +\-0-9_\u0660-\u0669]{1,22}\Z"))
def test_a_text_is_read_exactly_when_it_is_the_canonical_decimal_of_a_revision(raw: str) -> None:
    canonical = _CANONICAL.fullmatch(raw) is not None and raw.isascii() and int(raw) <= MAX_REVISION
    if canonical:
        assert parse_revision("resourceVersion", raw) == int(raw)
    else:
        with pytest.raises(errors.Invalid) as caught:
            parse_revision("resourceVersion", raw)
        assert [f.path for f in caught.value.fields] == ["resourceVersion"]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (" 1", "digits 0-9"),
        ("1 ", "digits 0-9"),
        ("+1", "digits 0-9"),
        ("-1", "digits 0-9"),
        ("1_0", "digits 0-9"),  # int() reads it as 10
        ("\u0661", "digits 0-9"),  # ARABIC-INDIC DIGIT ONE: int() reads it as 1
        ("\uff11", "digits 0-9"),  # FULLWIDTH DIGIT ONE
        ("1.0", "digits 0-9"),
        ("0x10", "digits 0-9"),
        ("01", "leading zeros"),
        ("00", "leading zeros"),
        ("", "must not be empty"),
        ("9223372036854775808", "too large"),  # 2**63: SQLite and etcd overflow
        ("99999999999999999999", "too large"),
        (-1, "non-negative"),
        (2**63, "too large"),
        (True, "not a revision"),
        (1.0, "float"),
        (None, "NoneType"),
        ([1], "list"),
    ],
)
def test_loose_or_out_of_range_revisions_are_refused_with_the_reason(raw: object, reason: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        parse_revision("metadata.resourceVersion", raw)
    assert [f.path for f in caught.value.fields] == ["metadata.resourceVersion"]
    assert reason in caught.value.message


def test_the_largest_revision_is_two_to_the_63_minus_one() -> None:
    assert MAX_REVISION == 2**63 - 1
    assert parse_revision("revision", "9223372036854775807") == MAX_REVISION


def test_an_enormous_value_is_refused_quickly_and_shown_cut_short() -> None:
    digits = "9" * 100_000  # int() refuses texts over 4300 digits with a ValueError; the parser never gets there
    with pytest.raises(errors.Invalid) as caught:
        parse_revision("resourceVersion", digits)
    assert "(100000 characters)" in caught.value.message
    assert len(caught.value.message) < 200
    with pytest.raises(errors.Invalid, match="a 332193-bit integer is too large"):
        parse_revision("resourceVersion", 10**100_000)
