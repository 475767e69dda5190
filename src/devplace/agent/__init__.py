"""The node agent (DESIGN.md section 4): discovered devices become Instances, Instances become device plugins the
kubelet allocates from, and slots are claimed and released by compare-and-swap on the Instance.

Pure decisions:
- `slots`: the slot rules (holders, claims, health lists, releases, resizes, preferred allocation);
- `instances`: the Instance lifecycle (names, create, join, leave, offline expiry, capacity sync);
- `configurations`: Configurations and Instances as the agent reads them, parsed as plain data (no models: the
  agent's process loads no pydantic);
- `release_rules`: which held slots to free and when (pod gone, absent from PodResources past the grace);
- `clashes`: Configurations whose resource names clash on a node (the senior one is served);
- `conditions`: per-node DiscoveryFailed and ResourceNameConflict conditions on Configurations;
- `properties`: discoveryProperties (values, Secrets, ConfigMaps) resolved into handler bytes.

Shells:
- `agents`: `Agent`, `AgentConfig`: the parts below composed over one set of informers, under one Supervisor;
- `caches`: the agent's informers (Configurations, Instances, its node's Pods, the ConfigMaps and Secrets read);
- `writes`: every write the agent makes, each one `store.cas` seeded from the cache (Allocate's claim included);
- `deviceplugins`: the IL and CL DevicePlugin servicers: ListAndWatch, GetPreferredAllocation, Allocate;
- `pluginsets`: which plugins the node serves, started and registered with the kubelet;
- `servers`: one plugin on its unix socket, and its registration;
- `discoveries`: one discovery stream per Configuration, restarted when its inputs change;
- `reconcilers`: the loop that turns marked work into Instance writes and plugin-set syncs;
- `releasers`: this node's slots freed when their pods end or after the PodResources grace;
- `sockets`: wake-ups when kubelet.sock comes or goes (inotify, or a slow poll);
- `kubelets`: a warning and a Node condition while kubelet.sock is missing;
- `dra`: the kubelet's DRA plugin (registration, NodePrepareResources/NodeUnprepareResources, health), over
  `draclaims` (pure: a claim's allocation mapped to Instances and slots) and `dracdi` (CDI spec files);
- `slices`: this node's local Instances published as its DRA ResourceSlice pool (`api.plan_pool`, `store.write_pool`);
- `samples`: the agent's gauges (Akri's `akri_instance_count`, devices, slots free/held), read at scrape time.

Where Allocate claims a slot: `deviceplugins` (the RPC) -> `writes.update_usage` (the CAS) -> `slots` (the rule).

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.agent._agents import Agent, AgentConfig
from devplace.agent._instances import instance_name
from devplace.agent._properties import references

__all__ = [
    "Agent",
    "AgentConfig",
    "instance_name",
    "references",
]
