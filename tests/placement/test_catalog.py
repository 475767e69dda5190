"""The fleet catalog: EMCO's hierarchy in the store, CAS writes, and "refuse while children exist" without races."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from devplace import errors
from devplace.api import _names as names
from devplace.clocks import SystemClock
from devplace.placement import _levels as levels
from devplace.placement._catalog import PENDING_ANNOTATION, Catalog, dig_state
from devplace.placement._kinds import DIG_LABEL, PARENT_LABEL
from devplace.store import MemoryStore, Store, cas
from devplace.store._base import ObjectList

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
    steps: list[tuple[levels.Level, tuple[str, ...], dict[str, Any]]] = [
        (levels.PROJECT, (), meta("my-proj1")),
        (levels.COMPOSITE_APP, P, {**meta("my-capp1"), "spec": {"compositeAppVersion": "v1.0"}}),
        (levels.DEPLOYMENT_INTENT_GROUP, CA, meta("my-dig1")),
        (levels.HPA_INTENT, DIG, {**meta("fwall-hpa-intent"), "spec": {"app": "fwall"}}),
        (levels.HPA_CONSUMER, INTENT, consumer_body()),
    ]
    for level, parent, body in steps[:depth]:
        await catalog.create(level, parent, body)


@pytest.fixture
def catalog(any_store: Store) -> Catalog:
    return Catalog(any_store, clock=SystemClock())


async def test_objects_come_back_exactly_as_they_were_sent(catalog: Catalog) -> None:
    await build(catalog, 4)
    body = {
        "metadata": {"name": "fwall-hpa-intent", "description": "d", "userData1": "foo", "userData2": "bar"},
        "spec": {"appName": "fwall"},  # EMCO's other spelling
    }
    await catalog.create(levels.HPA_INTENT, DIG, {**body, "metadata": {**body["metadata"], "name": "second"}})
    assert await catalog.get(levels.HPA_INTENT, (*DIG, "second")) == {
        "metadata": {"name": "second", "description": "d", "userData1": "foo", "userData2": "bar"},
        "spec": {"appName": "fwall"},
    }
    assert await catalog.get(levels.PROJECT, P) == {"metadata": {"name": "my-proj1"}}  # no defaults added
    listed = await catalog.list_bodies(levels.HPA_INTENT, DIG)
    assert [b["metadata"]["name"] for b in listed] == ["fwall-hpa-intent", "second"]
    assert [b["metadata"]["name"] for b in await catalog.list_bodies(levels.PROJECT, ())] == ["my-proj1"]


async def test_store_names_are_dns1123_hashes_of_the_full_path(catalog: Catalog) -> None:
    await build(catalog, 5)
    await catalog.create(levels.HPA_REQUIREMENT, CONSUMER, cpu("core-fwall-RAM_needs"))
    name = levels.HPA_REQUIREMENT.store_name((*CONSUMER, "core-fwall-RAM_needs"))
    assert names.dns1123_label_problem(name) is None
    assert name.startswith("core-fwall-ram-needs-")
    stored = await catalog.store.get("HpaResourceRequirement", name)
    assert stored["metadata"]["labels"] == {
        PARENT_LABEL: levels.HPA_CONSUMER.store_name(CONSUMER),
        DIG_LABEL: levels.DEPLOYMENT_INTENT_GROUP.store_name(DIG),
    }
    assert stored["spec"]["path"] == [*CONSUMER, "core-fwall-RAM_needs"]
    # names differing only in case are different objects
    await catalog.create(
        levels.HPA_REQUIREMENT, CONSUMER, {**meta("core-fwall-ram_needs"), "spec": {"name": "zone", "value": "a"}}
    )
    assert len(await catalog.list_bodies(levels.HPA_REQUIREMENT, CONSUMER)) == 2


@pytest.mark.parametrize(
    ("level", "parent", "missing"),
    [
        (levels.COMPOSITE_APP, P, 'project "my-proj1" not found'),
        (levels.DEPLOYMENT_INTENT_GROUP, CA, 'project "my-proj1" not found'),
        (levels.HPA_INTENT, DIG, 'project "my-proj1" not found'),
    ],
)
async def test_a_missing_ancestor_is_named(
    catalog: Catalog, level: levels.Level, parent: tuple[str, ...], missing: str
) -> None:
    with pytest.raises(errors.NotFound, match=missing):
        await catalog.list_bodies(level, parent)


async def test_each_missing_level_is_reported_as_itself(catalog: Catalog) -> None:
    await build(catalog, 2)
    with pytest.raises(errors.NotFound, match='deployment intent group "my-dig1" not found'):
        await catalog.create(levels.HPA_INTENT, DIG, {**meta("i"), "spec": {"app": "a"}})
    with pytest.raises(errors.NotFound, match='composite app "my-capp1" version "v2" not found'):
        await catalog.get(levels.APP, ("my-proj1", "my-capp1", "v2", "fwall"))
    with pytest.raises(errors.NotFound, match='app "fwall" not found'):
        await catalog.get(levels.APP, (*CA, "fwall"))


async def test_duplicates_are_refused(catalog: Catalog) -> None:
    await build(catalog, 1)
    with pytest.raises(errors.AlreadyExists, match=r"^Project already exists$"):  # EMCO's text
        await catalog.create(levels.PROJECT, (), meta("my-proj1"))


async def test_delete_and_put_are_refused_while_children_exist(catalog: Catalog) -> None:
    await build(catalog, 5)
    with pytest.raises(
        errors.Refused,
        match=r"hpa intent \"fwall-hpa-intent\" cannot be deleted while it has hpa resource consumers \('core-fwall'\)",
    ):
        await catalog.delete(levels.HPA_INTENT, INTENT)
    with pytest.raises(errors.Refused, match=r"cannot be updated while it has hpa resource consumers"):
        await catalog.put(levels.HPA_INTENT, INTENT, {**meta("fwall-hpa-intent"), "spec": {"app": "other"}})
    await catalog.delete(levels.HPA_CONSUMER, CONSUMER)
    body, created = await catalog.put(levels.HPA_INTENT, INTENT, {**meta("fwall-hpa-intent"), "spec": {"app": "other"}})
    assert (body["spec"], created) == ({"app": "other"}, False)
    await catalog.delete(levels.HPA_INTENT, INTENT)
    with pytest.raises(errors.NotFound, match='hpa intent "fwall-hpa-intent" not found'):
        await catalog.delete(levels.HPA_INTENT, INTENT)


async def test_put_creates_when_absent_and_checks_the_url(catalog: Catalog) -> None:
    await build(catalog, 1)
    _, created = await catalog.put(
        levels.COMPOSITE_APP, CA, {**meta("my-capp1"), "spec": {"compositeAppVersion": "v1.0"}}
    )
    assert created
    with pytest.raises(errors.Invalid, match=r"metadata.name: must match the URL"):
        await catalog.put(levels.PROJECT, P, meta("other"))
    with pytest.raises(errors.Invalid, match=r"spec.compositeAppVersion: must match the URL"):
        await catalog.put(levels.COMPOSITE_APP, CA, {**meta("my-capp1"), "spec": {"compositeAppVersion": "v2"}})


async def test_an_allocatable_requirement_needs_the_consumers_container(catalog: Catalog) -> None:
    await build(catalog, 4)
    await catalog.create(levels.HPA_CONSUMER, INTENT, consumer_body("labels-only", container=None))
    labels_only = (*INTENT, "labels-only")
    label = {**meta("turbo"), "spec": {"allocatable": False, "name": "turbo", "value": "true"}}
    await catalog.create(levels.HPA_REQUIREMENT, labels_only, label)  # labels need no container
    with pytest.raises(errors.Invalid, match=r"spec.allocatable: hpa resource consumer 'labels-only' has no container"):
        await catalog.create(levels.HPA_REQUIREMENT, labels_only, cpu())


async def test_one_allocatable_requirement_per_resource(catalog: Catalog) -> None:
    await build(catalog, 5)
    await catalog.create(levels.HPA_REQUIREMENT, CONSUMER, cpu("first"))
    with pytest.raises(
        errors.Invalid, match=r"spec.name: hpa resource consumer 'core-fwall' already has requirement 'first' for cpu"
    ):
        await catalog.create(levels.HPA_REQUIREMENT, CONSUMER, cpu("second"))
    # replacing itself is fine
    await catalog.put(levels.HPA_REQUIREMENT, (*CONSUMER, "first"), cpu("first", requests=2))


async def test_writes_below_a_group_change_its_version(catalog: Catalog) -> None:
    await build(catalog, 5)
    name = levels.DEPLOYMENT_INTENT_GROUP.store_name(DIG)
    before = (await catalog.store.get("DeploymentIntentGroup", name))["metadata"]["resourceVersion"]
    await catalog.create(levels.HPA_REQUIREMENT, CONSUMER, cpu())
    middle = (await catalog.store.get("DeploymentIntentGroup", name))["metadata"]["resourceVersion"]
    await catalog.delete(levels.HPA_REQUIREMENT, (*CONSUMER, "core-fwall-cpu"))
    after = (await catalog.store.get("DeploymentIntentGroup", name))["metadata"]["resourceVersion"]
    assert int(before) < int(middle) < int(after)


async def test_an_instantiated_group_cannot_be_deleted(catalog: Catalog) -> None:
    await build(catalog, 3)
    dig = await catalog.read(levels.DEPLOYMENT_INTENT_GROUP, DIG)
    assert dig_state(dig) == "Created"
    instantiated = {"state": "Instantiated", "apps": [], "errors": []}
    await cas(
        catalog.store, "DeploymentIntentGroup", dig["metadata"]["name"], "", lambda d: {**d, "status": instantiated}
    )
    with pytest.raises(errors.Refused, match=r"is instantiated; terminate it before deleting it"):
        await catalog.delete(levels.DEPLOYMENT_INTENT_GROUP, DIG)
    kept = await catalog.read(levels.DEPLOYMENT_INTENT_GROUP, DIG)
    await catalog.put(levels.DEPLOYMENT_INTENT_GROUP, DIG, {**meta("my-dig1"), "spec": {"version": "r2"}})
    assert (await catalog.read(levels.DEPLOYMENT_INTENT_GROUP, DIG))["status"] == kept[
        "status"
    ]  # PUT keeps the decision


async def test_bad_bodies_change_nothing(catalog: Catalog) -> None:
    await build(catalog, 5)
    bad = {"metadata": {"name": "x"}, "spec": {"name": "cpu", "requests": 4, "limits": 2}}
    with pytest.raises(errors.Invalid, match=r"spec.requests: requests 4 exceed limits 2"):
        await catalog.create(levels.HPA_REQUIREMENT, CONSUMER, bad)
    assert await catalog.list_bodies(levels.HPA_REQUIREMENT, CONSUMER) == []


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
        await catalog.create(levels.PROJECT, (), meta(project))

        async def add_child(i: int, project: str = project) -> None:
            body = {**meta(f"c{i}"), "spec": {"compositeAppVersion": "v1"}}
            try:
                await catalog.create(levels.COMPOSITE_APP, (project,), body)
            except errors.NotFound as e:
                outcomes.add("child lost" if "was being created" in e.message else "parent gone")

        async def remove(project: str = project) -> None:
            try:
                await catalog.delete(levels.PROJECT, (project,))
                outcomes.add("parent deleted")
            except errors.Refused:
                outcomes.add("parent refused")
            except errors.Conflict:  # a child was written between the listing and the delete: the client retries
                outcomes.add("parent raced")

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
            project = levels.PROJECT.store_name(P)
            await super().delete(
                "Project", project, resource_version=(await self.get("Project", project))["metadata"]["resourceVersion"]
            )
        return stored


async def test_a_child_whose_parent_vanished_is_removed_even_if_it_was_rewritten_meanwhile() -> None:
    store = ParentVanishes()
    catalog = Catalog(store, clock=SystemClock())
    await build(catalog, 1)
    with pytest.raises(errors.NotFound, match=r'project "my-proj1" not found \(deleted while composite app'):
        await catalog.create(levels.COMPOSITE_APP, P, {**meta("my-capp1"), "spec": {"compositeAppVersion": "v1.0"}})
    assert (await store.list("CompositeApp", "")).items == []


def before(name: str) -> dict[str, Any]:
    """What a racing PUT replaces: an allocatable requirement for a resource of its own."""
    return {**meta(name), "spec": {"name": f"example.com/{name}", "requests": 1}}


async def _race_for_cpu(seed: int, *writes: tuple[str, str]) -> tuple[list[BaseException | None], dict[str, str]]:
    """Race writes of allocatable `cpu` requirements on one consumer: ("post", name) or ("put", name), where a PUT
    turns an existing requirement of that name (`before`) into `cpu`. Returns each write's error (or None) and the
    resource of each requirement left, by name."""
    store = Interleaving(seed)
    catalog = Catalog(store, clock=SystemClock())
    await build(catalog, 5)
    for verb, name in writes:
        if verb == "put":
            await catalog.create(levels.HPA_REQUIREMENT, CONSUMER, before(name))

    async def write(verb: str, name: str) -> None:
        if verb == "post":
            await catalog.create(levels.HPA_REQUIREMENT, CONSUMER, cpu(name))
        else:
            await catalog.put(levels.HPA_REQUIREMENT, (*CONSUMER, name), cpu(name))

    results = await asyncio.gather(*(write(v, n) for v, n in writes), return_exceptions=True)
    assert all(not isinstance(r, BaseException) or isinstance(r, errors.DevplaceError) for r in results), results
    stored = (await store.list("HpaResourceRequirement", "")).items
    assert not [o for o in stored if PENDING_ANNOTATION in (o["metadata"].get("annotations") or {})], "left pending"
    left = {
        b["metadata"]["name"]: b["spec"]["name"] for b in await catalog.list_bodies(levels.HPA_REQUIREMENT, CONSUMER)
    }
    return [r if isinstance(r, BaseException) else None for r in results], left


@pytest.mark.parametrize("verbs", [("post", "post"), ("put", "post"), ("post", "put"), ("put", "put")])
async def test_concurrent_writes_keep_one_allocatable_requirement_per_resource(verbs: tuple[str, str]) -> None:
    raced = 0
    for seed in range(100):
        # both name orders: the later-sorting write may be the first or the second to reach the store
        names_ = ("a-cpu", "b-cpu") if seed % 2 else ("b-cpu", "a-cpu")
        failures, left = await _race_for_cpu(seed, *zip(verbs, names_, strict=True))
        holders = [name for name, resource in left.items() if resource == "cpu"]
        assert len(holders) == 1, f"seed {seed}: cpu requirements left: {holders}"
        failed = [(verb, name, e) for verb, name, e in zip(verbs, names_, failures, strict=True) if e is not None]
        assert len(failed) == 1, f"seed {seed}: failures {failures}"
        [(verb, loser, error)] = failed
        assert holders != [loser]
        # a failed POST leaves nothing, a failed PUT leaves the body it tried to replace
        assert left.get(loser) == (f"example.com/{loser}" if verb == "put" else None), f"seed {seed}: {left}"
        duplicate = f"hpa resource consumer 'core-fwall' already has requirement {holders[0]!r} for cpu"
        if isinstance(error, errors.Refused):  # both passed the pre-check: the post-write check decided
            raced += 1
        else:  # the pre-check saw the other one (the sequential case)
            assert isinstance(error, errors.Invalid), error
        assert duplicate in error.message, error.message
    assert raced >= 10, f"only {raced} of 100 rounds raced past the pre-check"


class LateCreate(MemoryStore):
    """Holds the create of one object until told: its writer passed the pre-check long before it reaches the store."""

    def __init__(self, held: str) -> None:
        super().__init__()
        self.held = held
        self.release = asyncio.Event()

    async def create(self, obj: Any) -> dict[str, Any]:
        if obj["spec"].get("path", [])[-1:] == [self.held]:
            await self.release.wait()
        return await super().create(obj)


async def test_a_confirmed_requirement_wins_over_an_earlier_name_that_arrives_late() -> None:
    """The later-sorting write never saw the earlier one and was answered 201: the earlier one must yield to it."""
    store = LateCreate(held="a-cpu")
    catalog = Catalog(store, clock=SystemClock())
    await build(catalog, 5)

    async def second() -> None:
        await asyncio.sleep(0)  # let "a-cpu" pass the pre-check and wait at the store
        await catalog.create(levels.HPA_REQUIREMENT, CONSUMER, cpu("b-cpu"))
        store.release.set()

    first = catalog.create(levels.HPA_REQUIREMENT, CONSUMER, cpu("a-cpu"))
    results = await asyncio.gather(first, second(), return_exceptions=True)
    assert isinstance(results[0], errors.Refused), results
    assert results[0].message == (
        "resource requirement \"a-cpu\" refused: hpa resource consumer 'core-fwall' already has requirement "
        "'b-cpu' for cpu (written concurrently)"
    )
    assert results[1] is None
    assert [b["metadata"]["name"] for b in await catalog.list_bodies(levels.HPA_REQUIREMENT, CONSUMER)] == ["b-cpu"]
