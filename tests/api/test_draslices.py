"""ResourceSlices from Instances (api.draslices): devices per the DRA convention, and pools planned within Kubernetes'
limits, with generations bumped only when one write cannot carry the change."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from devplace.api import (
    PUBLISHER_LABEL,
    UNHEALTHY_TAINT,
    NodeSelector,
    SliceSupport,
    SliceWrite,
    instance_devices,
    local_pool,
    normalize,
    plan_pool,
    probe_slice,
    shared_pool,
    support_of,
)

FULL = SliceSupport(consumable=True, taints=True)
BARE = SliceSupport(consumable=False, taints=False)
POOL = local_pool("node-a")


def instance(name: str, capacity: int = 1, props: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "configurationName": "cams",
            "nodes": ["node-a"],
            "shared": False,
            "capacity": capacity,
            "brokerProperties": props or {},
            **spec,
        },
    }


def devices(count: int, *, tainted: int = 0, start: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(start, start + count):
        out += instance_devices(instance(f"cams-{i:06x}"), support=FULL, unhealthy=i - start < tainted)
    return out


def apply(writes: list[SliceWrite], stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The store after `writes` (each checked as the API server checks a ResourceSlice, and CAS-checked)."""
    by_name = {s["metadata"]["name"]: s for s in stored}
    revision = max((int(s["metadata"]["resourceVersion"]) for s in stored), default=0)
    for write in writes:
        name = write.name
        if write.op == "delete":
            assert by_name[name]["metadata"]["resourceVersion"] == write.body["metadata"]["resourceVersion"]
            del by_name[name]
            continue
        body = normalize(write.body)  # refuses what kube-apiserver's validation refuses (api.dra)
        if write.op == "create":
            assert name not in by_name
        else:
            assert by_name[name]["metadata"]["resourceVersion"] == write.body["metadata"]["resourceVersion"]
        revision += 1
        body["metadata"]["resourceVersion"] = str(revision)
        by_name[name] = body
    return sorted(by_name.values(), key=lambda s: s["metadata"]["name"])


def published(stored: list[dict[str, Any]]) -> list[str]:
    """The device names a consumer sees: the pool's newest generation, if complete."""
    newest = max(s["spec"]["pool"]["generation"] for s in stored)
    current = [s for s in stored if s["spec"]["pool"]["generation"] == newest]
    assert all(s["spec"]["pool"]["resourceSliceCount"] == len(current) for s in current)
    return sorted(d["name"] for s in current for d in s["spec"]["devices"])


# -- devices ----------------------------------------------------------------------------------------------------------


def test_a_capacity_one_instance_is_one_device_naming_its_instance() -> None:
    [device] = instance_devices(instance("cams-0a0b0c", props={"ip": "10.0.0.1", "port": "554"}), support=FULL)
    assert device == {
        "name": "cams-0a0b0c",
        "attributes": {
            "configuration": {"string": "cams"},
            "node": {"string": "node-a"},
            "ip": {"string": "10.0.0.1"},
            "port": {"int": 554},
            "instance": {"string": "cams-0a0b0c"},
        },
    }


def test_capacity_slots_are_one_consumable_device_where_the_cluster_keeps_the_fields() -> None:
    [device] = instance_devices(instance("cams-0a0b0c", capacity=3), support=FULL)
    assert device["allowMultipleAllocations"] is True
    assert device["capacity"] == {
        "slots": {"value": "3", "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "3", "step": "1"}}}
    }
    assert "slot" not in device["attributes"]


def test_capacity_slots_are_n_devices_with_a_slot_attribute_where_it_does_not() -> None:
    found = instance_devices(instance("cams-0a0b0c", capacity=3), support=BARE)
    assert [(d["name"], d["attributes"]["slot"], d["attributes"]["instance"]) for d in found] == [
        (f"cams-0a0b0c-{i}", {"int": i}, {"string": "cams-0a0b0c"}) for i in range(3)
    ]
    assert not any("allowMultipleAllocations" in d or "capacity" in d for d in found)


def test_an_unhealthy_device_is_tainted_where_taints_are_kept_and_left_out_where_not() -> None:
    [device] = instance_devices(instance("cams-0a0b0c"), support=FULL, unhealthy=True)
    assert device["taints"] == [{"key": UNHEALTHY_TAINT, "effect": "NoSchedule"}]
    assert instance_devices(instance("cams-0a0b0c"), support=BARE, unhealthy=True) == []


def test_a_device_keeps_32_keys_the_last_broker_properties_by_name_giving_way() -> None:
    props = {f"p{i:02d}": "x" for i in range(40)}
    device, _ = instance_devices(instance("cams-0a0b0c", capacity=2, props=props), support=BARE)
    keys = set(device["attributes"])
    assert len(keys) == 32
    assert {"configuration", "node", "instance", "slot"} <= keys
    assert "p27" in keys
    assert "p28" not in keys  # 28 properties fit beside the 4 keys devplace sets


def test_the_probe_says_what_a_cluster_kept() -> None:
    sent = probe_slice("devplace.io-probe-node-a", "node-a")
    assert support_of(sent) == FULL
    stripped = {**sent, "spec": {**sent["spec"], "devices": [{"name": "probe", "capacity": {"slots": {"value": "2"}}}]}}
    assert support_of(stripped) == BARE
    assert sent["spec"]["nodeName"] == "node-a"
    assert sent["spec"]["driver"] == "probe.devplace.io"


# -- pools ----------------------------------------------------------------------------------------------------------


def test_a_local_pool_is_named_after_its_node_and_split_at_128_devices() -> None:
    stored = apply(plan_pool(POOL, devices(300), []), [])
    assert [(s["metadata"]["name"], len(s["spec"]["devices"])) for s in stored] == [
        ("node-a-devplace.io-0", 128),
        ("node-a-devplace.io-1", 128),
        ("node-a-devplace.io-2", 44),
    ]
    assert {(s["spec"]["nodeName"], s["spec"]["pool"]["name"]) for s in stored} == {("node-a", "node-a")}
    assert {str(s["spec"]["pool"]) for s in stored} == {
        str({"name": "node-a", "generation": 1, "resourceSliceCount": 3})
    }
    assert {s["metadata"]["labels"][PUBLISHER_LABEL] for s in stored} == {"agent"}


def test_a_slice_with_a_tainted_device_holds_at_most_64() -> None:
    stored = apply(plan_pool(POOL, devices(130, tainted=1), []), [])
    assert [len(s["spec"]["devices"]) for s in stored] == [64, 66]


def test_an_unchanged_pool_writes_nothing() -> None:
    stored = apply(plan_pool(POOL, devices(300), []), [])
    assert plan_pool(POOL, devices(300), stored) == []


def test_a_change_to_one_device_rewrites_only_its_slice_at_the_same_generation() -> None:
    stored = apply(plan_pool(POOL, devices(300), []), [])
    changed = devices(300)
    changed[200]["attributes"]["ip"] = {"string": "10.0.0.9"}
    writes = plan_pool(POOL, changed, stored)
    assert [(w.op, w.name, w.body["spec"]["pool"]["generation"]) for w in writes] == [
        ("update", "node-a-devplace.io-1", 1)
    ]


def test_a_new_device_goes_where_there_is_room_and_a_gone_one_leaves_its_slice_only() -> None:
    stored = apply(plan_pool(POOL, devices(300), []), [])
    added = plan_pool(POOL, [*devices(300), *devices(1, start=0xFFFF)], stored)
    assert [(w.op, w.name) for w in added] == [("update", "node-a-devplace.io-2")]
    removed = plan_pool(POOL, devices(300)[1:], stored)
    assert [(w.op, w.name) for w in removed] == [("update", "node-a-devplace.io-0")]


def test_a_new_slice_bumps_the_generation_and_rewrites_every_slice() -> None:
    stored = apply(plan_pool(POOL, devices(256), []), [])
    writes = plan_pool(POOL, devices(257), stored)
    assert [(w.op, w.name, w.body["spec"]["pool"]) for w in writes] == [
        ("update", "node-a-devplace.io-0", {"name": "node-a", "generation": 2, "resourceSliceCount": 3}),
        ("update", "node-a-devplace.io-1", {"name": "node-a", "generation": 2, "resourceSliceCount": 3}),
        ("create", "node-a-devplace.io-2", {"name": "node-a", "generation": 2, "resourceSliceCount": 3}),
    ]


def test_a_node_that_sees_no_device_any_more_deletes_its_slices() -> None:
    stored = apply(plan_pool(POOL, devices(130), []), [])
    writes = plan_pool(POOL, [], stored)
    assert [(w.op, w.name) for w in writes] == [("delete", "node-a-devplace.io-0"), ("delete", "node-a-devplace.io-1")]
    assert apply(writes, stored) == []


def test_slices_of_an_older_generation_or_a_foreign_name_are_deleted() -> None:
    stored = apply(plan_pool(POOL, devices(2), []), [])
    stale = {**stored[0], "metadata": {**stored[0]["metadata"], "name": "node-a-devplace.io-7"}}
    stale = {**stale, "spec": {**stale["spec"], "pool": {**stale["spec"]["pool"], "generation": 0}}}
    odd = {**stored[0], "metadata": {**stored[0]["metadata"], "name": "something-else"}}
    writes = plan_pool(POOL, devices(2), [*stored, stale, odd])
    assert sorted((w.op, w.name) for w in writes) == [("delete", "node-a-devplace.io-7"), ("delete", "something-else")]


def test_a_taint_time_added_by_the_server_is_kept_and_is_no_change() -> None:
    stored = apply(plan_pool(POOL, devices(3, tainted=1), []), [])
    stored[0]["spec"]["devices"][0]["taints"][0]["timeAdded"] = "2026-11-26T18:00:00Z"
    assert plan_pool(POOL, devices(3, tainted=1), stored) == []
    changed = devices(3, tainted=1)
    changed[1]["attributes"]["ip"] = {"string": "10.0.0.9"}
    [write] = plan_pool(POOL, changed, stored)
    assert write.body["spec"]["devices"][0]["taints"][0]["timeAdded"] == "2026-11-26T18:00:00Z"


def test_a_shared_pool_is_per_node_set_with_a_node_selector_naming_them() -> None:
    spec = shared_pool(["node-b", "node-a", "node-b"])
    assert spec == shared_pool(["node-a", "node-b"])
    assert spec != shared_pool(["node-a", "node-c"])
    assert spec.placement == {  # a field requirement takes one value only (Kubernetes): the kubelet's hostname label
        "nodeSelector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a", "node-b"]}
                    ]
                }
            ]
        }
    }
    assert shared_pool(["node-a"]).placement == {
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]
        }
    }
    for nodes in (["node-a"], ["node-a", "node-b"]):  # what devplace's scheduler reads, with Kubernetes' rules
        [term] = shared_pool(nodes).placement["nodeSelector"]["nodeSelectorTerms"]
        selector = NodeSelector.from_wire([term], "nodeSelector.nodeSelectorTerms")
        assert selector.matches({"kubernetes.io/hostname": "node-a"}, "node-a")
        assert not selector.matches({"kubernetes.io/hostname": "node-c"}, "node-c")
    [stored] = apply(plan_pool(spec, devices(1), []), [])
    assert "nodeName" not in stored["spec"]
    assert stored["metadata"]["labels"] == {PUBLISHER_LABEL: "controller"}


@settings(max_examples=60, deadline=None)
@given(
    before=st.sets(st.integers(0, 400), max_size=300),
    after=st.sets(st.integers(0, 400), max_size=300),
    tainted=st.sets(st.integers(0, 400), max_size=40),
)
def test_any_change_converges_to_a_complete_pool_within_the_limits(
    before: set[int], after: set[int], tainted: set[int]
) -> None:
    def wanted(ids: set[int]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for i in sorted(ids):
            out += instance_devices(instance(f"cams-{i:06x}"), support=FULL, unhealthy=i in tainted)
        return out

    stored = apply(plan_pool(POOL, wanted(before), []), [])
    writes = plan_pool(POOL, wanted(after), stored)
    stored = apply(writes, stored)
    assert plan_pool(POOL, wanted(after), stored) == []
    if not after:
        assert stored == []
        return
    assert published(stored) == sorted(f"cams-{i:06x}" for i in after)
    for item in stored:
        taints = any(d.get("taints") for d in item["spec"]["devices"])
        assert 0 < len(item["spec"]["devices"]) <= (64 if taints else 128)
    assert len(stored) == len(plan_pool(POOL, wanted(after), []))  # never more slices than packing needs
    generation_kept = all(w.body["spec"]["pool"]["generation"] == 1 for w in writes if w.op != "delete")
    assert generation_kept or len([w for w in writes if w.op != "delete"]) == len(stored)
