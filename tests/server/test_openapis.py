"""`/openapi/v2` and `/openapi/v3` over HTTP (a real uvicorn on loopback): what each client is answered, in which
form, and how the answers may be cached."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest

from devplace.kubeapi import _gnostics as gnostics
from devplace.kubeapi import _openapis as openapis
from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.servers import serve_app

KUBECTL_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
SERVED_V2 = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    async with (
        serve_app(create_app(memory_store, fleet_api=False)) as url,
        httpx2.AsyncClient(base_url=url, timeout=30) as client,
    ):
        yield client


async def test_v2_is_protobuf_to_kubectl_with_a_media_type_go_can_parse(api: httpx2.AsyncClient) -> None:
    response = await api.get("/openapi/v2", headers={"Accept": KUBECTL_V2})
    assert response.status_code == 200
    assert response.headers["content-type"] == SERVED_V2  # no "@": Go's mime parser refuses it
    assert response.content == gnostics.encode_document(openapis.swagger())


@pytest.mark.parametrize("accept", [None, "application/json", "*/*", "application/json, */*"])
async def test_v2_is_json_to_everybody_else(api: httpx2.AsyncClient, accept: str | None) -> None:
    headers = {"Accept": accept} if accept else {}
    response = await api.get("/openapi/v2", headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["swagger"] == "2.0"
    assert "sh.akri.v0.Configuration" in body["definitions"]


async def test_v2_refuses_a_media_type_it_does_not_offer_with_406(api: httpx2.AsyncClient) -> None:
    response = await api.get("/openapi/v2", headers={"Accept": "application/yaml"})
    assert response.status_code == 406
    assert response.json()["reason"] == "NotAcceptable"


async def test_an_unchanged_v2_document_is_a_304_for_its_etag(api: httpx2.AsyncClient) -> None:
    first = await api.get("/openapi/v2", headers={"Accept": KUBECTL_V2})
    etag = first.headers["etag"]
    again = await api.get("/openapi/v2", headers={"Accept": KUBECTL_V2, "If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    other = await api.get("/openapi/v2", headers={"Accept": "application/json", "If-None-Match": etag})
    assert other.status_code == 200  # the JSON representation has its own tag


async def test_the_v3_index_points_at_documents_that_are_served_with_their_hash(api: httpx2.AsyncClient) -> None:
    index = (await api.get("/openapi/v3")).json()["paths"]
    assert set(index) == {openapis.group_version_path(gv) for gv in openapis.group_versions()}
    url = index["apis/akri.sh/v0"]["serverRelativeURL"]
    response = await api.get(url)
    assert response.status_code == 200
    assert response.headers["cache-control"] == "public, immutable"
    doc = response.json()
    assert doc == openapis.v3_document("akri.sh/v0")
    core = await api.get("/openapi/v3/api/v1")
    assert core.status_code == 200
    assert core.headers["cache-control"] == "no-cache, private"
    assert "io.k8s.api.core.v1.Pod" in core.json()["components"]["schemas"]


async def test_a_stale_v3_hash_is_redirected_to_the_current_document(api: httpx2.AsyncClient) -> None:
    response = await api.get("/openapi/v3/apis/akri.sh/v0", params={"hash": "0" * 128}, follow_redirects=False)
    assert response.status_code == 301
    assert response.headers["location"] == f"/openapi/v3/apis/akri.sh/v0?hash={openapis.v3_hash('akri.sh/v0')}"


@pytest.mark.parametrize("path", ["/openapi/v3/apis/example.com/v1", "/openapi/v3/apis/akri.sh", "/openapi/v3/x"])
async def test_a_v3_document_nobody_serves_is_a_404_status(api: httpx2.AsyncClient, path: str) -> None:
    response = await api.get(path)
    assert response.status_code == 404
    assert (response.json()["kind"], response.json()["reason"]) == ("Status", "NotFound")


async def test_v3_is_json_only(api: httpx2.AsyncClient) -> None:
    protobuf_only = {"Accept": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"}
    assert (await api.get("/openapi/v3/apis/akri.sh/v0", headers=protobuf_only)).status_code == 406
    either = {"Accept": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf, application/json"}
    assert (await api.get("/openapi/v3/apis/akri.sh/v0", headers=either)).status_code == 200


async def test_fastapis_own_openapi_json_stays_and_does_not_list_the_kubernetes_documents(
    api: httpx2.AsyncClient,
) -> None:
    schema = (await api.get("/openapi.json")).json()
    assert schema["openapi"].startswith("3.")
    assert not any(path.startswith("/openapi/") for path in schema["paths"])
