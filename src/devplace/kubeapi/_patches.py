"""The four PATCH types of the Kubernetes API, as pure functions over wire dicts.

- `merge_patch` (RFC 7386, `application/merge-patch+json`): maps merge key by key, `null` deletes, anything else
  replaces. `merge_diff(a, b)` is the patch that turns `a` into `b`.
- `json_patch` (RFC 6902, `application/json-patch+json`): `add`, `remove`, `replace`, `move`, `copy`, `test` on JSON
  pointers (`~1` is `/`, `~0` is `~`, `-` appends to an array). All or nothing: an operation that fails (a `test` that
  does not hold, a path that is not there) raises `Invalid` naming the operation's index and path, and no operation
  takes effect. `parse_json_patch` checks the body's shape first (not a JSON array of operations: `Malformed`).
- `strategic_merge` (`application/strategic-merge-patch+json`), for Kubernetes' own kinds only (Kubernetes refuses it
  for custom resources, so devplace does for its kinds): like a merge patch, except that lists Kubernetes marks
  `patchStrategy: merge` merge item by item (maps by their `patchMergeKey`: containers and env by `name`, container
  ports by `containerPort`, service ports by `port`, volumes by `name`, volumeMounts by `mountPath`, ...; scalars as a
  set), with the directives `$patch: replace|delete|merge`, `$retainKeys`, `$deleteFromPrimitiveList/<field>` and
  `$setElementOrder/<field>`. Items a patch adds come before the ones it does not mention, unless a
  `$setElementOrder` says where (what kubectl sends), as in Kubernetes. The facts come from `fieldtypes`.
- `server_side_apply` (`application/apply-patch+yaml`): the applied configuration is merged into the live object
  (associative lists by their keys), and `metadata.managedFields` records that the manager owns exactly the fields the
  configuration sets (`managedfields`). Changing a field another manager owns is a `Conflict` listing each field and
  its owner, unless `force`, which takes the fields over. Fields the manager applied before and no longer applies are
  removed, unless another manager owns them (or something below them). Applying to no object creates it. An object no
  manager has touched yet is treated as owned by `before-first-apply`, as in Kubernetes.
  From client-side apply to server-side apply (Kubernetes' last-applied manager and updater, for the manager
  `kubectl` only, as there): `kubectl apply` (client-side) records the configuration it applied in the annotation
  `kubectl.kubernetes.io/last-applied-configuration` and owns its fields as `kubectl-client-side-apply`. When an
  apply by `kubectl` conflicts only on fields the annotation holds with the values the object still has (what the
  user applied before, client-side), it takes them over as if forced; any other conflict stays a conflict. After an
  apply by `kubectl`, an object that has the annotation gets it rewritten to the configuration just applied, so a
  later client-side `kubectl apply` diffs against it (kubectl then moves the client-side managers' fields to
  `kubectl` itself, with a JSON patch of `managedFields`).

`patch_type` maps a Content-Type to one of these, or refuses it with `UnsupportedMediaType` and Kubernetes' message.
Nothing here does I/O or reads a clock: the server passes the time and runs each patch inside a compare-and-swap.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from devplace import errors
from devplace.api import json_tree
from devplace.kubeapi import _fieldtypes as fieldtypes
from devplace.kubeapi import _managedfields as managedfields
from devplace.kubeapi._fieldtypes import Facts
from devplace.kubeapi._managedfields import Manager, Path, same

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"

PatchType = Literal[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
]

MAX_JSON_PATCH_OPERATIONS = 10_000
"""Kubernetes' limit on the operations of one JSON patch."""

BEFORE_FIRST_APPLY = "before-first-apply"

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""The annotation client-side `kubectl apply` keeps its applied configuration in."""

UPGRADING_MANAGER = "kubectl"
"""The one manager whose applies take over client-side apply's fields and keep `LAST_APPLIED` in step (Kubernetes'
rule: another manager opts out)."""

_MISSING: Any = object()


def patch_type(content_type: str | None, *, strategic: bool) -> PatchType:
    """The patch type a request's Content-Type names; `strategic` says whether the kind takes a strategic merge patch.

    Anything else is `UnsupportedMediaType` (415) listing the types the kind accepts, in Kubernetes' words."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    accepted: list[PatchType] = [JSON_PATCH, MERGE_PATCH]
    if strategic:
        accepted.append(STRATEGIC_MERGE_PATCH)
    accepted.append(APPLY_PATCH)
    for known in accepted:
        if media == known:
            return known
    raise errors.UnsupportedMediaType(
        "the body of the request was in an unknown format - accepted media types include: " + ", ".join(accepted)
    )


# -- RFC 7386 ------------------------------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386's MergePatch(target, patch), without changing either argument."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def merge_diff(old: Any, new: Any) -> Any:
    """A merge patch turning `old` into `new` (`new` must hold no `null` inside maps: a merge patch cannot set one)."""
    if not (isinstance(old, Mapping) and isinstance(new, Mapping)):
        return copy.deepcopy(new)
    out: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            out[key] = copy.deepcopy(value)
        elif isinstance(old[key], Mapping) and isinstance(value, Mapping):
            inner = merge_diff(old[key], value)
            if inner:
                out[key] = inner
        elif not same(old[key], value):
            out[key] = copy.deepcopy(value)
    return out


# -- RFC 6902 ------------------------------------------------------------------------------------------------------

_OPS = ("add", "remove", "replace", "move", "copy", "test")
_INDEX = re.compile(r"0|[1-9][0-9]*")


def parse_json_patch(raw: bytes) -> list[dict[str, Any]]:
    """A JSON patch body as a list of well-formed operations; `Malformed` (400) naming what is wrong otherwise."""
    try:
        decoded = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError as e:
        raise errors.Malformed(f"the request body is not UTF-8 text (byte {e.start})") from e
    except RecursionError as e:
        raise errors.Malformed("the request body is nested too deeply") from e
    except ValueError as e:
        raise errors.Malformed(f"the request body is not valid JSON: {e}") from e
    ops = json_tree(decoded)
    if not isinstance(ops, list):
        raise errors.Malformed("a JSON patch must be a JSON array of operations")
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise errors.TooLarge(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}"
        )
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise errors.Malformed.field(f"[{i}]", "a JSON patch operation must be an object")
        name = op.get("op")
        if name not in _OPS:
            raise errors.Malformed.field(f"[{i}].op", f"{name!r} is not an operation ({', '.join(_OPS)})")
        needed = ["path"] + (["from"] if name in ("move", "copy") else [])
        for key in needed:
            if not isinstance(op.get(key), str):
                raise errors.Malformed.field(f"[{i}].{key}", f"{name} needs {key!r} (a JSON pointer string)")
        if name in ("add", "replace", "test") and "value" not in op:
            raise errors.Malformed.field(f"[{i}].value", f"{name} needs 'value'")
    return ops


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class _OpError(Exception):
    """An operation that cannot apply; `json_patch` turns it into `Invalid` naming the operation."""


def json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902: `ops` (as `parse_json_patch` returns them) applied in order to a copy of `doc`; all or nothing."""
    out = copy.deepcopy(doc)
    for i, op in enumerate(ops):
        try:
            out = _apply_op(out, op)
        except _OpError as e:
            where = op.get("path") if op.get("op") not in ("move", "copy") else f"{op.get('from')} -> {op.get('path')}"
            reason = f"{op.get('op')} {where}: {e}"
            raise errors.Invalid(f"json patch operation {i} ({reason})", [errors.FieldError(f"[{i}]", reason)]) from e
    return out


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise _OpError(f"{pointer!r} is not a JSON pointer (it must start with '/')")
    out = []
    for token in pointer[1:].split("/"):
        if re.search(r"~(?![01])", token):
            raise _OpError(f"{pointer!r}: '~' must be followed by 0 or 1")
        out.append(token.replace("~1", "/").replace("~0", "~"))
    return out


def _index(token: str, size: int, *, appending: bool) -> int:
    if not _INDEX.fullmatch(token):
        raise _OpError(f"{token!r} is not an array index")
    index = int(token)
    limit = size if appending else size - 1
    if index > limit:
        raise _OpError(f"index {index} is out of range (the array has {size} items)")
    return index


def _resolve(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for depth, token in enumerate(tokens):
        if isinstance(node, dict):
            if token not in node:
                raise _OpError(f"{_pointer(tokens[: depth + 1])} does not exist")
            node = node[token]
        elif isinstance(node, list):
            if token == "-":
                raise _OpError(f"{_pointer(tokens[: depth + 1])}: '-' names no existing item")
            node = node[_index(token, len(node), appending=False)]
        else:
            raise _OpError(f"{_pointer(tokens[:depth])} is not an object or array")
    return node


def _pointer(tokens: list[str]) -> str:
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            parent.insert(_index(last, len(parent), appending=True), value)
    else:
        raise _OpError(f"{_pointer(tokens[:-1])} is not an object or array")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise _OpError("the whole document cannot be removed")
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _OpError(f"{_pointer(tokens)} does not exist")
        return parent.pop(last)
    if isinstance(parent, list):
        if last == "-":
            raise _OpError(f"{_pointer(tokens)}: '-' names no existing item")
        return parent.pop(_index(last, len(parent), appending=False))
    raise _OpError(f"{_pointer(tokens[:-1])} is not an object or array")


def _apply_op(doc: Any, op: Mapping[str, Any]) -> Any:
    name = op["op"]
    tokens = _tokens(op["path"])
    if name == "add":
        return _add(doc, tokens, copy.deepcopy(op["value"]))
    if name == "remove":
        _remove(doc, tokens)
        return doc
    if name == "replace":
        if not tokens:
            return copy.deepcopy(op["value"])
        _remove(doc, tokens)
        return _add(doc, tokens, copy.deepcopy(op["value"]))
    if name == "test":
        actual = _resolve(doc, tokens)
        if not same(actual, op["value"]):
            raise _OpError(f"test failed: the value is {json.dumps(actual)}, not {json.dumps(op['value'])}")
        return doc
    source = _tokens(op["from"])
    if name == "copy":
        return _add(doc, tokens, copy.deepcopy(_resolve(doc, source)))
    # move
    if source == tokens:
        _resolve(doc, source)
        return doc
    if tokens[: len(source)] == source:
        raise _OpError("a value cannot be moved into one of its own children")
    return _add(doc, tokens, _remove(doc, source))


# -- strategic merge patch -----------------------------------------------------------------------------------------

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM = "$deleteFromPrimitiveList/"
_ORDER = "$setElementOrder/"


def _is_directive(key: str) -> bool:
    return key in (_DIRECTIVE, _RETAIN_KEYS) or key.startswith((_DELETE_FROM, _ORDER))


def strategic_merge(original: Mapping[str, Any], patch: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """A strategic merge patch applied to a copy of `original`, an object of the built-in `kind`.

    Raises `UnsupportedMediaType` for a kind that is not Kubernetes' own, `Malformed` for a directive that is not one,
    `Invalid` for list items without their merge key."""
    root = fieldtypes.root_of(kind, builtin_only=True)
    if root is None:
        raise errors.UnsupportedMediaType(
            f"strategic merge patch is not supported for {kind} (only Kubernetes' own kinds); "
            f"use {MERGE_PATCH}, {JSON_PATCH} or {APPLY_PATCH}"
        )
    return _smp_map(copy.deepcopy(dict(original)), patch, root, "")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _smp_map(original: dict[str, Any], patch: Mapping[str, Any], type_name: str, path: str) -> dict[str, Any]:
    directive = patch.get(_DIRECTIVE)
    if directive is not None:
        if directive == "replace":
            return _smp_map({}, {k: v for k, v in patch.items() if k != _DIRECTIVE}, type_name, path)
        if directive == "delete":
            return {}
        if directive != "merge":
            raise errors.Malformed.field(_join(path, _DIRECTIVE), f"unknown patch type {directive!r}")
    retain = patch.get(_RETAIN_KEYS)
    if retain is not None:
        if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
            raise errors.Malformed.field(_join(path, _RETAIN_KEYS), "must be a list of field names")
        for key, value in patch.items():
            if value is not None and not _is_directive(key) and key not in retain:
                raise errors.Malformed.field(
                    _join(path, _RETAIN_KEYS), f"must list every field the patch sets ({key!r} is not listed)"
                )
        original = {k: v for k, v in original.items() if k in retain}
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key.startswith(_DELETE_FROM):
            name = key[len(_DELETE_FROM) :]
            if not isinstance(value, list):
                raise errors.Malformed.field(_join(path, key), "must be a list of the values to delete")
            current = original.get(name)
            if isinstance(current, list):
                original[name] = [x for x in current if not any(same(x, gone) for gone in value)]
        elif key.startswith(_ORDER):
            if not isinstance(value, list):
                raise errors.Malformed.field(_join(path, key), "must be a list")
            orders[key[len(_ORDER) :]] = value
    for key, value in patch.items():
        if _is_directive(key):
            continue
        facts = fieldtypes.facts_of(type_name, key)
        here = _join(path, key)
        if value is None:
            original.pop(key, None)
            continue
        current = original.get(key, _MISSING)
        if current is _MISSING:
            if isinstance(value, Mapping) and value.get(_DIRECTIVE) == "delete":
                continue
            original[key] = _smp_fresh(value, facts, here)
        elif isinstance(current, dict) and isinstance(value, Mapping):
            original[key] = _smp_map(current, value, facts.type, here)
        elif isinstance(current, list) and isinstance(value, list):
            original[key] = _smp_list(current, value, facts, here)
        else:
            original[key] = _smp_fresh(value, facts, here)
    for name, order in orders.items():
        current = original.get(name)
        if isinstance(current, list):
            original[name] = _in_order(current, order, fieldtypes.facts_of(type_name, name).merge_key)
    return original


def _smp_fresh(value: Any, facts: Facts, path: str) -> Any:
    """A patch value where the original has none: its directives are applied to nothing and `null`s dropped."""
    if isinstance(value, Mapping):
        return _smp_map({}, value, facts.type, path)
    if isinstance(value, list):
        return _smp_list([], value, facts, path)
    return value


def _key_of(merge_key: str) -> Callable[[Any], Any]:
    if not merge_key:
        return lambda item: _Hashable(item)
    return lambda item: _Hashable(item.get(merge_key) if isinstance(item, Mapping) else _MISSING)


class _Hashable:
    """A JSON value compared as JSON (`same`), for list positions."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Hashable) and same(self.value, other.value)

    def __hash__(self) -> int:
        return 0


def _position(keys: list[_Hashable], key: _Hashable) -> int:
    for i, k in enumerate(keys):
        if k == key:
            return i
    return -1


def _smp_list(original: list[Any], patch: list[Any], facts: Facts, path: str) -> list[Any]:
    item_facts = Facts(type=facts.type)
    if not facts.merges:
        return copy.deepcopy(patch)  # replaced as written, as Kubernetes replaces a list without a merge strategy
    merge_key = facts.merge_key
    maps = any(isinstance(x, Mapping) for x in (*original, *patch))
    if not maps:
        merged: list[Any] = []
        for item in (*original, *patch):
            if not any(same(item, x) for x in merged):
                merged.append(item)
        return _normalized(merged, patch, original, "")
    if not merge_key:
        raise errors.Invalid.field(path, "cannot merge lists without a merge key")
    work = list(original)
    items = []
    replace = False
    for i, item in enumerate(patch):
        if not isinstance(item, Mapping):
            raise errors.Invalid.field(f"{path}[{i}]", f"must be an object with the merge key {merge_key!r}")
        directive = item.get(_DIRECTIVE)
        if directive is None:
            if merge_key not in item:
                raise errors.Invalid.field(f"{path}[{i}]", f"does not contain the declared merge key {merge_key!r}")
            items.append(item)
        elif directive == "delete":
            if merge_key not in item:
                raise errors.Malformed.field(f"{path}[{i}]", f"$patch: delete needs the merge key {merge_key!r}")
            work = [x for x in work if not (isinstance(x, Mapping) and same(x.get(merge_key), item[merge_key]))]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise errors.Malformed.field(f"{path}[{i}]", "merging lists cannot yet be specified in the patch")
        else:
            raise errors.Malformed.field(f"{path}[{i}].{_DIRECTIVE}", f"unknown patch type {directive!r}")
    if replace:
        work = []
    before = list(work)
    for i, item in enumerate(items):
        here = f"{path}[{i}]"
        found = next(
            (j for j, x in enumerate(work) if isinstance(x, Mapping) and same(x.get(merge_key), item[merge_key])),
            None,
        )
        if found is None:
            work.append(_smp_fresh(item, item_facts, here))
        else:
            work[found] = _smp_map(dict(work[found]), item, facts.type, here)
    return _normalized(work, items, before, merge_key)


def _normalized(merged: list[Any], patch: list[Any], server_order: list[Any], merge_key: str) -> list[Any]:
    """Kubernetes' element order after a list merge: the patch's items in the patch's order, the others in theirs,
    interleaved by where they stood in the original list (`mergeSortedSlice`)."""
    key = _key_of(merge_key)
    patch_keys = [key(x) for x in patch]
    in_patch = [x for x in merged if key(x) in patch_keys]
    in_patch.sort(key=lambda x: _position(patch_keys, key(x)))
    server_only = [x for x in merged if key(x) not in patch_keys]
    server_keys = [key(x) for x in server_order]
    out = []
    i = j = 0
    while i < len(server_only) or j < len(in_patch):
        if i >= len(server_only):
            out.append(in_patch[j])
            j += 1
        elif j >= len(in_patch):
            out.append(server_only[i])
            i += 1
        else:
            left = _position(server_keys, key(server_only[i]))
            right = _position(server_keys, key(in_patch[j]))
            if left >= 0 and right >= 0 and left < right:
                out.append(server_only[i])
                i += 1
            else:
                out.append(in_patch[j])
                j += 1
    return out


def _in_order(items: list[Any], order: list[Any], merge_key: str) -> list[Any]:
    """`$setElementOrder`: the items the order names take their places in that order; the others stay where they are."""
    key = _key_of(merge_key)
    order_keys = [key(x) for x in order]
    named = [x for x in items if key(x) in order_keys]
    named.sort(key=lambda x: _position(order_keys, key(x)))
    slots = iter(named)
    return [next(slots) if key(x) in order_keys else x for x in items]


# -- server-side apply ---------------------------------------------------------------------------------------------


def server_side_apply(
    live: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    *,
    manager: str,
    force: bool,
    api_version: str,
    now: float,
    subresource: str = "",
) -> dict[str, Any]:
    """The object after `manager` applies `config` to `live` (None: the object does not exist yet), with its
    `metadata.managedFields`. Raises `Conflict` (with one field cause per conflict) unless `force`."""
    meta = config.get("metadata")
    if isinstance(meta, Mapping) and meta.get("managedFields"):
        raise errors.Malformed.field("metadata.managedFields", "must be empty in an applied configuration")
    kind = str(config.get("kind") or (live or {}).get("kind") or "")
    root = fieldtypes.root_of(kind)
    wanted = managedfields.comparable(config)
    applied = managedfields.without_identity(managedfields.field_set(wanted, root, strict=True))
    stamp = managedfields.rfc3339(now)
    key = (manager, "Apply", "", subresource)
    if live is None:
        body = _apply_merge(_MISSING, wanted, Facts(type=root or ""))
        entry = Manager(manager, "Apply", api_version, stamp, set(applied), subresource)
        return _assembled(body, config, config, [entry])
    managers = managedfields.managers_of(live)
    current = managedfields.comparable(live)
    if not managers:
        owned = managedfields.without_identity(managedfields.field_set(current, root))
        before = Manager(BEFORE_FIRST_APPLY, "Update", api_version, stamp, owned)
        managers[before.key] = before
    merged = _apply_merge(current, wanted, Facts(type=root or ""))
    changed = managedfields.without_identity(managedfields.compare(current, merged, root).changed)
    conflicts = {k: m.fields & changed for k, m in managers.items() if k != key and m.fields & changed}
    if conflicts and not force and manager == UPGRADING_MANAGER:
        allowed = last_applied_fields(live, api_version, root)
        if all(paths <= allowed for paths in conflicts.values()):
            force = True  # only what the user applied client-side: taken over (module docstring)
        else:
            refused = {k: paths - allowed for k, paths in conflicts.items() if paths - allowed}
            raise _conflict_error([(managers[k], paths) for k, paths in refused.items()])
    if conflicts and not force:
        raise _conflict_error([(managers[k], paths) for k, paths in conflicts.items()])
    for k, paths in conflicts.items():
        managers[k].fields -= paths
    previous = managers.get(key)
    last = previous.fields if previous is not None else set()
    pruned = _prune(merged, last, applied, managedfields.owned_by_others(managers, key), root)
    removed = managedfields.without_identity(managedfields.compare(current, pruned, root).removed)
    for other in managers.values():
        other.fields -= removed
    if manager == UPGRADING_MANAGER and _last_applied(live) is not None:
        pruned = _with_last_applied(pruned, config)
    unchanged = previous is not None and same(current, pruned)
    time = previous.time if unchanged and previous is not None else stamp
    managers[key] = Manager(manager, "Apply", api_version, time, set(applied), subresource)
    return _assembled(pruned, config, live, list(managers.values()))


def _last_applied(obj: Mapping[str, Any]) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations")
    value = annotations.get(LAST_APPLIED) if isinstance(annotations, Mapping) else None
    return value if isinstance(value, str) and value else None


def last_applied_fields(live: Mapping[str, Any], api_version: str, root: str | None) -> set[Path]:
    """The fields of `live`'s last-applied configuration that `live` still holds as applied (Kubernetes'
    `allowedConflictsFromLastApplied`): none when there is no annotation, it does not decode, or it was applied at
    another apiVersion; else its field set less what differs from `live` (modified, added or removed)."""
    text = _last_applied(live)
    if text is None:
        return set()
    try:
        last = json.loads(text)
    except ValueError:
        return set()
    if not isinstance(last, Mapping) or last.get("apiVersion") != api_version:
        return set()
    then, now = managedfields.comparable(last), managedfields.comparable(live)
    try:
        held = managedfields.without_identity(managedfields.field_set(then, root))
    except errors.Invalid:
        return set()
    diff = managedfields.compare(then, now, root)
    return held - diff.modified - diff.added - diff.removed


def last_applied_text(config: Mapping[str, Any]) -> str:
    """The annotation's value for an applied configuration: its JSON without the annotation itself, keys sorted, as
    kubectl and Kubernetes write it (with the newline Go's JSON encoder ends it with)."""
    body = copy.deepcopy(dict(config))
    meta = body.get("metadata")
    if isinstance(meta, dict):
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED, None)
            if not annotations:
                meta.pop("annotations")
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def _with_last_applied(body: Any, config: Mapping[str, Any]) -> Any:
    """`body` (an applied object's fields) with `LAST_APPLIED` set to `config` (Kubernetes' last-applied updater)."""
    out = dict(body) if isinstance(body, Mapping) else {}
    meta = dict(out.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), LAST_APPLIED: last_applied_text(config)}
    out["metadata"] = meta
    return out


def _assembled(
    body: Any, config: Mapping[str, Any], identity: Mapping[str, Any], managers: list[Manager]
) -> dict[str, Any]:
    """`body` (fields only) with apiVersion and kind from `config`, identity metadata from `identity`, and
    `managers` as its managedFields."""
    fields = dict(body) if isinstance(body, Mapping) else {}
    out: dict[str, Any] = {"apiVersion": config.get("apiVersion"), "kind": config.get("kind")}
    source_meta = identity.get("metadata") or {}
    meta = {k: source_meta[k] for k in managedfields.IDENTITY_METADATA if k in source_meta and k != "managedFields"}
    meta.update(fields.pop("metadata", None) or {})
    meta["managedFields"] = managedfields.encode_managers(managers)
    out["metadata"] = meta
    out.update(fields)
    return out


def _conflict_error(conflicts: list[tuple[Manager, set[Path]]]) -> errors.Conflict:
    """Kubernetes' apply conflict: one cause per field, a message naming managers and fields."""
    causes: list[errors.FieldError] = []
    lines: list[str] = []
    count = 0
    for manager, paths in sorted(conflicts, key=lambda c: c[0].describe()):
        texts = sorted(managedfields.path_text(p) for p in paths)
        count += len(texts)
        causes.extend(errors.FieldError(text, f"conflict with {manager.describe()}") for text in texts)
        lines.append(f"conflicts with {manager.describe()}:")
        lines.extend(f"- {text}" for text in texts)
    if count == 1:
        cause = causes[0]
        message = f"Apply failed with 1 conflict: {cause.reason}: {cause.path}"
    else:
        message = f"Apply failed with {count} conflicts: " + "\n".join(lines)
    return errors.Conflict(message, causes)


def _apply_merge(live: Any, config: Any, facts: Facts) -> Any:
    """The applied configuration merged into the live value (structured-merge-diff's merge)."""
    if isinstance(config, Mapping) and not facts.atomic:
        out = dict(live) if isinstance(live, Mapping) else {}
        for key, value in config.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = _apply_merge(out.get(key, _MISSING), value, fieldtypes.facts_of(facts.type, key))
        return out
    if isinstance(config, list) and facts.list_type != "atomic":
        right = managedfields.item_elements(config, facts, strict=True)
        left = managedfields.item_elements(live, facts) if isinstance(live, list) else None
        if right is not None:
            return _merge_items(live if left is not None else [], left or [], config, right, facts)
    return copy.deepcopy(config)


def _merge_items(live: list[Any], left: list[Any], config: list[Any], right: list[Any], facts: Facts) -> list[Any]:
    """Associative list merge: shared items follow the configuration's order, live-only items keep their place."""
    item = Facts(type=facts.type, atomic=facts.atomic or facts.list_type == "set")
    by_left = dict(zip(left, live, strict=True))
    by_right = dict(zip(right, config, strict=True))
    shared = [e for e in right if e in by_left]
    out: list[Any] = []
    done: set[Any] = set()
    li = ri = si = 0
    while li < len(left) or ri < len(right):
        if li < len(left) and ri < len(right):
            element = left[li]
            if element == right[ri]:
                out.append(_apply_merge(by_left[element], by_right[element], item))
                done.add(element)
                li += 1
                ri += 1
                if si < len(shared) and shared[si] == element:
                    si += 1
                continue
            if element in by_right and si < len(shared) and shared[si] != element:
                li += 1
                continue
        if li < len(left):
            element = left[li]
            if element not in by_right:
                out.append(copy.deepcopy(by_left[element]))
                li += 1
                continue
            if element in done or ri >= len(right):
                li += 1
                continue
        element = right[ri]
        out.append(_apply_merge(by_left.get(element, _MISSING), by_right[element], item))
        done.add(element)
        ri += 1
        if si < len(shared) and shared[si] == element:
            si += 1
    return out


def _prune(value: Any, last: set[Path], applied: set[Path], others: set[Path], root: str | None) -> Any:
    """Remove what the manager applied before and no longer applies, unless another manager owns it or something
    below it; then maps the manager's fields alone had made and that are now empty."""
    out = copy.deepcopy(value)
    kept = set(others) | set(managedfields.prefixes(others))

    def owned_elsewhere(path: Path) -> bool:
        return path in kept

    for path in sorted(last - applied, key=len):
        if not owned_elsewhere(path):
            _remove_path(out, path, root)
    named = managedfields.prefixes
    stale = set(named(last, named_only=True)) - set(named(applied, named_only=True)) - applied
    for path in sorted(stale, key=len, reverse=True):
        if not owned_elsewhere(path) and _value_at(out, path, root) == {}:
            _remove_path(out, path, root)
    return out


def _step(node: Any, element: tuple[str, Any], facts: Facts) -> tuple[Any, Facts, Any]:
    """The child of `node` at `element`: (value or _MISSING, its facts, its locator in `node`)."""
    kind, name = element
    if kind == "f":
        if isinstance(node, dict) and name in node:
            return node[name], fieldtypes.facts_of(facts.type, name), name
        return _MISSING, fieldtypes.NONE, None
    if not isinstance(node, list):
        return _MISSING, fieldtypes.NONE, None
    if kind == "i":
        if 0 <= name < len(node):
            return node[name], Facts(type=facts.type, atomic=facts.atomic), name
        return _MISSING, fieldtypes.NONE, None
    elements = managedfields.item_elements(node, facts)
    if elements is None or element not in elements:
        return _MISSING, fieldtypes.NONE, None
    index = elements.index(element)
    return node[index], Facts(type=facts.type, atomic=facts.atomic), index


def _value_at(obj: Any, path: Path, root: str | None) -> Any:
    node, facts = obj, Facts(type=root or "")
    for element in path:
        node, facts, _ = _step(node, element, facts)
        if node is _MISSING:
            return _MISSING
    return node


def _remove_path(obj: Any, path: Path, root: str | None) -> None:
    node, facts = obj, Facts(type=root or "")
    for element in path[:-1]:
        node, facts, _ = _step(node, element, facts)
        if node is _MISSING:
            return
    child, _, locator = _step(node, path[-1], facts)
    if child is not _MISSING:
        del node[locator]
