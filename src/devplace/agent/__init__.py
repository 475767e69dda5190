"""agent: the node agent (DESIGN.md section 4).

- `agents`: `Agent`, `AgentConfig` - discovery to Instances, Instances to device plugins, releases.
- `slots`: the pure slot rules (holders, claims, health lists, releases, resizes, preferred allocation).
- `instances`: the pure Instance lifecycle (names, create, join, leave, offline expiry, capacity sync).
- `releases`: the pure release rules (pod gone, absent from PodResources past the grace).
- `conditions`: per-node DiscoveryFailed and ResourceNameConflict conditions on Configurations.
- `clashes`: the pure rule for Configurations whose resource names clash on a node (the senior one is served).
- `properties`: the pure resolution of discoveryProperties (values, Secrets, ConfigMaps) into handler bytes.
- `plugins` / `servers`: the IL and CL DevicePlugin servicers and their unix-socket servers and registration.
- `caches`: the agent's view of the store, and its compare-and-swap write helpers.
"""

from devplace.agent.agents import Agent, AgentConfig

__all__ = ["Agent", "AgentConfig"]
