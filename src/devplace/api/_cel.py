"""CEL device selectors in Kubernetes' DRA environment (`resource.k8s.io/v1`, facts in shared/reference/dra.md 2).

A DeviceClass or a ResourceClaim request selects devices with CEL expressions over one variable, `device`:
`device.driver` (string), `device.attributes[domain][id]` (int, bool, string or semver), `device.capacity[domain][id]`
(a Kubernetes quantity) and `device.allowMultipleAllocations` (bool, false when unset). Bare attribute names of a
ResourceSlice sit under the driver's name as their domain. Beside CEL's standard library the environment has what
Kubernetes' has for selectors: `cel.bind`, optional syntax (`m.?k.orValue(d)`, `optional.of`), the strings extension
(`split`, `lowerAscii`, ...), the regex functions `find`/`findAll`, the list functions (`sum`, `min`, `max`,
`isSorted`; a list's `indexOf` is not declared: the strings extension owns the name), the quantity library (`quantity`,
`isQuantity`, `sign`, `isInteger`, `asInteger`, `asApproximateFloat`, `add`, `sub`, `mul`, `div`, `divInt`,
`isLessThan`, `isGreaterThan`, `compareTo`), the semver library (`semver(s[, relaxed])`, `isSemver`, `major`,
`minor`, `patch`, comparisons) and, for stored expressions only, `includes` (DRAListTypeAttributes, alpha: a new
expression naming it is refused, as kube-apiserver refuses it).

Semantics kept from Kubernetes (k8s.io/dynamic-resource-allocation/cel):
- the result must be a bool: an expression whose type is known not to be (`1`, `device.driver`) is refused at compile
  time, one whose value is not a bool at run time is an error;
- an unknown domain is an empty map (`"x" in device.attributes["no-such-domain"]` is false), but an unknown key in a
  domain is a run-time error ("no such key"), never false: a class that names an attribute a device lacks fails
  the evaluation (Kubernetes fails the whole pod's allocation), so selectors guard with `"k" in m` or `m.?k`;
- `device.<field>` for a field the device does not have is refused at compile time ("undefined field").

The engine is cel-expr-python (Google's C++ CEL runtime; chosen by bench/cel.py, which compares it with cel-python and
common-expression-language: it is the only one with a type checker, `cel.bind` and optional syntax, and the fastest).
The Kubernetes libraries are Python functions declared to it; quantities and semantic versions travel as two small
protobuf messages (`kubernetes.Quantity`, `kubernetes.Semver`) holding a canonical value, so CEL's `==` compares
values (`quantity("200M") == quantity("0.2G")`).

What the engine lacks, done here over its checked AST (`Expression.serialize()`, a `cel.expr.CheckedExpr`, decoded by
a small protobuf wire reader):
- the static checks above that need the `device` type (the engine sees `device` as `dyn`);
- the empty-map default of unknown domains: the domains an expression indexes with a literal are added as empty maps
  before it runs, unless the expression also reads the domain map as a whole (iterates it, tests `in` on it, binds
  it), which would then see them. In that rare shape an unknown domain indexed by the expression is an error instead
  of an empty map (the verdict of a guarded expression is still false-or-true as in Kubernetes);
- a cost bound. No Python CEL library has Kubernetes' cost estimator, so devplace does not reproduce its numbers; it
  computes its own worst case (`Selector.cost`: one unit per operation, a comprehension's body times the largest size
  its range can have: a literal list's length, 32 domains or keys per device, 64 characters or list items per value)
  and refuses an expression over `MAX_COST` (1,000,000, Kubernetes' limit) when it is compiled, naming the expression.
  Every device is bounded the same way by its kind's validation, so an expression that compiles runs in bounded time
  on every valid device; a filter over many devices has a deadline besides (`Filter`, Kubernetes' filterTimeout).
  Nesting is bounded by the parser (32 levels) and the length by `MAX_LENGTH` (10 KiB, Kubernetes' limit).

Compile once, evaluate often: `compile_selector` is memoized per (expression, environment) and safe to call from
worker threads (the engine is built and compiles under a lock); a `DeviceInput` is the device's CEL value built once;
`Verdicts` keeps each (selector, device) verdict until the device's content or the selector changes (the device's
content is its key, so a changed device is a new entry; the cache is bounded).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from devplace import errors
from devplace.api._quantity import Quantity

MAX_COST = 1_000_000
"""Kubernetes' CELSelectorExpressionMaxCost: the most a selector may cost."""

MAX_LENGTH = 10 * 1024
"""Kubernetes' CELSelectorExpressionMaxLength, in characters."""

MAX_DOMAIN_LENGTH = 63
MAX_ID_LENGTH = 32
MAX_VALUE_LENGTH = 64
MAX_KEYS = 32
"""Bounds of a device (validated by ResourceSlice): the sizes the cost bound assumes for what a device holds."""

MAX_LIST_VALUES = 48
"""`includes` refuses a list attribute longer than this (ResourceSliceMaxAttributeValuesPerDevice)."""

DEVICE_FIELDS = ("driver", "attributes", "capacity", "allowMultipleAllocations")

_UNKNOWN_SIZE = 64
"""The size assumed for a list or string the bound cannot see through (the largest a device value can be)."""

_MAX_AST_DEPTH = 400


# -- quantities and semantic versions ----------------------------------------------------------------------------

_QUANTITY_SHAPE = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_EXPONENT = re.compile(r"[eE][+-]?[0-9]+")
_INT64 = (-(2**63), 2**63 - 1)


@functools.lru_cache(maxsize=4096)
def exact_quantity(text: str) -> Fraction:
    """The exact value of a Kubernetes quantity (unlike `Quantity`, never saturated); ValueError saying why not."""
    if not _QUANTITY_SHAPE.match(text):
        raise ValueError("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    try:
        Quantity(text)
    except errors.Invalid:
        raise ValueError(f"unable to parse quantity's suffix: {text!r}") from None
    match = re.fullmatch(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", text, re.DOTALL)
    assert match is not None
    sign, whole, frac, suffix = match.groups()
    value = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
    if suffix in _BINARY:
        value *= 1024 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        value *= Fraction(10) ** _DECIMAL[suffix]
    elif _EXPONENT.fullmatch(suffix):
        value *= Fraction(10) ** int(suffix[1:])
    return -value if sign == "-" else value


_SEMVER = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)

SemverKey = tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]
"""(major, minor, patch, 1 for a release and 0 for a pre-release, pre-release identifiers): orders as semver."""


@functools.lru_cache(maxsize=4096)
def parse_semver(text: str) -> SemverKey:
    """A strict semantic version 2.0.0 (`1.2.3-rc.1+build`) as an ordering key (build metadata ignored, a release
    above its pre-releases); ValueError saying why not."""
    match = _SEMVER.fullmatch(text)
    if match is None:
        if not re.match(r"[0-9]+\.[0-9]+\.[0-9]+", text):
            raise ValueError(f"No Major.Minor.Patch elements found in {text!r}")
        raise ValueError(f"{text!r} is not a semantic version (semver.org 2.0.0)")
    pre = match[4]
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ()
    return int(match[1]), int(match[2]), int(match[3]), 0 if parts else 1, parts


def _relaxed(text: str) -> str:
    """Kubernetes' normalization for `semver(s, true)`: no `v`, leading zeros dropped, minor and patch filled in."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or not part[0].isdigit():
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def _semver_text(key: SemverKey) -> str:
    """The canonical text of a version (no build metadata): what `==` compares."""
    major, minor, patch, _, pre = key
    text = f"{major}.{minor}.{patch}"
    if pre:
        text += "-" + ".".join(str(n) if kind == 0 else s for kind, n, s in pre)
    return text


def _compare(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def _semver_compare(a: SemverKey, b: SemverKey) -> int:
    return _compare(a, b)


# -- the CEL engine, its messages and the Kubernetes libraries ---------------------------------------------------


_ENGINE_LOCK = threading.Lock()
"""The engine is built, and compiles, under one lock: the API server validates the CEL kinds in worker threads."""


@functools.cache
def _engine() -> _Engine:
    return _Engine()


class _Engine:
    """cel-expr-python's environment with Kubernetes' DRA declarations; built once per process, on first use (the
    node agent imports the object model but never evaluates a selector, so it never loads the C++ runtime)."""

    def __init__(self) -> None:
        from cel_expr_python import cel  # type: ignore[import-untyped]
        from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings  # type: ignore[import-untyped]
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        self.cel = cel
        proto = descriptor_pb2.FileDescriptorProto(name="devplace/kubernetes_cel.proto", package="kubernetes")
        proto.syntax = "proto3"
        for name in ("Quantity", "Semver"):
            message = proto.message_type.add(name=name)
            message.field.add(name="value", number=1, type=9, label=1)  # string
        self.pool = descriptor_pool.DescriptorPool()
        self.pool.Add(proto)
        self.Quantity = message_factory.GetMessageClass(self.pool.FindMessageTypeByName("kubernetes.Quantity"))
        self.Semver = message_factory.GetMessageClass(self.pool.FindMessageTypeByName("kubernetes.Semver"))
        self.env = cel.NewEnv(
            self.pool,
            variables={"device": cel.Type.DYN},
            extensions=[ext_bindings.ExtBindings(), ext_optional.ExtOptional(), ext_strings.ExtStrings()],
            functions=self._functions(),
        )

    # values

    def quantity(self, value: Fraction) -> Any:
        return self.Quantity(value=f"{value.numerator}/{value.denominator}")

    def semver(self, key: SemverKey) -> Any:
        return self.Semver(value=_semver_text(key))

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def _fraction(text: str) -> Fraction:
        return Fraction(text)

    def q(self, message: Any) -> Fraction:
        return self._fraction(message.value)

    @staticmethod
    def s(message: Any) -> SemverKey:
        return parse_semver(message.value)

    # declarations

    def _functions(self) -> list[Any]:
        cel = self.cel
        t = cel.Type
        qt, st = t("kubernetes.Quantity"), t("kubernetes.Semver")
        dyn_list = t.List(t.DYN)

        def decl(name: str, *overloads: tuple[str, Any, list[Any], bool, Callable[..., Any] | None]) -> Any:
            """One function; an overload with no implementation shares the one before it (the runtime dispatches
            on kinds, and a Quantity and a Semver are both messages there)."""
            return cel.FunctionDecl(
                name,
                [
                    cel.Overload(oid, return_type=ret, parameters=params, is_member=member, impl=impl)
                    if impl is not None
                    else cel.Overload(oid, return_type=ret, parameters=params, is_member=member)
                    for oid, ret, params, member, impl in overloads
                ],
            )

        def versus(on_quantity: Callable[[Fraction, Fraction], Any], on_semver: Callable[[int], Any]) -> Any:
            def impl(a: Any, b: Any) -> Any:
                if isinstance(a, self.Semver) and isinstance(b, self.Semver):
                    return on_semver(_semver_compare(self.s(a), self.s(b)))
                return on_quantity(self.q(a), self.q(b))

            return impl

        def to_int(value: Fraction) -> int:
            if value.denominator != 1 or not _INT64[0] <= value <= _INT64[1]:
                raise ValueError("cannot convert value to integer")
            return int(value)

        def semver_of(text: str, relaxed: bool = False) -> Any:
            return self.semver(parse_semver(_relaxed(text) if relaxed else text))

        def is_semver(text: str, relaxed: bool = False) -> bool:
            try:
                parse_semver(_relaxed(text) if relaxed else text)
            except ValueError:
                return False
            return True

        def is_quantity(text: str) -> bool:
            try:
                exact_quantity(text)
            except ValueError:
                return False
            return True

        def find(text: str, pattern: str) -> str:
            match = _regex(pattern).search(text)
            return match.group(0) if match else ""

        def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
            found = [m.group(0) for m in _regex(pattern).finditer(text)]
            return found if limit < 0 else found[:limit]

        def includes(have: Any, want: Any) -> bool:
            if isinstance(have, list):
                if len(have) > MAX_LIST_VALUES:
                    raise ValueError(
                        f"'includes' function cannot be applied to lists longer than {MAX_LIST_VALUES} values"
                    )
                return any(_same(item, want) for item in have)
            return _same(have, want)

        def _same(a: Any, b: Any) -> bool:
            return type(a) is type(b) and a == b

        def sorted_(items: list[Any]) -> bool:
            return all(not _less(b, a) for a, b in itertools.pairwise(items))

        def _less(a: Any, b: Any) -> bool:
            if isinstance(a, self.Quantity) and isinstance(b, self.Quantity):
                return self.q(a) < self.q(b)
            if isinstance(a, self.Semver) and isinstance(b, self.Semver):
                return _semver_compare(self.s(a), self.s(b)) < 0
            return bool(a < b)

        def pick(items: list[Any], want_max: bool) -> Any:
            if not items:
                raise ValueError(f"{'max' if want_max else 'min'} called on an empty list")
            best = items[0]
            for item in items[1:]:
                if _less(best, item) if want_max else _less(item, best):
                    best = item
            return best

        def total(items: list[Any]) -> Any:
            if items and isinstance(items[0], self.Quantity):
                return self.quantity(sum((self.q(i) for i in items), Fraction(0)))
            return sum(items) if items else 0

        q, qf = self.quantity, self.q
        return [
            decl("quantity", ("string_to_quantity", qt, [t.STRING], False, lambda s: q(exact_quantity(s)))),
            decl("isQuantity", ("is_quantity_string", t.BOOL, [t.STRING], False, is_quantity)),
            decl("sign", ("quantity_sign", t.INT, [qt], True, lambda a: _compare(qf(a), 0))),
            decl(
                "isInteger",
                ("quantity_is_integer", t.BOOL, [qt], True, lambda a: qf(a).denominator == 1 and _fits(qf(a))),
            ),
            decl("asInteger", ("quantity_get_int", t.INT, [qt], True, lambda a: to_int(qf(a)))),
            decl("asApproximateFloat", ("quantity_get_float", t.DOUBLE, [qt], True, lambda a: float(qf(a)))),
            decl(
                "add",
                ("quantity_add", qt, [qt, qt], True, lambda a, b: q(qf(a) + qf(b))),
                ("quantity_add_int", qt, [qt, t.INT], True, lambda a, b: q(qf(a) + b)),
            ),
            decl(
                "sub",
                ("quantity_sub", qt, [qt, qt], True, lambda a, b: q(qf(a) - qf(b))),
                ("quantity_sub_int", qt, [qt, t.INT], True, lambda a, b: q(qf(a) - b)),
            ),
            decl("mul", ("quantity_mul_int", qt, [qt, t.INT], True, lambda a, b: q(qf(a) * b))),
            decl("div", ("quantity_div_int", qt, [qt, t.INT], True, lambda a, b: q(_div(qf(a), b)))),
            decl(
                "divInt", ("quantity_div_int_int", qt, [qt, t.INT], True, lambda a, b: q(Fraction(_div(qf(a), b) // 1)))
            ),
            decl(
                "isLessThan",
                ("quantity_less", t.BOOL, [qt, qt], True, versus(lambda a, b: a < b, lambda c: c < 0)),
                ("semver_is_less_than", t.BOOL, [st, st], True, None),
            ),
            decl(
                "isGreaterThan",
                ("quantity_greater", t.BOOL, [qt, qt], True, versus(lambda a, b: a > b, lambda c: c > 0)),
                ("semver_is_greater_than", t.BOOL, [st, st], True, None),
            ),
            decl(
                "compareTo",
                ("quantity_compare_to", t.INT, [qt, qt], True, versus(_compare, lambda c: c)),
                ("semver_compare_to", t.INT, [st, st], True, None),
            ),
            decl(
                "semver",
                ("string_to_semver", st, [t.STRING], False, semver_of),
                ("string_bool_to_semver", st, [t.STRING, t.BOOL], False, semver_of),
            ),
            decl(
                "isSemver",
                ("is_semver_string", t.BOOL, [t.STRING], False, is_semver),
                ("is_semver_string_bool", t.BOOL, [t.STRING, t.BOOL], False, is_semver),
            ),
            decl("major", ("semver_major", t.INT, [st], True, lambda a: self.s(a)[0])),
            decl("minor", ("semver_minor", t.INT, [st], True, lambda a: self.s(a)[1])),
            decl("patch", ("semver_patch", t.INT, [st], True, lambda a: self.s(a)[2])),
            decl("find", ("string_find_string", t.STRING, [t.STRING, t.STRING], True, find)),
            decl(
                "findAll",
                ("string_find_all_string", t.List(t.STRING), [t.STRING, t.STRING], True, find_all),
                ("string_find_all_string_int", t.List(t.STRING), [t.STRING, t.STRING, t.INT], True, find_all),
            ),
            decl("isSorted", ("list_is_sorted", t.BOOL, [dyn_list], True, sorted_)),
            decl("sum", ("list_sum", t.DYN, [dyn_list], True, total)),
            decl("min", ("list_min", t.DYN, [dyn_list], True, lambda items: pick(items, False))),
            decl("max", ("list_max", t.DYN, [dyn_list], True, lambda items: pick(items, True))),
            decl(
                "includes",
                *(
                    (f"{rn}_includes_{an}", t.BOOL, [receiver, argument], True, includes)
                    for rn, receiver in (
                        ("list", dyn_list),
                        ("bool", t.BOOL),
                        ("int", t.INT),
                        ("string", t.STRING),
                        ("semver", st),
                    )
                    for an, argument in (("bool", t.BOOL), ("int", t.INT), ("string", t.STRING), ("semver", st))
                ),
            ),
        ]


def _fits(value: Fraction) -> bool:
    return _INT64[0] <= value <= _INT64[1]


def _div(value: Fraction, by: int) -> Fraction:
    if by == 0:
        raise ValueError("division by zero")
    return value / by


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ValueError(f"invalid regular expression {pattern!r}: {e}") from None


# -- the checked AST (cel.expr.CheckedExpr, protobuf wire format) --------------------------------------------------


@dataclass(slots=True)
class Node:
    """One expression node: `kind` is const, ident, select, call, list, map or comprehension."""

    kind: str
    value: Any = None  # a constant, an identifier, a selected field, a function name, a comprehension's iter var
    args: list[Node] = field(default_factory=list)  # call args (target first), select operand, list items, ...
    target: bool = False  # a member call (`x.f(...)`): args[0] is the receiver
    test_only: bool = False  # `has(x.f)`
    optional: bool = False  # `x.?f`


def _wire(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message: an int for varints, bytes for length-delimited."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, kind = key >> 3, key & 7
        value: Any
        if kind == 0:
            value, pos = _varint(data, pos)
        elif kind == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        elif kind == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif kind == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {kind}")
        yield number, kind, value


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _constant(data: bytes) -> Any:
    for number, _, value in _wire(data):
        if number == 1:
            return None
        if number == 2:
            return bool(value)
        if number == 3:
            return _signed(value)
        if number == 4:
            return value
        if number == 5:
            import struct

            return struct.unpack("<d", value)[0]
        if number == 6:
            return value.decode()
        if number == 7:
            return bytes(value)
    return None


def _expr(data: bytes, depth: int = 0) -> Node:
    if depth > _MAX_AST_DEPTH:
        raise ValueError("the expression is nested too deeply")
    for number, _, value in _wire(data):
        if number == 3:
            return Node("const", _constant(value))
        if number == 4:
            return Node("ident", next((v.decode() for n, _, v in _wire(value) if n == 1), ""))
        if number == 5:
            node = Node("select")
            for n, _, v in _wire(value):
                if n == 1:
                    node.args = [_expr(v, depth + 1)]
                elif n == 2:
                    node.value = v.decode()
                elif n == 3:
                    node.test_only = bool(v)
            return node
        if number == 6:
            node = Node("call")
            target: list[Node] = []
            for n, _, v in _wire(value):
                if n == 1:
                    target = [_expr(v, depth + 1)]
                elif n == 2:
                    node.value = v.decode()
                elif n == 3:
                    node.args.append(_expr(v, depth + 1))
            node.target = bool(target)
            node.args = target + node.args
            return node
        if number == 7:
            return Node("list", args=[_expr(v, depth + 1) for n, _, v in _wire(value) if n == 1])
        if number == 8:
            node = Node("map")
            for n, _, v in _wire(value):
                if n == 2:
                    for en, _, ev in _wire(v):
                        if en in (3, 4):
                            node.args.append(_expr(ev, depth + 1))
            return node
        if number == 9:
            parts: dict[int, Any] = {}
            for n, _, v in _wire(value):
                parts[n] = v.decode() if n in (1, 3, 8) else _expr(v, depth + 1)
            empty = Node("const")
            # args: range, init, condition, step, result
            return Node(
                "comprehension",
                (parts.get(1, ""), parts.get(3, ""), parts.get(8, "")),
                [parts.get(k, empty) for k in (2, 4, 5, 6, 7)],
            )
    return Node("const")


def _checked_expr(serialized: bytes) -> Node:
    """The root node of `Expression.serialize()` (an Any holding a CheckedExpr whose field 4 is the Expr)."""
    payload = next((v for n, _, v in _wire(serialized) if n == 2), b"")
    body = next((v for n, _, v in _wire(payload) if n == 4), b"")
    return _expr(body)


def _walk(root: Node) -> Iterator[tuple[Node, Node | None]]:
    stack: list[tuple[Node, Node | None]] = [(root, None)]
    while stack:
        node, parent = stack.pop()
        yield node, parent
        stack.extend((child, node) for child in node.args)


# -- the checks the engine cannot make, and the cost bound ---------------------------------------------------------


def _device_field(node: Node) -> str | None:
    """`f` when `node` is `device.f`."""
    if node.kind == "select" and node.args and node.args[0].kind == "ident" and node.args[0].value == "device":
        return str(node.value)
    return None


def _static_type(node: Node) -> str | None:
    """What Kubernetes' checker knows of a device path the engine sees as `dyn` (None: dyn or not a device path)."""
    if node.kind == "ident" and node.value == "device":
        return "kubernetes.DRADevice"
    name = _device_field(node)
    if name == "driver":
        return "string"
    if name in ("attributes", "capacity"):
        return "map"
    if name == "allowMultipleAllocations":
        return "bool"
    if node.kind == "select" or (node.kind == "call" and node.value in ("_[_]", "_[?_]")):
        inner = node.args[0] if node.args else None
        if inner is not None and inner.kind in ("select", "call"):
            root = inner.args[0] if inner.args else None
            if root is not None and _device_field(root) == "capacity" and not node.test_only:
                return "kubernetes.Quantity"
    return None


def _domain_lookups(root: Node) -> tuple[dict[str, frozenset[str]], frozenset[str]]:
    """Per domain map (`attributes`, `capacity`): the literal domains the expression indexes, and which maps it
    reads as a whole (module docstring: those get no empty defaults)."""
    found: dict[str, set[str]] = {"attributes": set(), "capacity": set()}
    whole: set[str] = set()
    for node, parent in _walk(root):
        name = _device_field(node)
        if name not in found:
            continue
        assert name is not None
        if parent is None:
            whole.add(name)
        elif parent.kind == "select" and not parent.test_only:
            found[name].add(str(parent.value))
        elif (
            parent.kind == "call"
            and parent.value in ("_[_]", "_[?_]")
            and parent.args[0] is node
            and len(parent.args) == 2
            and parent.args[1].kind == "const"
            and isinstance(parent.args[1].value, str)
        ):
            found[name].add(parent.args[1].value)
        else:
            whole.add(name)
    return {k: frozenset(v) for k, v in found.items()}, frozenset(whole)


_SIZE_OF_DEVICE_PATH = {"attributes": MAX_KEYS, "capacity": MAX_KEYS}
_STRING_FUNCTIONS = frozenset(
    {
        "matches",
        "find",
        "findAll",
        "contains",
        "startsWith",
        "endsWith",
        "split",
        "replace",
        "lowerAscii",
        "upperAscii",
        "trim",
        "indexOf",
        "lastIndexOf",
        "substring",
        "charAt",
        "join",
        "quote",
        "reverse",
        "format",
    }
)


def _cost(root: Node) -> int:
    """The worst-case cost bound (module docstring). Iterative, so depth never matters here."""
    memo: dict[int, tuple[int, int]] = {}
    order: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.args)
    sizes_of_vars: dict[str, int] = {}
    for node in reversed(order):  # children before parents
        memo[id(node)] = _node_cost(node, memo, sizes_of_vars)
    return memo[id(root)][0]


def _node_cost(node: Node, memo: dict[int, tuple[int, int]], var_sizes: dict[str, int]) -> tuple[int, int]:
    """(cost, size): size is how many items or characters the value can have, for what iterates or scans it."""
    kids = [memo[id(child)] for child in node.args]
    cost = sum(c for c, _ in kids)
    if node.kind == "const":
        return 0, len(node.value) if isinstance(node.value, str | bytes) else 1
    if node.kind == "ident":
        return 1, var_sizes.get(str(node.value), _UNKNOWN_SIZE)
    if node.kind == "select":
        name = _device_field(node)
        if name is not None:
            return 1, _SIZE_OF_DEVICE_PATH.get(name, MAX_VALUE_LENGTH)
        inner = node.args[0] if node.args else None
        in_domain_map = inner is not None and _device_field(inner) in _SIZE_OF_DEVICE_PATH
        return cost + 1, MAX_KEYS if in_domain_map else MAX_VALUE_LENGTH
    if node.kind in ("list", "map"):
        return cost + 10, max(len(node.args), 1)
    if node.kind == "comprehension":
        iter_var, _accu, iter_var2 = node.value
        (range_cost, range_size), (init_cost, _), (cond_cost, _), (step_cost, _), (result_cost, _) = kids
        var_sizes[iter_var] = _UNKNOWN_SIZE
        if iter_var2:
            var_sizes[iter_var2] = _UNKNOWN_SIZE
        total = range_cost + init_cost + range_size * (cond_cost + step_cost + 1) + result_cost
        return total, range_size
    # calls
    fn = str(node.value)
    if fn in ("_[_]", "_[?_]") and node.args:
        inner = node.args[0]
        size = MAX_KEYS if _device_field(inner) in _SIZE_OF_DEVICE_PATH else MAX_VALUE_LENGTH
        return cost + 1, size
    largest = max((s for _, s in kids), default=1)
    if fn in _STRING_FUNCTIONS or fn in ("_+_", "includes", "_in_", "@in", "sum", "min", "max", "isSorted"):
        return cost + 1 + math.ceil(largest / 10) * (2 if fn in ("matches", "find", "findAll") else 1), largest + 1
    return cost + 1, largest


# -- compiling and evaluating ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Selector:
    """One compiled selector expression: compile with `compile_selector`, evaluate with `matches`."""

    expression: str
    cost: int
    domains: Mapping[str, frozenset[str]] = field(hash=False, compare=False)
    _program: Any = field(repr=False, hash=False, compare=False)

    def matches(self, device: DeviceInput) -> bool:
        """The verdict on one device; `errors.Invalid` for a run-time error (no such key, not a bool, ...)."""
        data: dict[str, Any] = device.data["device"]
        missing = {k: {d for d in v if d not in data[k]} for k, v in self.domains.items()}
        if any(missing.values()):
            inner = dict(data)
            for key, domains in missing.items():
                if domains:
                    inner[key] = {**inner[key], **{d: {} for d in domains}}
            result = self._program.eval(data={"device": inner})
        else:
            result = self._program.eval(device.activation(_engine()))
        value = result.value()
        if isinstance(value, bool):
            return value
        kind = result.type().name()
        if kind == "ERROR":
            raise errors.Invalid(f"{self.expression}: {_error_text(str(value))}")
        raise errors.Invalid(f"{self.expression}: CEL result of type {kind.lower()} could not be converted to bool")


def _error_text(raw: str) -> str:
    """The engine's error without its status-code prefix (`INVALID_ARGUMENT: ...`)."""
    text = re.sub(r"^[A-Z_]+: ", "", raw).strip()
    missing = re.fullmatch(r'Key not found in map : "(.*)"', text)
    return f"no such key: {missing[1]}" if missing else text


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str, *, new: bool = True) -> Selector:
    """Compile one selector (memoized); `errors.Invalid` with the reason when Kubernetes would refuse it.

    `new`: the environment of a new expression (create, or an update that changes it), where alpha-gated functions
    (`includes`) are undeclared; stored expressions compile in the full environment, as Kubernetes' StoredExpressions.
    """
    if len(expression) > MAX_LENGTH:
        raise errors.Invalid(f"may not be longer than {MAX_LENGTH} characters (is {len(expression)})")
    try:
        with _ENGINE_LOCK:
            program = _engine().env.compile(expression)
    except Exception as e:  # the engine raises RuntimeError with its diagnostics
        raise errors.Invalid(f"compilation failed: {_error_text(str(e))}") from None
    try:
        root = _checked_expr(program.serialize())
    except (ValueError, IndexError) as e:
        raise errors.Invalid(f"compilation failed: {e}") from None
    for node, _ in _walk(root):
        name = _device_field(node)
        if name is not None and name not in DEVICE_FIELDS:
            raise errors.Invalid(f"compilation failed: undefined field '{name}'")
        if new and node.kind == "call" and node.value == "includes":
            raise errors.Invalid("compilation failed: undeclared reference to 'includes'")
    result_type = program.return_type().name()
    static = _static_type(root)
    if result_type not in ("BOOL", "DYN") or (static is not None and static != "bool"):
        shown = static or result_type.lower()
        raise errors.Invalid(f"must evaluate to bool or the unknown type, not {shown}")
    cost = _cost(root)
    if cost > MAX_COST:
        raise errors.Invalid(
            f"too complex: its worst case costs {cost} units, more than the limit of {MAX_COST} per expression"
        )
    domains, whole = _domain_lookups(root)
    defaults = {k: v for k, v in domains.items() if k not in whole and v}
    return Selector(expression, cost, defaults, program)


def selector_problem(expression: str, *, new: bool = True) -> str | None:
    """Why `expression` is refused as a selector, or None."""
    try:
        compile_selector(expression, new=new)
    except errors.Invalid as e:
        return e.message
    return None


# -- devices as CEL sees them ----------------------------------------------------------------------------------------


def split_qualified(name: str, driver: str) -> tuple[str, str]:
    """(domain, id) of a qualified attribute or capacity name; a bare name is under the driver's domain."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


class DeviceInput:
    """A device as the `device` variable holds it, built once from a ResourceSlice device (wire form) and its
    driver; `key` is its content, for caching verdicts."""

    __slots__ = ("_activation", "data", "key")

    def __init__(self, driver: str, device: Mapping[str, Any]) -> None:
        engine = _engine()
        attributes: dict[str, dict[str, Any]] = {}
        for name, value in sorted((device.get("attributes") or {}).items()):
            domain, ident = split_qualified(name, driver)
            attributes.setdefault(domain, {})[ident] = _attribute_value(engine, name, value)
        capacity: dict[str, dict[str, Any]] = {}
        for name, value in sorted((device.get("capacity") or {}).items()):
            domain, ident = split_qualified(name, driver)
            amount = value.get("value") if isinstance(value, Mapping) else value
            capacity.setdefault(domain, {})[ident] = engine.quantity(exact_quantity(str(amount)))
        multiple = bool(device.get("allowMultipleAllocations") or False)
        self.data: dict[str, Any] = {
            "device": {
                "driver": driver,
                "attributes": attributes,
                "capacity": capacity,
                "allowMultipleAllocations": multiple,
            }
        }
        self.key = (
            driver,
            multiple,
            tuple(sorted((k, _frozen(v)) for k, v in (device.get("attributes") or {}).items())),
            tuple(sorted((k, _frozen(v)) for k, v in (device.get("capacity") or {}).items())),
        )
        self._activation: Any = None

    def activation(self, engine: _Engine) -> Any:
        if self._activation is None:
            self._activation = engine.env.Activation(self.data)
        return self._activation


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _attribute_value(engine: _Engine, name: str, value: Any) -> Any:
    if not isinstance(value, Mapping) or len(value) != 1:
        raise errors.Invalid(f"attribute {name}: exactly one of int, bool, string, version")
    kind, raw = next(iter(value.items()))
    if kind == "version":
        try:
            return engine.semver(parse_semver(str(raw)))
        except ValueError as e:
            raise errors.Invalid(f"attribute {name}: parse semantic version: {e}") from None
    if kind == "versions":  # list-typed attributes (alpha)
        return [engine.semver(parse_semver(str(v))) for v in raw]
    if kind in ("int", "bool", "string", "ints", "bools", "strings"):
        return list(raw) if isinstance(raw, list) else raw
    raise errors.Invalid(f"attribute {name}: unsupported attribute value {kind!r}")


class Verdicts:
    """A bounded memo of (selector, device content) -> verdict (True, False, or the run-time error's text)."""

    def __init__(self, size: int = 100_000) -> None:
        self._size = size
        self._memo: OrderedDict[tuple[str, Any], bool | str] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def verdict(self, selector: Selector, device: DeviceInput) -> bool | str:
        key = (selector.expression, device.key)
        found = self._memo.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        try:
            verdict: bool | str = selector.matches(device)
        except errors.Invalid as e:
            verdict = e.message
        self._memo[key] = verdict
        if len(self._memo) > self._size:
            self._memo.popitem(last=False)
        return verdict


def all_match(selectors: Iterable[Selector], device: DeviceInput, verdicts: Verdicts | None = None) -> bool:
    """Do all `selectors` select `device`? A run-time error raises `errors.Invalid` (Kubernetes fails the pod)."""
    for selector in selectors:
        verdict = verdicts.verdict(selector, device) if verdicts is not None else selector.matches(device)
        if isinstance(verdict, str):
            raise errors.Invalid(verdict)
        if not verdict:
            return False
    return True


@dataclass
class Filter:
    """Select devices with a deadline on the whole filter (Kubernetes' DynamicResources filterTimeout, 10 s by
    default): past it the filter raises `errors.Unavailable` instead of running on. `now` is a monotonic clock."""

    timeout: float = 10.0
    now: Callable[[], float] = time.monotonic
    verdicts: Verdicts | None = None

    def select(self, selectors: Iterable[Selector], devices: Iterable[DeviceInput]) -> list[DeviceInput]:
        chosen = list(selectors)
        deadline = self.now() + self.timeout if self.timeout > 0 else math.inf
        out = []
        for device in devices:
            if self.now() > deadline:
                raise errors.Unavailable(f"device filter timed out after {self.timeout} s")
            if all_match(chosen, device, self.verdicts):
                out.append(device)
        return out
