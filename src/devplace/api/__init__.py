"""devplace's object model: Kubernetes-shaped kinds as typed pydantic models, names, quantities, selectors.

Pure: no I/O. Objects travel as plain wire dicts; `normalize` (`registry`) validates one at a boundary. EMCO's fleet
kinds (`fleet.devplace.io`) are not here: `devplace.placement` registers them when it is imported, and the
Kubernetes API machinery (OpenAPI, patches, tables) is `devplace.kubeapi`.

- `meta`: ObjectMeta and `Resource`, the base of every kind;
- `devices`: Configuration, Instance (Akri-compatible) and ResourceClass, with the slot-holder vocabulary;
- `workloads`: the core Kubernetes kinds the parts use (Node, Pod, Service, ConfigMap, Secret, Job, Deployment);
- `registry`: apiVersion/kind -> model, plural, scope; `lookup`, `kinds`, `normalize`;
- `names`, `quantity`, `selectors`, `revisions`: Kubernetes' name rules, quantities, selectors and resourceVersions;
- `manifests`: YAML or JSON text into validated wire dicts (hostile input refused before it is expanded);
- `podspecs`: Kubernetes' own checks for the Kubernetes types the kinds carry as plain maps;
- `definitions`: Kubernetes' shipped schemas, the leaf that `podspecs` and `kubeapi` both read;
- `applies`: what to write so the store holds a manifest (pure; `store.apply_object` runs it).

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.api._applies import Create, Update, plan_apply
from devplace.api._definitions import kubernetes_definitions, kubernetes_typed
from devplace.api._devices import (
    CL,
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
    format_holder,
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
from devplace.api._meta import SERVER_OWNED_METADATA, Model, ObjectMeta, Resource, invalid_from
from devplace.api._names import (
    dns1123_label_problem,
    dns1123_subdomain_problem,
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
from devplace.api._workloads import ConfigMap, Deployment, Job, Node, Pod, Secret, Service, decode_base64

__all__ = [
    "CL",
    "DEFAULT_NAMESPACE",
    "FREE",
    "IL",
    "MAX_DEPTH",
    "MAX_REVISION",
    "PLACEHOLDER",
    "RESOURCE_PREFIXES",
    "SELECTION_STRATEGIES",
    "SERVER_OWNED_METADATA",
    "ConfigMap",
    "Configuration",
    "Create",
    "Deployment",
    "DeviceSelector",
    "DiscoveryProperty",
    "FieldSelector",
    "Free",
    "Instance",
    "Job",
    "KeySelector",
    "KindInfo",
    "LabelSelector",
    "Model",
    "Node",
    "NodeSelector",
    "ObjectMeta",
    "Pod",
    "Quantity",
    "Requirement",
    "Resource",
    "ResourceClass",
    "Secret",
    "SelectionStrategy",
    "Service",
    "Update",
    "cdi_name",
    "decode_base64",
    "dns1123_label_problem",
    "dns1123_subdomain_problem",
    "format_holder",
    "invalid_from",
    "json_tree",
    "kinds",
    "kubernetes_definitions",
    "kubernetes_typed",
    "label_key_problem",
    "label_value_problem",
    "load_documents",
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
    "plan_apply",
    "register",
    "released",
    "require_dns1123_subdomain",
    "resource_name",
    "resource_prefix",
    "slot_index",
    "slot_name",
    "usage_problems",
    "validated",
    "yaml_documents",
    "yaml_value",
    "yaml_where",
]
