#!/usr/bin/env bash
# Build .gpu-wheels/: devplace's runtime closure as CPython 3.12 manylinux x86_64 wheels, for a GPU machine that has
# Python 3.12 and no package index (tools/gpu_check.py runs there). The closure is the project's own lock (uv export
# of uv.lock, no dev group, no extras), never a hand-made list; each pinned wheel is fetched with pip download
# --only-binary for cp312, then the wheelhouse is proven complete offline:
#   1. pip resolves every locked requirement from the wheelhouse alone (--no-index, target Python 3.12);
#   2. where a python3.12 is at hand, the wheels are installed into a temporary target and devplace's CLI, its
#      HTTP client (httpx2 pulls httpcore2, truststore...) and the NVML bindings are imported from it.
#
#   tools/gpu_wheels.sh [DIR]        # default .gpu-wheels (ignored by git); prints the wheel count and size
#
# On the GPU machine (repo root, $OUT set):
#   pip install --no-index --no-deps --target /tmp/dp .gpu-wheels/*.whl && PYTHONPATH=/tmp/dp:src python3 tools/gpu_check.py
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.gpu-wheels}
PY=${PY:-.venv/bin/python}
UV=${UV:-.venv/bin/uv}
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64)
TARGET=(--python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none --only-binary :all:)

quiet_pip() {  # pip, without the warnings a local pip.conf's missing find-links/extra-index entries give
    "$@" 2> >(grep -v -e "is ignored: it is neither a file nor a directory" -e "Running pip as the 'root' user" >&2)
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
req="$work/requirements.txt"
"$UV" export --frozen --no-dev --no-emit-project --no-hashes --format requirements-txt --quiet >"$req"

rm -rf "$OUT"
mkdir -p "$OUT"
quiet_pip "$PY" -m pip download --quiet --disable-pip-version-check --no-deps "${TARGET[@]}" "${PLATFORMS[@]}" \
    -r "$req" -d "$OUT"

# 1. complete: every locked requirement (markers evaluated for Linux, Python 3.12) resolves from the wheelhouse alone
PIP_CONFIG_FILE=/dev/null quiet_pip "$PY" -m pip install --quiet --disable-pip-version-check --dry-run --ignore-installed --no-index \
    --find-links "$OUT" "${TARGET[@]}" "${PLATFORMS[@]}" --target "$work/dry" -r "$req"

# 2. importable, where a Python 3.12 is at hand
py312=${PYTHON312:-}
if [[ -z "$py312" ]]; then
    for candidate in python3.12 "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12; do
        if [[ -n "$candidate" ]] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
            py312=$candidate
            break
        fi
    done
fi
if [[ -n "$py312" ]]; then
    PIP_CONFIG_FILE=/dev/null quiet_pip "$py312" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --target "$work/site" "$OUT"/*.whl
    PYTHONPATH="$work/site:src" "$py312" -c '
import asyncio, pynvml, devplace.cli, devplace.discovery, devplace.store
from devplace.store import open_store
async def main():
    store = open_store("http://127.0.0.1:9")  # builds the HTTP client stack; nothing is dialled
    await store.close()
asyncio.run(main())
print("imports on", __import__("sys").version.split()[0], "ok")'
else
    echo "no python3.12 here: checked resolution only" >&2
fi
count=$(find "$OUT" -name '*.whl' | wc -l)
echo "$OUT: $count wheels, $(du -sh "$OUT" | cut -f1)"
