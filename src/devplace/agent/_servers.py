"""A device plugin on its own unix socket, and its registration with the kubelet.

Each plugin is a real grpc.aio server bound to `<kubelet_dir>/device-plugins/<endpoint>`; it registers by calling
`Registration.Register` on `kubelet.sock` in the same directory with the socket's file name as `endpoint`
(kubelet device plugin API v1beta1). The kubelet may restart at any time: it then recreates kubelet.sock and may
delete every plugin socket in the directory, so the agent watches kubelet.sock's identity (inode, ctime) and, on a
change, restarts servers whose socket file is gone and registers every plugin again. Held slots are unaffected:
they live in the store, and a plugin's list is recomputed from it.

The transport (`deviceplugin.Transport`) is real grpc.aio by default; a simulated fleet at scale passes its
in-process one, which keeps the socket files, messages and calls (`deviceplugin` module `transports`).

Socket names: `dp-il-<namespace>_<instance>.sock` / `dp-cl-<namespace>_<configuration>.sock` (`_` cannot occur in
Kubernetes names, so the two parts never blur). A path longer than AF_UNIX allows falls back to a hashed name.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from pathlib import Path
from typing import Any, cast

import grpc
import grpc.aio

from devplace.agent._deviceplugins import DevicePlugin
from devplace.deviceplugin import UNIX, VERSION, Transport, from_rpc_error
from devplace.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc

log = logging.getLogger(__name__)

MAX_SOCKET_PATH = 107
"""Longest AF_UNIX path in bytes (sun_path is 108 bytes including the terminating NUL)."""


def endpoint_name(kind: str, namespace: str, name: str, directory: Path) -> str:
    """The socket file name for a plugin (`kind` is "il" or "cl")."""
    plain = f"dp-{kind}-{namespace}_{name}.sock"
    if len(os.fsencode(directory / plain)) <= MAX_SOCKET_PATH:
        return plain
    digest = hashlib.blake2b(f"{kind}/{namespace}/{name}".encode(), digest_size=8).hexdigest()
    return f"dp-{kind}-{digest}.sock"


def socket_identity(path: Path) -> tuple[int, int] | None:
    """(inode, ctime ns) of a socket file, or None if it does not exist: changes when the file is recreated."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_ctime_ns)


class _Registrations:
    """Takes what a generated `add_*Servicer_to_server` registers, so it can be changed before a server has it."""

    def __init__(self) -> None:
        self.service = ""
        self.handlers: dict[str, Any] = {}  # grpc.RpcMethodHandler, a named tuple

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        """The generated code's other registration; the handlers come from `add_registered_method_handlers`."""

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.service, self.handlers = service, dict(handlers)


def _as_sent(wire: bytes) -> bytes:
    return wire


def add_plugin_to_server(plugin: DevicePlugin, server: Any) -> None:
    """Register `plugin` as the generated code does, but for ListAndWatch's responses, which the plugin yields in wire
    form (`DevicePlugin.ListAndWatch`): they are sent as they are."""
    made = _Registrations()
    api_pb2_grpc.add_DevicePluginServicer_to_server(plugin, cast(grpc.aio.Server, made))  # it calls the two above
    handlers = dict(made.handlers)
    handlers["ListAndWatch"] = handlers["ListAndWatch"]._replace(response_serializer=_as_sent)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(made.service, handlers),))
    server.add_registered_method_handlers(made.service, handlers)


class PluginServer:
    """Serves one `DevicePlugin` on `<directory>/<endpoint>` and registers it with the kubelet."""

    def __init__(self, plugin: DevicePlugin, directory: Path, endpoint: str, transport: Transport = UNIX) -> None:
        self.plugin = plugin
        self.transport = transport
        self.directory = directory
        self.endpoint = endpoint
        self.socket_path = directory / endpoint
        self._server: grpc.aio.Server | None = None  # or the in-process transport's look-alike
        self._identity: tuple[int, int] | None = None

    @property
    def resource_name(self) -> str:
        return self.plugin.resource_name

    async def start(self) -> None:
        if self._server is not None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        server = self.transport.server()
        add_plugin_to_server(self.plugin, server)
        server.add_insecure_port(f"unix://{self.socket_path}")
        await server.start()
        self._server = server
        self._identity = socket_identity(self.socket_path)

    async def stop(self) -> None:
        """Stop serving (ending ListAndWatch streams) and remove the socket if it is still ours."""
        self.plugin.close()
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace=None)
        if self._identity is not None and socket_identity(self.socket_path) == self._identity:
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
        self._identity = None

    async def restart(self) -> None:
        """Serve again on a fresh socket (the kubelet deleted ours); ListAndWatch streams start over."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace=None)
        self.plugin.reopen()
        await self.start()

    def socket_intact(self) -> bool:
        return self._server is not None and socket_identity(self.socket_path) == self._identity

    async def register(self, kubelet_socket: Path, timeout: float = 5.0) -> None:
        """Register with the kubelet; raises the devplace error the kubelet's answer stands for."""
        request = api_pb2.RegisterRequest(
            version=VERSION,
            endpoint=self.endpoint,
            resource_name=self.resource_name,
            options=api_pb2.DevicePluginOptions(
                pre_start_required=False,
                get_preferred_allocation_available=self.plugin.preferred_allocation,
            ),
        )
        async with self.transport.channel(f"unix://{kubelet_socket}") as channel:
            stub = api_pb2_grpc.RegistrationStub(channel)
            try:
                await stub.Register(request, timeout=timeout)
            except grpc.aio.AioRpcError as e:
                raise from_rpc_error(e) from e
        log.debug("registered %s at %s", self.resource_name, self.endpoint)
