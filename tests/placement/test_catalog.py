"""The fleet catalog: EMCO's hierarchy in the store, CAS writes, and "refuse while children exist" without races."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from devplace import errors
from devplace.api import fleet, names
from devplace.clocks import SystemClock
from devplace.placement.catalog import Catalog, dig_state
from devplace.store import MemoryStore, Store
from devplace.store.base import ObjectList

P = ("my-proj1",)
CA = ("my-proj1", "my-capp1", "v1.0")
DIG = (*CA, "my-dig1")
INTENT = (*DIG, "fwall-hpa-intent")
CONSUMER = (*INTENT, "core-fwall")


def meta(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


def consumer_body(name: str = "core-fwall", container: str | None = "palo-alto-e3000") -> dict[str, Any]:
    ref: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "core-fwall"}
    if container:
        ref["container-name"] = container
    return {"metadata": {"name": name}, "spec": {"consumer": ref}}


def cpu(name: str = "core-fwall-cpu", requests: int = 4) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"allocatable": True, "name": "cpu", "requests": requests}}


async def build(catalog: Catalog, depth: int = 5) -> None:
    """project / composite app / deployment intent group / hpa intent / consumer, as deep as asked."""
    steps: list[tuple[fleet.Level, tuple[str, ...], dict[str, Any]]] = [
        (fleet.PROJECT, (), meta("my-proj1")),
        (fleet.COMPOSITE_APP, P, {**meta("my-capp1"), "spec": {"compositeAppVersion": "v1.0"}}),
        (fleet.DEPLOYMENT_INTENT_GROUP, CA, meta("my-dig1")),
        (fleet.HPA_INTENT, DIG, {**meta("fwall-hpa-intent"), "spec": {"app": "fwall"}}),
        (fleet.HPA_CONSUMER, INTENT, consumer_body()),
    ]
    for level, parent, body in steps[:depth]:
        await catalog.create(level, parent, body)


@pytest.fixture
def catalog(any_store: Store) -> Catalog:
    return Catalog(any_store, clock=SystemClock())


async def test_objects_round_trip_as_emco_bodies(catalog: Catalog) -> None:
    await build(catalog, 4)
    body = {
        "metadata": {"name": "fwall-hpa-intent", "description": "d", "userData1": "foo", "userData2": "bar"},
        "spec": {"appName": "fwall"},  # EMCO's other spelling
    }
    await catalog.create(fleet.HPA_INTENT, DIG, {**body, "metadata": {**body["metadata"], "name": "second"}})
    assert await catalog.get(fleet.HPA_INTENT, (*DIG, "second")) == {
        "metadata": {"name": "second", "description": "d", "userData1": "foo", "userData2": "bar"},
        "spec": {"app": "fwall"},
    }
    listed = await catalog.list_bodies(fleet.HPA_INTENT, DIG)
    assert [b["metadata"]["name"] for b in listed] == ["fwall-hpa-intent", "second"]
    assert [b["metadata"]["name"] for b in await catalog.list_bodies(fleet.PROJECT, ())] == ["my-proj1"]


async def test_store_names_are_dns1123_hashes_of_the_full_path(catalog: Catalog) -> None:
    await build(catalog, 5)
    await catalog.create(fleet.HPA_REQUIREMENT, CONSUMER, cpu("core-fwall-RAM_needs"))
    name = fleet.HPA_REQUIREMENT.store_name((*CONSUMER, "core-fwall-RAM_needs"))
    assert names.dns1123_label_problem(name) is None
    assert name.startswith("core-fwall-ram-needs-")
    stored = await catalog.store.get("HpaResourceRequirement", name)
    assert stored["metadata"]["labels"] == {
        fleet.PARENT_LABEL: fleet.HPA_CONSUMER.store_name(CONSUMER),
        fleet.DIG_LABEL: fleet.DEPLOYMENT_INTENT_GROUP.store_name(DIG),
    }
    assert stored["spec"]["path"] == [*CONSUMER, "core-fwall-RAM_needs"]
    # names differing only in case are different objects
    await catalog.create(
        fleet.HPA_REQUIREMENT, CONSUMER, {**meta("core-fwall-ram_needs"), "spec": {"name": "zone", "value": "a"}}
    )
    assert len(await catalog.list_bodies(fleet.HPA_REQUIREMENT, CONSUMER)) == 2


@pytest.mark.parametrize(
    ("level", "parent", "missing"),
    [
        (fleet.COMPOSITE_APP, P, 'project "my-proj1" not found'),
        (fleet.DEPLOYMENT_INTENT_GROUP, CA, 'project "my-proj1" not found'),
        (fleet.HPA_INTENT, DIG, 'project "my-proj1" not found'),
    ],
)
async def test_a_missing_ancestor_is_named(
    catalog: Catalog, level: fleet.Level, parent: tuple[str, ...], missing: str
) -> None:
    with pytest.raises(errors.NotFound, match=missing):
        await catalog.list_bodies(level, parent)


async def test_each_missing_level_is_reported_as_itself(catalog: Catalog) -> None:
    await build(catalog, 2)
    with pytest.raises(errors.NotFound, match='deployment intent group "my-dig1" not found'):
        await catalog.create(fleet.HPA_INTENT, DIG, {**meta("i"), "spec": {"app": "a"}})
    with pytest.raises(errors.NotFound, match='composite app "my-capp1" version "v2" not found'):
        await catalog.get(fleet.APP, ("my-proj1", "my-capp1", "v2", "fwall"))
    with pytest.raises(errors.NotFound, match='app "fwall" not found'):
        await catalog.get(fleet.APP, (*CA, "fwall"))


async def test_duplicates_are_refused(catalog: Catalog) -> None:
    await build(catalog, 1)
    with pytest.raises(errors.AlreadyExists, match='project "my-proj1" already exists'):
        await catalog.create(fleet.PROJECT, (), meta("my-proj1"))


async def test_delete_and_put_are_refused_while_children_exist(catalog: Catalog) -> None:
    await build(catalog, 5)
    with pytest.raises(
        errors.Refused,
        match=r"hpa intent \"fwall-hpa-intent\" cannot be deleted while it has hpa resource consumers \('core-fwall'\)",
    ):
        await catalog.delete(fleet.HPA_INTENT, INTENT)
    with pytest.raises(errors.Refused, match=r"cannot be updated while it has hpa resource consumers"):
        await catalog.put(fleet.HPA_INTENT, INTENT, {**meta("fwall-hpa-intent"), "spec": {"app": "other"}})
    await catalog.delete(fleet.HPA_CONSUMER, CONSUMER)
    body, created = await catalog.put(fleet.HPA_INTENT, INTENT, {**meta("fwall-hpa-intent"), "spec": {"app": "other"}})
    assert (body["spec"], created) == ({"app": "other"}, False)
    await catalog.delete(fleet.HPA_INTENT, INTENT)
    with pytest.raises(errors.NotFound, match='hpa intent "fwall-hpa-intent" not found'):
        await catalog.delete(fleet.HPA_INTENT, INTENT)


async def test_put_creates_when_absent_and_checks_the_url(catalog: Catalog) -> None:
    await build(catalog, 1)
    _, created = await catalog.put(
        fleet.COMPOSITE_APP, CA, {**meta("my-capp1"), "spec": {"compositeAppVersion": "v1.0"}}
    )
    assert created
    with pytest.raises(errors.Invalid, match=r"metadata.name: must match the URL"):
        await catalog.put(fleet.PROJECT, P, meta("other"))
    with pytest.raises(errors.Invalid, match=r"spec.compositeAppVersion: must match the URL"):
        await catalog.put(fleet.COMPOSITE_APP, CA, {**meta("my-capp1"), "spec": {"compositeAppVersion": "v2"}})


async def test_an_allocatable_requirement_needs_the_consumers_container(catalog: Catalog) -> None:
    await build(catalog, 4)
    await catalog.create(fleet.HPA_CONSUMER, INTENT, consumer_body("labels-only", container=None))
    labels_only = (*INTENT, "labels-only")
    label = {**meta("turbo"), "spec": {"allocatable": False, "name": "turbo", "value": "true"}}
    await catalog.create(fleet.HPA_REQUIREMENT, labels_only, label)  # labels need no container
    with pytest.raises(
        errors.Invalid, match=r"spec.allocatable: hpa resource consumer 'labels-only' has no container-name"
    ):
        await catalog.create(fleet.HPA_REQUIREMENT, labels_only, cpu())


async def test_one_allocatable_requirement_per_resource(catalog: Catalog) -> None:
    await build(catalog, 5)
    await catalog.create(fleet.HPA_REQUIREMENT, CONSUMER, cpu("first"))
    with pytest.raises(
        errors.Invalid, match=r"spec.name: hpa resource consumer 'core-fwall' already has requirement 'first' for cpu"
    ):
        await catalog.create(fleet.HPA_REQUIREMENT, CONSUMER, cpu("second"))
    await catalog.put(fleet.HPA_REQUIREMENT, (*CONSUMER, "first"), cpu("first", requests=2))  # replacing itself is fine


async def test_writes_below_a_group_change_its_version(catalog: Catalog) -> None:
    await build(catalog, 5)
    name = fleet.DEPLOYMENT_INTENT_GROUP.store_name(DIG)
    before = (await catalog.store.get("DeploymentIntentGroup", name))["metadata"]["resourceVersion"]
    await catalog.create(fleet.HPA_REQUIREMENT, CONSUMER, cpu())
    middle = (await catalog.store.get("DeploymentIntentGroup", name))["metadata"]["resourceVersion"]
    await catalog.delete(fleet.HPA_REQUIREMENT, (*CONSUMER, "core-fwall-cpu"))
    after = (await catalog.store.get("DeploymentIntentGroup", name))["metadata"]["resourceVersion"]
    assert int(before) < int(middle) < int(after)


async def test_an_instantiated_group_cannot_be_deleted(catalog: Catalog) -> None:
    await build(catalog, 3)
    dig = await catalog.read(fleet.DEPLOYMENT_INTENT_GROUP, DIG)
    assert dig_state(dig) == "Created"
    await catalog.write_status(dig, {"state": "Instantiated", "apps": [], "errors": []})
    with pytest.raises(errors.Refused, match=r"is instantiated; terminate it before deleting it"):
        await catalog.delete(fleet.DEPLOYMENT_INTENT_GROUP, DIG)
    kept = await catalog.read(fleet.DEPLOYMENT_INTENT_GROUP, DIG)
    await catalog.put(fleet.DEPLOYMENT_INTENT_GROUP, DIG, {**meta("my-dig1"), "spec": {"version": "r2"}})
    assert (await catalog.read(fleet.DEPLOYMENT_INTENT_GROUP, DIG))["status"] == kept[
        "status"
    ]  # PUT keeps the decision


async def test_status_writes_are_compare_and_swap(catalog: Catalog) -> None:
    await build(catalog, 3)
    dig = await catalog.read(fleet.DEPLOYMENT_INTENT_GROUP, DIG)
    await catalog.create(fleet.HPA_INTENT, DIG, {**meta("late"), "spec": {"app": "x"}})
    with pytest.raises(errors.Conflict):
        await catalog.write_status(dig, {"state": "Instantiated"})


async def test_bad_bodies_change_nothing(catalog: Catalog) -> None:
    await build(catalog, 5)
    bad = {"metadata": {"name": "x"}, "spec": {"name": "cpu", "requests": 4, "limits": 2}}
    with pytest.raises(errors.Invalid, match=r"spec.requests: requests 4 exceed limits 2"):
        await catalog.create(fleet.HPA_REQUIREMENT, CONSUMER, bad)
    assert await catalog.list_bodies(fleet.HPA_REQUIREMENT, CONSUMER) == []


class Interleaving(MemoryStore):
    """A memory store that lets other tasks run before and after every call (a bare MemoryStore never suspends, so
    tasks gathered over it would simply run one after another and no race could happen)."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.rng = random.Random(seed)

    async def _yield(self) -> None:
        for _ in range(self.rng.randrange(3)):
            await asyncio.sleep(0)

    async def create(self, obj: Any) -> dict[str, Any]:
        await self._yield()
        try:
            return await super().create(obj)
        finally:
            await self._yield()

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        await self._yield()
        return await super().get(kind, name, namespace)

    async def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> ObjectList:
        await self._yield()
        return await super().list(kind, namespace, selector)

    async def update(self, obj: Any) -> dict[str, Any]:
        await self._yield()
        try:
            return await super().update(obj)
        finally:
            await self._yield()

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        await self._yield()
        try:
            return await super().delete(kind, name, namespace, resource_version=resource_version)
        finally:
            await self._yield()


async def test_a_child_never_outlives_a_concurrently_deleted_parent() -> None:
    store = Interleaving(seed=4)
    catalog = Catalog(store, clock=SystemClock())
    outcomes: set[str] = set()
    for round_ in range(30):
        project = f"p{round_}"
        await catalog.create(fleet.PROJECT, (), meta(project))

        async def add_child(i: int, project: str = project) -> None:
            body = {**meta(f"c{i}"), "spec": {"compositeAppVersion": "v1"}}
            try:
                await catalog.create(fleet.COMPOSITE_APP, (project,), body)
            except errors.NotFound as e:
                outcomes.add("child lost" if "was being created" in e.message else "parent gone")

        async def remove(project: str = project) -> None:
            try:
                await catalog.delete(fleet.PROJECT, (project,))
                outcomes.add("parent deleted")
            except errors.Refused:
                outcomes.add("parent refused")

        await asyncio.gather(add_child(0), remove(), add_child(1), add_child(2))
        children = (await store.list("CompositeApp", "")).items
        mine = [c for c in children if c["spec"]["path"][0] == project]
        parent_exists = bool([p for p in (await store.list("Project", "")).items if p["spec"]["path"] == [project]])
        assert parent_exists or not mine, f"round {round_}: orphans {[c['spec']['path'] for c in mine]}"
    # the interleavings this test is about did happen: the parent won some races and lost others
    assert outcomes >= {"child lost", "parent deleted", "parent refused"}, outcomes


class ParentVanishes(MemoryStore):
    """Right after the child is stored, someone rewrites it (new resourceVersion) and the parent is deleted."""

    async def create(self, obj: Any) -> dict[str, Any]:
        stored = await super().create(obj)
        if obj["kind"] == "CompositeApp":
            rewritten = await super().update({**stored, "metadata": {**stored["metadata"], "annotations": {"x": "1"}}})
            assert rewritten["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]
            project = fleet.PROJECT.store_name(P)
            await super().delete(
                "Project", project, resource_version=(await self.get("Project", project))["metadata"]["resourceVersion"]
            )
        return stored


async def test_a_child_whose_parent_vanished_is_removed_even_if_it_was_rewritten_meanwhile() -> None:
    store = ParentVanishes()
    catalog = Catalog(store, clock=SystemClock())
    await build(catalog, 1)
    with pytest.raises(errors.NotFound, match=r'project "my-proj1" not found \(deleted while composite app'):
        await catalog.create(fleet.COMPOSITE_APP, P, {**meta("my-capp1"), "spec": {"compositeAppVersion": "v1.0"}})
    assert (await store.list("CompositeApp", "")).items == []
