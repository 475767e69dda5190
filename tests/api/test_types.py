"""Every typed field of every kind, checked at the write boundary as kube-apiserver checks a CRD's structural schema:
an integer takes a JSON integer or a float with no fraction (stored as the integer), a boolean only true or false, a
string only a string, a number an integer or a float; anything else is refused naming the field and the reason.
Readers stay lenient: what a store already holds still parses."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import devplace.placement  # noqa: F401  (registers the fleet kinds, so the property covers them too)
from devplace import errors
from devplace.api import Configuration, Instance, kinds, normalize, validated

Path = tuple[str | int, ...]


def configuration(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "cam", "labels": {"app": "cam"}, "finalizers": ["example.com/keep"]},
        "spec": {
            "discoveryHandler": {
                "name": "debugEcho",
                "discoveryDetails": "descriptions: [foo]",
                "discoveryProperties": [
                    {"name": "user", "valueFrom": {"secretKeyRef": {"name": "auth", "key": "user", "optional": False}}},
                    {"name": "realm", "value": "lab"},
                ],
            },
            "capacity": 2,
            "uniqueDevices": True,
            "deviceKind": "camera",
            "brokerProperties": {"WIDTH": "1280"},
            "brokerSpec": {"brokerPodSpec": {"containers": [{"name": "b", "image": "nginx"}]}},
            **spec,
        },
    }


def instance(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": {
            "name": "cam-8120fe",
            "ownerReferences": [
                {"apiVersion": "akri.sh/v0", "kind": "Configuration", "name": "cam", "controller": True}
            ],
        },
        "spec": {
            "configurationName": "cam",
            "cdiName": "akri.sh/cam=8120fe",
            "capacity": 2,
            "shared": True,
            "nodes": ["node-a"],
            "deviceUsage": {"cam-8120fe-0": "", "cam-8120fe-1": "node-a"},
            "brokerProperties": {"ID": "8120fe"},
            **spec,
        },
    }


def resource_class(*terms: dict[str, Any], **spec: Any) -> dict[str, Any]:
    selector = list(terms) or [{"matchExpressions": [{"key": "vendor", "operator": "In", "values": ["nvidia"]}]}]
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": {"name": "gpu"},
        "spec": {"resourceSelector": selector, "selectionStrategy": "binpack", **spec},
        "status": {"allocatable": "4", "requested": "1"},
    }


def config_map() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}


POOL = {"pool": {"size": 2, "mode": "static", "timeoutSeconds": 5}}
GROUP = {"group": {"members": [{"configuration": "cam", "count": 1}]}}


def put(obj: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    """A copy of `obj` with `value` at `path`, making the maps and lists on the way (a list gets index 0)."""
    out = copy.deepcopy(obj)
    node: Any = out
    for step, after in itertools.pairwise(path):
        present = node[step] if isinstance(node, list) else node.get(step)
        if not isinstance(present, list | dict):
            node[step] = [None] if isinstance(after, int) else {}
        node = node[step]
    node[path[-1]] = value
    return out


def dotted(path: Path) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


def parse(text: str) -> Path:
    steps: list[str | int] = []
    for part in text.split("."):
        name, _, rest = part.partition("[")
        steps.append(name)
        for index in filter(None, rest.replace("]", "").split("[")):
            steps.append(int(index))
    return tuple(steps)


def refused(obj: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(errors.Invalid) as caught:
        validated(obj)
    return [(f.path, f.reason) for f in caught.value.fields]


BASES = {
    "configuration": configuration(),
    "pool": configuration(brokerStrategy=POOL),
    "deployment": configuration(brokerStrategy={"deployment": {"replicas": 1}}),
    "per-configuration": configuration(brokerStrategy={"configuration": {"replicas": 1, "devicesPerPod": 1}}),
    "group": configuration(brokerStrategy=GROUP),
    "instance": instance(),
    "class": resource_class(),
    "class-ref": resource_class({"classRef": "big"}),
    "config-map": config_map(),
}


@pytest.mark.parametrize("base", sorted(BASES))
def test_every_base_object_is_valid_and_stored_as_written(base: str) -> None:
    stored = validated(BASES[base])
    stored["metadata"].pop("namespace", None)  # defaulted for namespaced kinds
    assert stored == BASES[base]


@pytest.mark.parametrize(
    ("base", "path", "value", "reason"),
    [
        # Configuration (Akri's CRD: capacity is `type: integer`)
        ("configuration", "spec.capacity", "2", "must be an integer, not string '2'"),
        ("configuration", "spec.capacity", True, "must be an integer, not boolean true"),
        ("configuration", "spec.capacity", 2.5, "must be an integer, not number 2.5"),
        ("configuration", "spec.capacity", None, "must be an integer, not null"),
        ("configuration", "spec.uniqueDevices", "yes", "must be a boolean, not string 'yes'"),
        ("configuration", "spec.uniqueDevices", 1, "must be a boolean, not number 1"),
        ("configuration", "spec.deviceKind", 7, "must be a string, not number 7"),
        ("configuration", "spec.discoveryHandler.name", True, "must be a string, not boolean true"),
        ("configuration", "spec.discoveryHandler.discoveryDetails", 1, "must be a string, not number 1"),
        (
            "configuration",
            "spec.discoveryHandler.discoveryProperties[0].valueFrom.secretKeyRef.optional",
            "false",
            "must be a boolean, not string 'false'",
        ),
        (
            "configuration",
            "spec.discoveryHandler.discoveryProperties[0].valueFrom.secretKeyRef.key",
            0,
            "must be a string, not number 0",
        ),
        ("configuration", "spec.discoveryHandler.discoveryProperties[1].value", 5, "must be a string, not number 5"),
        ("configuration", "spec.brokerProperties.WIDTH", 1280, "must be a string, not number 1280"),
        ("deployment", "spec.brokerStrategy.deployment.replicas", "3", "must be an integer, not string '3'"),
        (
            "per-configuration",
            "spec.brokerStrategy.configuration.replicas",
            False,
            "must be an integer, not boolean false",
        ),
        (
            "per-configuration",
            "spec.brokerStrategy.configuration.devicesPerPod",
            1.5,
            "must be an integer, not number 1.5",
        ),
        ("pool", "spec.brokerStrategy.pool.size", "2", "must be an integer, not string '2'"),
        ("pool", "spec.brokerStrategy.pool.size", 2.0**53, "must be an integer, not number 9007199254740992.0"),
        ("pool", "spec.brokerStrategy.pool.timeoutSeconds", "5", "must be a number, not string '5'"),
        ("pool", "spec.brokerStrategy.pool.timeoutSeconds", True, "must be a number, not boolean true"),
        ("pool", "spec.brokerStrategy.pool.mode", 1, "must be a string ('static' or 'dynamic'), not number 1"),
        ("group", "spec.brokerStrategy.group.members[0].count", "1", "must be an integer, not string '1'"),
        ("group", "spec.brokerStrategy.group.members[0].configuration", 1, "must be a string, not number 1"),
        # Instance (Akri's CRD: capacity `type: integer`, shared `type: boolean`)
        ("instance", "spec.capacity", "2", "must be an integer, not string '2'"),
        ("instance", "spec.shared", "yes", "must be a boolean, not string 'yes'"),
        ("instance", "spec.shared", 0, "must be a boolean, not number 0"),
        ("instance", "spec.configurationName", 1, "must be a string, not number 1"),
        ("instance", "spec.cdiName", False, "must be a string, not boolean false"),
        ("instance", "spec.nodes[0]", 1, "must be a string, not number 1"),
        ("instance", "spec.deviceUsage.cam-8120fe-0", 5, "must be a string, not number 5"),
        ("instance", "spec.brokerProperties.ID", 8120, "must be a string, not number 8120"),
        # ResourceClass
        ("class", "spec.resourceSelector[0].matchExpressions[0].key", 1, "must be a string, not number 1"),
        ("class", "spec.resourceSelector[0].matchExpressions[0].values[0]", 5, "must be a string, not number 5"),
        ("class-ref", "spec.resourceSelector[0].classRef", True, "must be a string, not boolean true"),
        (
            "class",
            "spec.selectionStrategy",
            1,
            "must be a string ('firstFit', 'binpack', 'spread' or 'optimal'), not number 1",
        ),
        ("class", "status.requested", 3, "must be a string, not number 3"),
        # metadata, the same for every kind
        ("configuration", "metadata.name", 5, "must be a string, not number 5"),
        ("configuration", "metadata.labels.app", 1, "must be a string, not number 1"),
        ("configuration", "metadata.finalizers[0]", 1, "must be a string, not number 1"),
        ("instance", "metadata.ownerReferences[0].controller", "yes", "must be a boolean, not string 'yes'"),
        ("config-map", "metadata.annotations.note", True, "must be a string, not boolean true"),
        ("config-map", "data.k", 1, "must be a string, not number 1"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_the_field_and_why(
    base: str, path: str, value: Any, reason: str
) -> None:
    assert refused(put(BASES[base], parse(path), value)) == [(path, reason)]


def test_every_wrong_field_is_reported_at_once() -> None:
    obj = instance(capacity="2", shared="yes")
    assert refused(obj) == [
        ("spec.capacity", "must be an integer, not string '2'"),
        ("spec.shared", "must be a boolean, not string 'yes'"),
    ]


@pytest.mark.parametrize(
    ("base", "path", "sent", "stored"),
    [
        ("configuration", "spec.capacity", 1e2, 100),
        ("configuration", "spec.capacity", 2.0, 2),
        ("instance", "spec.capacity", 2.0, 2),
        ("pool", "spec.brokerStrategy.pool.size", 9007199254740991.0, 9007199254740991),
        ("group", "spec.brokerStrategy.group.members[0].count", 3.0, 3),
        ("pool", "spec.brokerStrategy.pool.timeoutSeconds", 7.0, 7.0),  # a number field: kept as written
    ],
)
def test_a_float_with_no_fraction_is_an_integer_and_stored_as_one(
    base: str, path: str, sent: float, stored: float
) -> None:
    """kube-apiserver decodes a custom resource's `1e2` to float64 100, its schema check takes a whole float64 for
    `type: integer`, and the object is stored re-encoded (`100`): every reader then sees the integer."""
    steps = parse(path)
    written = validated(put(BASES[base], steps, sent))
    node: Any = written
    for step in steps:
        node = node[step]
    assert (node, type(node)) == (stored, type(stored))
    assert json.dumps(written).count(".0") == (1 if isinstance(stored, float) else 0)
    model: Any = normalize(written)
    for step in steps:
        model = model[step]
    assert (model, type(model)) == (stored, type(stored))


def test_the_json_text_1e2_is_stored_as_the_integer_100() -> None:
    body = json.loads(json.dumps(configuration()).replace('"capacity": 2', '"capacity": 1e2'))
    assert body["spec"]["capacity"] == 100.0
    stored = validated(body)
    assert json.dumps(stored["spec"]["capacity"]) == "100"
    assert Configuration.from_obj(stored).spec.capacity == 100


def test_what_a_store_already_holds_is_still_read_leniently() -> None:
    """Readers (the agent, the controller, the scheduler) parse stored objects without the write boundary's check,
    as an API server reads what it stored before a schema tightened."""
    assert Configuration.from_obj(configuration(capacity="2", uniqueDevices="yes")).spec.capacity == 2
    assert Instance.from_obj(instance(capacity=2.0, shared="true")).spec.shared is True
    assert Instance.without_usage(instance(capacity="2")).spec.capacity == 2


# -- the property: every typed field of every kind, found from the models' JSON schemas --------------------------


def typed_fields(schema: dict[str, Any]) -> Iterator[tuple[Path, str]]:
    """(path, JSON type) of every integer, boolean, string and number field a model's JSON schema declares; a map's
    values are at key `k`, a list's items at index 0."""
    defs = schema.get("$defs", {})

    def walk(node: dict[str, Any], path: Path, refs: frozenset[str]) -> Iterator[tuple[Path, str]]:
        ref = node.get("$ref")
        if ref is not None:
            name = ref.rpartition("/")[2]
            if name not in refs:
                yield from walk(defs[name], path, refs | {name})
            return
        for alternative in node.get("anyOf", ()):
            yield from walk(alternative, path, refs)
        kind = node.get("type")
        if kind == "object":
            for key, sub in node.get("properties", {}).items():
                yield from walk(sub, (*path, key), refs)
            values = node.get("additionalProperties")
            if isinstance(values, dict):
                yield from walk(values, (*path, "k"), refs)
        elif kind == "array" and isinstance(node.get("items"), dict):
            yield from walk(node["items"], (*path, 0), refs)
        elif kind in WRONG:
            yield path, kind

    return walk(schema, (), frozenset())


_finite = st.floats(allow_nan=False, allow_infinity=False)
WRONG: dict[str, tuple[st.SearchStrategy[Any], str]] = {
    "integer": (st.text() | st.booleans() | _finite.filter(lambda f: not f.is_integer()), "an integer"),
    "boolean": (st.text() | st.integers() | _finite, "a boolean"),
    "string": (st.integers() | st.booleans() | _finite, "a string"),
    "number": (st.text() | st.booleans(), "a number"),
}
"""A JSON type -> values of other JSON types (never null: optional fields take it), and how a reason names it."""

FIELDS = sorted(
    {
        (info.kind, info.preferred_api_version, path, kind)
        for info in kinds()
        for path, kind in typed_fields(info.model.model_json_schema(by_alias=True))
        if path not in (("apiVersion",), ("kind",))  # the registry reads these two first (they pick the model)
    },
    key=repr,
)


def test_the_property_walks_every_typed_field_of_the_device_kinds() -> None:
    found = {(kind, dotted(path), json_type) for kind, _, path, json_type in FIELDS}
    assert ("Configuration", "spec.capacity", "integer") in found
    assert ("Configuration", "spec.uniqueDevices", "boolean") in found
    assert ("Configuration", "spec.brokerStrategy.pool.timeoutSeconds", "number") in found
    assert ("Instance", "spec.shared", "boolean") in found
    assert ("Instance", "spec.deviceUsage.k", "string") in found
    assert ("ResourceClass", "spec.resourceSelector[0].matchExpressions[0].operator", "string") in found
    assert ("Project", "spec.path[0]", "string") in found
    assert ("Pod", "metadata.ownerReferences[0].controller", "boolean") in found
    assert {kind for kind, _, _, _ in FIELDS} == {info.kind for info in kinds()}


@given(st.sampled_from(FIELDS).flatmap(lambda f: st.tuples(st.just(f), WRONG[f[3]][0])))
def test_a_value_of_a_wrong_json_type_is_refused_naming_its_field(case: tuple[tuple[str, str, Path, str], Any]) -> None:
    (kind, api_version, path, json_type), value = case
    obj = put({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}, path, value)
    with pytest.raises(errors.Invalid) as caught:
        normalize(obj)
    reasons = {f.path: f.reason for f in caught.value.fields}
    assert dotted(path) in reasons, caught.value.message
    assert reasons[dotted(path)].startswith(f"must be {WRONG[json_type][1]}"), reasons[dotted(path)]
