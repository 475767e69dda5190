"""`fieldtypes.TYPES` is Kubernetes' OpenAPI, transcribed: derived again here from the schema `kubernetes-validate`
ships, it must come out the same (so a Kubernetes upgrade that changes a merge key fails this test, not a user)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from devplace.kubeapi import _fieldtypes as fieldtypes
from devplace.kubeapi._fieldtypes import Facts

SCHEMA_VERSION = "v1.37.0-local"


@cache
def definitions() -> dict[str, Any]:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    root = Path(str(resources.files(kubernetes_validate))) / "kubernetes-json-schema" / SCHEMA_VERSION
    found: dict[str, Any] = json.loads((root / "_definitions.json").read_text())["$defs"]
    return found


def _ref(schema: dict[str, Any]) -> str | None:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            return _ref(schema[key])
    if schema.get("allOf"):
        return _ref(schema["allOf"][0])
    return None


def _facts(schema: dict[str, Any], sub: str) -> Facts | None:
    defs = definitions()
    ref = _ref(schema)
    atomic = schema.get("x-kubernetes-map-type") == "atomic" or (
        ref is not None and defs.get(ref, {}).get("x-kubernetes-map-type") == "atomic"
    )
    list_type = schema.get("x-kubernetes-list-type")
    facts = Facts(
        type=sub,
        list_type=list_type if list_type in ("map", "set") else "atomic",
        keys=tuple(schema.get("x-kubernetes-list-map-keys", ())),
        merge_key=schema.get("x-kubernetes-patch-merge-key", ""),
        strategy=schema.get("x-kubernetes-patch-strategy", ""),
        atomic=atomic,
    )
    return None if facts == Facts() else facts


def derived() -> dict[str, dict[str, Facts]]:
    """The table, from the schema: every type reachable from the built-in roots with facts at or below it."""
    defs = definitions()
    short = {name.rsplit(".", 1)[-1]: name for name in defs}
    interesting: dict[str, bool] = {}

    def has_facts(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in interesting:
            return interesting[name]
        if name in seen:
            return False
        found = False
        for prop in defs.get(name, {}).get("properties", {}).values():
            ref = _ref(prop)
            if _facts(prop, "") is not None or (ref and has_facts(ref, seen | {name})):
                found = True
        interesting[name] = found
        return found

    table: dict[str, dict[str, Facts]] = {}
    todo = [short[root] for root in fieldtypes.BUILTIN_ROOTS.values() if root in short]
    while todo:
        name = todo.pop()
        key = name.rsplit(".", 1)[-1]
        if key in table or not has_facts(name):
            continue
        fields: dict[str, Facts] = {}
        for field, prop in defs[name].get("properties", {}).items():
            ref = _ref(prop)
            sub = ref.rsplit(".", 1)[-1] if ref and has_facts(ref) else ""
            facts = _facts(prop, sub)
            if facts is not None:
                fields[field] = facts
            if sub:
                todo.append(ref)  # type: ignore[arg-type]
        table[key] = fields
    return table


def _without_hand_facts(facts: Facts) -> Facts:
    return Facts(facts.type, facts.list_type, facts.keys, facts.merge_key, facts.strategy, facts.atomic)


def test_the_table_is_kubernetes_openapi_for_every_built_in_kind() -> None:
    want = derived()
    have = {
        name: {field: _without_hand_facts(f) for field, f in fields.items()}
        for name, fields in fieldtypes.TYPES.items()
        if name in want
    }
    assert have == want
    custom = set(fieldtypes.TYPES) - set(want)
    assert custom == {"Configuration", "ConfigurationSpec", "BrokerSpec", "CustomResource"}


@pytest.mark.parametrize(
    ("type_name", "field", "merge_key", "keys"),
    [
        ("PodSpec", "containers", "name", ("name",)),
        ("PodSpec", "initContainers", "name", ("name",)),
        ("Container", "env", "name", ("name",)),
        ("Container", "ports", "containerPort", ("containerPort", "protocol")),
        ("ServiceSpec", "ports", "port", ("port", "protocol")),
        ("PodSpec", "volumes", "name", ("name",)),
        ("Container", "volumeMounts", "mountPath", ("mountPath",)),
        ("PodSpec", "imagePullSecrets", "name", ("name",)),
        ("NodeStatus", "conditions", "type", ("type",)),
    ],
)
def test_the_merge_keys_kubectl_relies_on_are_there(
    type_name: str, field: str, merge_key: str, keys: tuple[str]
) -> None:
    facts = fieldtypes.facts_of(type_name, field)
    assert (facts.merge_key, facts.keys, facts.merges) == (merge_key, keys, True)


def test_tolerations_are_atomic_and_a_devplace_kind_only_knows_object_meta() -> None:
    assert fieldtypes.facts_of("PodSpec", "tolerations") == fieldtypes.NONE
    assert fieldtypes.root_of("Instance") == "CustomResource"
    assert fieldtypes.root_of("Instance", builtin_only=True) is None
    assert fieldtypes.facts_of("BrokerSpec", "brokerPodSpec").type == "PodSpec"
