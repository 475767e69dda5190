"""The resource-class scheduler's decision core (DESIGN.md section 6, seed 003): pure functions over plain data.

Wire objects are read once at the boundary (`device_of`, `pod_info`, `node_info`, `resolve_classes`); a `Snapshot`
snapshot indexes devices by node and class; `schedule_one` filters, scores, selects devices and returns a `Binding`
(node + `resClass_<class>_<device>` annotations) or an `Unschedulable` with per-node reasons; `Assumed` keeps
decisions the snapshot does not show yet; `place_batch` places a batch, `optimal` by max flow.
No I/O here: informers, the store and the binding writes belong to the shell around it.
"""

from devplace.scheduler.assumptions import Assumed
from devplace.scheduler.classes import ResolvedClass, class_requests, class_status, resolve_classes
from devplace.scheduler.decisions import Binding, Config, Snapshot, Unschedulable, schedule_burst, schedule_one
from devplace.scheduler.devices import Device, device_of
from devplace.scheduler.nodes import NodeInfo, node_info
from devplace.scheduler.pods import PodInfo, pending_order, pod_info
from devplace.scheduler.selection import BatchPod, place_batch, select_devices

__all__ = [
    "Assumed",
    "BatchPod",
    "Binding",
    "Config",
    "Device",
    "NodeInfo",
    "PodInfo",
    "ResolvedClass",
    "Snapshot",
    "Unschedulable",
    "class_requests",
    "class_status",
    "device_of",
    "node_info",
    "pending_order",
    "place_batch",
    "pod_info",
    "resolve_classes",
    "schedule_burst",
    "schedule_one",
    "select_devices",
]
