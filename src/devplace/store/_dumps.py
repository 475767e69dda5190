"""Moving every object between backends: `devplace store export` and `devplace store import`.

A dump is every object of every kind, in (kind, namespace, name) order, one compact JSON object per line (or, with
`yaml`, one YAML document each). What moves is the object as stored: uid, creationTimestamp, generation, labels,
annotations, managedFields, finalizers, status, every field, byte for byte in JSON (the key order kept).

Revisions do not move: a resourceVersion is one backend's counter (etcd's is the cluster's), so a dump leaves
`metadata.resourceVersion` out and `import` gives each object the target's next revision, in dump order. History
(the events a watch replays) does not move either. So a dump of a store is the same bytes whichever backend holds
it, and clients of the old store must relist from the new one (a watch from an old revision is `Gone` or, in a
store that has come further, wrong: restart the parts after a move).

Import refuses, changing nothing, a dump that does not parse (naming the line or document and the field) or that
names an object twice, and a target already holding any object the dump names. It writes through the backend's
`load` (memory, sqlite, etcd: a create that keeps the object's identity instead of stamping a new one); the client
backends (remote, kube) have none: their servers own identity, so a move to a server goes through its own store.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, cast

import yaml

from devplace import errors
from devplace.store._base import Key, Store, decode_json, encode_json, key_of

DumpFormat = Literal["json", "yaml"]
FORMATS: tuple[DumpFormat, ...] = ("json", "yaml")


class _Dumpable(Protocol):
    async def dump(self) -> tuple[int, list[dict[str, Any]]]: ...

    async def load(self, obj: Mapping[str, Any]) -> dict[str, Any]: ...


def _backend(store: Store, verb: str) -> _Dumpable:
    if not (hasattr(store, "dump") and hasattr(store, "load")):
        raise errors.Invalid.field(
            "store",
            f"{verb} needs a memory, sqlite or etcd store, not {type(store).__name__} (its server owns identity)",
        )
    return cast(_Dumpable, store)


def portable(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` without its resourceVersion, the one field a dump leaves out (module docstring)."""
    meta = {key: value for key, value in (obj.get("metadata") or {}).items() if key != "resourceVersion"}
    return {**obj, "metadata": meta}


async def export_objects(store: Store) -> list[dict[str, Any]]:
    """Every object `store` holds, in dump order, each without its resourceVersion (one snapshot)."""
    _, objects = await _backend(store, "export").dump()
    return [portable(obj) for obj in objects]


def format_dump(objects: Iterable[Mapping[str, Any]], fmt: DumpFormat = "json") -> str:
    """The dump text: compact JSON lines, or YAML documents separated by `---`."""
    if fmt == "yaml":
        return "".join("---\n" + yaml.safe_dump(dict(obj), sort_keys=False, width=1_000_000) for obj in objects)
    return "".join(encode_json(obj).decode() + "\n" for obj in objects)


def parse_dump(text: str) -> list[dict[str, Any]]:
    """The objects of a dump (JSON lines, or YAML documents when the first line is not a JSON object); `Malformed` or
    `Invalid` naming the line or document and what is wrong. An object named twice is `Invalid`."""
    stripped = text.lstrip()
    found: list[tuple[str, Any]] = []
    if stripped.startswith("{"):
        for number, line in enumerate(text.split("\n"), 1):  # not splitlines: JSON strings may hold U+2028
            if not line.strip():
                continue
            try:
                found.append((f"line {number}", decode_json(line)))
            except (ValueError, json.JSONDecodeError) as e:
                raise errors.Malformed(f"line {number}: not a JSON object: {e}") from e
    else:
        try:
            documents = list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            raise errors.Malformed(f"not JSON lines nor YAML documents: {e}") from e
        found = [(f"document {number}", doc) for number, doc in enumerate(documents, 1) if doc is not None]
    objects: list[dict[str, Any]] = []
    seen: dict[Key, str] = {}
    for where, obj in found:
        if not isinstance(obj, dict):
            raise errors.Invalid.field(where, f"expected an object, got {type(obj).__name__}")
        try:
            key = key_of(obj)
        except errors.Invalid as e:
            raise errors.Invalid.field(where, e.message) from e
        if key in seen:
            raise errors.Invalid.field(where, f"{key} is also {seen[key]}")
        seen[key] = where
        objects.append(obj)
    return objects


async def import_objects(store: Store, objects: Sequence[Mapping[str, Any]]) -> int:
    """Write `objects` (a parsed dump) into `store`, keeping their identity, each at the next revision; how many.
    `AlreadyExists` naming the objects the store holds already, before anything is written."""
    target = _backend(store, "import")
    _, held = await target.dump()
    present = {key_of(obj) for obj in held}
    clashing = [str(key_of(obj)) for obj in objects if key_of(obj) in present]
    if clashing:
        more = f" and {len(clashing) - 5} more" if len(clashing) > 5 else ""
        raise errors.AlreadyExists(f"the store already holds {', '.join(clashing[:5])}{more}: nothing was imported")
    for obj in objects:
        await target.load(portable(obj))
    return len(objects)
