"""Fixtures for the placement tests: the catalog and the service over every store backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from devplace.clocks import FakeClock
from devplace.store import Store
from tests.store.conftest import BACKENDS


@pytest.fixture(params=list(BACKENDS))
async def any_store(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Store]:
    """A fresh store of each backend (memory, sqlite, remote over a real uvicorn, ...)."""
    async with BACKENDS[request.param](tmp_path, clock) as opened:
        yield opened
