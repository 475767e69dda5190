"""Namespaces over HTTP: `default` is there, a deletion is seen as Terminating and takes every object in the
namespace with it, nothing is created in a Terminating namespace, and `default` cannot be deleted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.servers import serve_app

NAMESPACES = "/api/v1/namespaces"


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    async with serve_app(create_app(memory_store, fleet_api=False)) as url, httpx2.AsyncClient(base_url=url) as client:
        yield client


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}}


async def test_default_is_listed_and_a_new_namespace_is_active(api: httpx2.AsyncClient) -> None:
    created = await api.post(NAMESPACES, json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    assert created.json()["status"] == {"phase": "Active"}
    listed = {n["metadata"]["name"]: n["status"]["phase"] for n in (await api.get(NAMESPACES)).json()["items"]}
    assert listed == {"default": "Active", "team": "Active"}


async def test_a_deletion_is_seen_terminating_and_takes_the_namespaces_objects(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    await api.post(NAMESPACES, json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    await api.post("/api/v1/namespaces/team/configmaps", json=config_map("c"))
    await api.post("/api/v1/namespaces/other/configmaps", json=config_map("kept"))
    seen: list[tuple[str, str]] = []

    async def watch() -> None:
        params = {"watch": "1", "fieldSelector": "metadata.name=team", "resourceVersion": "3"}
        async with api.stream("GET", NAMESPACES, params=params) as response:
            async for line in response.aiter_lines():
                event = json.loads(line)
                seen.append((event["type"], (event["object"].get("status") or {}).get("phase", "")))
                if event["type"] == "DELETED":
                    return

    watching = asyncio.create_task(watch())
    await asyncio.sleep(0.05)  # the watch is open before the deletion (a bound, not a timing)
    answer = (await api.delete(f"{NAMESPACES}/team")).json()
    assert (answer["kind"], answer["status"]["phase"]) == ("Namespace", "Terminating")
    await asyncio.wait_for(watching, 10)
    assert seen == [("MODIFIED", "Terminating"), ("DELETED", "Terminating")]
    assert (await memory_store.list("ConfigMap", "team")).items == []
    assert [c["metadata"]["name"] for c in (await memory_store.list("ConfigMap")).items] == ["kept"]


async def test_nothing_is_created_in_a_terminating_namespace(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    await memory_store.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "going"}, "status": {"phase": "Terminating"}}
    )
    refused = await api.post("/api/v1/namespaces/going/configmaps", json=config_map("late"))
    assert refused.status_code == 403
    assert refused.json()["message"] == "unable to create new content in namespace going because it is being terminated"


async def test_default_cannot_be_deleted(api: httpx2.AsyncClient) -> None:
    await api.get(NAMESPACES)
    refused = await api.delete(f"{NAMESPACES}/default")
    assert refused.status_code == 403
    assert (await api.get(f"{NAMESPACES}/default")).status_code == 200
