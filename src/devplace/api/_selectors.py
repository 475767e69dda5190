"""Selectors: Kubernetes label selectors, node selector terms, and Resource Class device selectors (seed 003).

Pure: parse once at the boundary (bad input raises `errors.Invalid` naming the expression or field path and the
reason), then match plain `Mapping[str, str]` data as often as needed. All types here are frozen.

Absent keys follow Kubernetes everywhere: `!=`, `notin`/`NotIn` and `!key`/`DoesNotExist` match an object that lacks
the key; `=`, `in`/`In`, `Eq`, `Exists` and every ordering operator do not.

Label selectors (`parse_label_selector`, `LabelSelector.from_dict`) accept what apimachinery accepts: `a=b`, `a==b`,
`a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>1`, `a<1` (Gt/Lt take one integer and match only labels whose
value is an integer), joined by commas. Deliberate strictness: a set must name at least one value (`a in ()` is
refused; apimachinery reads it as the empty string). Requirements are kept sorted by key, as apimachinery does, so
`str()` is canonical and parses back to an equal selector. The empty selector matches everything.

Node selectors (`NodeSelector`, `node_selector_matches`): terms are ORed, a term's matchExpressions (and matchFields on
`metadata.name`) are ANDed; a term with neither matches nothing, and so does an empty list of terms.

Device selectors (`DeviceSelector`, `Requirement`): the nine Resource Class operators over device attributes, with
typed comparison (`compare_values`): two values compare
1. as quantities when both parse as Kubernetes quantities (`30G` < `32Gi`, `32Gi` == `34359738368`);
2. else as quantities with a unit when both are `<quantity><letters>` with the *same* letters (`40GBPS` > `10GBPS`,
   `1Gbps` == `1000Mbps`). The quantity prefix is the longest one that parses, so `40GBPS` is 40G of `BPS`. Units
   are case-sensitive, like quantity suffixes: `40GBPS` and `10Gbps` do not order (a `mbps`/`Mbps` slip must not
   silently compare as milli against mega);
3. else as versions when both are versions (`1.2.10` > `1.2.9`, optional leading `v`, up to three numeric parts,
   semver pre-release below its release, build metadata ignored);
4. else as strings: equal or not, never ordered, so ordering operators do not match.
In/NotIn/Eq use this typed equality (`32Gi` In [`34359738368`]). Comparison is a total order within each of the first
three kinds; across kinds it is not (`1.5` vs `1.10` are quantities, `1.10` vs `1.7.0` are versions), so a class
should compare a key against values of the kind its devices report. A selector term ANDs its requirements, terms are
ORed, an empty term and an empty selector match nothing (seed 003: "a null or empty selector matches no resources").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from devplace import errors
from devplace.api import _names as names
from devplace.api._quantity import Quantity

# ---------------------------------------------------------------------------------------------------------------
# Field selectors
# ---------------------------------------------------------------------------------------------------------------

COMMON_FIELDS = ("metadata.name", "metadata.namespace")
"""Fields every kind can be selected on; a kind declares more (`FIELD_LABELS`)."""

FIELD_LABELS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec.nodeName", "spec.schedulerName", "status.phase"),
    "Instance": ("spec.configurationName", "apiVersion"),
    "Configuration": ("apiVersion",),
    "Namespace": ("status.phase",),
    "Event": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "type",
    ),
    "Secret": ("type",),
    "Node": ("spec.unschedulable",),
    "Job": ("status.successful",),
    "ResourceSlice": ("spec.nodeName", "spec.driver"),
}
"""Per kind, the fields a field selector may name besides `COMMON_FIELDS` (Kubernetes' field labels). A kind served
in two groups that hold apart objects (Configuration, Instance: `akri.sh` and `devplace.io`) also takes `apiVersion`,
which the API server uses to show each group only its own objects."""


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    """The field's value as Kubernetes compares it: a string, "" when absent, booleans as true/false."""
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    equal: bool  # `=` / `==` when True, `!=` when False
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (_field_value(obj, self.field) == self.value) == self.equal

    def value_of(self, obj: Mapping[str, Any]) -> str:
        """What `obj` has in this requirement's field, as it is compared ("" when absent)."""
        return _field_value(obj, self.field)

    def __str__(self) -> str:
        return f"{self.field}{'=' if self.equal else '!='}{self.value}"


@dataclass(frozen=True)
class FieldSelector:
    """Kubernetes' field selector: `field=value`, `field==value` and `field!=value` terms ANDed; empty matches all.

    Selected fields are what the store can filter on the server side: an agent asks for `spec.nodeName=<node>` and
    receives only its own node's Pods. An absent field reads as "" (so `spec.nodeName=` selects unbound Pods).
    """

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    def exact(self, field: str) -> str | None:
        """The value `field` must equal, when a requirement pins it (lets a backend narrow its scan)."""
        for r in self.requirements:
            if r.field == field and r.equal:
                return r.value
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def parse_field_selector(text: str, kind: str | None = None) -> FieldSelector:
    """Parse `spec.nodeName=node-a,metadata.name!=x`; with `kind`, refuse fields the kind does not declare.

    Errors name `fieldSelector` and say which term and why, as Kubernetes' 400 does.
    """
    reqs: list[FieldRequirement] = []
    allowed = None if kind is None else (*COMMON_FIELDS, *FIELD_LABELS.get(kind, ()))
    for raw in text.split(","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            field_, value = term.split("!=", 1)
            equal = False
        elif "==" in term:
            field_, value = term.split("==", 1)
            equal = True
        elif "=" in term:
            field_, value = term.split("=", 1)
            equal = True
        else:
            raise errors.Invalid.field("fieldSelector", f"{term!r}: expected field=value, field==value or field!=value")
        field_, value = field_.strip(), value.strip()
        if not field_:
            raise errors.Invalid.field("fieldSelector", f"{term!r}: the field name is empty")
        if allowed is not None and field_ not in allowed:
            raise errors.Invalid.field(
                "fieldSelector",
                f"field label not supported for {kind}: {field_!r} (supported: {', '.join(allowed)})",
            )
        reqs.append(FieldRequirement(field_, equal, value))
    return FieldSelector(tuple(reqs))


# ---------------------------------------------------------------------------------------------------------------
# Label selectors
# ---------------------------------------------------------------------------------------------------------------

LabelOperator = Literal["=", "==", "!=", "in", "notin", "exists", "!", "gt", "lt"]
_SET_OPERATORS = ("in", "notin")
_VALUE_OPERATORS = ("=", "==", "!=")
_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _int64(text: str) -> int | None:
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _label_requirement_problem(key: str, operator: str, values: Sequence[str]) -> str | None:
    problem = names.label_key_problem(key)
    if problem:
        return f"key {problem}"
    if operator in _VALUE_OPERATORS:
        if len(values) != 1:
            return f"{operator!r} needs exactly one value, got {len(values)}"
    elif operator in _SET_OPERATORS:
        if not values:
            return f"{operator!r} needs at least one value"
    elif operator in ("exists", "!"):
        if values:
            return f"{'exists' if operator == 'exists' else 'does-not-exist'} takes no values, got {len(values)}"
        return None
    elif operator in ("gt", "lt"):
        if len(values) != 1:
            return f"{'Gt' if operator == 'gt' else 'Lt'} needs exactly one value, got {len(values)}"
        if _int64(values[0]) is None:
            return f"{'Gt' if operator == 'gt' else 'Lt'} needs an integer value, got {values[0]!r}"
        return None
    else:
        return f"unknown operator {operator!r}"
    for value in values:
        problem = names.label_value_problem(value)
        if problem:
            return f"value {problem}"
    return None


@dataclass(frozen=True)
class LabelRequirement:
    """One requirement of a label selector. Set operators keep their values sorted and unique."""

    key: str
    operator: LabelOperator
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        values = tuple(self.values)
        if self.operator in _SET_OPERATORS:
            values = tuple(sorted(set(values)))
        object.__setattr__(self, "values", values)
        problem = _label_requirement_problem(self.key, self.operator, values)
        if problem:
            raise errors.Invalid(f"label requirement {self.key!r} {self.operator} {list(values)}: {problem}")

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        op = self.operator
        if op == "exists":
            return present
        if op == "!":
            return not present
        if op in ("!=", "notin"):
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        if op in ("=", "==", "in"):
            return labels[self.key] in self.values
        have = _int64(labels[self.key])
        if have is None:
            return False
        want = int(self.values[0])
        return have > want if op == "gt" else have < want

    def __str__(self) -> str:
        op = self.operator
        if op == "exists":
            return self.key
        if op == "!":
            return f"!{self.key}"
        if op in _SET_OPERATORS:
            return f"{self.key} {op} ({','.join(self.values)})"
        symbol = {"gt": ">", "lt": "<"}.get(op, op)
        return f"{self.key}{symbol}{self.values[0]}"


@dataclass(frozen=True)
class LabelSelector:
    """Requirements ANDed together; no requirements matches everything."""

    requirements: tuple[LabelRequirement, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "requirements", tuple(sorted(self.requirements, key=lambda r: r.key)))

    @classmethod
    def everything(cls) -> LabelSelector:
        return cls(())

    @property
    def is_empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any] | None, path: str = "") -> LabelSelector:
        """A `metav1.LabelSelector` wire dict (`matchLabels`, `matchExpressions` with In/NotIn/Exists/DoesNotExist).

        `None` or `{}` selects everything. Errors name the field under `path` (e.g. `spec.selector.matchLabels`).
        """
        if obj is None:
            return cls.everything()

        def at(sub: str) -> str:
            return f"{path}.{sub}" if path else sub

        if not isinstance(obj, Mapping):
            raise errors.Invalid.field(path, f"a label selector must be a mapping, not {type(obj).__name__}")
        unknown = sorted(set(obj) - {"matchLabels", "matchExpressions"})
        if unknown:
            raise errors.Invalid.field(at(str(unknown[0])), "unknown field (expected matchLabels, matchExpressions)")
        reqs: list[LabelRequirement] = []
        match_labels = obj.get("matchLabels")
        match_labels = {} if match_labels is None else match_labels
        if not isinstance(match_labels, Mapping):
            raise errors.Invalid.field(at("matchLabels"), "must be a mapping of label keys to values")
        for key, value in match_labels.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise errors.Invalid.field(at(f"matchLabels.{key}"), "keys and values must be strings")
            problem = _label_requirement_problem(key, "=", [value])
            if problem:
                raise errors.Invalid.field(at(f"matchLabels.{key}"), problem)
            reqs.append(LabelRequirement(key, "=", (value,)))
        expressions = obj.get("matchExpressions")
        expressions = [] if expressions is None else expressions
        if not isinstance(expressions, list):
            raise errors.Invalid.field(at("matchExpressions"), "must be a list")
        for i, expr in enumerate(expressions):
            key, op, values = _wire_expression(expr, at(f"matchExpressions[{i}]"), _LABEL_SELECTOR_OPERATORS)
            label_op = _LABEL_SELECTOR_OPERATORS[op]
            problem = _label_requirement_problem(key, label_op, values)
            if problem:
                sub = "key" if problem.startswith("key ") else "values"
                raise errors.Invalid.field(at(f"matchExpressions[{i}].{sub}"), problem)
            reqs.append(LabelRequirement(key, label_op, tuple(values)))
        return cls(tuple(reqs))


_LABEL_SELECTOR_OPERATORS: dict[str, LabelOperator] = {
    "In": "in",
    "NotIn": "notin",
    "Exists": "exists",
    "DoesNotExist": "!",
}
_NODE_SELECTOR_OPERATORS: dict[str, LabelOperator] = {**_LABEL_SELECTOR_OPERATORS, "Gt": "gt", "Lt": "lt"}


def _wire_expression(expr: Any, path: str, operators: Mapping[str, Any]) -> tuple[str, str, list[str]]:
    """Shape-check one `{key, operator, values}` wire expression."""
    if not isinstance(expr, Mapping):
        raise errors.Invalid.field(path, f"an expression must be a mapping, not {type(expr).__name__}")
    unknown = sorted(set(expr) - {"key", "operator", "values"})
    if unknown:
        raise errors.Invalid.field(f"{path}.{unknown[0]}", "unknown field (expected key, operator, values)")
    key = expr.get("key")
    if not isinstance(key, str) or not key:
        raise errors.Invalid.field(f"{path}.key", "required, a non-empty string")
    op = expr.get("operator")
    if not isinstance(op, str) or op not in operators:
        raise errors.Invalid.field(f"{path}.operator", f"unknown operator {op!r} (one of {', '.join(operators)})")
    values = expr.get("values")
    if values is None:
        values = []
    if not isinstance(values, list):
        raise errors.Invalid.field(f"{path}.values", "must be a list of strings")
    for j, value in enumerate(values):
        if not isinstance(value, str):
            raise errors.Invalid.field(f"{path}.values[{j}]", f"must be a string, not {type(value).__name__}")
    return key, op, list(values)


_TOKEN = re.compile(r"\s*(?:(?P<op>==|!=|[!=,()<>])|(?P<word>[^\s!=,()<>]+))")


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:  # only trailing whitespace is left
            break
        tokens.append(match.group("op") or match.group("word"))
        pos = match.end()
    return tokens


_PUNCTUATION = frozenset({"==", "!=", "!", "=", ",", "(", ")", "<", ">"})


def _is_word(token: str | None) -> bool:
    return token is not None and token not in _PUNCTUATION


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the string form (`app=web,tier in (a,b),!legacy`); errors name the selector and the reason."""

    def fail(reason: str) -> errors.Invalid:
        return errors.Invalid(f"label selector {text!r}: {reason}")

    tokens = _tokenize(text)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str | None:
        nonlocal pos
        token = peek()
        pos += 1
        return token

    def shown(token: str | None) -> str:
        return "the end" if token is None else repr(token)

    reqs: list[LabelRequirement] = []
    while tokens:
        negated = peek() == "!"
        if negated:
            take()
        key = take()
        if not _is_word(key):
            raise fail(f"expected a label key, found {shown(key)}")
        assert key is not None
        op: LabelOperator
        values: list[str] = []
        nxt = peek()
        if negated:
            op = "!"
        elif nxt is None or nxt == ",":
            op = "exists"
        elif nxt in ("=", "==", "!="):
            take()
            op = "=" if nxt == "=" else ("==" if nxt == "==" else "!=")
            if _is_word(peek()):
                values.append(take() or "")
            elif peek() in (None, ","):
                values.append("")
            else:
                raise fail(f"expected a value after {key}{nxt}, found {shown(peek())}")
        elif nxt in (">", "<"):
            take()
            op = "gt" if nxt == ">" else "lt"
            value = take()
            if not _is_word(value):
                raise fail(f"expected an integer after {key}{nxt}, found {shown(value)}")
            values.append(value or "")
        elif nxt in ("in", "notin"):
            take()
            op = "in" if nxt == "in" else "notin"
            if take() != "(":
                raise fail(f"expected '(' after {key} {op}")
            while True:
                value = take()
                if value == ")" and not values:
                    raise fail(f"{key} {op} (): a set needs at least one value")
                if not _is_word(value):
                    raise fail(f"expected a value in the set of {key} {op}, found {shown(value)}")
                values.append(value or "")
                closer = take()
                if closer == ")":
                    break
                if closer != ",":
                    raise fail(f"expected ',' or ')' in the set of {key} {op}, found {shown(closer)}")
        else:
            raise fail(
                f"expected an operator (=, ==, !=, in, notin, <, >), ',' or the end after {key!r}, found {nxt!r}"
            )
        problem = _label_requirement_problem(key, op, values)
        if problem:
            raise fail(problem)
        reqs.append(LabelRequirement(key, op, tuple(values)))
        after = take()
        if after is None:
            break
        if after != ",":
            raise fail(f"expected ',' or the end after {reqs[-1]}, found {after!r}")
        if peek() is None:
            raise fail("expected a requirement after the last ','")
    return LabelSelector(tuple(reqs))


# ---------------------------------------------------------------------------------------------------------------
# Node selectors (nodeSelectorTerms)
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeSelectorTerm:
    """matchExpressions over node labels and matchFields over `metadata.name`, ANDed; empty matches nothing."""

    match_expressions: tuple[LabelRequirement, ...] = ()
    match_fields: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str], node_name: str | None = None) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False
        fields = {} if node_name is None else {"metadata.name": node_name}
        return all(r.matches(labels) for r in self.match_expressions) and all(
            r.matches(fields) for r in self.match_fields
        )


@dataclass(frozen=True)
class NodeSelector:
    """`nodeSelectorTerms`, ORed. No terms matches nothing."""

    terms: tuple[NodeSelectorTerm, ...] = ()

    def matches(self, labels: Mapping[str, str], node_name: str | None = None) -> bool:
        return any(term.matches(labels, node_name) for term in self.terms)

    @classmethod
    def from_wire(cls, terms: Any, path: str = "nodeSelectorTerms") -> NodeSelector:
        if not isinstance(terms, list):
            raise errors.Invalid.field(path, "must be a list of terms")
        parsed: list[NodeSelectorTerm] = []
        for t, term in enumerate(terms):
            here = f"{path}[{t}]"
            if not isinstance(term, Mapping):
                raise errors.Invalid.field(here, f"a term must be a mapping, not {type(term).__name__}")
            unknown = sorted(set(term) - {"matchExpressions", "matchFields"})
            if unknown:
                raise errors.Invalid.field(
                    f"{here}.{unknown[0]}", "unknown field (expected matchExpressions, matchFields)"
                )
            parts: dict[str, list[LabelRequirement]] = {"matchExpressions": [], "matchFields": []}
            for part, out in parts.items():
                exprs = term.get(part)
                exprs = [] if exprs is None else exprs
                if not isinstance(exprs, list):
                    raise errors.Invalid.field(f"{here}.{part}", "must be a list")
                for e, expr in enumerate(exprs):
                    where = f"{here}.{part}[{e}]"
                    key, op, values = _wire_expression(expr, where, _NODE_SELECTOR_OPERATORS)
                    label_op = _NODE_SELECTOR_OPERATORS[op]
                    if part == "matchFields":
                        if key != "metadata.name":
                            raise errors.Invalid.field(
                                f"{where}.key", f"unsupported field {key!r} (only metadata.name)"
                            )
                        if op not in ("In", "NotIn") or len(values) != 1:
                            raise errors.Invalid.field(
                                where, "metadata.name supports In or NotIn with exactly one value"
                            )
                        out.append(LabelRequirement(key, label_op, tuple(values)))
                        continue
                    problem = _label_requirement_problem(key, label_op, values)
                    if problem:
                        sub = "key" if problem.startswith("key ") else "values"
                        raise errors.Invalid.field(f"{where}.{sub}", problem)
                    out.append(LabelRequirement(key, label_op, tuple(values)))
            parsed.append(NodeSelectorTerm(tuple(parts["matchExpressions"]), tuple(parts["matchFields"])))
        return cls(tuple(parsed))


def node_selector_matches(
    labels: Mapping[str, str], terms: Sequence[Mapping[str, Any]], *, node_name: str | None = None
) -> bool:
    """Do a node's labels (and name, for matchFields) satisfy `nodeSelectorTerms`? Malformed terms raise Invalid."""
    return NodeSelector.from_wire(list(terms)).matches(labels, node_name)


# ---------------------------------------------------------------------------------------------------------------
# Typed value comparison and Resource Class device selectors
# ---------------------------------------------------------------------------------------------------------------

DEVICE_OPERATORS: tuple[str, ...] = ("In", "NotIn", "Eq", "Exists", "DoesNotExist", "Gt", "GtEq", "Lt", "LtEq")
_ORDERING = ("Gt", "GtEq", "Lt", "LtEq")
_VERSION = re.compile(
    r"v?(?P<major>[0-9]+)(?:\.(?P<minor>[0-9]+))?(?:\.(?P<patch>[0-9]+))?"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)

_VersionKey = tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]


@lru_cache(maxsize=4096)  # pure; schedulers compare the same attribute values over and over
def _quantity(text: str) -> Quantity | None:
    try:
        return Quantity(text)
    except errors.Invalid:
        return None


@lru_cache(maxsize=4096)
def _quantity_with_unit(text: str) -> tuple[Quantity, str] | None:
    """`40GBPS` -> (40G, "BPS"): the longest quantity prefix followed by letters only."""
    for cut in range(len(text) - 1, 0, -1):
        if not (text[cut].isascii() and text[cut].isalpha()):
            break
        prefix = _quantity(text[:cut])
        if prefix is not None:
            return prefix, text[cut:]
    return None


@lru_cache(maxsize=4096)
def _version(text: str) -> _VersionKey | None:
    match = _VERSION.fullmatch(text)
    if match is None:
        return None
    pre = match["pre"]
    if pre is None:
        pre_key: tuple[tuple[int, int, str], ...] = ()
    else:
        pre_key = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (int(match["major"]), int(match["minor"] or 0), int(match["patch"] or 0), 0 if pre else 1, pre_key)


def _sign(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def compare_values(a: str, b: str) -> int | None:
    """-1, 0 or 1 as `a` is below, equal to or above `b`; None when they do not compare (see the module docstring)."""
    qa, qb = _quantity(a), _quantity(b)
    if qa is not None and qb is not None:
        return _sign(qa, qb)
    ua, ub = _quantity_with_unit(a), _quantity_with_unit(b)
    if ua is not None and ub is not None and ua[1] == ub[1]:
        return _sign(ua[0], ub[0])
    va, vb = _version(a), _version(b)
    if va is not None and vb is not None:
        return _sign(va, vb)
    return 0 if a == b else None


def _orders(value: str) -> bool:
    return _quantity(value) is not None or _quantity_with_unit(value) is not None or _version(value) is not None


def requirement_problem_at(key: str, operator: str, values: Sequence[str]) -> tuple[str, str] | None:
    """(field, reason) for a refused device requirement, field being `key`, `operator` or `values`; None if valid."""
    if operator not in DEVICE_OPERATORS:
        return "operator", f"unknown operator {operator!r} (one of {', '.join(DEVICE_OPERATORS)})"
    if not key:
        return "key", "must not be empty"
    if operator in ("In", "NotIn"):
        if not values:
            return "values", f"{operator} needs at least one value"
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            return "values", f"{operator} takes no values, got {len(values)}"
    elif len(values) != 1:
        return "values", f"{operator} needs exactly one value, got {len(values)}"
    elif operator in _ORDERING and not _orders(values[0]):
        return "values", (
            f"{operator} needs a value that orders: a quantity (30G, 32Gi), a quantity with a unit (40GBPS) "
            f"or a version (1.2.10); {values[0]!r} is none of these"
        )
    return None


def requirement_problem(key: str, operator: str, values: list[str]) -> str | None:
    """Why a device selector requirement is refused, or None: wrong value count, unorderable Gt value, bad operator."""
    problem = requirement_problem_at(key, operator, values)
    return None if problem is None else problem[1]


@dataclass(frozen=True)
class Requirement:
    """One device selector expression: `key operator values`. Construction validates (raises `errors.Invalid`)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        problem = requirement_problem(self.key, self.operator, list(self.values))
        if problem:
            raise errors.Invalid(f"requirement {self}: {problem}")

    def matches(self, attrs: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "Exists":
            return self.key in attrs
        if op == "DoesNotExist":
            return self.key not in attrs
        have = attrs.get(self.key)
        if op == "NotIn":
            return have is None or not any(compare_values(have, v) == 0 for v in self.values)
        if have is None:
            return False
        if op in ("In", "Eq"):
            return any(compare_values(have, v) == 0 for v in self.values)
        order = compare_values(have, self.values[0])
        if order is None:
            return False
        return {"Gt": order > 0, "GtEq": order >= 0, "Lt": order < 0, "LtEq": order <= 0}[op]

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            wire["values"] = list(self.values)
        return wire

    def __str__(self) -> str:
        if not self.values:
            return f"{self.key} {self.operator}"
        shown = self.values[0] if len(self.values) == 1 else f"[{', '.join(self.values)}]"
        return f"{self.key} {self.operator} {shown}"


@dataclass(frozen=True)
class DeviceSelector:
    """A Resource Class's `resourceSelector`: terms ORed, a term's requirements ANDed; empty matches nothing."""

    terms: Sequence[Sequence[Requirement]] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "terms", tuple(tuple(term) for term in self.terms))

    def matches(self, attrs: Mapping[str, str]) -> bool:
        return any(term and all(r.matches(attrs) for r in term) for term in self.terms)

    @classmethod
    def from_wire(cls, terms: Any, path: str = "resourceSelector") -> DeviceSelector:
        """Validate `[{matchExpressions: [{key, operator, values}]}]` (None: the empty selector).

        Errors name the field, e.g. `resourceSelector[0].matchExpressions[1].values`.
        """
        if terms is None:
            return cls(())
        if not isinstance(terms, list):
            raise errors.Invalid.field(path, "must be a list of terms")
        parsed: list[list[Requirement]] = []
        for t, term in enumerate(terms):
            here = f"{path}[{t}]"
            if not isinstance(term, Mapping):
                raise errors.Invalid.field(here, f"a term must be a mapping, not {type(term).__name__}")
            unknown = sorted(set(term) - {"matchExpressions"})
            if unknown:
                raise errors.Invalid.field(f"{here}.{unknown[0]}", "unknown field (expected matchExpressions)")
            exprs = term.get("matchExpressions")
            exprs = [] if exprs is None else exprs
            if not isinstance(exprs, list):
                raise errors.Invalid.field(f"{here}.matchExpressions", "must be a list")
            reqs: list[Requirement] = []
            for e, expr in enumerate(exprs):
                where = f"{here}.matchExpressions[{e}]"
                key, op, values = _wire_expression(expr, where, dict.fromkeys(DEVICE_OPERATORS))
                found = requirement_problem_at(key, op, values)
                if found:
                    raise errors.Invalid.field(f"{where}.{found[0]}", found[1])
                reqs.append(Requirement(key, op, tuple(values)))
            parsed.append(reqs)
        return cls(parsed)

    def to_wire(self) -> list[dict[str, Any]]:
        return [{"matchExpressions": [r.to_wire() for r in term]} for term in self.terms]
