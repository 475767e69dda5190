"""Reading manifests: YAML or JSON text, one or many documents, into validated wire dicts.

Each document is validated on its own and reported on its own (`document 2 (Instance default/x): spec.capacity: ...`),
so a multi-document apply can be all-or-nothing per document with a clear per-document report.

The boundary check every write passes (the API server, the CLI, the simulation): `json_tree` makes a decoded
document what JSON could have carried (YAML timestamps become strings, non-string keys become strings; binary, sets,
NaN, infinities and text with a lone surrogate, which JSON's `\\ud800` escapes can spell, are refused naming the field
path), and `validated` requires `registry.normalize` to accept it and then keeps the object as written, with only its
namespace resolved (defaulted for namespaced kinds, dropped for cluster-scoped ones), server-owned metadata dropped
(`api.meta.SERVER_OWNED_METADATA`, all but `resourceVersion`, an update's compare-and-swap precondition) and an
integer sent as a float with no fraction (`1e2`) written as the integer (`registry.conformed`, as kube-apiserver
stores a custom resource, so every reader sees one value). Storing the
model's re-serialisation instead would add every default and drop empty maps, so a store would not hand back what was
put in; readers apply defaults when they parse objects into models.

Hostile input (the API server takes bodies from anyone; the CLI takes files from anywhere) is refused before anything
walks the tree, as `errors.Malformed` naming where:

- Nesting: maps and lists nest at most `MAX_DEPTH` levels. Every walk of a tree (`json_tree`, pydantic, the stores'
  JSON encoders, watch lines, the CLI's printers) recurses, and Python's recursion limit is 1000 frames; 100 levels
  is far below what any of them can take and far above what a Kubernetes object needs.
- YAML aliases: an alias repeats the node it names, so a few hundred bytes of nested aliases can stand for gigabytes
  (a "billion laughs" body). The YAML reader counts, while it reads, how much the aliases would add to the document
  (as JSON text) and refuses past `MAX_ALIAS_EXPANSION`, before anything is expanded; an alias to a node that
  contains it is refused too (JSON cannot carry a cycle).
- Duplicate keys: a map that names a key twice is refused naming the key and the map's path (JSON and YAML readers
  would silently keep the last one: `{"metadata": {"name": "a"}, "metadata": {"name": "b"}}` would create `b`).

YAML is read by libyaml's event parser (C, no recursion) when PyYAML has it, and composed into PyYAML nodes here,
with the rules above applied as each event arrives; PyYAML's safe constructor then builds the values.

The refusals do not depend on which libyaml PyYAML carries. libyaml 0.2.6 (PyYAML 6.0.4's wheels) refuses flow and
block nesting past its own limit (1000 levels) with `exceeded maximum nesting depth`, and it scans ahead (up to 1024
characters, for a possible simple key), so for `[[[[...` it gives up before the composer has seen level `MAX_DEPTH`
+ 1; libyaml 0.2.5 has no such limit. When libyaml gives up for nesting, the text is read again by libyaml, cut where
it gave up: every level of the cut text is below libyaml's limit and, each of libyaml's levels being at least one of
ours, the cut text still nests deeper than `MAX_DEPTH` at the same place, so the composer refuses it naming the same
depth and path as without the limit (the events before the cut are those of the whole text). Should the cut text
not be refused (a libyaml whose limit is at or below `MAX_DEPTH`), PyYAML's own parser (Python, no recursion, no
limit of its own) reads the whole text instead. That reader alone would do in both cases, but its simple-key
lookahead is quadratic in flow nesting: 230 ms for a 4 kB `[[[[...` that libyaml, cut and read again, refuses in 2.5 ms.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import re
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from devplace import errors
from devplace.api import _registry as registry
from devplace.api._registry import SERVER_OWNED_METADATA

MAX_DEPTH = 100
"""How deeply maps and lists may nest in a document (the top-level object is level 1); see the module docstring."""

MAX_ALIAS_EXPANSION = 1 << 20
"""How much YAML aliases may add to a stream, counted as the JSON text of what they repeat (1 MiB)."""

_YAML_EVENTS: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML was built with it
_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
_DROPPED_AT_THE_BOUNDARY = frozenset(SERVER_OWNED_METADATA) - {"resourceVersion"}


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
        raw = list(yaml_documents(text))
    except yaml.YAMLError as e:
        raise errors.Invalid(f"malformed YAML{yaml_where(e)}: {getattr(e, 'problem', None) or e}") from e
    out: list[tuple[int, Any]] = []
    for position, doc in enumerate(raw, start=1):
        if doc is None:
            continue
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            out.extend((position, item) for item in doc["items"])
        else:
            out.append((position, doc))
    return out


def yaml_where(e: yaml.YAMLError) -> str:
    """Name the line of the broken construct (context) and where the parser gave up (problem)."""
    problem = getattr(e, "problem_mark", None)
    context = getattr(e, "context_mark", None)
    where = f" at line {problem.line + 1}, column {problem.column + 1}" if problem is not None else ""
    if context is not None and (problem is None or context.line != problem.line):
        where += f" ({getattr(e, 'context', None) or 'started'} at line {context.line + 1})"
    return where


def yaml_value(text: str) -> Any:
    """The first document of a YAML text (None when it has none), read under the same rules as `yaml_documents`.

    For configuration-like inputs (kubeconfigs, discovery details, values files) that must not be expanded or
    nested without bound either; raises like `yaml_documents`."""
    documents = yaml_documents(text)
    try:
        return next(documents, None)
    finally:
        documents.close()


def yaml_documents(text: str) -> Generator[Any, None, None]:
    """The values of a YAML stream's documents, read under the hostile-input rules of the module docstring.

    Raises `errors.Malformed` for a broken rule (nesting, aliases, duplicate keys) and `yaml.YAMLError` for text
    that is not YAML (callers word that one: they know what the text was).
    """
    read = 0
    with contextlib.closing(_documents(text, _YAML_EVENTS)) as documents:
        try:
            for value in documents:
                read += 1
                yield value
            return
        except yaml.MarkedYAMLError as e:
            if "maximum nesting depth" not in (e.problem or ""):  # libyaml's words; PyYAML's own reader has no limit
                raise
            cut = e.problem_mark.index if e.problem_mark is not None else len(text)
    # libyaml gave up on nesting past its own limit (module docstring): read the document again up to where it did
    with contextlib.closing(_documents(text[:cut], _YAML_EVENTS, skip=read)) as documents:
        try:
            next(documents, None)  # refuses at MAX_DEPTH + 1, before the cut ...
        except yaml.YAMLError:
            pass
    yield from _documents(text, yaml.SafeLoader, skip=read)  # ... unless this libyaml's limit is at or below ours


def _documents(text: str, events: Any, skip: int = 0) -> Generator[Any, None, None]:
    """The documents of `text` read with the event parser `events` (a PyYAML loader class), after the first `skip`
    (composed, so that the rules see the stream as it is, but not constructed)."""
    loader = events(text)
    try:
        composer = _Composer(loader)
        while True:
            event = loader.get_event()
            if isinstance(event, StreamEndEvent):
                return
            if isinstance(event, DocumentStartEvent):
                root = composer.document()
                if skip:
                    skip -= 1
                    continue
                try:
                    yield loader.construct_document(root)
                except (ValueError, OverflowError, TypeError) as e:  # e.g. a date 2026-13-45, a 5000-digit integer
                    raise yaml.constructor.ConstructorError(None, None, str(e), root.start_mark) from e
    finally:
        loader.dispose()


@dataclass
class _Open:
    """A map or list being composed: what has been read of it so far."""

    node: SequenceNode | MappingNode
    key: Node | None = None  # a map's key whose value comes next
    height: int = 1  # levels of maps and lists, this one included
    size: int = 2  # its JSON text, roughly: brackets, plus each member's


class _Composer:
    """PyYAML's composer (events -> nodes), iterative, with the nesting, alias and duplicate-key rules applied."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader
        self._expanded = 0  # JSON text the stream's aliases add so far

    def document(self) -> Node:
        loader = self._loader
        anchors: dict[str, Node] = {}
        anchored: set[int] = set()  # id() of the maps and lists that carry an anchor
        measured: dict[int, tuple[int, int]] = {}  # id(anchored node) -> (height, size), once it is complete
        stack: list[_Open] = []
        while True:
            event = loader.get_event()
            height, size = 0, 0
            if isinstance(event, ScalarEvent):
                tag = event.tag
                if tag is None or tag == "!":
                    tag = loader.resolve(ScalarNode, event.value, event.implicit)
                start, end = _marks(event)
                node: Node = ScalarNode(tag, event.value, start, end, style=event.style)
                size = len(event.value) + 3
            elif isinstance(event, CollectionStartEvent):
                if len(stack) >= MAX_DEPTH:
                    raise _too_deep(_path(stack), event.start_mark)
                kind = MappingNode if isinstance(event, MappingStartEvent) else SequenceNode
                tag = event.tag
                if tag is None or tag == "!":
                    tag = loader.resolve(kind, None, event.implicit)
                stack.append(_Open(kind(tag, [], _marks(event)[0], None, flow_style=event.flow_style)))
                if event.anchor is not None:
                    anchors[event.anchor] = stack[-1].node
                    anchored.add(id(stack[-1].node))
                continue
            elif isinstance(event, SequenceEndEvent | MappingEndEvent):
                done = stack.pop()
                node = done.node
                node.end_mark = _marks(event)[1]
                if isinstance(node, MappingNode):
                    self._refuse_duplicate_keys(node, stack)
                height, size = done.height, done.size
                if id(node) in anchored:
                    measured[id(node)] = (height, size)
            elif isinstance(event, AliasEvent):
                if event.anchor not in anchors:
                    raise yaml.composer.ComposerError(
                        None, None, f"found undefined alias {event.anchor!r}", _marks(event)[0]
                    )
                node = anchors[event.anchor]
                if id(node) not in measured:
                    raise _refused(_path(stack), f"YAML alias *{event.anchor} refers to a node that contains it", event)
                height, size = measured[id(node)]
                if len(stack) + height > MAX_DEPTH:
                    raise _too_deep(_path(stack), event.start_mark, f" (through alias *{event.anchor})")
                self._expanded += size
                if self._expanded > MAX_ALIAS_EXPANSION:
                    raise _refused(
                        _path(stack),
                        f"YAML aliases would add more than {MAX_ALIAS_EXPANSION} bytes of JSON to the document "
                        f"(alias *{event.anchor})",
                        event,
                    )
            else:  # DocumentEndEvent: PyYAML always composes one root node before it
                raise yaml.composer.ComposerError(None, None, f"unexpected {type(event).__name__}", _marks(event)[0])
            if isinstance(event, ScalarEvent) and event.anchor is not None:
                anchors[event.anchor] = node
                measured[id(node)] = (height, size)
            if not stack:
                loader.get_event()  # the DocumentEndEvent
                return node
            parent = stack[-1]
            parent.height = max(parent.height, height + 1)
            parent.size += size
            if isinstance(parent.node, SequenceNode):
                parent.node.value.append(node)
            elif parent.key is None:
                parent.key = node
            else:
                parent.node.value.append((parent.key, node))
                parent.key = None

    def _refuse_duplicate_keys(self, node: MappingNode, stack: list[_Open]) -> None:
        """Keys are compared as the values they construct (`1`, `01` and `true` are one key, as in a Python dict)."""
        seen: set[Any] = set()
        for key, _ in node.value:
            if not isinstance(key, ScalarNode) or key.tag == _MERGE_TAG:
                continue  # merge keys may repeat; a map or list as a key is refused when it is constructed
            identity: Any = key.value
            if key.tag != _STR_TAG:
                try:
                    identity = self._loader.construct_object(key)
                    hash(identity)
                except (yaml.YAMLError, ValueError, OverflowError, TypeError):
                    identity = (key.tag, key.value)  # construction reports it later
            if identity in seen:
                line = f" (line {key.start_mark.line + 1})"
                raise errors.Malformed.field(_path(stack), f"duplicate key {key.value!r}{line}")
            seen.add(identity)


def _marks(event: Any) -> tuple[Any, Any]:
    """An event's start and end marks (libyaml's or PyYAML's: nodes take either)."""
    return event.start_mark, event.end_mark


def _path(stack: list[_Open]) -> str:
    """The path of the node being composed under `stack`, as `json_tree` names paths (`spec.list[1]`)."""
    out = ""
    for frame in stack:
        if isinstance(frame.node, SequenceNode):
            out += f"[{len(frame.node.value)}]"
        else:
            key = frame.key.value if isinstance(frame.key, ScalarNode) else "?"
            out += f".{key}" if out else str(key)
    return out


def _too_deep(path: str, mark: Any, how: str = "") -> errors.Invalid:
    return errors.Malformed.field(path, f"nested deeper than {MAX_DEPTH} levels{how} (line {mark.line + 1})")


def _refused(path: str, reason: str, event: Any) -> errors.Invalid:
    return errors.Malformed.field(path, f"{reason} (line {event.start_mark.line + 1})")


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
    """`value` as JSON could carry it (module docstring); refuses what JSON cannot hold with `Invalid` at its path,
    and maps and lists nested deeper than `MAX_DEPTH` with `Malformed` at the path where the limit is passed."""
    return _json_tree(value, path, 0)


def _json_tree(value: Any, path: str, depth: int) -> Any:
    if isinstance(value, str):
        if not value.isascii() and _SURROGATE.search(value):
            raise _lone_surrogate(path, value)
        return value
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise errors.Invalid.field(path, f"{value} is not a finite number")
        return value
    if isinstance(value, dt.date):  # YAML timestamps: JSON would have carried the text
        return value.isoformat()
    if isinstance(value, Mapping | list | tuple) and depth >= MAX_DEPTH:
        raise errors.Malformed.field(path, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            skey = _key_text(key, path)
            if skey in out:
                raise errors.Malformed.field(path, f"duplicate key {skey!r} (keys are compared as JSON text)")
            out[skey] = _json_tree(item, f"{path}.{skey}" if path else skey, depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_json_tree(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    raise errors.Invalid.field(path, f"a {type(value).__name__} value cannot be stored (JSON types only)")


def _key_text(key: Any, path: str) -> str:
    if isinstance(key, str):
        if not key.isascii() and _SURROGATE.search(key):
            raise _lone_surrogate(path, key, "a key")
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float | dt.date):
        return str(json_tree(key, path))
    raise errors.Invalid.field(path, f"a {type(key).__name__} cannot be a key (JSON keys are strings)")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(path: str, text: str, what: str = "the value") -> errors.Invalid:
    # JSON's \ud800 escapes can name half a character; no store or client can hold one (Kubernetes would replace it)
    at = _SURROGATE.search(text)
    assert at is not None
    return errors.Malformed.field(path, f"{what} is not Unicode text (lone surrogate U+{ord(at.group()):04X})")


def validated(obj: Any) -> dict[str, Any]:
    """`obj` as written once `registry.normalize` accepts it and the Kubernetes types it holds as maps pass
    Kubernetes' schemas (`api.podspecs`), with the namespace resolved and the server-owned metadata but
    `resourceVersion` dropped and integers sent as whole floats written as integers (module docstring)."""
    obj = registry.conformed(obj)
    wire = registry.normalize(obj)
    from devplace.api import _podspecs as podspecs  # the models' rules: loaded by the first validation

    podspecs.check(obj)  # the Kubernetes types a kind holds as maps (a Configuration's brokerPodSpec ...)
    assert isinstance(obj, dict)
    meta = {k: v for k, v in obj["metadata"].items() if k not in _DROPPED_AT_THE_BOUNDARY}
    namespace = wire["metadata"].get("namespace")
    if namespace:
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    return {**obj, "metadata": meta}
