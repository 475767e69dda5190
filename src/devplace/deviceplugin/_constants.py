"""Constants of the kubelet device plugin API v1beta1 and the PodResources API v1.

These are wire facts: a real kubelet checks the version string, reads health strings verbatim, and finds sockets by
these names. Paths are relative names joined onto a kubelet directory (`DEFAULT_KUBELET_DIR` on a real node, a short
/tmp directory in simulations and tests, because AF_UNIX paths are limited to 107 bytes).
"""

from __future__ import annotations

from typing import Final

VERSION: Final = "v1beta1"
"""The only device plugin API version devplace speaks (RegisterRequest.version)."""

HEALTHY: Final = "Healthy"
UNHEALTHY: Final = "Unhealthy"

KUBELET_SOCKET_NAME: Final = "kubelet.sock"
"""Name of the Registration socket (in DEVICE_PLUGIN_DIR) and the PodResources socket (in POD_RESOURCES_DIR)."""

DEVICE_PLUGIN_DIR: Final = "device-plugins"
POD_RESOURCES_DIR: Final = "pod-resources"
DEFAULT_KUBELET_DIR: Final = "/var/lib/kubelet"

PRE_START_CONTAINER_TIMEOUT: Final = 30.0
"""Seconds the kubelet waits for PreStartContainer."""
