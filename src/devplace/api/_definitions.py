"""Kubernetes' own definitions: the Swagger 2.0 schemas of the built-in kinds and meta types, as Kubernetes ships
them, and which fields of devplace's models hold one of those types.

A leaf: it imports nothing of devplace. Both the object model (`api.podspecs` checks a Configuration's broker pod
spec against PodSpec) and the API machinery (`kubeapi.openapis` publishes them to kubectl) read the definitions from
here, so the check and what `kubectl explain` shows cannot disagree, and neither has to import the other.

`kubernetes-definitions.json` beside this module is written by `tools/kubernetes_schemas.py` from the
kubernetes-validate package (a dev dependency; the file is committed, so nothing is needed at run time). It is read
once per process, on first use, and must not be mutated.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

Schema = dict[str, Any]

POD_SPEC = "io.k8s.api.core.v1.PodSpec"
JOB_SPEC = "io.k8s.api.batch.v1.JobSpec"
SERVICE_SPEC = "io.k8s.api.core.v1.ServiceSpec"
NODE_SELECTOR = "io.k8s.api.core.v1.NodeSelector"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"

TYPED_FIELDS: Mapping[tuple[str, str], str] = {
    ("BrokerSpec", "brokerPodSpec"): POD_SPEC,
    ("BrokerSpec", "brokerJobSpec"): JOB_SPEC,
    ("ConfigurationSpec", "instanceServiceSpec"): SERVICE_SPEC,
    ("ConfigurationSpec", "configurationServiceSpec"): SERVICE_SPEC,
    # the DRA kinds (api.dra): node selectors, a template's claim metadata and single quantities
    ("ResourceSliceSpec", "nodeSelector"): NODE_SELECTOR,
    ("Device", "nodeSelector"): NODE_SELECTOR,
    ("AllocationResult", "nodeSelector"): NODE_SELECTOR,
    ("ResourceClaimTemplateSpec", "metadata"): OBJECT_META,
    ("DeviceCapacity", "value"): QUANTITY,
    ("Counter", "value"): QUANTITY,
    ("CapacityRequestPolicy", "default"): QUANTITY,
    ("CapacityRequestPolicyRange", "min"): QUANTITY,
    ("CapacityRequestPolicyRange", "max"): QUANTITY,
    ("CapacityRequestPolicyRange", "step"): QUANTITY,
}
"""Fields of the models that hold Kubernetes types (mappings, or quantities kept as text): (model, wire name) ->
Kubernetes' definition."""


@functools.cache
def _loaded() -> dict[str, Schema]:
    text = resources.files("devplace.api").joinpath("kubernetes-definitions.json").read_text(encoding="utf-8")
    loaded: dict[str, Schema] = json.loads(text)["definitions"]
    return loaded


def kubernetes_definitions() -> Mapping[str, Schema]:
    """Kubernetes' own definitions by name, `$ref`s as `#/definitions/<name>`. Do not mutate."""
    return _loaded()


def kubernetes_typed(model: str, field: str) -> str | None:
    """The Kubernetes definition a model's mapping field holds (`("BrokerSpec", "brokerPodSpec")` -> PodSpec's
    name), or None for a field that holds no Kubernetes type."""
    return TYPED_FIELDS.get((model, field))
