"""Revisions (resourceVersions) as the outside world writes them: one strict parser for every boundary.

A revision is a store's global write counter (DESIGN.md section 3), written as a decimal string in
`metadata.resourceVersion`. Kubernetes calls resourceVersions opaque, but ours are integers and clients echo back
what the store wrote, so the one accepted text is the one the store writes: ASCII digits, no sign, no spaces, no
underscores, no other script's digits, no leading zeros ("0" itself is fine). Python's `int()` would read `" 1"`,
`"+1"`, `"1_0"` (as 10) and `"١"` (Arabic-Indic one); a loose reading lets two texts name one revision, so a
precondition compared as text and one compared as a number could disagree. The value is at most 2**63-1 (etcd's
and SQLite's signed 64-bit integers), so no backend overflows on a hostile value.

Python callers of the store may pass an `int` (never a `bool`): the same range applies.

Every refusal is `errors.Invalid` naming the field it came from (`metadata.resourceVersion`, `resourceVersion`,
`preconditions.resourceVersion`, `revision`), which the resource API answers with 422, whether the bad value came in
a body or in the query string: one rule, one status. Missing values are the caller's business (an update needs one,
a watch without one starts now), so an empty string is refused here.
"""

from __future__ import annotations

from devplace import errors

MAX_REVISION = 2**63 - 1
_MAX_DIGITS = len(str(MAX_REVISION))


def parse_revision(field: str, raw: object) -> int:
    """The revision `raw` stands for, or `Invalid` naming `field` and the reason."""
    # The common case first: fewer digits than MAX_REVISION has (so within range), no leading zero.
    if type(raw) is str and 0 < len(raw) < _MAX_DIGITS and raw.isdigit() and raw.isascii() and raw[0] != "0":
        return int(raw)
    if isinstance(raw, bool):
        raise errors.Invalid.field(field, f"{raw!r} is not a revision (a non-negative integer)")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str):
        if not raw:
            raise errors.Invalid.field(field, "must not be empty")
        if not (raw.isascii() and raw.isdigit()):
            raise errors.Invalid.field(field, f"{_shown(raw)} is not a revision (a non-negative integer in digits 0-9)")
        if len(raw) > 1 and raw[0] == "0":
            raise errors.Invalid.field(field, f"{_shown(raw)} is not a revision (no leading zeros)")
        if len(raw) > _MAX_DIGITS:  # before int(): Python refuses to read more than 4300 digits
            raise errors.Invalid.field(field, f"{_shown(raw)} is too large (at most {MAX_REVISION})")
        value = int(raw)
    else:
        raise errors.Invalid.field(field, f"must be a string of digits, not {type(raw).__name__}")
    if value < 0:
        raise errors.Invalid.field(field, f"{_number(value)} is not a revision (a non-negative integer)")
    if value > MAX_REVISION:
        raise errors.Invalid.field(field, f"{_number(value)} is too large (at most {MAX_REVISION})")
    return value


def _number(value: int) -> str:
    """`value` for a message; an enormous one by its size (str() refuses ints of more than 4300 digits)."""
    return str(value) if value.bit_length() <= 128 else f"a {value.bit_length()}-bit integer"


def _shown(raw: str) -> str:
    """`raw` quoted for a message, cut short: a hostile value may be megabytes long."""
    return repr(raw) if len(raw) <= 40 else f"{raw[:40]!r}... ({len(raw)} characters)"
