"""Writer processes for the multi-process sqlite tests: `python writers.py MODE PATH ...`.

Each committed write prints its revision on its own line (flushed) only after the store call returned, so a parent
that kills the process knows which writes it must find after reopening.

    counter PATH N      increment ConfigMap default/counter N times by CAS (N=0: until killed)
    create PATH PREFIX N  create ConfigMaps default/PREFIX-0 .. PREFIX-(N-1)
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from typing import Any

from devplace import errors
from devplace.store import cas
from devplace.store._sqlite import SqliteStore


def _increment(obj: dict[str, Any]) -> dict[str, Any]:
    obj["data"]["count"] = str(int(obj["data"]["count"]) + 1)
    return obj


async def counter(path: str, times: int) -> None:
    store = SqliteStore(path)
    try:
        await store.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "counter", "namespace": "default"},
                "data": {"count": "0"},
            }
        )
    except errors.AlreadyExists:
        pass
    steps = itertools.count() if times == 0 else range(times)
    for _ in steps:
        written = (await cas(store, "ConfigMap", "counter", "default", _increment, attempts=200)).object
        print(written["metadata"]["resourceVersion"], flush=True)
    await store.close()


async def create(path: str, prefix: str, times: int) -> None:
    store = SqliteStore(path)
    for i in range(times):
        written = await store.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{prefix}-{i}", "namespace": "default"}}
        )
        print(written["metadata"]["resourceVersion"], flush=True)
    await store.close()


def main(argv: list[str]) -> None:
    mode, path, *rest = argv
    if mode == "counter":
        asyncio.run(counter(path, int(rest[0])))
    elif mode == "create":
        asyncio.run(create(path, rest[0], int(rest[1])))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
