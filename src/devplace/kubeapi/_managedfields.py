"""`metadata.managedFields`: which manager owns which field of an object, kept as Kubernetes keeps it.

Server-side apply decides conflicts by ownership, and `kubectl` shows it, so every write through the API server
records it (the agent and the controllers write through the store directly and pay nothing). The shapes are
Kubernetes' (structured-merge-diff):

- A field set is a set of paths; a path is a tuple of elements: `("f", name)` a field of a map, `("k", '{"name":"c"}')`
  an item of an associative list by its key fields (JSON, keys sorted), `("v", '"x"')` an item of a set list by value,
  `("i", 3)` a list index. Which lists are associative and by which keys comes from `fieldtypes`; lists of devplace
  kinds are atomic unless a key is known there.
- `FieldsV1` is the same set as nested objects: `{"f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:image":
  {}}}}}`; `"."` marks a path that has children and is itself a member.
- `managedFields` is a list of entries `{manager, operation: Apply|Update, apiVersion, time, fieldsType: FieldsV1,
  fieldsV1, subresource?}`: one `Apply` entry per applying manager, one `Update` entry per manager, apiVersion and
  subresource, sorted as Kubernetes sorts them (operation, time, manager, apiVersion, subresource). An entry whose set
  becomes empty is dropped. Identity fields (`apiVersion`, `kind`, `metadata.name`, `namespace`, `uid`,
  `resourceVersion`, `generation`, `creationTimestamp`, `managedFields`) are never owned.

An update (POST, PUT, and PATCH of a type other than apply) gives its manager the fields it changed (added or
modified leaves, and maps or items it created), takes them from every other manager, and removes the fields it removed
from every manager (`updated_managed_fields`). The record it starts from is the stored object's, unless the update
writes `managedFields` itself, as Kubernetes lets a client (`requested_managers`): an empty list, or a list of one
empty entry, resets them (no manager owns anything); a list whose entries decode replaces them (how kubectl moves
client-side apply's fields to server-side apply); anything else keeps the stored record. A write to a subresource
never writes them. The manager is the `fieldManager` parameter, else the User-Agent up to
its first `/` (`kubectl-edit/v1.32 ...` -> `kubectl-edit`), as Kubernetes derives it. The entry's time moves only
when the write changed something the manager now owns.

Pure: plain dicts in, plain dicts out; the caller passes the time.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from devplace import errors
from devplace.kubeapi import _fieldtypes as fieldtypes
from devplace.kubeapi._fieldtypes import Facts

Element = tuple[str, Any]
Path = tuple[Element, ...]
Operation = Literal["Apply", "Update"]

MAX_MANAGER_LENGTH = 128
"""Kubernetes' limit on a `fieldManager` (a longer User-Agent prefix is cut to it)."""

IDENTITY_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "selfLink",
    "managedFields",
)
"""Metadata no manager owns (Kubernetes strips them from every field set)."""

_MISSING: Any = object()


# -- the object as field sets see it ---------------------------------------------------------------------------------


def comparable(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """`obj` without what no manager owns: `apiVersion`, `kind` and the identity metadata (`IDENTITY_METADATA`)."""
    if not obj:
        return {}
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        rest = {k: v for k, v in meta.items() if k not in IDENTITY_METADATA}
        if rest:
            out["metadata"] = rest
        else:
            out.pop("metadata", None)
    return out


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def item_elements(items: list[Any], facts: Facts, *, path: str = "", strict: bool = False) -> list[Element] | None:
    """The path element of each item of an associative (`map`) or `set` list, in order; None when the list cannot be
    keyed (an item without key fields, a duplicate, a non-scalar in a set), so callers treat it as atomic.

    `strict` (an applied configuration) raises `Invalid` naming the list instead of returning None."""

    def refuse(reason: str) -> None:
        if strict:
            raise errors.Invalid.field(path, reason)

    out: list[Element] = []
    seen: set[Element] = set()
    for i, item in enumerate(items):
        element: Element
        if facts.list_type == "set":
            if not _scalar(item):
                refuse(f"item {i} of a set list must be a string, number or boolean")
                return None
            element = ("v", _json(item))
        else:
            if not isinstance(item, Mapping):
                refuse(f"item {i} must be an object keyed by {', '.join(facts.keys)}")
                return None
            defaults = dict(facts.key_defaults)
            key = {}
            for name in facts.keys:
                value = item.get(name, defaults.get(name))
                if value is not None:
                    if not _scalar(value):
                        refuse(f"item {i}: key field {name} must be a string, number or boolean")
                        return None
                    key[name] = value
            if not key:
                refuse(f"item {i} has none of the key fields {', '.join(facts.keys)}")
                return None
            element = ("k", _json(key))
        if element in seen:
            refuse(f"duplicate entries for key {element_text(element)}")
            return None
        seen.add(element)
        out.append(element)
    return out


def _item_facts(facts: Facts) -> Facts:
    return Facts(type=facts.type, atomic=facts.atomic)


Node = Literal["missing", "map", "assoc", "leaf"]


def _children(value: Any, facts: Facts) -> tuple[Node, dict[Element, tuple[Any, Facts]]]:
    """What a value is to a field set (missing, a map, an associative list or a leaf) and its children."""
    if value is _MISSING:
        return "missing", {}
    if isinstance(value, Mapping) and not facts.atomic:
        return "map", {("f", k): (v, fieldtypes.facts_of(facts.type, k)) for k, v in value.items()}
    if isinstance(value, list) and facts.list_type != "atomic":
        elements = item_elements(value, facts)
        if elements is not None:
            item = _item_facts(facts) if facts.list_type == "map" else Facts(atomic=True)
            return "assoc", {e: (v, item) for e, v in zip(elements, value, strict=True)}
    return "leaf", {}


def field_set(obj: Mapping[str, Any], root: str | None, *, strict: bool = False) -> set[Path]:
    """The fields an object (an applied configuration) sets, as server-side apply owns them: leaves, empty or null
    values, atomic values, and every item of an associative or set list (with its fields)."""
    out: set[Path] = set()
    _collect(obj, Facts(type=root or ""), (), out, strict)
    return out


def _collect(value: Any, facts: Facts, path: Path, out: set[Path], strict: bool) -> None:
    if isinstance(value, Mapping) and not facts.atomic:
        if not value and path:
            out.add(path)
        for k, v in value.items():
            _collect(v, fieldtypes.facts_of(facts.type, k), (*path, ("f", k)), out, strict)
        return
    if isinstance(value, list) and facts.list_type != "atomic":
        elements = item_elements(value, facts, path=path_text(path).lstrip("."), strict=strict)
        if elements is not None:
            item = _item_facts(facts) if facts.list_type == "map" else Facts(atomic=True)
            for element, v in zip(elements, value, strict=True):
                out.add((*path, element))
                if isinstance(v, Mapping) and not item.atomic:
                    for k, child in v.items():
                        _collect(child, fieldtypes.facts_of(item.type, k), (*path, element, ("f", k)), out, strict)
            return
    if path:
        out.add(path)


@dataclass
class Comparison:
    """How `new` differs from `old`: leaves (and maps or items) `added`, leaves `modified`, paths `removed`."""

    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)

    @property
    def changed(self) -> set[Path]:
        return self.added | self.modified


def compare(old: Mapping[str, Any], new: Mapping[str, Any], root: str | None) -> Comparison:
    """Compare two objects field by field (structured-merge-diff's `Compare`): a map or item present on one side
    only is added or removed itself, with everything below it; leaves that differ are modified."""
    out = Comparison()
    _compare(old, new, Facts(type=root or ""), (), out)
    return out


def _compare(left: Any, right: Any, facts: Facts, path: Path, out: Comparison) -> None:
    if left is not _MISSING and right is not _MISSING and left == right:
        return  # an equal subtree has nothing to add (Python's == is JSON's here but for true == 1: ownership only)
    lnode, lkids = _children(left, facts)
    rnode, rkids = _children(right, facts)
    if lnode == "leaf" and rnode == "leaf":
        if not same(left, right):
            out.modified.add(path)
        return
    if path:
        if lnode == "missing" and rnode != "missing":
            out.added.add(path)
        elif rnode == "missing" and lnode != "missing":
            out.removed.add(path)
        elif lnode != rnode:
            out.modified.add(path)
    if lnode == rnode:
        for element in {**lkids, **rkids}:
            lv, lf = lkids.get(element, (_MISSING, None))
            rv, rf = rkids.get(element, (_MISSING, None))
            _compare(lv, rv, lf or rf or fieldtypes.NONE, (*path, element), out)
        return
    for element, (lv, lf) in lkids.items():
        _compare(lv, _MISSING, lf, (*path, element), out)
    for element, (rv, rf) in rkids.items():
        _compare(_MISSING, rv, rf, (*path, element), out)


def same(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value (1 == 1.0), booleans apart from numbers, maps unordered, lists in order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


# -- FieldsV1 and path text ------------------------------------------------------------------------------------------


def element_text(element: Element) -> str:
    """An element as Kubernetes prints it in a path: `.name`, `[name="c"]`, `[="x"]`, `[3]`."""
    kind, value = element
    if kind == "f":
        return f".{value}"
    if kind == "k":
        key = json.loads(value)
        return "[" + ",".join(f"{k}={_json(v)}" for k, v in key.items()) + "]"
    if kind == "v":
        return f"[={value}]"
    return f"[{value}]"


def path_text(path: Path) -> str:
    """`.spec.containers[name="c"].image`, as Kubernetes names a field in a conflict."""
    return "".join(element_text(e) for e in path)


def _element_key(element: Element) -> str:
    kind, value = element
    return f"{kind}:{value}"


def encode_fields(paths: Iterable[Path]) -> dict[str, Any]:
    """A field set as a `FieldsV1` object (keys sorted, `"."` first)."""
    root: dict[str, list[Any]] = {}  # element key -> [member?, children]
    for path in paths:
        children = root
        for i, element in enumerate(path):
            key = _element_key(element)
            entry = children.get(key)
            if entry is None:
                entry = children[key] = [False, {}]
            if i == len(path) - 1:
                entry[0] = True
            children = entry[1]
    return _emit(root)


def _emit(children: dict[str, list[Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in sorted(children):
        member, below = children[key]
        node = _emit(below) if below else {}
        out[key] = {".": {}, **node} if member and below else node
    return out


def decode_fields(fields: Any) -> set[Path]:
    """A `FieldsV1` object as a field set; `Invalid` when it is not one."""
    if not isinstance(fields, Mapping):
        raise errors.Invalid.field("fieldsV1", "must be an object")
    out: set[Path] = set()
    _decode(fields, (), out)
    return out


def _decode(node: Mapping[str, Any], path: Path, out: set[Path]) -> None:
    if not node and path:
        out.add(path)
        return
    for key, child in node.items():
        if key == ".":
            if path:
                out.add(path)
            continue
        if not isinstance(child, Mapping):
            raise errors.Invalid.field("fieldsV1", f"{key!r} must map to an object")
        _decode(child, (*path, _parse_element(key)), out)


def _parse_element(key: str) -> Element:
    kind, sep, text = key.partition(":")
    if not sep:
        raise errors.Invalid.field("fieldsV1", f"{key!r} is not a path element (f:, k:, v: or i:)")
    if kind == "f":
        return ("f", text)
    try:
        if kind == "i":
            return ("i", int(text))
        if kind in ("k", "v"):
            value = json.loads(text)
            if kind == "k" and not isinstance(value, dict):
                raise ValueError("a key element must be a JSON object")
            return (kind, _json(value))
    except ValueError as e:
        raise errors.Invalid.field("fieldsV1", f"{key!r}: {e}") from e
    raise errors.Invalid.field("fieldsV1", f"{key!r} is not a path element (f:, k:, v: or i:)")


# -- managers ------------------------------------------------------------------------------------------------------


@dataclass
class Manager:
    """One `managedFields` entry, with its field set decoded."""

    manager: str
    operation: Operation
    api_version: str
    time: str | None
    fields: set[Path]
    subresource: str = ""
    raw: Mapping[str, Any] | None = None
    """The entry's `fieldsV1` as stored, while `fields` is not decoded: an entry an update does not touch is kept
    as it is, neither decoded nor encoded again (`managers_of(..., touching=...)`)."""

    def decoded(self) -> set[Path]:
        if self.raw is not None:
            self.fields = decode_fields(self.raw)
            self.raw = None
        return self.fields

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Kubernetes keys Apply entries by manager (and subresource), Update entries also by apiVersion."""
        version = self.api_version if self.operation == "Update" else ""
        return (self.manager, self.operation, version, self.subresource)

    def describe(self) -> str:
        """As Kubernetes names a manager in a conflict: `"kubectl"`, `"kubectl-edit" using apps/v1`."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def to_wire(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version}
        if self.time is not None:
            entry["time"] = self.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = dict(self.raw) if self.raw is not None else encode_fields(self.fields)
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


Managers = dict[tuple[str, str, str, str], Manager]


def managers_of(obj: Mapping[str, Any] | None, *, touching: set[Path] | None = None) -> Managers:
    """The entries of `obj`'s `metadata.managedFields`; an entry that does not decode is skipped (the server wrote
    them, so only a write that bypassed it could have broken one). With `touching`, an entry that owns none of those
    paths is not decoded (its `raw` is set instead)."""
    out: Managers = {}
    raw = ((obj or {}).get("metadata") or {}).get("managedFields")
    if not isinstance(raw, list):
        return out
    for entry in raw:
        if not isinstance(entry, Mapping):
            continue
        name, operation = entry.get("manager"), entry.get("operation")
        if not isinstance(name, str) or operation not in ("Apply", "Update"):
            continue
        fields_v1 = entry.get("fieldsV1") or {}
        time = entry.get("time")
        subresource = entry.get("subresource")
        manager = Manager(
            name,
            operation,
            str(entry.get("apiVersion") or ""),
            time if isinstance(time, str) else None,
            set(),
            subresource if isinstance(subresource, str) else "",
        )
        try:
            if touching is not None and isinstance(fields_v1, Mapping) and not _owns_any(fields_v1, touching):
                manager.raw = fields_v1
            else:
                manager.fields = decode_fields(fields_v1)
            if manager.key in out:
                out[manager.key].decoded().update(manager.decoded())
            else:
                out[manager.key] = manager
        except errors.Invalid:
            continue
    return out


def _owns_any(fields_v1: Mapping[str, Any], paths: Iterable[Path]) -> bool:
    """Whether an encoded field set has one of `paths` as a member (looked up without decoding it)."""
    for path in paths:
        node: Any = fields_v1
        for element in path:
            node = node.get(_element_key(element)) if isinstance(node, Mapping) else None
            if node is None:
                break
        else:
            if isinstance(node, Mapping) and (not node or "." in node):
                return True
    return False


def encode_managers(managers: Iterable[Manager]) -> list[dict[str, Any]]:
    """Entries with a non-empty set, sorted as Kubernetes sorts them."""
    kept = [m for m in managers if m.fields or m.raw]
    kept.sort(key=lambda m: (m.operation, m.time or "", m.manager, m.api_version, m.subresource))
    return [m.to_wire() for m in kept]


def rfc3339(seconds: float) -> str:
    return dt.datetime.fromtimestamp(int(seconds), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def manager_name(field_manager: str | None, user_agent: str | None) -> str:
    """The manager of a write: the `fieldManager` parameter (checked as Kubernetes checks it), else the User-Agent's
    part before its first `/` (cut to 128 characters), else "unknown"."""
    if field_manager:
        if len(field_manager) > MAX_MANAGER_LENGTH:
            raise errors.Invalid.field(
                "fieldManager", f"must be no more than {MAX_MANAGER_LENGTH} characters (got {len(field_manager)})"
            )
        bad = next((c for c in field_manager if not c.isprintable()), None)
        if bad is not None:
            raise errors.Invalid.field("fieldManager", f"invalid character {bad!r}: only printable characters")
        return field_manager
    prefix = (user_agent or "").split("/", 1)[0].strip()
    prefix = "".join(c for c in prefix if c.isprintable())[:MAX_MANAGER_LENGTH]
    return prefix or "unknown"


def without_identity(paths: Iterable[Path]) -> set[Path]:
    """`paths` without the ones no manager owns (the root, `.metadata` itself)."""
    return {p for p in paths if p and p != (("f", "metadata"),)}


def requested_managers(requested: Any) -> Managers | None:
    """The record an update that writes `managedFields` starts from (module docstring): None to keep the stored one
    (`requested` absent or null, or entries none of which decode), empty for a reset (`[]` or `[{}]`). An entry that
    is not a `managedFields` entry is `Invalid` naming it."""
    if requested is None:
        return None
    if not isinstance(requested, list):
        raise errors.Invalid.field("metadata.managedFields", "must be a list of entries")
    if requested == [] or requested == [{}]:
        return {}
    for i, entry in enumerate(requested):
        where = f"metadata.managedFields[{i}]"
        if not isinstance(entry, Mapping):
            raise errors.Invalid.field(where, "must be an object")
        if entry.get("operation") not in ("Apply", "Update"):
            raise errors.Invalid.field(f"{where}.operation", "must be Apply or Update")
        if entry.get("fieldsType", "FieldsV1") != "FieldsV1":
            raise errors.Invalid.field(f"{where}.fieldsType", "must be FieldsV1")
        if not isinstance(entry.get("manager", ""), str):
            raise errors.Invalid.field(f"{where}.manager", "must be a string")
        decode_fields(entry.get("fieldsV1") or {})  # Invalid naming fieldsV1 when it is not a field set
    managers = managers_of({"metadata": {"managedFields": requested}})
    return managers if any(m.decoded() for m in managers.values()) else None


def updated_managed_fields(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    *,
    manager: str,
    api_version: str,
    now: float,
    root: str | None,
    subresource: str = "",
    requested: Any = None,
) -> list[dict[str, Any]]:
    """`new`'s `managedFields` after an update by `manager` that turned `old` (None: a create) into `new`.

    The record is `old`'s entries, or those the update writes (`requested`, the body's `metadata.managedFields`,
    never for a subresource: `requested_managers`): the manager gains what the write changed, every other manager
    loses it, and what the write removed is nobody's any more."""
    diff = compare(comparable(old), comparable(new), root)
    changed = without_identity(diff.changed)
    removed = without_identity(diff.removed)
    if requested is not None and same(requested, ((old or {}).get("metadata") or {}).get("managedFields")):
        requested = None  # what was read, sent back (kubectl replace, edit): the stored record, decoded lazily
    given = None if subresource else requested_managers(requested)
    managers = managers_of(old, touching=changed | removed) if given is None else given
    for other in managers.values():
        if other.raw is None:
            other.fields -= changed
            other.fields -= removed
    if changed:
        mine = Manager(manager, "Update", api_version, rfc3339(now), set(changed), subresource)
        previous = managers.get(mine.key)
        if previous is not None:
            mine.fields |= previous.decoded()
        managers[mine.key] = mine
    return encode_managers(managers.values())


def recorded(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    *,
    manager: str,
    api_version: str,
    now: float,
    subresource: str = "",
    requested: Any = None,
) -> dict[str, Any]:
    """`new` with the `managedFields` an update by `manager` from `old` (None: a create) leaves it
    (`updated_managed_fields`, `requested` the body's own `managedFields`; none left: the field is dropped)."""
    entries = updated_managed_fields(
        old,
        new,
        manager=manager,
        api_version=api_version,
        now=now,
        root=fieldtypes.root_of(str(new.get("kind") or "")),
        subresource=subresource,
        requested=requested,
    )
    meta = dict(new.get("metadata") or {})
    if entries:
        meta["managedFields"] = entries
    else:
        meta.pop("managedFields", None)
    return {**new, "metadata": meta}


def owned_by_others(managers: Managers, key: tuple[str, str, str, str]) -> set[Path]:
    out: set[Path] = set()
    for k, m in managers.items():
        if k != key:
            out |= m.fields
    return out


def prefixes(paths: Iterable[Path], *, named_only: bool = False) -> Iterator[Path]:
    """Every proper, non-empty prefix of every path; with `named_only`, those that end in a field (Kubernetes'
    "named fields", which an applier implicitly owns as members)."""
    for path in paths:
        for i in range(1, len(path)):
            if not named_only or path[i - 1][0] == "f":
                yield path[:i]
