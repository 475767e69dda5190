"""Parsing a Configuration's `discoveryDetails`: a YAML string whose shape each handler defines.

Pure functions. Every failure is an `errors.Invalid` whose field path starts at `discoveryDetails`, so the agent can
copy it onto the Configuration's condition unchanged. Unknown keys are refused (a misspelt key would otherwise be
silently ignored and discover the wrong devices).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from devplace import errors
from devplace.api import yaml_value

ROOT = "discoveryDetails"


def load_mapping(text: str) -> dict[str, Any]:
    """The details as a mapping; empty or blank text (and YAML null) is an empty mapping."""
    try:
        value = yaml_value(text) if text.strip() else None
    except errors.Invalid as e:
        raise errors.Invalid.field(ROOT, e.message) from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or "syntax error"
        raise errors.Invalid.field(ROOT, f"not valid YAML{where}: {problem}") from e
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise errors.Invalid.field(ROOT, f"must be a YAML mapping, got {_kind(value)}")
    for key in value:
        if not isinstance(key, str):
            raise errors.Invalid.field(ROOT, f"keys must be strings, got {_kind(key)} {key!r}")
    return dict(value)


def refuse_unknown(details: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(details) - set(allowed))
    if unknown:
        raise errors.Invalid.field(f"{ROOT}.{unknown[0]}", f"unknown key (allowed: {', '.join(allowed)})")


def optional_bool(details: Mapping[str, Any], key: str, default: bool) -> bool:
    value = details.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise errors.Invalid.field(f"{ROOT}.{key}", f"must be true or false, got {_kind(value)} {value!r}")
    return value


def optional_str(details: Mapping[str, Any], key: str) -> str | None:
    value = details.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise errors.Invalid.field(f"{ROOT}.{key}", f"must be a string (quote it), got {_kind(value)} {value!r}")
    return value


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return f"a {type(value).__name__}"
