"""agent: the node agent (DESIGN.md section 4).

- `agents`: `Agent`, `AgentConfig` - the parts below composed over one set of informers, under one Supervisor.
- `caches`: the agent's informers (Configurations, Instances, its node's Pods, the ConfigMaps and Secrets its
  Configurations read) and its compare-and-swap writes.
- `discoveries`: one discovery stream per Configuration, restarted when what it was started with changes.
- `reconcilers`: the loop that turns marked work into Instance writes and plugin-set syncs.
- `pluginsets`: the IL and CL plugins the node serves, their registration with the kubelet, resource-name clashes.
- `releasers`: this node's slots freed when their pods end or after the PodResources grace.
- `slots`: the pure slot rules (holders, claims, health lists, releases, resizes, preferred allocation).
- `instances`: the pure Instance lifecycle (names, create, join, leave, offline expiry, capacity sync).
- `releases`: the pure release rules (pod gone, absent from PodResources past the grace).
- `conditions`: per-node DiscoveryFailed and ResourceNameConflict conditions on Configurations.
- `clashes`: the pure rule for Configurations whose resource names clash on a node (the senior one is served).
- `properties`: the pure resolution of discoveryProperties (values, Secrets, ConfigMaps) into handler bytes.
- `plugins` / `servers`: the IL and CL DevicePlugin servicers and their unix-socket servers and registration.
- `sockets`: wake-ups when kubelet.sock comes or goes (inotify, or a slow poll).
- `kubelets`: a warning and a Node condition while kubelet.sock is missing.
"""

import devplace.deviceplugin  # noqa: F401  # first: it quiets gRPC's own logging before grpc is imported
from devplace.agent.agents import Agent, AgentConfig

__all__ = ["Agent", "AgentConfig"]
