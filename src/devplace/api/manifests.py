"""Reading manifests: YAML or JSON text, one or many documents, into validated wire dicts.

Each document is validated on its own and reported on its own (`document 2 (Instance default/x): spec.capacity: ...`),
so a multi-document apply can be all-or-nothing per document with a clear per-document report.

The boundary check every write passes (the API server, the CLI, the simulation): `json_tree` makes a decoded
document what JSON could have carried (YAML timestamps become strings, non-string keys become strings; binary, sets,
NaN and infinities are refused naming the field path), and `validated` requires `registry.normalize` to accept it and
then keeps the object as written, with only its namespace resolved (defaulted for namespaced kinds, dropped for
cluster-scoped ones). Storing the model's re-serialisation instead would add every default and drop empty maps, so
a store would not hand back what was put in; readers apply defaults when they parse objects into models.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from devplace import errors
from devplace.api import registry

__all__ = ["Document", "json_tree", "load_documents", "parse_documents", "parse_positioned", "validated"]


@dataclass(frozen=True)
class Document:
    """One document of a manifest stream: its 1-based index, and either a validated object or the error."""

    index: int
    obj: dict[str, Any] | None
    error: errors.DevplaceError | None

    @property
    def label(self) -> str:
        if self.obj is None:
            return f"document {self.index}"
        meta = self.obj["metadata"]
        ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
        return f"{self.obj['kind']} {ns}{meta['name']}"


def parse_documents(text: str) -> list[Any]:
    """YAML (a superset of JSON) into raw documents; empty documents are skipped; a `List` is flattened."""
    return [doc for _, doc in parse_positioned(text)]


def parse_positioned(text: str) -> list[tuple[int, Any]]:
    """YAML (a superset of JSON) into (position, document) pairs.

    Positions count every document of the stream from 1, so a report names the document where it stands in the
    file even when empty documents (a stray `---`) are skipped; the items of a `List` share its position.
    """
    try:
        raw = list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        raise errors.Invalid(f"malformed YAML{_where(e)}: {getattr(e, 'problem', None) or e}") from e
    out: list[tuple[int, Any]] = []
    for position, doc in enumerate(raw, start=1):
        if doc is None:
            continue
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            out.extend((position, item) for item in doc["items"])
        else:
            out.append((position, doc))
    return out


def _where(e: yaml.YAMLError) -> str:
    """Name the line of the broken construct (context) and where the parser gave up (problem)."""
    problem = getattr(e, "problem_mark", None)
    context = getattr(e, "context_mark", None)
    where = f" at line {problem.line + 1}, column {problem.column + 1}" if problem is not None else ""
    if context is not None and (problem is None or context.line != problem.line):
        where += f" ({getattr(e, 'context', None) or 'started'} at line {context.line + 1})"
    return where


def load_documents(text: str) -> list[Document]:
    """Validate every document; a malformed stream raises `Invalid`, a bad document is reported in its `Document`."""
    docs = []
    for i, raw in parse_positioned(text):
        try:
            docs.append(Document(i, registry.normalize(raw), None))
        except errors.DevplaceError as e:
            docs.append(Document(i, None, e))
    return docs


def json_tree(value: Any, path: str = "") -> Any:
    """`value` as JSON could carry it (module docstring); refuses what JSON cannot hold with `Invalid` at its path."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise errors.Invalid.field(path, f"{value} is not a finite number")
        return value
    if isinstance(value, dt.date):  # YAML timestamps: JSON would have carried the text
        return value.isoformat()
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            skey = _key_text(key, path)
            if skey in out:
                raise errors.Invalid.field(path, f"duplicate key {skey!r} (keys are compared as JSON text)")
            out[skey] = json_tree(item, f"{path}.{skey}" if path else skey)
        return out
    if isinstance(value, list | tuple):
        return [json_tree(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise errors.Invalid.field(path, f"a {type(value).__name__} value cannot be stored (JSON types only)")


def _key_text(key: Any, path: str) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float | dt.date):
        return str(json_tree(key, path))
    raise errors.Invalid.field(path, f"a {type(key).__name__} cannot be a key (JSON keys are strings)")


def validated(obj: Any) -> dict[str, Any]:
    """`obj` as written once `registry.normalize` accepts it, with the namespace resolved (module docstring)."""
    wire = registry.normalize(obj)
    assert isinstance(obj, dict)
    meta = dict(obj["metadata"])
    namespace = wire["metadata"].get("namespace")
    if namespace:
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    return {**obj, "metadata": meta}
