"""Request body decoding and the JSON-tree rule: what JSON could carry passes, the rest is refused by path."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.api._manifests import json_tree
from devplace.server._bodies import decode_body, decode_value
from devplace.server._statuses import http_status

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_json_tree_returns_any_json_value_unchanged(value: Any) -> None:
    assert json_tree(value) == value


@given(st.dictionaries(st.text(), json_values, max_size=5))
def test_a_json_object_body_decodes_to_itself(obj: dict[str, Any]) -> None:
    assert decode_body(json.dumps(obj).encode(), "application/json") == obj


def test_a_yaml_body_decodes_with_or_without_a_yaml_content_type() -> None:
    text = b"kind: Node\nmetadata:\n  name: a\n"
    expected = {"kind": "Node", "metadata": {"name": "a"}}
    assert decode_body(text, "application/yaml") == expected
    assert decode_body(text, None) == expected


def test_yaml_timestamps_and_number_keys_become_the_text_json_would_carry() -> None:
    body = decode_body(b"when: 2026-01-02\nmap:\n  7: seven\n  true: yes\n  2.5: x\n", "application/yaml")
    assert body == {"when": "2026-01-02", "map": {"7": "seven", "true": True, "2.5": "x"}}


def test_keys_that_collide_as_json_text_are_refused() -> None:
    with pytest.raises(errors.Invalid) as caught:
        decode_body(b"spec:\n  1: a\n  '1': b\n", "application/yaml")
    assert caught.value.fields[0].path == "spec"
    assert "duplicate key '1'" in caught.value.message


@pytest.mark.parametrize(
    ("raw", "content_type", "says"),
    [
        (b"", "application/json", "the request body is empty"),
        (b"   \n", None, "the request body is empty"),
        (b"{not json", "application/json", "not valid JSON"),
        (b"\xff\xfe{}", "application/json", "not UTF-8"),
        (b"key: [unclosed", "application/yaml", "(while parsing a flow sequence at line 1)"),
        (b"{: [", None, "not valid JSON or YAML"),
        (b"[1, 2]", "application/json", "must be a JSON or YAML object, not a list"),
        (b"just words", None, "must be a JSON or YAML object, not a str"),
        (b"a: 1\n---\nb: 2\n", "application/yaml", "not valid YAML"),
        (b'{"a": NaN}', "application/json", "not valid JSON"),
    ],
)
def test_an_undecodable_body_is_refused_naming_the_problem(raw: bytes, content_type: str | None, says: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        decode_body(raw, content_type)
    assert type(caught.value) is errors.Malformed
    assert http_status(caught.value) == 400
    assert says in caught.value.message


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (b"spec:\n  x: .nan\n", "spec.x"),
        (b"spec:\n  list: [1, .inf]\n", "spec.list[1]"),
        (b"spec: !!binary aGVsbG8=\n", "spec"),
        (b"spec: !!set {a, b}\n", "spec"),
    ],
)
def test_values_json_cannot_hold_are_refused_at_their_path(text: bytes, path: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        decode_body(text, "application/yaml")
    assert [f.path for f in caught.value.fields] == [path]


@pytest.mark.parametrize(
    ("text", "path"),
    [(b'{"spec": {"x": 1e400}}', "spec.x"), (b'{"spec": {"list": [1, -2e999]}}', "spec.list[1]")],
)
def test_a_json_number_too_big_for_a_float_is_refused_at_its_path(text: bytes, path: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        decode_body(text, "application/json")
    assert [f.path for f in caught.value.fields] == [path]


@given(json_values, st.sampled_from(["", "\\u00e9", "\\ud83d\\ude00", "{[", "1e400"]))
def test_a_json_body_decodes_as_the_full_json_tree_walk_reads_it_whether_or_not_the_walk_is_skipped(
    value: Any, extra: str
) -> None:
    """Bodies with escapes, many brackets or huge numbers take the walk; the others skip it: same answers."""
    text = json.dumps({"v": value, "s": extra}, ensure_ascii=extra == "")
    assert _outcome(lambda: decode_value(text.encode(), "application/json")) == _outcome(
        lambda: json_tree(json.loads(text))
    )


def _outcome(decode: Any) -> tuple[str, Any]:
    try:
        return "value", decode()
    except errors.DevplaceError as e:
        return type(e).__name__, str(e)


def test_a_datetime_becomes_iso_text() -> None:
    assert json_tree({"t": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)}) == {"t": "2026-01-02T03:04:05+00:00"}


# -- hostile bodies: depth, duplicate keys, lone surrogates ---------------------------------------------------------

_steps = st.lists(st.one_of(st.just(0), st.text(max_size=4)), min_size=1, max_size=8)


@given(_steps, st.sampled_from([101, 150, 990, 1200, 3000]))
def test_a_json_body_past_the_depth_limit_names_where_whatever_its_depth(steps: list[int | str], levels: int) -> None:
    """Up to about 990 levels the decoder builds the tree and the tree walk finds the place; deeper, the decoder
    gives up first and a scan of the text finds it: both name the same path (that of the 101st level)."""
    path = [steps[i % len(steps)] for i in range(levels)]
    text = ""
    for step in path:
        text += "[" if step == 0 else "{" + json.dumps(step) + ":"
    text += "null" + "".join("]" if step == 0 else "}" for step in reversed(path))
    with pytest.raises(errors.Malformed) as caught:
        decode_value(text.encode(), "application/json")
    expected = ""
    for step in path[:100]:
        expected += "[0]" if step == 0 else (f".{step}" if expected else str(step))
    assert [f.path for f in caught.value.fields] == [expected]
    assert "nested deeper than 100 levels" in caught.value.message


@pytest.mark.parametrize(
    ("text", "path", "key"),
    [
        (b'{"a": {"x": 1, "x": 2}, "b": {"y": 1, "y": 1}}', "a", "x"),
        (b'{"a": [{"q": 1}, {"q\\"": 1, "q\\"": 2}]}', "a[1]", 'q"'),
        (b'{"k": 1, "k": 2}', "", "k"),
        (b'[{"k": [], "k": []}]', "[0]", "k"),
    ],
)
def test_the_first_key_given_twice_is_named_with_its_path(text: bytes, path: str, key: str) -> None:
    with pytest.raises(errors.Malformed) as caught:
        decode_value(text, "application/json")
    assert [(f.path, f.reason) for f in caught.value.fields] == [(path, f"duplicate key {key!r}")]


def test_a_json_patch_list_decodes_though_a_write_body_must_be_an_object() -> None:
    patch = b'[{"op": "replace", "path": "/data/k", "value": "v"}]'
    assert decode_value(patch, "application/json-patch+json") == json.loads(patch)
    with pytest.raises(errors.Malformed, match="not a list"):
        decode_body(patch, "application/json-patch+json")


@pytest.mark.parametrize("text", [b'{"a": "\\ud800"}', b'{"\\udc00": 1}', b'a: "\\ud800"\n'])
def test_a_lone_surrogate_is_refused(text: bytes) -> None:
    with pytest.raises(errors.Malformed, match=r"lone surrogate|invalid Unicode character"):  # JSON's, libyaml's
        decode_value(text, None)
