"""deviceplugin: the kubelet's device plugin (v1beta1) and PodResources (v1) protocols, and gRPC error mapping.

Generated stubs live in `devplace.deviceplugin.v1beta1` and `devplace.deviceplugin.podresources.v1` (regenerate with
`make protos`; CI checks them with `tools/protos.py --check`). `devplace.deviceplugin.errors` is the only module that
translates between devplace errors and gRPC status codes.

gRPC's own INFO lines are silenced by the `devplace` package itself (see its docstring), before grpc is imported.
"""

from devplace.deviceplugin import constants
from devplace.deviceplugin.constants import (
    DEFAULT_KUBELET_DIR,
    DEVICE_PLUGIN_DIR,
    HEALTHY,
    KUBELET_SOCKET_NAME,
    POD_RESOURCES_DIR,
    UNHEALTHY,
    VERSION,
)
from devplace.deviceplugin.errors import abort, from_rpc_error, grpc_code

__all__ = [
    "DEFAULT_KUBELET_DIR",
    "DEVICE_PLUGIN_DIR",
    "HEALTHY",
    "KUBELET_SOCKET_NAME",
    "POD_RESOURCES_DIR",
    "UNHEALTHY",
    "VERSION",
    "abort",
    "constants",
    "from_rpc_error",
    "grpc_code",
]
