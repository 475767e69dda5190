"""Reading manifests: YAML or JSON text, one or many documents, into validated wire dicts.

Each document is validated on its own and reported on its own (`document 2 (Instance default/x): spec.capacity: ...`),
so a multi-document apply can be all-or-nothing per document with a clear per-document report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from devplace import errors
from devplace.api import registry

__all__ = ["Document", "load_documents", "parse_documents"]


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
    try:
        raw = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise errors.Invalid(f"malformed YAML{where}: {problem}") from e
    out: list[Any] = []
    for doc in raw:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            out.extend(doc["items"])
        else:
            out.append(doc)
    return out


def load_documents(text: str) -> list[Document]:
    """Validate every document; a malformed stream raises `Invalid`, a bad document is reported in its `Document`."""
    docs = []
    for i, raw in enumerate(parse_documents(text), start=1):
        try:
            docs.append(Document(i, registry.normalize(raw), None))
        except errors.DevplaceError as e:
            docs.append(Document(i, None, e))
    return docs
