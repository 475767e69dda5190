"""Kubernetes resource quantities (`500m`, `1.5Gi`, `1e3`), exact, with apimachinery's canonical form.

Why our own: the Python clients accept strings Kubernetes refuses (`1K`, `NaN`, `1_000`), lack suffixes (`n`, `u`)
or never canonicalise; devplace compares device memory and bandwidth by magnitude, so parsing must be exact and strict.

Invariants of every `Quantity`:
- The value is an integer number of nano-units (`_nanos`): exact, never a float. Parsing rounds a finer value *away
  from zero* to the next nano (`0.0000000001` -> `1n`), as apimachinery does ("if you ask for some, you get some").
- The magnitude is at most 2^63-1 units. apimachinery caps binary-suffixed input at parse and saturates its int64
  accessors; we saturate uniformly (parsing, `from_fraction` and arithmetic alike) so that every value has a canonical
  string that parses back to itself. Arithmetic is therefore exact inside the range and saturating at its edges.
- The *format* (decimal SI, binary SI, decimal exponent) comes from the input's suffix and only affects `str()`;
  equality, ordering and hashing use the value alone (`Quantity("1Ki") == Quantity("1024")`).

Grammar (case-sensitive, no whitespace, no underscores):
    quantity ::= [+-] number suffix
    number   ::= digits | digits "." | digits "." digits | "." digits
    suffix   ::= "" | n u m k M G T P E | Ki Mi Gi Ti Pi Ei | (e|E) [+-] digits
`1E` is an exa (10^18); `1E3` is an exponent (1000). Deliberate limits: at most 1000 significant digits.

Canonical form (apimachinery's `String()`): zero is `0`; a binary-format value that is an integer of magnitude >= 1024
prints with the largest binary suffix that keeps it an integer (`1.5Gi` -> `1536Mi`); everything else prints as an
integer mantissa with the largest decimal suffix (or `e<n>` for exponent input) whose exponent is a multiple of 3 and
keeps the mantissa an integer (`1.5` -> `1500m`, `100.035k` -> `100035`, `1.5e3` -> `1500`, `1E3` -> `1e3`).

Arithmetic follows apimachinery too: a sum keeps the format of its left operand unless that operand is zero.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

from devplace import errors

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import core_schema

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

MAX_UNITS = 2**63 - 1
"""The largest magnitude a quantity holds, in whole units (apimachinery's int64 cap)."""

_NANO = 10**9
_MAX_NANOS = MAX_UNITS * _NANO
_MAX_SIGNIFICANT_DIGITS = 1000

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_BY_EXPONENT: dict[int, str] = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_BINARY_BY_POWER: tuple[str, ...] = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")

_SHAPE = re.compile(r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?(?P<suffix>.*)", re.DOTALL)
_EXPONENT = re.compile(r"[eE](?P<sign>[+-]?)(?P<digits>[0-9]+)")
_SUFFIX_HELP = "binary Ki Mi Gi Ti Pi Ei, decimal n u m k M G T P E, or an exponent e<int>"


def _invalid(text: str, why: str) -> errors.Invalid:
    return errors.Invalid(f"invalid quantity {text!r}: {why}")


def _saturate(nanos: int) -> int:
    return max(-_MAX_NANOS, min(_MAX_NANOS, nanos))


def _nanos_away_from_zero(value: Fraction) -> int:
    """`value` units -> nano-units, rounding any remainder away from zero, saturated."""
    scaled = value * _NANO
    magnitude = -((-abs(scaled.numerator)) // scaled.denominator)  # ceil of |scaled|
    return _saturate(magnitude if scaled >= 0 else -magnitude)


def _divide_away_from_zero(nanos: int, step: int) -> int:
    magnitude = -(-abs(nanos) // step)
    return magnitude if nanos >= 0 else -magnitude


def _parse(text: str) -> tuple[int, Format]:
    if not isinstance(text, str):
        raise errors.Invalid(f"invalid quantity {text!r}: must be a string or an integer, not {type(text).__name__}")
    if text == "":
        raise _invalid(text, "empty string")
    if any(ch.isspace() for ch in text):
        raise _invalid(text, "whitespace is not allowed")
    shape = _SHAPE.fullmatch(text)
    assert shape is not None  # the pattern accepts every string; the checks below refuse
    int_part, frac, suffix = shape["int"], shape["frac"] or "", shape["suffix"]
    if not int_part and not frac:
        if suffix[:1] in ("+", "-") and suffix:
            raise _invalid(text, "a sign may appear only once, at the start")
        raise _invalid(text, "expected a number (digits, optionally with one decimal point) before the suffix")

    fmt: Format
    binary_power = 0
    if suffix in _DECIMAL_SUFFIXES:
        fmt, exponent = "DecimalSI", _DECIMAL_SUFFIXES[suffix]
    elif suffix in _BINARY_SUFFIXES:
        fmt, exponent, binary_power = "BinarySI", 0, _BINARY_SUFFIXES[suffix]
    elif match := _EXPONENT.fullmatch(suffix):
        fmt = "DecimalExponent"
        exp_digits = match["digits"].lstrip("0") or "0"
        # An exponent this long is beyond any representable value either way; the range checks below settle it.
        exponent = int(exp_digits) if len(exp_digits) <= 6 else 10**6
        if match["sign"] == "-":
            exponent = -exponent
    elif suffix[:1] in ("e", "E") and "." in suffix:
        raise _invalid(text, "an exponent must be an integer")
    elif suffix[:1] in ("+", "-"):
        raise _invalid(text, "a sign may appear only once, at the start")
    elif "." in suffix:
        raise _invalid(text, "more than one decimal point")
    elif "_" in suffix:
        raise _invalid(text, "digit separators ('_') are not allowed")
    else:
        raise _invalid(text, f"unknown suffix {suffix!r} (expected {_SUFFIX_HELP}; suffixes are case-sensitive)")

    # value = significant * 10^exponent * 1024^binary_power, with significant free of leading and trailing zeros.
    digits = (int_part + frac).lstrip("0")
    exponent -= len(frac)
    significant = digits.rstrip("0")
    exponent += len(digits) - len(significant)
    if not significant:
        return 0, fmt
    if len(significant) > _MAX_SIGNIFICANT_DIGITS:
        raise _invalid(text, f"more than {_MAX_SIGNIFICANT_DIGITS} significant digits")
    count = len(significant)
    if count - 1 + exponent >= 19:  # >= 10^19 > 2^63-1 (binary multipliers only make it larger)
        nanos = _MAX_NANOS
    elif count + exponent + 19 <= -9:  # < 10^-9 even after the largest binary multiplier (< 10^19)
        nanos = 1
    else:
        value = Fraction(int(significant) * 1024**binary_power) * Fraction(10) ** exponent
        nanos = _nanos_away_from_zero(value)
    return (-nanos if shape["sign"] == "-" else nanos), fmt


def _canonical(nanos: int, fmt: Format) -> str:
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    magnitude = abs(nanos)
    if fmt == "BinarySI" and magnitude >= 1024 * _NANO and magnitude % _NANO == 0:
        units, power = magnitude // _NANO, 0
        while units % 1024 == 0 and power < len(_BINARY_BY_POWER) - 1:
            units //= 1024
            power += 1
        return f"{sign}{units}{_BINARY_BY_POWER[power]}"
    mantissa, exponent = magnitude, -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if fmt == "DecimalExponent":
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"


class Quantity:
    """An exact Kubernetes quantity. Immutable; compares, hashes and orders by value."""

    __slots__ = ("_format", "_nanos")

    _nanos: int
    _format: Format

    def __init__(self, value: str | int | Quantity) -> None:
        if isinstance(value, Quantity):
            self._nanos, self._format = value._nanos, value._format
        elif isinstance(value, bool):
            raise errors.Invalid(f"invalid quantity {value!r}: must be a string or an integer, not bool")
        elif isinstance(value, int):
            self._nanos, self._format = _saturate(value * _NANO), "DecimalSI"
        else:
            self._nanos, self._format = _parse(value)

    @classmethod
    def parse(cls, text: str | int | Quantity) -> Quantity:
        """Same as the constructor; reads better at call sites that parse user input."""
        return cls(text)

    @classmethod
    def _make(cls, nanos: int, fmt: Format) -> Quantity:
        q = cls.__new__(cls)
        q._nanos, q._format = _saturate(nanos), fmt
        return q

    @classmethod
    def from_fraction(cls, value: Fraction | int, binary: bool = False) -> Quantity:
        """An exact value (rounded away from zero to a nano, saturated); `binary` prints whole values as Ki/Mi/..."""
        return cls._make(_nanos_away_from_zero(Fraction(value)), "BinarySI" if binary else "DecimalSI")

    @property
    def format(self) -> Format:
        return self._format

    def as_fraction(self) -> Fraction:
        return Fraction(self._nanos, _NANO)

    def value(self) -> int:
        """Whole units, rounded away from zero (apimachinery `Value()`): `Quantity("100m").value() == 1`."""
        return _divide_away_from_zero(self._nanos, _NANO)

    def milli_value(self) -> int:
        """Thousandths, rounded away from zero (apimachinery `MilliValue()`)."""
        return _divide_away_from_zero(self._nanos, _NANO // 1000)

    def __str__(self) -> str:
        return _canonical(self._nanos, self._format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __hash__(self) -> int:
        return hash(("Quantity", self._nanos))

    def __bool__(self) -> bool:
        return self._nanos != 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos == other._nanos

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos < other._nanos

    def __le__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos <= other._nanos

    def __gt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos > other._nanos

    def __ge__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._nanos >= other._nanos

    def _sum_format(self, other: Quantity) -> Format:
        return other._format if self._nanos == 0 else self._format

    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity._make(self._nanos + other._nanos, self._sum_format(other))

    def __sub__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity._make(self._nanos - other._nanos, self._sum_format(other))

    def __mul__(self, factor: int) -> Quantity:
        if not isinstance(factor, int) or isinstance(factor, bool):
            return NotImplemented
        return Quantity._make(self._nanos * factor, self._format)

    __rmul__ = __mul__

    def __neg__(self) -> Quantity:
        return Quantity._make(-self._nanos, self._format)

    def __pos__(self) -> Quantity:
        return self

    def __abs__(self) -> Quantity:
        return Quantity._make(abs(self._nanos), self._format)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Quantity._make, (self._nanos, self._format))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """As a pydantic field: accepts a Quantity, a string or an integer; serialises to the canonical string.
        (pydantic_core imported here: a process that parses quantities without models does not load it.)"""
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            cls._coerce,
            json_schema_input_schema=core_schema.union_schema([core_schema.str_schema(), core_schema.int_schema()]),
            serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="always"),
        )

    @classmethod
    def _coerce(cls, value: Any) -> Quantity:
        if isinstance(value, Quantity):
            return value
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return cls(value)
        raise ValueError(f"a quantity must be a string or an integer, not {type(value).__name__}")


def is_quantity(text: str) -> bool:
    """Does `text` parse as a Kubernetes quantity?"""
    try:
        _parse(text)
    except errors.Invalid:
        return False
    return True
