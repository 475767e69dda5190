"""The Store contract (devplace.store._base), run against every backend in conftest.BACKENDS.

Each test states one promise of the protocol's docstring. Watch tests never wait for "nothing to happen": to show an
event is filtered out they write a matching sentinel afterwards and check that the sentinel is the next event.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from devplace import errors
from devplace.api import _selectors as selectors
from devplace.clocks import FakeClock
from devplace.store import EncodedPage, Event, Store, cas
from devplace.store._base import MAX_OBJECT_BYTES
from tests.store.conftest import BACKENDS, MODEL_EXAMPLES, BackendFactory
from tests.store.samples import WATCH_BOUND, configmap, node, pod, rv, summary, take

# -- create / get / list -------------------------------------------------------------------------------------


async def test_create_stamps_server_owned_metadata_and_get_returns_it(store: Store) -> None:
    created = await store.create(configmap("a", x="1"))
    meta = created["metadata"]
    assert meta["resourceVersion"] == str(await store.revision())
    assert meta["generation"] == 1
    assert meta["uid"]
    assert meta["creationTimestamp"] == "2026-01-01T00:00:00Z"
    assert created["data"] == {"x": "1"}
    assert await store.get("ConfigMap", "a", "default") == created


async def test_create_ignores_caller_supplied_resource_version_uid_and_generation(store: Store) -> None:
    obj = configmap("a")
    obj["metadata"].update(resourceVersion="42", uid="forged", generation=7, creationTimestamp="1999-01-01T00:00:00Z")
    created = await store.create(obj)
    assert created["metadata"]["resourceVersion"] == "1"
    assert created["metadata"]["uid"] != "forged"
    assert created["metadata"]["generation"] == 1
    assert created["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"


async def test_every_object_gets_its_own_uid(store: Store) -> None:
    a = await store.create(configmap("a"))
    b = await store.create(configmap("b"))
    assert a["metadata"]["uid"] != b["metadata"]["uid"]


async def test_cluster_scoped_objects_live_in_namespace_empty_and_carry_no_namespace(store: Store) -> None:
    created = await store.create(node("n1"))
    assert "namespace" not in created["metadata"]
    assert await store.get("Node", "n1") == created
    assert await store.get("Node", "n1", "") == created
    blank = node("n2")
    blank["metadata"]["namespace"] = ""
    assert "namespace" not in (await store.create(blank))["metadata"]


def _dra_objects() -> list[dict[str, Any]]:
    """One published manifest of each DRA kind (tests/fixtures/dra/manifests.yaml), namespaced ones in `default`."""
    from tests.api.test_dra import MANIFESTS

    found: dict[str, dict[str, Any]] = {}
    for manifest in MANIFESTS:
        if manifest["kind"] == "Pod" or manifest["kind"] in found:
            continue
        obj = copy.deepcopy(manifest)
        if obj["kind"] in ("ResourceClaim", "ResourceClaimTemplate"):
            obj["metadata"]["namespace"] = "default"
        found[obj["kind"]] = obj
    return list(found.values())


@pytest.mark.parametrize("obj", _dra_objects(), ids=lambda o: str(o["kind"]))
async def test_each_dra_kind_is_stored_listed_and_deleted_at_its_scope(store: Store, obj: dict[str, Any]) -> None:
    kind, name, namespace = obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace", "")
    created = await store.create(obj)
    assert created["spec"] == obj["spec"]
    assert ("namespace" in created["metadata"]) == bool(namespace)
    assert await store.get(kind, name, namespace) == created
    assert [o["metadata"]["name"] for o in (await store.list(kind, None)).items] == [name]
    await store.delete(kind, name, namespace)
    assert (await store.list(kind, None)).items == []


async def test_create_of_an_existing_key_fails_with_already_exists_and_changes_nothing(store: Store) -> None:
    first = await store.create(configmap("a", x="1"))
    with pytest.raises(errors.AlreadyExists):
        await store.create(configmap("a", x="2"))
    assert await store.get("ConfigMap", "a", "default") == first
    assert await store.revision() == rv(first)


async def test_the_same_name_may_exist_in_two_namespaces_and_two_kinds(store: Store) -> None:
    await store.create(configmap("a", "one"))
    await store.create(configmap("a", "two"))
    await store.create(node("a"))
    assert (await store.get("ConfigMap", "a", "one"))["metadata"]["namespace"] == "one"
    assert (await store.get("ConfigMap", "a", "two"))["metadata"]["namespace"] == "two"
    assert (await store.get("Node", "a"))["kind"] == "Node"


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({"metadata": {"name": "a"}}, "kind"),
        ({"kind": "", "metadata": {"name": "a"}}, "kind"),
        ({"kind": "ConfigMap"}, "metadata.name"),
        ({"kind": "ConfigMap", "metadata": {"name": ""}}, "metadata.name"),
        ({"kind": "ConfigMap", "metadata": {"name": "a", "namespace": 3}}, "metadata.namespace"),
    ],
)
async def test_create_without_a_key_is_invalid_naming_the_field(store: Store, obj: dict, field: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        await store.create(obj)
    assert [f.path for f in caught.value.fields] == [field]
    assert await store.revision() == 0


async def test_get_of_a_missing_object_fails_with_not_found(store: Store) -> None:
    await store.create(configmap("a", "one"))
    with pytest.raises(errors.NotFound):
        await store.get("ConfigMap", "a", "two")
    with pytest.raises(errors.NotFound):
        await store.get("Node", "a")


async def test_list_filters_by_kind_and_namespace_and_none_means_every_namespace(store: Store) -> None:
    for ns, name in [("b", "x"), ("a", "y"), ("a", "x"), ("c", "z")]:
        await store.create(configmap(name, ns))
    await store.create(node("x"))

    def keys(listed: Any) -> list[tuple[str, str]]:
        return [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in listed.items]

    assert keys(await store.list("ConfigMap")) == [("a", "x"), ("a", "y"), ("b", "x"), ("c", "z")]
    assert keys(await store.list("ConfigMap", "a")) == [("a", "x"), ("a", "y")]
    assert keys(await store.list("ConfigMap", "nowhere")) == []
    assert [o["metadata"]["name"] for o in (await store.list("Node")).items] == ["x"]
    assert [o["metadata"]["name"] for o in (await store.list("Node", "")).items] == ["x"]
    assert (await store.list("Pod")).items == []


async def test_list_returns_stored_objects_and_the_current_revision(store: Store) -> None:
    a = await store.create(configmap("a"))
    b = await store.create(configmap("b"))
    await store.create(node("n"))
    listed = await store.list("ConfigMap", "default")
    assert listed.items == [a, b]
    assert listed.revision == await store.revision() == 3


LABELLED = {
    "web-gpu": {"app": "web", "tier": "gpu"},
    "web": {"app": "web"},
    "db-cpu": {"app": "db", "tier": "cpu"},
    "bare": {},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["web", "web-gpu"]),
        ("app==web", ["web", "web-gpu"]),
        ("app!=web", ["bare", "db-cpu"]),
        ("tier in (gpu,cpu)", ["db-cpu", "web-gpu"]),
        ("app notin (web)", ["bare", "db-cpu"]),
        ("tier", ["db-cpu", "web-gpu"]),
        ("!tier", ["bare", "web"]),
        ("app=web,tier", ["web-gpu"]),
        ("app=web,!tier", ["web"]),
        ("app=nothing", []),
    ],
)
async def test_list_filters_by_label_selector(store: Store, selector: str, expected: list[str]) -> None:
    for name, labels in LABELLED.items():
        await store.create(configmap(name, labels=labels))
    listed = await store.list("ConfigMap", selector=selector)
    assert sorted(o["metadata"]["name"] for o in listed.items) == expected


async def test_list_with_a_malformed_selector_is_invalid(store: Store) -> None:
    with pytest.raises(errors.Invalid):
        await store.list("ConfigMap", selector="app in (")


PODS = [("web", "default", "node-a"), ("db", "default", "node-b"), ("web", "edge", "node-a"), ("idle", "edge", "")]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ("spec.nodeName=node-a", [("default", "web"), ("edge", "web")]),
        ("spec.nodeName==node-a", [("default", "web"), ("edge", "web")]),
        ("spec.nodeName!=node-a", [("default", "db"), ("edge", "idle")]),
        ("spec.nodeName=", [("edge", "idle")]),  # an absent field reads as "": unbound Pods
        ("metadata.name=web", [("default", "web"), ("edge", "web")]),
        ("metadata.namespace=edge", [("edge", "idle"), ("edge", "web")]),
        ("metadata.namespace=edge,spec.nodeName=node-a", [("edge", "web")]),
        ("metadata.name=web,metadata.name!=web", []),
        ("", [("default", "db"), ("default", "web"), ("edge", "idle"), ("edge", "web")]),
    ],
)
async def test_list_filters_by_field_selector(store: Store, fields: str, expected: list[tuple[str, str]]) -> None:
    for name, namespace, node_name in PODS:
        await store.create(pod(name, namespace, node_name))
    listed = await store.list("Pod", fields=fields)
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in listed.items] == expected


async def test_list_combines_namespace_label_and_field_selectors(store: Store) -> None:
    await store.create(pod("a", "default", "node-a", labels={"app": "web"}))
    b = await store.create(pod("b", "default", "node-a", labels={"app": "db"}))
    await store.create(pod("c", "edge", "node-a", labels={"app": "db"}))
    await store.create(pod("d", "default", "node-b", labels={"app": "db"}))
    listed = await store.list("Pod", "default", "app=db", fields="spec.nodeName=node-a")
    assert listed.items == [b]


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        ("Pod", "spec.hostname=x"),  # a real Pod field, but not one Pods can be selected on
        ("ConfigMap", "spec.nodeName=node-a"),  # a Pod's field label, not a ConfigMap's
        ("Pod", "spec.nodeName"),  # no operator
    ],
)
async def test_a_field_selector_on_an_unsupported_field_is_invalid_naming_field_selector(
    store: Store, kind: str, fields: str
) -> None:
    with pytest.raises(errors.Invalid) as caught:
        await store.list(kind, fields=fields)
    assert [f.path for f in caught.value.fields] == ["fieldSelector"]
    with pytest.raises(errors.Invalid) as caught:
        async with store.watch(kind, fields=fields):
            pytest.fail("entered a watch with an unsupported field selector")
    assert [f.path for f in caught.value.fields] == ["fieldSelector"]


# -- list pages (`list_page`) ---------------------------------------------------------------------------------------

BIG_BOUND = 1 << 20


async def pages(
    store: Store,
    kind: str,
    namespace: str | None = None,
    selector: str | None = None,
    *,
    fields: str | None = None,
    limit: int,
    max_bytes: int,
) -> list[EncodedPage]:
    """Every page of a list, each after the last key the one before examined, until one says none remain."""
    found: list[EncodedPage] = []
    after = None
    for _ in range(200):
        page = await store.list_page(
            kind, namespace, selector, fields=fields, after=after, limit=limit, max_bytes=max_bytes
        )
        found.append(page)
        if not page.remaining:
            return found
        after = page.last
    raise AssertionError("paging did not end")


def decoded(found: list[EncodedPage]) -> list[dict[str, Any]]:
    return [orjson.loads(item.body) for page in found for item in page.items]


async def test_a_list_page_is_the_list_encoded_at_its_revision_in_namespace_then_name_order(store: Store) -> None:
    for ns, name in [("a-b", "x"), ("a", "y"), ("a", "x"), ("b", "z")]:  # etcd's key order puts "a-b/x" before "a/x"
        await store.create(configmap(name, ns, v=name))
    await store.create(node("n"))
    listed = await store.list("ConfigMap")
    page = await store.list_page("ConfigMap", limit=100, max_bytes=BIG_BOUND)
    assert [orjson.loads(item.body) for item in page.items] == listed.items
    assert [(item.namespace, item.name) for item in page.items] == [("a", "x"), ("a", "y"), ("a-b", "x"), ("b", "z")]
    assert (page.revision, page.last, page.remaining) == (listed.revision, ("b", "z"), 0)
    for namespace in ("a", "a-b", "nowhere"):
        narrow = await store.list_page("ConfigMap", namespace, limit=100, max_bytes=BIG_BOUND)
        assert [orjson.loads(item.body) for item in narrow.items] == (await store.list("ConfigMap", namespace)).items
    for namespace in (None, ""):
        nodes = await store.list_page("Node", namespace, limit=100, max_bytes=BIG_BOUND)
        assert [orjson.loads(item.body) for item in nodes.items] == (await store.list("Node")).items
    after = await store.list_page("ConfigMap", after=("a", "xx"), limit=2, max_bytes=BIG_BOUND)
    assert [(item.namespace, item.name) for item in after.items] == [("a", "y"), ("a-b", "x")]
    assert (after.last, after.remaining) == (("a-b", "x"), 1)
    for namespace, start, expected in [("a", ("a", "x"), ["y"]), ("a", ("a-b", "x"), []), ("a-b", ("a", "y"), ["x"])]:
        narrow = await store.list_page("ConfigMap", namespace, after=start, limit=100, max_bytes=BIG_BOUND)
        assert ([item.name for item in narrow.items], narrow.remaining) == (expected, 0)


@pytest.mark.parametrize(("limit", "max_bytes"), [(2, BIG_BOUND), (100, 6000), (3, 6000), (1, 1), (100, 1)])
async def test_list_pages_end_at_their_limit_or_before_their_byte_bound_and_hold_every_object_once(
    store: Store, limit: int, max_bytes: int
) -> None:
    sizes = [300, 5000, 100, 2500, 2500, 9000, 10]
    for i, size in enumerate(sizes):
        await store.create(configmap(f"cm-{i}", "a" if i % 2 else "a-b", blob="x" * size))
    listed = await store.list("ConfigMap")
    found = await pages(store, "ConfigMap", limit=limit, max_bytes=max_bytes)
    assert decoded(found) == listed.items
    served = 0
    for index, page in enumerate(found):
        size = sum(len(item.body) for item in page.items)
        assert 1 <= len(page.items) <= limit
        assert len(page.items) == 1 or size <= max_bytes  # a page holds one object, whatever its size
        assert page.last == (page.items[-1].namespace, page.items[-1].name)
        served += len(page.items)
        assert page.remaining == len(listed.items) - served
        if index + 1 < len(found):  # it ended because the next object would not fit
            assert len(page.items) == limit or size + len(found[index + 1].items[0].body) > max_bytes


@pytest.mark.parametrize(
    ("selector", "fields"),
    [
        ("app=web", None),
        (None, "spec.nodeName=node-a"),
        ("app=web", "metadata.namespace=edge"),
        (None, "metadata.name=p-03"),
    ],
)
@pytest.mark.parametrize(("limit", "max_bytes"), [(2, BIG_BOUND), (100, 1)])
async def test_list_pages_with_selectors_hold_exactly_the_selected_objects(
    store: Store, selector: str | None, fields: str | None, limit: int, max_bytes: int
) -> None:
    for i in range(12):
        labels = {"app": "web" if i % 4 else "db"}
        await store.create(
            pod(f"p-{i:02d}", "default" if i % 3 else "edge", "node-a" if i % 2 else "node-b", labels=labels)
        )
    wanted = await store.list("Pod", None, selector, fields=fields)
    found = await pages(store, "Pod", None, selector, fields=fields, limit=limit, max_bytes=max_bytes)
    assert decoded(found) == wanted.items
    assert all(len(page.items) <= limit for page in found)


@pytest.mark.parametrize(("limit", "max_bytes", "field"), [(0, 10, "limit"), (1, 0, "max_bytes"), (-1, 10, "limit")])
async def test_a_list_page_bound_below_one_is_invalid_naming_it(
    store: Store, limit: int, max_bytes: int, field: str
) -> None:
    with pytest.raises(errors.Invalid) as caught:
        await store.list_page("ConfigMap", limit=limit, max_bytes=max_bytes)
    assert [f.path for f in caught.value.fields] == [field]


# -- update (compare-and-swap) -------------------------------------------------------------------------------


async def test_update_with_the_current_resource_version_writes_and_bumps_it(store: Store) -> None:
    created = await store.create(configmap("a", x="1"))
    created["data"]["x"] = "2"
    updated = await store.update(created)
    assert rv(updated) == rv(created) + 1
    assert updated["data"] == {"x": "2"}
    assert await store.get("ConfigMap", "a", "default") == updated


async def test_update_with_a_stale_resource_version_fails_with_conflict_and_changes_nothing(store: Store) -> None:
    created = await store.create(configmap("a", x="1"))
    first = copy.deepcopy(created)
    first["data"]["x"] = "first"
    winner = await store.update(first)
    created["data"]["x"] = "second"
    with pytest.raises(errors.Conflict):
        await store.update(created)
    assert await store.get("ConfigMap", "a", "default") == winner
    assert await store.revision() == rv(winner)


async def test_update_with_a_future_resource_version_fails_with_conflict(store: Store) -> None:
    created = await store.create(configmap("a"))
    created["metadata"]["resourceVersion"] = str(rv(created) + 10)
    with pytest.raises(errors.Conflict):
        await store.update(created)


# Each loose text but "abc" is one `int()` reads as the object's revision (1), or as another ("1_0" is 10).
@pytest.mark.parametrize(
    "version", [None, "", "abc", "-1", " 1", "1 ", "+1", "01", "1_0", "\u0661", "9223372036854775808", "1" * 5000]
)
async def test_update_without_a_usable_resource_version_is_invalid(store: Store, version: str | None) -> None:
    created = await store.create(configmap("a"))
    if version is None:
        del created["metadata"]["resourceVersion"]
    else:
        created["metadata"]["resourceVersion"] = version
    with pytest.raises(errors.Invalid) as caught:
        await store.update(created)
    assert [f.path for f in caught.value.fields] == ["metadata.resourceVersion"]
    assert await store.revision() == 1


async def test_update_of_a_missing_object_fails_with_not_found(store: Store) -> None:
    obj = configmap("ghost")
    obj["metadata"]["resourceVersion"] = "1"
    with pytest.raises(errors.NotFound):
        await store.update(obj)
    assert await store.revision() == 0


async def test_generation_bumps_when_spec_changes_and_only_then(store: Store) -> None:
    created = await store.create(node("n", spec={"cpu": 4}))
    created["metadata"]["labels"] = {"zone": "a"}
    created["status"] = {"ready": True}
    relabelled = await store.update(created)
    assert relabelled["metadata"]["generation"] == 1
    relabelled["spec"] = {"cpu": 8}
    respecced = await store.update(relabelled)
    assert respecced["metadata"]["generation"] == 2
    respecced["spec"] = {"cpu": 8}
    same = await store.update(respecced)
    assert same["metadata"]["generation"] == 2
    del same["spec"]
    assert (await store.update(same))["metadata"]["generation"] == 3


async def test_equal_spec_in_another_key_order_does_not_bump_generation(store: Store) -> None:
    created = await store.create(node("n", spec={"a": 1, "b": {"x": 1, "y": 2}}))
    created["spec"] = {"b": {"y": 2, "x": 1}, "a": 1}
    assert (await store.update(created))["metadata"]["generation"] == 1


async def test_update_keeps_uid_creation_timestamp_and_generation_whatever_the_caller_sends(
    store: Store, clock: FakeClock
) -> None:
    created = await store.create(node("n", spec={"cpu": 1}))
    await clock.advance(3600)
    forged = copy.deepcopy(created)
    forged["metadata"].update(uid="forged", creationTimestamp="1999-01-01T00:00:00Z", generation=99)
    updated = await store.update(forged)
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert updated["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert updated["metadata"]["generation"] == 1


# -- delete ---------------------------------------------------------------------------------------------------


async def test_delete_returns_the_last_stored_object_at_the_deletion_revision(store: Store) -> None:
    created = await store.create(configmap("a", x="1"))
    deleted = await store.delete("ConfigMap", "a", "default")
    assert rv(deleted) == rv(created) + 1 == await store.revision()
    deleted["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    assert deleted == created
    with pytest.raises(errors.NotFound):
        await store.get("ConfigMap", "a", "default")
    assert (await store.list("ConfigMap")).items == []


async def test_delete_with_the_current_resource_version_precondition_deletes(store: Store) -> None:
    created = await store.create(configmap("a"))
    await store.delete("ConfigMap", "a", "default", resource_version=created["metadata"]["resourceVersion"])
    with pytest.raises(errors.NotFound):
        await store.get("ConfigMap", "a", "default")


async def test_delete_with_a_stale_precondition_fails_with_conflict_and_keeps_the_object(store: Store) -> None:
    created = await store.create(configmap("a"))
    created["data"]["x"] = "1"
    updated = await store.update(created)
    with pytest.raises(errors.Conflict):
        await store.delete("ConfigMap", "a", "default", resource_version=created["metadata"]["resourceVersion"])
    assert await store.get("ConfigMap", "a", "default") == updated
    assert await store.revision() == rv(updated)


@pytest.mark.parametrize("precondition", [" 1", "+1", "01", "\u0661", "-1", "9223372036854775808"])
async def test_delete_with_a_precondition_that_is_not_a_revision_is_invalid_and_keeps_the_object(
    store: Store, precondition: str
) -> None:
    created = await store.create(configmap("a"))
    with pytest.raises(errors.Invalid) as caught:
        await store.delete("ConfigMap", "a", "default", resource_version=precondition)
    assert [f.path for f in caught.value.fields] == ["resourceVersion"]
    assert await store.get("ConfigMap", "a", "default") == created
    assert await store.revision() == 1


async def test_delete_of_a_missing_object_fails_with_not_found(store: Store) -> None:
    with pytest.raises(errors.NotFound):
        await store.delete("ConfigMap", "a", "default")
    with pytest.raises(errors.NotFound):
        await store.delete("ConfigMap", "a", "default", resource_version="1")
    assert await store.revision() == 0


async def test_an_object_recreated_after_delete_is_a_new_object(store: Store) -> None:
    first = await store.create(node("n", spec={"v": 1}))
    first["spec"] = {"v": 2}
    await store.update(first)
    await store.delete("Node", "n")
    again = await store.create(node("n", spec={"v": 3}))
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    assert again["metadata"]["generation"] == 1
    assert rv(again) == 4


# -- copies ---------------------------------------------------------------------------------------------------


async def test_mutating_the_object_passed_to_create_or_update_does_not_change_the_store(store: Store) -> None:
    obj = configmap("a", labels={"k": "v"}, x="1")
    created = await store.create(obj)
    obj["data"]["x"] = "changed"
    obj["metadata"]["labels"]["k"] = "changed"
    assert await store.get("ConfigMap", "a", "default") == created
    update = copy.deepcopy(created)
    update["data"]["x"] = "2"
    updated = await store.update(update)
    update["data"]["x"] = "changed again"
    assert await store.get("ConfigMap", "a", "default") == updated


async def test_returned_dicts_are_copies_the_caller_may_mutate(store: Store) -> None:
    created = await store.create(configmap("a", labels={"k": "v"}, x="1"))
    pristine = copy.deepcopy(created)
    since = await store.revision() - 1
    for returned in [
        created,
        await store.get("ConfigMap", "a", "default"),
        (await store.list("ConfigMap")).items[0],
    ]:
        returned["data"]["x"] = "mutated"
        returned["metadata"]["labels"]["k"] = "mutated"
        returned["metadata"]["resourceVersion"] = "999"
    async with store.watch("ConfigMap", since=since) as stream:
        (event,) = await take(stream, 1)
        event.object["data"]["x"] = "mutated"
    assert await store.get("ConfigMap", "a", "default") == pristine
    async with store.watch("ConfigMap", since=since) as stream:
        assert (await take(stream, 1))[0].object == pristine

    update = copy.deepcopy(pristine)
    update["data"]["x"] = "2"
    updated = await store.update(update)
    expected = copy.deepcopy(updated)
    updated["data"]["x"] = "mutated"
    assert update["data"]["x"] == "2"  # the result shares nothing with the caller's argument
    assert await store.get("ConfigMap", "a", "default") == expected


# -- revisions ------------------------------------------------------------------------------------------------


async def test_revisions_are_global_across_kinds_and_namespaces_and_each_write_gets_the_next(store: Store) -> None:
    assert await store.revision() == 0
    seen = []
    seen.append(rv(await store.create(configmap("a", "one"))))
    seen.append(rv(await store.create(node("n"))))
    seen.append(rv(await store.create(configmap("a", "two"))))
    cm = await store.get("ConfigMap", "a", "one")
    seen.append(rv(await store.update(cm)))
    seen.append(rv(await store.delete("Node", "n")))
    assert seen == [1, 2, 3, 4, 5]
    assert await store.revision() == 5


async def test_failed_writes_do_not_consume_revisions(store: Store) -> None:
    created = await store.create(configmap("a"))
    stale = copy.deepcopy(created)
    await store.update(created)
    attempts: list[tuple[Awaitable[Any], type[errors.DevplaceError]]] = [
        (store.create(configmap("a")), errors.AlreadyExists),
        (store.update(stale), errors.Conflict),
        (store.delete("ConfigMap", "missing", "default"), errors.NotFound),
        (store.delete("ConfigMap", "a", "default", resource_version="1"), errors.Conflict),
    ]
    for attempt, refusal in attempts:
        with pytest.raises(refusal):
            await attempt
    assert await store.revision() == 2
    assert rv(await store.create(configmap("b"))) == 3


# -- watch ----------------------------------------------------------------------------------------------------


async def test_watch_delivers_added_modified_deleted_in_order_with_the_exact_objects(store: Store) -> None:
    start = await store.revision()
    async with store.watch("ConfigMap", "default", since=start) as stream:
        created = await store.create(configmap("a", x="1"))
        change = copy.deepcopy(created)
        change["data"]["x"] = "2"
        updated = await store.update(change)
        deleted = await store.delete("ConfigMap", "a", "default")
        events = await take(stream, 3)
    assert [(e.type, e.object, e.revision) for e in events] == [
        ("ADDED", created, rv(created)),
        ("MODIFIED", updated, rv(updated)),
        ("DELETED", deleted, rv(deleted)),
    ]


async def test_watch_replays_history_after_since_then_goes_live(store: Store) -> None:
    a = await store.create(configmap("a"))
    b = await store.create(configmap("b"))
    c = await store.create(configmap("c"))
    async with store.watch("ConfigMap", since=rv(a)) as stream:
        replayed = await take(stream, 2)
        d = await store.create(configmap("d"))
        (live,) = await take(stream, 1)
    assert [e.object for e in replayed] == [b, c]
    assert live.object == d
    assert live.revision == rv(d)


async def test_watch_from_zero_replays_everything(store: Store) -> None:
    written = [await store.create(configmap(f"o{i}")) for i in range(5)]
    async with store.watch(since=0) as stream:
        events = await take(stream, 5)
    assert [e.object for e in events] == written
    assert [e.revision for e in events] == [1, 2, 3, 4, 5]


async def test_watch_filters_by_kind(store: Store) -> None:
    async with store.watch("Node", since=0) as stream:
        await store.create(configmap("a"))
        n1 = await store.create(node("n1"))
        await store.create(configmap("b"))
        n2 = await store.create(node("n2"))
        events = await take(stream, 2)
    assert [e.object for e in events] == [n1, n2]


async def test_watch_filters_by_namespace(store: Store) -> None:
    async with store.watch("ConfigMap", "one", since=0) as stream:
        await store.create(configmap("a", "two"))
        mine = await store.create(configmap("a", "one"))
        await store.create(configmap("b", "two"))
        await store.delete("ConfigMap", "a", "two")
        sentinel = await store.create(configmap("sentinel", "one"))
        events = await take(stream, 2)
    assert [e.object for e in events] == [mine, sentinel]


async def test_watch_of_every_kind_sees_every_write(store: Store) -> None:
    async with store.watch(since=0) as stream:
        await store.create(configmap("a", "one"))
        await store.create(node("n"))
        await store.delete("Node", "n")
        events = await take(stream, 3)
    assert summary(events) == [
        ("ADDED", "ConfigMap", "a", 1),
        ("ADDED", "Node", "n", 2),
        ("DELETED", "Node", "n", 3),
    ]


async def test_watch_filters_by_label_selector(store: Store) -> None:
    async with store.watch("ConfigMap", selector="tier in (gpu),app!=db", since=0) as stream:
        await store.create(configmap("cpu", labels={"tier": "cpu"}))
        gpu = await store.create(configmap("gpu", labels={"tier": "gpu"}))
        await store.create(configmap("db-gpu", labels={"tier": "gpu", "app": "db"}))
        await store.create(configmap("unlabelled"))
        sentinel = await store.create(configmap("sentinel", labels={"tier": "gpu", "app": "web"}))
        events = await take(stream, 2)
    assert [e.object for e in events] == [gpu, sentinel]


async def test_watch_filters_by_field_selector(store: Store) -> None:
    async with store.watch("Pod", fields="spec.nodeName=node-a", since=0) as stream:
        await store.create(pod("theirs", "default", "node-b"))
        mine = await store.create(pod("mine", "default", "node-a"))
        moved = copy.deepcopy(mine)
        moved["spec"]["nodeName"] = "node-b"
        await store.update(moved)  # no longer selected: Kubernetes' field-filtered watch does not send it either
        await store.create(pod("unbound", "default", ""))
        sentinel = await store.create(pod("sentinel", "edge", "node-a"))
        events = await take(stream, 2)
    assert [(e.type, e.object) for e in events] == [("ADDED", mine), ("ADDED", sentinel)]


async def test_watch_filters_by_name_and_namespace_fields(store: Store) -> None:
    async with store.watch("Pod", fields="metadata.name=web,metadata.namespace=edge", since=0) as stream:
        await store.create(pod("web", "default", "node-a"))
        await store.create(pod("db", "edge", "node-a"))
        web = await store.create(pod("web", "edge", "node-a"))
        gone = await store.delete("Pod", "web", "edge")
        events = await take(stream, 2)
    assert [(e.type, e.object) for e in events] == [("ADDED", web), ("DELETED", gone)]


async def test_a_pod_watcher_sees_none_of_many_writes_of_another_kind(store: Store) -> None:
    async with store.watch("Pod") as stream:
        for i in range(300):
            await store.create(configmap(f"noise-{i}"))
        mine = await store.create(pod("mine", "default", "node-a"))
        (event,) = await take(stream, 1)
    assert (event.object, event.revision) == (mine, 301)


async def test_watch_since_none_starts_at_the_head_at_entry_and_delivers_the_next_write(store: Store) -> None:
    await store.create(configmap("before"))
    async with store.watch("ConfigMap", since=None) as stream:
        assert stream.revision == await store.revision() == 1
        after = await store.create(configmap("after"))  # written right after entry: registered, so never missed
        (event,) = await take(stream, 1)
    assert (event.type, event.object, event.revision) == ("ADDED", after, 2)


async def test_watch_since_a_revision_reports_it_as_its_start(store: Store) -> None:
    for i in range(3):
        await store.create(configmap(f"o{i}"))
    async with store.watch("ConfigMap", since=1) as stream:
        assert stream.revision == 1
        assert [e.revision for e in await take(stream, 2)] == [2, 3]


async def test_iterating_a_watch_that_was_not_entered_is_a_programming_error(store: Store) -> None:
    with pytest.raises(RuntimeError):
        await anext(store.watch(since=0))


async def test_iterating_a_watch_after_leaving_it_is_a_programming_error(store: Store) -> None:
    await store.create(configmap("o"))
    async with store.watch(since=0) as stream:
        pass
    with pytest.raises(RuntimeError):
        await asyncio.wait_for(anext(stream), 5)


async def test_watch_resumed_from_the_last_seen_revision_loses_and_repeats_nothing(store: Store) -> None:
    written = [await store.create(configmap(f"o{i}")) for i in range(6)]
    async with store.watch("ConfigMap", since=0) as stream:
        seen = await take(stream, 4)
    last_seen = seen[-1].revision
    for obj in written[:3]:
        written.append(await store.update(obj))
    async with store.watch("ConfigMap", since=last_seen) as stream:
        rest = await take(stream, 5)
    assert [e.object for e in seen + rest] == written
    assert [e.revision for e in seen + rest] == list(range(1, 10))


async def test_two_watchers_each_see_every_event(store: Store) -> None:
    async with store.watch(since=0) as one, store.watch(since=0) as two:
        written = [await store.create(configmap(f"o{i}")) for i in range(3)]
        assert [e.object for e in await take(one, 3)] == written
        assert [e.object for e in await take(two, 3)] == written


async def test_watch_from_a_compacted_revision_raises_gone_at_entry(store: Store) -> None:
    for i in range(5):
        await store.create(configmap(f"o{i}"))
    await store.compact(3)
    for since in (2, 0):
        with pytest.raises(errors.Gone):
            async with store.watch(since=since):
                pytest.fail("entered a watch whose history was compacted")
    async with store.watch(since=3) as stream:
        assert [e.revision for e in await take(stream, 2)] == [4, 5]


@pytest.mark.parametrize("target", [3, 100, 2**63 - 1, 2**63])
async def test_compaction_beyond_the_current_revision_is_invalid_naming_revision_and_changes_nothing(
    store: Store, target: int
) -> None:
    a = await store.create(configmap("a"))
    b = await store.create(configmap("b"))
    with pytest.raises(errors.Invalid) as caught:
        await store.compact(target)
    assert [f.path for f in caught.value.fields] == ["revision"]
    if target == 3:
        assert "3 is beyond the current revision 2" in caught.value.message
    assert await store.revision() == 2
    async with store.watch(since=0) as stream:  # nothing was compacted
        assert [e.object for e in await take(stream, 2)] == [a, b]


async def test_compaction_to_the_current_revision_keeps_watching_from_it(store: Store) -> None:
    await store.create(configmap("a"))
    await store.create(configmap("b"))
    await store.compact(2)
    assert await store.revision() == 2
    async with store.watch(since=2) as stream:
        c = await store.create(configmap("c"))
        assert [e.object for e in await take(stream, 1)] == [c]
    with pytest.raises(errors.Gone):
        async with store.watch(since=1):
            pytest.fail("entered a watch whose history was compacted")


@pytest.mark.parametrize("since", [3, 100_000, 2**63 - 1])
async def test_watch_from_a_revision_beyond_the_current_one_is_gone_at_entry(store: Store, since: int) -> None:
    await store.create(configmap("a"))
    await store.create(configmap("b"))
    with pytest.raises(errors.Gone, match=r"(?i)too large resource version"):
        async with store.watch(since=since):
            pytest.fail("entered a watch from a revision the store has not reached")
    async with store.watch(since=2) as stream:  # the head itself is fine, and later events arrive
        c = await store.create(configmap("c"))
        assert [e.object for e in await take(stream, 1)] == [c]


@pytest.mark.parametrize("since", [-1, 2**63, 10**30])
async def test_watch_from_a_negative_or_overflowing_revision_is_invalid_naming_resource_version(
    store: Store, since: int
) -> None:
    await store.create(configmap("a"))
    with pytest.raises(errors.Invalid) as caught:
        async with store.watch(since=since):
            pytest.fail("entered a watch from a revision that is no revision")
    assert [f.path for f in caught.value.fields] == ["resourceVersion"]


# -- object size ----------------------------------------------------------------------------------------------


def _encoded_size(obj: dict) -> int:
    return len(orjson.dumps(obj))


async def test_an_object_up_to_the_size_limit_is_stored_and_one_byte_more_is_too_large(store: Store) -> None:
    created = await store.create(configmap("big", x=""))
    room = MAX_OBJECT_BYTES - _encoded_size(created)  # an update keeps every other byte (same revision width)
    created["data"]["x"] = "a" * room
    full = await store.update(created)
    assert _encoded_size(full) == MAX_OBJECT_BYTES
    full["data"]["x"] += "a"
    with pytest.raises(errors.TooLarge) as caught:
        await store.update(full)
    assert "ConfigMap default/big" in caught.value.message
    assert str(MAX_OBJECT_BYTES) in caught.value.message
    assert await store.revision() == 2
    assert (await store.get("ConfigMap", "big", "default"))["data"]["x"] == "a" * room


async def test_creating_an_object_over_the_size_limit_is_too_large_and_writes_nothing(store: Store) -> None:
    async with store.watch(since=0) as stream:
        with pytest.raises(errors.TooLarge):
            await store.create(configmap("huge", x="é" * MAX_OBJECT_BYTES))  # 2 bytes each in UTF-8
        with pytest.raises(errors.NotFound):
            await store.get("ConfigMap", "huge", "default")
        assert await store.revision() == 0
        small = await store.create(configmap("small"))
        assert [e.object for e in await take(stream, 1)] == [small]  # the refused write made no event


async def test_compaction_keeps_the_objects(store: Store) -> None:
    a = await store.create(configmap("a"))
    b = await store.create(configmap("b"))
    await store.compact(await store.revision())
    assert (await store.list("ConfigMap")).items == [a, b]


async def test_relisting_and_watching_from_the_list_revision_recovers_from_gone(store: Store) -> None:
    for i in range(3):
        await store.create(configmap(f"o{i}"))
    await store.compact(3)
    listed = await store.list("ConfigMap")
    async with store.watch("ConfigMap", since=listed.revision) as stream:
        late = await store.create(configmap("late"))
        assert [e.object for e in await take(stream, 1)] == [late]


# -- concurrency ----------------------------------------------------------------------------------------------


class _Interleaving:
    """The store, but every `get` yields to the loop after reading, so concurrent read-decide-writes race."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.conflicts = 0

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        obj = await self._store.get(kind, name, namespace)
        await asyncio.sleep(0)
        return obj

    async def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self._store.update(obj)
        except errors.Conflict:
            self.conflicts += 1
            raise


def _increment(obj: dict[str, Any]) -> dict[str, Any]:
    obj["data"]["count"] = str(int(obj["data"]["count"]) + 1)
    return obj


async def test_concurrent_cas_increments_lose_no_update(store: Store, clock: FakeClock) -> None:
    writers = 12
    await store.create(configmap("counter", count="0"))
    racing = _Interleaving(store)

    async def drive_backoff() -> None:
        while True:
            await clock.advance(0.01)

    driver = asyncio.create_task(drive_backoff())
    try:
        results = await asyncio.wait_for(
            asyncio.gather(
                *(
                    cas(racing, "ConfigMap", "counter", "default", _increment, attempts=writers + 2, clock=clock)  # type: ignore[arg-type]
                    for _ in range(writers)
                )
            ),
            30,
        )
    finally:
        driver.cancel()
    assert racing.conflicts > 0  # the race happened, and CAS resolved it
    assert sorted(int(r.object["data"]["count"]) for r in results) == list(range(1, writers + 1))
    assert len({rv(r.object) for r in results}) == writers
    assert (await store.get("ConfigMap", "counter", "default"))["data"]["count"] == str(writers)


# -- lifecycle ------------------------------------------------------------------------------------------------


async def test_operations_after_close_raise_unavailable(store: Store) -> None:
    created = await store.create(configmap("a"))
    await store.close()
    for attempt in [
        store.create(configmap("b")),
        store.get("ConfigMap", "a", "default"),
        store.list("ConfigMap"),
        store.update(created),
        store.delete("ConfigMap", "a", "default"),
    ]:
        with pytest.raises(errors.Unavailable):
            await attempt
    with pytest.raises(errors.Unavailable):
        async with store.watch(since=0):
            pytest.fail("entered a watch of a closed store")


async def test_closing_the_store_ends_an_open_watch_with_unavailable(store: Store) -> None:
    async with store.watch("ConfigMap") as stream:
        waiting = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0)  # the watcher is parked, waiting for an event
        await store.close()
        with pytest.raises(errors.Unavailable):
            await asyncio.wait_for(waiting, WATCH_BOUND)


async def test_closing_the_store_ends_a_watch_that_has_events_to_deliver_with_unavailable(store: Store) -> None:
    for i in range(3):
        await store.create(configmap(f"o{i}"))
    async with store.watch("ConfigMap", since=0) as stream:
        await take(stream, 1)
        await store.close()
        with pytest.raises(errors.Unavailable):
            await take(stream, 2)


# -- the model ------------------------------------------------------------------------------------------------

KEYS = [
    ("ConfigMap", "default", "a"),
    ("ConfigMap", "default", "b"),
    ("ConfigMap", "other", "a"),
    ("ConfigMap", "other", "b"),
    ("Node", "", "a"),
    ("Node", "", "b"),
]
SPECS = st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 2), max_size=2)
LABELS = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db"]), max_size=2)


def _wire(key: tuple[str, str, str], spec: dict, labels: dict) -> dict[str, Any]:
    kind, namespace, name = key
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, "spec": spec}


class StoreMatchesModel(RuleBasedStateMachine):
    """A backend against a dict of objects, a revision counter and an event log (the simplest correct store)."""

    def __init__(self, factory: BackendFactory, directory: Path) -> None:
        super().__init__()
        directory.mkdir()
        self.loop = asyncio.new_event_loop()
        self.context = factory(directory, FakeClock())
        self.store: Store = self.run(self.context.__aenter__())
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.log: list[Event] = []
        self.revision = 0
        self.compacted = 0

    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(awaitable, WATCH_BOUND))

    def teardown(self) -> None:
        try:
            self.run(self.context.__aexit__(None, None, None))
        finally:
            self.loop.close()

    def record(self, type_: str, key: tuple[str, str, str], obj: dict[str, Any]) -> None:
        self.revision += 1
        assert rv(obj) == self.revision
        self.log.append(Event(type_, copy.deepcopy(obj), self.revision))  # type: ignore[arg-type]
        if type_ == "DELETED":
            del self.objects[key]
        else:
            self.objects[key] = copy.deepcopy(obj)

    @initialize()
    def start_empty(self) -> None:
        assert self.run(self.store.revision()) == 0

    @rule(key=st.sampled_from(KEYS), spec=SPECS, labels=LABELS)
    def create(self, key: tuple[str, str, str], spec: dict, labels: dict) -> None:
        if key in self.objects:
            with pytest.raises(errors.AlreadyExists):
                self.run(self.store.create(_wire(key, spec, labels)))
            return
        created = self.run(self.store.create(_wire(key, spec, labels)))
        assert created["metadata"]["generation"] == 1
        assert created["spec"] == spec
        assert created["metadata"]["labels"] == labels
        self.record("ADDED", key, created)

    @rule(key=st.sampled_from(KEYS), spec=SPECS, labels=LABELS)
    def update(self, key: tuple[str, str, str], spec: dict, labels: dict) -> None:
        if key not in self.objects:
            obj = _wire(key, spec, labels)
            obj["metadata"]["resourceVersion"] = str(self.revision)
            with pytest.raises(errors.NotFound):
                self.run(self.store.update(obj))
            return
        old = self.objects[key]
        obj = copy.deepcopy(old)
        obj["spec"] = spec
        obj["metadata"]["labels"] = labels
        updated = self.run(self.store.update(obj))
        bump = 1 if spec != old["spec"] else 0
        assert updated["metadata"]["generation"] == old["metadata"]["generation"] + bump
        assert updated["metadata"]["uid"] == old["metadata"]["uid"]
        assert updated["spec"] == spec
        self.record("MODIFIED", key, updated)

    @rule(key=st.sampled_from(KEYS), skew=st.sampled_from([-1, 1, 7]))
    def update_stale(self, key: tuple[str, str, str], skew: int) -> None:
        if key not in self.objects:
            return
        obj = copy.deepcopy(self.objects[key])
        obj["metadata"]["resourceVersion"] = str(max(0, rv(obj) + skew))
        obj["spec"] = {"stale": 1}
        with pytest.raises(errors.Conflict):
            self.run(self.store.update(obj))

    @rule(key=st.sampled_from(KEYS), precondition_=st.sampled_from(["none", "current", "stale"]))
    def delete(self, key: tuple[str, str, str], precondition_: str) -> None:
        kind, namespace, name = key
        if key not in self.objects:
            with pytest.raises(errors.NotFound):
                self.run(self.store.delete(kind, name, namespace))
            return
        current = self.objects[key]["metadata"]["resourceVersion"]
        if precondition_ == "stale":
            with pytest.raises(errors.Conflict):
                self.run(self.store.delete(kind, name, namespace, resource_version=str(int(current) + 1)))
            return
        version = current if precondition_ == "current" else None
        deleted = self.run(self.store.delete(kind, name, namespace, resource_version=version))
        expected = copy.deepcopy(self.objects[key])
        expected["metadata"]["resourceVersion"] = str(self.revision + 1)
        assert deleted == expected
        self.record("DELETED", key, deleted)

    @rule(key=st.sampled_from(KEYS))
    def get(self, key: tuple[str, str, str]) -> None:
        kind, namespace, name = key
        if key in self.objects:
            assert self.run(self.store.get(kind, name, namespace)) == self.objects[key]
        else:
            with pytest.raises(errors.NotFound):
                self.run(self.store.get(kind, name, namespace))

    @rule(kind=st.sampled_from(["ConfigMap", "Node"]), namespace=st.sampled_from([None, "", "default", "other"]))
    def list_objects(self, kind: str, namespace: str | None) -> None:
        listed = self.run(self.store.list(kind, namespace))
        expected = [obj for key, obj in sorted(self.objects.items()) if key[0] == kind and namespace in (None, key[1])]
        assert listed.items == expected
        assert listed.revision == self.revision

    @rule(
        kind=st.sampled_from(["ConfigMap", "Node"]),
        namespace=st.sampled_from([None, "", "default", "other"]),
        limit=st.integers(1, 3),
        max_bytes=st.sampled_from([1, 400, BIG_BOUND]),
    )
    def list_in_pages(self, kind: str, namespace: str | None, limit: int, max_bytes: int) -> None:
        found = self.run(pages(self.store, kind, namespace, limit=limit, max_bytes=max_bytes))
        expected = [obj for key, obj in sorted(self.objects.items()) if key[0] == kind and namespace in (None, key[1])]
        assert decoded(found) == expected
        assert found[0].revision == self.revision

    @rule(selector=st.sampled_from(["app=web", "app!=web", "!tier", "tier in (db)"]))
    def list_selected(self, selector: str) -> None:
        parsed = selectors.parse_label_selector(selector)
        listed = self.run(self.store.list("ConfigMap", None, selector))
        expected = [
            obj
            for key, obj in sorted(self.objects.items())
            if key[0] == "ConfigMap" and parsed.matches(obj["metadata"].get("labels") or {})
        ]
        assert listed.items == expected

    @rule(back=st.integers(0, 4))
    def compact(self, back: int) -> None:
        target = max(0, self.revision - back)
        self.run(self.store.compact(target))
        self.compacted = max(self.compacted, target)

    @rule(ahead=st.integers(1, 3))
    def compact_beyond_the_head(self, ahead: int) -> None:
        with pytest.raises(errors.Invalid):
            self.run(self.store.compact(self.revision + ahead))

    @precondition(lambda self: self.revision > self.compacted)
    @rule()
    def replay_history(self) -> None:
        async def replay() -> list[Event]:
            async with self.store.watch(since=self.compacted) as stream:
                return await take(stream, self.revision - self.compacted)

        events = self.run(replay())
        expected = [e for e in self.log if e.revision > self.compacted]
        assert [(e.type, e.object, e.revision) for e in events] == [(e.type, e.object, e.revision) for e in expected]

    @precondition(lambda self: self.compacted > 0)
    @rule()
    def watch_before_compaction_is_gone(self) -> None:
        async def attempt() -> None:
            async with self.store.watch(since=self.compacted - 1):
                pytest.fail("entered a watch whose history was compacted")

        with pytest.raises(errors.Gone):
            self.run(attempt())

    @invariant()
    def revision_matches(self) -> None:
        assert self.run(self.store.revision()) == self.revision


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_store_behaves_like_the_model(backend: str, tmp_path: Path) -> None:
    examples = itertools.count()
    run_state_machine_as_test(
        lambda: StoreMatchesModel(BACKENDS[backend], tmp_path / f"example-{next(examples)}"),
        settings=settings(max_examples=MODEL_EXAMPLES.get(backend, 60), stateful_step_count=50, deadline=None),
    )
