"""Kubernetes API machinery: what makes devplace's resource API speak to kubectl and Kubernetes clients as
Kubernetes' own API server does, over the kinds of `devplace.api`.

- `openapis`: the OpenAPI v2/v3 documents, generated from the kind registry (`gnostics`: their protobuf form);
- `parameters`: the query parameters of the resource API, one table for the Kubernetes documents and the server's docs;
- `patches`: JSON, merge and strategic merge patches (`fieldtypes`: Kubernetes' merge keys of the built-in types);
- `managedfields`: server-side apply's field ownership;
- `tables`: the columns of `kubectl get` (and of `devplace get`);
- `crds`: CustomResourceDefinitions of devplace's kinds, for a real cluster;
- `events`: Events' two views (`v1`, stored, and `events.k8s.io/v1`), converted field by field;
- `subresources`: which kinds serve `/status` and `/scale`;
- `versions`: the Kubernetes API level devplace serves, as `/version` answers it.

Pure, no I/O: the server (`devplace.server`) and the CLI use these; the object model and the node agent never do.

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.kubeapi._crds import (
    crd_group_versions,
    crd_yaml,
    custom_resource_definitions,
    file_name,
    kustomization_yaml,
)
from devplace.kubeapi._events import EVENTS_V1, events_fields, events_view, stored_event
from devplace.kubeapi._fieldtypes import root_of
from devplace.kubeapi._gnostics import encode_document
from devplace.kubeapi._managedfields import comparable, manager_name, recorded, same, updated_managed_fields
from devplace.kubeapi._openapis import (
    Served,
    document_bytes,
    group_version_path,
    group_versions,
    is_builtin,
    served,
    swagger,
    v3_document,
    v3_hash,
    v3_index,
)
from devplace.kubeapi._parameters import DELETE_QUERY, LIST_QUERY, WRITE_QUERY, Parameter
from devplace.kubeapi._patches import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    PatchType,
    json_patch,
    merge_patch,
    parse_json_patch,
    patch_type,
    server_side_apply,
    strategic_merge,
)
from devplace.kubeapi._subresources import SCALE_KINDS, has_status, scale_of, with_scale, with_status
from devplace.kubeapi._tables import (
    BROKER_COUNTS,
    IncludeObject,
    age,
    broker_counts,
    cell_text,
    columns,
    instance_usage,
    strategy_of,
    table,
)
from devplace.kubeapi._versions import API_LEVEL, git_version, version_info

__all__ = [
    "API_LEVEL",
    "APPLY_PATCH",
    "BROKER_COUNTS",
    "DELETE_QUERY",
    "EVENTS_V1",
    "JSON_PATCH",
    "LIST_QUERY",
    "MERGE_PATCH",
    "SCALE_KINDS",
    "STRATEGIC_MERGE_PATCH",
    "WRITE_QUERY",
    "IncludeObject",
    "Parameter",
    "PatchType",
    "Served",
    "age",
    "broker_counts",
    "cell_text",
    "columns",
    "comparable",
    "crd_group_versions",
    "crd_yaml",
    "custom_resource_definitions",
    "document_bytes",
    "encode_document",
    "events_fields",
    "events_view",
    "file_name",
    "git_version",
    "group_version_path",
    "group_versions",
    "has_status",
    "instance_usage",
    "is_builtin",
    "json_patch",
    "kustomization_yaml",
    "manager_name",
    "merge_patch",
    "parse_json_patch",
    "patch_type",
    "recorded",
    "root_of",
    "same",
    "scale_of",
    "served",
    "server_side_apply",
    "stored_event",
    "strategic_merge",
    "strategy_of",
    "swagger",
    "table",
    "updated_managed_fields",
    "v3_document",
    "v3_hash",
    "v3_index",
    "version_info",
    "with_scale",
    "with_status",
]
