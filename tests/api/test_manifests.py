"""Manifest streams: YAML or JSON, many documents, each validated and reported on its own."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.api import _manifests as manifests
from devplace.api import load_documents
from devplace.api._manifests import (
    MAX_ALIAS_EXPANSION,
    json_tree,
    parse_documents,
    validated,
    yaml_documents,
)
from devplace.api._registry import SERVER_OWNED_METADATA


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)


GOOD_AND_BAD = """\
apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: akri-udev-video
spec:
  discoveryHandler:
    name: udev
    discoveryDetails: |
      groupRecursive: true
      udevRules:
      - KERNEL=="video[0-9]*"
  capacity: 3
---
apiVersion: akri.sh/v0
kind: Instance
metadata:
  name: akri-udev-video-8120fe
spec:
  configurationName: akri-udev-video
  capacity: 0
---
apiVersion: devplace.io/v1alpha1
kind: ResourceClass
metadata:
  name: fast.nic
spec:
  resourceSelector:
  - matchExpressions:
    - {key: Kind, operator: In, values: [nic]}
    - {key: speed, operator: GtEq, values: [40GBPS]}
"""


def test_multi_document_stream_reports_the_bad_document_by_index() -> None:
    docs = load_documents(GOOD_AND_BAD)
    assert [d.index for d in docs] == [1, 2, 3]
    first, bad, third = docs
    assert first.error is None
    assert first.obj is not None
    assert first.obj["metadata"] == {"name": "akri-udev-video", "namespace": "default"}
    assert first.obj["spec"]["capacity"] == 3
    assert first.label == "Configuration default/akri-udev-video"
    assert bad.obj is None
    assert isinstance(bad.error, errors.Invalid)
    assert [f.path for f in bad.error.fields] == ["spec.capacity"]
    assert bad.label == "document 2"
    assert third.error is None
    assert third.label == "ResourceClass fast.nic"


def test_a_bad_document_does_not_stop_later_ones_from_validating() -> None:
    text = "kind: Pod\n---\n" + GOOD_AND_BAD
    docs = load_documents(text)
    assert [d.error is None for d in docs] == [False, True, False, True]
    assert isinstance(docs[0].error, errors.Invalid)
    assert docs[0].error.fields[0].path == "apiVersion"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: [a\n", 4),
        ("apiVersion: v1\nkind: Pod\n  metadata: x\n", 3),
        ("a: 1\n---\nb: [1,\nc: 2\n", 5),  # PyYAML reports where it gave up: the end of the stream
        ("key: 'unterminated\n", 2),
    ],
)
def test_malformed_yaml_raises_invalid_with_the_line(text: str, line: int) -> None:
    with pytest.raises(errors.Invalid) as caught:
        load_documents(text)
    assert str(caught.value).startswith("malformed YAML at line ")
    assert f"line {line}," in str(caught.value)
    assert caught.value.__cause__ is not None


def test_empty_documents_are_skipped_and_an_empty_stream_is_empty() -> None:
    assert load_documents("") == []
    assert load_documents("---\n---\n# only a comment\n") == []
    docs = load_documents("---\napiVersion: v1\nkind: Node\nmetadata: {name: node-a}\n---\n")
    assert len(docs) == 1
    assert docs[0].label == "Node node-a"


def test_a_list_document_is_flattened_into_its_items() -> None:
    text = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}},
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "edge"},
                    "spec": {"containers": [{"name": "main", "image": "x"}]},
                },
            ],
        }
    )
    docs = load_documents(text)
    assert [d.label for d in docs] == ["Node node-a", "Pod edge/p"]


def test_json_is_accepted() -> None:
    text = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}})
    (doc,) = load_documents(text)
    assert doc.obj == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "default"},
        "data": {"a": "1"},
    }


def test_a_scalar_document_is_reported_not_raised() -> None:
    docs = load_documents("just a string\n---\n- a\n- list\n")
    assert [d.index for d in docs] == [1, 2]
    for doc in docs:
        assert isinstance(doc.error, errors.Invalid)
        assert "must be a mapping" in str(doc.error)


def test_parse_documents_returns_raw_documents() -> None:
    assert parse_documents("a: 1\n---\nb: 2\n") == [{"a": 1}, {"b": 2}]


def test_a_bad_document_after_an_empty_one_is_reported_at_its_position_in_the_file() -> None:
    text = (
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\n"
        "---\n"
        "---\n"
        "apiVersion: v1\nkind: Node\nmetadata: {name: Bad_Node}\n"
    )
    docs = load_documents(text)
    assert [(d.index, d.error is None) for d in docs] == [(1, True), (3, False)]
    assert "metadata.name" in str(docs[1].error)


def test_malformed_yaml_names_the_line_where_the_broken_construct_starts() -> None:
    with pytest.raises(errors.Invalid) as info:
        load_documents("a: 1\nb: 2\nc: [1, 2\nd: 4\n")
    assert "line 3" in str(info.value)


# -- hostile input: nesting, aliases, duplicate keys (the rules of the module docstring) ------------------------------


def test_validated_drops_server_owned_metadata_but_the_resource_version() -> None:
    forged = {key: 9 if key == "generation" else "forged" for key in SERVER_OWNED_METADATA}
    obj = validated({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", **forged}})
    assert obj["metadata"] == {"name": "cm", "namespace": "default", "resourceVersion": "forged"}


@pytest.mark.parametrize(
    ("text", "path", "says"),
    [
        ("spec: " + "[" * 150 + "]" * 150, "spec" + "[0]" * 99, "nested deeper than 100 levels (line 1)"),
        ("a: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 50 + "*a" + "]" * 50, "b" + "[0]" * 50, "through alias *a"),
        ("a: &a [*a]", "a[0]", "YAML alias *a refers to a node that contains it"),
        ("a: &a {x: 1, y: *a}", "a.y", "refers to a node that contains it"),
        ("spec:\n  x: 1\n  y: 2\n  x: 3\n", "spec", "duplicate key 'x' (line 4)"),
        ("spec: {1: a, 01: b}", "spec", "duplicate key '01'"),
        ("spec: {true: a, True: b}", "spec", "duplicate key 'True'"),
        ("k: 1\nk: 2\n", "", "duplicate key 'k' (line 2)"),
    ],
)
def test_yaml_past_a_hostile_input_rule_is_malformed_naming_where(text: str, path: str, says: str) -> None:
    with pytest.raises(errors.Malformed) as caught:
        list(yaml_documents(text))
    assert [f.path for f in caught.value.fields] == [path]
    assert says in caught.value.message


@pytest.mark.parametrize("levels", [3, 6, 9])
def test_yaml_aliases_are_refused_once_they_would_add_more_than_the_bound(levels: int) -> None:
    """`levels` of anchors, each aliasing the one before 9 times: 9**levels strings once expanded."""
    lines = ["a0: &a0 [" + ",".join(["lol"] * 9) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    text = "\n".join(lines)
    expanded = sum(9**i * (6 * 9 + 2) for i in range(1, levels))  # what the aliases repeat, as JSON text, roughly
    if expanded <= MAX_ALIAS_EXPANSION:
        (doc,) = yaml_documents(text)
        assert len(doc[f"a{levels - 1}"]) == 9
    else:
        with pytest.raises(errors.Malformed, match="YAML aliases would add more than 1048576 bytes"):
            list(yaml_documents(text))


def test_yaml_merge_keys_and_aliases_build_what_pyyaml_builds() -> None:
    text = "base: &b {x: 1, y: 2}\nderived: {<<: *b, y: 3}\nlist: &l [1, 2]\nagain: *l\nwhen: 2026-01-02\n"
    (doc,) = yaml_documents(text)
    assert doc == yaml.safe_load(text)
    assert doc["derived"] == {"x": 1, "y": 3}


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5), _containers, max_leaves=25))
def test_yaml_documents_read_what_pyyaml_reads(value: Any) -> None:
    text = yaml.safe_dump(value)
    assert list(yaml_documents(text)) == [yaml.safe_load(text)]


def test_parse_documents_refuses_a_deep_manifest_without_recursing() -> None:
    with pytest.raises(errors.Malformed, match="nested deeper than 100 levels"):
        parse_documents("kind: x\n---\nspec: " + "[" * 5000 + "]" * 5000)


class LibyamlWithANestingLimit(yaml.SafeLoader):
    """libyaml 0.2.6 (PyYAML 6.0.4's wheels) as far as nesting goes, whatever PyYAML this machine has: PyYAML's own
    reader, whose scanner refuses a flow or block level reaching `limit` as libyaml's does (the same error, worded
    the same, marked where the level opens), and scans ahead for simple keys as libyaml's does."""

    limit = 1000

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        self._refuse_at(self.flow_level + 1, "flow")
        super().fetch_flow_collection_start(token_class)

    def add_indent(self, column: int) -> bool:
        added: bool = super().add_indent(column)
        if added:
            self._refuse_at(len(self.indents), "block")
        return added

    def _refuse_at(self, level: int, kind: str) -> None:
        if level >= self.limit:
            mark = self.get_mark()
            raise yaml.scanner.ScannerError(
                f"while increasing {kind} level", mark, "exceeded maximum nesting depth", mark
            )


class LibyamlWithALimitBelowOurs(LibyamlWithANestingLimit):
    limit = 50


READERS = {
    "the installed PyYAML": getattr(yaml, "CSafeLoader", yaml.SafeLoader),
    "libyaml without a nesting limit (0.2.5; PyYAML 6.0.3)": yaml.SafeLoader,
    "libyaml with its nesting limit (0.2.6; PyYAML 6.0.4)": LibyamlWithANestingLimit,
    "a libyaml whose limit is below ours": LibyamlWithALimitBelowOurs,
}

BEFORE = "kind: x\n---\n# the deep one\n"
"""A document ahead of the deep one (and a comment): the reader hands it out once, then refuses."""

DEEP = {
    "flow lists": (BEFORE + "spec: " + "[" * 2000 + "]" * 2000, "spec" + "[0]" * 99, 4),
    "flow maps in lists": (BEFORE + "spec: " + "[{a: " * 1000 + "}]" * 1000, "spec" + "[0].a" * 49 + "[0]", 4),
    "block maps": (
        BEFORE + "spec:\n" + "".join(f"{'  ' * i}k{i}:\n" for i in range(1, 1200)) + "  " * 1200 + "end",
        "spec." + ".".join(f"k{i}" for i in range(1, 100)),
        104,
    ),
    "block lists": (BEFORE + "".join(f"{'  ' * i}-\n" for i in range(1200)) + "  " * 1200 + "end", "[0]" * 100, 104),
}


@pytest.fixture(params=list(READERS))
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(manifests, "_YAML_EVENTS", READERS[request.param])
    return READERS[request.param]


@pytest.mark.parametrize("case", list(DEEP))
def test_the_depth_refusal_is_the_same_whichever_libyaml_reads_the_text(reader: Any, case: str) -> None:
    text, path, line = DEEP[case]
    documents = yaml_documents(text)
    assert next(documents) == {"kind": "x"}
    with pytest.raises(errors.Malformed) as caught:
        next(documents)
    assert caught.value.fields == (errors.FieldError(path, f"nested deeper than 100 levels (line {line})"),)


def events_until_refused(text: str, reader: Any) -> tuple[list[yaml.Event], yaml.MarkedYAMLError | None]:
    seen: list[yaml.Event] = []
    try:
        seen.extend(yaml.parse(text, Loader=reader))
    except yaml.MarkedYAMLError as e:
        return seen, e
    return seen, None


def levels(events: list[yaml.Event]) -> int:
    return sum(isinstance(e, yaml.CollectionStartEvent) for e in events)


@pytest.mark.parametrize("case", list(DEEP))
def test_the_stand_in_for_libyaml_0_2_6_gives_up_as_it_does_where_the_text_nests_deeper_than_ours(case: str) -> None:
    """Else the test above would not exercise the reading again. Where it gives up, the text nests deeper than our
    limit (the cut that the reading again takes); for flow lists it gives up before the composer has seen our limit
    (it looks ahead for simple keys, as libyaml does)."""
    text = DEEP[case][0].split("---\n", 1)[1]
    seen, refusal = events_until_refused(text, LibyamlWithANestingLimit)
    assert refusal is not None
    assert (refusal.context, refusal.problem) in {
        ("while increasing flow level", "exceeded maximum nesting depth"),
        ("while increasing block level", "exceeded maximum nesting depth"),
    }
    assert refusal.problem_mark is not None
    assert levels(events_until_refused(text[: refusal.problem_mark.index], yaml.SafeLoader)[0]) > 900
    if case == "flow lists":
        assert levels(seen) < 100


@pytest.mark.skipif(
    not yaml.__with_libyaml__ or yaml._yaml.get_version() < (0, 2, 6), reason="this PyYAML's libyaml has no limit"
)
@pytest.mark.parametrize("case", list(DEEP))
def test_the_stand_in_gives_up_after_the_events_the_installed_libyaml_gives_up_after(case: str) -> None:
    text = DEEP[case][0].split("---\n", 1)[1]
    theirs, their_refusal = events_until_refused(text, yaml.CSafeLoader)
    ours, our_refusal = events_until_refused(text, LibyamlWithANestingLimit)
    assert their_refusal is not None
    assert our_refusal is not None
    assert [type(e) for e in ours] == [type(e) for e in theirs]
    assert (our_refusal.context, our_refusal.problem) == (their_refusal.context, their_refusal.problem)
    assert their_refusal.problem_mark is not None
    assert our_refusal.problem_mark is not None
    assert our_refusal.problem_mark.index == their_refusal.problem_mark.index


@pytest.mark.parametrize("levels", [60, 100])
def test_a_document_within_our_limit_is_read_whatever_the_limit_of_libyaml(reader: Any, levels: int) -> None:
    text = "kind: x\n---\nspec: " + "[" * (levels - 1) + "1" + "]" * (levels - 1) + "\n---\nafter: 1\n"
    assert list(yaml_documents(text)) == list(yaml.safe_load_all(text))


def test_only_libyamls_nesting_refusal_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any other error of libyaml's stands as libyaml gave it."""
    monkeypatch.setattr(manifests, "_YAML_EVENTS", LibyamlWithANestingLimit)
    with pytest.raises(yaml.scanner.ScannerError, match="cannot start any token"):
        list(yaml_documents("a: 1\n\tb: 2\n"))


def test_json_tree_refuses_python_values_nested_past_the_limit() -> None:
    value: Any = {}
    for _ in range(150):
        value = {"a": value}
    with pytest.raises(errors.Malformed) as caught:
        json_tree(value)
    assert caught.value.fields[0].path == ".".join(["a"] * 100)
