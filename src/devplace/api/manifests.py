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

__all__ = ["Document", "load_documents", "parse_documents", "parse_positioned"]


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
