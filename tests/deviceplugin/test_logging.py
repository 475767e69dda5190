"""gRPC's own INFO lines stay off users' stderr, unless the user asked for them with GRPC_VERBOSITY."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Starts and stops a device-plugin server under an open ListAndWatch stream, several times: each stop sends the
# client a GOAWAY, which gRPC's core reports at INFO level (`chttp2_transport.cc:...] ... Got goaway`).
SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys
    import importlib
    importlib.import_module(sys.argv[2])  # any devplace module: the package sets the default first
    import grpc.aio
    from devplace.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc

    class Plugin(api_pb2_grpc.DevicePluginServicer):
        async def ListAndWatch(self, request, context):
            yield api_pb2.ListAndWatchResponse()
            await asyncio.Event().wait()

    async def main(directory):
        for i in range(20):
            path = f"unix://{directory}/dp-{i}.sock"
            server = grpc.aio.server()
            api_pb2_grpc.add_DevicePluginServicer_to_server(Plugin(), server)
            server.add_insecure_port(path)
            await server.start()
            channel = grpc.aio.insecure_channel(path)
            call = api_pb2_grpc.DevicePluginStub(channel).ListAndWatch(api_pb2.Empty())
            await call.read()
            await server.stop(None)
            await asyncio.sleep(0.01)
            await channel.close()
        print(os.environ["GRPC_VERBOSITY"])

    asyncio.run(main(sys.argv[1]))
    """
)


def run(tmp_path: Path, verbosity: str | None, first: str = "devplace.agent") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")}
    if verbosity is not None:
        env["GRPC_VERBOSITY"] = verbosity
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), first],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


@pytest.mark.parametrize("first", ["devplace.agent", "devplace.sim._kubelets", "devplace.cli"])
def test_stopping_plugin_servers_writes_no_grpc_info_lines_to_stderr(tmp_path: Path, first: str) -> None:
    done = run(tmp_path, None, first)
    assert done.stdout.strip() == "ERROR"
    assert "goaway" not in done.stderr.lower()
    assert "chttp2_transport" not in done.stderr


def test_a_grpc_verbosity_the_user_set_is_kept(tmp_path: Path) -> None:
    done = run(tmp_path, "DEBUG")
    assert done.stdout.strip() == "DEBUG"


pytestmark = pytest.mark.slow
