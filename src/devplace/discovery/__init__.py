"""Discovery handlers: they find devices and stream full device lists to the node agent.

- `devices`: Device, Mount, DeviceSpec (frozen values), and the reserved properties the agent reads (health, CDI);
- `details`: discoveryDetails read as the handlers read them;
- `handlers`: the DiscoveryHandler protocol and the per-node HandlerRegistry (several endpoints per name, Akri's
  `name@endpoint`, merged by the agent); `registries`: the registry a node starts with (its built-in handlers);
- `signals`: a broadcast "something changed" for streams that re-send full state;
- `debugecho`: Akri's debugEcho, built in, with the per-node OFFLINE switch (Akri's availability file);
- `worlds`: the simulated device World and its `sim` handler;
- `nvml`: the NVML boundary (a Protocol; `Pynvml`, the real library; `FakeNvml`, a captured GPU);
- `gpus`: the `nvml` handler: one device per NVIDIA GPU, DRA's attribute names, health from NVML events;
- `udevmatches`: Akri's udev matching over plain device records (globs through libudev's rules, whole-value regexes);
- `udev`: the `udev` handler: Akri's `udevRules` over libudev (pyudev), hot-plug through udev monitor events;
- `opcua`: the `opcua` handler: OPC UA servers through FindServers (Akri's standard discovery, applicationNames);
- `onvifwire`: ONVIF discovery's pure part: details, Akri's filters, WS-Discovery and SOAP messages, credentials;
- `onvif`: the `onvif` handler: cameras by WS-Discovery multicast probe, liveness and IP/MAC over ONVIF SOAP;
- `bridge`: external handlers over Akri's discovery-handler gRPC protocol (RegistrationServer, ExternalHandler);
- `serving`: any in-process handler served over that protocol (`devplace handler nvml`);
- `echoserver`: a runnable external handler (`python -m devplace.discovery._echoserver`).

`devplace.discovery.v0` holds the generated stubs of Akri's protocol (regenerate with `make protos`).

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.discovery._bridge import RegistrationServer
from devplace.discovery._devices import JOINED_ENVS, RESERVED, Device, cdi_devices, device_healthy
from devplace.discovery._gpus import GPU_ATTRIBUTES, GpuHandler, xid_policy
from devplace.discovery._handlers import DiscoveryHandler, HandlerRegistry
from devplace.discovery._nvml import Event, FakeNvml, Nvml, Pynvml
from devplace.discovery._onvif import OnvifHandler
from devplace.discovery._opcua import OpcuaHandler
from devplace.discovery._registries import builtin_registry
from devplace.discovery._serving import HandlerServer
from devplace.discovery._signals import Signal
from devplace.discovery._udev import UdevHandler
from devplace.discovery._worlds import World

__all__ = [
    "GPU_ATTRIBUTES",
    "JOINED_ENVS",
    "RESERVED",
    "Device",
    "DiscoveryHandler",
    "Event",
    "FakeNvml",
    "GpuHandler",
    "HandlerRegistry",
    "HandlerServer",
    "Nvml",
    "OnvifHandler",
    "OpcuaHandler",
    "Pynvml",
    "RegistrationServer",
    "Signal",
    "UdevHandler",
    "World",
    "builtin_registry",
    "cdi_devices",
    "device_healthy",
    "xid_policy",
]
