"""One door per package: what each package promises, and that nothing else is reached across packages.

Every module inside a package is private (`_slots.py`); the package's `__init__` is its face, and its `__all__` is
the whole of what it promises. Other packages import only from faces; a package's own modules import each other,
never their own face (which imports them). Tests may import a private module of the package they test. The faces
below are pinned: a name added to or dropped from a face is a decision, made here on purpose.
"""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import devplace

SRC = pathlib.Path(devplace.__file__).parent
GENERATED = {"v1beta1", "podresources", "v0", "etcdserverpb", "dra", "drahealth", "pluginregistration"}
PACKAGES = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").exists())
TOP_MODULES = ["clocks", "errors", "files", "queues", "supervisors"]

FACES: dict[str, list[str]] = {
    "agent": [
        "Agent",
        "AgentConfig",
        "instance_name",
        "references",
    ],
    "api": [
        "CL",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Configuration",
        "Create",
        "DEFAULT_NAMESPACE",
        "DEVICE_PATHS",
        "DEVICE_PATHS_ANNOTATION",
        "DRA",
        "DRIVER",
        "Deployment",
        "DeviceClass",
        "DeviceInput",
        "DevicePaths",
        "DeviceSelector",
        "DiscoveryProperty",
        "DraDevice",
        "EVENT_TYPES",
        "Event",
        "FREE",
        "FieldSelector",
        "Filter",
        "Free",
        "IL",
        "Instance",
        "Job",
        "KeySelector",
        "KindInfo",
        "LabelSelector",
        "MAX_CAPACITY",
        "MAX_DEPTH",
        "MAX_REVISION",
        "Model",
        "Namespace",
        "Node",
        "NodeSelector",
        "ObjectMeta",
        "PLACEHOLDER",
        "PUBLISHER_LABEL",
        "Pod",
        "PoolSpec",
        "Quantity",
        "RESOURCE_PREFIXES",
        "Requirement",
        "Resource",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "ResourceClass",
        "ResourceSlice",
        "Role",
        "RoleBinding",
        "SELECTION_STRATEGIES",
        "SERVER_OWNED_METADATA",
        "Secret",
        "SelectionStrategy",
        "Selector",
        "Service",
        "ServiceAccount",
        "SliceSupport",
        "SliceWrite",
        "UNHEALTHY_TAINT",
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
    ],
    "cli": [
        "app",
        "main",
    ],
    "controller": [
        "ClassMatcher",
        "Controller",
    ],
    "demo": [
        "LiveView",
        "Plot",
        "Report",
        "SIM_PATH",
        "Sample",
        "ScenarioRun",
        "Series",
        "StepRecord",
        "Up",
        "run_scenario",
        "scenario_path",
        "up_scenario",
        "world_file",
        "write_plots",
    ],
    "deviceplugin": [
        "DEFAULT_KUBELET_DIR",
        "DEVICE_PLUGIN_DIR",
        "HEALTHY",
        "InProcessTransport",
        "KUBELET_SOCKET_NAME",
        "POD_RESOURCES_DIR",
        "PRE_START_CONTAINER_TIMEOUT",
        "Transport",
        "TransportName",
        "UNHEALTHY",
        "UNIX",
        "VERSION",
        "abort",
        "from_rpc_error",
        "transport_named",
    ],
    "discovery": [
        "Device",
        "DiscoveryHandler",
        "Event",
        "FakeNvml",
        "GPU_ATTRIBUTES",
        "GpuHandler",
        "HandlerRegistry",
        "HandlerServer",
        "JOINED_ENVS",
        "Nvml",
        "OnvifHandler",
        "OpcuaHandler",
        "Pynvml",
        "RESERVED",
        "RegistrationServer",
        "Signal",
        "UdevHandler",
        "World",
        "builtin_registry",
        "cdi_devices",
        "device_healthy",
        "xid_policy",
    ],
    "kubeapi": [
        "API_LEVEL",
        "APPLY_PATCH",
        "BROKER_COUNTS",
        "DELETE_QUERY",
        "EVENTS_V1",
        "IncludeObject",
        "JSON_PATCH",
        "LIST_QUERY",
        "MERGE_PATCH",
        "Parameter",
        "PatchType",
        "SCALE_KINDS",
        "STRATEGIC_MERGE_PATCH",
        "Served",
        "WRITE_QUERY",
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
    ],
    "placement": [
        "APP",
        "CLUSTER",
        "ClusterLabelBody",
        "ClusterLabels",
        "DEPLOYMENT_INTENT_GROUP",
        "HPA_CONSUMER",
        "HPA_INTENT",
        "HPA_REQUIREMENT",
        "LEVELS",
        "Level",
        "PlacementService",
        "chart_manifests",
        "cluster_label_text",
        "cluster_labels",
        "kubeconfig_server",
        "parse_status_query",
        "split_cluster_label",
    ],
    "scheduler": [
        "ADMISSION",
        "ANNOTATION_PREFIX",
        "NodeVerdict",
        "POD_SCHEDULED",
        "RESOURCE_PREFIX",
        "ResolvedClass",
        "Scheduler",
        "Strategy",
        "admit_create",
        "admit_update",
        "availability_message",
        "resolve_each",
    ],
    "server": [
        "Auth",
        "ConnectionLimits",
        "DEFAULT_MAX_BODY_BYTES",
        "DEFAULT_MAX_WATCHES",
        "DEFAULT_STALL_TIMEOUT",
        "EmbeddedServer",
        "TlsFiles",
        "Tokens",
        "api_resource_list",
        "create_app",
        "http_status",
        "running",
        "uvicorn_options",
    ],
    "sim": [
        "ACTIONS",
        "Expect",
        "Fleet",
        "Mismatch",
        "Observed",
        "Scenario",
        "ScenarioStep",
        "SimKubelet",
        "check_expectations",
        "device_resource",
        "expectation_kinds",
        "generate_scenario",
        "holder_label",
        "load_scenario",
        "load_scenario_file",
        "parse_duration",
        "recording",
        "scenario_schema",
    ],
    "store": [
        "Admission",
        "Applied",
        "BindingStore",
        "Change",
        "DELETE",
        "Decide",
        "Decided",
        "DelegatingStore",
        "Delete",
        "EncodedObject",
        "EncodedPage",
        "EtcdStore",
        "Event",
        "EventRecorder",
        "EventType",
        "FencedStore",
        "FileSummary",
        "Informer",
        "InformerSet",
        "JsonPatchStore",
        "Key",
        "KubeStore",
        "LeaderElector",
        "LeaseAction",
        "MemoryStore",
        "ObjKey",
        "ObjectList",
        "ObservedLease",
        "RemoteStore",
        "Route",
        "STORE_CLIENT_HEADER",
        "SqliteStore",
        "Store",
        "WatchStream",
        "Written",
        "apply_object",
        "backup_sqlite",
        "bind_pod",
        "cas",
        "current_server",
        "decide_lease",
        "export_objects",
        "format_dump",
        "import_objects",
        "key_fields",
        "key_of",
        "micro_time",
        "open_store",
        "parse_dump",
        "parse_filters",
        "probe_support",
        "resource_version_of",
        "restore_sqlite",
        "rfc3339",
        "sqlite_file",
        "stamp_created",
        "stamp_updated",
        "takes_patches",
        "write_pool",
    ],
}


def _modules() -> list[pathlib.Path]:
    return sorted(p for p in SRC.rglob("*.py") if not GENERATED & set(p.parts) and "__pycache__" not in p.parts)


def _imports(path: pathlib.Path) -> list[tuple[str, list[str]]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((a.name, []) for a in node.names)
    return found


def test_every_package_has_a_pinned_face() -> None:
    assert sorted(FACES) == PACKAGES


@pytest.mark.parametrize("package", PACKAGES)
def test_each_face_promises_exactly_the_pinned_names(package: str) -> None:
    module = importlib.import_module(f"devplace.{package}")
    assert sorted(module.__all__) == FACES[package]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_promised_name_resolves_to_something_of_its_own_package(package: str) -> None:
    module = importlib.import_module(f"devplace.{package}")
    for name in module.__all__:
        value = getattr(module, name)
        owner = getattr(value, "__module__", None)
        if owner is not None and isinstance(value, type | type(len) | type(test_every_package_has_a_pinned_face)):
            assert owner.startswith(f"devplace.{package}."), (name, owner)


def test_the_public_surface_is_the_faces_and_the_top_level_modules() -> None:
    """The figure the redesign set out to cut (862 names in `__all__` before it)."""
    promised = sum(len(names) for names in FACES.values())
    promised += sum(len(importlib.import_module(f"devplace.{m}").__all__) for m in TOP_MODULES)
    assert promised == 385


def test_every_module_inside_a_package_is_private() -> None:
    public = [
        str(p.relative_to(SRC))
        for p in _modules()
        if p.parent != SRC and p.stem not in ("__init__", "__main__") and not p.stem.startswith("_")
    ]
    assert public == []


def test_no_private_module_keeps_a_list_of_exports() -> None:
    """The face is the one list: a private module's `__all__` would be a second door nobody pins."""
    listed = [
        str(p.relative_to(SRC))
        for p in _modules()
        if p.stem.startswith("_")
        and p.stem not in ("__init__", "__main__")
        and any(
            isinstance(node, ast.Assign | ast.AnnAssign) and "__all__" in ast.unparse(node).split("=")[0]
            for node in ast.parse(p.read_text(encoding="utf-8")).body
        )
    ]
    assert listed == []


def test_packages_reach_each_other_only_through_faces() -> None:
    crossings = []
    for path in _modules():
        rel = path.relative_to(SRC).parts
        own = rel[0] if len(rel) > 1 else None
        for module, names in _imports(path):
            parts = module.split(".")
            if parts[0] != "devplace" or len(parts) < 2 or parts[1] == own or parts[1] not in PACKAGES:
                continue
            if (len(parts) > 2 and parts[2] not in GENERATED) or any(n.startswith("_") for n in names):
                crossings.append(f"{'/'.join(rel)} imports {module} {names}")
    assert crossings == []


def test_no_module_imports_its_own_face() -> None:
    """A face imports its modules; a module importing the face back would be a cycle."""
    inward = []
    for path in _modules():
        rel = path.relative_to(SRC).parts
        if len(rel) < 2 or path.stem == "__init__":
            continue
        for module, names in _imports(path):
            if module == f"devplace.{rel[0]}" and not all(n.startswith("_") for n in names):
                inward.append(f"{'/'.join(rel)} imports {names} from its own face")
    assert inward == []


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_docstring_maps_every_module(package: str) -> None:
    doc = importlib.import_module(f"devplace.{package}").__doc__ or ""
    modules = sorted(p.stem for p in (SRC / package).glob("_*.py") if p.stem not in ("__init__", "__main__"))
    missing = [m for m in modules if f"`{m.lstrip('_')}`" not in doc and f"`{m}`" not in doc]
    assert missing == []
