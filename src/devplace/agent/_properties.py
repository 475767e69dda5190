"""Discovery properties: a Configuration's `discoveryProperties` resolved into the bytes its handler is sent.

Akri passes them in `DiscoverRequest.discovery_properties` (ONVIF and OPC UA handlers read credentials there).
Pure: given the properties, the Configuration's namespace and the ConfigMaps and Secrets they refer to (plain wire
dicts as the store holds them, keyed by `Source`), decide. The agent watches and caches those objects
(`caches.NodeCache.sources`) and restarts discovery when the resolved values change.

Akri's rules:
- `value`: its UTF-8 bytes; neither `value` nor `valueFrom`: None, which the bridge sends as a ByteData with no bytes
  set (the field absent on the wire, not empty bytes: `ByteData.vec` is `optional`), as Akri does;
- `valueFrom.configMapKeyRef`: `data[key]` (UTF-8), else `binaryData[key]` (base64);
- `valueFrom.secretKeyRef`: `data[key]` (base64), else `stringData[key]` (the store keeps `stringData` as written,
  where the apiserver would have merged it into `data`);
- the reference's namespace defaults to `default` (Akri's `DiscoveryPropertyKeySelector`), whatever the
  Configuration's namespace; a missing object or key leaves the property out when the reference says
  `optional: true` and is an error otherwise;
- a name given twice: the later one wins (Akri builds a map).
Errors are `errors.Invalid` naming the property's field (`spec.discoveryHandler.discoveryProperties[2].valueFrom.
secretKeyRef.key`) and the reason; the agent puts them on the Configuration as a DiscoveryFailed condition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from devplace import errors
from devplace.agent._configurations import ConfigurationView, KeyRef, Property
from devplace.api import decode_base64

PATH = "spec.discoveryHandler.discoveryProperties"

DEFAULT_NAMESPACE = "default"
"""The namespace of a `secretKeyRef`/`configMapKeyRef` that names none (Akri's default)."""

SOURCE_KINDS = ("ConfigMap", "Secret")
"""The kinds a property can be taken from."""

Source = tuple[str, str, str]
"""(kind, namespace, name) of a ConfigMap or Secret."""


def _reference(prop: Property) -> tuple[str, str, KeyRef] | None:
    """(kind, field name, selector) of a `valueFrom`, or None for a plain value."""
    source = prop.value_from
    if source is None:
        return None
    if source.secret_key_ref is not None:
        return "Secret", "secretKeyRef", source.secret_key_ref
    if source.config_map_key_ref is not None:
        return "ConfigMap", "configMapKeyRef", source.config_map_key_ref
    return None  # the parse refuses a valueFrom with neither; a plain value is the safe reading


def references(configuration: Mapping[str, Any]) -> frozenset[Source]:
    """Every ConfigMap and Secret a stored Configuration's discovery properties read, as the agent reads them
    (`errors.Invalid` for a Configuration the agent cannot read)."""
    return property_references(ConfigurationView.from_obj(configuration).spec.discovery_handler.discovery_properties)


def property_references(properties: Sequence[Property]) -> frozenset[Source]:
    """Every ConfigMap and Secret the properties read, the namespace defaulted to `default`."""
    found: set[Source] = set()
    for prop in properties:
        ref = _reference(prop)
        if ref is not None:
            kind, _, selector = ref
            found.add((kind, selector.namespace or DEFAULT_NAMESPACE, selector.name))
    return frozenset(found)


def resolve(properties: Sequence[Property], sources: Mapping[Source, Mapping[str, Any]]) -> dict[str, bytes | None]:
    """The properties' values by name (None: neither value nor valueFrom, sent without bytes); `errors.Invalid`
    naming the first property that cannot be resolved."""
    out: dict[str, bytes | None] = {}
    for i, prop in enumerate(properties):
        ref = _reference(prop)
        if ref is None:
            out[prop.name] = None if prop.value is None else prop.value.encode("utf-8")
            continue
        value = _referred(ref, f"{PATH}[{i}]", sources)
        if value is not None:
            out[prop.name] = value
    return out


def _referred(ref: tuple[str, str, KeyRef], path: str, sources: Mapping[Source, Mapping[str, Any]]) -> bytes | None:
    """The bytes a `valueFrom` refers to; None when it is optional and missing (the property is left out)."""
    kind, field, selector = ref
    where = f"{path}.valueFrom.{field}"
    ns = selector.namespace or DEFAULT_NAMESPACE
    what = f"{kind} {ns}/{selector.name}"
    obj = sources.get((kind, ns, selector.name))
    if obj is None:
        if selector.optional:
            return None
        raise errors.Invalid.field(f"{where}.name", f"{what} not found")
    if kind == "ConfigMap":
        found = _lookup(obj, "data", selector.key, where, what, encoded=False)
        if found is None:
            found = _lookup(obj, "binaryData", selector.key, where, what, encoded=True)
    else:
        found = _lookup(obj, "data", selector.key, where, what, encoded=True)
        if found is None:
            found = _lookup(obj, "stringData", selector.key, where, what, encoded=False)
    if found is None and not selector.optional:
        raise errors.Invalid.field(f"{where}.key", f"{what} has no key {selector.key!r}")
    return found


def _lookup(obj: Mapping[str, Any], section: str, key: str, where: str, what: str, *, encoded: bool) -> bytes | None:
    """`obj[section][key]` as bytes (base64-decoded when `encoded`), None when absent."""
    values = obj.get(section)
    if not isinstance(values, Mapping) or key not in values:
        return None
    value = values[key]
    if not isinstance(value, str):
        raise errors.Invalid.field(f"{where}.key", f"{what}: {section}.{key} must be a string")
    if not encoded:
        return value.encode("utf-8")
    try:
        return decode_base64(value)
    except ValueError as e:
        raise errors.Invalid.field(f"{where}.key", f"{what}: {section}.{key} {e}") from None
