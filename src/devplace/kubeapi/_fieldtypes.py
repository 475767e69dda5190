"""How each field of the built-in kinds merges: Kubernetes' merge keys, patch strategies, list and map types.

A strategic merge patch (`patches.strategic_merge`) and server-side apply (`patches.server_side_apply`,
`managedfields`) need to know, field by field, what Kubernetes' OpenAPI says about it:

- `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key` (strategic merge patch): a list with strategy `merge`
  is merged item by item (maps by `merge_key`, scalars as a set) instead of replaced; `retainKeys` lets a patch clear
  the keys it does not list (`$retainKeys`).
- `x-kubernetes-list-type` / `x-kubernetes-list-map-keys` (server-side apply): a `map` list is associative (each item
  is owned by its key, `k:{"name":"c"}`), a `set` list holds scalars owned one by one (`v:"x"`); any other list is
  atomic (owned and replaced as a whole).
- `x-kubernetes-map-type: atomic` on a field or on its type: the value is one leaf (for a list: each item is).

`TYPES` holds only what differs from the defaults (maps merge key by key, lists are atomic and replaced), for every
type reachable from the built-in kinds devplace serves (`BUILTIN_ROOTS`); a field with nothing to say below it is left
out. The table is Kubernetes 1.37's OpenAPI as the `kubernetes-validate` package ships it, transcribed;
tests/kubeapi/test_fieldtypes.py derives it again from that schema and fails if they ever differ. Two facts the schema
does not carry are added by hand: a port's `protocol` defaults to TCP when it forms part of a list key (Kubernetes
defaults it before it merges), and devplace's own kinds embed Kubernetes types (a Configuration's broker pod spec is
a PodSpec), so their lists merge by the same keys (`CUSTOM_ROOTS`).

Pure data and two lookups; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ListType = Literal["atomic", "set", "map"]


@dataclass(frozen=True)
class Facts:
    """What Kubernetes says about one field (the defaults: a granular map, or an atomic list replaced by a patch)."""

    type: str = ""
    """The named type of the value (of each item for a list) when something below it has facts, else ""."""
    list_type: ListType = "atomic"
    keys: tuple[str, ...] = ()
    """A `map` list's item keys (server-side apply)."""
    merge_key: str = ""
    """The key a strategic merge patch matches items by."""
    strategy: str = ""
    """`merge`, `retainKeys` or `merge,retainKeys` (strategic merge patch); "" replaces."""
    atomic: bool = False
    """The value (for a list: each item) is owned and replaced as a whole."""
    key_defaults: tuple[tuple[str, Any], ...] = ()
    """Values of key fields an item may omit, as Kubernetes defaults them before merging."""

    @property
    def merges(self) -> bool:
        return "merge" in self.strategy.split(",")

    @property
    def retains_keys(self) -> bool:
        return "retainKeys" in self.strategy.split(",")


NONE = Facts()

_TCP = (("protocol", "TCP"),)

TYPES: dict[str, dict[str, Facts]] = {
    "Scale": {
        "metadata": Facts("ObjectMeta"),
    },
    "Pod": {
        "metadata": Facts("ObjectMeta"),
        "spec": Facts("PodSpec"),
        "status": Facts("PodStatus"),
    },
    "ObjectMeta": {
        "finalizers": Facts(list_type="set", strategy="merge"),
        "ownerReferences": Facts(list_type="map", keys=("uid",), merge_key="uid", strategy="merge", atomic=True),
    },
    "PodSpec": {
        "affinity": Facts("Affinity"),
        "containers": Facts("Container", list_type="map", keys=("name",), merge_key="name", strategy="merge"),
        "ephemeralContainers": Facts(
            "EphemeralContainer", list_type="map", keys=("name",), merge_key="name", strategy="merge"
        ),
        "evictionResponders": Facts(list_type="map", keys=("name",), merge_key="name", strategy="merge", atomic=True),
        "hostAliases": Facts(list_type="map", keys=("ip",), merge_key="ip", strategy="merge"),
        "imagePullSecrets": Facts(list_type="map", keys=("name",), merge_key="name", strategy="merge", atomic=True),
        "initContainers": Facts("Container", list_type="map", keys=("name",), merge_key="name", strategy="merge"),
        "nodeSelector": Facts(atomic=True),
        "resourceClaims": Facts(list_type="map", keys=("name",), merge_key="name", strategy="merge,retainKeys"),
        "resources": Facts("ResourceRequirements"),
        "schedulingGates": Facts(list_type="map", keys=("name",), merge_key="name", strategy="merge"),
        "topologySpreadConstraints": Facts(
            "TopologySpreadConstraint",
            list_type="map",
            keys=("topologyKey", "whenUnsatisfiable"),
            merge_key="topologyKey",
            strategy="merge",
        ),
        "volumes": Facts("Volume", list_type="map", keys=("name",), merge_key="name", strategy="merge,retainKeys"),
    },
    "Affinity": {
        "nodeAffinity": Facts("NodeAffinity"),
        "podAffinity": Facts("PodAffinity"),
        "podAntiAffinity": Facts("PodAntiAffinity"),
    },
    "NodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": Facts("PreferredSchedulingTerm"),
        "requiredDuringSchedulingIgnoredDuringExecution": Facts("NodeSelector", atomic=True),
    },
    "PreferredSchedulingTerm": {
        "preference": Facts(atomic=True),
    },
    "NodeSelector": {
        "nodeSelectorTerms": Facts(atomic=True),
    },
    "PodAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": Facts("WeightedPodAffinityTerm"),
        "requiredDuringSchedulingIgnoredDuringExecution": Facts("PodAffinityTerm"),
    },
    "WeightedPodAffinityTerm": {
        "podAffinityTerm": Facts("PodAffinityTerm"),
    },
    "PodAffinityTerm": {
        "labelSelector": Facts(atomic=True),
        "namespaceSelector": Facts(atomic=True),
    },
    "PodAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": Facts("WeightedPodAffinityTerm"),
        "requiredDuringSchedulingIgnoredDuringExecution": Facts("PodAffinityTerm"),
    },
    "Container": {
        "env": Facts("EnvVar", list_type="map", keys=("name",), merge_key="name", strategy="merge"),
        "ports": Facts(
            list_type="map",
            keys=("containerPort", "protocol"),
            merge_key="containerPort",
            strategy="merge",
            key_defaults=_TCP,
        ),
        "resources": Facts("ResourceRequirements"),
        "restartPolicyRules": Facts("ContainerRestartRule"),
        "volumeDevices": Facts(list_type="map", keys=("devicePath",), merge_key="devicePath", strategy="merge"),
        "volumeMounts": Facts(
            "VolumeMount", list_type="map", keys=("mountPath",), merge_key="mountPath", strategy="merge"
        ),
    },
    "EnvVar": {
        "valueFrom": Facts("EnvVarSource"),
    },
    "EnvVarSource": {
        "configMapKeyRef": Facts(atomic=True),
        "fieldRef": Facts(atomic=True),
        "fileKeyRef": Facts(atomic=True),
        "resourceFieldRef": Facts(atomic=True),
        "secretKeyRef": Facts(atomic=True),
    },
    "ResourceRequirements": {
        "claims": Facts(list_type="map", keys=("name",)),
    },
    "ContainerRestartRule": {
        "exitCodes": Facts("ContainerRestartRuleOnExitCodes"),
    },
    "ContainerRestartRuleOnExitCodes": {
        "values": Facts(list_type="set"),
    },
    "VolumeMount": {
        "bindMountOptions": Facts(list_type="set"),
    },
    "EphemeralContainer": {
        "env": Facts("EnvVar", list_type="map", keys=("name",), merge_key="name", strategy="merge"),
        "ports": Facts(
            list_type="map",
            keys=("containerPort", "protocol"),
            merge_key="containerPort",
            strategy="merge",
            key_defaults=_TCP,
        ),
        "resources": Facts("ResourceRequirements"),
        "restartPolicyRules": Facts("ContainerRestartRule"),
        "volumeDevices": Facts(list_type="map", keys=("devicePath",), merge_key="devicePath", strategy="merge"),
        "volumeMounts": Facts(
            "VolumeMount", list_type="map", keys=("mountPath",), merge_key="mountPath", strategy="merge"
        ),
    },
    "TopologySpreadConstraint": {
        "labelSelector": Facts(atomic=True),
    },
    "Volume": {
        "cephfs": Facts("CephFSVolumeSource"),
        "cinder": Facts("CinderVolumeSource"),
        "csi": Facts("CSIVolumeSource"),
        "downwardAPI": Facts("DownwardAPIVolumeSource"),
        "ephemeral": Facts("EphemeralVolumeSource"),
        "flexVolume": Facts("FlexVolumeSource"),
        "iscsi": Facts("ISCSIVolumeSource"),
        "projected": Facts("ProjectedVolumeSource"),
        "rbd": Facts("RBDVolumeSource"),
        "scaleIO": Facts("ScaleIOVolumeSource"),
        "storageos": Facts("StorageOSVolumeSource"),
    },
    "CephFSVolumeSource": {
        "secretRef": Facts(atomic=True),
    },
    "CinderVolumeSource": {
        "secretRef": Facts(atomic=True),
    },
    "CSIVolumeSource": {
        "nodePublishSecretRef": Facts(atomic=True),
    },
    "DownwardAPIVolumeSource": {
        "items": Facts("DownwardAPIVolumeFile"),
    },
    "DownwardAPIVolumeFile": {
        "fieldRef": Facts(atomic=True),
        "resourceFieldRef": Facts(atomic=True),
    },
    "EphemeralVolumeSource": {
        "volumeClaimTemplate": Facts("PersistentVolumeClaimTemplate"),
    },
    "PersistentVolumeClaimTemplate": {
        "metadata": Facts("ObjectMeta"),
        "spec": Facts("PersistentVolumeClaimSpec"),
    },
    "PersistentVolumeClaimSpec": {
        "dataSource": Facts(atomic=True),
        "selector": Facts(atomic=True),
    },
    "FlexVolumeSource": {
        "secretRef": Facts(atomic=True),
    },
    "ISCSIVolumeSource": {
        "secretRef": Facts(atomic=True),
    },
    "ProjectedVolumeSource": {
        "sources": Facts("VolumeProjection"),
    },
    "VolumeProjection": {
        "clusterTrustBundle": Facts("ClusterTrustBundleProjection"),
        "downwardAPI": Facts("DownwardAPIProjection"),
    },
    "ClusterTrustBundleProjection": {
        "labelSelector": Facts(atomic=True),
    },
    "DownwardAPIProjection": {
        "items": Facts("DownwardAPIVolumeFile"),
    },
    "RBDVolumeSource": {
        "secretRef": Facts(atomic=True),
    },
    "ScaleIOVolumeSource": {
        "secretRef": Facts(atomic=True),
    },
    "StorageOSVolumeSource": {
        "secretRef": Facts(atomic=True),
    },
    "PodStatus": {
        "conditions": Facts(list_type="map", keys=("type",), merge_key="type", strategy="merge"),
        "containerStatuses": Facts("ContainerStatus"),
        "ephemeralContainerStatuses": Facts("ContainerStatus"),
        "hostIPs": Facts(merge_key="ip", strategy="merge"),
        "initContainerStatuses": Facts("ContainerStatus"),
        "nodeAllocatableResourceClaimStatuses": Facts(
            "NodeAllocatableResourceClaimStatus",
            list_type="map",
            keys=("resourceClaimName",),
            merge_key="resourceClaimName",
            strategy="merge",
        ),
        "podIPs": Facts(list_type="map", keys=("ip",), merge_key="ip", strategy="merge"),
        "resourceClaimStatuses": Facts(list_type="map", keys=("name",), merge_key="name", strategy="merge,retainKeys"),
        "resources": Facts("ResourceRequirements"),
        "volumeHealth": Facts("PodVolumeHealth", list_type="map", keys=("name",)),
    },
    "ContainerStatus": {
        "allocatedResourcesStatus": Facts(
            "ResourceStatus", list_type="map", keys=("name",), merge_key="name", strategy="merge"
        ),
        "resources": Facts("ResourceRequirements"),
        "volumeMounts": Facts(list_type="map", keys=("mountPath",), merge_key="mountPath", strategy="merge"),
    },
    "ResourceStatus": {
        "resources": Facts(list_type="map", keys=("resourceID",)),
    },
    "NodeAllocatableResourceClaimStatus": {
        "containers": Facts(list_type="set"),
        "mapping": Facts(list_type="map", keys=("name",), merge_key="name", strategy="merge"),
        "overhead": Facts(list_type="map", keys=("name",), merge_key="name", strategy="merge"),
    },
    "PodVolumeHealth": {
        "healthConditions": Facts(list_type="map", keys=("status", "reason"), merge_key="status", strategy="merge"),
    },
    "Deployment": {
        "metadata": Facts("ObjectMeta"),
        "spec": Facts("DeploymentSpec"),
        "status": Facts("DeploymentStatus"),
    },
    "DeploymentSpec": {
        "selector": Facts(atomic=True),
        "strategy": Facts(strategy="retainKeys"),
        "template": Facts("PodTemplateSpec"),
    },
    "PodTemplateSpec": {
        "metadata": Facts("ObjectMeta"),
        "spec": Facts("PodSpec"),
    },
    "DeploymentStatus": {
        "conditions": Facts(list_type="map", keys=("type",), merge_key="type", strategy="merge"),
    },
    "Job": {
        "metadata": Facts("ObjectMeta"),
        "spec": Facts("JobSpec"),
        "status": Facts("JobStatus"),
    },
    "JobSpec": {
        "podFailurePolicy": Facts("PodFailurePolicy"),
        "scheduling": Facts("JobSchedulingConfiguration"),
        "selector": Facts(atomic=True),
        "template": Facts("PodTemplateSpec"),
    },
    "PodFailurePolicy": {
        "rules": Facts("PodFailurePolicyRule"),
    },
    "PodFailurePolicyRule": {
        "onExitCodes": Facts("PodFailurePolicyOnExitCodesRequirement"),
    },
    "PodFailurePolicyOnExitCodesRequirement": {
        "values": Facts(list_type="set"),
    },
    "JobSchedulingConfiguration": {
        "resourceClaims": Facts(list_type="map", keys=("name",), merge_key="name", strategy="merge"),
    },
    "JobStatus": {
        "conditions": Facts(merge_key="type", strategy="merge"),
        "uncountedTerminatedPods": Facts("UncountedTerminatedPods"),
    },
    "UncountedTerminatedPods": {
        "failed": Facts(list_type="set"),
        "succeeded": Facts(list_type="set"),
    },
    "Service": {
        "metadata": Facts("ObjectMeta"),
        "spec": Facts("ServiceSpec"),
        "status": Facts("ServiceStatus"),
    },
    "ServiceSpec": {
        "ports": Facts(
            list_type="map", keys=("port", "protocol"), merge_key="port", strategy="merge", key_defaults=_TCP
        ),
        "selector": Facts(atomic=True),
    },
    "ServiceStatus": {
        "conditions": Facts(list_type="map", keys=("type",), merge_key="type", strategy="merge"),
    },
    "ConfigMap": {
        "metadata": Facts("ObjectMeta"),
    },
    "Secret": {
        "metadata": Facts("ObjectMeta"),
    },
    "Node": {
        "metadata": Facts("ObjectMeta"),
        "spec": Facts("NodeSpec"),
        "status": Facts("NodeStatus"),
    },
    "NodeSpec": {
        "podCIDRs": Facts(list_type="set", strategy="merge"),
        "podPreemptionPolicy": Facts("NodePodPreemptionPolicy"),
    },
    "NodePodPreemptionPolicy": {
        "disableResizePreemption": Facts(list_type="set"),
    },
    "NodeStatus": {
        "addresses": Facts(list_type="map", keys=("type",), merge_key="type", strategy="merge"),
        "conditions": Facts(list_type="map", keys=("type",), merge_key="type", strategy="merge"),
    },
}

BUILTIN_ROOTS: dict[str, str] = {
    "Pod": "Pod",
    "Deployment": "Deployment",
    "Job": "Job",
    "Service": "Service",
    "ConfigMap": "ConfigMap",
    "Secret": "Secret",
    "Node": "Node",
    "Scale": "Scale",
}
"""Kind -> its type in `TYPES`: the kinds a strategic merge patch may address (Kubernetes' own types; `Scale` is the
`autoscaling/v1` view of a Deployment's `/scale`)."""

CUSTOM_ROOTS: dict[str, str] = {"Configuration": "Configuration"}
"""devplace kinds whose fields embed Kubernetes types; every other kind has only `ObjectMeta` facts."""

TYPES.update(
    {
        "Configuration": {"metadata": Facts("ObjectMeta"), "spec": Facts("ConfigurationSpec")},
        "ConfigurationSpec": {
            "brokerSpec": Facts("BrokerSpec"),
            "instanceServiceSpec": Facts("ServiceSpec"),
            "configurationServiceSpec": Facts("ServiceSpec"),
        },
        "BrokerSpec": {"brokerPodSpec": Facts("PodSpec"), "brokerJobSpec": Facts("JobSpec")},
        "CustomResource": {"metadata": Facts("ObjectMeta")},
    }
)


def root_of(kind: str, *, builtin_only: bool = False) -> str | None:
    """The type of `kind`'s objects in `TYPES`; None for a devplace kind when `builtin_only` (no strategic merge)."""
    root = BUILTIN_ROOTS.get(kind)
    if root is not None or builtin_only:
        return root
    return CUSTOM_ROOTS.get(kind, "CustomResource")


def facts_of(type_name: str | None, field: str) -> Facts:
    """The facts of `field` in `type_name` (no facts: `NONE`, a granular map or an atomic list)."""
    if not type_name:
        return NONE
    return TYPES.get(type_name, {}).get(field, NONE)
