"""Self reviews (`kubectl auth can-i`, `kubectl auth whoami`) answered from devplace's own authorization, for the
identity that asks; as JSON and as the protobuf kubectl 1.32 and later send."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace.clocks import FakeClock
from devplace.server._app import create_app
from devplace.server._authn import Auth, Tokens
from devplace.store import MemoryStore
from tests.servers import serve_app

TOKENS = """\
admin-token,alice,1,admin
reader-token,rita,2,reader
node-a-token,system:node:node-a,3,system:nodes
nobody-token,nora,4
"""
ACCESS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def review(verb: str, resource: str, namespace: str = "default") -> dict[str, Any]:
    attributes = {"verb": verb, "resource": resource, "namespace": namespace}
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }


def _field(number: int, value: bytes) -> bytes:
    return bytes([number << 3 | 2, len(value)]) + value


def protobuf_review(verb: str, resource: str, namespace: str) -> bytes:
    """A SelfSubjectAccessReview as kubectl 1.32 encodes it (runtime.Unknown around the message)."""
    attributes = _field(1, namespace.encode()) + _field(2, verb.encode()) + _field(5, resource.encode())
    message = _field(1, b"") + _field(2, _field(1, attributes))
    type_meta = _field(1, b"authorization.k8s.io/v1") + _field(2, b"SelfSubjectAccessReview")
    return b"k8s\x00" + _field(1, type_meta) + _field(2, message)


@pytest.fixture
async def url(memory_store: MemoryStore, clock: FakeClock) -> AsyncIterator[str]:
    app = create_app(memory_store, fleet_api=False, clock=clock, auth=Auth(Tokens.parse(TOKENS)))
    async with serve_app(app) as base_url:
        yield base_url


async def ask(url: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
    async with httpx2.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
        response = await client.post(ACCESS, json=body)
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.parametrize(
    ("token", "verb", "resource", "allowed", "rule"),
    [
        ("admin-token", "delete", "configurations", True, ""),
        ("reader-token", "list", "pods", True, ""),
        ("reader-token", "create", "pods", False, "reader-read-only"),
        ("node-a-token", "list", "instances", True, ""),
        ("node-a-token", "create", "deployments", False, "node-kinds"),
        ("nobody-token", "get", "pods", False, "no-role"),
        ("reader-token", "*", "pods", False, "reader-read-only"),
    ],
)
async def test_can_i_answers_what_authorization_would_decide_for_the_asker(
    url: str, token: str, verb: str, resource: str, allowed: bool, rule: str
) -> None:
    answer = await ask(url, token, review(verb, resource))
    assert answer["status"]["allowed"] is allowed
    assert (rule in answer["status"]["reason"]) if rule else answer["status"]["reason"].startswith("allowed")
    assert answer["kind"] == "SelfSubjectAccessReview"


async def test_a_review_sent_as_protobuf_is_read(url: str) -> None:
    async with httpx2.AsyncClient(base_url=url, headers={"Authorization": "Bearer reader-token"}) as client:
        response = await client.post(
            ACCESS,
            content=protobuf_review("create", "pods", "x"),
            headers={"content-type": "application/vnd.kubernetes.protobuf"},
        )
    assert response.status_code == 201, response.text
    answer = response.json()
    assert answer["spec"]["resourceAttributes"] == {"namespace": "x", "verb": "create", "resource": "pods"}
    assert answer["status"]["allowed"] is False


async def test_whoami_names_the_identity_and_its_groups(url: str) -> None:
    async with httpx2.AsyncClient(base_url=url, headers={"Authorization": "Bearer reader-token"}) as client:
        response = await client.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json={})
    assert response.json()["status"]["userInfo"] == {
        "username": "rita",
        "groups": ["reader", "system:authenticated"],
        "uid": "2",
    }


async def test_a_review_without_a_request_is_422_naming_spec(url: str) -> None:
    async with httpx2.AsyncClient(base_url=url, headers={"Authorization": "Bearer reader-token"}) as client:
        response = await client.post(ACCESS, json={"kind": "SelfSubjectAccessReview", "spec": {}})
    assert response.status_code == 422
    assert response.json()["details"]["causes"][0]["field"] == "spec"
