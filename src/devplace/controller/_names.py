"""Names and labels of what the controller creates: Akri's where Akri has them, deterministic everywhere.

Every name is a pure function of its inputs, so two controllers (or one restarted mid-way) derive the same names
and a second `create` meets `AlreadyExists`, which is success: no duplicates, ever.

Akri's (v0.13): broker Pod `<node>-<instance>-pod` for a shared Instance, `<instance>-pod` for a local one; Job
`<instance>-<configuration generation>-job`; Services `<instance>-svc` and `<configuration>-svc`; labels
`controller=akri.sh`, `akri.sh/configuration`, `akri.sh/instance`, `akri.sh/target-node`.
devplace's strategies add: `<instance>-<i>-pod` (deployment replica i), `<configuration>-<i>-pod` (configuration
replica i), `<configuration>-pool-<id>-pod` with ConfigMap `<configuration>-pool-<id>` (pools and groups; the id is a
small integer for dynamic pools, whose membership changes in place, and a digest of node and members otherwise).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

import orjson

CONTROLLER_LABEL: Final = "controller"
CONTROLLER_VALUE: Final = "akri.sh"
CONFIGURATION_LABEL: Final = "akri.sh/configuration"
INSTANCE_LABEL: Final = "akri.sh/instance"
NODE_LABEL: Final = "akri.sh/target-node"
POOL_LABEL: Final = "devplace.io/pool"
SPEC_HASH_ANNOTATION: Final = "devplace.io/spec-hash"
"""A digest of what the controller decided about an object (spec, labels, data): a different one means drift."""
MEMBERS_ANNOTATION: Final = "devplace.io/members"
"""On a static pool's or a group's broker: its Instances, one JSON list per member (the previous assignment)."""
POOL_VOLUME: Final = "devplace-pool"
POOL_MOUNT: Final = "/etc/devplace/pool"


def digest(value: Any, length: int = 6) -> str:
    """A short hex digest of a JSON value (blake2b, like Instance names)."""
    raw = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(raw, digest_size=(length + 1) // 2).hexdigest()[:length]


def resource_name(prefix: str, name: str) -> str:
    """The extended resource of an Instance (`<prefix>/<instance>`) or a Configuration (`<prefix>/<configuration>`)."""
    return f"{prefix}/{name}"


def node_pod_name(instance: str, node: str, shared: bool) -> str:
    return f"{node}-{instance}-pod" if shared else f"{instance}-pod"


def job_name(instance: str, generation: int) -> str:
    return f"{instance}-{generation}-job"


def replica_pod_name(instance: str, index: int) -> str:
    return f"{instance}-{index}-pod"


def configuration_pod_name(configuration: str, index: int) -> str:
    return f"{configuration}-{index}-pod"


def pool_config_map_name(configuration: str, pool_id: str) -> str:
    return f"{configuration}-pool-{pool_id}"


def pool_pod_name(configuration: str, pool_id: str) -> str:
    return f"{configuration}-pool-{pool_id}-pod"


def instance_service_name(instance: str) -> str:
    return f"{instance}-svc"


def configuration_service_name(configuration: str) -> str:
    return f"{configuration}-svc"


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}
