"""The agent's cache: newest revision wins, deletions are final, bad objects are absent, CAS re-decides."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from devplace import errors
from devplace.agent import slots
from devplace.agent.caches import NodeCache
from devplace.agent.instances import InstanceRecord
from devplace.agent.slots import Usage
from devplace.store import MemoryStore


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


def test_an_older_revision_never_replaces_a_newer_one(memory_store: MemoryStore) -> None:
    cache = NodeCache(memory_store, "node-a")
    cache.apply("Instance", "MODIFIED", instance(rv=7, holder="node-a"))
    cache.apply("Instance", "MODIFIED", instance(rv=6, holder=""))
    record = cache.instance("default", "cams-8120fe")
    assert record is not None
    assert record.resource_version == 7
    assert record.usage.to_wire() == {"cams-8120fe-0": "node-a"}


def test_a_deleted_object_is_not_resurrected_by_a_late_write_result(memory_store: MemoryStore) -> None:
    cache = NodeCache(memory_store, "node-a")
    cache.apply("Instance", "ADDED", instance(rv=5))
    cache.apply("Instance", "DELETED", instance(rv=9))
    cache.apply("Instance", "MODIFIED", instance(rv=8), own=True)
    assert cache.instance("default", "cams-8120fe") is None
    assert cache.instances_of("default", "cams") == []


def test_listeners_hear_every_change_with_kind_and_key(memory_store: MemoryStore) -> None:
    cache = NodeCache(memory_store, "node-a")
    heard: list[tuple[str, tuple[str, str]]] = []
    cache.listeners.append(lambda kind, key: heard.append((kind, key)))
    cache.apply("Instance", "ADDED", instance(rv=5))
    cache.apply("Instance", "ADDED", instance(rv=5))  # a duplicate is not a change
    cache.apply("Instance", "DELETED", instance(rv=6))
    assert heard == [("Instance", ("default", "cams-8120fe"))] * 2


def test_an_invalid_instance_is_absent_and_reported_once(
    memory_store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    cache = NodeCache(memory_store, "node-a")
    cache.apply("Instance", "ADDED", instance(rv=5))
    with caplog.at_level(logging.WARNING, logger="devplace.agent.caches"):
        for rv in (6, 7, 8):
            cache.apply("Instance", "MODIFIED", instance(rv=rv, holder="C:broken"))
    assert cache.instance("default", "cams-8120fe") is None
    assert len([r for r in caplog.records if "ignoring Instance" in r.message]) == 1
    assert "spec.deviceUsage.cams-8120fe-0" in caplog.records[0].message
    cache.apply("Instance", "MODIFIED", instance(rv=9, holder="node-a"))
    assert cache.instance("default", "cams-8120fe") is not None


def test_pods_of_other_nodes_are_not_kept(memory_store: MemoryStore) -> None:
    cache = NodeCache(memory_store, "node-a")
    for name, node in (("mine", "node-a"), ("theirs", "node-b")):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": "3", "uid": name},
            "spec": {"nodeName": node},
            "status": {"phase": "Running"},
        }
        cache.apply("Pod", "ADDED", pod)
    assert list(cache.pods) == [("default", "mine")]


async def test_mutate_instance_re_decides_on_the_stored_copy_when_the_cache_is_stale(
    memory_store: MemoryStore,
) -> None:
    stored = await memory_store.create(instance())
    cache = NodeCache(memory_store, "node-a")
    cache.apply("Instance", "ADDED", stored)
    newer = dict(stored)
    newer["spec"] = {**stored["spec"], "deviceUsage": {"cams-8120fe-0": "node-b"}}
    await memory_store.update(newer)  # the cache has not seen this yet
    seen: list[str] = []

    def claim(obj: dict[str, Any]) -> dict[str, Any] | None:
        holder = obj["spec"]["deviceUsage"]["cams-8120fe-0"]
        seen.append(holder)
        if holder:
            return None
        return {**obj, "spec": {**obj["spec"], "deviceUsage": {"cams-8120fe-0": "node-a"}}}

    result = await cache.mutate_instance("default", "cams-8120fe", claim)
    assert seen == ["", "node-b"]  # first on the stale cache (Conflict), then on the fresh copy
    assert result["spec"]["deviceUsage"] == {"cams-8120fe-0": "node-b"}


def claim_for(node: str) -> Callable[[InstanceRecord], Usage | None]:
    """The IL claim of slot 0 for `node` (None when it already holds it; refused when someone else does)."""

    def decide(record: InstanceRecord) -> Usage | None:
        outcome = slots.claim_slots(record.usage, [f"{record.name}-0"], node, node in record.nodes)
        if isinstance(outcome, slots.Refusal):
            raise errors.Refused(outcome.reason)
        return outcome.usage if outcome.changed else None

    return decide


async def test_update_usage_on_a_current_cache_writes_once_and_caches_what_it_wrote(
    memory_store: MemoryStore,
) -> None:
    stored = await memory_store.create(instance())
    cache = NodeCache(memory_store, "node-a")
    cache.apply("Instance", "ADDED", stored)
    before = cache.instance("default", "cams-8120fe")
    assert before is not None
    heard: list[tuple[str, tuple[str, str]]] = []
    cache.listeners.append(lambda kind, key: heard.append((kind, key)))

    record = await cache.update_usage("default", "cams-8120fe", claim_for("node-a"))

    in_store = await memory_store.get("Instance", "cams-8120fe", "default")
    assert in_store["spec"]["deviceUsage"] == {"cams-8120fe-0": "node-a"}
    assert record.resource_version == int(in_store["metadata"]["resourceVersion"]) == before.resource_version + 1
    assert cache.instance("default", "cams-8120fe") is record
    assert record.usage.to_wire() == {"cams-8120fe-0": "node-a"}
    assert record.nodes is before.nodes  # only the usage was new: nothing else parsed again
    assert heard == [("Instance", ("default", "cams-8120fe"))]
    assert before.obj["spec"]["deviceUsage"] == {"cams-8120fe-0": ""}  # the cached object was not changed


async def test_update_usage_deciding_nothing_writes_nothing(memory_store: MemoryStore) -> None:
    stored = await memory_store.create(instance(holder="node-a"))
    cache = NodeCache(memory_store, "node-a")
    cache.apply("Instance", "ADDED", stored)
    record = await cache.update_usage("default", "cams-8120fe", claim_for("node-a"))  # a re-offer
    assert record.resource_version == int(stored["metadata"]["resourceVersion"])
    after = await memory_store.get("Instance", "cams-8120fe", "default")
    assert after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


async def test_update_usage_re_decides_on_the_stored_copy_when_the_cache_is_stale(memory_store: MemoryStore) -> None:
    stored = await memory_store.create(instance())
    cache = NodeCache(memory_store, "node-a")
    cache.apply("Instance", "ADDED", stored)
    newer = {**stored, "spec": {**stored["spec"], "deviceUsage": {"cams-8120fe-0": "node-b"}}}
    await memory_store.update(newer)  # the cache has not seen this yet
    seen: list[str] = []
    claim = claim_for("node-a")

    def watching(record: InstanceRecord) -> Usage | None:
        seen.append(record.usage.to_wire()["cams-8120fe-0"])
        return claim(record)

    with pytest.raises(errors.Refused, match="held by node-b"):
        await cache.update_usage("default", "cams-8120fe", watching)
    assert seen == ["", "node-b"]  # first on the stale cache (Conflict), then on the fresh copy
    after = await memory_store.get("Instance", "cams-8120fe", "default")
    assert after["spec"]["deviceUsage"] == {"cams-8120fe-0": "node-b"}


async def test_update_usage_without_a_cached_record_reads_and_validates_the_stored_one(
    memory_store: MemoryStore,
) -> None:
    await memory_store.create(instance())
    cache = NodeCache(memory_store, "node-a")
    record = await cache.update_usage("default", "cams-8120fe", claim_for("node-a"))
    assert record.usage.to_wire() == {"cams-8120fe-0": "node-a"}
    assert cache.instance("default", "cams-8120fe") is record
    bad = instance("cams-a19705")
    bad["spec"]["capacity"] = "many"
    await memory_store.create(bad)
    with pytest.raises(errors.Invalid):
        await cache.update_usage("default", "cams-a19705", claim_for("node-a"))


async def test_update_usage_of_a_missing_instance_is_not_found(memory_store: MemoryStore) -> None:
    cache = NodeCache(memory_store, "node-a")
    with pytest.raises(errors.NotFound):
        await cache.update_usage("default", "cams-8120fe", claim_for("node-a"))


# -- ConfigMaps and Secrets read by discoveryProperties --------------------------------------------------------


def reading(name: str = "cams", *secrets: str, rv: int = 3) -> dict[str, Any]:
    """A Configuration whose discoveryProperties read key `k` of each Secret named (in its own namespace)."""
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)},
        "spec": {
            "discoveryHandler": {
                "name": "sim",
                "discoveryProperties": [
                    {"name": s, "valueFrom": {"secretKeyRef": {"name": s, "key": "k"}}} for s in secrets
                ],
            }
        },
    }


def secret(name: str, value: str = "YQ==", rv: int = 4, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv), **extra},
        "data": {"k": value},
        "type": "Opaque",
    }


def test_only_secrets_a_configuration_reads_are_kept_and_only_their_data(memory_store: MemoryStore) -> None:
    cache = NodeCache(memory_store, "node-a")
    heard: list[tuple[str, tuple[str, str]]] = []
    cache.listeners.append(lambda kind, key: heard.append((kind, key)))
    cache.apply("Configuration", "ADDED", reading("cams", "auth"))
    cache.apply("Secret", "ADDED", secret("auth", annotations={"big": "x" * 1000}))
    cache.apply("Secret", "ADDED", secret("unrelated"))
    assert cache.sources == {
        ("Secret", "default", "auth"): {
            "metadata": {"name": "auth", "namespace": "default", "resourceVersion": "4"},
            "data": {"k": "YQ=="},
        }
    }
    assert heard == [("Configuration", ("default", "cams")), ("Secret", ("default", "auth"))]
    assert cache.referrers(("Secret", "default", "auth")) == [("default", "cams")]
    assert cache.referrers(("Secret", "default", "unrelated")) == []


def test_a_secret_no_configuration_reads_any_more_is_forgotten(memory_store: MemoryStore) -> None:
    cache = NodeCache(memory_store, "node-a")
    cache.apply("Configuration", "ADDED", reading("one", "auth"))
    cache.apply("Configuration", "ADDED", reading("two", "auth"))
    cache.apply("Secret", "ADDED", secret("auth"))
    assert cache.referrers(("Secret", "default", "auth")) == [("default", "one"), ("default", "two")]
    cache.apply("Configuration", "MODIFIED", reading("one", rv=5))  # no longer reads it
    assert list(cache.sources) == [("Secret", "default", "auth")]
    cache.apply("Configuration", "DELETED", reading("two", "auth", rv=6))
    assert cache.sources == {}
    assert cache.referrers(("Secret", "default", "auth")) == []


async def test_a_newly_referenced_secret_is_read_once_and_a_missing_one_is_known_absent(
    memory_store: MemoryStore,
) -> None:
    stored = await memory_store.create(secret("auth"))
    cache = NodeCache(memory_store, "node-a")
    cache.apply("Secret", "ADDED", stored)  # before anything read it: dropped
    cache.apply("Configuration", "ADDED", reading("cams", "auth", "later"))
    assert cache.unloaded(("default", "cams")) == [("Secret", "default", "auth"), ("Secret", "default", "later")]
    await cache.load_sources(("default", "cams"))
    assert cache.unloaded(("default", "cams")) == []
    assert list(cache.sources) == [("Secret", "default", "auth")]
    assert cache.sources[("Secret", "default", "auth")]["data"] == {"k": "YQ=="}
    created = await memory_store.create(secret("later"))
    cache.apply("Secret", "ADDED", created)  # the watch keeps it current from now on
    assert sorted(cache.sources) == [("Secret", "default", "auth"), ("Secret", "default", "later")]


async def test_a_late_read_does_not_resurrect_a_secret_the_watch_saw_deleted(memory_store: MemoryStore) -> None:
    cache = NodeCache(memory_store, "node-a")
    cache.apply("Configuration", "ADDED", reading("cams", "auth"))
    cache.apply("Secret", "ADDED", secret("auth", rv=4))
    cache.apply("Secret", "DELETED", secret("auth", rv=9))
    cache.apply("Secret", "MODIFIED", secret("auth", rv=8))  # e.g. a read answered before the deletion
    assert cache.sources == {}
    assert cache.unloaded(("default", "cams")) == []  # known to be absent: nothing to read


def test_a_relist_keeps_only_read_secrets_and_knows_the_rest_are_absent(memory_store: MemoryStore) -> None:
    cache = NodeCache(memory_store, "node-a")
    cache.apply("Configuration", "ADDED", reading("cams", "auth", "gone"))
    cache.apply("Secret", "ADDED", secret("gone", rv=4))
    touched = cache.replace_all("Secret", [secret("auth", rv=7), secret("unrelated", rv=8)])
    assert touched == {("default", "auth"), ("default", "gone")}
    assert list(cache.sources) == [("Secret", "default", "auth")]
    assert cache.unloaded(("default", "cams")) == []
