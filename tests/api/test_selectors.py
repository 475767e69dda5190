"""Selectors: label selector syntax and matching, nodeSelectorTerms, typed device selectors (seed 003)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from devplace import errors
from devplace.api import _selectors as selectors
from devplace.api._quantity import Quantity
from devplace.api._selectors import (
    DeviceSelector,
    LabelOperator,
    LabelRequirement,
    LabelSelector,
    NodeSelector,
    Requirement,
    compare_values,
    node_selector_matches,
    parse_label_selector,
    requirement_problem,
)

# -- label selectors: parsing and rendering -----------------------------------------------------------------------

PARSES = [
    ("", ""),
    ("   ", ""),
    ("a=b", "a=b"),
    ("a==b", "a==b"),
    ("a!=b", "a!=b"),
    ("a in (x,y)", "a in (x,y)"),
    ("a in (y, x, y)", "a in (x,y)"),
    ("a notin (x)", "a notin (x)"),
    ("a", "a"),
    ("!a", "!a"),
    ("a>1", "a>1"),
    ("a<-5", "a<-5"),
    ("a=", "a="),
    ("x=,y", "x=,y"),
    ("  b = c , a in ( q , p ) ", "a in (p,q),b=c"),
    ("example.com/app=web,tier!=db", "example.com/app=web,tier!=db"),
    ("app in(web),!legacy", "app in (web),!legacy"),
    ("z,y,x", "x,y,z"),
    ("a.b-c_d=E.f-G_h", "a.b-c_d=E.f-G_h"),
]


@pytest.mark.parametrize(("text", "rendered"), PARSES)
def test_label_selector_parses_and_renders_canonically(text: str, rendered: str) -> None:
    selector = parse_label_selector(text)
    assert str(selector) == rendered
    assert parse_label_selector(rendered) == selector


def test_parsed_requirements_carry_key_operator_and_values() -> None:
    selector = parse_label_selector("tier in (b,a),app=web,!old,n>3")
    assert selector.requirements == (
        LabelRequirement("app", "=", ("web",)),
        LabelRequirement("n", "gt", ("3",)),
        LabelRequirement("old", "!", ()),
        LabelRequirement("tier", "in", ("a", "b")),
    )


REFUSED = [
    ("a=b,", "expected a requirement after the last ','"),
    (",", "expected a label key"),
    ("=b", "expected a label key"),
    ("a in ()", "a set needs at least one value"),
    ("a in (x", "expected ',' or ')'"),
    ("a in (x,)", "expected a value in the set"),
    ("a in x", "expected '('"),
    ("a>x", "Gt needs an integer value, got 'x'"),
    ("a<1.5", "Lt needs an integer value"),
    ("a>99999999999999999999", "Gt needs an integer value"),
    ("a>", "expected an integer"),
    ("a b", "expected an operator"),
    ("!a=b", "expected ',' or the end after !a"),
    ("a=b=c", "expected ',' or the end after a=b"),
    ("a=(b)", "expected a value after a="),
    ("A/b=c", "prefix part"),
    ("a/=c", "name part"),
    ("-a=c", "name part"),
    ("a=-x-", "value '-x-'"),
    ("a=" + "v" * 64, "at most 63 characters"),
    ("k" * 64, "name part"),
]


@pytest.mark.parametrize(("text", "why"), REFUSED)
def test_bad_label_selector_raises_invalid_naming_the_selector_and_reason(text: str, why: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        parse_label_selector(text)
    assert repr(text) in str(caught.value)
    assert why in str(caught.value)


# -- label selectors: matching ------------------------------------------------------------------------------------

LABELS = {"app": "web", "tier": "frontend", "n": "7", "empty": ""}

MATCHES = [
    ("", {}, True),
    ("", LABELS, True),
    ("app=web", LABELS, True),
    ("app==web", LABELS, True),
    ("app=db", LABELS, False),
    ("missing=x", LABELS, False),
    ("app!=db", LABELS, True),
    ("app!=web", LABELS, False),
    ("missing!=x", LABELS, True),  # != matches an absent key
    ("tier in (frontend,backend)", LABELS, True),
    ("tier in (backend)", LABELS, False),
    ("missing in (x)", LABELS, False),  # in does not match an absent key
    ("tier notin (backend)", LABELS, True),
    ("tier notin (frontend)", LABELS, False),
    ("missing notin (x)", LABELS, True),  # notin matches an absent key
    ("app", LABELS, True),
    ("missing", LABELS, False),
    ("!missing", LABELS, True),
    ("!app", LABELS, False),
    ("empty=", LABELS, True),
    ("empty", LABELS, True),
    ("app=", LABELS, False),
    ("n>6", LABELS, True),
    ("n>7", LABELS, False),
    ("n<8", LABELS, True),
    ("n<7", LABELS, False),
    ("app>1", LABELS, False),  # a non-integer label never satisfies Gt/Lt
    ("app<1", LABELS, False),
    ("missing>1", LABELS, False),  # Gt/Lt do not match an absent key
    ("missing<1", LABELS, False),
    ("app=web,tier=frontend", LABELS, True),
    ("app=web,tier=backend", LABELS, False),
]


@pytest.mark.parametrize(("text", "labels", "expected"), MATCHES)
def test_label_selector_matching_follows_kubernetes(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


def test_empty_selector_is_everything() -> None:
    assert LabelSelector.everything().is_empty
    assert LabelSelector.everything() == parse_label_selector("")
    assert not parse_label_selector("a").is_empty


def test_label_requirement_constructor_validates() -> None:
    with pytest.raises(errors.Invalid, match="needs at least one value"):
        LabelRequirement("a", "in", ())
    with pytest.raises(errors.Invalid, match="takes no values"):
        LabelRequirement("a", "exists", ("x",))
    with pytest.raises(errors.Invalid, match="unknown operator"):
        LabelRequirement("a", "~", ("x",))  # type: ignore[arg-type]


# -- label selectors: the dict form -------------------------------------------------------------------------------


def test_label_selector_from_dict_combines_match_labels_and_expressions() -> None:
    selector = LabelSelector.from_dict(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["frontend", "edge"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "NotIn", "values": ["z9"]},
                {"key": "gpu", "operator": "Exists", "values": []},
            ],
        }
    )
    assert str(selector) == "app=web,gpu,!legacy,tier in (edge,frontend),zone notin (z9)"
    assert selector.matches({"app": "web", "tier": "edge", "gpu": "1"})
    assert not selector.matches({"app": "web", "tier": "edge"})
    assert not selector.matches({"app": "web", "tier": "edge", "gpu": "1", "legacy": "y"})
    assert not selector.matches({"app": "web", "tier": "edge", "gpu": "1", "zone": "z9"})
    assert parse_label_selector(str(selector)) == selector


@pytest.mark.parametrize("obj", [None, {}, {"matchLabels": {}, "matchExpressions": []}, {"matchLabels": None}])
def test_label_selector_from_empty_dict_matches_everything(obj: dict[str, Any] | None) -> None:
    selector = LabelSelector.from_dict(obj)
    assert selector.is_empty
    assert selector.matches({"any": "thing"})


DICT_REFUSED = [
    ({"matchLabel": {}}, "spec.selector.matchLabel", "unknown field"),
    ({"matchLabels": ["a"]}, "spec.selector.matchLabels", "mapping"),
    ({"matchLabels": {"a": 1}}, "spec.selector.matchLabels.a", "strings"),
    ({"matchLabels": {"a": "-bad-"}}, "spec.selector.matchLabels.a", "value '-bad-'"),
    ({"matchLabels": {"Bad/a": "x"}}, "spec.selector.matchLabels.Bad/a", "prefix part"),
    ({"matchExpressions": {}}, "spec.selector.matchExpressions", "must be a list"),
    ({"matchExpressions": ["a"]}, "spec.selector.matchExpressions[0]", "must be a mapping"),
    ({"matchExpressions": [{"operator": "In", "values": ["x"]}]}, "spec.selector.matchExpressions[0].key", "required"),
    ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "matchExpressions[0].operator", "Gt"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "matchExpressions[0].values", "at least"),
    ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "matchExpressions[0].values", "at least one value"),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "[0].values", "no values"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}, "[0].values[0]", "must be a string"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]}, "[0].values", "must be a list"),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"], "v": 1}]}, "[0].v", "unknown field"),
    ({"matchExpressions": [{"key": "a b", "operator": "Exists"}]}, "matchExpressions[0].key", "name part"),
]


@pytest.mark.parametrize(("obj", "path", "why"), DICT_REFUSED)
def test_label_selector_from_bad_dict_names_the_field(obj: dict[str, Any], path: str, why: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        LabelSelector.from_dict(obj, path="spec.selector")
    (field,) = caught.value.fields
    assert field.path.endswith(path)
    assert field.path.startswith("spec.selector")
    assert why in field.reason


def test_label_selector_from_a_non_mapping_is_invalid() -> None:
    with pytest.raises(errors.Invalid, match="must be a mapping"):
        LabelSelector.from_dict(["a"])  # type: ignore[arg-type]


# -- label selectors: properties ----------------------------------------------------------------------------------

_name = st.from_regex(r"[a-z0-9]([a-z0-9_.-]{0,8}[a-z0-9])?", fullmatch=True)
_key = st.one_of(_name, st.builds(lambda p, n: f"{p}.io/{n}", st.from_regex(r"[a-z]{1,6}", fullmatch=True), _name))
_value = st.one_of(st.just(""), _name)


@st.composite
def label_requirements(draw: st.DrawFn) -> LabelRequirement:
    key = draw(_key)
    ops: list[LabelOperator] = ["=", "==", "!=", "in", "notin", "exists", "!", "gt", "lt"]
    op = draw(st.sampled_from(ops))
    if op in ("=", "==", "!="):
        return LabelRequirement(key, op, (draw(_value),))
    if op in ("in", "notin"):
        return LabelRequirement(key, op, tuple(draw(st.lists(_name, min_size=1, max_size=4))))
    if op in ("gt", "lt"):
        return LabelRequirement(key, op, (str(draw(st.integers(-1000, 1000))),))
    return LabelRequirement(key, op, ())


@given(st.lists(label_requirements(), max_size=5))
def test_rendered_label_selector_parses_back_to_an_equal_selector(reqs: list[LabelRequirement]) -> None:
    selector = LabelSelector(tuple(reqs))
    assert parse_label_selector(str(selector)) == selector


@given(st.lists(label_requirements(), max_size=5), st.dictionaries(_key, _value, max_size=5))
def test_a_selector_matches_exactly_when_every_requirement_matches(
    reqs: list[LabelRequirement], labels: dict[str, str]
) -> None:
    selector = LabelSelector(tuple(reqs))
    assert selector.matches(labels) == all(r.matches(labels) for r in reqs)
    assert parse_label_selector(str(selector)).matches(labels) == selector.matches(labels)


@given(label_requirements(), st.dictionaries(_key, _value, max_size=5))
def test_negated_operators_are_complements(req: LabelRequirement, labels: dict[str, str]) -> None:
    opposite = {"=": "!=", "==": "!=", "!=": "=", "in": "notin", "notin": "in", "exists": "!", "!": "exists"}
    assume(req.operator in opposite)
    flipped = LabelRequirement(req.key, opposite[req.operator], req.values)  # type: ignore[arg-type]
    assert flipped.matches(labels) is not req.matches(labels)


def test_memory_store_interface_parses_and_matches() -> None:
    # MemoryStore.list/watch call exactly these two.
    assert selectors.parse_label_selector("app=web").matches({"app": "web"})


# -- node selectors -----------------------------------------------------------------------------------------------

NODE = {"kubernetes.io/hostname": "node-a", "zone": "z1", "gpus": "4", "arch": "arm64"}


def _term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields is not None:
        term["matchFields"] = fields
    return term


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


NODE_CASES = [
    ([_term(_expr("zone", "In", "z1", "z2"))], True),
    ([_term(_expr("zone", "In", "z2"))], False),
    ([_term(_expr("zone", "NotIn", "z2"))], True),
    ([_term(_expr("missing", "NotIn", "x"))], True),
    ([_term(_expr("missing", "In", "x"))], False),
    ([_term(_expr("arch", "Exists"))], True),
    ([_term(_expr("missing", "Exists"))], False),
    ([_term(_expr("missing", "DoesNotExist"))], True),
    ([_term(_expr("arch", "DoesNotExist"))], False),
    ([_term(_expr("gpus", "Gt", "3"))], True),
    ([_term(_expr("gpus", "Gt", "4"))], False),
    ([_term(_expr("gpus", "Lt", "5"))], True),
    ([_term(_expr("gpus", "Lt", "4"))], False),
    ([_term(_expr("arch", "Gt", "1"))], False),
    ([_term(_expr("missing", "Lt", "1"))], False),
    # expressions AND within a term
    ([_term(_expr("zone", "In", "z1"), _expr("arch", "In", "amd64"))], False),
    ([_term(_expr("zone", "In", "z1"), _expr("arch", "In", "arm64"))], True),
    # terms OR
    ([_term(_expr("zone", "In", "z9")), _term(_expr("arch", "In", "arm64"))], True),
    ([_term(_expr("zone", "In", "z9")), _term(_expr("arch", "In", "amd64"))], False),
    # an empty term matches nothing; no terms match nothing
    ([_term()], False),
    ([{}], False),
    ([_term(), _term(_expr("zone", "Exists"))], True),
    ([], False),
    # matchFields on metadata.name
    ([_term(fields=[_expr("metadata.name", "In", "node-a")])], True),
    ([_term(fields=[_expr("metadata.name", "In", "node-b")])], False),
    ([_term(fields=[_expr("metadata.name", "NotIn", "node-b")])], True),
    ([_term(_expr("zone", "In", "z1"), fields=[_expr("metadata.name", "In", "node-b")])], False),
]


@pytest.mark.parametrize(("terms", "expected"), NODE_CASES)
def test_node_selector_terms_or_and_expressions_and(terms: list[dict[str, Any]], expected: bool) -> None:
    assert node_selector_matches(NODE, terms, node_name="node-a") is expected


def test_match_fields_without_a_node_name_treat_the_field_as_absent() -> None:
    assert not node_selector_matches(NODE, [_term(fields=[_expr("metadata.name", "In", "node-a")])])
    assert node_selector_matches(NODE, [_term(fields=[_expr("metadata.name", "NotIn", "node-a")])])


NODE_REFUSED = [
    ("terms", "nodeSelectorTerms", "list"),
    ([_term(_expr("zone", "In"))], "nodeSelectorTerms[0].matchExpressions[0].values", "at least one value"),
    ([_term(_expr("zone", "Exists", "x"))], "nodeSelectorTerms[0].matchExpressions[0].values", "no values"),
    ([_term(_expr("gpus", "Gt", "1", "2"))], "nodeSelectorTerms[0].matchExpressions[0].values", "exactly one"),
    ([_term(_expr("gpus", "Lt", "four"))], "nodeSelectorTerms[0].matchExpressions[0].values", "integer"),
    ([_term(), _term(_expr("zone", "Eq", "z"))], "nodeSelectorTerms[1].matchExpressions[0].operator", "Eq"),
    ([_term(_expr("bad key", "Exists"))], "nodeSelectorTerms[0].matchExpressions[0].key", "name part"),
    ([{"matchExpression": []}], "nodeSelectorTerms[0].matchExpression", "unknown field"),
    (["x"], "nodeSelectorTerms[0]", "mapping"),
    ([_term(fields=[_expr("metadata.uid", "In", "u")])], "nodeSelectorTerms[0].matchFields[0].key", "unsupported"),
    ([_term(fields=[_expr("metadata.name", "In", "a", "b")])], "nodeSelectorTerms[0].matchFields[0]", "exactly one"),
]


@pytest.mark.parametrize(("terms", "path", "why"), NODE_REFUSED)
def test_malformed_node_selector_terms_are_invalid_with_the_field_path(terms: Any, path: str, why: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        NodeSelector.from_wire(terms)
    (field,) = caught.value.fields
    assert field.path == path
    assert why in field.reason


def test_node_selector_from_wire_uses_the_given_path() -> None:
    with pytest.raises(errors.Invalid) as caught:
        NodeSelector.from_wire([_term(_expr("zone", "In"))], path="spec.affinity.nodeAffinity.terms")
    assert caught.value.fields[0].path == "spec.affinity.nodeAffinity.terms[0].matchExpressions[0].values"


# -- typed comparison ---------------------------------------------------------------------------------------------

COMPARE = [
    # quantities, whatever their suffixes
    ("30G", "32Gi", -1),
    ("32Gi", "30G", 1),
    ("32Gi", "34359738368", 0),
    ("1Gi", "1024Mi", 0),
    ("1G", "1000M", 0),
    ("1.5", "1500m", 0),
    ("10", "9", 1),
    ("-1", "0", -1),
    ("1E", "1e18", 0),
    # a trailing unit must match (case-sensitive); then magnitudes compare
    ("40GBPS", "10GBPS", 1),
    ("40GBPS", "40GBPS", 0),
    ("1Gbps", "1000Mbps", 0),
    ("100Mbps", "1Gbps", -1),
    ("10ms", "5s", -1),  # 10m of `s` against 5 of `s`
    ("10ms", "5ms", 1),
    ("1KiB", "1000B", 1),
    ("40GBPS", "10Gbps", None),
    ("40GBPS", "40Gbps", None),
    ("40GBPS", "40G", None),
    ("40GBPS", "40", None),
    ("-5dBm", "-10dBm", 1),
    # versions
    ("1.2.10", "1.2.9", 1),
    ("1.2.9", "1.2.10", -1),
    ("v1.2.10", "1.2.10", 0),
    ("v2", "v10", -1),
    ("1.2", "1.2.0", 0),
    ("1.10", "1.9.0", 1),
    ("1.0.0-rc.1", "1.0.0", -1),
    ("1.0.0-alpha", "1.0.0-alpha.1", -1),
    ("1.0.0-alpha.1", "1.0.0-alpha.beta", -1),
    ("1.0.0-beta.2", "1.0.0-beta.11", -1),
    ("1.0.0-rc.1", "1.0.0-beta.11", 1),
    ("1.0.0+build.5", "1.0.0+build.7", 0),
    ("535.104.05", "470.82.01", 1),
    # strings: equal or nothing
    ("nvidia-gpu", "nvidia-gpu", 0),
    ("nvidia-gpu", "amd-gpu", None),
    ("", "", 0),
    ("", "1", None),
    ("abc", "1.2.3", None),
    ("Nvidia", "nvidia", None),
]


@pytest.mark.parametrize(("a", "b", "expected"), COMPARE)
def test_compare_values_is_typed(a: str, b: str, expected: int | None) -> None:
    assert compare_values(a, b) == expected


def test_quantities_take_precedence_over_versions() -> None:
    # Both parse as quantities, so 1.5 > 1.10 numerically even though version 1.5 < 1.10.
    assert compare_values("1.5", "1.10") == 1


# -- device requirements ------------------------------------------------------------------------------------------

GPU = {"Kind": "nvidia-gpu", "memory": "32Gi", "driverVersion": "535.104.05", "speed": "100GBPS", "vendor": "nvidia"}

REQUIREMENTS = [
    ("Kind", "In", ["nvidia-gpu"], True),
    ("Kind", "In", ["amd-gpu", "nvidia-gpu"], True),
    ("Kind", "In", ["amd-gpu"], False),
    ("memory", "In", ["34359738368"], True),  # typed equality
    ("memory", "In", ["32G"], False),
    ("absent", "In", ["x"], False),
    ("Kind", "NotIn", ["amd-gpu"], True),
    ("Kind", "NotIn", ["nvidia-gpu"], False),
    ("memory", "NotIn", ["32768Mi"], False),
    ("absent", "NotIn", ["x"], True),  # NotIn matches an absent key
    ("memory", "Eq", ["32Gi"], True),
    ("memory", "Eq", ["32768Mi"], True),
    ("vendor", "Eq", ["NVIDIA"], False),
    ("absent", "Eq", ["x"], False),
    ("memory", "Exists", [], True),
    ("absent", "Exists", [], False),
    ("absent", "DoesNotExist", [], True),
    ("memory", "DoesNotExist", [], False),
    ("memory", "Gt", ["30G"], True),
    ("memory", "Gt", ["32Gi"], False),
    ("memory", "GtEq", ["32Gi"], True),
    ("memory", "GtEq", ["34359738369"], False),
    ("memory", "Lt", ["40G"], True),
    ("memory", "Lt", ["32Gi"], False),
    ("memory", "LtEq", ["32Gi"], True),
    ("memory", "LtEq", ["30G"], False),
    ("speed", "GtEq", ["40GBPS"], True),
    ("speed", "Lt", ["40GBPS"], False),
    ("speed", "GtEq", ["40Gbps"], False),  # units differ: no ordering, no match
    ("driverVersion", "Gt", ["470.82.01"], True),
    ("driverVersion", "Lt", ["v470"], False),
    ("driverVersion", "GtEq", ["535.104.5"], True),
    ("Kind", "Gt", ["1.0.0"], False),  # a string does not order
    ("absent", "Gt", ["1"], False),  # ordering operators do not match an absent key
    ("absent", "LtEq", ["1"], False),
]


@pytest.mark.parametrize(("key", "op", "values", "expected"), REQUIREMENTS)
def test_device_requirement_matching(key: str, op: str, values: list[str], expected: bool) -> None:
    assert Requirement(key, op, tuple(values)).matches(GPU) is expected


PROBLEMS = [
    ("memory", "Between", ["1", "2"], "unknown operator 'Between'"),
    ("", "Exists", [], "must not be empty"),
    ("Kind", "In", [], "In needs at least one value"),
    ("Kind", "NotIn", [], "NotIn needs at least one value"),
    ("Kind", "Exists", ["x"], "Exists takes no values, got 1"),
    ("Kind", "DoesNotExist", ["x", "y"], "DoesNotExist takes no values, got 2"),
    ("memory", "Eq", [], "Eq needs exactly one value, got 0"),
    ("memory", "Gt", ["1", "2"], "Gt needs exactly one value, got 2"),
    ("memory", "GtEq", [], "GtEq needs exactly one value, got 0"),
    ("memory", "Lt", ["lots"], "'lots' is none of these"),
    ("memory", "LtEq", ["1.2.3.4"], "'1.2.3.4' is none of these"),
    ("memory", "Gt", [""], "is none of these"),
]


@pytest.mark.parametrize(("key", "op", "values", "why"), PROBLEMS)
def test_requirement_problem_names_the_reason(key: str, op: str, values: list[str], why: str) -> None:
    problem = requirement_problem(key, op, values)
    assert problem is not None
    assert why in problem
    with pytest.raises(errors.Invalid, match="requirement"):
        Requirement(key, op, tuple(values))


@pytest.mark.parametrize(
    ("key", "op", "values"),
    [
        ("Kind", "In", ["nvidia-gpu"]),
        ("memory", "GtEq", ["30G"]),
        ("speed", "GtEq", ["40GBPS"]),
        ("driverVersion", "Gt", ["v1.2.10"]),
        ("x", "Eq", ["anything at all"]),
        ("x", "Exists", []),
        ("x", "NotIn", ["a", "b"]),
    ],
)
def test_requirement_problem_accepts_good_requirements(key: str, op: str, values: list[str]) -> None:
    assert requirement_problem(key, op, values) is None


def test_requirement_renders_and_round_trips_through_the_wire_form() -> None:
    req = Requirement("memory", "GtEq", ("30G",))
    assert str(req) == "memory GtEq 30G"
    assert str(Requirement("Kind", "In", ("a", "b"))) == "Kind In [a, b]"
    assert str(Requirement("Kind", "Exists")) == "Kind Exists"
    assert req.to_wire() == {"key": "memory", "operator": "GtEq", "values": ["30G"]}
    assert Requirement("k", "Exists").to_wire() == {"key": "k", "operator": "Exists"}


# -- device selectors (seed 003 examples) -------------------------------------------------------------------------

NVIDIA_HIGH_MEM = [
    {
        "matchExpressions": [
            {"key": "Kind", "operator": "In", "values": ["nvidia-gpu"]},
            {"key": "memory", "operator": "GtEq", "values": ["30G"]},
        ]
    }
]
HUGEPAGES_1GIG = [
    {
        "matchExpressions": [
            {"key": "Kind", "operator": "In", "values": ["huge-pages"]},
            {"key": "size", "operator": "GtEq", "values": ["1G"]},
        ]
    }
]
FAST_NIC = [
    {
        "matchExpressions": [
            {"key": "Kind", "operator": "In", "values": ["nic"]},
            {"key": "speed", "operator": "GtEq", "values": ["40GBPS"]},
        ]
    }
]

SEED_CASES = [
    (NVIDIA_HIGH_MEM, {"Kind": "nvidia-gpu", "memory": "32Gi"}, True),
    (NVIDIA_HIGH_MEM, {"Kind": "nvidia-gpu", "memory": "30G"}, True),
    (NVIDIA_HIGH_MEM, {"Kind": "nvidia-gpu", "memory": "16Gi"}, False),
    (NVIDIA_HIGH_MEM, {"Kind": "amd-gpu", "memory": "64Gi"}, False),
    (NVIDIA_HIGH_MEM, {"Kind": "nvidia-gpu"}, False),
    (HUGEPAGES_1GIG, {"Kind": "huge-pages", "size": "1Gi"}, True),
    (HUGEPAGES_1GIG, {"Kind": "huge-pages", "size": "2Mi"}, False),
    (FAST_NIC, {"Kind": "nic", "speed": "100GBPS"}, True),
    (FAST_NIC, {"Kind": "nic", "speed": "40GBPS"}, True),
    (FAST_NIC, {"Kind": "nic", "speed": "10GBPS"}, False),
    (FAST_NIC, {"Kind": "nic", "speed": "100Gbps"}, False),
    (NVIDIA_HIGH_MEM + FAST_NIC, {"Kind": "nic", "speed": "100GBPS"}, True),  # terms OR
    (NVIDIA_HIGH_MEM + FAST_NIC, {"Kind": "nic", "speed": "1GBPS"}, False),
    ([], {"Kind": "nic"}, False),  # an empty selector matches nothing
    ([{"matchExpressions": []}], {"Kind": "nic"}, False),  # and so does an empty term
    ([{}], {"Kind": "nic"}, False),
]


@pytest.mark.parametrize(("terms", "attrs", "expected"), SEED_CASES)
def test_seed_003_resource_classes_select_devices_by_metadata(
    terms: list[dict[str, Any]], attrs: dict[str, str], expected: bool
) -> None:
    assert DeviceSelector.from_wire(terms).matches(attrs) is expected


def test_device_selector_from_wire_round_trips() -> None:
    selector = DeviceSelector.from_wire(NVIDIA_HIGH_MEM + FAST_NIC)
    assert selector.terms == (
        (Requirement("Kind", "In", ("nvidia-gpu",)), Requirement("memory", "GtEq", ("30G",))),
        (Requirement("Kind", "In", ("nic",)), Requirement("speed", "GtEq", ("40GBPS",))),
    )
    assert selector.to_wire() == NVIDIA_HIGH_MEM + FAST_NIC
    assert DeviceSelector.from_wire(selector.to_wire()) == selector
    assert DeviceSelector.from_wire(None) == DeviceSelector()


def test_device_selector_accepts_plain_lists_and_is_hashable() -> None:
    selector = DeviceSelector([[Requirement("Kind", "Exists")]])
    assert selector.matches({"Kind": "x"})
    assert hash(selector) == hash(DeviceSelector(((Requirement("Kind", "Exists"),),)))


WIRE_REFUSED = [
    ({"matchExpressions": []}, "resourceSelector", "must be a list"),
    (["x"], "resourceSelector[0]", "must be a mapping"),
    ([{"matchExpression": []}], "resourceSelector[0].matchExpression", "unknown field"),
    ([{"matchExpressions": {}}], "resourceSelector[0].matchExpressions", "must be a list"),
    (
        [{"matchExpressions": [_expr("Kind", "In", "x"), _expr("memory", "GtEq", "lots")]}],
        "resourceSelector[0].matchExpressions[1].values",
        "'lots' is none of these",
    ),
    (
        [{"matchExpressions": [_expr("Kind", "Exists")]}, {"matchExpressions": [_expr("memory", "Gt")]}],
        "resourceSelector[1].matchExpressions[0].values",
        "Gt needs exactly one value, got 0",
    ),
    (
        [{"matchExpressions": [_expr("memory", "Bigger", "1")]}],
        "resourceSelector[0].matchExpressions[0].operator",
        "unknown operator 'Bigger' (one of In, NotIn, Eq, Exists, DoesNotExist, Gt, GtEq, Lt, LtEq)",
    ),
    ([{"matchExpressions": [{"operator": "Exists"}]}], "resourceSelector[0].matchExpressions[0].key", "required"),
    (
        [{"matchExpressions": [{"key": "memory", "operator": "Gt", "values": [30]}]}],
        "resourceSelector[0].matchExpressions[0].values[0]",
        "must be a string, not int",
    ),
]


@pytest.mark.parametrize(("terms", "path", "why"), WIRE_REFUSED)
def test_device_selector_from_bad_wire_names_the_field(terms: Any, path: str, why: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        DeviceSelector.from_wire(terms)
    (field,) = caught.value.fields
    assert field.path == path
    assert why in field.reason
    assert path in str(caught.value)


# -- typed comparison: properties ---------------------------------------------------------------------------------

_quantity_text = st.builds(
    lambda n, s: f"{n}{s}",
    st.integers(-(10**6), 10**6),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "e-3"]),
)
_version_text = st.builds(
    lambda v, parts, pre: "v" * v + ".".join(str(p) for p in parts) + (f"-{pre}" if pre else ""),
    st.integers(0, 1),
    st.lists(st.integers(0, 20), min_size=2, max_size=3),
    st.one_of(st.none(), st.sampled_from(["alpha", "alpha.1", "beta", "beta.2", "beta.11", "rc.1", "1", "x-y"])),
)
_unit_text = st.builds(lambda q, unit: f"{q}{unit}", _quantity_text.filter(lambda q: q[-1].isdigit()), st.just("BPS"))
_same_kind = st.sampled_from([_quantity_text, _version_text, _unit_text]).flatmap(lambda s: st.tuples(s, s, s))


@given(_same_kind)
def test_compare_values_is_antisymmetric_and_transitive_within_a_kind(values: tuple[str, str, str]) -> None:
    a, b, c = values
    ab, bc, ac = compare_values(a, b), compare_values(b, c), compare_values(a, c)
    assert ab is not None
    assert bc is not None
    assert ac is not None
    assert compare_values(b, a) == -ab
    assert compare_values(a, a) == 0
    if ab <= 0 and bc <= 0:
        assert ac <= 0
    if ab == 0 and bc == 0:
        assert ac == 0


@given(_quantity_text, _quantity_text)
def test_compare_values_on_quantities_agrees_with_quantity_order(a: str, b: str) -> None:
    qa, qb = Quantity(a), Quantity(b)
    assert compare_values(a, b) == (qa > qb) - (qa < qb)


@given(st.sampled_from([_quantity_text, _version_text, _unit_text]).flatmap(lambda s: st.tuples(s, s)))
def test_ordering_operators_agree_with_compare_values(pair: tuple[str, str]) -> None:
    have, want = pair
    order = compare_values(have, want)
    assert order is not None
    attrs = {"k": have}
    assert Requirement("k", "Gt", (want,)).matches(attrs) is (order > 0)
    assert Requirement("k", "GtEq", (want,)).matches(attrs) is (order >= 0)
    assert Requirement("k", "Lt", (want,)).matches(attrs) is (order < 0)
    assert Requirement("k", "LtEq", (want,)).matches(attrs) is (order <= 0)
    assert Requirement("k", "Eq", (want,)).matches(attrs) is (order == 0)
    assert Requirement("k", "In", (want,)).matches(attrs) is (order == 0)
    assert Requirement("k", "NotIn", (want,)).matches(attrs) is (order != 0)


@given(st.text(max_size=8), st.text(max_size=8))
def test_compare_values_never_raises_and_is_antisymmetric_on_any_strings(a: str, b: str) -> None:
    ab, ba = compare_values(a, b), compare_values(b, a)
    assert (ab is None) == (ba is None)
    if ab is not None and ba is not None:
        assert ab == -ba
