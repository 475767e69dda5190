"""The NVML boundary: what the GPU handler asks of NVIDIA's management library, and nothing more.

`Nvml` is a small Protocol shaped like NVML's own calls: init and shutdown, two system attributes, the device count,
one attribute of one device by name, event registration and one blocking `wait`. Two implementations:
- `Pynvml`, the real library through `nvidia-ml-py` (imported on first use, so a node without it loads nothing);
- `FakeNvml`, built from a capture (`nvml.json`, as `shared/reference/gpu/nvml_probe.py` writes it): it answers
  exactly what the captured GPU answered, NotSupported included, and lets a test inject events.

Values travel in the capture's shapes, so one reader (`devplace.discovery._gpus`) serves both: `memory` is
`{"total", "free", "used"}` in bytes, `pci` is `{"busId", "domain", "bus", "device", "pciDeviceId", ...}`,
`cuda_compute_capability` and `mig_mode` are two-item lists, the rest plain ints and strings.

Failure semantics, one rule for both implementations: an attribute NVML does not support on this GPU (NotSupported,
or a function this driver lacks) is the value `NOT_SUPPORTED`, never an exception; anything else that fails (no
library, no driver loaded, a GPU lost, a wait that errs) raises `errors.Unavailable` whose message says what and why.
`wait` returns None when its timeout passes with no event: the normal, healthy answer.
"""

from __future__ import annotations

import importlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from devplace import errors

EVENT_SINGLE_BIT_ECC: Final = 0x1
EVENT_DOUBLE_BIT_ECC: Final = 0x2
EVENT_XID_CRITICAL: Final = 0x8
"""nvmlEventType bits (nvml.h): the ones device health is judged by."""

ATTRIBUTES: Final = (
    "name",
    "uuid",
    "brand",
    "architecture",
    "cuda_compute_capability",
    "memory",
    "pci",
    "numa_node",
    "minor_number",
    "mig_mode",
    "supported_event_types",
)
"""Every device attribute the handler reads (capture keys)."""

SYSTEM_ATTRIBUTES: Final = ("driver", "cuda_driver")


class _NotSupported:
    _instance: _NotSupported | None = None

    def __new__(cls) -> _NotSupported:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOT_SUPPORTED"

    def __bool__(self) -> bool:
        return False


NOT_SUPPORTED: Final = _NotSupported()
"""What an attribute NVML does not support on this GPU reads as."""


@dataclass(frozen=True)
class Event:
    """One NVML event: the GPU's UUID ("" when NVML could not say which), the event type bit, and its data (the XID
    of an XID event)."""

    uuid: str
    kind: int
    data: int = 0


class Nvml(Protocol):
    def init(self) -> None:
        """Load and initialise the library; `errors.Unavailable` saying why when it cannot be."""
        ...

    def shutdown(self) -> None: ...

    def system(self, name: str) -> Any:
        """A system attribute: `driver` (the driver version text) or `cuda_driver` (e.g. 13000 for CUDA 13.0)."""
        ...

    def device_count(self) -> int: ...

    def attribute(self, index: int, name: str) -> Any:
        """Attribute `name` (one of `ATTRIBUTES`) of GPU `index`, or `NOT_SUPPORTED`."""
        ...

    def register_events(self, index: int, mask: int) -> None:
        """Deliver GPU `index`'s events of the types in `mask` to `wait` (one event set for all GPUs)."""
        ...

    def wait(self, timeout_ms: int) -> Event | None:
        """The next event, or None once `timeout_ms` passed without one. Blocks: call it from a thread."""
        ...

    def release_events(self) -> None:
        """Free the event set (after the last `wait` returned)."""
        ...


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class Pynvml:
    """`Nvml` over the real library (`nvidia-ml-py`'s `pynvml`, imported on first use)."""

    def __init__(self, module: Any = None) -> None:
        self._module = module
        self._handles: dict[int, Any] = {}
        self._event_set: Any = None

    def _lib(self) -> Any:
        if self._module is None:
            try:
                self._module = importlib.import_module("pynvml")
            except ImportError as e:
                raise errors.Unavailable("the NVML bindings (nvidia-ml-py, module pynvml) are not installed") from e
        return self._module

    def _call(self, what: str, fn: Callable[..., Any] | None, *args: Any) -> Any:
        if fn is None:
            return NOT_SUPPORTED  # a binding this nvidia-ml-py lacks
        n = self._lib()
        try:
            return fn(*args)
        except (n.NVMLError_NotSupported, n.NVMLError_FunctionNotFound):
            return NOT_SUPPORTED
        except n.NVMLError as e:
            raise errors.Unavailable(f"NVML {what}: {e}") from e

    def init(self) -> None:
        n = self._lib()
        try:
            n.nvmlInit()
        except n.NVMLError_LibraryNotFound as e:
            raise errors.Unavailable(
                "libnvidia-ml.so.1 not found: no NVIDIA driver on this node (or its libraries are not mounted here)"
            ) from e
        except n.NVMLError_DriverNotLoaded as e:
            raise errors.Unavailable("the NVIDIA kernel driver is not loaded") from e
        except n.NVMLError as e:
            raise errors.Unavailable(f"nvmlInit failed: {e}") from e
        self._handles.clear()

    def shutdown(self) -> None:
        n = self._lib()
        self._handles.clear()
        try:
            n.nvmlShutdown()
        except n.NVMLError as e:
            raise errors.Unavailable(f"nvmlShutdown failed: {e}") from e

    def system(self, name: str) -> Any:
        n = self._lib()
        if name == "driver":
            return _text(self._call("driver version", n.nvmlSystemGetDriverVersion))
        if name == "cuda_driver":
            return self._call("CUDA driver version", getattr(n, "nvmlSystemGetCudaDriverVersion_v2", None))
        raise errors.Invalid.field("name", f"unknown system attribute {name!r} (one of {', '.join(SYSTEM_ATTRIBUTES)})")

    def device_count(self) -> int:
        n = self._lib()
        count = self._call("device count", n.nvmlDeviceGetCount)
        return 0 if count is NOT_SUPPORTED else int(count)

    def _handle(self, index: int) -> Any:
        handle = self._handles.get(index)
        if handle is None:
            n = self._lib()
            handle = self._call(f"handle of GPU {index}", n.nvmlDeviceGetHandleByIndex, index)
            if handle is NOT_SUPPORTED:
                raise errors.Unavailable(f"NVML has no handle for GPU {index}")
            self._handles[index] = handle
        return handle

    def attribute(self, index: int, name: str) -> Any:
        n = self._lib()
        handle = self._handle(index)
        what = f"{name} of GPU {index}"
        if name in _SIMPLE:
            value = self._call(what, getattr(n, _SIMPLE[name], None), handle)
            return _text(value) if name in ("name", "uuid") and value is not NOT_SUPPORTED else value
        if name == "cuda_compute_capability" or name == "mig_mode":
            fn = n.nvmlDeviceGetCudaComputeCapability if name == "cuda_compute_capability" else n.nvmlDeviceGetMigMode
            value = self._call(what, fn, handle)
            return value if value is NOT_SUPPORTED else [int(x) for x in value]
        if name == "memory":
            value = self._call(what, n.nvmlDeviceGetMemoryInfo, handle)
            return value if value is NOT_SUPPORTED else {k: int(getattr(value, k)) for k in ("total", "free", "used")}
        if name == "pci":
            value = self._call(what, n.nvmlDeviceGetPciInfo, handle)
            if value is NOT_SUPPORTED:
                return value
            fields = ("domain", "bus", "device", "pciDeviceId", "pciSubSystemId")
            return {"busId": _text(value.busId), **{k: int(getattr(value, k)) for k in fields}}
        raise errors.Invalid.field("name", f"unknown GPU attribute {name!r} (one of {', '.join(ATTRIBUTES)})")

    def register_events(self, index: int, mask: int) -> None:
        n = self._lib()
        if self._event_set is None:
            self._event_set = self._call("event set", n.nvmlEventSetCreate)
        result = self._call(
            f"events of GPU {index}", n.nvmlDeviceRegisterEvents, self._handle(index), mask, self._event_set
        )
        if result is NOT_SUPPORTED:
            raise errors.Unavailable(f"GPU {index} does not deliver events of types {mask:#x}")

    def wait(self, timeout_ms: int) -> Event | None:
        n = self._lib()
        if self._event_set is None:
            raise errors.Unavailable("no events registered")
        try:
            data = n.nvmlEventSetWait_v2(self._event_set, timeout_ms)
        except n.NVMLError_Timeout:
            return None
        except n.NVMLError as e:
            raise errors.Unavailable(f"NVML event wait: {e}") from e
        try:
            uuid = _text(n.nvmlDeviceGetUUID(data.device))
        except n.NVMLError:
            uuid = ""  # the event's GPU cannot be told: the handler marks every GPU
        return Event(uuid, int(data.eventType), int(data.eventData))

    def release_events(self) -> None:
        event_set, self._event_set = self._event_set, None
        if event_set is not None:
            self._call("free event set", self._lib().nvmlEventSetFree, event_set)


_SIMPLE: Final = {
    "name": "nvmlDeviceGetName",
    "uuid": "nvmlDeviceGetUUID",
    "brand": "nvmlDeviceGetBrand",
    "architecture": "nvmlDeviceGetArchitecture",
    "numa_node": "nvmlDeviceGetNumaNodeId",
    "minor_number": "nvmlDeviceGetMinorNumber",
    "supported_event_types": "nvmlDeviceGetSupportedEventTypes",
}


def _captured(value: Any, what: str) -> Any:
    """A capture's value: an `{"error": ...}` record is NOT_SUPPORTED (NVMLError_NotSupported) or Unavailable."""
    if isinstance(value, Mapping) and set(value) == {"error"}:
        message = str(value["error"])
        if message.startswith(("NVMLError_NotSupported", "NVMLError_FunctionNotFound")):
            return NOT_SUPPORTED
        raise errors.Unavailable(f"NVML {what}: {message}")
    return value


class FakeNvml:
    """`Nvml` answering from a capture: what the captured machine's NVML answered, NotSupported included.

    `copies` > 1 repeats the captured GPU (or the capture's first) that many times as further GPUs with their own
    index, minor number, UUID and PCI bus (benchmarks of many GPUs). `library=False` is a node without NVML (`init`
    fails as the real one does). Events are what `inject` queues: `wait` returns them in order, only those of a
    registered GPU and type, and otherwise blocks for the timeout (a `threading.Condition`, no polling).
    `fail_waits(n)` makes the next n waits fail. Counters (`inits`, `shutdowns`, `waits`, `reads`) let tests see what
    the handler asked. Thread-safe: `inject` from any thread, `wait` from the handler's.
    """

    def __init__(self, capture: Mapping[str, Any], *, copies: int = 1, library: bool = True) -> None:
        self.capture = capture
        self.library = library
        captured = list(capture.get("devices") or [])
        self.devices: list[dict[str, Any]] = [dict(d) for d in captured]
        if captured:
            self.devices += [_copy_device(captured[i % len(captured)], i) for i in range(len(captured), copies)]
        self.inits = 0
        self.shutdowns = 0
        self.waits = 0
        self.reads = 0
        self.registered: dict[int, int] = {}
        self._queue: deque[Event] = deque()
        self._failures = 0
        self._cond = threading.Condition()

    @classmethod
    def from_file(cls, path: Path | str, **kwargs: Any) -> FakeNvml:
        try:
            capture = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise errors.Invalid.field("capture", f"{path}: not a readable NVML capture: {e}") from e
        if not isinstance(capture, dict) or not isinstance(capture.get("devices"), list):
            raise errors.Invalid.field("capture", f"{path}: not an NVML capture (no devices list)")
        return cls(capture, **kwargs)

    @property
    def uuids(self) -> list[str]:
        return [str(d["uuid"]) for d in self.devices]

    def init(self) -> None:
        if not self.library:
            raise errors.Unavailable(
                "libnvidia-ml.so.1 not found: no NVIDIA driver on this node (or its libraries are not mounted here)"
            )
        self.inits += 1

    def shutdown(self) -> None:
        self.shutdowns += 1

    def system(self, name: str) -> Any:
        if name not in SYSTEM_ATTRIBUTES:
            raise errors.Invalid.field("name", f"unknown system attribute {name!r}")
        return _captured(self.capture.get(name, {"error": "NVMLError_NotSupported"}), name)

    def device_count(self) -> int:
        return len(self.devices)

    def attribute(self, index: int, name: str) -> Any:
        if name not in ATTRIBUTES:
            raise errors.Invalid.field("name", f"unknown GPU attribute {name!r} (one of {', '.join(ATTRIBUTES)})")
        if not 0 <= index < len(self.devices):
            raise errors.Unavailable(f"NVML has no handle for GPU {index}")
        device = self.devices[index]
        if name not in device:
            raise errors.Unavailable(f"NVML {name} of GPU {index}: not in the capture")
        self.reads += 1
        return _captured(device[name], f"{name} of GPU {index}")

    def register_events(self, index: int, mask: int) -> None:
        if not 0 <= index < len(self.devices):
            raise errors.Unavailable(f"NVML has no handle for GPU {index}")
        supported = _captured(self.devices[index].get("supported_event_types", 0), "supported event types")
        if supported is NOT_SUPPORTED or not mask & int(supported):
            raise errors.Unavailable(f"GPU {index} does not deliver events of types {mask:#x}")
        with self._cond:
            self.registered[index] = self.registered.get(index, 0) | (mask & int(supported))

    def inject(self, event: Event) -> None:
        """Queue an event as the GPU would raise it; a waiting `wait` returns it at once."""
        with self._cond:
            self._queue.append(event)
            self._cond.notify_all()

    def fail_waits(self, count: int) -> None:
        with self._cond:
            self._failures = count
            self._cond.notify_all()

    def _deliverable(self, event: Event) -> bool:
        if not event.uuid:
            return bool(self.registered)
        for index, mask in self.registered.items():
            if self.devices[index]["uuid"] == event.uuid:
                return bool(mask & event.kind)
        return False

    def wait(self, timeout_ms: int) -> Event | None:
        deadline = time.monotonic() + timeout_ms / 1000
        with self._cond:
            self.waits += 1
            if not self.registered:
                raise errors.Unavailable("no events registered")
            while True:
                if self._failures:
                    self._failures -= 1
                    raise errors.Unavailable("NVML event wait: Unknown Error")
                while self._queue:
                    event = self._queue.popleft()
                    if self._deliverable(event):
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def release_events(self) -> None:
        with self._cond:
            self.registered.clear()


def _copy_device(device: Mapping[str, Any], index: int) -> dict[str, Any]:
    """The captured GPU as GPU `index` of a bigger machine: own index, minor number, UUID and PCI bus."""
    out = dict(device)
    out["index"] = index
    if index == 0:
        return out
    out["minor_number"] = index
    uuid = str(device["uuid"])
    out["uuid"] = f"{uuid[: len(uuid) - 12]}{index:012x}"
    pci = device.get("pci")
    if isinstance(pci, Mapping) and "busId" in pci:
        bus = int(pci.get("bus", 0)) + index
        domain, _, rest = str(pci["busId"]).partition(":")
        _, _, slot = rest.partition(":")
        out["pci"] = {**pci, "bus": bus, "busId": f"{domain}:{bus:02x}:{slot}"}
    return out
