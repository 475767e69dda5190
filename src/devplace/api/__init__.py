"""devplace's object model: Kubernetes-shaped kinds as typed pydantic models, names, quantities, selectors.

Pure: no I/O. Objects travel as plain wire dicts; `normalize` (`registry`) validates one at a boundary. EMCO's fleet
kinds (`fleet.devplace.io`) are not here: `devplace.placement` registers them when it is imported, and the
Kubernetes API machinery (OpenAPI, patches, tables) is `devplace.kubeapi`.

- `meta`: ObjectMeta and `Resource`, the base of every kind;
- `devices`: Configuration, Instance (Akri-compatible) and ResourceClass; `holders`: the slot-holder vocabulary,
  slot names and resource names as plain data (what the node agent uses without the models);
- `encodings`: Kubernetes' base64 of a Secret's data;
- `devicepaths`: which paths serve a Configuration (device plugins, DRA or both: its `devplace.io/device-paths`
  annotation, else the part's default);
- `workloads`: the core Kubernetes kinds the parts use (Node, Pod, Service, ConfigMap, Secret, Job, Deployment);
- `clusters`: Namespace, Event, ServiceAccount, the RBAC kinds (stored, not enforced) and Lease;
- `registry`: apiVersion/kind -> model, plural, scope; `lookup`, `kinds`, `normalize`;
- `names`, `quantity`, `selectors`, `revisions`: Kubernetes' name rules, quantities, selectors and resourceVersions;
- `manifests`: YAML or JSON text into validated wire dicts (hostile input refused before it is expanded);
- `podspecs`: Kubernetes' own checks for the Kubernetes types the kinds carry as plain maps;
- `definitions`: Kubernetes' shipped schemas, the leaf that `podspecs` and `kubeapi` both read;
- `applies`: what to write so the store holds a manifest (pure; `store.apply_object` runs it);
- `bindings`: a Pod bound to a Node as the `pods/binding` subresource does it (`bound_pod`);
- `udevrules`: Akri's `udevRules` grammar (`parse_udev_rule`), which apply enforces for `udev` Configurations;
- `dra`: Kubernetes' DRA kinds (DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate) and their limits;
- `cel`: CEL device selectors in Kubernetes' DRA environment (compiled once, verdicts cached, cost-bounded);
- `dradevices`: an Instance's attributes (`instance_properties`, what resource classes select on) and the one
  mapping from a devplace device to a DRA device;
- `draslices`: ResourceSlices from Instances (`instance_devices`, pools, `plan_pool`: the writes that publish a pool
  within Kubernetes' limits), and the probe that says which optional fields a cluster keeps;
- `compiles`: a ResourceClass, or a Configuration's Akri resource, compiled to a DeviceClass that selects the same
  devices.

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).

Loaded on first use: `from devplace.api import X` imports the module that holds X (and what it needs), not every
module here, so a process takes only the kinds and rules it uses. Kinds are known without their models
(`registry`). The plain modules (`names`, `quantity`, `selectors`, `revisions`, `holders`, `encodings`,
`devicepaths`, `dradevices`, `draslices`, `manifests`' YAML reading, `registry`) never import pydantic: the node
agent's process runs on them alone (tests/cli/test_agentruns.py).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from devplace.api._applies import Create, Update, plan_apply
    from devplace.api._bindings import binding, bound_pod
    from devplace.api._cel import DeviceInput, Filter, Selector, Verdicts, compile_selector
    from devplace.api._clusters import (
        EVENT_TYPES,
        ClusterRole,
        ClusterRoleBinding,
        Event,
        Namespace,
        Role,
        RoleBinding,
        ServiceAccount,
    )
    from devplace.api._compiles import compile_class, compile_configuration, extended_resource
    from devplace.api._definitions import kubernetes_definitions, kubernetes_typed
    from devplace.api._devicepaths import DEVICE_PATHS, DEVICE_PATHS_ANNOTATION, DevicePaths, device_paths
    from devplace.api._devices import (
        PLACEHOLDER,
        Configuration,
        DiscoveryProperty,
        Instance,
        KeySelector,
        ResourceClass,
    )
    from devplace.api._dra import (
        DeviceClass,
        ResourceClaim,
        ResourceClaimTemplate,
        ResourceSlice,
        pod_claim_problems,
        update_problems,
    )
    from devplace.api._dradevices import (
        DRIVER,
        DraDevice,
        attribute_id,
        device_name,
        dra_device,
        instance_device,
        instance_properties,
    )
    from devplace.api._draslices import (
        PUBLISHER_LABEL,
        UNHEALTHY_TAINT,
        PoolSpec,
        SliceSupport,
        SliceWrite,
        instance_devices,
        local_pool,
        plan_pool,
        probe_slice,
        shared_pool,
        support_of,
    )
    from devplace.api._encodings import decode_base64
    from devplace.api._holders import (
        CL,
        DRA,
        FREE,
        IL,
        MAX_CAPACITY,
        RESOURCE_PREFIXES,
        SELECTION_STRATEGIES,
        Free,
        SelectionStrategy,
        cdi_name,
        dra_released,
        dra_taken,
        format_holder,
        instance_without_claims,
        named_node,
        parse_holder,
        released,
        resource_name,
        resource_prefix,
        slot_index,
        slot_name,
        usage_problems,
    )
    from devplace.api._manifests import (
        MAX_DEPTH,
        json_tree,
        load_documents,
        parse_documents,
        parse_positioned,
        validated,
        yaml_documents,
        yaml_value,
        yaml_where,
    )
    from devplace.api._meta import Model, ObjectMeta, Resource, invalid_from
    from devplace.api._names import (
        controller_reference,
        dns1123_label_problem,
        dns1123_subdomain_problem,
        generated_suffix,
        label_key_problem,
        label_value_problem,
        require_dns1123_subdomain,
    )
    from devplace.api._quantity import Quantity
    from devplace.api._registry import (
        DEFAULT_NAMESPACE,
        SERVER_OWNED_METADATA,
        KindInfo,
        kinds,
        lookup,
        lookup_plural,
        normalize,
        register,
    )
    from devplace.api._revisions import MAX_REVISION, parse_revision
    from devplace.api._selectors import (
        DeviceSelector,
        FieldSelector,
        LabelSelector,
        NodeSelector,
        Requirement,
        parse_field_selector,
        parse_label_selector,
    )
    from devplace.api._udevrules import UdevFilter, parse_udev_rule
    from devplace.api._workloads import ConfigMap, Deployment, Job, Node, Pod, Secret, Service

__all__ = [
    "CL",
    "DEFAULT_NAMESPACE",
    "DEVICE_PATHS",
    "DEVICE_PATHS_ANNOTATION",
    "DRA",
    "DRIVER",
    "EVENT_TYPES",
    "FREE",
    "IL",
    "MAX_CAPACITY",
    "MAX_DEPTH",
    "MAX_REVISION",
    "PLACEHOLDER",
    "PUBLISHER_LABEL",
    "RESOURCE_PREFIXES",
    "SELECTION_STRATEGIES",
    "SERVER_OWNED_METADATA",
    "UNHEALTHY_TAINT",
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "Configuration",
    "Create",
    "Deployment",
    "DeviceClass",
    "DeviceInput",
    "DevicePaths",
    "DeviceSelector",
    "DiscoveryProperty",
    "DraDevice",
    "Event",
    "FieldSelector",
    "Filter",
    "Free",
    "Instance",
    "Job",
    "KeySelector",
    "KindInfo",
    "LabelSelector",
    "Model",
    "Namespace",
    "Node",
    "NodeSelector",
    "ObjectMeta",
    "Pod",
    "PoolSpec",
    "Quantity",
    "Requirement",
    "Resource",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceClass",
    "ResourceSlice",
    "Role",
    "RoleBinding",
    "Secret",
    "SelectionStrategy",
    "Selector",
    "Service",
    "ServiceAccount",
    "SliceSupport",
    "SliceWrite",
    "UdevFilter",
    "Update",
    "Verdicts",
    "attribute_id",
    "binding",
    "bound_pod",
    "cdi_name",
    "compile_class",
    "compile_configuration",
    "compile_selector",
    "controller_reference",
    "decode_base64",
    "device_name",
    "device_paths",
    "dns1123_label_problem",
    "dns1123_subdomain_problem",
    "dra_device",
    "dra_released",
    "dra_taken",
    "extended_resource",
    "format_holder",
    "generated_suffix",
    "instance_device",
    "instance_devices",
    "instance_properties",
    "instance_without_claims",
    "invalid_from",
    "json_tree",
    "kinds",
    "kubernetes_definitions",
    "kubernetes_typed",
    "label_key_problem",
    "label_value_problem",
    "load_documents",
    "local_pool",
    "lookup",
    "lookup_plural",
    "named_node",
    "normalize",
    "parse_documents",
    "parse_field_selector",
    "parse_holder",
    "parse_label_selector",
    "parse_positioned",
    "parse_revision",
    "parse_udev_rule",
    "plan_apply",
    "plan_pool",
    "pod_claim_problems",
    "probe_slice",
    "register",
    "released",
    "require_dns1123_subdomain",
    "resource_name",
    "resource_prefix",
    "shared_pool",
    "slot_index",
    "slot_name",
    "support_of",
    "update_problems",
    "usage_problems",
    "validated",
    "yaml_documents",
    "yaml_value",
    "yaml_where",
]

_WHERE: dict[str, str] = {
    "CL": "devplace.api._holders",
    "ClusterRole": "devplace.api._clusters",
    "ClusterRoleBinding": "devplace.api._clusters",
    "ConfigMap": "devplace.api._workloads",
    "Configuration": "devplace.api._devices",
    "Create": "devplace.api._applies",
    "DEFAULT_NAMESPACE": "devplace.api._registry",
    "DEVICE_PATHS": "devplace.api._devicepaths",
    "DEVICE_PATHS_ANNOTATION": "devplace.api._devicepaths",
    "DRA": "devplace.api._holders",
    "DRIVER": "devplace.api._dradevices",
    "Deployment": "devplace.api._workloads",
    "DeviceClass": "devplace.api._dra",
    "DeviceInput": "devplace.api._cel",
    "DevicePaths": "devplace.api._devicepaths",
    "DeviceSelector": "devplace.api._selectors",
    "DiscoveryProperty": "devplace.api._devices",
    "DraDevice": "devplace.api._dradevices",
    "EVENT_TYPES": "devplace.api._clusters",
    "Event": "devplace.api._clusters",
    "FREE": "devplace.api._holders",
    "FieldSelector": "devplace.api._selectors",
    "Filter": "devplace.api._cel",
    "Free": "devplace.api._holders",
    "IL": "devplace.api._holders",
    "Instance": "devplace.api._devices",
    "Job": "devplace.api._workloads",
    "KeySelector": "devplace.api._devices",
    "KindInfo": "devplace.api._registry",
    "LabelSelector": "devplace.api._selectors",
    "MAX_CAPACITY": "devplace.api._holders",
    "MAX_DEPTH": "devplace.api._manifests",
    "MAX_REVISION": "devplace.api._revisions",
    "Model": "devplace.api._meta",
    "Namespace": "devplace.api._clusters",
    "Node": "devplace.api._workloads",
    "NodeSelector": "devplace.api._selectors",
    "ObjectMeta": "devplace.api._meta",
    "PLACEHOLDER": "devplace.api._devices",
    "PUBLISHER_LABEL": "devplace.api._draslices",
    "Pod": "devplace.api._workloads",
    "PoolSpec": "devplace.api._draslices",
    "Quantity": "devplace.api._quantity",
    "RESOURCE_PREFIXES": "devplace.api._holders",
    "Requirement": "devplace.api._selectors",
    "Resource": "devplace.api._meta",
    "ResourceClaim": "devplace.api._dra",
    "ResourceClaimTemplate": "devplace.api._dra",
    "ResourceClass": "devplace.api._devices",
    "ResourceSlice": "devplace.api._dra",
    "Role": "devplace.api._clusters",
    "RoleBinding": "devplace.api._clusters",
    "SELECTION_STRATEGIES": "devplace.api._holders",
    "SERVER_OWNED_METADATA": "devplace.api._registry",
    "Secret": "devplace.api._workloads",
    "SelectionStrategy": "devplace.api._holders",
    "Selector": "devplace.api._cel",
    "Service": "devplace.api._workloads",
    "ServiceAccount": "devplace.api._clusters",
    "SliceSupport": "devplace.api._draslices",
    "SliceWrite": "devplace.api._draslices",
    "UNHEALTHY_TAINT": "devplace.api._draslices",
    "UdevFilter": "devplace.api._udevrules",
    "Update": "devplace.api._applies",
    "Verdicts": "devplace.api._cel",
    "attribute_id": "devplace.api._dradevices",
    "binding": "devplace.api._bindings",
    "bound_pod": "devplace.api._bindings",
    "cdi_name": "devplace.api._holders",
    "compile_class": "devplace.api._compiles",
    "compile_configuration": "devplace.api._compiles",
    "compile_selector": "devplace.api._cel",
    "controller_reference": "devplace.api._names",
    "decode_base64": "devplace.api._encodings",
    "device_name": "devplace.api._dradevices",
    "device_paths": "devplace.api._devicepaths",
    "dns1123_label_problem": "devplace.api._names",
    "dns1123_subdomain_problem": "devplace.api._names",
    "dra_device": "devplace.api._dradevices",
    "dra_released": "devplace.api._holders",
    "dra_taken": "devplace.api._holders",
    "extended_resource": "devplace.api._compiles",
    "format_holder": "devplace.api._holders",
    "generated_suffix": "devplace.api._names",
    "instance_device": "devplace.api._dradevices",
    "instance_devices": "devplace.api._draslices",
    "instance_properties": "devplace.api._dradevices",
    "instance_without_claims": "devplace.api._holders",
    "invalid_from": "devplace.api._meta",
    "json_tree": "devplace.api._manifests",
    "kinds": "devplace.api._registry",
    "kubernetes_definitions": "devplace.api._definitions",
    "kubernetes_typed": "devplace.api._definitions",
    "label_key_problem": "devplace.api._names",
    "label_value_problem": "devplace.api._names",
    "load_documents": "devplace.api._manifests",
    "local_pool": "devplace.api._draslices",
    "lookup": "devplace.api._registry",
    "lookup_plural": "devplace.api._registry",
    "named_node": "devplace.api._holders",
    "normalize": "devplace.api._registry",
    "parse_documents": "devplace.api._manifests",
    "parse_field_selector": "devplace.api._selectors",
    "parse_holder": "devplace.api._holders",
    "parse_label_selector": "devplace.api._selectors",
    "parse_positioned": "devplace.api._manifests",
    "parse_revision": "devplace.api._revisions",
    "parse_udev_rule": "devplace.api._udevrules",
    "plan_apply": "devplace.api._applies",
    "plan_pool": "devplace.api._draslices",
    "pod_claim_problems": "devplace.api._dra",
    "probe_slice": "devplace.api._draslices",
    "register": "devplace.api._registry",
    "released": "devplace.api._holders",
    "require_dns1123_subdomain": "devplace.api._names",
    "resource_name": "devplace.api._holders",
    "resource_prefix": "devplace.api._holders",
    "shared_pool": "devplace.api._draslices",
    "slot_index": "devplace.api._holders",
    "slot_name": "devplace.api._holders",
    "support_of": "devplace.api._draslices",
    "update_problems": "devplace.api._dra",
    "usage_problems": "devplace.api._holders",
    "validated": "devplace.api._manifests",
    "yaml_documents": "devplace.api._manifests",
    "yaml_value": "devplace.api._manifests",
    "yaml_where": "devplace.api._manifests",
}
"""Which module holds each name of the face."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
