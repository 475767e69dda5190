"""nvml: NVIDIA GPUs discovered through NVML, one device per GPU, watched for health by NVML events.

The same handler runs in-process in `devplace agent` (registered as `nvml`) and as its own process speaking Akri's
discovery protocol (`devplace handler nvml`, through `devplace.discovery._serving`).

Devices. One per GPU: id = the GPU's UUID (`GPU-...`), not shared (a GPU sits in one node). Properties under the names
NVIDIA's DRA driver (`gpu.nvidia.com`) publishes, each value written in the shape its DRA type takes, so that a
mapping to ResourceSlices can type them from `GPU_ATTRIBUTES` and selectors compare them right:
`type` (gpu), `uuid`, `productName`, `brand` (Nvidia, Tesla...), `architecture` (Hopper, Ada Lovelace...),
`cudaComputeCapability`, `driverVersion`, `cudaDriverVersion` (versions as strict semver: 9.0 -> 9.0.0, 580.159.04 ->
580.159.4, as the DRA driver writes them), `resource.kubernetes.io/pciBusID` (0000:00:06.0) and
`resource.kubernetes.io/pcieRoot` (from sysfs, when it can be read), `numaNode` (only where NVML supports it), and
the capacity `memory` as a canonical quantity of bytes (150754820096 -> 143771Mi), so a ResourceClass `memory GtEq
30G` selects an 80 GB or 141 GB GPU and not a 16 GB one. Besides: `NVIDIA_VISIBLE_DEVICES=<uuid>` (an env var of the
container, as NVIDIA's device plugin sets it) and the reserved `devplace.io/health`, `devplace.io/health-reason`,
`devplace.io/cdi-devices` (`devplace.discovery._devices`).

Allocate gets, per GPU, the device nodes that exist on the node among /dev/nvidia<minor>, /dev/nvidiactl,
/dev/nvidia-uvm, /dev/nvidia-uvm-tools and /dev/nvidia-modeset (read/write, as NVIDIA passes them), and where NVIDIA's
own CDI spec is on the node (/etc/cdi, /var/run/cdi: kind `nvidia.com/gpu`), the CDI device naming this GPU (by UUID,
by its device node, or by index: whichever naming strategy `nvidia-ctk cdi generate` used).

NVML is read once (init 57 ms, 131 ms per GPU on the captured H200), in a worker thread, when the first Configuration
asks; then only watched: one thread blocks in NVML's event wait (`wait_timeout`, 1 s) and hands events to the event
loop. No polling. A node without the library or without GPUs reports no devices and logs one line saying why; it is
not retried (restart or `reset` to look again), so it never loops.

Health. XID-critical and double-bit ECC events make a GPU Unhealthy; XIDs NVIDIA's device plugin ignores as application
errors (13, 31, 43, 45, 68, 109) do not, nor do single-bit ECC events. `DP_DISABLE_HEALTHCHECKS` and
`DP_ENABLE_HEALTHCHECKS` (NVIDIA's variables) adjust that: `xid_policy`. An event NVML cannot attribute to a GPU, or an
event wait that fails, marks every GPU (as NVIDIA does; a failing wait is retried after `wait_timeout`, never in a
tight loop). A GPU whose events cannot be registered is Unhealthy from the start.

Recovery rule: NVML never reports that an XID is over, so Unhealthy is sticky. A GPU stays Unhealthy, with the first
reason, until the handler reads NVML afresh: `reset()` (`devplace handler nvml`: SIGHUP), or a restart of the handler
(in-process: of the agent). An operator resets the GPU (or drains and reboots the node) first; the fresh read then
starts every GPU Healthy, and also sees GPUs added or gone.

MIG: out of scope. A GPU is reported whole whatever its MIG mode (NVIDIA's `MIG_STRATEGY=none`). MIG devices can be
added as further devices with their own `MIG-...` id, `type` mig and `parentUUID`, health routed by the event's GPU
and instance ids; nothing here assumes one device per GPU beyond `read_gpus`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import threading
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import yaml

from devplace import errors
from devplace.api import Quantity
from devplace.discovery import _details as d
from devplace.discovery._devices import (
    CDI_DEVICES,
    HEALTH,
    HEALTH_REASON,
    HEALTHY,
    UNHEALTHY,
    Device,
    DeviceSpec,
)
from devplace.discovery._handlers import ResolvedProperties
from devplace.discovery._nvml import (
    ATTRIBUTES,
    EVENT_DOUBLE_BIT_ECC,
    EVENT_XID_CRITICAL,
    NOT_SUPPORTED,
    Event,
    Nvml,
)
from devplace.discovery._signals import Signal

log = logging.getLogger(__name__)

HANDLER_NAME: Final = "nvml"
PCI_BUS_ID: Final = "resource.kubernetes.io/pciBusID"
PCIE_ROOT: Final = "resource.kubernetes.io/pcieRoot"
VISIBLE_DEVICES: Final = "NVIDIA_VISIBLE_DEVICES"

AttributeType = Literal["string", "int", "version", "capacity"]
GPU_ATTRIBUTES: Final[Mapping[str, AttributeType]] = {
    "type": "string",
    "uuid": "string",
    "productName": "string",
    "brand": "string",
    "architecture": "string",
    "cudaComputeCapability": "version",
    "driverVersion": "version",
    "cudaDriverVersion": "version",
    PCI_BUS_ID: "string",
    PCIE_ROOT: "string",
    "numaNode": "int",
    "memory": "capacity",
}
"""The DRA type of each property the handler publishes as a device attribute (`memory` is a capacity); the other
properties (`NVIDIA_VISIBLE_DEVICES`, the reserved ones) are not attributes."""

IGNORED_XIDS: Final = frozenset({13, 31, 43, 45, 68, 109})
"""XIDs NVIDIA's device plugin ignores: application errors that leave the GPU healthy (internal/rm/health.go)."""
DISABLE_HEALTHCHECKS: Final = "DP_DISABLE_HEALTHCHECKS"
ENABLE_HEALTHCHECKS: Final = "DP_ENABLE_HEALTHCHECKS"
HEALTH_EVENTS: Final = EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC

ARCHITECTURES: Final = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}
BRANDS: Final = {
    0: "Unknown",
    1: "Quadro",
    2: "Tesla",
    3: "NVS",
    4: "Grid",
    5: "GeForce",
    6: "Titan",
    7: "NvidiaVApps",
    8: "NvidiaVPC",
    9: "NvidiaVCS",
    10: "NvidiaVWS",
    11: "NvidiaCloudGaming",
    12: "QuadroRTX",
    13: "NvidiaRTX",
    14: "Nvidia",
    15: "GeForceRTX",
    16: "TitanRTX",
}
"""go-nvlib's names for nvmlBrandType and nvmlDeviceArchitecture, which the DRA driver publishes."""

CONTROL_NODES: Final = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
CDI_DIRS: Final = ("etc/cdi", "var/run/cdi")
"""CDI spec directories under the root, lowest priority first (`/var/run/cdi` wins, as in the CDI spec)."""
NVIDIA_CDI_KIND: Final = "nvidia.com/gpu"


# -- health: XID policy and the sticky rule (pure) ----------------------------------------------------------------


@dataclass(frozen=True)
class XidPolicy:
    """Which XIDs leave a GPU healthy. `enabled` XIDs always count; otherwise `ignore_all` or membership in `ignored`
    ignores one. `off`: every XID ignored and none enabled, so the handler does not watch at all."""

    ignored: frozenset[int] = IGNORED_XIDS
    ignore_all: bool = False
    enabled: frozenset[int] = frozenset()

    def ignores(self, xid: int) -> bool:
        if xid in self.enabled:
            return False
        return self.ignore_all or xid in self.ignored

    @property
    def off(self) -> bool:
        return self.ignore_all and not self.enabled


def parse_xids(text: str, variable: str) -> tuple[bool, frozenset[int]]:
    """A comma-separated XID list as NVIDIA's variables take it: (`all` or `xids` given, the XIDs). Blank items are
    skipped, case and spaces ignored; anything else is `errors.Invalid` naming the variable."""
    found: set[int] = set()
    for raw in text.split(","):
        item = raw.strip().lower()
        if not item:
            continue
        if item in ("all", "xids"):
            return True, frozenset()
        if not item.isdigit() or not item.isascii():
            raise errors.Invalid.field(variable, f"{raw.strip()!r} is neither an XID (a number) nor 'all'")
        found.add(int(item))
    return False, frozenset(found)


def xid_policy(environ: Mapping[str, str]) -> XidPolicy:
    """NVIDIA's rules: `DP_DISABLE_HEALTHCHECKS` adds XIDs to the ignored ones (`all`/`xids`: every XID);
    `DP_ENABLE_HEALTHCHECKS` names XIDs that count even so (`all`: every XID counts, the default list included)."""
    disable_all, disabled = parse_xids(environ.get(DISABLE_HEALTHCHECKS, ""), DISABLE_HEALTHCHECKS)
    enable_all, enabled = parse_xids(environ.get(ENABLE_HEALTHCHECKS, ""), ENABLE_HEALTHCHECKS)
    if enable_all:
        return XidPolicy(ignored=frozenset(), ignore_all=False, enabled=frozenset())
    return XidPolicy(ignored=IGNORED_XIDS | disabled, ignore_all=disable_all, enabled=enabled)


@dataclass(frozen=True)
class Health:
    healthy: bool = True
    reason: str = ""


GOOD: Final = Health()


def event_reason(event: Event, policy: XidPolicy) -> str | None:
    """Why `event` makes a GPU Unhealthy, or None when it does not."""
    if event.kind & EVENT_XID_CRITICAL:
        return None if policy.ignores(event.data) else f"XID {event.data} (critical error)"
    if event.kind & EVENT_DOUBLE_BIT_ECC:
        return "double-bit ECC error"
    return None


def mark(health: Mapping[str, Health], uuids: Sequence[str], reason: str) -> dict[str, Health] | None:
    """`health` with `uuids` Unhealthy for `reason`, or None when nothing changes: an Unhealthy GPU keeps its first
    reason (sticky; module docstring), an unknown UUID is not ours."""
    changed = {u: Health(False, reason) for u in uuids if u in health and health[u].healthy}
    return {**health, **changed} if changed else None


def health_after(health: Mapping[str, Health], event: Event, policy: XidPolicy) -> dict[str, Health] | None:
    """The health after `event`, or None when it changes nothing. An event of no known GPU (uuid "") marks all."""
    reason = event_reason(event, policy)
    if reason is None:
        return None
    return mark(health, [event.uuid] if event.uuid else list(health), reason)


# -- reading NVML once (pure over the boundary) -------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML describes it, in the values the properties are made of (None: not supported here)."""

    index: int
    uuid: str
    name: str
    memory: int
    pci_bus_id: str
    minor: int
    brand: str = "Unknown"
    architecture: str = "Unknown"
    compute_capability: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    numa_node: int | None = None
    mig_enabled: bool = False
    supported_events: int = 0


_VERSION = re.compile(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def semver(text: str) -> str | None:
    """A dotted version as strict semver (major.minor.patch, no leading zeros): `9.0` -> `9.0.0`, `580.159.04` ->
    `580.159.4`, as the DRA driver's semver parsing writes them; None for anything else."""
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        return None
    return ".".join(str(int(part or 0)) for part in match.groups())


def cuda_version(value: int) -> str:
    """NVML's CUDA driver version integer (13000) as semver (13.0.0)."""
    return f"{value // 1000}.{(value % 1000) // 10}.0"


def pci_bus_id(text: str) -> str:
    """NVML's bus id (`00000000:00:06.0`) as the kernel and DRA name it (`0000:00:06.0`), as go-nvlib does."""
    bus = text.strip().lower()
    return bus if bus == "0000" else bus.removeprefix("0000")


def _required(value: Any, what: str, index: int) -> Any:
    if value is NOT_SUPPORTED or value is None:
        raise errors.Unavailable(f"GPU {index}: NVML does not report its {what}")
    return value


def read_gpu(nvml: Nvml, index: int, driver: str | None, cuda_driver: str | None) -> Gpu:
    """Every attribute of GPU `index`; `errors.Unavailable` when one it cannot be used without is missing."""
    get = {name: nvml.attribute(index, name) for name in ATTRIBUTES}
    memory = _required(get["memory"], "memory", index)
    pci = _required(get["pci"], "PCI bus id", index)
    capability = get["cuda_compute_capability"]
    mig = get["mig_mode"]
    numa = get["numa_node"]
    events = get["supported_event_types"]
    return Gpu(
        index=index,
        uuid=str(_required(get["uuid"], "UUID", index)),
        name=str(_required(get["name"], "name", index)),
        memory=int(memory["total"]),
        pci_bus_id=pci_bus_id(str(pci["busId"])),
        minor=int(_required(get["minor_number"], "minor number", index)),
        brand=BRANDS.get(int(get["brand"]), "Unknown") if get["brand"] is not NOT_SUPPORTED else "Unknown",
        architecture=(
            ARCHITECTURES.get(int(get["architecture"]), "Unknown")
            if get["architecture"] is not NOT_SUPPORTED
            else "Unknown"
        ),
        compute_capability=None if capability is NOT_SUPPORTED else f"{int(capability[0])}.{int(capability[1])}.0",
        driver_version=driver,
        cuda_driver_version=cuda_driver,
        numa_node=None if numa is NOT_SUPPORTED or int(numa) < 0 else int(numa),
        mig_enabled=mig is not NOT_SUPPORTED and int(mig[0]) == 1,
        supported_events=0 if events is NOT_SUPPORTED else int(events),
    )


def read_system(nvml: Nvml) -> tuple[str | None, str | None]:
    """(driver version, CUDA driver version) as semver, None where NVML does not say."""
    driver = nvml.system("driver")
    cuda = nvml.system("cuda_driver")
    return (
        None if driver is NOT_SUPPORTED else semver(str(driver)),
        None if cuda is NOT_SUPPORTED else cuda_version(int(cuda)),
    )


# -- what a container needs (pure over what the node has) ---------------------------------------------------------


def device_specs(minor: int, present: Callable[[str], bool]) -> tuple[DeviceSpec, ...]:
    """The GPU's device node and the control nodes, those `present` on the node, read/write."""
    return tuple(DeviceSpec(p, p, "rw") for p in (f"/dev/nvidia{minor}", *CONTROL_NODES) if present(p))


def cdi_device(gpu: Gpu, specs: Sequence[Mapping[str, Any]]) -> str | None:
    """The fully qualified CDI name of `gpu` in NVIDIA's specs (kind `nvidia.com/gpu`), or None. A device named by the
    UUID wins, then one whose device nodes include /dev/nvidia<minor>, then one named by the GPU's index; later specs
    (higher priority directories) before earlier ones."""
    node = f"/dev/nvidia{gpu.minor}"
    by_uuid: str | None = None
    by_node: str | None = None
    by_index: str | None = None
    for spec in reversed(specs):
        if not isinstance(spec, Mapping) or spec.get("kind") != NVIDIA_CDI_KIND:
            continue
        for device in spec.get("devices") or ():
            if not isinstance(device, Mapping) or not isinstance(device.get("name"), str):
                continue
            name = device["name"]
            edits = device.get("containerEdits")
            nodes = edits.get("deviceNodes") if isinstance(edits, Mapping) else None
            paths = {n.get("path") for n in nodes or () if isinstance(n, Mapping)}
            if name == gpu.uuid:
                by_uuid = by_uuid or name
            elif node in paths:
                by_node = by_node or name
            elif name == str(gpu.index):
                by_index = by_index or name
    name = by_uuid or by_node or by_index
    return None if name is None else f"{NVIDIA_CDI_KIND}={name}"


def gpu_properties(gpu: Gpu, health: Health, *, cdi: str | None = None, pcie_root: str | None = None) -> dict[str, str]:
    """The device properties of `gpu` (module docstring)."""
    props = {
        "type": "gpu",
        "uuid": gpu.uuid,
        "productName": gpu.name,
        "brand": gpu.brand,
        "architecture": gpu.architecture,
        PCI_BUS_ID: gpu.pci_bus_id,
        "memory": str(Quantity.from_fraction(gpu.memory, binary=True)),
        VISIBLE_DEVICES: gpu.uuid,
        HEALTH: HEALTHY if health.healthy else UNHEALTHY,
    }
    optional = {
        "cudaComputeCapability": gpu.compute_capability,
        "driverVersion": gpu.driver_version,
        "cudaDriverVersion": gpu.cuda_driver_version,
        "numaNode": None if gpu.numa_node is None else str(gpu.numa_node),
        PCIE_ROOT: pcie_root,
        CDI_DEVICES: cdi,
        HEALTH_REASON: None if health.healthy else health.reason,
    }
    props.update({k: v for k, v in optional.items() if v})
    return props


def gpu_device(gpu: Gpu, health: Health, node: NodeView) -> Device:
    return Device(
        id=gpu.uuid,
        properties=gpu_properties(
            gpu, health, cdi=cdi_device(gpu, node.cdi_specs), pcie_root=node.pcie_roots.get(gpu.pci_bus_id)
        ),
        shared=False,
        device_specs=device_specs(gpu.minor, node.present.__contains__),
    )


@dataclass(frozen=True)
class NodeView:
    """What the node offers besides NVML, read once with it: device nodes present, NVIDIA's CDI specs, PCIe roots."""

    present: frozenset[str] = frozenset()
    cdi_specs: tuple[Mapping[str, Any], ...] = ()
    pcie_roots: Mapping[str, str] = field(default_factory=dict)


def read_node(root: Path, gpus: Sequence[Gpu]) -> NodeView:
    """Look at the node under `root` ("/" on a real node): /dev, the CDI directories, sysfs (blocking I/O)."""
    wanted = {f"/dev/nvidia{g.minor}" for g in gpus} | set(CONTROL_NODES)
    present = frozenset(p for p in wanted if (root / p.lstrip("/")).exists())
    specs: list[Mapping[str, Any]] = []
    for directory in CDI_DIRS:
        base = root / directory
        if not base.is_dir():
            continue
        for path in sorted(base.iterdir()):
            if path.suffix not in (".json", ".yaml", ".yml"):
                continue
            try:
                spec = yaml.safe_load(path.read_text())
            except (OSError, yaml.YAMLError) as e:
                log.warning("nvml: skipping CDI spec %s: %s", path, e)
                continue
            if isinstance(spec, Mapping):
                specs.append(spec)
    roots: dict[str, str] = {}
    for gpu in gpus:
        with contextlib.suppress(OSError):
            target = os.path.realpath(root / "sys/bus/pci/devices" / gpu.pci_bus_id, strict=True)
            parts = Path(target).parts
            if "devices" in parts:
                after = parts[parts.index("devices") + 1 :]
                if after and after[0].startswith("pci"):
                    roots[gpu.pci_bus_id] = after[0]
    return NodeView(present, tuple(specs), roots)


def parse_details(text: str) -> None:
    """The nvml handler takes no discoveryDetails: empty (or `{}`) only; anything else is `errors.Invalid`."""
    d.refuse_unknown(d.load_mapping(text), ())


# -- the handler (the shell) ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Reading:
    gpus: tuple[Gpu, ...] = ()
    node: NodeView = NodeView()
    problem: str | None = None
    """Why there is nothing to report (no library, no GPUs), for the one log line."""


class GpuHandler:
    """The `nvml` discovery handler over an `Nvml` (module docstring)."""

    name = HANDLER_NAME

    def __init__(
        self,
        nvml: Nvml,
        *,
        policy: XidPolicy | None = None,
        root: Path = Path("/"),
        wait_timeout: float = 1.0,
    ) -> None:
        self.nvml = nvml
        self.policy = policy or XidPolicy()
        self.root = root
        self.wait_timeout = wait_timeout
        self._reading: _Reading | None = None
        self._health: dict[str, Health] = {}
        self._changed = Signal()
        self._lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._generation = 0
        self._initialised = False

    # -- what streams and tests see ---------------------------------------------------------------------------------

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        return () if self._reading is None else self._reading.gpus

    @property
    def health(self) -> Mapping[str, Health]:
        return dict(self._health)

    @property
    def started(self) -> bool:
        """NVML has been read (whatever it found)."""
        return self._reading is not None

    @property
    def watching(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def current(self) -> asyncio.Event:
        """The event the next change of the device list sets (take it before looking, as with `Signal`)."""
        return self._changed.current()

    def devices(self) -> list[Device]:
        reading = self._reading
        if reading is None:
            return []
        return [gpu_device(g, self._health.get(g.uuid, GOOD), reading.node) for g in reading.gpus]

    async def discover(
        self, details: str, properties: ResolvedProperties | None = None
    ) -> AsyncGenerator[list[Device], None]:
        """The node's GPUs, again on every health change; discoveryProperties are ignored (NVML needs none)."""
        parse_details(details)
        await self.start()
        last: list[Device] | None = None
        while True:
            wake = self._changed.current()
            current = self.devices()
            if current != last:
                yield current
                last = current
            await wake.wait()

    # -- lifecycle --------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Read NVML once (in a worker thread) and start watching; later calls return at once."""
        async with self._lock:
            if self._reading is not None:
                return
            self._loop = asyncio.get_running_loop()
            reading = await asyncio.to_thread(self._read)
            self._reading = reading
            self._health = {g.uuid: GOOD for g in reading.gpus}
            if reading.problem is not None:
                log.warning("nvml: reporting no GPUs: %s", reading.problem)
            else:
                log.info(
                    "nvml: %d GPU(s): %s",
                    len(reading.gpus),
                    ", ".join(f"{g.index}: {g.name} {g.uuid}" for g in reading.gpus),
                )
                self._watch(reading.gpus)
            self._changed.fire()

    async def close(self) -> None:
        """Stop watching and shut NVML down (the watcher ends within `wait_timeout`)."""
        async with self._lock:
            await self._stop()
            self._reading = None

    async def reset(self) -> None:
        """The operator's recovery: read NVML afresh, every GPU starting Healthy (module docstring)."""
        async with self._lock:
            await self._stop()
            self._reading = None
        await self.start()

    async def _stop(self) -> None:
        self._generation += 1
        thread, self._thread = self._thread, None
        self._stopping.set()
        if thread is not None:
            await asyncio.to_thread(thread.join, self.wait_timeout * 4 + 1)
            if thread.is_alive():
                log.warning("nvml: the event watcher did not stop; leaving NVML initialised")
                return
            with contextlib.suppress(errors.Unavailable):
                await asyncio.to_thread(self.nvml.release_events)
        if self._initialised:
            self._initialised = False
            with contextlib.suppress(errors.Unavailable):
                await asyncio.to_thread(self.nvml.shutdown)

    def _read(self) -> _Reading:
        """Blocking: init, enumerate, read every GPU, look at the node (a worker thread)."""
        try:
            self.nvml.init()
        except errors.Unavailable as e:
            return _Reading(problem=e.message)
        self._initialised = True
        try:
            count = self.nvml.device_count()
            driver, cuda = read_system(self.nvml)
        except errors.Unavailable as e:
            return _Reading(problem=e.message)
        if count == 0:
            return _Reading(problem=f"NVML (driver {driver or 'unknown'}) sees no GPU on this node")
        gpus: list[Gpu] = []
        for index in range(count):
            try:
                gpus.append(read_gpu(self.nvml, index, driver, cuda))
            except errors.Unavailable as e:
                log.warning("nvml: leaving GPU %d out: %s", index, e.message)
        if not gpus:
            return _Reading(problem=f"none of the {count} GPU(s) NVML lists could be read")
        return _Reading(tuple(gpus), read_node(self.root, gpus))

    def _watch(self, gpus: Sequence[Gpu]) -> None:
        """Register the health events and start the watcher thread (not when the policy turns checks off)."""
        if self.policy.off:
            log.info("nvml: health checks off (%s)", DISABLE_HEALTHCHECKS)
            return
        registered = 0
        for gpu in gpus:
            mask = HEALTH_EVENTS & gpu.supported_events
            if not mask:
                log.warning("nvml: GPU %s delivers no XID or ECC events: its health is not watched", gpu.uuid)
                continue
            try:
                self.nvml.register_events(gpu.index, mask)
                registered += 1
            except errors.Unavailable as e:
                self._apply(mark(self._health, [gpu.uuid], f"health events cannot be watched: {e.message}"))
        if not registered:
            return
        self._stopping = threading.Event()
        generation = self._generation
        self._thread = threading.Thread(
            target=self._wait_loop, args=(self._stopping, generation), name="nvml-events", daemon=True
        )
        self._thread.start()

    def _wait_loop(self, stopping: threading.Event, generation: int) -> None:
        """The watcher thread: block in NVML's wait, hand each event to the loop; never spins on errors."""
        timeout_ms = max(1, int(self.wait_timeout * 1000))
        while not stopping.is_set():
            try:
                event = self.nvml.wait(timeout_ms)
            except errors.Unavailable as e:
                self._post(generation, self._on_wait_failed, e.message)
                stopping.wait(self.wait_timeout)
                continue
            if event is not None:
                self._post(generation, self._on_event, event)

    def _post(self, generation: int, callback: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed under a stopping watcher
            loop.call_soon_threadsafe(self._deliver, generation, callback, *args)

    def _deliver(self, generation: int, callback: Callable[..., None], *args: Any) -> None:
        if generation == self._generation:  # not from a watcher a reset already replaced
            callback(*args)

    def _on_event(self, event: Event) -> None:
        changed = health_after(self._health, event, self.policy)
        if changed is None:
            log.info("nvml: event %#x data %d on %s: ignored", event.kind, event.data, event.uuid or "unknown GPU")
            return
        log.warning(
            "nvml: %s on %s: marked Unhealthy until reset",
            event_reason(event, self.policy),
            event.uuid or "an unknown GPU (all marked)",
        )
        self._apply(changed)

    def _on_wait_failed(self, message: str) -> None:
        changed = mark(self._health, list(self._health), f"NVML event wait failed: {message}")
        if changed is not None:
            log.warning("nvml: %s: every GPU marked Unhealthy until reset", message)
            self._apply(changed)

    def _apply(self, changed: dict[str, Health] | None) -> None:
        if changed is not None:
            self._health = changed
            self._changed.fire()
