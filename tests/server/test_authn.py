"""Authentication on a real uvicorn on loopback: bearer tokens from a tokens file, client certificates over TLS
(a CA made with openssl in the test), and the 401 and 403 `Status` answers."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from devplace import errors
from devplace.clocks import FakeClock
from devplace.server._app import create_app, running
from devplace.server._authn import Auth, TlsFiles, Tokens, identity_of_certificate
from devplace.server._authz import Identity
from devplace.store import MemoryStore
from devplace.store._remote import RemoteStore
from devplace.store._restclients import Credentials
from tests.server.certificates import Issued, Pki

TOKENS = """\
# token,user,uid,groups
admin-token,alice,1,"admin"
reader-token,bob,2,reader

node-a-token,system:node:node-a,3,"system:nodes"
nobody-token,carol,4
"""
BOUND = 10


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


# -- the tokens file ------------------------------------------------------------------------------------------------


def test_a_tokens_file_is_read_as_kube_apiserver_reads_it() -> None:
    tokens = Tokens.parse(TOKENS)
    assert tokens.identity("admin-token") == Identity("alice", ("admin",), "1")
    assert tokens.identity("node-a-token") == Identity("system:node:node-a", ("system:nodes",), "3")
    assert tokens.identity("nobody-token") == Identity("carol", (), "4")
    assert tokens.identity("unknown") is None
    assert tokens.first_token["bob"] == "reader-token"
    several = Tokens.parse('t,dave,5,"admin, reader,devs"\n')
    assert several.identity("t") == Identity("dave", ("admin", "reader", "devs"), "5")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("t,alice\n", "expected token,user,uid"),
        (",alice,1\n", "must not be empty"),
        ("t,,1\n", "must not be empty"),
        ("t,alice,1\nt,bob,2\n", "already given"),
    ],
)
def test_a_bad_tokens_file_line_is_refused_naming_the_line(text: str, reason: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        Tokens.parse(text, "tokens.csv")
    line = text.count("\n")
    assert caught.value.fields[0].path == f"tokens.csv:{line}"
    assert reason in caught.value.message


def test_tokens_are_kept_only_as_digests() -> None:
    tokens = Tokens.parse(TOKENS)
    assert all(len(digest) == 32 for digest in tokens.by_digest)
    assert b"admin-token" not in tokens.by_digest


def test_a_certificate_without_a_common_name_is_no_identity() -> None:
    assert identity_of_certificate(None) is None
    assert identity_of_certificate({"subject": ((("organizationName", "admin"),),)}) is None
    cert = {"subject": ((("commonName", "alice"),), (("organizationName", "admin"),), (("organizationName", "x"),))}
    assert identity_of_certificate(cert) == Identity("alice", ("admin", "x"))


# -- tokens over HTTP -------------------------------------------------------------------------------------------------


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[MemoryStore]:
    backing = MemoryStore(clock=clock)
    yield backing
    await backing.close()


@pytest.fixture
async def api(store: MemoryStore, clock: FakeClock) -> AsyncIterator[httpx2.AsyncClient]:
    app = create_app(store, fleet_api=True, clock=clock, auth=Auth(Tokens.parse(TOKENS)))
    async with running(app, shutdown_timeout=0) as url, httpx2.AsyncClient(base_url=url, timeout=BOUND) as client:
        yield client


async def test_a_request_without_credentials_is_401_but_health_and_version_answer(api: httpx2.AsyncClient) -> None:
    for path in ("/healthz", "/version"):
        assert (await api.get(path)).status_code == 200
    for method, path in (("GET", "/api/v1/nodes"), ("POST", "/api/v1/nodes"), ("GET", "/api"), ("GET", "/v2/projects")):
        response = await api.request(method, path, json=node("n") if method == "POST" else None)
        assert response.status_code == 401, (method, path)
        body = response.json()
        assert (body["kind"], body["reason"], body["code"]) == ("Status", "Unauthorized", 401)


@pytest.mark.parametrize("header", ["Bearer not-a-token", "Basic YWxpY2U6eA==", "Bearer", "admin-token"])
async def test_bad_credentials_are_401_even_where_none_are_needed(api: httpx2.AsyncClient, header: str) -> None:
    for path in ("/api/v1/nodes", "/healthz"):
        response = await api.get(path, headers={"Authorization": header})
        assert response.status_code == 401, path
        assert response.json()["reason"] == "Unauthorized"


async def test_an_admin_token_may_write(api: httpx2.AsyncClient) -> None:
    created = await api.post("/api/v1/nodes", json=node("n"), headers=bearer("admin-token"))
    assert created.status_code == 201
    compacted = await api.post("/store/compact", json={"revision": 1}, headers=bearer("admin-token"))
    assert compacted.status_code == 200


async def test_a_reader_reads_and_is_refused_every_write_naming_the_rule(
    api: httpx2.AsyncClient, store: MemoryStore
) -> None:
    await store.create(node("n"))
    reader = bearer("reader-token")
    assert (await api.get("/api/v1/nodes", headers=reader)).status_code == 200
    assert (await api.get("/api/v1/nodes/n", headers=reader)).status_code == 200
    assert (await api.get("/v2/projects", headers=reader)).status_code == 200
    writes = [
        ("POST", "/api/v1/nodes", node("m")),
        ("PUT", "/api/v1/nodes/n", node("n")),
        ("DELETE", "/api/v1/nodes/n", None),
        ("POST", "/v2/projects", {"metadata": {"name": "p"}}),
        ("POST", "/store/compact", {"revision": 1}),
    ]
    for method, path, body in writes:
        response = await api.request(method, path, json=body, headers=reader)
        assert response.status_code == 403, (method, path, response.text)
        status = response.json()
        assert status["reason"] == "Forbidden"
        assert "rule reader-read-only" in status["message"]
        assert 'User "bob"' in status["message"]
    assert [n["metadata"]["name"] for n in (await store.list("Node")).items] == ["n"]


async def test_an_identity_without_a_role_sees_only_discovery(api: httpx2.AsyncClient) -> None:
    nobody = bearer("nobody-token")
    assert (await api.get("/api", headers=nobody)).status_code == 200
    assert (await api.get("/apis/devplace.io/v1alpha1", headers=nobody)).status_code == 200
    refused = await api.get("/api/v1/nodes", headers=nobody)
    assert refused.status_code == 403
    assert "rule no-role" in refused.json()["message"]


async def test_a_node_token_is_refused_the_store_compaction_and_watch_but_reads_the_revision(
    api: httpx2.AsyncClient,
) -> None:
    mine = bearer("node-a-token")
    assert (await api.get("/store/revision", headers=mine)).status_code == 200
    for method, path in (("POST", "/store/compact"), ("GET", "/store/watch")):
        response = await api.request(method, path, json={"revision": 1} if method == "POST" else None, headers=mine)
        assert response.status_code == 403
        assert "rule store-admin-only" in response.json()["message"]


async def test_a_refusal_on_the_fleet_api_is_a_status_too(api: httpx2.AsyncClient) -> None:
    response = await api.get("/v2/projects", headers=bearer("node-a-token"))
    assert response.status_code == 403
    assert "rule node-no-fleet" in response.json()["message"]


async def test_the_remote_store_sends_its_token_and_raises_forbidden_without_one(
    api: httpx2.AsyncClient, store: MemoryStore, clock: FakeClock
) -> None:
    await store.create(node("n"))
    url = str(api.base_url)
    with_token = RemoteStore(url, clock=clock, credentials=Credentials(token="reader-token"))
    without = RemoteStore(url, clock=clock)
    try:
        assert [n["metadata"]["name"] for n in (await with_token.list("Node")).items] == ["n"]
        with pytest.raises(errors.Forbidden, match="rule reader-read-only"):
            await with_token.create(node("m"))
        with pytest.raises(errors.Unauthenticated):
            await without.list("Node")
        async with with_token.watch("Node", since=0) as events:
            assert (await asyncio.wait_for(anext(events), BOUND)).object["metadata"]["name"] == "n"
    finally:
        await with_token.close()
        await without.close()


# -- client certificates over TLS -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki.create(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server_cert(pki: Pki) -> Issued:
    return pki.issue("server", "127.0.0.1", server=True)


def client_context(pki: Pki, cert: Issued | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca.cert))
    if cert is not None:
        context.load_cert_chain(str(cert.cert), str(cert.key))
    return context


@pytest.fixture
async def tls_api(
    store: MemoryStore, clock: FakeClock, pki: Pki, server_cert: Issued
) -> AsyncIterator[tuple[str, Auth]]:
    auth = Auth(Tokens.parse(TOKENS), client_certificates=True)
    app = create_app(store, fleet_api=False, clock=clock, auth=auth)
    tls = TlsFiles(str(server_cert.cert), str(server_cert.key), str(pki.ca.cert))
    async with running(app, shutdown_timeout=0, tls=tls) as url:
        assert url.startswith("https://127.0.0.1:")
        yield url, auth


async def test_a_client_certificate_is_its_cn_user_with_its_o_groups(
    tls_api: tuple[str, Auth], pki: Pki, store: MemoryStore
) -> None:
    url, _ = tls_api
    admin = pki.issue("alice", "alice", ("admin",))
    node_a = pki.issue("node-a", "system:node:node-a", ("system:nodes",))
    async with httpx2.AsyncClient(base_url=url, verify=client_context(pki, admin), timeout=BOUND) as client:
        assert (await client.post("/api/v1/nodes", json=node("node-b"))).status_code == 201
    async with httpx2.AsyncClient(base_url=url, verify=client_context(pki, node_a), timeout=BOUND) as client:
        assert (await client.post("/api/v1/nodes", json=node("node-a"))).status_code == 201
        refused = await client.delete("/api/v1/nodes/node-b")
        assert refused.status_code == 403
        message = refused.json()["message"]
        assert 'User "system:node:node-a"' in message
        assert "rule node-own-node" in message
    assert sorted(n["metadata"]["name"] for n in (await store.list("Node")).items) == ["node-a", "node-b"]


async def test_over_tls_a_token_works_without_a_certificate_and_nothing_is_401(
    tls_api: tuple[str, Auth], pki: Pki
) -> None:
    url, _ = tls_api
    async with httpx2.AsyncClient(base_url=url, verify=client_context(pki), timeout=BOUND) as client:
        assert (await client.get("/api/v1/nodes", headers=bearer("reader-token"))).status_code == 200
        assert (await client.get("/api/v1/nodes")).status_code == 401
        assert (await client.get("/healthz")).status_code == 200


async def test_a_certificate_from_another_ca_does_not_get_through(
    tls_api: tuple[str, Auth], pki: Pki, tmp_path: Path
) -> None:
    url, _ = tls_api
    other = Pki.create(tmp_path / "other")
    stranger = other.issue("mallory", "mallory", ("admin",))
    async with httpx2.AsyncClient(base_url=url, verify=client_context(pki, stranger), timeout=BOUND) as client:
        with pytest.raises(httpx2.TransportError):
            await client.get("/api/v1/nodes")


async def test_a_closed_connection_forgets_its_certificate(tls_api: tuple[str, Auth], pki: Pki) -> None:
    url, auth = tls_api
    admin = pki.issue("alice", "alice", ("admin",))
    async with httpx2.AsyncClient(base_url=url, verify=client_context(pki, admin), timeout=BOUND) as client:
        assert (await client.get("/api/v1/nodes")).status_code == 200
        assert len(auth.peers) == 1
    for _ in range(BOUND * 100):  # the server notices the close a moment later (a bound, not an expectation)
        if not len(auth.peers):
            break
        await asyncio.sleep(0.01)
    assert len(auth.peers) == 0


async def test_the_remote_store_presents_certificate_data_and_trusts_the_given_ca(
    tls_api: tuple[str, Auth], pki: Pki, store: MemoryStore, clock: FakeClock
) -> None:
    url, _ = tls_api
    node_a = pki.issue("node-a", "system:node:node-a", ("system:nodes",))
    credentials = Credentials(
        ca_data=pki.ca.cert.read_text(), cert_data=node_a.cert.read_text(), key_data=node_a.key.read_text()
    )
    remote = RemoteStore(url, clock=clock, credentials=credentials)
    try:
        created = await remote.create(node("node-a"))
        assert created["metadata"]["name"] == "node-a"
        with pytest.raises(errors.Forbidden, match="rule node-own-node"):
            await remote.create(node("node-b"))
    finally:
        await remote.close()
    untrusting = RemoteStore(url, clock=clock)  # the system's roots do not know the test CA
    try:
        with pytest.raises(errors.Unavailable):
            await untrusting.list("Node")
    finally:
        await untrusting.close()
