"""Helm's values: `--set` key paths and the merge of a values file over a chart's defaults, for `devplace render`.

`--set` follows Helm's grammar (helm.sh/helm/v3/pkg/strvals) for the common cases:

- `a.b.c=value` sets a nested key, creating the maps on the way; several pairs may be joined by commas
  (`a=1,b=2`); `\\,`, `\\.`, `\\=` and `\\\\` escape those characters in a key or a value;
- `a[0]=x`, `a[1].b=y`: list elements by index (a list grows, padded with nulls, as Helm's does; at most
  `MAX_INDEX`); `a={x,y}` sets a whole list of strings;
- values are typed as Helm types them: `true`/`false` (any case) are booleans, `null` is null (which removes the key
  when merged over the defaults), a decimal integer that does not start with 0 is an integer, anything else a string
  (`--set-string` keeps every value a string).

A malformed pair is `Invalid` naming `--set`, the pair and the reason; nothing is changed then. A path through a
value of another shape replaces it (`a=1,a.b=2` gives `a: {b: 2}`), as Helm's does. `merge(defaults, values)` is
Helm's coalescing: maps merge key by key, anything else replaces, and null deletes the key.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from devplace import errors

MAX_INDEX = 65536
"""The largest list index `--set` accepts (Helm's limit)."""


def typed(value: str) -> Any:
    """A `--set` value as Helm types it (module docstring)."""
    if value.lower() == "true":
        return True
    if value.lower() == "false":
        return False
    if value.lower() == "null":
        return None
    if value == "0":
        return 0
    if value and value[0] != "0":
        digits = value[1:] if value[0] in "+-" else value
        if digits.isdigit() and digits.isascii() and -(2**63) <= int(value) < 2**63:
            return int(value)
    return value


def _split(text: str, separator: str) -> list[str]:
    """`text` split at unescaped `separator`s (escapes kept, for the next split); a `{...}` list is not split."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}" and depth:
            depth -= 1
        if char == separator and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


Step = str | int  # a map key or a list index


def parse_path(path: str, pair: str = "") -> list[Step]:
    """`a.b[0].c` as steps: ["a", "b", 0, "c"]; `Invalid` naming `--set` for an empty key or a bad index."""
    pair = pair or path

    def bad(reason: str) -> errors.Invalid:
        return errors.Invalid.field("--set", f"{pair!r}: {reason}")

    steps: list[Step] = []
    for segment in _split(path, "."):
        name, bracket, rest = segment.partition("[")
        key = _unescape(name)
        if not key and not (bracket and steps):
            raise bad("an index needs a key before it" if bracket else "a key is empty")
        if key:
            steps.append(key)
        while bracket:
            index, closing, rest = rest.partition("]")
            if not closing:
                raise bad(f"{segment!r} has an unclosed [")
            if not index.isdigit() or not index.isascii():
                raise bad(f"list index {index!r} is not a non-negative integer")
            if int(index) > MAX_INDEX:
                raise bad(f"list index {index} is over the limit of {MAX_INDEX}")
            steps.append(int(index))
            if rest and not rest.startswith("["):
                raise bad(f"{segment!r}: expected [ or . after ]")
            bracket, rest = (rest[:1], rest[1:]) if rest else ("", "")
    return steps


def _value(text: str, as_string: bool) -> Any:
    if text.startswith("{") and text.endswith("}"):
        inner = text[1:-1]
        return [] if not inner else [_unescape(item) for item in _split(inner, ",")]
    raw = _unescape(text)
    return raw if as_string else typed(raw)


def set_value(values: dict[str, Any], steps: list[Step], value: Any) -> None:
    """Put `value` at `steps` inside `values`, creating maps and growing lists; a value of the other shape on the way
    is replaced, as Helm's strvals replaces it (`a=1,a.b=2` gives `a: {b: 2}`)."""
    node: Any = values
    for i, step in enumerate(steps):
        if i == len(steps) - 1:
            if isinstance(step, int):
                node.extend([None] * (step + 1 - len(node)))
            node[step] = value
            return
        want = list if isinstance(steps[i + 1], int) else dict
        if isinstance(step, int):
            node.extend([None] * (step + 1 - len(node)))
            if not isinstance(node[step], want):
                node[step] = want()
        elif not isinstance(node.get(step), want):
            node[step] = want()
        node = node[step]


def apply_sets(values: dict[str, Any], sets: list[str], *, as_string: bool = False) -> dict[str, Any]:
    """`values` (not changed) with every `--set` in `sets` applied in order; `Invalid` before any change."""
    out = copy.deepcopy(values)
    for argument in sets:
        for pair in _split(argument, ","):
            path, equals, value = pair.partition("=")
            if not equals:
                # Helm takes `a` alone as "key has no value"
                raise errors.Invalid.field("--set", f"{pair!r}: expected KEY=VALUE")
            set_value(out, parse_path(path, pair), _value(value, as_string))
    return out


def merge(defaults: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's coalescing of user `values` over chart `defaults` (module docstring); neither is changed."""
    out = copy.deepcopy(dict(defaults))
    for key, value in values.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def lookup(values: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path (None where any step is missing), as a template reads `.Values.a.b`."""
    node: Any = values
    for step in parse_path(path):
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, Mapping) else None
    return node
