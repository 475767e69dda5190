"""Handing an instantiated group's objects to member clusters and taking them back, against a real member API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from devplace.placement._kinds import DIG_LABEL
from devplace.placement._members import ResourceRecord, apply_all, read_all, remove_all
from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.placement.samples import workload
from tests.servers import serve_app

OWNER = "my-dig1-0123456789abcdef0123"
WEB = workload("Deployment", "web", "main", replicas=2)


def record(manifest: dict[str, Any], cluster: str = "c1") -> ResourceRecord:
    return ResourceRecord.of("web-app", "edge", cluster, manifest, "Pending")


@pytest.fixture
async def member() -> AsyncIterator[tuple[MemoryStore, str]]:
    store = MemoryStore()
    async with serve_app(create_app(store, fleet_api=False)) as url:
        yield store, url


async def test_objects_are_created_labelled_and_taken_back(member: tuple[MemoryStore, str]) -> None:
    store, url = member
    endpoints = {("edge", "c1"): url, ("edge", "static"): None}
    items = [(record(WEB), WEB), (record(WEB, "static"), WEB)]
    applied = await apply_all(items, endpoints, OWNER, 5.0)
    assert [(r.cluster, r.deployed_status, r.reason) for r in applied] == [
        ("c1", "Applied", ""),
        ("static", "NotApplied", "the cluster has no API endpoint (no kubeconfig)"),
    ]
    held = await store.get("Deployment", "web", "default")
    assert held["metadata"]["labels"][DIG_LABEL] == OWNER
    assert held["spec"]["replicas"] == 2

    again = await apply_all([(record(WEB), {**WEB, "spec": {**WEB["spec"], "replicas": 3}})], endpoints, OWNER, 5.0)
    assert again[0].deployed_status == "Applied"  # ours already: replaced by compare-and-swap
    assert (await store.get("Deployment", "web", "default"))["spec"]["replicas"] == 3

    read = await read_all(applied, endpoints, 5.0)
    assert read[applied[0]]["metadata"]["name"] == "web"  # type: ignore[index]
    assert read[applied[1]] == "the cluster has no API endpoint"

    removed = await remove_all(applied, endpoints, OWNER, 5.0)
    assert [r.deployed_status for r in removed] == ["Deleted", "NotApplied"]
    assert (await store.list("Deployment", "default")).items == []
    assert (await read_all(applied[:1], endpoints, 5.0))[applied[0]] is None


async def test_an_object_that_is_not_the_groups_is_left_alone(member: tuple[MemoryStore, str]) -> None:
    store, url = member
    theirs = {**WEB, "metadata": {"name": "web", "namespace": "default", "labels": {"owner": "someone"}}}
    await store.create(theirs)
    [result] = await apply_all([(record(WEB), WEB)], {("edge", "c1"): url}, OWNER, 5.0)
    assert (result.deployed_status, result.reason) == (
        "Failed",
        "Deployment web exists on the cluster and is not this group's",
    )
    [kept] = await remove_all([result], {("edge", "c1"): url}, OWNER, 5.0)
    assert kept.deployed_status == "Deleted"  # nothing of ours is left there
    assert (await store.get("Deployment", "web", "default"))["metadata"]["labels"] == {"owner": "someone"}


async def test_unreachable_members_and_refused_objects_fail_with_the_reason(member: tuple[MemoryStore, str]) -> None:
    _, url = member
    async with serve_app(create_app(MemoryStore(), fleet_api=False)) as dead:
        pass
    odd = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    results = await apply_all(
        [(record(WEB, "gone"), WEB), (record(odd), odd)], {("edge", "gone"): dead, ("edge", "c1"): url}, OWNER, 5.0
    )
    assert results[0].deployed_status == "Failed"
    assert results[0].reason.startswith(f"{dead}: ")
    assert results[1].deployed_status == "Failed"
    assert results[1].reason.startswith("create refused: 404")
