"""A discovery handler as Akri users write them, for devplace's end-to-end test: it knows nothing of devplace.

It imports only grpc and the stubs compiled from tests/e2e/akri/discovery.proto (the directory holding them must be
on PYTHONPATH), and finds its sockets as Akri's handler template does: `$DISCOVERY_HANDLERS_DIRECTORY` (default
/var/lib/akri) holds the agent's `agent-registration.sock` and its own `<name>.sock`.

    python handler.py --name NAME --devices FILE --requests FILE [--shared]

Devices: FILE is JSON, a list of {"id", "properties", "mounts", "device_specs"}, read again every 50 ms; every
Discover stream is sent the full list at once and again whenever the file changes. Requests: each DiscoverRequest is
appended to FILE as one JSON line, its discovery properties as {name: {"vec": "<latin-1 text>"} or {} when the
ByteData has no bytes set}, so the test can see what came over the wire. It registers (retrying until the agent
answers), and again whenever a stream is cancelled, as Akri's handlers do. SIGTERM or SIGINT stop it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import discovery_pb2 as pb
import discovery_pb2_grpc as pb_grpc
import grpc
import grpc.aio


def _devices(path: Path) -> list[Any]:
    try:
        raw = json.loads(path.read_text() or "[]")
    except (FileNotFoundError, ValueError):
        return []
    return [
        pb.Device(
            id=d["id"],
            properties=d.get("properties", {}),
            mounts=[pb.Mount(**m) for m in d.get("mounts", [])],
            device_specs=[pb.DeviceSpec(**s) for s in d.get("device_specs", [])],
        )
        for d in raw
    ]


class Handler(pb_grpc.DiscoveryHandlerServicer):
    def __init__(self, devices: Path, requests: Path) -> None:
        self.devices = devices
        self.requests = requests
        self.cancelled = asyncio.Event()

    async def Discover(self, request: Any, context: Any) -> AsyncIterator[Any]:
        properties = {
            name: ({"vec": data.vec.decode("latin-1")} if data.HasField("vec") else {})
            for name, data in request.discovery_properties.items()
        }
        with self.requests.open("a") as out:
            out.write(json.dumps({"details": request.discovery_details, "properties": properties}) + "\n")
        last = None
        try:
            while True:
                text = self.devices.read_text() if self.devices.exists() else ""
                if text != last:
                    last = text
                    yield pb.DiscoverResponse(devices=_devices(self.devices))
                await asyncio.sleep(0.05)
        finally:
            self.cancelled.set()


async def register(registration: Path, request: Any) -> None:
    while True:
        async with grpc.aio.insecure_channel(f"unix://{registration}") as channel:
            try:
                await pb_grpc.RegistrationStub(channel).RegisterDiscoveryHandler(request, timeout=5)
                return
            except grpc.aio.AioRpcError:
                pass
        await asyncio.sleep(0.1)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--devices", type=Path, required=True)
    parser.add_argument("--requests", type=Path, required=True)
    parser.add_argument("--shared", action="store_true")
    args = parser.parse_args()
    directory = Path(os.environ.get("DISCOVERY_HANDLERS_DIRECTORY") or "/var/lib/akri")
    socket = directory / f"{args.name}.sock"
    socket.unlink(missing_ok=True)
    handler = Handler(args.devices, args.requests)
    server = grpc.aio.server()
    pb_grpc.add_DiscoveryHandlerServicer_to_server(handler, server)
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    request = pb.RegisterDiscoveryHandlerRequest(
        name=args.name,
        endpoint=str(socket),
        endpoint_type=pb.RegisterDiscoveryHandlerRequest.UDS,
        shared=args.shared,
    )

    async def keep_registered() -> None:
        while True:
            await register(directory / "agent-registration.sock", request)
            await handler.cancelled.wait()
            handler.cancelled.clear()

    registering = asyncio.create_task(keep_registered())
    await stop.wait()
    registering.cancel()
    await server.stop(None)
    socket.unlink(missing_ok=True)


if __name__ == "__main__":
    asyncio.run(main())
