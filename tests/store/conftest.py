"""Store backends for the contract suite.

`BACKENDS` maps a backend's name to a factory: an async context manager that, given an empty directory it may use
and the test's FakeClock, yields a fresh, empty store and cleans up after it (closing the store, stopping any server
it started, by PID). The `store` fixture runs every contract test once per entry, so adding a backend is adding one
entry here, for example `BACKENDS["remote"] = remote_store`. A backend that is slow to start may also lower its
number of examples for the stateful model test in `MODEL_EXAMPLES` (default 60; each example opens a fresh store).

A backend that cannot keep a promise of the protocol, because the system under it has no such thing, names it in
`LACKS`, and the contract tests that rely on it (`NEEDS`, by test name) are skipped for it with the reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from devplace.clocks import FakeClock
from devplace.server._app import create_app
from devplace.store import MemoryStore, Store
from devplace.store._kube import KubeStore
from devplace.store._kubeconfigs import ServerConfig
from devplace.store._sqlite import SqliteStore
from tests import etcds
from tests.servers import remote_backend, serve_app

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


@asynccontextmanager
async def kube_store(directory: Path, clock: FakeClock) -> AsyncIterator[Store]:
    """KubeStore -> real uvicorn on 127.0.0.1 serving a MemoryStore: `devplace server` standing in for a Kubernetes
    API server (none can be installed here)."""
    backing = MemoryStore(clock=clock)
    try:
        async with serve_app(create_app(backing, fleet_api=False)) as base_url:
            store = KubeStore(ServerConfig(base_url), clock=clock)
            try:
                yield store
            finally:
                await store.close()
    finally:
        await backing.close()


BACKENDS: dict[str, BackendFactory] = {
    "memory": memory_store,
    "sqlite": sqlite_store,
    "remote": remote_backend,  # RemoteStore -> real uvicorn on 127.0.0.1 -> MemoryStore (tests/servers.py)
    "etcd": etcds.etcd_backend,  # EtcdStore -> the session's etcd process, a fresh key prefix each (tests/etcds.py)
    "kube": kube_store,  # KubeStore -> real uvicorn on 127.0.0.1 -> MemoryStore (Kubernetes API paths only)
}

LACKS: dict[str, dict[str, str]] = {
    "kube": {
        "watch_every_kind": "Kubernetes watches one resource at a time: no watch across kinds",
        "compact": "a Kubernetes API server compacts etcd itself; a client cannot",
        "gone_at_entry": "Kubernetes answers a gone resourceVersion with 200 and an ERROR event: Gone comes on the "
        "first read (store/_kube.py)",
        "replay_from_zero": "Kubernetes replays no history from revision 0: since=0 is the current state, then changes",
    },
}

NEEDS: dict[str, tuple[str, ...]] = {
    "test_watch_from_zero_replays_everything": ("watch_every_kind", "replay_from_zero"),
    "test_watch_of_every_kind_sees_every_write": ("watch_every_kind",),
    "test_iterating_a_watch_after_leaving_it_is_a_programming_error": ("watch_every_kind",),
    "test_two_watchers_each_see_every_event": ("watch_every_kind",),
    "test_creating_an_object_over_the_size_limit_is_too_large_and_writes_nothing": ("watch_every_kind",),
    "test_watch_from_a_compacted_revision_raises_gone_at_entry": ("compact", "gone_at_entry"),
    "test_compaction_beyond_the_current_revision_is_invalid_naming_revision_and_changes_nothing": ("compact",),
    "test_compaction_to_the_current_revision_keeps_watching_from_it": ("compact",),
    "test_watch_from_a_revision_beyond_the_current_one_is_gone_at_entry": ("gone_at_entry",),
    "test_compaction_keeps_the_objects": ("compact",),
    "test_relisting_and_watching_from_the_list_revision_recovers_from_gone": ("compact",),
    "test_store_behaves_like_the_model": ("compact", "watch_every_kind"),
}

MODEL_EXAMPLES: dict[str, int] = {
    "remote": 15,  # each example starts a server
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip a contract test for a backend that lacks what it needs (`LACKS`, `NEEDS`), saying why."""
    for item in items:
        needs = NEEDS.get(getattr(item, "originalname", item.name), ())
        callspec = getattr(item, "callspec", None)
        if not needs or callspec is None:
            continue
        backend = callspec.params.get("store", callspec.params.get("backend"))
        lacking = [LACKS[backend][need] for need in needs if need in LACKS.get(backend, {})]
        if lacking:
            item.add_marker(pytest.mark.skip(reason=f"not applicable to {backend}: {'; '.join(lacking)}"))


@pytest.fixture(scope="session", autouse=True)
def etcd_stopped_at_the_end() -> Iterator[None]:
    """The session's etcd (started by the first etcd store) is stopped by PID when the tests are done."""
    yield
    etcds.stop_shared_etcd()


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path, clock) as opened:
        yield opened
