"""The agent's informers and CAS writes: filtered by the store, misshapen objects absent (an Instance whose slots break
the rules is kept), a stale cache never final."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.agent import _instances as instances
from devplace.agent import _slots as slots
from devplace.agent import _writes as writes
from devplace.agent._caches import ORPHANED, NodeCache, instance_routes
from devplace.agent._instances import InstanceRecord
from devplace.agent._slots import Usage
from devplace.api import named_node
from devplace.store import MemoryStore, ObjectList, WatchStream
from devplace.supervisors import Supervisor

from .conftest import eventually


def instance(name: str = "cams-8120fe", rv: int = 5, holder: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)},
        "spec": {
            "configurationName": "cams",
            "capacity": 1,
            "nodes": ["node-a"],
            "deviceUsage": {f"{name}-0": holder},
        },
    }


@pytest.fixture
async def supervisor() -> AsyncIterator[Supervisor]:
    sup = Supervisor("test")
    yield sup
    await sup.stop()


def cache_of(store: Any, supervisor: Supervisor) -> NodeCache:
    return NodeCache(store, "node-a", supervisor)


def test_an_instance_of_the_wrong_shape_is_absent_and_reported_once(
    memory_store: MemoryStore, supervisor: Supervisor, caplog: pytest.LogCaptureFixture
) -> None:
    cache = cache_of(memory_store, supervisor)
    cache.instances.apply_event("ADDED", instance(rv=5))
    with caplog.at_level(logging.WARNING, logger="devplace.store._informers"):
        for rv in (6, 7, 8):
            bad = instance(rv=rv)
            bad["spec"]["capacity"] = "many"
            cache.instances.apply_event("MODIFIED", bad)
    assert cache.instance("default", "cams-8120fe") is None
    assert cache.instances_of("default", "cams") == []
    assert len([r for r in caplog.records if "ignoring Instance" in r.message]) == 1
    assert "spec.capacity" in caplog.records[0].message
    cache.instances.apply_event("MODIFIED", instance(rv=9, holder="node-a"))
    assert cache.instance("default", "cams-8120fe") is not None


def test_an_instance_whose_slots_break_the_rules_is_kept_with_the_bad_holder_unknown(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    cache = cache_of(memory_store, supervisor)
    cache.instances.apply_event("ADDED", instance(rv=5))
    cache.instances.apply_event("MODIFIED", instance(rv=6, holder="C:broken"))
    record = cache.instance("default", "cams-8120fe")
    assert record is not None
    assert record.usage.holders == {"cams-8120fe-0": slots.Unknown("C:broken")}
    assert record.usage.unreadable == ("cams-8120fe-0",)
    assert [r.name for r in cache.instances_of("default", "cams")] == ["cams-8120fe"]


def test_the_cache_keeps_the_instances_that_concern_its_node_and_reads_the_others_on_demand(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    cache = cache_of(memory_store, supervisor)
    elsewhere = instance("cams-a19705", rv=6)
    elsewhere["spec"]["nodes"] = ["node-b"]
    orphan = instance("cams-0rphan", rv=7)
    orphan["spec"]["nodes"] = []
    left = instance("cams-1eft00", rv=8, holder="node-a")
    left["spec"]["nodes"] = ["node-b"]
    for obj in (instance(rv=5), elsewhere, orphan, left):
        cache.instances.apply_event("ADDED", obj)
    assert [r.name for r in cache.instances_of("default", "cams")] == ["cams-0rphan", "cams-1eft00", "cams-8120fe"]
    assert [r.name for r in cache.visible("default", "cams")] == ["cams-8120fe"]
    assert [r.name for r in cache.on_node()] == ["cams-8120fe"]
    assert ("default", "cams-a19705") not in cache.instances
    found = cache.instance("default", "cams-a19705")
    assert found is not None
    assert found.nodes == ("node-b",)
    assert cache.instance("default", "cams-absent") is None


def test_an_instance_that_stops_concerning_the_node_leaves_its_cache_as_a_deletion(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    cache = cache_of(memory_store, supervisor)
    seen: list[tuple[str, bool, bool]] = []
    cache.instances.subscribe(lambda c: seen.append((c.key[1], c.old is not None, c.new is not None)))
    cache.instances.apply_event("ADDED", instance(rv=5))
    moved = instance(rv=6)
    moved["spec"]["nodes"] = ["node-b"]
    cache.instances.apply_event("MODIFIED", moved)
    back = instance(rv=7)
    cache.instances.apply_event("MODIFIED", back)
    assert seen == [("cams-8120fe", False, True), ("cams-8120fe", True, False), ("cams-8120fe", False, True)]
    assert [r.name for r in cache.on_node()] == ["cams-8120fe"]


def pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x"}]},
        "status": {"phase": "Running"},
    }


class RecordingStore:
    """A MemoryStore that records the (kind, namespace, fields) of every list and watch, and every object a watch
    delivers."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self.calls: list[tuple[str, str, str | None, str | None]] = []
        self.delivered: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None, *, fields: str | None = None
    ) -> ObjectList:
        self.calls.append(("list", kind, namespace, fields))
        listing = await self._store.list(kind, namespace, selector, fields=fields)
        self.delivered += [(kind, o["metadata"]["name"]) for o in listing.items]
        return listing

    def watch(self, kind: str | None = None, namespace: str | None = None, **kw: Any) -> WatchStream:
        self.calls.append(("watch", kind or "", namespace, kw.get("fields")))
        return _Recorded(self._store.watch(kind, namespace, **kw), self.delivered)


class _Recorded:
    def __init__(self, inner: WatchStream, delivered: list[tuple[str, str]]) -> None:
        self.inner = inner
        self.delivered = delivered

    @property
    def revision(self) -> int:
        return self.inner.revision

    async def __aenter__(self) -> _Recorded:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.inner.__aexit__(*exc)

    def __aiter__(self) -> _Recorded:
        return self

    async def __anext__(self) -> Any:
        event = await self.inner.__anext__()
        self.delivered.append((event.object["kind"], event.object["metadata"]["name"]))
        return event


async def test_the_store_sends_the_agent_only_its_own_nodes_pods(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    store = RecordingStore(memory_store)
    await memory_store.create(pod("mine", "node-a"))
    await memory_store.create(pod("theirs", "node-b"))
    cache = cache_of(store, supervisor)
    await cache.start()
    await memory_store.create(pod("theirs-too", "node-b"))
    await memory_store.create(pod("mine-too", "node-a"))
    await eventually(lambda: ("default", "mine-too") in cache.pods, "the watch to deliver mine-too")
    assert sorted(cache.pods.keys()) == [("default", "mine"), ("default", "mine-too")]
    assert [name for kind, name in store.delivered if kind == "Pod"] == ["mine", "mine", "mine-too"]
    assert {(c[0], c[3]) for c in store.calls if c[1] == "Pod"} == {
        ("list", "spec.nodeName=node-a"),
        ("watch", "spec.nodeName=node-a"),
    }


# -- CAS writes ------------------------------------------------------------------------------------------------


async def cached(
    memory_store: MemoryStore, supervisor: Supervisor, holder: str = ""
) -> tuple[NodeCache, dict[str, Any]]:
    stored = await memory_store.create(instance(holder=holder))
    cache = cache_of(memory_store, supervisor)
    cache.instances.apply_event("ADDED", stored)
    return cache, stored


async def behind(memory_store: MemoryStore, stored: dict[str, Any], holder: str) -> None:
    """The store moves on (slot 0 held by `holder`) without the cache seeing it."""
    await memory_store.update({**stored, "spec": {**stored["spec"], "deviceUsage": {"cams-8120fe-0": holder}}})


async def test_mutate_instance_re_decides_on_the_stored_copy_when_the_cache_is_stale(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    cache, stored = await cached(memory_store, supervisor)
    await behind(memory_store, stored, "node-b")
    seen: list[str] = []

    def claim(obj: dict[str, Any]) -> dict[str, Any] | None:
        holder = obj["spec"]["deviceUsage"]["cams-8120fe-0"]
        seen.append(holder)
        if holder:
            return None
        return {**obj, "spec": {**obj["spec"], "deviceUsage": {"cams-8120fe-0": "node-a"}}}

    result = await writes.mutate_instance(cache, "default", "cams-8120fe", claim)
    assert seen == ["", "node-b"]  # first on the stale cache (Conflict), then on the fresh copy
    assert result is not None
    assert result["spec"]["deviceUsage"] == {"cams-8120fe-0": "node-b"}
    record = cache.instance("default", "cams-8120fe")
    assert record is not None
    assert record.usage.to_wire() == {"cams-8120fe-0": "node-b"}  # the fresh read is cached


def claim_for(node: str) -> Callable[[InstanceRecord], Usage | None]:
    """The IL claim of slot 0 for `node` (None when it already holds it; refused when someone else does)."""

    def decide(record: InstanceRecord) -> Usage | None:
        outcome = slots.claim_slots(record.usage, [f"{record.name}-0"], node, node in record.nodes)
        if isinstance(outcome, slots.Refusal):
            raise errors.Refused(outcome.reason)
        return outcome.usage if outcome.changed else None

    return decide


def watching(seen: list[str], decide: Callable[[InstanceRecord], Usage | None]) -> Callable[[InstanceRecord], Any]:
    def wrapped(record: InstanceRecord) -> Usage | None:
        seen.append(record.usage.to_wire()["cams-8120fe-0"])
        return decide(record)

    return wrapped


async def test_update_usage_on_a_current_cache_writes_once_and_caches_what_it_wrote(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    cache, _ = await cached(memory_store, supervisor)
    before = cache.instance("default", "cams-8120fe")
    assert before is not None
    heard: list[tuple[str, str]] = []
    cache.instances.subscribe(lambda change: heard.append(change.key))

    record = await writes.update_usage(cache, "default", "cams-8120fe", claim_for("node-a"))

    in_store = await memory_store.get("Instance", "cams-8120fe", "default")
    assert in_store["spec"]["deviceUsage"] == {"cams-8120fe-0": "node-a"}
    assert record.resource_version == int(in_store["metadata"]["resourceVersion"]) == before.resource_version + 1
    assert cache.instance("default", "cams-8120fe") is record
    assert record.usage.to_wire() == {"cams-8120fe-0": "node-a"}
    assert record.nodes is before.nodes  # only the usage was new: nothing else parsed again
    assert heard == [("default", "cams-8120fe")]
    assert before.obj["spec"]["deviceUsage"] == {"cams-8120fe-0": ""}  # the cached object was not changed


async def test_update_usage_deciding_nothing_writes_nothing(memory_store: MemoryStore, supervisor: Supervisor) -> None:
    cache, stored = await cached(memory_store, supervisor, holder="node-a")
    record = await writes.update_usage(cache, "default", "cams-8120fe", claim_for("node-a"))  # a re-offer
    assert record.resource_version == int(stored["metadata"]["resourceVersion"])
    after = await memory_store.get("Instance", "cams-8120fe", "default")
    assert after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


async def test_a_claim_refused_on_a_stale_cache_but_free_in_the_store_succeeds(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    """The cache still shows node-b's hold, the store already shows it released: the refusal on the cached copy is
    not final, the claim is decided again on a fresh read and lands."""
    cache, stored = await cached(memory_store, supervisor, holder="node-b")
    await behind(memory_store, stored, "")
    seen: list[str] = []
    record = await writes.update_usage(cache, "default", "cams-8120fe", watching(seen, claim_for("node-a")))
    assert seen == ["node-b", ""]  # refused on the cache, then decided on the store's copy
    assert record.usage.to_wire() == {"cams-8120fe-0": "node-a"}
    after = await memory_store.get("Instance", "cams-8120fe", "default")
    assert after["spec"]["deviceUsage"] == {"cams-8120fe-0": "node-a"}
    assert cache.instance("default", "cams-8120fe") is record


async def test_update_usage_re_decides_on_the_stored_copy_when_the_cache_is_stale(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    cache, stored = await cached(memory_store, supervisor)
    await behind(memory_store, stored, "node-b")
    seen: list[str] = []
    with pytest.raises(errors.Refused, match="held by node-b"):
        await writes.update_usage(cache, "default", "cams-8120fe", watching(seen, claim_for("node-a")))
    assert seen == ["", "node-b"]  # first on the stale cache (Conflict), then on the fresh copy
    after = await memory_store.get("Instance", "cams-8120fe", "default")
    assert after["spec"]["deviceUsage"] == {"cams-8120fe-0": "node-b"}
    record = cache.instance("default", "cams-8120fe")
    assert record is not None
    assert record.usage.to_wire() == {"cams-8120fe-0": "node-b"}  # the refusal's read is cached


async def test_update_usage_without_a_cached_record_reads_and_validates_the_stored_one(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    await memory_store.create(instance())
    cache = cache_of(memory_store, supervisor)
    record = await writes.update_usage(cache, "default", "cams-8120fe", claim_for("node-a"))
    assert record.usage.to_wire() == {"cams-8120fe-0": "node-a"}
    assert cache.instance("default", "cams-8120fe") is record
    bad = instance("cams-a19705")
    bad["spec"]["capacity"] = "many"
    await memory_store.create(bad)
    with pytest.raises(errors.Invalid):
        await writes.update_usage(cache, "default", "cams-a19705", claim_for("node-a"))


async def test_update_usage_of_a_missing_instance_is_not_found_and_forgets_it(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    cache, _ = await cached(memory_store, supervisor)
    await memory_store.delete("Instance", "cams-8120fe", "default")
    with pytest.raises(errors.NotFound):
        await writes.update_usage(cache, "default", "cams-8120fe", claim_for("node-a"))
    assert cache.instance("default", "cams-8120fe") is None


async def test_mutate_instance_deletes_when_the_decision_says_so(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    cache, _ = await cached(memory_store, supervisor)
    assert (
        await writes.mutate_instance(
            cache, "default", "cams-8120fe", lambda obj: instances.left(obj, "node-a", 0, False)
        )
        is None
    )
    assert (await memory_store.list("Instance")).items == []
    assert cache.instance("default", "cams-8120fe") is None


# -- ConfigMaps and Secrets read by discoveryProperties --------------------------------------------------------


def reading(name: str = "cams", *secrets: str) -> dict[str, Any]:
    """A Configuration whose discoveryProperties read key `k` of each Secret named (in its own namespace)."""
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "discoveryHandler": {
                "name": "sim",
                "discoveryProperties": [
                    {"name": s, "valueFrom": {"secretKeyRef": {"name": s, "key": "k"}}} for s in secrets
                ],
            }
        },
    }


def secret(name: str, value: str = "YQ==", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default", **extra},
        "data": {"k": value},
        "type": "Opaque",
    }


async def started(store: Any, supervisor: Supervisor) -> NodeCache:
    cache = cache_of(store, supervisor)
    await cache.start()
    return cache


async def synced(cache: NodeCache, key: tuple[str, str]) -> None:
    await eventually(lambda: cache.sources.loaded(key), "the sources' informers to list")


async def test_only_secrets_a_configuration_reads_are_asked_for_and_only_their_data_kept(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    store = RecordingStore(memory_store)
    await memory_store.create(secret("auth", annotations={"big": "x" * 1000}))
    await memory_store.create(secret("unrelated"))
    await memory_store.create(reading("cams", "auth"))
    cache = await started(store, supervisor)
    await synced(cache, ("default", "cams"))
    heard: list[tuple[str, str, str]] = []
    cache.source_listeners.append(heard.append)
    await memory_store.update({**(await memory_store.get("Secret", "unrelated", "default")), "data": {"k": "Yg=="}})
    auth = await memory_store.get("Secret", "auth", "default")
    auth = await memory_store.update({**auth, "data": {"k": "Yw=="}})
    await eventually(lambda: bool(heard), "the change of auth")
    assert heard == [("Secret", "default", "auth")]
    assert cache.source_values() == {
        ("Secret", "default", "auth"): {
            "metadata": {
                "name": "auth",
                "namespace": "default",
                "resourceVersion": auth["metadata"]["resourceVersion"],
            },
            "data": {"k": "Yw=="},
        }
    }
    assert ("Secret", "unrelated") not in store.delivered
    assert {c for c in store.calls if c[1] == "Secret"} == {
        ("list", "Secret", "default", "metadata.name=auth"),
        ("watch", "Secret", "default", "metadata.name=auth"),
    }
    assert cache.sources.referrers(("Secret", "default", "auth")) == [("default", "cams")]


async def test_a_secret_no_configuration_reads_any_more_is_no_longer_watched(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    await memory_store.create(secret("auth"))
    await memory_store.create(reading("one", "auth"))
    await memory_store.create(reading("two", "auth"))
    cache = await started(memory_store, supervisor)
    await synced(cache, ("default", "one"))
    assert cache.sources.referrers(("Secret", "default", "auth")) == [("default", "one"), ("default", "two")]
    one = await memory_store.get("Configuration", "one", "default")
    await memory_store.update({**one, "spec": reading("one")["spec"]})  # no longer reads it
    await eventually(lambda: cache.sources.referrers(("Secret", "default", "auth")) == [("default", "two")])
    assert cache.sources.watched() == [("Secret", "default", "auth")]
    await memory_store.delete("Configuration", "two", "default")
    await eventually(lambda: cache.sources.watched() == [], "the informer of auth to stop")
    assert cache.source_values() == {}


async def test_a_missing_secret_is_known_absent_and_appears_when_created(
    memory_store: MemoryStore, supervisor: Supervisor
) -> None:
    await memory_store.create(reading("cams", "later"))
    cache = await started(memory_store, supervisor)
    await synced(cache, ("default", "cams"))
    assert cache.source_values() == {}
    await memory_store.create(secret("later"))
    await eventually(lambda: bool(cache.source_values()), "the watch to deliver the new Secret")
    assert list(cache.source_values()) == [("Secret", "default", "later")]


@given(
    st.one_of(
        st.text(max_size=30),
        st.builds(lambda v, n: f"C:{v}:{n}", st.text(max_size=8), st.text(max_size=8)),
        st.builds(lambda c, n: f"D:default/{c}:{n}", st.text(max_size=8), st.text(max_size=8)),
        st.integers(),
        st.none(),
    )
)
def test_an_instance_routes_to_every_node_a_holder_names_as_the_slot_rules_read_it(raw: Any) -> None:
    """Never fewer routes than holders: a node must hear of every Instance whose slots name it (it frees them)."""
    named = named_node(raw)
    assert named is None or named in instance_routes({"spec": {"nodes": ["node-x"], "deviceUsage": {"c-0": raw}}})


def test_an_instance_routes_to_its_nodes_its_holders_and_orphaned_when_it_lists_none() -> None:
    held = {"a-0": "node-b", "a-1": "C:a-1:node-c", "a-2": "D:default/claim:node-d", "a-3": ""}
    assert instance_routes({"spec": {"nodes": ["node-a"], "deviceUsage": held}}) == {
        "node-a",
        "node-b",
        "node-c",
        "node-d",
    }
    assert instance_routes({"spec": {"nodes": [], "deviceUsage": {"a-0": ""}}}) == {ORPHANED}
    assert instance_routes({"spec": "broken"}) == {ORPHANED}
