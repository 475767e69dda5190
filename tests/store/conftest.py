"""Store backends for the contract suite.

`BACKENDS` maps a backend's name to a factory: an async context manager that, given an empty directory it may use
and the test's FakeClock, yields a fresh, empty store and cleans up after it (closing the store, stopping any server
it started, by PID). The `store` fixture runs every contract test once per entry, so adding a backend is adding one
entry here, for example `BACKENDS["remote"] = remote_store`. A backend that is slow to start may also lower its
number of examples for the stateful model test in `MODEL_EXAMPLES` (default 60; each example opens a fresh store).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from devplace.clocks import FakeClock
from devplace.store import MemoryStore, Store
from devplace.store.sqlite import SqliteStore
from tests.servers import remote_backend

BackendFactory = Callable[[Path, FakeClock], AbstractAsyncContextManager[Store]]


@asynccontextmanager
async def memory_store(directory: Path, clock: FakeClock) -> AsyncIterator[Store]:
    store = MemoryStore(clock=clock)
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def sqlite_store(directory: Path, clock: FakeClock) -> AsyncIterator[Store]:
    # A short poll interval keeps cross-process watch tests quick; in-process writes wake watchers without it.
    store = SqliteStore(str(directory / "store.db"), clock=clock, poll_interval=0.01)
    try:
        yield store
    finally:
        await store.close()


BACKENDS: dict[str, BackendFactory] = {
    "memory": memory_store,
    "sqlite": sqlite_store,
    "remote": remote_backend,  # RemoteStore -> real uvicorn on 127.0.0.1 -> MemoryStore (tests/servers.py)
}

MODEL_EXAMPLES: dict[str, int] = {
    "remote": 15,  # each example starts a server
}


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path, clock) as opened:
        yield opened
