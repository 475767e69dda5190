"""discovery: handlers that find devices and stream full device lists to the node agent.

- `devices`: Device, Mount, DeviceSpec (frozen values).
- `handlers`: the DiscoveryHandler protocol and the per-node HandlerRegistry (several endpoints per name, Akri's
  `name@endpoint`, merged by the agent).
- `debugecho`: Akri's debugEcho, built in, with the per-node OFFLINE switch (Akri's availability file).
- `worlds`: the simulated device World and its `sim` handler.
- `bridge`: external handlers over Akri's discovery-handler gRPC protocol (RegistrationServer, ExternalHandler);
  a discoveryProperty without value goes out as a ByteData with no bytes set, as Akri sends it.
- `echoserver`: a runnable external handler (`python -m devplace.discovery.echoserver`).
- `v0`: generated stubs of the Akri protocol (regenerate with `make protos`).
"""

import devplace.deviceplugin  # noqa: F401  # first: it quiets gRPC's own logging before grpc is imported
from devplace.discovery.bridge import ExternalHandler, RegistrationServer
from devplace.discovery.debugecho import DEBUG_ECHO_DESCRIPTION, DebugEchoHandler
from devplace.discovery.devices import Device, DeviceSpec, Mount, Properties
from devplace.discovery.handlers import DiscoveryHandler, HandlerRegistry
from devplace.discovery.registries import builtin_registry
from devplace.discovery.worlds import SimHandler, World

__all__ = [
    "DEBUG_ECHO_DESCRIPTION",
    "DebugEchoHandler",
    "Device",
    "DeviceSpec",
    "DiscoveryHandler",
    "ExternalHandler",
    "HandlerRegistry",
    "Mount",
    "Properties",
    "RegistrationServer",
    "SimHandler",
    "World",
    "builtin_registry",
]
