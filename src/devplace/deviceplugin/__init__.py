"""The kubelet's device plugin (v1beta1), PodResources (v1) and DRA plugin protocols, and the gRPC error mapping.

- `constants`: the protocol's version, socket names and directories, health values;
- `errors`: the only translation between devplace errors and gRPC status codes;
- `transports`: how the protocols are carried: `UNIX` (grpc.aio over unix sockets) or an `InProcessTransport` (a
  simulated fleet at scale: the same messages, calls and status codes, no sockets).

The generated stubs are public, as the wire protocol they are: `devplace.deviceplugin.v1beta1` and
`devplace.deviceplugin.podresources.v1`, and the kubelet's DRA protocols: `dra.v1` and `dra.v1beta1` (DRAPlugin),
`drahealth.v1alpha1` and `drahealth.v1` (DRAResourceHealth), `pluginregistration.v1` (the plugin registry) (regenerate
with `make protos`; CI checks them with `tools/protos.py --check`).
gRPC's own INFO lines are silenced by the `devplace` package itself (see its docstring), before grpc is imported.

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.deviceplugin._constants import (
    DEFAULT_KUBELET_DIR,
    DEVICE_PLUGIN_DIR,
    HEALTHY,
    KUBELET_SOCKET_NAME,
    POD_RESOURCES_DIR,
    PRE_START_CONTAINER_TIMEOUT,
    UNHEALTHY,
    VERSION,
)
from devplace.deviceplugin._errors import abort, from_rpc_error
from devplace.deviceplugin._transports import UNIX, InProcessTransport, Transport, TransportName, transport_named

__all__ = [
    "DEFAULT_KUBELET_DIR",
    "DEVICE_PLUGIN_DIR",
    "HEALTHY",
    "KUBELET_SOCKET_NAME",
    "POD_RESOURCES_DIR",
    "PRE_START_CONTAINER_TIMEOUT",
    "UNHEALTHY",
    "UNIX",
    "VERSION",
    "InProcessTransport",
    "Transport",
    "TransportName",
    "abort",
    "from_rpc_error",
    "transport_named",
]
