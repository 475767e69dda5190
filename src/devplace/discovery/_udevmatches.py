"""Which udev devices a `udevRules` list selects, and the devices the `udev` handler reports for them: Akri's rules.

Pure: over `UdevRecord`s (plain values, or the pyudev shell's lazy ones), no I/O. Within one rule (Akri asks one libudev
enumerator per rule), the filters libudev's enumerator takes (`UdevFilter.matched_by == "glob"`) follow libudev 252:
- globs are fnmatch(3) without flags (`*` crosses `/`, `\\x` is a literal x, `[!...]` negates);
- several `KERNEL==` (sysname), several `SUBSYSTEM==`, several `ENV{k}==` (the key is a glob too) each match when any
  one of them does; every `ATTR{k}==` and every `TAG==` (exact) must hold; any `SUBSYSTEM!=` or `ATTR{k}!=` that
  matches drops the device; `ATTR{k}==` on a missing attribute fails, `!=` on one keeps; `DEVPATH==` filters nothing
  (libudev's `add_syspath` only adds a device to the scan);
then the others, in the rule's order, as Rust regular expressions that must cover the whole value (the leftmost-first
match, from the start to the end: `re.search` and its span, not `fullmatch`):
- `KERNEL!=`, `DEVPATH!=` (devpath without `/sys`): the device's value does not match;
- `ENV{k}!=`, `TAG!=` (each of the `:`-separated `TAGS`): keep a device lacking the property;
- `DRIVER`: the device's own driver (none: `==` fails, `!=` holds);
- `KERNELS`, `SUBSYSTEMS`, `DRIVERS`, `ATTRS{k}`, `TAGS`: the device or any ancestor (`!=`: none of them).
Rules are a union. A match without a device node counts as its nearest ancestor with one (that is the device id),
or as itself when none has one (then it has no node to give a container). `groupRecursive`: a match whose devpath
starts with another's (as strings: `.../1-1` takes `.../1-10`) joins that one's device; its members' nodes are
`UDEV_DEVNODE_<i>` (i in devpath order; Akri's order is a hash set's) and each a device spec.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from devplace.api import UdevFilter
from devplace.discovery._devices import Device, DeviceSpec

UDEV_DEVNODE = "UDEV_DEVNODE"
UDEV_DEVPATH = "UDEV_DEVPATH"
TAGS = "TAGS"


class UdevLike(Protocol):
    """One udev device as the rules see it. `devpath` is without `/sys`; `attributes` may be lazy (the pyudev shell
    reads sysfs only for the keys a rule names); `parent` is the next ancestor, None at the top."""

    @property
    def devpath(self) -> str: ...
    @property
    def sysname(self) -> str: ...
    @property
    def subsystem(self) -> str | None: ...
    @property
    def driver(self) -> str | None: ...
    @property
    def devnode(self) -> str | None: ...
    @property
    def properties(self) -> Mapping[str, str]: ...
    @property
    def attributes(self) -> Mapping[str, str]: ...
    @property
    def parent(self) -> UdevLike | None: ...


@dataclass(frozen=True, eq=False)
class UdevRecord:
    """A `UdevLike` as plain values (tests, captures)."""

    devpath: str
    sysname: str
    subsystem: str | None = None
    driver: str | None = None
    devnode: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    attributes: Mapping[str, str] = field(default_factory=dict)
    parent: UdevRecord | None = None


def lineage(record: UdevLike) -> Iterator[UdevLike]:
    """The device, then each ancestor up to the top."""
    at: UdevLike | None = record
    while at is not None:
        yield at
        at = at.parent


@dataclass(frozen=True)
class Match:
    """A matched device as reported: its devpath (the id) and its node, if any."""

    devpath: str
    devnode: str | None


# -- globs (fnmatch(3), no flags) and whole-value regular expressions --------------------------------------------------


@functools.lru_cache(maxsize=4096)
def glob_pattern(glob: str) -> re.Pattern[str]:
    """fnmatch(3) with no flags as a compiled regular expression (an unclosed `[` is a literal, as in glibc)."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        i += 1
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "\\":
            if i == n:
                return re.compile(r"(?!)")  # glibc: a pattern ending in a lone backslash matches nothing
            out.append(re.escape(glob[i]))
            i += 1
        elif c == "[":
            bracket = _bracket(glob, i)
            if bracket is None:
                out.append(re.escape(c))
            else:
                out.append(bracket[0])
                i = bracket[1]
        else:
            out.append(re.escape(c))
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _bracket(glob: str, i: int) -> tuple[str, int] | None:
    """The bracket expression starting after the `[` at `i - 1` as a regex and the index after its `]`; None when it
    is not closed (the `[` is then a literal). A `]` first is a member, `\\` escapes, `a-z` is a range."""
    n = len(glob)
    negate = i < n and glob[i] in "!^"
    j = i + 1 if negate else i
    members: list[tuple[str, str]] = []
    while True:
        if j >= n:
            return None
        c = glob[j]
        if c == "]" and (members or j > (i + 1 if negate else i)):
            j += 1
            break
        if c == "\\" and j + 1 < n:
            c = glob[j + 1]
            j += 1
        j += 1
        if j + 1 == n and glob[j] == "-":
            return "(?!)", n  # glibc: a range cut off by the pattern's end matches nothing
        if j + 1 < n and glob[j] == "-" and glob[j + 1] != "]":
            end = glob[j + 1]
            j += 2
            if end == "\\" and j < n:
                end = glob[j]
                j += 1
            members.append((c, end))
        else:
            members.append((c, c))
    parts = [re.escape(a) if a == b else f"{re.escape(a)}-{re.escape(b)}" for a, b in members if a <= b]
    if not parts:
        return ("." if negate else "(?!)"), j
    return f"[{'^' if negate else ''}{''.join(parts)}]", j


def glob_match(glob: str, value: str) -> bool:
    return glob_pattern(glob).match(value) is not None


@functools.lru_cache(maxsize=4096)
def _regex(value: str) -> re.Pattern[str]:
    return re.compile(value)


def regex_match(regex: str, value: str) -> bool:
    """Akri's `is_regex_match`: the leftmost-first match must start at 0 and end at the value's end."""
    found = _regex(regex).search(value)
    return found is not None and found.start() == 0 and found.end() == len(value)


# -- one rule ----------------------------------------------------------------------------------------------------------


def matches_rule(record: UdevLike, filters: Sequence[UdevFilter]) -> bool:
    """Whether `record` passes every filter of one rule (an empty rule passes every device)."""
    return _passes_enumerator(record, filters) and all(
        _passes_regex(record, f) for f in filters if f.matched_by == "regex"
    )


def _passes_enumerator(record: UdevLike, filters: Sequence[UdevFilter]) -> bool:
    kernels: list[str] = []
    subsystems: list[str] = []
    envs: list[tuple[str, str]] = []
    for f in filters:
        if f.matched_by != "glob":
            continue
        if f.field == "KERNEL":
            kernels.append(f.value)
        elif f.field == "SUBSYSTEM" and f.op == "==":
            subsystems.append(f.value)
        elif f.field == "SUBSYSTEM":
            if record.subsystem is not None and glob_match(f.value, record.subsystem):
                return False
        elif f.field == "ATTR":
            value = record.attributes.get(f.key)
            hit = value is not None and glob_match(f.value, value)
            if hit != (f.op == "=="):
                return False
        elif f.field == "ENV":
            envs.append((f.key, f.value))
        elif f.field == "TAG" and f.value not in _tags(record):
            return False
    if kernels and not any(glob_match(k, record.sysname) for k in kernels):
        return False
    if subsystems and (record.subsystem is None or not any(glob_match(s, record.subsystem) for s in subsystems)):
        return False
    return not envs or any(
        glob_match(key, name) and glob_match(value, current)
        for key, value in envs
        for name, current in record.properties.items()
    )


def _tags(record: UdevLike) -> list[str]:
    raw = record.properties.get(TAGS)
    return [] if raw is None else raw.split(":")


def _passes_regex(record: UdevLike, f: UdevFilter) -> bool:
    equal = f.op == "=="
    if f.field == "DEVPATH":
        return not regex_match(f.value, record.devpath)
    if f.field == "KERNEL":
        return not regex_match(f.value, record.sysname)
    if f.field == "TAG":
        return not any(regex_match(f.value, tag) for tag in _tags(record))
    if f.field == "ENV":
        value = record.properties.get(f.key)
        return value is None or not regex_match(f.value, value)
    if f.field == "DRIVER":
        return (not equal) if record.driver is None else regex_match(f.value, record.driver) == equal
    return _anywhere(record, f) == equal


def _anywhere(record: UdevLike, f: UdevFilter) -> bool:
    """Whether the device or an ancestor has a value of `f`'s field matching it (KERNELS, SUBSYSTEMS, ...)."""
    for at in lineage(record):
        if f.field == "KERNELS":
            values: Iterable[str | None] = (at.sysname,)
        elif f.field == "SUBSYSTEMS":
            values = (at.subsystem,)
        elif f.field == "DRIVERS":
            values = (at.driver,)
        elif f.field == "ATTRS":
            values = (at.attributes.get(f.key),)
        else:  # TAGS
            values = _tags(at)
        if any(v is not None and regex_match(f.value, v) for v in values):
            return True
    return False


# -- rules into devices ------------------------------------------------------------------------------------------------


def node_holder(record: UdevLike) -> Match:
    """What a match counts as: itself with its node, else its nearest ancestor with one, else itself without."""
    for at in lineage(record):
        if at.devnode:
            return Match(at.devpath, at.devnode)
    return Match(record.devpath, None)


def matched(records: Iterable[UdevLike], rules: Sequence[Sequence[UdevFilter]]) -> set[Match]:
    """Every match of any rule, each as `node_holder` says (a set: rules are a union)."""
    found: set[Match] = set()
    for record in records:
        if any(matches_rule(record, rule) for rule in rules):
            found.add(node_holder(record))
    return found


def grouped(matches: Iterable[Match], recursive: bool) -> dict[str, list[Match]]:
    """Device id -> its members, in devpath order. Not `recursive`: each match alone. `recursive`: Akri's
    `insert_device_with_relatives` over the matches in devpath order (a devpath starting with a kept one's joins it)."""
    ordered = sorted(set(matches), key=lambda m: (m.devpath, m.devnode or ""))
    if not recursive:
        groups: dict[str, list[Match]] = {}
        for m in ordered:
            groups.setdefault(m.devpath, []).append(m)
        return groups
    groups = {}
    for m in ordered:  # in devpath order a prefix comes before what it prefixes, so nothing is ever swallowed later
        owner = next((key for key in groups if m.devpath.startswith(key)), None)
        groups.setdefault(m.devpath if owner is None else owner, []).append(m)
    return groups


def udev_devices(
    records: Iterable[UdevLike],
    rules: Sequence[Sequence[UdevFilter]],
    *,
    group_recursive: bool = False,
    permissions: str = "rwm",
) -> list[Device]:
    """The `udev` handler's device list for these records and rules, by id (not shared: a udev device is local)."""
    return devices_of(grouped(matched(records, rules), group_recursive), group_recursive, permissions)


def devices_of(groups: Mapping[str, Sequence[Match]], group_recursive: bool, permissions: str) -> list[Device]:
    """One device per group, by id: `UDEV_DEVPATH` = the id, each member's node a `UDEV_DEVNODE` and a device spec."""
    devices: list[Device] = []
    for devpath, members in sorted(groups.items()):
        properties = {UDEV_DEVPATH: devpath}
        specs: list[DeviceSpec] = []
        nodes = [m.devnode for m in members if m.devnode]
        for i, node in enumerate(nodes):
            properties[f"{UDEV_DEVNODE}_{i}" if group_recursive else UDEV_DEVNODE] = node
            specs.append(DeviceSpec(container_path=node, host_path=node, permissions=permissions))
        devices.append(Device(id=devpath, properties=properties, shared=False, device_specs=tuple(specs)))
    return devices
