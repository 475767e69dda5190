"""Generated scenarios (`devplace sim generate`): a fleet of any size, with expectations known before it runs.

`generate_scenario(nodes=N, devices=M, ...)` is a pure function of its arguments (the seed included) that returns a
scenario document (`load_scenario` accepts it once dumped as YAML). Its shape:

- nodes `node-1`..`node-N`, labelled `zone: zone-a|b|c` round-robin;
- devices `dev-00001`.. spread round-robin over the nodes (device k's home is node ((k-1) mod N)+1), a share of them
  (`shared_ratio`, drawn from the seed) also seen by one or two other nodes; each carries property `kind`, the kinds
  taken in rounds of N devices so every node gets every kind in turn;
- one `akri.sh/v0` Configuration per kind (`sim-<kind>`, sim discovery handler with `kind: <kind>`, capacity 3,
  unique devices). The sim handler stamps every device shared, so each device is exactly one Instance whatever the
  number of nodes that see it, and capacity 3 is at least the number of nodes sharing a device: one node's
  Configuration-level claims never make a device unhealthy to another, so the scheduler's view cannot go stale;
- steps, in an order that keeps every expectation exact: apply the Configurations (counts per Configuration, what
  node-1's kubelet sees, free slots); unplug a few devices (their Instances stay, stamped offline) and advance past the
  offline grace (they go); plug them back; take the last node down (the devices only it saw lose their Instances at
  once, the controller's rule) and up again; run pods through the scheduler last (one per pod, each asking one
  device of a kind through the Configuration-level resource), so no pod holds a slot on a device that is unplugged or
  on the node that goes down.

Transport: up to `INPROCESS_FROM - 1` nodes the scenario keeps the default (`unix`: a real gRPC server per plugin per
node on unix sockets); from `INPROCESS_FROM` nodes it asks for `settings.transport: inprocess` (the same messages,
calls and socket files, no sockets: `deviceplugin.InProcessTransport`), since a fleet of hundreds of nodes would spend
its time, and its file descriptors, on tens of thousands of gRPC servers. `transport=` overrides the choice.

Instance names carry a 3-byte digest of the device id (`agent.instance_name`); at thousands of devices two ids could
share one, so an id whose Instance name is taken gets a suffix until it is free: the counts stay exact.

Invalid arguments raise `errors.Invalid` naming the argument.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from devplace import errors
from devplace.agent import instance_name

API_VERSION = "devplace.io/v1alpha1"
PREFIX = "akri.sh"
"""The extended-resource prefix of the generated `akri.sh/v0` Configurations."""
CAPACITY = 3
"""Slots per device: at least the most nodes that share one (module docstring)."""
OFFLINE_GRACE = 30.0
"""Seconds an unplugged shared device's Instance outlives it (kept short: `advance` settles at every poll period)."""
INPROCESS_FROM = 50
"""Nodes from which a generated scenario runs kubelets and agents in process (module docstring)."""
_KINDS = ("camera", "gpu", "fpga", "sensor", "nic", "npu", "disk", "tpm")
_ZONES = ("zone-a", "zone-b", "zone-c")


def kind_names(count: int) -> list[str]:
    """The device kinds of a generated scenario: `camera`, `gpu`, ... then `kind-9`, `kind-10`, ..."""
    return [_KINDS[i] if i < len(_KINDS) else f"kind-{i + 1}" for i in range(count)]


def configuration_name(kind: str) -> str:
    return f"sim-{kind}"


def _check(name: str, value: object, low: float, high: float | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise errors.Invalid.field(name, f"must be a number, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise errors.Invalid.field(name, f"must be {bound}, got {value!r}")


def generate_scenario(
    *,
    nodes: int,
    devices: int,
    seed: int = 0,
    shared_ratio: float = 0.2,
    configurations: int = 2,
    pods: int = 5,
    unplugs: int | None = None,
    name: str | None = None,
    transport: Literal["unix", "inprocess"] | None = None,
) -> dict[str, Any]:
    """A scenario document (module docstring) with `nodes` nodes, `devices` devices, one Configuration per kind
    (`configurations` kinds), `pods` pods run through the scheduler (at most one per device) and `unplugs` devices
    unplugged and plugged back (default: 1 per 20 devices, 1 to 5); `transport`: None chooses by size."""
    _check("nodes", nodes, 1)
    _check("devices", devices, 1)
    _check("shared_ratio", shared_ratio, 0.0, 1.0)
    _check("configurations", configurations, 1, 64)
    _check("pods", pods, 0)
    if unplugs is not None:
        _check("unplugs", unplugs, 0)
    if transport not in (None, "unix", "inprocess"):
        raise errors.Invalid.field("transport", f"must be unix or inprocess, got {transport!r}")
    chosen_transport = transport or ("inprocess" if nodes >= INPROCESS_FROM else "unix")
    rng = random.Random(seed)
    node_names = [f"node-{i}" for i in range(1, nodes + 1)]
    kinds = kind_names(configurations)

    # -- devices -----------------------------------------------------------------------------------------------------
    taken: set[str] = set()
    device_list: list[dict[str, Any]] = []
    for k in range(1, devices + 1):
        home = (k - 1) % nodes
        kind = kinds[((k - 1) // nodes) % len(kinds)]
        seen_by = [node_names[home]]
        if nodes > 1 and rng.random() < shared_ratio:
            others = [n for i, n in enumerate(node_names) if i != home] if nodes <= 64 else None
            extra = min(rng.choice((1, 2)), nodes - 1)
            if others is not None:
                seen_by += rng.sample(others, extra)
            else:  # large fleets: draw indices, not a list of every other node
                while len(seen_by) < 1 + extra:
                    candidate = node_names[rng.randrange(nodes)]
                    if candidate not in seen_by:
                        seen_by.append(candidate)
        device_id = f"dev-{k:05d}"
        while instance_name(configuration_name(kind), device_id, "", True) in taken:
            device_id += "x"
        taken.add(instance_name(configuration_name(kind), device_id, "", True))
        device_list.append({"id": device_id, "nodes": seen_by, "properties": {"kind": kind}})

    def instances(visible: list[dict[str, Any]], kind: str | None = None) -> int:
        return sum(1 for d in visible if kind is None or d["properties"]["kind"] == kind)

    def on_node(node: str, visible: list[dict[str, Any]], kind: str) -> int:
        return sum(1 for d in visible if node in d["nodes"] and d["properties"]["kind"] == kind)

    def cl_available(node: str) -> dict[str, int]:
        return {f"{PREFIX}/{configuration_name(k)}": on_node(node, device_list, k) for k in kinds}

    def counts(visible: list[dict[str, Any]], running_nodes: int) -> dict[str, int]:
        out = {"nodes": running_nodes, "instances": instances(visible)}
        for kind in kinds:
            out[f"instances[configuration={configuration_name(kind)}]"] = instances(visible, kind)
        return out

    first = node_names[0]
    last = node_names[-1]
    configuration_docs = [
        {
            "apiVersion": "akri.sh/v0",
            "kind": "Configuration",
            "metadata": {"name": configuration_name(kind), "namespace": "default"},
            "spec": {
                "discoveryHandler": {"name": "sim", "discoveryDetails": f"kind: {kind}"},
                "capacity": CAPACITY,
                "uniqueDevices": True,
            },
        }
        for kind in kinds
    ]
    steps: list[dict[str, Any]] = []
    steps.append(
        {
            "say": f"apply {len(kinds)} Configuration(s): every device becomes one Instance with {CAPACITY} free slots",
            "apply": configuration_docs,
            "expect": {
                "counts": counts(device_list, nodes),
                "available": {first: cl_available(first)},
                "holders": {
                    f"{configuration_name(d['properties']['kind'])}/{d['id']}": {"free": CAPACITY}
                    for d in device_list[:2]
                },
            },
        }
    )

    # -- unplug a few, let their Instances expire, plug them back ---------------------------------------------------
    unplug_count = min(devices, unplugs if unplugs is not None else max(1, min(5, devices // 20)))
    chosen = sorted(rng.sample(range(devices), unplug_count)) if unplug_count else []
    gone = [device_list[i] for i in chosen]
    unplugged = set(chosen)
    remaining = [d for i, d in enumerate(device_list) if i not in unplugged]
    for n, device in enumerate(gone, start=1):
        step: dict[str, Any] = {"unplug": {"device": device["id"]}}
        if n == len(gone):
            step["say"] = f"{len(gone)} device(s) unplugged: their Instances stay, stamped offline, for the grace"
            step["expect"] = {"counts": counts(device_list, nodes)}
        steps.append(step)
    if gone:
        steps.append(
            {
                "say": "past the offline grace the unplugged devices' Instances are deleted",
                "advance": f"{OFFLINE_GRACE + 10:g}s",
                "expect": {"counts": counts(remaining, nodes)},
            }
        )
    for n, device in enumerate(gone, start=1):
        step = {
            "plug": {"device": device["id"], "nodes": list(device["nodes"]), "properties": dict(device["properties"])}
        }
        if n == len(gone):
            step["say"] = "plugged back: every device has its Instance again"
            step["expect"] = {"counts": counts(device_list, nodes)}
        steps.append(step)

    # -- a node dies and comes back ---------------------------------------------------------------------------------
    survivors = [{**d, "nodes": [n for n in d["nodes"] if n != last]} for d in device_list]
    survivors = [d for d in survivors if d["nodes"]]
    steps.append(
        {
            "say": f"{last} goes down: the Instances only it saw are deleted at once, shared ones drop it",
            "node-down": last,
            "expect": {"counts": {**counts(survivors, nodes - 1), f"instances[node={last}]": 0}},
        }
    )
    steps.append(
        {
            "say": f"{last} comes back and finds its devices again",
            "node-up": last,
            "expect": {
                "counts": {
                    **counts(device_list, nodes),
                    f"instances[node={last}]": sum(1 for d in device_list if last in d["nodes"]),
                },
                "available": {last: cl_available(last)},
            },
        }
    )

    # -- pods through the scheduler ----------------------------------------------------------------------------------
    pod_count = min(pods, devices)
    for p in range(1, pod_count + 1):
        kind = device_list[p - 1]["properties"]["kind"]  # pods per kind never outnumber that kind's devices
        steps.append(
            {
                "run-pod": {"name": f"pod-{p}", "requests": {f"{PREFIX}/{configuration_name(kind)}": 1}},
                "expect": {"phases": {f"pod-{p}": "Running"}},
            }
        )
    steps.append(
        {
            "say": "a minute later every pod still runs",
            "advance": "1m",
            "expect": {"counts": {**counts(device_list, nodes), "pods[phase=Running]": pod_count}},
        }
    )

    return {
        "apiVersion": API_VERSION,
        "kind": "Scenario",
        "metadata": {
            "name": name or f"generated-{nodes}n-{devices}d-s{seed}",
            "description": (
                f"generated: {nodes} nodes, {devices} devices (shared ratio {shared_ratio:g}), "
                f"{len(kinds)} configurations, {pod_count} pods, seed {seed}"
            ),
        },
        "spec": {
            "settings": {
                "offlineGrace": f"{OFFLINE_GRACE:g}s",
                "settleTimeout": float(30 + devices // 20),
                **({"transport": chosen_transport} if chosen_transport != "unix" else {}),
            },
            "nodes": [{"name": n, "labels": {"zone": _ZONES[i % len(_ZONES)]}} for i, n in enumerate(node_names)],
            "devices": device_list,
            "steps": steps,
        },
    }
