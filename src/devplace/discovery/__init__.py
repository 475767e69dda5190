"""Discovery handlers: they find devices and stream full device lists to the node agent.

- `devices`: Device, Mount, DeviceSpec (frozen values);
- `details`: discoveryDetails read as the handlers read them;
- `handlers`: the DiscoveryHandler protocol and the per-node HandlerRegistry (several endpoints per name, Akri's
  `name@endpoint`, merged by the agent); `registries`: the registry a node starts with (its built-in handlers);
- `signals`: a broadcast "something changed" for streams that re-send full state;
- `debugecho`: Akri's debugEcho, built in, with the per-node OFFLINE switch (Akri's availability file);
- `worlds`: the simulated device World and its `sim` handler;
- `bridge`: external handlers over Akri's discovery-handler gRPC protocol (RegistrationServer, ExternalHandler);
- `echoserver`: a runnable external handler (`python -m devplace.discovery._echoserver`).

`devplace.discovery.v0` holds the generated stubs of Akri's protocol (regenerate with `make protos`).

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.discovery._bridge import RegistrationServer
from devplace.discovery._devices import Device
from devplace.discovery._handlers import DiscoveryHandler, HandlerRegistry
from devplace.discovery._registries import builtin_registry
from devplace.discovery._signals import Signal
from devplace.discovery._worlds import World

__all__ = [
    "Device",
    "DiscoveryHandler",
    "HandlerRegistry",
    "RegistrationServer",
    "Signal",
    "World",
    "builtin_registry",
]
