"""The resource-class scheduler (DESIGN.md section 6, seed 003): a filter/score/bind framework over plain data,
and its I/O shell.

Pure:
- `decisions`: one pod's decision: filter, score, select devices; a `Binding` or an `Unschedulable` with per-node
  reasons, over one `Snapshot` of the cluster;
- `filters`, `scores`: the filter and score plugins;
- `selection`: the device choice, for one pod or a batch (`flows`: the max-flow core);
- `classes`: resource classes: parsing, nested classes, pod requests, binding annotations, class status;
- `devices`, `nodes`, `pods`: Instances, Nodes and Pods as the scheduler sees them;
- `taints`: node taints (with the lifecycle taints a Node's conditions stand for) and pod tolerations, matched as
  Kubernetes does;
- `assumptions`: what has been decided but the snapshot does not show yet;
- `allocations`: DRA structured allocation for one pod on one node (claims, devices, a bounded search that is exact
  and polynomial for the common shapes), over a per-cycle `Snapshot` of slices, classes and allocated claims;
- `claims`: DRA inputs parsed once: ResourceSlices into pools, DeviceClasses, ResourceClaims, what other claims hold;
- `podclaims`: a pod's ResourceClaims resolved (or why it waits), `reservedFor`;
- `claimchecks`: the DRA claims filter of one pod in one burst, and its reservation;
- `extended`: extended resources a DeviceClass serves (DRAExtendedResource): the claim made for the pod;
- `admissions`: the rules a write must pass that need what is already stored (Kubernetes' admission).

Shell: `schedulers` (`Scheduler`): informers in, one event-driven decision queue, CAS writes out.

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.scheduler._admissions import ADMISSION, admit_create, admit_update
from devplace.scheduler._classes import ANNOTATION_PREFIX, RESOURCE_PREFIX, ResolvedClass, Strategy, resolve_each
from devplace.scheduler._decisions import NodeVerdict
from devplace.scheduler._nodes import availability_message
from devplace.scheduler._schedulers import POD_SCHEDULED, Scheduler

__all__ = [
    "ADMISSION",
    "ANNOTATION_PREFIX",
    "POD_SCHEDULED",
    "RESOURCE_PREFIX",
    "NodeVerdict",
    "ResolvedClass",
    "Scheduler",
    "Strategy",
    "admit_create",
    "admit_update",
    "availability_message",
    "resolve_each",
]
