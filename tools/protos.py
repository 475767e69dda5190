"""Generate (or check) the committed gRPC stubs from the .proto files under src/devplace.

Usage: ``python tools/protos.py`` regenerates every stub in place; ``python tools/protos.py --check`` regenerates
into a temporary directory and exits 1, naming each file, if a committed stub is missing or differs (CI runs this,
so a proto edit without regeneration fails the build).

Protos are compiled with ``-I src`` so generated imports are absolute (``devplace.deviceplugin.v1beta1.api_pb2``),
with the grpcio-tools pinned in pyproject (generated code refuses runtimes older than its generator). The mypy-protobuf
plugins (``protoc-gen-mypy``, ``protoc-gen-mypy_grpc``) are taken from the directory of the running interpreter, so
the venv's pinned versions are used whatever PATH says.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PROTOS = (
    "devplace/deviceplugin/v1beta1/api.proto",
    "devplace/deviceplugin/podresources/v1/api.proto",
    "devplace/deviceplugin/dra/v1/api.proto",
    "devplace/deviceplugin/dra/v1beta1/api.proto",
    "devplace/deviceplugin/drahealth/v1alpha1/api.proto",
    "devplace/deviceplugin/drahealth/v1/api.proto",
    "devplace/deviceplugin/pluginregistration/v1/api.proto",
    "devplace/discovery/v0/discovery.proto",
    "devplace/store/etcdserverpb/rpc.proto",
)
SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


def _plugin(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        sys.exit(f"error: {path} not found; install the dev dependency group (make venv)")
    return f"--plugin={name}={path}"


def generate(out: Path) -> None:
    """Run protoc for every proto, writing stubs under `out` (mirroring src/)."""
    args = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{SRC}",
        _plugin("protoc-gen-mypy"),
        _plugin("protoc-gen-mypy_grpc"),
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        *(str(SRC / p) for p in PROTOS),
    ]
    done = subprocess.run(args, capture_output=True, text=True, check=False)  # quiet unless it fails
    if done.returncode != 0:
        sys.exit(f"error: protoc failed with exit code {done.returncode}:\n{done.stderr}{done.stdout}")


def expected_files() -> list[str]:
    """Paths (relative to src/) of every stub the protos produce."""
    return [p.removesuffix(".proto") + suffix for p in PROTOS for suffix in SUFFIXES]


def check() -> int:
    with tempfile.TemporaryDirectory(prefix="protos-") as tmp:
        fresh = Path(tmp)
        generate(fresh)
        stale = []
        for rel in expected_files():
            committed = SRC / rel
            if not committed.exists():
                stale.append(f"{rel} (missing)")
            elif committed.read_bytes() != (fresh / rel).read_bytes():
                stale.append(f"{rel} (differs)")
    if stale:
        print("error: generated gRPC stubs are out of date; run `make protos` and commit:", file=sys.stderr)
        for line in stale:
            print(f"  src/{line}", file=sys.stderr)
        return 1
    print(f"protos: {len(expected_files())} stubs up to date")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if committed stubs differ from fresh ones")
    ns = parser.parse_args()
    if ns.check:
        return check()
    generate(SRC)
    print(f"protos: wrote {len(expected_files())} stubs under {SRC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
