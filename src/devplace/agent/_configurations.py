"""Configurations and Instances as the node agent reads them: plain data, parsed field by field.

The agent reads a few fields of a Configuration (its discovery handler and properties, capacity, broker properties,
`uniqueDevices`, its metadata) and of an Instance (its spec), and parses exactly those, each checked as the api models
check it (`api.devices`: types, required fields, ranges, names, a property's `value` or `valueFrom` with exactly one
reference, an Instance spec's fields Akri's CRD names and no other). A problem is `errors.Invalid` naming the field,
and the agent ignores the object with a warning, as it did when the models checked it. The rest of a Configuration
(its broker specs and strategy, service specs) is not the agent's to check: the API server checks every write with
the models, a Kubernetes API server with the CRDs' schemas, and the agent never writes a field it does not read.

Plain so that the node agent's process loads neither pydantic nor the models (issue #21: `bench/footprint.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from devplace import errors
from devplace.api import MAX_CAPACITY, dns1123_label_problem, dns1123_subdomain_problem

INSTANCE_SPEC_FIELDS = frozenset(
    {"configurationName", "cdiName", "capacity", "brokerProperties", "shared", "nodes", "deviceUsage"}
)
"""The fields of Akri's Instance CRD spec: an Instance's spec holds these and no other."""


@dataclass(frozen=True)
class KeyRef:
    """A `secretKeyRef` or `configMapKeyRef`: one key of a Secret or ConfigMap (namespace `default` when None)."""

    name: str
    key: str
    namespace: str | None = None
    optional: bool | None = None


@dataclass(frozen=True)
class PropertySource:
    """A property's `valueFrom`: exactly one of the two references."""

    secret_key_ref: KeyRef | None = None
    config_map_key_ref: KeyRef | None = None


@dataclass(frozen=True)
class Property:
    """A discovery property: `value`, or `valueFrom` a Secret or ConfigMap (neither: sent without bytes)."""

    name: str
    value: str | None = None
    value_from: PropertySource | None = None


@dataclass(frozen=True)
class Handler:
    name: str
    discovery_details: str = ""
    discovery_properties: tuple[Property, ...] = ()


@dataclass(frozen=True)
class ConfigurationSpec:
    discovery_handler: Handler
    capacity: int = 1
    unique_devices: bool = True
    broker_properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Metadata:
    name: str
    namespace: str | None = None
    uid: str | None = None
    creation_timestamp: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigurationView:
    """What the agent reads of a Configuration (attribute for attribute as `api.Configuration` names it)."""

    api_version: str
    metadata: Metadata
    spec: ConfigurationSpec

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> ConfigurationView:
        """Parse a stored Configuration; `errors.Invalid` naming the first bad field it reads."""
        api_version = _str(obj, "apiVersion", "apiVersion")
        metadata = _metadata(_mapping(obj, "metadata", "metadata"))
        spec = _mapping(obj, "spec", "spec")
        handler = _mapping(spec, "discoveryHandler", "spec.discoveryHandler")
        path = "spec.discoveryHandler.discoveryProperties"
        raw_properties = handler.get("discoveryProperties")
        if raw_properties is None:
            raw_properties = []
        if not isinstance(raw_properties, list):
            raise errors.Invalid.field(path, f"a list, not {_type(raw_properties)}")
        return cls(
            api_version=api_version,
            metadata=metadata,
            spec=ConfigurationSpec(
                discovery_handler=Handler(
                    name=_str(handler, "name", "spec.discoveryHandler.name"),
                    discovery_details=_str(
                        handler, "discoveryDetails", "spec.discoveryHandler.discoveryDetails", default="", empty=True
                    ),
                    discovery_properties=tuple(parse_property(p, f"{path}[{i}]") for i, p in enumerate(raw_properties)),
                ),
                capacity=_capacity(spec, "spec.capacity"),
                unique_devices=_bool(spec, "uniqueDevices", "spec.uniqueDevices", default=True),
                broker_properties=_strings(spec, "brokerProperties", "spec.brokerProperties"),
            ),
        )


def check_instance(obj: Mapping[str, Any]) -> None:
    """Check the fields the agent reads of a stored Instance, all but `spec.deviceUsage` (`slots.Usage.read` reads
    whatever it holds); `errors.Invalid` naming the first bad one."""
    _metadata(_mapping(obj, "metadata", "metadata"))
    spec = _mapping(obj, "spec", "spec")
    for key in sorted(spec):
        if key not in INSTANCE_SPEC_FIELDS:
            raise errors.Invalid.field(f"spec.{key}", "unknown field (not in Akri's Instance CRD)")
    _str(spec, "configurationName", "spec.configurationName")
    _capacity(spec, "spec.capacity")
    _bool(spec, "shared", "spec.shared", default=False)
    nodes = spec.get("nodes", [])
    if not isinstance(nodes, list):
        raise errors.Invalid.field("spec.nodes", f"a list of node names, not {_type(nodes)}")
    for i, node in enumerate(nodes):
        if not isinstance(node, str):
            raise errors.Invalid.field(f"spec.nodes[{i}]", f"a node name, not {_type(node)}")
    _strings(spec, "brokerProperties", "spec.brokerProperties")
    if spec.get("cdiName") is not None:
        _str(spec, "cdiName", "spec.cdiName", empty=True)


# -- fields --------------------------------------------------------------------------------------------------------

_MISSING = object()


def _type(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r}"


def _mapping(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        raise errors.Invalid.field(path, "required")
    if not isinstance(value, Mapping):
        raise errors.Invalid.field(path, f"an object, not {_type(value)}")
    return value


def _str(obj: Mapping[str, Any], key: str, path: str, *, default: str | None = None, empty: bool = False) -> str:
    value = obj.get(key, _MISSING)
    if value is _MISSING or (value is None and default is not None):
        if default is None:
            raise errors.Invalid.field(path, "required")
        return default
    if not isinstance(value, str):
        raise errors.Invalid.field(path, f"a string, not {_type(value)}")
    if not value and not empty:
        raise errors.Invalid.field(path, "must not be empty")
    return value


def _optional_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise errors.Invalid.field(path, f"a string, not {_type(value)}")
    return value


def _bool(obj: Mapping[str, Any], key: str, path: str, *, default: bool) -> bool:
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise errors.Invalid.field(path, f"true or false, not {_type(value)}")
    return value


def _capacity(spec: Mapping[str, Any], path: str) -> int:
    value = spec.get("capacity", 1)
    if value is None:
        return 1
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON's 2.0 (as the models take it)
    if not isinstance(value, int) or isinstance(value, bool):
        raise errors.Invalid.field(path, f"an integer, not {_type(value)}")
    if not 1 <= value <= MAX_CAPACITY:
        raise errors.Invalid.field(path, f"{value} is not between 1 and {MAX_CAPACITY}")
    return value


def _strings(obj: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise errors.Invalid.field(path, f"a map of strings, not {_type(value)}")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise errors.Invalid.field(f"{path}.{k}", f"a string, not {_type(v)}")
    return dict(value)


def _metadata(meta: Mapping[str, Any]) -> Metadata:
    name = _str(meta, "name", "metadata.name")
    problem = dns1123_subdomain_problem(name)
    if problem:
        raise errors.Invalid.field("metadata.name", problem)
    _optional_str(meta, "resourceVersion", "metadata.resourceVersion")  # as the API server writes it: a string
    return Metadata(
        name=name,
        namespace=_optional_str(meta, "namespace", "metadata.namespace"),
        uid=_optional_str(meta, "uid", "metadata.uid"),
        creation_timestamp=_optional_str(meta, "creationTimestamp", "metadata.creationTimestamp"),
        annotations=_strings(meta, "annotations", "metadata.annotations"),
    )


def parse_property(raw: Any, path: str) -> Property:
    """One of a Configuration's `discoveryProperties` at `path` (module docstring)."""
    if not isinstance(raw, Mapping):
        raise errors.Invalid.field(path, f"an object, not {_type(raw)}")
    name = _str(raw, "name", f"{path}.name")
    value = _optional_str(raw, "value", f"{path}.value")
    source = raw.get("valueFrom")
    if source is None:
        return Property(name, value)
    if value is not None:
        raise errors.Invalid.field(path, "set value or valueFrom, not both")
    where = f"{path}.valueFrom"
    if not isinstance(source, Mapping):
        raise errors.Invalid.field(where, f"an object, not {_type(source)}")
    secret = source.get("secretKeyRef")
    config_map = source.get("configMapKeyRef")
    if (secret is None) == (config_map is None):
        raise errors.Invalid.field(where, "exactly one of secretKeyRef or configMapKeyRef must be set")
    return Property(
        name,
        None,
        PropertySource(
            secret_key_ref=None if secret is None else _key_ref(secret, f"{where}.secretKeyRef"),
            config_map_key_ref=None if config_map is None else _key_ref(config_map, f"{where}.configMapKeyRef"),
        ),
    )


def _key_ref(raw: Any, path: str) -> KeyRef:
    if not isinstance(raw, Mapping):
        raise errors.Invalid.field(path, f"an object, not {_type(raw)}")
    name = _str(raw, "name", f"{path}.name")
    problem = dns1123_subdomain_problem(name)
    if problem:
        raise errors.Invalid.field(f"{path}.name", problem)
    namespace = _optional_str(raw, "namespace", f"{path}.namespace")
    if namespace is not None:
        problem = dns1123_label_problem(namespace)
        if problem:
            raise errors.Invalid.field(f"{path}.namespace", problem)
    optional = raw.get("optional")
    if optional is not None and not isinstance(optional, bool):
        raise errors.Invalid.field(f"{path}.optional", f"true or false, not {_type(optional)}")
    return KeyRef(name, _str(raw, "key", f"{path}.key"), namespace, optional)
