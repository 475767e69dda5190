"""The node agent's state gauges, sampled at scrape time (`devplace.metrics.Sampled`): what the agent holds now.

- `akri_instance_count{configuration,is_shared}`: Instances that list this node (Akri's agent counts the same);
- `devplace_discovered_devices{configuration}`: the devices discovery reports now;
- `devplace_instance_slots{configuration,state}`: the slots of those Instances, `free` or `held` (by anyone).

Read from the agent's informers and discovery lists, so a scrape costs one pass over this node's Instances and nothing
is kept up to date on the hot paths.
"""

from __future__ import annotations

from typing import Any

from devplace import metrics

Agent = Any
"""An `agents.Agent` (not imported: `agents` imports this module); read: `cache.on_node()`, `discoveries.devices`."""

Counts = dict[tuple[str, ...], float]


def _add(counts: Counts, key: tuple[str, ...], n: float) -> None:
    counts[key] = counts.get(key, 0.0) + n


def instance_counts(agent: Agent) -> Counts:
    counts: Counts = {}
    for record in agent.cache.on_node():
        _add(counts, (record.configuration, "true" if record.shared else "false"), 1)
    return counts


def slot_counts(agent: Agent) -> Counts:
    counts: Counts = {}
    for record in agent.cache.on_node():
        held = record.usage.held
        _add(counts, (record.configuration, "held"), held)
        _add(counts, (record.configuration, "free"), max(0, record.usage.capacity - held))
    return counts


def device_counts(agent: Agent) -> Counts:
    counts: Counts = {}
    for (_, configuration), devices in agent.discoveries.devices.items():
        _add(counts, (configuration,), len(devices))
    return counts


def observe(agent: Agent) -> None:
    """Count `agent` in the gauges while it lives."""
    metrics.INSTANCES.add(agent, instance_counts)
    metrics.SLOTS.add(agent, slot_counts)
    metrics.DEVICES.add(agent, device_counts)
