"""Tables over HTTP: what kubectl's Accept header gets on lists and items, and the media types negotiation picks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace.clocks import FakeClock
from devplace.kubeapi import _tables as tables
from devplace.server._app import create_app
from devplace.server._representations import negotiate
from devplace.store import MemoryStore
from tests.servers import serve_app

KUBECTL_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
INSTANCES = "/apis/akri.sh/v0/namespaces/default/instances"


@pytest.mark.parametrize(
    ("accept", "table"),
    [
        (None, None),
        ("", None),
        ("*/*", None),
        ("application/json", None),
        (KUBECTL_ACCEPT, "meta.k8s.io/v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "meta.k8s.io/v1beta1"),
        ("application/json;as=Table;v=v1;g=meta.k8s.io;q=0.5, application/json", None),
        ("application/vnd.kubernetes.protobuf, application/json;as=Table;v=v1;g=meta.k8s.io", "meta.k8s.io/v1"),
        ("application/json;as=Table;v=v2;g=meta.k8s.io, application/json", None),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io, */*", None),
    ],
)
def test_the_first_media_range_devplace_serves_wins(accept: str | None, table: str | None) -> None:
    shown = negotiate(accept)
    assert shown is not None
    assert shown.table == table


@pytest.mark.parametrize("accept", ["application/yaml", "application/vnd.kubernetes.protobuf", "text/html"])
def test_a_client_accepting_nothing_devplace_serves_gets_none(accept: str) -> None:
    assert negotiate(accept) is None


@pytest.fixture
async def api(clock: FakeClock) -> AsyncIterator[httpx2.AsyncClient]:
    store = MemoryStore(clock=clock)
    try:
        app = create_app(store, fleet_api=False, clock=clock)
        async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=10) as client:
            yield client
    finally:
        await store.close()


def instance(name: str, used: int = 0) -> dict[str, Any]:
    usage = {f"{name}-{i}": ("node-a" if i < used else "") for i in range(2)}
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": {"name": name, "labels": {"app": "cam"}},
        "spec": {"configurationName": "cam", "nodes": ["node-a"], "capacity": 2, "deviceUsage": usage},
    }


async def test_kubectls_accept_gets_a_table_with_the_columns_devplace_get_prints(
    api: httpx2.AsyncClient, clock: FakeClock
) -> None:
    for name, used in (("cam-aaaaaa", 1), ("cam-bbbbbb", 2)):
        assert (await api.post(INSTANCES, json=instance(name, used))).status_code == 201
    await clock.advance(330)
    response = await api.get(INSTANCES, headers={"Accept": KUBECTL_ACCEPT})
    assert response.status_code == 200, response.text
    table = response.json()
    assert (table["kind"], table["apiVersion"], table["metadata"]["resourceVersion"]) == (
        "Table",
        "meta.k8s.io/v1",
        "2",
    )
    headers = [d["name"].upper() for d in table["columnDefinitions"]]
    assert headers == [c.header for c in tables.columns("Instance")]
    assert [row["cells"] for row in table["rows"]] == [
        ["cam-aaaaaa", "cam", False, "node-a", "1/2", "5m30s", "<none>"],
        ["cam-bbbbbb", "cam", False, "node-a", "2/2", "5m30s", "<none>"],
    ]
    meta = table["rows"][0]["object"]
    assert (meta["kind"], meta["metadata"]["labels"]) == ("PartialObjectMetadata", {"app": "cam"})


async def test_an_item_get_with_a_table_accept_is_a_one_row_table_and_include_object_object_carries_it(
    api: httpx2.AsyncClient,
) -> None:
    created = (await api.post(INSTANCES, json=instance("cam-aaaaaa"))).json()
    accept = {"Accept": "application/json;as=Table;v=v1beta1;g=meta.k8s.io"}
    response = await api.get(f"{INSTANCES}/cam-aaaaaa", headers=accept, params={"includeObject": "Object"})
    table = response.json()
    assert (table["apiVersion"], table["metadata"]["resourceVersion"]) == ("meta.k8s.io/v1beta1", "1")
    (row,) = table["rows"]
    assert row["object"] == created
    plain = await api.get(f"{INSTANCES}/cam-aaaaaa")
    assert plain.json() == created


async def test_a_paged_table_carries_continue(api: httpx2.AsyncClient) -> None:
    for name in ("cam-aaaaaa", "cam-bbbbbb", "cam-cccccc"):
        await api.post(INSTANCES, json=instance(name))
    first = (await api.get(INSTANCES, headers={"Accept": KUBECTL_ACCEPT}, params={"limit": "2"})).json()
    assert len(first["rows"]) == 2
    token = first["metadata"]["continue"]
    rest = (
        await api.get(INSTANCES, headers={"Accept": KUBECTL_ACCEPT}, params={"limit": "2", "continue": token})
    ).json()
    assert [r["cells"][0] for r in rest["rows"]] == ["cam-cccccc"]


async def test_an_unacceptable_accept_is_406_and_a_bad_include_object_is_400(api: httpx2.AsyncClient) -> None:
    refused = await api.get(INSTANCES, headers={"Accept": "application/yaml"})
    assert refused.status_code == 406, refused.text
    assert (refused.json()["kind"], refused.json()["reason"]) == ("Status", "NotAcceptable")
    bad = await api.get(INSTANCES, headers={"Accept": KUBECTL_ACCEPT}, params={"includeObject": "All"})
    assert bad.status_code == 400, bad.text
    assert bad.json()["details"]["causes"][0]["field"] == "includeObject"
