"""The helpers every backend shares: the JSON codec, keys, stamping and the CAS rules, without any store."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.store import _base as base
from devplace.store._base import Key

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@dataclasses.dataclass
class _Point:
    x: int


# -- the JSON codec -------------------------------------------------------------------------------------------


@given(JSON_VALUES)
def test_every_json_value_survives_encoding_and_decoding(value: Any) -> None:
    assert base.decode_json(base.encode_json(value)) == value


@given(JSON_VALUES)
def test_the_encoding_is_standard_json_that_the_stdlib_reads(value: Any) -> None:
    assert json.loads(base.encode_json(value)) == value


def test_the_encoding_is_compact_utf8_in_key_order() -> None:
    assert base.encode_json({"b": [1, 2.5, {"c": None}], "a": "é"}) == '{"b":[1,2.5,{"c":null}],"a":"é"}'.encode()


def test_keys_that_are_not_strings_become_strings_as_with_the_stdlib_encoder() -> None:
    value = {1: "a", None: "b", 1.5: "c", "d": {2: [True]}}
    assert base.encode_json(value) == json.dumps(value, separators=(",", ":")).encode()


def test_nan_and_infinities_are_written_as_null() -> None:
    assert base.encode_json({"a": math.nan, "b": [math.inf, -math.inf]}) == b'{"a":null,"b":[null,null]}'


@pytest.mark.parametrize(
    "value",
    [
        {"a": {1, 2}},
        {"a": object()},
        {"a": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)},
        {"a": datetime.date(2026, 1, 1)},
        {"a": _Point(1)},
        {"a": 2**64},
        {"a": -(2**63) - 1},
        {"a": "\ud800"},
        {"a": {1: {2, 3}}},  # refused on the retry with string keys too
    ],
    ids=[
        "set",
        "object",
        "datetime",
        "date",
        "dataclass",
        "uint64+1",
        "int64-1",
        "lone-surrogate",
        "set-under-int-key",
    ],
)
def test_a_value_json_cannot_carry_exactly_is_invalid(value: Any) -> None:
    with pytest.raises(errors.Invalid, match="not JSON"):
        base.encode_json(value)


def test_nesting_deeper_than_the_encoder_goes_is_invalid_not_a_crash() -> None:
    deep: Any = {}
    for _ in range(300):
        deep = {"x": deep}
    with pytest.raises(errors.Invalid):
        base.encode_json(deep)


def test_decoding_reads_what_the_stdlib_encoder_wrote_outside_strict_json() -> None:
    decoded = base.decode_json('{"nan":NaN,"inf":-Infinity,"s":"\\ud800","e":"\\u00e9"}')
    assert math.isnan(decoded["nan"])
    assert decoded["inf"] == -math.inf
    assert (decoded["s"], decoded["e"]) == ("\ud800", "é")


def test_decoding_malformed_text_raises_value_error() -> None:
    with pytest.raises(ValueError):
        base.decode_json('{"a":')


# -- keys, stamps, rules --------------------------------------------------------------------------------------


def test_key_fields_and_key_of_name_the_same_key_and_default_the_namespace() -> None:
    obj = {"kind": "Node", "metadata": MappingProxyType({"name": "n", "namespace": None})}
    assert base.key_fields(obj) == ("Node", "", "n")
    assert base.key_of(obj) == Key("Node", "", "n")


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({"kind": "", "metadata": {"name": "n"}}, "kind"),
        ({"kind": "Node", "metadata": ["name"]}, "metadata.name"),
        ({"kind": "Node", "metadata": {"name": 7}}, "metadata.name"),
        ({"kind": "Node", "metadata": {"name": "n", "namespace": 3}}, "metadata.namespace"),
    ],
)
def test_key_fields_refuses_a_malformed_key_naming_the_field(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        base.key_fields(obj)
    assert [f.path for f in caught.value.fields] == [field]


def test_stamped_copies_the_top_level_and_metadata_only_and_drops_an_empty_namespace() -> None:
    obj = {"kind": "Node", "metadata": {"name": "n", "namespace": "", "resourceVersion": "9"}, "spec": {"a": 1}}
    out = base.stamped(obj, revision=3, uid="u", created="t", generation=2)
    assert out == {
        "kind": "Node",
        "metadata": {"name": "n", "resourceVersion": "3", "uid": "u", "generation": 2, "creationTimestamp": "t"},
        "spec": {"a": 1},
    }
    assert out is not obj
    assert out["metadata"] is not obj["metadata"]
    assert out["spec"] is obj["spec"]
    assert obj["metadata"] == {"name": "n", "namespace": "", "resourceVersion": "9"}


def test_stamp_updated_keeps_identity_and_bumps_generation_only_on_a_spec_change() -> None:
    old = {"metadata": {"name": "n", "uid": "u", "creationTimestamp": "t", "generation": 4}, "spec": {"a": 1}}
    same = base.stamp_updated(old, {"metadata": {"name": "n", "uid": "x", "generation": 9}, "spec": {"a": 1}}, 7)
    changed = base.stamp_updated(old, {"metadata": {"name": "n"}, "spec": {"a": 2}}, 8)
    assert same["metadata"] == {
        "name": "n",
        "uid": "u",
        "creationTimestamp": "t",
        "generation": 4,
        "resourceVersion": "7",
    }
    assert changed["metadata"]["generation"] == 5


@pytest.mark.parametrize(
    ("seconds", "text"), [(1_767_225_600.0, "2026-01-01T00:00:00Z"), (1_767_225_659.99, "2026-01-01T00:00:59Z")]
)
def test_rfc3339_writes_whole_utc_seconds(seconds: float, text: str) -> None:
    assert base.rfc3339(seconds) == text


def test_check_revision_says_not_found_conflict_or_nothing() -> None:
    key = Key("Node", "", "n")
    base.check_revision(key, 3, 3)
    with pytest.raises(errors.NotFound):
        base.check_revision(key, None, 3)
    with pytest.raises(errors.Conflict, match="resourceVersion 2 is stale, current is 3"):
        base.check_revision(key, 3, 2)


@pytest.mark.parametrize(("precondition", "conflict"), [(None, False), ("3", False), ("2", True), ("4", True)])
def test_check_delete_revision_compares_the_precondition_with_the_current_revision(
    precondition: str | None, conflict: bool
) -> None:
    key = Key("Node", "", "n")
    if conflict:
        with pytest.raises(errors.Conflict):
            base.check_delete_revision(key, 3, precondition)
    else:
        base.check_delete_revision(key, 3, precondition)
    with pytest.raises(errors.NotFound):
        base.check_delete_revision(key, None, precondition)


@pytest.mark.parametrize("precondition", ["03", " 3", "+3", "3_0", "\u0663", "-3", "", "9223372036854775808"])
def test_a_delete_precondition_that_is_not_a_canonical_revision_is_invalid_before_anything_else(
    precondition: str,
) -> None:
    key = Key("Node", "", "n")
    for current in (3, None):  # refused whether or not the object exists
        with pytest.raises(errors.Invalid) as caught:
            base.check_delete_revision(key, current, precondition)
        assert [f.path for f in caught.value.fields] == ["resourceVersion"]


@pytest.mark.parametrize("raw", ["1", 1, "9223372036854775807"])
def test_resource_version_of_reads_canonical_revisions(raw: object) -> None:
    assert base.resource_version_of({"metadata": {"resourceVersion": raw}}) == int(str(raw))


@pytest.mark.parametrize("raw", [" 1", "+1", "1_0", "01", "\u0661", "1.0", "9223372036854775808", True, 2**63, -1, 1.0])
def test_resource_version_of_refuses_what_int_would_read_loosely(raw: object) -> None:
    with pytest.raises(errors.Invalid) as caught:
        base.resource_version_of({"metadata": {"resourceVersion": raw}})
    assert [f.path for f in caught.value.fields] == ["metadata.resourceVersion"]


@pytest.mark.parametrize(
    ("since", "refused"), [(None, False), (0, False), (2**63 - 1, False), (-1, True), (2**63, True)]
)
def test_watch_since_is_a_revision_named_resource_version(since: int | None, refused: bool) -> None:
    if refused:
        with pytest.raises(errors.Invalid) as caught:
            base.watch_since(since)
        assert [f.path for f in caught.value.fields] == ["resourceVersion"]
    else:
        assert base.watch_since(since) == since


def test_compaction_target_may_be_the_current_revision_but_not_beyond() -> None:
    assert base.check_compact_target(5, 5) == 5
    assert base.check_compact_target(0, 0) == 0
    for target in (6, 2**63, -1):
        with pytest.raises(errors.Invalid) as caught:
            base.check_compact_target(target, 5)
        assert [f.path for f in caught.value.fields] == ["revision"]
    with pytest.raises(errors.Invalid, match="6 is beyond the current revision 5"):
        base.check_compact_target(6, 5)


def test_object_size_at_the_limit_passes_and_one_byte_more_is_too_large_naming_both() -> None:
    key = Key("ConfigMap", "default", "big")
    base.check_object_size(key, base.MAX_OBJECT_BYTES)
    with pytest.raises(errors.TooLarge) as caught:
        base.check_object_size(key, base.MAX_OBJECT_BYTES + 1)
    assert "ConfigMap default/big" in caught.value.message
    assert "1572864" in caught.value.message
    assert base.MAX_OBJECT_BYTES == 1_572_864  # Kubernetes' (etcd's) 1.5 MiB


def test_a_watch_from_the_future_is_gone_saying_too_large_and_relist() -> None:
    err = base.future_revision(100_000, 6)
    assert type(err) is errors.Gone
    assert "too large resource version: 100000, current: 6" in err.message
    assert "relist" in err.message


def test_events_are_equal_whether_or_not_they_carry_their_stored_json() -> None:
    obj = {"kind": "ConfigMap", "metadata": {"name": "a"}}
    assert base.Event("ADDED", obj, 3, '{"kind":"ConfigMap","metadata":{"name":"a"}}') == base.Event("ADDED", obj, 3)
    assert base.Event("ADDED", obj, 3, "{}") != base.Event("MODIFIED", obj, 3, "{}")
