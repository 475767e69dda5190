"""Shared fixtures: fake clocks, short socket directories, stores.

Servers started by fixtures are stopped by the fixture that started them (by PID for subprocesses).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from devplace.clocks import FakeClock
from devplace.store import MemoryStore

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("dev", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short directory for unix sockets (AF_UNIX paths are limited to 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def memory_store(clock: FakeClock) -> AsyncIterator[MemoryStore]:
    store = MemoryStore(clock=clock)
    yield store
    await store.close()
