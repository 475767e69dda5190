"""/livez and /readyz as kube-apiserver answers them: `ok`, each check with ?verbose, 500 when the store is away."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.server._app import create_app
from devplace.store import MemoryStore


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    transport = httpx2.ASGITransport(app=create_app(memory_store, fleet_api=False))
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


async def test_livez_and_readyz_answer_ok_and_list_their_checks_when_verbose(api: httpx2.AsyncClient) -> None:
    assert (await api.get("/livez")).text == "ok"
    assert (await api.get("/readyz")).text == "ok"
    assert (await api.get("/readyz", params={"verbose": ""})).text == "[+]ping ok\n[+]store ok\nreadyz check passed\n"
    assert (await api.get("/livez?verbose")).text == "[+]ping ok\nlivez check passed\n"
    excluded = await api.get("/readyz", params={"verbose": "1", "exclude": "store"})
    assert excluded.text == "[+]ping ok\n[+]store excluded: ok\nreadyz check passed\n"
    assert (await api.get("/readyz/store")).text == "ok"
    assert (await api.get("/readyz/nothing")).status_code == 404


class AwayStore(MemoryStore):
    """A store whose backend does not answer (as an etcd that is down)."""

    async def revision(self) -> int:
        raise errors.Unavailable("the backend did not answer")


async def test_readyz_is_500_and_livez_200_when_the_store_does_not_answer(clock: FakeClock) -> None:
    store = AwayStore(clock=clock)
    transport = httpx2.ASGITransport(app=create_app(store, fleet_api=False))
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        ready = await client.get("/readyz")
        assert ready.status_code == 500
        assert ready.text == "[+]ping ok\n[-]store failed: reason withheld\nreadyz check failed\n"
        assert (await client.get("/livez")).status_code == 200
