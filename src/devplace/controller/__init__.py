"""The cluster-level controller (DESIGN.md section 5, seed 002): broker Pods, Jobs, Services and pool
ConfigMaps for Configurations; node cleanup.

Pure decisions, combined by `decisions` (`decide`: one reconcile of one Configuration; `incremental`: the same,
recomputing only what changed):
- `inputs`: Configurations and Instances as the planner sees them (`ConfigurationFacts`, `InstanceFacts`);
- `strategies`: the brokers a Configuration wants, one function per strategy;
- `pools`: stable assignment of Instances to pools and groups;
- `services`: Akri's broker Services;
- `plans`: what should exist against what does: creates, updates, deletes;
- `statuses`: the controller's part of a Configuration's status;
- `names`: names and labels of what the controller creates;
- `nodes`: node cleanup;
- `classes`: `ClassMatcher`, group members by `resourceClass`, on the scheduler's class engine;
- `claims`: the ResourceClaim lifecycle (claims from templates per pod, consumers that went, deallocation, the
  Instance slots held for claims), with its shell `ClaimLifecycle`, which `Controller` runs.

Shell: `controllers` (`Controller`): informers in, one reconcile queue, CAS writes out; it runs `slices`
(`SharedSlices`: shared Instances published as ResourceSlices whose nodeSelector names the nodes that see them).

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.controller._classes import ClassMatcher
from devplace.controller._controllers import Controller

__all__ = [
    "ClassMatcher",
    "Controller",
]
