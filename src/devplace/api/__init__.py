"""devplace's object model: Kubernetes-shaped kinds as typed pydantic models, names, quantities, selectors.

Pure: no I/O. Objects travel as plain wire dicts; `registry.normalize` validates one at a boundary.
EMCO's fleet kinds (`fleet.devplace.io`) are not here: `devplace.placement` registers them when it is imported.
"""

from devplace.api import devices, workloads  # noqa: F401  (registers the kinds)
from devplace.api.devices import Configuration, Instance, ResourceClass
from devplace.api.manifests import Document, load_documents
from devplace.api.meta import ObjectMeta, Resource
from devplace.api.registry import KindInfo, kinds, lookup, normalize
from devplace.api.workloads import ConfigMap, Deployment, Job, Node, Pod, Secret, Service

__all__ = [
    "ConfigMap",
    "Configuration",
    "Deployment",
    "Document",
    "Instance",
    "Job",
    "KindInfo",
    "Node",
    "ObjectMeta",
    "Pod",
    "Resource",
    "ResourceClass",
    "Secret",
    "Service",
    "kinds",
    "load_documents",
    "lookup",
    "normalize",
]
