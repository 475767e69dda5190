"""Rules that need the stored objects, over HTTP (a real uvicorn serving a memory store): a ResourceClass's class
references must exist and form no cycle at creation, and its spec never changes afterwards. A refused write writes
nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace import errors
from devplace.api import normalize
from devplace.scheduler import _admissions as admission
from devplace.scheduler._classes import ClassSpec
from devplace.server._app import create_app
from devplace.store import DelegatingStore, MemoryStore, Store
from tests.servers import serve_app

CLASSES = "/apis/devplace.io/v1alpha1/resourceclasses"
GPU = {"matchExpressions": [{"key": "Kind", "operator": "In", "values": ["nvidia-gpu"]}]}


def resource_class(name: str, *terms: Any, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": {"name": name},
        "spec": {"resourceSelector": list(terms), **spec},
    }


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    async with (
        serve_app(create_app(memory_store, fleet_api=False)) as url,
        httpx2.AsyncClient(base_url=url, timeout=10) as client,
    ):
        yield client


def refused(response: httpx2.Response) -> tuple[int, list[tuple[str, str]]]:
    body = response.json()
    return response.status_code, [(c["field"], c["message"]) for c in body["details"]["causes"]]


async def names(api: httpx2.AsyncClient) -> list[str]:
    return [o["metadata"]["name"] for o in (await api.get(CLASSES)).json()["items"]]


async def test_a_class_referring_to_a_missing_class_is_refused_at_creation_and_not_stored(
    api: httpx2.AsyncClient,
) -> None:
    response = await api.post(CLASSES, json=resource_class("any.gpu", {"classRef": "gpu"}))
    assert refused(response) == (
        422,
        [("spec.resourceSelector[0].classRef", "class 'gpu' (referenced by 'any.gpu') does not exist")],
    )
    assert await names(api) == []


async def test_a_class_referring_to_stored_classes_is_created_and_a_reference_to_itself_is_a_cycle(
    api: httpx2.AsyncClient,
) -> None:
    assert (await api.post(CLASSES, json=resource_class("gpu", GPU))).status_code == 201
    assert (await api.post(CLASSES, json=resource_class("any.gpu", {"classRef": "gpu"}))).status_code == 201
    looped = await api.post(CLASSES, json=resource_class("loop", {"classRef": "any.gpu"}, {"classRef": "loop"}))
    assert refused(looped) == (422, [("spec.resourceSelector[1].classRef", "cycle loop -> loop")])
    assert await names(api) == ["any.gpu", "gpu"]


async def test_a_class_referring_to_a_stored_class_that_is_itself_broken_is_refused(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    await memory_store.create(resource_class("orphan", {"classRef": "deleted"}))  # its target was deleted since
    response = await api.post(CLASSES, json=resource_class("uses", {"classRef": "orphan"}))
    assert refused(response) == (
        422,
        [
            (
                "spec.resourceSelector[0].classRef",
                "class 'orphan' is refused: spec.resourceSelector[0].classRef: class 'deleted' (referenced by "
                "'orphan') does not exist",
            )
        ],
    )


async def test_creating_a_taken_name_is_a_conflict_not_a_reference_check(api: httpx2.AsyncClient) -> None:
    await api.post(CLASSES, json=resource_class("gpu", GPU))
    again = await api.post(CLASSES, json=resource_class("gpu", {"classRef": "nowhere"}))
    assert again.status_code == 409
    assert again.json()["reason"] == "AlreadyExists"


async def test_an_update_that_changes_the_spec_is_refused_and_writes_nothing(api: httpx2.AsyncClient) -> None:
    created = (await api.post(CLASSES, json=resource_class("gpu", GPU))).json()
    changed = {**created, "spec": {**created["spec"], "selectionStrategy": "spread"}}
    response = await api.put(f"{CLASSES}/gpu", json=changed)
    assert refused(response) == (422, [("spec", "field is immutable")])
    stored = (await api.get(f"{CLASSES}/gpu")).json()
    assert stored == created


async def test_an_update_of_status_and_labels_with_the_same_spec_is_accepted(api: httpx2.AsyncClient) -> None:
    created = (await api.post(CLASSES, json=resource_class("gpu", GPU))).json()
    meta = {**created["metadata"], "labels": {"tier": "fast"}}
    updated = {**created, "metadata": meta, "status": {"allocatable": "4", "requested": "1"}}
    response = await api.put(f"{CLASSES}/gpu", json=updated)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == {"allocatable": "4", "requested": "1"}


class CountedReads(DelegatingStore):
    """The store, with every `get` it is asked for written down."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.reads: list[tuple[str, str]] = []

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        self.reads.append((kind, name))
        return await super().get(kind, name, namespace)


async def test_an_update_and_a_patch_are_admitted_against_the_one_read_of_what_they_replace(
    memory_store: MemoryStore,
) -> None:
    counted = CountedReads(memory_store)
    async with (
        serve_app(create_app(counted, fleet_api=False)) as url,
        httpx2.AsyncClient(base_url=url, timeout=10) as api,
    ):
        created = (await api.post(CLASSES, json=resource_class("gpu", GPU))).json()
        counted.reads.clear()
        labelled = {**created, "metadata": {**created["metadata"], "labels": {"tier": "fast"}}}
        assert (await api.put(f"{CLASSES}/gpu", json=labelled)).status_code == 200
        assert counted.reads == [("ResourceClass", "gpu")]
        counted.reads.clear()
        patch = {"spec": {"selectionStrategy": "spread"}}
        headers = {"content-type": "application/merge-patch+json"}
        response = await api.patch(f"{CLASSES}/gpu", content=json.dumps(patch), headers=headers)
        assert refused(response) == (422, [("spec", "field is immutable")])
        assert counted.reads == [("ResourceClass", "gpu")]
        assert (await api.get(f"{CLASSES}/gpu")).json()["metadata"]["labels"] == {"tier": "fast"}


def test_specs_that_differ_only_in_spelling_are_the_same_spec() -> None:
    written = resource_class("gpu", {"matchExpressions": [{"key": "Kind", "operator": "Exists"}]})
    spelled = resource_class("gpu", {"matchExpressions": [{"key": "Kind", "operator": "Exists", "values": []}]})
    admission.admit_update(written, spelled)  # no change: accepted
    with pytest.raises(errors.Invalid, match=r"^spec: field is immutable$"):
        admission.admit_update(written, resource_class("gpu", {"classRef": "other"}))


def test_other_kinds_may_change_their_spec() -> None:
    old = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
    admission.admit_update(old, {**old, "spec": {"containers": [{"name": "c"}]}})


@pytest.mark.parametrize(
    "spec",
    [
        {"resourceSelector": [GPU]},
        {"resourceSelector": [{"classRef": "a"}], "selectionStrategy": "optimal"},
        {"resourceSelector": [{"classRef": "a", "matchExpressions": GPU["matchExpressions"]}]},
        {"resourceSelector": [{"matchExpressions": [{"key": "m", "operator": "Gt", "values": ["1", "2"]}]}]},
        {"resourceSelector": [{"matchExpressions": [{"key": "m", "operator": "Exists", "values": ["1"]}]}]},
        {"resourceSelector": [{"matchExpressions": [{"key": "m", "operator": "Lt", "values": ["fast"]}]}]},
        {"resourceSelector": [{"matchExpressions": [{"key": "m", "operator": "Near", "values": ["1"]}]}]},
        {"resourceSelector": [{"classRef": "Upper"}]},
        {"resourceSelector": [], "selectionStrategy": "random"},
    ],
)
def test_the_api_model_and_the_scheduler_refuse_the_same_spec_at_the_same_field(spec: dict[str, Any]) -> None:
    def api_fields() -> list[str]:
        try:
            normalize(resource_class("c", **spec))
        except errors.Invalid as e:
            return [f.path for f in e.fields]
        return []

    def scheduler_fields() -> list[str]:
        try:
            ClassSpec.from_wire("c", spec)
        except errors.Invalid as e:
            return [f.path for f in e.fields]
        return []

    assert api_fields() == scheduler_fields()
