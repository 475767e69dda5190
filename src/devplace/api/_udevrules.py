"""Akri's `udevRules` grammar: one rule string into the filters it is made of, or `errors.Invalid` saying why not.

Pure. The grammar is Akri's (`udev_rule_grammar.pest`), so a rule Akri's udev handler cannot parse is refused here
too, and at apply (a Configuration naming the `udev` handler with such a rule gets 422 naming
`spec.discoveryHandler.discoveryDetails` and the rule: `Configuration.admission_problems`), instead of reaching a
node where Akri's handler would panic and end its stream:

- a rule is filters `FIELD OP "VALUE"` joined by `,` and any number of spaces; no leading or trailing space, no tabs;
  the empty rule has no filters and matches every device;
- fields: `KERNEL`, `KERNELS`, `SUBSYSTEM`, `SUBSYSTEMS`, `DRIVER`, `DRIVERS`, `ATTR{key}`, `ATTRS{key}`, `ENV{key}`,
  `TAG`, `TAGS`, `DEVPATH`; udev's other keys (`ACTION`, `NAME`, `SYMLINK`, `PROGRAM`, `RUN{..}`, `IMPORT{..}`, ...)
  and unknown words are refused (discovery matches; it runs nothing);
- operators `==` and `!=`; udev's assignments (`=`, `+=`, `-=`, `:=`) are refused;
- a value is double-quoted, made of letters, digits, space and `$._*:?[]-|\\/%{}` (no escapes, no quote);
- the filters matched as regular expressions (`REGEX_MATCHED`: everything but what libudev's enumerator matches as
  globs) must compile: Akri compiles them at discovery and panics on one that does not (`*` alone, say).
`UdevFilter.matched_by` says which matcher Akri uses for a filter (`devplace.discovery._udevmatches` does the matching).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import yaml

from devplace import errors
from devplace.api._manifests import yaml_value

Op = Literal["==", "!="]
FIELDS = ("KERNEL", "KERNELS", "SUBSYSTEM", "SUBSYSTEMS", "DRIVER", "DRIVERS", "ATTR", "ATTRS", "ENV", "TAG", "TAGS")
KEYED = frozenset({"ATTR", "ATTRS", "ENV"})
"""Fields written `FIELD{key}`."""
GLOB_MATCHED: frozenset[tuple[str, str]] = frozenset(
    {
        ("KERNEL", "=="),
        ("SUBSYSTEM", "=="),
        ("ATTR", "=="),
        ("ENV", "=="),
        ("TAG", "=="),
        ("DEVPATH", "=="),
        ("SUBSYSTEM", "!="),
        ("ATTR", "!="),
    }
)
"""(field, op) pairs Akri hands to libudev's enumerator (match/nomatch); every other pair is a regular expression."""

UNSUPPORTED = frozenset(
    {
        "ACTION",
        "NAME",
        "SYMLINK",
        "OWNER",
        "GROUP",
        "MODE",
        "LABEL",
        "GOTO",
        "PROGRAM",
        "RESULT",
        "OPTIONS",
        "WAIT_FOR",
        "SYSCTL",
        "IMPORT",
        "RUN",
        "TEST",
        "CONST",
        "SECLABEL",
    }
)
"""udev keys Akri's grammar knows and refuses: assignments and actions, not device matches."""

_FIELD = re.compile(r"([A-Z_]+)(?:\{([^{}\"]*)\})?")
_KEY = re.compile(r"[A-Za-z0-9_.*?/:\[\]-]+")
_OP = re.compile(r"==|!=|\+=|-=|:=|=")
_VALUE_CHARS = re.compile(r"[A-Za-z0-9 $._*:?\[\]|\\/%{}-]*")
_SEPARATOR = re.compile(r", *")


@dataclass(frozen=True)
class UdevFilter:
    """One `FIELD{key} OP "value"` of a rule (`key` is "" for fields without one)."""

    field: str
    key: str
    op: Op
    value: str

    @property
    def matched_by(self) -> Literal["glob", "regex"]:
        """How Akri matches this filter: a libudev enumerator glob, or a whole-value regular expression."""
        return "glob" if (self.field, self.op) in GLOB_MATCHED else "regex"

    def __str__(self) -> str:
        field = f"{self.field}{{{self.key}}}" if self.field in KEYED else self.field
        return f'{field}{self.op}"{self.value}"'


def parse_udev_rule(rule: str) -> tuple[UdevFilter, ...]:
    """The filters of `rule`, in order; `errors.Invalid` (no field path: the caller knows where the rule is) with the
    position and the reason for a rule Akri's grammar refuses (module docstring)."""
    filters: list[UdevFilter] = []
    at = 0
    while at < len(rule):
        if filters:
            sep = _SEPARATOR.match(rule, at)
            if sep is None:
                raise _refuse(rule, at, 'expected "," between filters')
            at = sep.end()
        parsed, at = _filter(rule, at)
        filters.append(parsed)
    return tuple(filters)


def _filter(rule: str, at: int) -> tuple[UdevFilter, int]:
    field_match = _FIELD.match(rule, at)
    if field_match is None or not field_match.group(1):
        raise _refuse(rule, at, "expected a field such as KERNEL, SUBSYSTEM, ATTRS{key}")
    field, key = field_match.group(1), field_match.group(2)
    if field in UNSUPPORTED:
        raise _refuse(rule, at, f"unsupported field {field} (discovery matches devices; it assigns and runs nothing)")
    if field not in FIELDS and field != "DEVPATH":
        raise _refuse(rule, at, f"unknown field {field!r}")
    if field in KEYED:
        if key is None or not _KEY.fullmatch(key):
            raise _refuse(rule, at, f"{field} needs a key: {field}{{name}}")
    elif key is not None:
        raise _refuse(rule, at, f"{field} takes no {{key}}")
    at = field_match.end()
    op_match = _OP.match(rule, at)
    if op_match is None:
        raise _refuse(rule, at, "expected == or !=")
    op = op_match.group(0)
    if op not in ("==", "!="):
        raise _refuse(rule, at, f"unsupported action operation {op!r} (only == and != match devices)")
    at = op_match.end()
    if rule[at : at + 1] != '"':
        raise _refuse(rule, at, "expected a double-quoted value")
    value_match = _VALUE_CHARS.match(rule, at + 1)
    assert value_match is not None  # `*` matches the empty string
    end = value_match.end()
    if rule[end : end + 1] != '"':
        bad = rule[end : end + 1]
        what = "the closing quote is missing" if not bad else f"{bad!r} is not allowed in a value"
        raise _refuse(rule, end, what)
    made = UdevFilter(field, key or "", "==" if op == "==" else "!=", value_match.group(0))
    if made.matched_by == "regex":
        try:
            re.compile(made.value)
        except re.error as e:
            raise _refuse(
                rule, at + 1, f"{made} is matched as a regular expression, which does not compile: {e}"
            ) from e
    return made, end + 1


def _refuse(rule: str, at: int, reason: str) -> errors.Invalid:
    return errors.Invalid(f"udev rule {rule!r} at character {at + 1}: {reason}")


DETAILS_PATH = "spec.discoveryHandler.discoveryDetails"


def udev_details_problems(details: str) -> Iterator[errors.FieldError]:
    """Each rule of a `udev` Configuration's discoveryDetails that Akri's grammar refuses, as a problem at
    `DETAILS_PATH` naming the rule. Only the rules: details that are not YAML, or not a mapping with a list of strings
    under `udevRules`, are the handler's to refuse on the node (a condition on the Configuration), as Akri's are."""
    try:
        value = yaml_value(details) if details.strip() else None
    except (errors.Invalid, yaml.YAMLError):
        return
    rules = value.get("udevRules") if isinstance(value, Mapping) else None
    if not isinstance(rules, list):
        return
    for i, rule in enumerate(rules):
        if not isinstance(rule, str):
            continue
        try:
            parse_udev_rule(rule)
        except errors.Invalid as e:
            yield errors.FieldError(DETAILS_PATH, f"udevRules[{i}]: {e.message}")
