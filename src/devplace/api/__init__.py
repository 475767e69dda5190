"""devplace's object model: Kubernetes-shaped kinds as typed pydantic models, names, quantities, selectors.

Pure: no I/O. Objects travel as plain wire dicts; `normalize` (`registry`) validates one at a boundary. EMCO's fleet
kinds (`fleet.devplace.io`) are not here: `devplace.placement` registers them when it is imported, and the
Kubernetes API machinery (OpenAPI, patches, tables) is `devplace.kubeapi`.

- `meta`: ObjectMeta and `Resource`, the base of every kind;
- `devices`: Configuration, Instance (Akri-compatible) and ResourceClass, with the slot-holder vocabulary;
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
"""

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
    CL,
    DRA,
    FREE,
    IL,
    PLACEHOLDER,
    RESOURCE_PREFIXES,
    SELECTION_STRATEGIES,
    Configuration,
    DiscoveryProperty,
    Free,
    Instance,
    KeySelector,
    ResourceClass,
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
from devplace.api._meta import SERVER_OWNED_METADATA, Model, ObjectMeta, Resource, invalid_from
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
from devplace.api._registry import DEFAULT_NAMESPACE, KindInfo, kinds, lookup, lookup_plural, normalize, register
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
from devplace.api._workloads import ConfigMap, Deployment, Job, Node, Pod, Secret, Service, decode_base64

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
