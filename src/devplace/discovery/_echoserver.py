"""An external discovery handler process speaking Akri's protocol, for tests and for trying the bridge by hand.

    python -m devplace.discovery._echoserver --name NAME --socket-dir DIR --registration SOCKET \\
        --devices a,b,c [--shared] [--devices-file PATH] [--poll SECONDS] [--echo-properties]

It serves `v0.DiscoveryHandler` on `<DIR>/<NAME>.sock`, registers that endpoint with the agent's Registration socket
(retrying until the agent answers), and streams its device list to every `Discover` call: each device has id = the
name given and property `ECHO_DEVICE=<id>`. With `--devices-file`, the file (ids separated by commas or whitespace)
is re-read every `--poll` seconds and replaces the list when it changes, so a test can change what is discovered.
With `--echo-properties`, every device also carries each discoveryProperty of the request as
`ECHO_PROPERTY_<name>=<value>` (UTF-8, undecodable bytes backslash-escaped), so a test can see what the agent sent.
Real handlers keep credentials to themselves; this one puts them into device properties (and so into Instances and
broker environments), which is why it is off by default.

discoveryDetails: empty, or YAML `only: [ids]` to report just those ids; anything else is refused with
INVALID_ARGUMENT naming the field. Like Akri's handlers, it registers again whenever a Discover stream is cancelled by
the agent (the agent may have restarted). SIGTERM or SIGINT stop it cleanly and remove its socket.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import re
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from devplace import errors
from devplace.deviceplugin import abort
from devplace.discovery import _details as d
from devplace.discovery._bridge import device_to_proto
from devplace.discovery._devices import Device
from devplace.discovery._signals import Signal
from devplace.discovery.v0 import discovery_pb2 as v0
from devplace.discovery.v0 import discovery_pb2_grpc as v0_grpc

log = logging.getLogger(__name__)

ECHO_DEVICE = "ECHO_DEVICE"
ECHO_PROPERTY_PREFIX = "ECHO_PROPERTY_"


def parse_device_list(text: str) -> list[str]:
    """Ids separated by commas or whitespace, empty items dropped, first occurrence kept."""
    return list(dict.fromkeys(x for x in re.split(r"[,\s]+", text) if x))


def parse_echo_details(text: str) -> frozenset[str] | None:
    """The `only` filter of the details, or None for no filter."""
    raw = d.load_mapping(text)
    d.refuse_unknown(raw, ("only",))
    only = raw.get("only")
    if only is None:
        return None
    if not isinstance(only, list) or not all(isinstance(x, str) for x in only):
        raise errors.Invalid.field(f"{d.ROOT}.only", "must be a list of device ids")
    return frozenset(only)


def echoed_properties(request: v0.DiscoverRequest) -> dict[str, str]:
    """The request's discoveryProperties as device properties `ECHO_PROPERTY_<name>` (see the module docstring)."""
    return {
        f"{ECHO_PROPERTY_PREFIX}{name}": data.vec.decode("utf-8", "backslashreplace")
        for name, data in sorted(request.discovery_properties.items())
    }


class EchoServer(v0_grpc.DiscoveryHandlerServicer):
    def __init__(
        self,
        name: str,
        socket_dir: Path,
        registration: Path,
        devices: Sequence[str],
        *,
        shared: bool = False,
        devices_file: Path | None = None,
        poll: float = 0.1,
        echo_properties: bool = False,
    ) -> None:
        self.name = name
        self.socket_path = socket_dir / f"{name}.sock"
        self.registration = registration
        self.shared = shared
        self.devices_file = devices_file
        self.poll = poll
        self.echo_properties = echo_properties
        self.devices = list(devices)
        self._changed = Signal()
        self._register_again = asyncio.Event()

    async def Discover(
        self, request: v0.DiscoverRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[v0.DiscoverResponse]:
        try:
            only = parse_echo_details(request.discovery_details)
        except errors.Invalid as e:
            await abort(context, e)
        extra = echoed_properties(request) if self.echo_properties else {}
        last: list[str] | None = None
        try:
            while True:
                wake = self._changed.current()
                current = [x for x in self.devices if only is None or x in only]
                if current != last:
                    devices = [Device(id=x, properties={ECHO_DEVICE: x, **extra}, shared=self.shared) for x in current]
                    yield v0.DiscoverResponse(devices=[device_to_proto(x) for x in devices])
                    last = current
                await wake.wait()
        finally:
            # The agent went away or stopped asking; it may have restarted. `finally`, not `except CancelledError`:
            # a stream cancelled while its last response is being written is closed at the `yield` (GeneratorExit).
            self._register_again.set()

    async def register(self) -> None:
        """Register with the agent, retrying with backoff until it answers."""
        delay = 0.05
        request = v0.RegisterDiscoveryHandlerRequest(
            name=self.name,
            endpoint=str(self.socket_path),
            endpoint_type=v0.RegisterDiscoveryHandlerRequest.UDS,
            shared=self.shared,
        )
        while True:
            async with grpc.aio.insecure_channel(f"unix://{self.registration}") as channel:
                try:
                    await v0_grpc.RegistrationStub(channel).RegisterDiscoveryHandler(request, timeout=5)
                    log.info("registered %r at %s", self.name, self.socket_path)
                    return
                except grpc.aio.AioRpcError as e:
                    log.info("registration failed (%s); retrying in %.2fs", e.code(), delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _keep_registered(self) -> None:
        while True:
            await self._register_again.wait()
            self._register_again.clear()
            await self.register()

    async def _watch_file(self, path: Path) -> None:
        while True:
            with contextlib.suppress(FileNotFoundError):
                devices = parse_device_list(await asyncio.to_thread(path.read_text))
                if devices != self.devices:
                    self.devices = devices
                    self._changed.fire()
            await asyncio.sleep(self.poll)

    async def run(self, stop: asyncio.Event) -> None:
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        server = grpc.aio.server()
        v0_grpc.add_DiscoveryHandlerServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket_path}")
        await server.start()
        tasks = [asyncio.create_task(self._keep_registered())]
        if self.devices_file is not None:
            tasks.append(asyncio.create_task(self._watch_file(self.devices_file)))
        try:
            await self.register()
            await stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await server.stop(None)
            self.socket_path.unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devplace.discovery._echoserver", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--name", required=True, help="handler name (Configuration.discoveryHandler.name)")
    parser.add_argument("--socket-dir", required=True, type=Path, help="serve on <dir>/<name>.sock")
    parser.add_argument("--registration", required=True, type=Path, help="the agent's Registration socket")
    parser.add_argument("--devices", default="", help="comma-separated device ids")
    parser.add_argument("--devices-file", type=Path, help="re-read this file for the device list")
    parser.add_argument("--poll", type=float, default=0.1, help="seconds between reads of --devices-file")
    parser.add_argument("--shared", action="store_true", help="register as a handler of shared devices")
    parser.add_argument(
        "--echo-properties",
        action="store_true",
        help="report each received discoveryProperty as device property ECHO_PROPERTY_<name> (tests only)",
    )
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="echoserver %(levelname)s %(message)s", stream=sys.stderr)
    server = EchoServer(
        ns.name,
        ns.socket_dir,
        ns.registration,
        parse_device_list(ns.devices),
        shared=ns.shared,
        devices_file=ns.devices_file,
        poll=ns.poll,
        echo_properties=ns.echo_properties,
    )

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await server.run(stop)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
