"""Act 5 of `devplace demo`: resource classes and brokers on a small simulated fleet (seeds 003 and 002).

The act runs `devplace.sim.Fleet` over the tour's store with its default cluster-level parts: the resource-class
scheduler and the broker controller, beside a real agent and a simulated kubelet per node. Time is the fleet's fake
clock; it moves once, on purpose, to let an offline shared camera's grace period pass.

- Seed 003: the seed's three ResourceClasses as it writes them, two GPUs plugged with their memory (16G on node-a,
  32G on node-b). A pod asking `rc.devplace.io/nvidia.high.mem: 1` without a node is placed by the scheduler on the
  node with the 32G GPU, annotated `scheduler.alpha.kubernetes.io/resClass_nvidia.high.mem_<device>=1`, and admitted
  by that node's kubelet through Allocate on the device's Instance-level plugin (the node holds the slot in
  `deviceUsage`); the class status counts it. A second such pod waits Pending with the scheduler's per-node reasons,
  and takes the slot as soon as the first pod is deleted (the scheduler retries on the release, with no timer).
- Seed 002: a Configuration with a `brokerPodSpec` (per node, the default strategy) and capacity 1, on one camera two
  nodes see: one broker runs, the other waits Pending for the slot (high availability), and the Instance and
  Configuration Services exist. Unplugging the camera removes brokers and Services at once (the shared Instance
  goes when its offline grace has passed); plugging it back brings them all back under the same names.

What the act checks is what the seeds say, on the world the module constants describe (`GPUS`, `CAMERA_NODES`); a
changed world makes the act report FAILED rather than narrate success. It deletes what it created when it ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from devplace.agent import instance_name
from devplace.demo._tours import Tour, delete_all
from devplace.scheduler import ANNOTATION_PREFIX, RESOURCE_PREFIX
from devplace.sim import Fleet, recording
from devplace.store import Store

PREFIX = "akri.sh"
NAMESPACE = "default"
NODES = ("node-a", "node-b", "node-c")
_CATCH_UP = 5.0

# -- seed 003 --------------------------------------------------------------------------------------------------------

HIGH_MEM = "nvidia.high.mem"
GPU_CONFIG = "akri-gpu"
GPU_KIND = "nvidia-gpu"
GPUS: tuple[tuple[str, str, str], ...] = (("gpu-1", "node-a", "16G"), ("gpu-2", "node-b", "32G"))
"""(device id, the node it is plugged into, its memory)."""
BIG_GPU, BIG_GPU_NODE = "gpu-2", "node-b"
"""What the seed's class should select on this world: the 32G GPU, on node-b."""
PODS = ("trainer-1", "trainer-2")

CLASSES: tuple[tuple[str, str, str, str], ...] = (
    (HIGH_MEM, "nvidia-gpu", "memory", "30G"),
    ("hugepages-1gig", "huge-pages", "size", "1G"),
    ("fast.nic", "nic", "speed", "40GBPS"),
)
"""Seed 003's YAML examples 1-3: (name, Kind In [...], key, GtEq value)."""

# -- seed 002 --------------------------------------------------------------------------------------------------------

CAMERA_CONFIG = "akri-onvif-video"
CAMERA = "cam-1"
CAMERA_NODES = ("node-a", "node-b")
CAMERA_CAPACITY = 1
_CONFIG_LABEL = "akri.sh/configuration"


def _service() -> dict[str, Any]:
    return {"type": "ClusterIP", "ports": [{"name": "grpc", "port": 80, "targetPort": 8083}]}


# -- manifests -------------------------------------------------------------------------------------------------------


def _class_manifest(name: str, kind: str, key: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": {"name": name},
        "spec": {
            "resourceSelector": [
                {
                    "matchExpressions": [
                        {"key": "Kind", "operator": "In", "values": [kind]},
                        {"key": key, "operator": "GtEq", "values": [value]},
                    ]
                }
            ]
        },
    }


def _gpu_configuration() -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": GPU_CONFIG, "namespace": NAMESPACE},
        "spec": {
            "discoveryHandler": {"name": "sim", "discoveryDetails": "kind: gpu\nshared: false"},
            "deviceKind": GPU_KIND,
            "capacity": 1,
        },
    }


def _camera_configuration() -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": CAMERA_CONFIG, "namespace": NAMESPACE},
        "spec": {
            "discoveryHandler": {"name": "sim", "discoveryDetails": "kind: camera"},
            "capacity": CAMERA_CAPACITY,
            "brokerSpec": {
                "brokerPodSpec": {
                    "containers": [
                        {
                            "name": f"{CAMERA_CONFIG}-broker",
                            "image": "ghcr.io/project-akri/akri/onvif-video-broker",
                            "resources": {"limits": {"{{PLACEHOLDER}}": "1"}},
                        }
                    ]
                }
            },
            "instanceServiceSpec": _service(),
            "configurationServiceSpec": _service(),
        },
    }


def _dump(docs: Sequence[Mapping[str, Any]]) -> str:
    return "---\n".join(yaml.safe_dump(dict(d), sort_keys=False) for d in docs)


# -- reading the cluster ---------------------------------------------------------------------------------------------


def _usage(instance: Mapping[str, Any]) -> dict[str, str]:
    return dict((instance.get("spec") or {}).get("deviceUsage") or {})


async def _instances(fleet: Fleet, configuration: str) -> dict[str, dict[str, Any]]:
    return {
        i["metadata"]["name"]: i
        for i in await fleet.list("Instance", NAMESPACE)
        if i["spec"].get("configurationName") == configuration
    }


async def _owned(fleet: Fleet, kind: str, configuration: str) -> list[dict[str, Any]]:
    """Objects of `kind` the controller made for a Configuration, by name."""
    mine = [
        o
        for o in await fleet.list(kind, NAMESPACE)
        if (o["metadata"].get("labels") or {}).get(_CONFIG_LABEL) == configuration
    ]
    return sorted(mine, key=lambda o: str(o["metadata"]["name"]))


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _node_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _scheduled_message(pod: Mapping[str, Any]) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or "")
    return ""


def _counts(counted: object) -> str:
    """A Configuration's `status.brokers` as `desired 2, running 1, pending 1`."""
    if not isinstance(counted, Mapping):
        return "none"
    return ", ".join(f"{k} {v}" for k, v in counted.items())


def _class_annotations(pod: Mapping[str, Any]) -> dict[str, str]:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return {str(k): str(v) for k, v in annotations.items() if str(k).startswith(ANNOTATION_PREFIX)}


async def _class_status(fleet: Fleet) -> dict[str, tuple[str, str]]:
    """(allocatable, requested) of each of the act's classes, as written in their status ("?" when missing)."""
    out: dict[str, tuple[str, str]] = {}
    for name, *_ in CLASSES:
        obj = await fleet.get("ResourceClass", name)
        status = (obj or {}).get("status") or {}
        out[name] = (str(status.get("allocatable", "?")), str(status.get("requested", "?")))
    return out


def _class_table(tour: Tour, status: Mapping[str, tuple[str, str]]) -> None:
    rows = [
        [name, f"Kind In [{kind}], {key} GtEq {value}", *status.get(name, ("?", "?"))]
        for name, kind, key, value in CLASSES
    ]
    tour.table(["CLASS", "SELECTS", "ALLOCATABLE", "REQUESTED"], rows)


async def _pod_table(tour: Tour, fleet: Fleet) -> dict[str, dict[str, Any]]:
    pods: dict[str, dict[str, Any]] = {}
    rows = []
    for name in PODS:
        pod = await fleet.get("Pod", name, NAMESPACE)
        if pod is None:
            continue
        pods[name] = pod
        devices = ", ".join(k.removeprefix(f"{ANNOTATION_PREFIX}{HIGH_MEM}_") for k in _class_annotations(pod))
        rows.append([name, _node_of(pod) or "-", _phase(pod), devices or "-"])
    tour.table(["POD", "NODE", "PHASE", "DEVICE (from the annotation)"], rows)
    return pods


async def _broker_table(tour: Tour, fleet: Fleet) -> dict[str, tuple[str, str]]:
    """Broker pod name -> (phase, node), printed with the Services beside."""
    brokers = {p["metadata"]["name"]: (_phase(p), _node_of(p)) for p in await _owned(fleet, "Pod", CAMERA_CONFIG)}
    services = [s["metadata"]["name"] for s in await _owned(fleet, "Service", CAMERA_CONFIG)]
    rows = [[name, node or "-", phase] for name, (phase, node) in sorted(brokers.items())]
    tour.table(["BROKER", "NODE", "PHASE"], rows or [["(none)", "-", "-"]])
    tour.say(f"   services: {', '.join(services) or '(none)'}")
    return brokers


# -- the act ---------------------------------------------------------------------------------------------------------


async def classes_act(tour: Tour, store: Store) -> None:
    """Act 5: seed 003's resource classes and seed 002's brokers on three simulated nodes over `store`."""
    tour.act(
        5,
        "resource classes and brokers",
        "seed 003 (Resource Classes): devices selected by metadata, placed by the scheduler; seed 002 (broker "
        f"deployment): one broker per node, bounded by capacity; {len(NODES)} nodes, resource prefix {PREFIX}",
    )
    try:
        async with Fleet(store=store, resource_prefix=PREFIX) as fleet:
            for node in NODES:
                fleet.add_node(node)
            await _class_steps(tour, fleet)
            await _broker_steps(tour, fleet)
    finally:
        removed = await _remove(store)
        tour.note(f"(cleanup: the nodes stopped; {removed} objects of this act deleted)")


async def _class_steps(tour: Tour, fleet: Fleet) -> None:
    names = {device: instance_name(GPU_CONFIG, device, node, shared=False) for device, node, _ in GPUS}
    big = names.get(BIG_GPU, "?")
    tour.step(
        "Apply the seed's three ResourceClasses and a GPU Configuration (deviceKind nvidia-gpu); plug "
        + ", ".join(f"{device} ({memory}) into {node}" for device, node, memory in GPUS),
        "nvidia.high.mem selects the nvidia-gpus with memory >= 30G; status allocatable counts the devices it "
        "selects, requested those in use",
    )
    for device, node, memory in GPUS:
        fleet.plug(device, [node], {"kind": "gpu", "memory": memory})
    classes = [_class_manifest(*c) for c in CLASSES]
    tour.code(_dump(classes[:1]))
    tour.note(f"(and {', '.join(c[0] for c in CLASSES[1:])} as the seed writes them: no such devices here)")
    await fleet.apply(classes)
    await fleet.apply(_gpu_configuration())
    await fleet.settle()
    instances = await _instances(fleet, GPU_CONFIG)
    tour.table(
        ["INSTANCE", "NODE", "MEMORY", "DEVICE USAGE"],
        [
            [
                name,
                ",".join(i["spec"].get("nodes") or []),
                str((i["spec"].get("brokerProperties") or {}).get("memory", "?")),
                ", ".join(f"{slot}={holder or 'free'}" for slot, holder in sorted(_usage(i).items())),
            ]
            for name, i in sorted(instances.items())
        ],
    )
    status = await _class_status(fleet)
    _class_table(tour, status)
    want_status = {HIGH_MEM: ("1", "0"), "hugepages-1gig": ("0", "0"), "fast.nic": ("0", "0")}
    tour.expect(
        sorted(instances) == sorted(names.values()) and status == want_status,
        f"{len(instances)} GPU Instances; class status "
        + ", ".join(f"{name} {a}/{r}" for name, (a, r) in status.items())
        + " (allocatable/requested)",
        f"{len(names)} Instances; {HIGH_MEM} 1/0, the others 0/0",
        because="only the 32G GPU is an nvidia-gpu with memory >= 30G",
    )

    request = {f"{RESOURCE_PREFIX}{HIGH_MEM}": 1}
    tour.step(
        f"Submit pod {PODS[0]} asking {RESOURCE_PREFIX}{HIGH_MEM}: 1, with no node",
        "the scheduler filters the nodes, selects a device the class matches, annotates the pod "
        "resClass_<class>_<device>=<qty>; the kubelet calls Allocate on that device's plugin",
    )
    first = await fleet.run_pod(PODS[0], requests=request)
    await _pod_table(tour, fleet)
    tour.expect(
        _phase(first) == "Running" and _node_of(first) == BIG_GPU_NODE,
        f"pod {PODS[0]}: {_phase(first)} on {_node_of(first) or 'no node'}",
        f"Running on {BIG_GPU_NODE}",
        because=f"the only node with a GPU of >= 30G ({BIG_GPU})",
    )
    annotations = _class_annotations(first)
    for key, value in sorted(annotations.items()):
        tour.say(f"   {key}={value}")
    want_annotation = {f"{ANNOTATION_PREFIX}{HIGH_MEM}_{big}": "1"}
    tour.expect(
        annotations == want_annotation,
        f"annotated with {len(annotations)} device(s): "
        + (", ".join(k.removeprefix(ANNOTATION_PREFIX) for k in annotations) or "none"),
        f"exactly {HIGH_MEM}_{big}=1",
    )
    held = _usage((await _instances(fleet, GPU_CONFIG)).get(big, {}))
    allocation = fleet.kubelet(BIG_GPU_NODE).allocations().get((NAMESPACE, PODS[0]))
    devices = {r: list(s) for c in allocation.containers for r, s in c.devices.items()} if allocation else {}
    tour.say(
        f"   {big} deviceUsage: "
        + (", ".join(f"{slot}={holder or 'free'}" for slot, holder in sorted(held.items())) or "none")
        + f"; {BIG_GPU_NODE}'s kubelet allocated "
        + (", ".join(f"{r}: {', '.join(s)}" for r, s in devices.items()) or "nothing")
    )
    tour.expect(
        held == {f"{big}-0": BIG_GPU_NODE} and devices == {f"{PREFIX}/{big}": [f"{big}-0"]},
        f"{big}-0 held by {held.get(f'{big}-0') or 'nobody'}; kubelet allocated "
        + (", ".join(f"{r}: {', '.join(s)}" for r, s in devices.items()) or "nothing"),
        f"{big}-0 held by {BIG_GPU_NODE}, allocated through {PREFIX}/{big}",
        because="Allocate on the Instance-level plugin claimed the slot for the node",
    )
    status = await _class_status(fleet)
    tour.expect(
        status.get(HIGH_MEM) == ("1", "1"),
        f"{HIGH_MEM} status allocatable/requested: {'/'.join(status.get(HIGH_MEM, ('?', '?')))}",
        "1/1",
    )

    tour.step(
        f"Submit pod {PODS[1]} asking the same",
        "no node has a free device the class selects: the pod stays Pending, with every node's reason",
    )
    second = await fleet.run_pod(PODS[1], requests=request)
    message = _scheduled_message(second)
    tour.table(
        ["NODE", "WHY NOT"],
        [[v.node, v.reason or "fits"] for v in fleet.scheduler.explain(f"{NAMESPACE}/{PODS[1]}")],
    )
    tour.say(f"   {PODS[1]}: {_phase(second)}: {message}")
    want_message = (
        f"0/{len(NODES)} nodes are available: 2 no device matches class {HIGH_MEM}, "
        f"1 insufficient devices for class {HIGH_MEM}: want 1, 0 free."
    )
    tour.expect(
        _phase(second) == "Pending" and not _node_of(second) and message == want_message,
        f"pod {PODS[1]}: {_phase(second)}, {'on ' + _node_of(second) if _node_of(second) else 'unbound'}, "
        f"saying {message!r}",
        f"Pending, unbound, saying {want_message!r}",
    )

    tour.step(
        f"Delete pod {PODS[0]}",
        "the kubelet releases the device and the scheduler's state follows; the pending pod is placed on the "
        "freed device",
    )
    now = fleet.clock.now()
    async with recording(fleet.store) as history:
        await fleet.delete("Pod", PODS[0], NAMESPACE)
        await fleet.settle()
        synced = await history.caught_up(fleet.store, _CATCH_UP)
    waited = fleet.clock.now() - now
    pods = await _pod_table(tour, fleet)
    second = pods.get(PODS[1], {})
    slot = f"{big}-0"
    trail = [state.get(slot, "") or "free" for state in history.states.get(big, [])]
    tour.expect(
        _phase(second) == "Running"
        and _node_of(second) == BIG_GPU_NODE
        and _class_annotations(second) == want_annotation
        and waited == 0,
        f"pod {PODS[1]}: {_phase(second)} on {_node_of(second) or 'no node'} after {waited:g} s of fake time",
        f"Running on {BIG_GPU_NODE} with {big}, without waiting",
        because="the scheduler retried on the release event, not on a timer",
    )
    bookings = history.double_bookings()
    tour.expect(
        synced and not bookings and trail == [BIG_GPU_NODE, "free", BIG_GPU_NODE],
        f"{slot} went {' -> '.join(trail) or '?'}; {len(bookings)} slot(s) passed straight between holders",
        f"{BIG_GPU_NODE} -> free -> {BIG_GPU_NODE}, never two holders",
        because="released, then claimed again",
    )
    status = await _class_status(fleet)
    _class_table(tour, status)
    tour.expect(
        status.get(HIGH_MEM) == ("1", "1"),
        f"{HIGH_MEM} status allocatable/requested: {'/'.join(status.get(HIGH_MEM, ('?', '?')))}",
        "1/1",
    )


async def _broker_steps(tour: Tour, fleet: Fleet) -> None:
    camera = instance_name(CAMERA_CONFIG, CAMERA, "", shared=True)
    want_brokers = sorted(f"{node}-{camera}-pod" for node in CAMERA_NODES)
    want_services = sorted([f"{camera}-svc", f"{CAMERA_CONFIG}-svc"])
    tour.step(
        f"Plug {CAMERA} into {' and '.join(CAMERA_NODES)}; apply a Configuration with a brokerPodSpec, "
        f"capacity {CAMERA_CAPACITY}",
        "a broker for each node that sees the device, at most `capacity` of them using it at once; the others wait "
        "(high availability); an Instance Service and a Configuration Service",
    )
    fleet.plug(CAMERA, list(CAMERA_NODES), {"kind": "camera"})
    config = _camera_configuration()
    tour.code(_dump([config]))
    await fleet.apply(config)
    await fleet.settle()
    brokers = await _broker_table(tour, fleet)
    phases = sorted(phase for phase, _ in brokers.values())
    running = sorted(node for phase, node in brokers.values() if phase == "Running")
    holders = sorted(h for h in _usage((await _instances(fleet, CAMERA_CONFIG)).get(camera, {})).values() if h)
    counted = ((await fleet.get("Configuration", CAMERA_CONFIG, NAMESPACE) or {}).get("status") or {}).get("brokers")
    want_counted = {"desired": 2, "running": 1, "pending": 1}
    tour.expect(
        sorted(brokers) == want_brokers
        and phases == ["Pending", "Running"]
        and holders == running
        and counted == want_counted,
        f"{len(brokers)} brokers: {', '.join(phases) or 'none'}; slot holders: {', '.join(holders) or 'none'}; "
        f"Configuration status brokers: {_counts(counted)}",
        f"{', '.join(want_brokers)}: 1 Running (holding the slot), 1 Pending; status {_counts(want_counted)}",
        because=f"capacity {CAMERA_CAPACITY}: the second broker waits for the slot",
    )
    for name, (phase, _) in sorted(brokers.items()):
        if phase == "Pending":
            pod = await fleet.get("Pod", name, NAMESPACE)
            tour.say(f"   {name}: {_scheduled_message(pod or {})}")
    services = [s["metadata"]["name"] for s in await _owned(fleet, "Service", CAMERA_CONFIG)]
    tour.expect(
        services == want_services,
        f"services: {', '.join(services) or 'none'}",
        ", ".join(want_services),
    )

    tour.step(
        f"Unplug {CAMERA} from every node",
        "if the leaf device is no longer visible, the broker is brought down",
    )
    fleet.unplug(CAMERA)
    await fleet.settle()
    brokers = await _broker_table(tour, fleet)
    services = [s["metadata"]["name"] for s in await _owned(fleet, "Service", CAMERA_CONFIG)]
    tour.expect(not brokers and not services, f"{len(brokers)} brokers, {len(services)} services left", "none")
    kept = camera in await _instances(fleet, CAMERA_CONFIG)
    await fleet.advance(fleet.offline_grace, step=fleet.offline_grace)
    gone = camera not in await _instances(fleet, CAMERA_CONFIG)
    tour.expect(
        kept and gone,
        f"Instance {camera} {'kept' if kept else 'not kept'} while offline, "
        f"{'deleted' if gone else 'still there'} after {fleet.offline_grace:g} s of fake time",
        f"kept through the offline grace ({fleet.offline_grace:g} s), then deleted",
        because="a shared device gets a grace period to come back",
    )

    tour.step(
        f"Plug {CAMERA} back into {' and '.join(CAMERA_NODES)}",
        "if the leaf device reappears, the broker is re-scheduled",
    )
    fleet.plug(CAMERA, list(CAMERA_NODES), {"kind": "camera"})
    await fleet.settle()
    brokers = await _broker_table(tour, fleet)
    phases = sorted(phase for phase, _ in brokers.values())
    services = [s["metadata"]["name"] for s in await _owned(fleet, "Service", CAMERA_CONFIG)]
    tour.expect(
        sorted(brokers) == want_brokers and phases == ["Pending", "Running"] and services == want_services,
        f"{len(brokers)} brokers ({', '.join(phases) or 'none'}), services {', '.join(services) or 'none'}",
        f"the same brokers (1 Running, 1 Pending) and services {', '.join(want_services)}",
        because="the same Instance name, so the same broker and Service names",
    )


# -- cleanup ---------------------------------------------------------------------------------------------------------


async def _remove(store: Store) -> int:
    """Delete what the act created: its pods (bound to its nodes, or made for its Configurations), the Services and
    ConfigMaps of its Configurations, their Instances, the Configurations, the classes and the Nodes."""
    configurations = (GPU_CONFIG, CAMERA_CONFIG)
    doomed: list[tuple[str, str, str]] = []
    for kind in ("Pod", "Service", "ConfigMap"):
        for obj in (await store.list(kind, NAMESPACE)).items:
            mine = (obj["metadata"].get("labels") or {}).get(_CONFIG_LABEL) in configurations
            if mine or (kind == "Pod" and (obj["metadata"]["name"] in PODS or _node_of(obj) in NODES)):
                doomed.append((kind, obj["metadata"]["name"], NAMESPACE))
    for obj in (await store.list("Instance", NAMESPACE)).items:
        if obj["spec"].get("configurationName") in configurations:
            doomed.append(("Instance", obj["metadata"]["name"], NAMESPACE))
    doomed += [("Configuration", name, NAMESPACE) for name in configurations]
    doomed += [("ResourceClass", name, "") for name, *_ in CLASSES]
    doomed += [("Node", node, "") for node in NODES]
    return await delete_all(store, doomed)
