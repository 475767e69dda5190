"""Checking objects against a CustomResourceDefinition's structural schema, as a Kubernetes API server would under
strict field validation (`kubectl apply --validate=strict`, `fieldValidation=Strict`).

    crd = load_crd(FIXTURES / "akri-instance-crd.yaml")
    assert crd_problems(instance, crd) == []       # each problem names its field path and the reason

Covered: the served version (from `apiVersion`), `type` (object, string, integer, number, boolean, array), `required`,
`properties`, `additionalProperties` (a schema for map values), `items`, `minimum`, and unknown fields: a field a
schema does not declare, where it neither allows additional properties nor says
`x-kubernetes-preserve-unknown-fields`, is a problem (an API server prunes it silently, or refuses it when strict).
At the root, `apiVersion`, `kind` and `metadata` are always allowed, as for every custom resource. Enough for the CRDs
the tests read; not a general OpenAPI validator.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = ["FIXTURES", "crd_problems", "load_crd"]

FIXTURES = Path(__file__).parent / "fixtures"

_ROOT_FIELDS = ("apiVersion", "kind", "metadata")


def load_crd(path: Path) -> dict[str, Any]:
    crd = yaml.safe_load(path.read_text())
    if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
        raise ValueError(f"{path} is not a CustomResourceDefinition")
    return crd


def crd_problems(obj: Mapping[str, Any], crd: Mapping[str, Any]) -> list[str]:
    """Every way `obj` breaks the schema of the CRD version its apiVersion names (`path: reason`); [] if none."""
    spec = crd["spec"]
    group, _, version = str(obj.get("apiVersion", "")).partition("/")
    if group != spec["group"]:
        return [f"apiVersion: group {group!r} is not the CRD's {spec['group']!r}"]
    if obj.get("kind") != spec["names"]["kind"]:
        return [f"kind: {obj.get('kind')!r} is not the CRD's {spec['names']['kind']!r}"]
    for served in spec["versions"]:
        if served["name"] == version and served.get("served", True):
            schema = served["schema"]["openAPIV3Schema"]
            body = {k: v for k, v in obj.items() if k not in _ROOT_FIELDS}
            return list(_problems(body, schema, ""))
    return [f"apiVersion: version {version!r} is not served"]


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
}


def _problems(value: Any, schema: Mapping[str, Any], path: str) -> Any:
    where = path or "<root>"
    wanted = schema.get("type")
    if wanted is not None:
        ok = isinstance(value, _TYPES[wanted]) and not (wanted in ("integer", "number") and isinstance(value, bool))
        if not ok:
            yield f"{where}: must be of type {wanted}, not {type(value).__name__} {value!r}"
            return
    if "minimum" in schema and isinstance(value, int | float) and value < schema["minimum"]:
        yield f"{where}: must be at least {schema['minimum']}, not {value}"
    if isinstance(value, dict):
        declared: Mapping[str, Any] = schema.get("properties") or {}
        for field in schema.get("required") or ():
            if field not in value:
                yield f"{_join(path, field)}: required"
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in declared:
                yield from _problems(item, declared[key], _join(path, key))
            elif isinstance(extra, Mapping):
                yield from _problems(item, extra, _join(path, key))
            elif extra is not True and not schema.get("x-kubernetes-preserve-unknown-fields"):
                yield f"{_join(path, key)}: unknown field"
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            yield from _problems(item, schema["items"], f"{where}[{i}]")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
