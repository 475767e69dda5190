"""Scenario files: a simulated cluster, what happens to it, and what must come of it, as YAML a user writes.

A scenario (`kind: Scenario`, `apiVersion: devplace.io/v1alpha1`) names the simulated nodes and the devices each one
sees, the manifests applied first, the fleet's `/v2` requests (seed 004's clusters and intents), and a timeline of
`steps`. A step does at most one thing (`apply`, `delete`, `plug`, `unplug`, `node-down`, `node-up`,
`restart-agent`, `restart-kubelet`, `restart-part`, `advance`, `settle`, `run-pod`, `plan`, `approve`, `instantiate`,
`terminate`), may narrate (`say`) and may check (`expect`: counts, pod phases, slot holders, what a node's kubelet
sees as available, where the fleet placed each app and why it rejected a cluster, an error the step must fail with).

Everything here is pure: `load_scenario` parses the text and refuses a bad file before anything runs. Every problem is
reported at once, each with the line and column it stands at (`scenario.yaml:12:9: steps[3].plug.nodes[0]: unknown
node "node-z"`), from three sources: YAML syntax, the schema (pydantic models, `extra` fields forbidden), and the
references between parts (a node a step names must be declared, a device a step unplugs must have been plugged by
then, an `expect` on a node or device the scenario does not have). `scenario_schema` is the JSON Schema of the same
models (`devplace sim schema` prints it), so editors can check a file as the loader does.

Durations are Kubernetes' and Go's spelling (`90s`, `5m`, `1h30m`, `250ms`) or a number of seconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema, model_validator

from devplace import errors
from devplace.api import DevicePaths, lookup
from devplace.errors import FieldError
from devplace.scheduler import Strategy

API_VERSION = "devplace.io/v1alpha1"
KIND = "Scenario"

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)")


def parse_duration(value: object) -> float:
    """Seconds from `90s`, `5m`, `1h30m`, `250ms` (Go's `time.ParseDuration` units) or a non-negative number."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text such as 30s, 5m, 1h30m")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if not isinstance(value, str) or not value:
        raise ValueError("a duration is a number of seconds or text such as 30s, 5m, 1h30m")
    text = value.strip()
    pos, total = 0, 0.0
    while pos < len(text):
        match = _DURATION.match(text, pos)
        if match is None:
            raise ValueError(f"malformed duration {value!r}: use units h, m, s, ms (e.g. 30s, 5m, 1h30m)")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos == 0:
        raise ValueError(f"malformed duration {value!r}")
    return total


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": r"^((\d+(\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns))+$"},
            ],
            "description": "seconds, or a Go duration such as 30s, 5m, 1h30m",
        }
    ),
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class Settings(_Model):
    """How the simulated cluster runs (`devplace.sim.Fleet`'s options)."""

    strategy: Strategy = "firstFit"
    dra: bool = False
    device_paths: DevicePaths = Field("both", alias="devicePaths")
    scheduler: bool = True
    controller: bool = True
    release_grace: Duration = Field(300.0, alias="releaseGrace")
    offline_grace: Duration = Field(300.0, alias="offlineGrace")
    node_grace: Duration = Field(300.0, alias="nodeGrace")
    pending_grace: Duration = Field(300.0, alias="pendingGrace")
    podresources_poll: Duration = Field(10.0, alias="podresourcesPoll")
    settle_timeout: Duration = Field(30.0, alias="settleTimeout", description="real seconds a step may take to settle")
    resource_prefix: str | None = Field(None, alias="resourcePrefix")
    transport: Literal["unix", "inprocess"] = Field(
        "unix",
        description="how kubelets and agents talk: real gRPC on unix sockets, or in process (the same messages and "
        "calls without sockets: for hundreds of nodes)",
    )


class NodeSpec(_Model):
    name: str = Field(min_length=1, max_length=253)
    labels: dict[str, str] = Field(default_factory=dict)


class DeviceSpec(_Model):
    id: str = Field(min_length=1)
    nodes: list[str] = Field(min_length=1, description="the nodes that see the device (two or more: shared)")
    properties: dict[str, str] = Field(default_factory=dict)


class FileRef(_Model):
    file: str = Field(min_length=1, description="a path relative to the scenario file")


class FleetRequest(_Model):
    post: str = Field(pattern=r"^/v2/", description="an EMCO /v2 collection path")
    body: dict[str, Any]


class FleetSpec(_Model):
    """The fleet's /v2 requests, in order (inline, or `file:` holding `requests:` as examples/fleet/seed-004.yaml)."""

    requests: list[FleetRequest] = Field(default_factory=list)
    file: str | None = None


class ObjectRef(_Model):
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)
    namespace: str | None = None


class Plug(_Model):
    device: str = Field(min_length=1)
    nodes: list[str] = Field(min_length=1)
    properties: dict[str, str] = Field(default_factory=dict)


class Unplug(_Model):
    device: str = Field(min_length=1)
    nodes: list[str] | None = Field(None, description="only from these nodes; all when absent")


class RunPod(_Model):
    name: str = Field(min_length=1)
    namespace: str = "default"
    node: str | None = Field(None, description="bind to this node; absent: the scheduler places the pod")
    requests: dict[str, int | str] = Field(default_factory=dict)
    spec: dict[str, Any] = Field(default_factory=dict, description="more pod spec fields (nodeSelector, ...)")


class Expect(_Model):
    """What must hold after the step. Every key is optional; each one present is checked exactly."""

    counts: dict[str, int] | None = Field(
        None, description="objects per kind, optionally filtered: `pods`, `pods[phase=Running]`, `instances[x=y]`"
    )
    phases: dict[str, str] | None = Field(None, description="pod (`name` or `namespace/name`) -> status.phase")
    holders: dict[str, dict[str, int]] | None = Field(
        None,
        description="`<configuration>/<device id>` -> slots per holder: `free`, `<node>` (Instance-level), "
        "`<node> (CL)` (Configuration-level), `claim <namespace>/<name>` (DRA)",
    )
    slots: dict[str, dict[Literal["free", "held", "holders"], int]] | None = Field(
        None,
        description="`<configuration>/<device id>` -> `free` slots, `held` slots, distinct `holders` (for races "
        "whose winners are not known in advance)",
    )
    fields: dict[str, dict[str, Any]] | None = Field(
        None,
        description="`<Kind>/<name>` or `<Kind>/<namespace>/<name>` (a namespaced kind defaults to `default`), or "
        "`decision` (the last plan or instantiate) -> field path -> its exact value. A path is dotted keys; `[N]` is a "
        "list index, `[key=value]` the first list item whose key is value, `[text]` a map key that may hold dots: "
        "`status.conditions[type=PodScheduled].message`, `metadata.annotations[example.io/key]`, "
        "`apps[name=fwall].clusters[0].score`",
    )
    available: dict[str, dict[str, int]] | None = Field(
        None,
        description="node -> resource -> free devices as its kubelet sees them; a resource may be written "
        "`device:<configuration>/<device id>` for that device's Instance-level resource",
    )
    placement: dict[str, list[str]] | None = Field(
        None, description="app -> the clusters (`provider/cluster`) the last plan or instantiate chose"
    )
    rejected: dict[str, dict[str, str]] | None = Field(
        None, description="app -> cluster -> a text the rejection reason must contain"
    )
    error: str | None = Field(None, description="the step must fail with an error containing this text")


ACTIONS: tuple[str, ...] = (
    "apply",
    "delete",
    "plug",
    "unplug",
    "node-down",
    "node-up",
    "restart-agent",
    "restart-kubelet",
    "restart-part",
    "advance",
    "settle",
    "run-pod",
    "plan",
    "approve",
    "instantiate",
    "terminate",
)
"""Every step action, in the order the docs list them."""


class Step(_Model):
    """One moment of the timeline: at most one action, optional narration and expectations."""

    name: str | None = None
    say: str | None = None
    apply: list[dict[str, Any]] | dict[str, Any] | None = Field(
        None, description="a manifest, a list of manifests, or {file: path}"
    )
    delete: ObjectRef | None = None
    plug: Plug | None = None
    unplug: Unplug | None = None
    node_down: str | None = Field(None, alias="node-down")
    node_up: str | None = Field(None, alias="node-up")
    restart_agent: str | None = Field(None, alias="restart-agent")
    restart_kubelet: str | None = Field(None, alias="restart-kubelet")
    restart_part: Literal["scheduler", "controller", "classes"] | None = Field(None, alias="restart-part")
    advance: Duration | None = Field(None, description="move simulated time forward, settling at every poll period")
    settle: bool | None = None
    run_pod: RunPod | None = Field(None, alias="run-pod")
    plan: str | None = Field(None, description="a deployment intent group's /v2 path: a dry run")
    approve: str | None = None
    instantiate: str | None = None
    terminate: str | None = None
    expect: Expect | None = None

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        present = self.actions()
        if len(present) > 1:
            raise ValueError(f"a step does one thing; this one has {', '.join(present)}")
        return self

    def actions(self) -> list[str]:
        return [a for a in ACTIONS if getattr(self, a.replace("-", "_")) is not None]

    @property
    def action(self) -> str | None:
        """The step's action (`plug`, `node-down`, ...), None for a step that only narrates or checks."""
        present = self.actions()
        return present[0] if present else None

    @property
    def argument(self) -> Any:
        action = self.action
        return None if action is None else getattr(self, action.replace("-", "_"))

    def title(self) -> str:
        """How reports and the live view name the step."""
        if self.name:
            return self.name
        action = self.action
        if action is None:
            return "check" if self.expect else "note"
        arg = self.argument
        if isinstance(arg, ObjectRef):
            return f"{action} {arg.kind} {arg.name}"
        if isinstance(arg, BaseModel):
            first = next(iter(arg.model_dump(exclude_none=True).values()), "")
            return f"{action} {first}".strip()
        if isinstance(arg, list | dict):
            count = len(arg) if isinstance(arg, list) else 1
            return f"{action} {count} manifest{'s' if count != 1 else ''}"
        if isinstance(arg, str):
            return f"{action} {arg}"
        if action == "advance":
            return f"advance {arg:g}s"
        return action


class ScenarioSpec(_Model):
    settings: Settings = Field(default_factory=Settings)
    nodes: list[NodeSpec] = Field(default_factory=list)
    devices: list[DeviceSpec] = Field(default_factory=list)
    manifests: list[dict[str, Any]] = Field(
        default_factory=list, description="applied in order before the first step; an item {file: path} reads a file"
    )
    fleet: FleetSpec | None = None
    steps: list[Step] = Field(default_factory=list)


class Metadata(_Model):
    name: str = Field(min_length=1)
    description: str | None = None


class ScenarioDocument(_Model):
    api_version: Literal["devplace.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["Scenario"]
    metadata: Metadata
    spec: ScenarioSpec


@dataclass(frozen=True)
class Scenario:
    """A scenario as loaded: the document, where it came from (for files it names), and where each field stands."""

    document: ScenarioDocument
    source: str
    base: Path
    positions: Mapping[tuple[str | int, ...], tuple[int, int]]

    @property
    def name(self) -> str:
        return self.document.metadata.name

    @property
    def spec(self) -> ScenarioSpec:
        return self.document.spec

    def where(self, path: Sequence[str | int]) -> str:
        """`source:line:column` of a field path (the nearest known ancestor when the field itself is absent)."""
        return f"{self.source}:{_position(self.positions, path)}"


def _position(positions: Mapping[tuple[str | int, ...], tuple[int, int]], path: Sequence[str | int]) -> str:
    key = tuple(path)
    while key not in positions and key:
        key = key[:-1]
    line, column = positions.get(key, (1, 1))
    return f"{line}:{column}"


def field_path(path: Sequence[str | int]) -> str:
    """`spec.steps[3].plug.nodes[0]`: a field path as errors name it."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# -- reading YAML with positions -----------------------------------------------------------------------------------


def _walk(node: yaml.Node, path: tuple[str | int, ...], out: dict[tuple[str | int, ...], tuple[int, int]]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = (*path, str(key.value))
            out[child] = (key.start_mark.line + 1, key.start_mark.column + 1)
            _walk(value, child, out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, index)
            out[child] = (item.start_mark.line + 1, item.start_mark.column + 1)
            _walk(item, child, out)


def _positions(text: str) -> dict[tuple[str | int, ...], tuple[int, int]]:
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    out: dict[tuple[str | int, ...], tuple[int, int]] = {(): (1, 1)}
    if node is not None:
        _walk(node, (), out)
    return out


# -- loading -------------------------------------------------------------------------------------------------------


def load_scenario(text: str, source: str = "<scenario>", base: Path | None = None) -> Scenario:
    """Parse and check a scenario; raise `errors.Invalid` listing every problem with its line and column."""
    try:
        raw = yaml.safe_load(text)
        positions = _positions(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"
        problem = getattr(e, "problem", None) or str(e)
        raise errors.Invalid(f"{source}:{where}: malformed YAML: {problem}") from e
    if not isinstance(raw, dict):
        raise errors.Invalid(f"{source}:1:1: a scenario is a mapping with apiVersion, kind, metadata and spec")
    try:
        document = ScenarioDocument.model_validate(raw)
    except ValidationError as e:
        problems = [(_loc(err["loc"]), _reason(err)) for err in e.errors()]
        raise _invalid(source, positions, problems) from e
    scenario = Scenario(document, source, base or Path.cwd(), positions)
    problems = list(reference_problems(document.spec))
    if problems:
        raise _invalid(source, positions, problems)
    return scenario


def load_scenario_file(path: Path) -> Scenario:
    """`load_scenario` of a file; the files it names are relative to its directory."""
    try:
        text = path.read_text()
    except OSError as e:
        raise errors.Invalid.field("scenario", f"cannot read {path}: {e.strerror or e}") from e
    return load_scenario(text, str(path), path.parent)


def _loc(loc: Sequence[int | str]) -> tuple[str | int, ...]:
    # pydantic names union members (`list[...]`, `function-after[...]`) in locations; they are not fields.
    return tuple(p for p in loc if isinstance(p, int) or ("[" not in p and p != "function-after"))


def _reason(err: Mapping[str, Any]) -> str:
    kind = err.get("type")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required"
    message = str(err.get("msg", "invalid"))
    return message.removeprefix("Value error, ")


def _invalid(
    source: str,
    positions: Mapping[tuple[str | int, ...], tuple[int, int]],
    problems: Sequence[tuple[Sequence[str | int], str]],
) -> errors.Invalid:
    seen: set[tuple[tuple[str | int, ...], str]] = set()
    lines: list[str] = []
    fields: list[FieldError] = []
    for path, reason in problems:
        if (tuple(path), reason) in seen:
            continue
        seen.add((tuple(path), reason))
        name = field_path(path) or "scenario"
        lines.append(f"{source}:{_position(positions, path)}: {name}: {reason}")
        fields.append(FieldError(name, reason))
    return errors.Invalid("\n".join(lines), fields)


# -- references between parts --------------------------------------------------------------------------------------

_STEPS = ("spec", "steps")


def reference_problems(spec: ScenarioSpec) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Names that point nowhere: nodes, devices, duplicates. Devices are tracked along the timeline."""
    nodes: set[str] = set()
    for i, node in enumerate(spec.nodes):
        if node.name in nodes:
            yield ("spec", "nodes", i, "name"), f"node {node.name!r} is declared twice"
        nodes.add(node.name)
    devices: set[str] = set()
    for i, device in enumerate(spec.devices):
        if device.id in devices:
            yield ("spec", "devices", i, "id"), f"device {device.id!r} is declared twice"
        devices.add(device.id)
        for j, seen_by in enumerate(device.nodes):
            if seen_by not in nodes:
                yield ("spec", "devices", i, "nodes", j), _unknown_node(seen_by, nodes)
    for i, step in enumerate(spec.steps):
        yield from _step_problems((*_STEPS, i), step, nodes, devices)


def _unknown_node(name: str, nodes: set[str]) -> str:
    known = ", ".join(sorted(nodes)) or "none declared"
    return f"unknown node {name!r} (nodes: {known})"


def _step_problems(
    at: tuple[str | int, ...], step: Step, nodes: set[str], devices: set[str]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    for key in ("node-down", "node-up", "restart-agent", "restart-kubelet"):
        value = getattr(step, key.replace("-", "_"))
        if value is not None and value not in nodes:
            yield (*at, key), _unknown_node(value, nodes)
    if step.plug is not None:
        for j, node in enumerate(step.plug.nodes):
            if node not in nodes:
                yield (*at, "plug", "nodes", j), _unknown_node(node, nodes)
        devices.add(step.plug.device)
    if step.unplug is not None:
        if step.unplug.device not in devices:
            yield (*at, "unplug", "device"), f"unknown device {step.unplug.device!r}: not declared nor plugged before"
        for j, node in enumerate(step.unplug.nodes or []):
            if node not in nodes:
                yield (*at, "unplug", "nodes", j), _unknown_node(node, nodes)
    if step.run_pod is not None and step.run_pod.node is not None and step.run_pod.node not in nodes:
        yield (*at, "run-pod", "node"), _unknown_node(step.run_pod.node, nodes)
    if step.expect is not None:
        yield from _expect_problems((*at, "expect"), step.expect, nodes, devices)


def _expect_problems(
    at: tuple[str | int, ...], expect: Expect, nodes: set[str], devices: set[str]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    for node, resources in (expect.available or {}).items():
        if node not in nodes:
            yield (*at, "available", node), _unknown_node(node, nodes)
        for resource in resources:
            if resource.startswith("device:"):
                yield from _device_key_problems((*at, "available", node, resource), resource[7:], devices)
    for key in expect.holders or {}:
        yield from _device_key_problems((*at, "holders", key), key, devices)
    for key in expect.slots or {}:
        yield from _device_key_problems((*at, "slots", key), key, devices)
    for key, paths in (expect.fields or {}).items():
        yield from _fields_problems((*at, "fields", key), key, paths)
    for key in expect.counts or {}:
        parsed = parse_count_key(key)
        if parsed is None:
            yield (*at, "counts", key), "write a kind, optionally with filters: pods[phase=Running,node=node-a]"
            continue
        try:
            lookup(parsed[0])
        except errors.Invalid:
            yield (*at, "counts", key), f"unknown kind {parsed[0]!r} (write a kind or its plural: pods, instances)"


def _fields_problems(
    at: tuple[str | int, ...], key: str, paths: Mapping[str, Any]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    if key != DECISION:
        parsed = parse_object_key(key)
        if parsed is None:
            yield at, f"write <Kind>/<name>, <Kind>/<namespace>/<name> or {DECISION}, not {key!r}"
        else:
            try:
                lookup(parsed[0])
            except errors.Invalid:
                yield at, f"unknown kind {parsed[0]!r} (write a kind or its plural: Pod, pods)"
    for path in paths:
        if parse_field_path(path) is None:
            yield (*at, path), "write a field path: status.phase, items[0].name, conditions[type=Ready].status"


def _device_key_problems(
    at: tuple[str | int, ...], key: str, devices: set[str]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    configuration, _, device = key.partition("/")
    if not configuration or not device:
        yield at, f"write <configuration>/<device id>, not {key!r}"
    elif device not in devices:
        yield at, f"unknown device {device!r}: not declared nor plugged before this step"


_COUNT_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9.]*)(?:\[([^\]]*)\])?$")


def parse_count_key(key: str) -> tuple[str, dict[str, str]] | None:
    """`pods[phase=Running,node=node-a]` -> ("pods", {"phase": "Running", "node": "node-a"}); None when malformed.

    Filters: `phase` (status.phase), `node` (spec.nodeName or, for Instances, one of spec.nodes), `namespace`,
    `configuration` (an Instance's spec.configurationName or the akri.sh/configuration label), any other key a label.
    """
    match = _COUNT_KEY.match(key.strip())
    if match is None:
        return None
    filters: dict[str, str] = {}
    for part in (match.group(2) or "").split(","):
        if not part.strip():
            continue
        name, eq, value = part.partition("=")
        if not eq or not name.strip():
            return None
        filters[name.strip()] = value.strip()
    return match.group(1), filters


DECISION = "decision"
"""The `expect.fields` key naming the last plan or instantiate document rather than a stored object."""

FieldStep = str | int | tuple[str, str]


def parse_object_key(key: str) -> tuple[str, str | None, str] | None:
    """`Pod/trainer-1` -> ("Pod", None, "trainer-1"); `Pod/ns/name` -> ("Pod", "ns", "name"); None when malformed."""
    parts = key.split("/")
    if len(parts) == 2 and all(parts):
        return parts[0], None, parts[1]
    if len(parts) == 3 and all(parts):
        return parts[0], parts[1], parts[2]
    return None


def parse_field_path(path: str) -> list[FieldStep] | None:
    """`status.conditions[type=PodScheduled].message` -> ["status", "conditions", ("type", "PodScheduled"),
    "message"]: a key, `[N]` an index, `[key=value]` the first list item whose key is value, `[text]` a map key that
    may hold dots. None when malformed (an empty key or brackets, an unclosed bracket, a trailing dot)."""
    out: list[FieldStep] = []
    i, n = 0, len(path)
    while i < n:
        if path[i] == "[":
            end = path.find("]", i)
            inner = path[i + 1 : end] if end > i else ""
            if not inner:
                return None
            name, eq, value = inner.partition("=")
            if inner.isdigit():
                out.append(int(inner))
            elif eq:
                if not name:
                    return None
                out.append((name, value))
            else:
                out.append(inner)
            i = end + 1
        else:
            j = i
            while j < n and path[j] not in ".[]":
                j += 1
            if j == i:
                return None
            out.append(path[i:j])
            i = j
        if i < n and path[i] == ".":
            i += 1
            if i == n or path[i] in ".[]":
                return None
        elif i < n and path[i] != "[":
            return None
    return out or None


def scenario_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (draft 2020-12), from the models `load_scenario` validates with."""
    schema = ScenarioDocument.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "devplace Scenario"
    return schema
