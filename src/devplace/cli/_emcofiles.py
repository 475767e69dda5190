"""emcoctl's resource files, read for `devplace fleet apply|delete -f FILE [-v values.yaml]`. Pure (text in, data out).

An emcoctl file is a multi-document YAML stream; each document is one request:

    version: emco/v2
    resourceContext:
      anchor: projects/proj1/composite-apps      # the /v2 collection (or a lifecycle verb: .../approve)
    metadata: {name: capp1, description: ...}    # the body's metadata
    spec: {compositeAppVersion: v1}              # the body's spec
    clusterLabel: edge                           # a cluster label body (21.x files spell it label-name)
    file: /path/to/kubeconfig-or-chart.tgz       # sent as the multipart file part

Before parsing, `{{ .Key }}` placeholders are replaced from the values file (`-v`), as emcoctl's Go templates do:
`{{ .ProjectName }}`, `{{ $.ProjectName }}`, `{{ .Values.ProjectName }}`, and dotted paths into nested values. Other
template actions (`range`, `if`, functions) are refused naming the line: devplace has no Go template engine.

`request_plan` turns a document into the HTTP requests `apply` makes (create, and the replace it falls back to when
the object exists) and `removal` into the one `delete` makes (reverse order; an `instantiate` document becomes
`terminate`, `approve` and `status` documents are skipped), mirroring emcoctl.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import yaml

from devplace import errors
from devplace.api import parse_positioned, yaml_value

LIFECYCLE_VERBS = frozenset({"approve", "instantiate", "terminate", "plan", "status", "stop", "update", "rollback"})
_ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.DOTALL)
_REFERENCE = re.compile(r"^\$?\.((?:Values\.)?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)$")


def _lookup(values: Mapping[str, Any], path: str, line: int) -> str:
    node: Any = values
    parts = path.split(".")
    if parts[0] == "Values" and "Values" not in values:
        parts = parts[1:]
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            raise errors.Invalid(f"line {line}: {{{{ .{path} }}}} has no value in the values file")
        node = node[part]
    if isinstance(node, Mapping | list):
        raise errors.Invalid(f"line {line}: {{{{ .{path} }}}} is not a single value")
    if isinstance(node, bool):
        return "true" if node else "false"
    return "" if node is None else str(node)


def render(text: str, values: Mapping[str, Any]) -> str:
    """The file with every `{{ .Key }}` replaced from `values`; `Invalid` naming the line for anything else."""

    def substitute(match: re.Match[str]) -> str:
        line = text.count("\n", 0, match.start()) + 1
        action = match.group(1)
        ref = _REFERENCE.match(action)
        if ref is None:
            raise errors.Invalid(
                f"line {line}: {{{{ {action} }}}} is a Go template action devplace does not run "
                "(only {{ .Key }} substitutions from the values file)"
            )
        return _lookup(values, ref.group(1), line)

    return _ACTION.sub(substitute, text)


def load_values(text: str) -> dict[str, Any]:
    try:
        values = yaml_value(text)
    except errors.Invalid as e:
        raise errors.Invalid(f"the values file: {e.message}") from e
    except yaml.YAMLError as e:
        raise errors.Invalid(f"the values file is not YAML: {e}") from e
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise errors.Invalid("the values file must be a mapping of keys to values")
    return values


@dataclass(frozen=True)
class Document:
    """One emcoctl document: where it stands in the file, its anchor, the JSON body, and the file part's path."""

    position: int
    anchor: str
    body: dict[str, Any]
    file: str | None = None

    @property
    def verb(self) -> str | None:
        """`approve`, `instantiate`, ... when the anchor is a lifecycle call, else None."""
        last = self.anchor.rsplit("/", 1)[-1]
        return last if last in LIFECYCLE_VERBS else None

    @property
    def is_label(self) -> bool:
        return self.anchor.endswith("/labels")

    def __str__(self) -> str:
        name = (self.body.get("metadata") or {}).get("name") or self.label or ""
        return f"document {self.position} ({self.anchor}{'/' + name if name else ''})"

    @property
    def label(self) -> str | None:
        value = self.body.get("clusterLabel", self.body.get("label-name"))
        return None if value is None else str(value)

    def item(self) -> str | None:
        """The object's own anchor (`anchor/name`, a composite app's `/name/version`, a label's `/label`)."""
        if self.is_label:
            return None if self.label is None else f"{self.anchor}/{quote(self.label, safe='/=')}"
        name = (self.body.get("metadata") or {}).get("name")
        if not name:
            return None
        out = f"{self.anchor}/{quote(str(name), safe='')}"
        if self.anchor.rsplit("/", 1)[-1] == "composite-apps":
            spec = self.body.get("spec") or {}
            version = spec.get("compositeAppVersion", spec.get("version"))
            if version is None:
                return None
            out += f"/{quote(str(version), safe='')}"
        return out


def documents(text: str) -> list[Document]:
    """The documents of a (rendered) emcoctl file, in order; `Invalid` naming the document for a malformed one."""
    out = []
    for position, doc in parse_positioned(text):
        where = f"document {position}"
        if not isinstance(doc, dict):
            raise errors.Invalid(f"{where}: must be a mapping, not {type(doc).__name__}")
        context = doc.get("resourceContext")
        anchor = context.get("anchor") if isinstance(context, dict) else None
        if not isinstance(anchor, str) or not anchor.strip("/"):
            raise errors.Invalid(f"{where}: resourceContext.anchor is required")
        version = doc.get("version")
        if version is not None and version != "emco/v2":
            raise errors.Invalid(f"{where}: version {version!r} is not emco/v2")
        body = {k: v for k, v in doc.items() if k in ("metadata", "spec", "clusterLabel", "label-name")}
        file = doc.get("file")
        if file is not None and not isinstance(file, str):
            raise errors.Invalid(f"{where}: file must be a path")
        out.append(Document(position, anchor.strip("/"), body, file))
    return out


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: dict[str, Any]
    file: str | None = None


def request_plan(doc: Document) -> tuple[Request, Request | None]:
    """What `apply` sends for a document: the request, and the replace to send instead when the object exists."""
    base = f"/v2/{doc.anchor}"
    if doc.verb is not None:
        return Request("POST", base, {}), None
    create = Request("POST", base, doc.body, doc.file)
    item = doc.item()
    return create, (Request("PUT", f"/v2/{item}", doc.body, doc.file) if item else None)


def removal(doc: Document) -> Request | None:
    """What `delete` sends for a document (None: nothing to undo)."""
    if doc.verb == "instantiate":
        return Request("POST", f"/v2/{doc.anchor.rsplit('/', 1)[0]}/terminate", {})
    if doc.verb is not None:
        return None
    item = doc.item()
    return None if item is None else Request("DELETE", f"/v2/{item}", {})
