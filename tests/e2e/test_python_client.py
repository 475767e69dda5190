"""A Python Kubernetes client from the ecosystem against a real `devplace server` (issue #11 item 7).

lightkube (the library devplace's kube store backend connects with, used here through its own resource API, not
through devplace) lists, watches, merge-patches and server-side-applies devplace objects as custom resources of
`akri.sh/v0`, with nothing but the kubeconfig the server writes for itself (`--write-kubeconfig`). One server (a
child process on sqlite) serves the module; each test works in its own namespace.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.types import PatchType

from tests.servers import spawn_server

pytestmark = pytest.mark.slow

Configuration = create_namespaced_resource("akri.sh", "v0", "Configuration", "configurations")
Instance = create_namespaced_resource("akri.sh", "v0", "Instance", "instances")
BOUND = 10.0
"""Seconds a watch may take to deliver an event that must come (a bound on a hang, not a timing assertion)."""


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("python-client")
    path = root / "kubeconfig"
    with spawn_server(f"sqlite:///{root}/devplace.db", extra_args=("--write-kubeconfig", str(path))):
        deadline = time.monotonic() + 20
        while not (path.is_file() and path.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)  # the server writes it once it listens, bounded by the deadline
        yield path


@pytest.fixture
async def client(kubeconfig: Path) -> AsyncIterator[AsyncClient]:
    kube = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="python-client")
    try:
        yield kube
    finally:
        await kube.close()


def configuration(name: str, namespace: str, *, capacity: int = 1, labels: dict[str, str] | None = None) -> Any:
    return Configuration(
        metadata={"name": name, "namespace": namespace, "labels": labels or {}},
        spec={"discoveryHandler": {"name": "debugEcho", "discoveryDetails": "descriptions: [a]"}, "capacity": capacity},
    )


async def test_lightkube_lists_configurations_page_by_page_and_by_label(client: AsyncClient) -> None:
    ns = "listing"
    for name, tier in (("cam-a", "edge"), ("cam-b", "core"), ("cam-c", "edge")):
        await client.create(configuration(name, ns, labels={"tier": tier}))
    paged = client.list(Configuration, namespace=ns, chunk_size=2)  # two requests: limit=2, then continue
    assert [c.metadata.name async for c in paged] == ["cam-a", "cam-b", "cam-c"]
    assert int(paged.resourceVersion) >= 3
    edge = client.list(Configuration, namespace=ns, labels={"tier": "edge"})
    assert [c.metadata.name async for c in edge] == ["cam-a", "cam-c"]
    assert [c.metadata.name async for c in client.list(Configuration, namespace="nowhere")] == []


async def test_lightkube_watches_an_instance_change_from_a_resource_version(client: AsyncClient) -> None:
    ns = "watching"
    usage = {"cam-123456-0": "", "cam-123456-1": ""}
    created = await client.create(
        Instance(
            metadata={"name": "cam-123456", "namespace": ns},
            spec={"configurationName": "cam", "nodes": ["node-a"], "capacity": 2, "deviceUsage": usage},
        )
    )
    since = created.metadata.resourceVersion

    async def first_change() -> tuple[str, Any]:
        async for change, obj in client.watch(Instance, namespace=ns, resource_version=since):
            return change, obj
        raise AssertionError("the watch ended without an event")

    watching = asyncio.create_task(first_change())
    claim = {"spec": {"deviceUsage": {"cam-123456-1": "node-a"}}}
    patched = await client.patch(Instance, "cam-123456", claim, namespace=ns, patch_type=PatchType.MERGE)
    change, seen = await asyncio.wait_for(watching, BOUND)
    assert change == "MODIFIED"
    assert seen.metadata.resourceVersion == patched.metadata.resourceVersion
    assert seen["spec"]["deviceUsage"] == {"cam-123456-0": "", "cam-123456-1": "node-a"}


async def test_lightkube_merge_patches_a_configuration_and_a_stale_resource_version_is_a_409(
    client: AsyncClient,
) -> None:
    ns = "patching"
    created = await client.create(configuration("cam", ns, capacity=1))
    patch = {"metadata": {"labels": {"owner": "ops"}}, "spec": {"capacity": 3}}
    patched = await client.patch(Configuration, "cam", patch, namespace=ns, patch_type=PatchType.MERGE)
    assert patched["spec"]["capacity"] == 3
    assert patched.metadata.labels == {"owner": "ops"}
    assert int(patched.metadata.resourceVersion) > int(created.metadata.resourceVersion)
    stale = {"metadata": {"resourceVersion": created.metadata.resourceVersion}, "spec": {"capacity": 4}}
    with pytest.raises(ApiError) as caught:
        await client.patch(Configuration, "cam", stale, namespace=ns, patch_type=PatchType.MERGE)
    assert (caught.value.status.code, caught.value.status.reason) == (409, "Conflict")
    assert (await client.get(Configuration, "cam", namespace=ns))["spec"]["capacity"] == 3


async def test_lightkube_server_side_applies_a_configuration_with_conflicts_between_managers(
    client: AsyncClient,
) -> None:
    ns = "applying"
    applied = await client.apply(configuration("cam", ns, capacity=2), field_manager="alice")
    assert applied["spec"]["capacity"] == 2
    with pytest.raises(ApiError) as caught:
        await client.apply(configuration("cam", ns, capacity=5), field_manager="bob")
    assert caught.value.status.code == 409
    assert "alice" in (caught.value.status.message or "")
    forced = await client.apply(configuration("cam", ns, capacity=5), field_manager="bob", force=True)
    assert forced["spec"]["capacity"] == 5
    managers = {entry.manager for entry in forced.metadata.managedFields or []}
    assert "bob" in managers
