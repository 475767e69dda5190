"""Instance lifecycle decisions: names, creation, joining, leaving, offline expiry, capacity sync."""

from __future__ import annotations

import hashlib
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.agent import _instances as instances
from devplace.agent import _slots as slots
from devplace.agent._instances import OFFLINE_SINCE, InstanceRecord
from devplace.agent._slots import IL
from devplace.api import Configuration
from devplace.api import _holders as holders
from devplace.discovery import Device
from devplace.discovery._devices import DeviceSpec, Mount
from devplace.store import DELETE
from tests.crds import FIXTURES, crd_problems, load_crd

NOW = 1_767_225_600.0
IL_A = IL("node-a")


def configuration(capacity: int = 2, broker_properties: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "akri-onvif", "namespace": "default", "uid": "cfg-uid", "resourceVersion": "3"},
        "spec": {
            "discoveryHandler": {"name": "sim", "discoveryDetails": ""},
            "capacity": capacity,
            "brokerProperties": broker_properties or {},
            **spec,
        },
    }


CAM = Device("uuid-1", {"ONVIF_DEVICE_UUID": "uuid-1", "kind": "camera"}, shared=True)
USB = Device(
    "/sys/usb1",
    {"UDEV_DEVNODE": "/dev/video0"},
    shared=False,
    mounts=(Mount("/m", "/host/m", True),),
    device_specs=(DeviceSpec("/dev/video0", "/dev/video0", "rw"),),
)


def stored(obj: dict[str, Any], rv: int = 7) -> dict[str, Any]:
    out = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}
    return out


def test_instance_name_is_a_three_byte_blake2b_of_the_device_id() -> None:
    digest = hashlib.blake2b(b"uuid-1", digest_size=3).hexdigest()
    assert instances.instance_name("akri-onvif", "uuid-1", "node-a", shared=True) == f"akri-onvif-{digest}"
    assert len(digest) == 6


def test_local_devices_get_one_instance_per_node() -> None:
    a = instances.instance_name("usb", "/sys/usb1", "node-a", shared=False)
    b = instances.instance_name("usb", "/sys/usb1", "node-b", shared=False)
    assert a != b
    assert a == "usb-" + hashlib.blake2b(b"/sys/usb1node-a", digest_size=3).hexdigest()
    assert instances.instance_name("usb", "/sys/usb1", "node-a", True) == instances.instance_name(
        "usb", "/sys/usb1", "node-b", True
    )


def test_new_instance_carries_slots_properties_and_owner() -> None:
    obj = instances.new_instance(configuration(broker_properties={"RESOLUTION": "720p"}), CAM, "node-a")
    name = instances.instance_name("akri-onvif", "uuid-1", "node-a", True)
    assert obj["apiVersion"] == "akri.sh/v0"
    assert obj["metadata"]["name"] == name
    assert obj["metadata"]["namespace"] == "default"
    assert obj["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "akri.sh/v0",
            "kind": "Configuration",
            "name": "akri-onvif",
            "uid": "cfg-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert obj["spec"] == {
        "configurationName": "akri-onvif",
        "cdiName": f"akri.sh/akri-onvif={name.rpartition('-')[2]}",
        "capacity": 2,
        "shared": True,
        "nodes": ["node-a"],
        "deviceUsage": {f"{name}-0": "", f"{name}-1": ""},
        "brokerProperties": {"ONVIF_DEVICE_UUID": "uuid-1", "kind": "camera", "RESOLUTION": "720p"},
    }


AKRI_INSTANCE_CRD = load_crd(FIXTURES / "akri-instance-crd.yaml")


def test_new_instances_validate_against_akris_instance_crd_for_shared_and_local_devices() -> None:
    for device in (CAM, USB):
        obj = instances.new_instance(configuration(), device, "node-a")
        assert crd_problems(obj, AKRI_INSTANCE_CRD) == []
    assert instances.new_instance(configuration(), USB, "node-a")["spec"]["shared"] is False


def test_every_write_of_the_lifecycle_stays_valid_against_akris_instance_crd() -> None:
    obj = stored(instances.new_instance(configuration(), CAM, "node-a"))
    joined = instances.joined({**obj, "spec": {**obj["spec"], "nodes": ["node-b"]}}, "node-a")
    left = instances.left(obj, "node-a", NOW, configuration_gone=False)  # shared: stays, stamped offline
    synced = instances.synced(obj, "node-a", 3, {"RESOLUTION": "1080p"}, {"ONVIF_DEVICE_UUID": "uuid-1"})
    for written in (joined, left, synced):
        assert isinstance(written, dict)
        assert crd_problems(written, AKRI_INSTANCE_CRD) == []


def test_the_crd_check_catches_what_akris_crd_refuses() -> None:
    """The check can fail: devplace's old extra `spec.attributes` and a missing `cdiName` are both refused."""
    obj = instances.new_instance(configuration(), CAM, "node-a")
    del obj["spec"]["cdiName"]
    obj["spec"]["attributes"] = {}
    assert crd_problems(obj, AKRI_INSTANCE_CRD) == ["spec.cdiName: required", "spec.attributes: unknown field"]


@pytest.mark.parametrize(
    ("device_id", "node", "shared", "digest"),
    [  # Akri's own unit-test vectors (agent/src/discovery_handler_manager/discovery_handler_registry.rs)
        ("my_local_device", "my_node", False, "e77db4"),
        ("my_local_device", "my_other_node", False, "099763"),
        ("my_shared_device", "my_node", True, "4294ea"),
    ],
)
def test_instance_names_and_cdi_names_match_akris_for_the_same_device(
    device_id: str, node: str, shared: bool, digest: str
) -> None:
    assert instances.instance_name("my_config", device_id, node, shared) == f"my_config-{digest}"
    assert holders.cdi_name("akri.sh/v0", "my_config", digest) == f"akri.sh/my_config={digest}"


def test_the_cdi_name_follows_the_configurations_group() -> None:
    akri = instances.new_instance(configuration(), CAM, "node-a")
    ours = instances.new_instance({**configuration(), "apiVersion": "devplace.io/v1alpha1"}, CAM, "node-a")
    digest = akri["metadata"]["name"].rpartition("-")[2]
    assert akri["spec"]["cdiName"] == f"akri.sh/akri-onvif={digest}"
    assert ours["spec"]["cdiName"] == f"devplace.io/akri-onvif={digest}"


def test_sync_gives_an_instance_written_without_a_cdi_name_its_cdi_name() -> None:
    obj = stored(instances.new_instance(configuration(), CAM, "node-a"))
    del obj["spec"]["cdiName"]
    p = instances.plan("node-a", cfg_model(), [CAM], [record(obj)], NOW, 300.0)
    assert p.sync == [obj["metadata"]["name"]]
    out = instances.synced(obj, "node-a", 2, {})
    assert out is not None
    assert out["spec"]["cdiName"] == instances.expected_cdi_name(obj)
    assert instances.synced(out, "node-a", 2, {}) is None


MOVED = Device("uuid-1", {"ONVIF_DEVICE_UUID": "uuid-1", "ONVIF_DEVICE_IP_ADDRESS": "10.0.0.22"}, shared=True)


def test_properties_changed_under_the_same_id_are_synced_into_broker_properties() -> None:
    """A camera's IP changed (same device id): the Instance's brokerProperties become the new ones, the
    Configuration's still over them, and a property the device no longer reports goes."""
    obj = stored(instances.new_instance(configuration(broker_properties={"RESOLUTION": "720p"}), CAM, "node-a"))
    name = obj["metadata"]["name"]
    cfg = Configuration.from_obj(configuration(broker_properties={"RESOLUTION": "720p"}))
    assert instances.plan("node-a", cfg, [CAM], [record(obj)], NOW, 300.0).empty
    p = instances.plan("node-a", cfg, [MOVED], [record(obj)], NOW, 300.0)
    assert p.sync == [name]
    assert p.device_properties == {name: MOVED.properties}
    out = instances.synced(obj, "node-a", 2, {"RESOLUTION": "720p"}, p.device_properties[name])
    assert out is not None
    assert out["spec"]["brokerProperties"] == {
        "ONVIF_DEVICE_UUID": "uuid-1",
        "ONVIF_DEVICE_IP_ADDRESS": "10.0.0.22",
        "RESOLUTION": "720p",
    }
    assert out["spec"]["deviceUsage"] == obj["spec"]["deviceUsage"]
    assert instances.plan("node-a", cfg, [MOVED], [record(stored(out))], NOW, 300.0).empty


def test_a_local_devices_renumbered_devnode_is_synced_by_its_node() -> None:
    obj = stored(instances.new_instance(configuration(), USB, "node-a"))
    renumbered = Device("/sys/usb1", {"UDEV_DEVNODE": "/dev/video1"}, shared=False)
    p = instances.plan("node-a", cfg_model(), [renumbered], [record(obj)], NOW, 300.0)
    assert p.device_properties == {obj["metadata"]["name"]: {"UDEV_DEVNODE": "/dev/video1"}}


@pytest.mark.parametrize(("nodes", "writer"), [(["node-a", "node-b"], "node-a"), (["node-b", "node-a"], "node-b")])
def test_only_the_first_node_of_a_shared_instance_writes_its_device_properties(nodes: list[str], writer: str) -> None:
    """Two nodes that see a shared device differently never take turns rewriting it: the first listed writes."""
    obj = stored(instances.new_instance(configuration(), CAM, "node-a"))
    obj["spec"]["nodes"] = nodes
    for node in ("node-a", "node-b"):
        p = instances.plan(node, cfg_model(), [MOVED], [record(obj)], NOW, 300.0)
        assert bool(p.sync) is (node == writer)
        assert instances.writes_properties(True, nodes, node) is (node == writer)
        out = instances.synced(obj, node, 2, {}, MOVED.properties)
        assert (out is not None) is (node == writer)


def _instance(nodes: list[str], shared: bool = True, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    obj = instances.new_instance(configuration(), CAM if shared else USB, "node-a")
    obj["spec"]["nodes"] = nodes
    if annotations:
        obj["metadata"]["annotations"] = annotations
    return stored(obj)


@pytest.mark.parametrize(
    ("nodes", "annotations", "expected_nodes", "changes"),
    [
        (["node-b"], None, ["node-b", "node-a"], True),
        (["node-a"], None, ["node-a"], False),
        ([], {OFFLINE_SINCE: "2026-01-01T00:00:00.000000Z"}, ["node-a"], True),  # rejoin in time clears the stamp
    ],
)
def test_joined_adds_only_this_node(
    nodes: list[str], annotations: dict[str, str] | None, expected_nodes: list[str], changes: bool
) -> None:
    out = instances.joined(_instance(nodes, annotations=annotations), "node-a")
    assert (out is not None) is changes
    if out is not None:
        assert out["spec"]["nodes"] == expected_nodes
        assert OFFLINE_SINCE not in (out["metadata"].get("annotations") or {})


@pytest.mark.parametrize(
    ("nodes", "shared", "gone", "expected"),
    [
        (["node-a", "node-b"], True, False, ["node-b"]),  # one node losing a shared device removes only itself
        (["node-a"], False, False, "delete"),  # a local device nobody sees: deleted at once
        (["node-a"], True, False, "stamped"),  # a shared one: offline grace starts
        (["node-a"], True, True, "delete"),  # Configuration gone: no grace
        (["node-b"], True, False, None),  # not ours to leave
    ],
)
def test_left_removes_this_node_and_decides_the_rest(
    nodes: list[str], shared: bool, gone: bool, expected: object
) -> None:
    obj = _instance(nodes, shared=shared)
    out = instances.left(obj, "node-a", NOW, gone)
    if expected is None:
        assert out is None
    elif expected == "delete":
        assert out is DELETE
    elif expected == "stamped":
        assert isinstance(out, dict)
        assert out["spec"]["nodes"] == []
        assert out["metadata"]["annotations"][OFFLINE_SINCE] == "2026-01-01T00:00:00.000000Z"
    else:
        assert isinstance(out, dict)
        assert out["spec"]["nodes"] == expected


@pytest.mark.parametrize(
    ("shared", "stamp_age", "gone", "deleted"),
    [
        (True, 299.0, False, False),
        (True, 300.0, False, True),
        (True, None, False, False),
        (True, 1.0, True, True),
        (False, None, False, True),
    ],
)
def test_expired_waits_the_offline_grace_for_shared_instances(
    shared: bool, stamp_age: float | None, gone: bool, deleted: bool
) -> None:
    annotations = {OFFLINE_SINCE: instances.timestamp(NOW - stamp_age)} if stamp_age is not None else None
    obj = _instance([], shared=shared, annotations=annotations)
    assert instances.expired(obj, NOW, 300.0, gone) is (DELETE if deleted else None)


def test_expired_never_deletes_an_instance_someone_sees() -> None:
    assert instances.expired(_instance(["node-b"]), NOW, 0.0, True) is None


def test_synced_resizes_without_touching_held_slots_and_carries_broker_properties() -> None:
    obj = _instance(["node-a"])
    name = obj["metadata"]["name"]
    obj["spec"]["deviceUsage"] = {f"{name}-0": "", f"{name}-1": "node-b"}
    out = instances.synced(obj, "node-a", 1, {"RESOLUTION": "1080p"})
    assert out is not None
    assert out["spec"]["capacity"] == 1
    assert out["spec"]["deviceUsage"] == {f"{name}-0": "", f"{name}-1": "node-b"}
    assert out["spec"]["brokerProperties"]["RESOLUTION"] == "1080p"
    grown = instances.synced(obj, "node-a", 4, {})
    assert grown is not None
    assert grown["spec"]["deviceUsage"] == {f"{name}-{i}": ("node-b" if i == 1 else "") for i in range(4)}
    assert instances.synced(obj, "node-a", 2, {}) is None


def test_synced_repairs_what_the_node_owns_and_leaves_the_rest() -> None:
    obj = _instance(["node-a"])
    name = obj["metadata"]["name"]
    obj["spec"]["capacity"] = 1
    obj["spec"]["deviceUsage"] = {
        f"{name}-1": "C::node-a",  # malformed, names node-a: becomes its IL hold (released by the grace)
        f"{name}-2": "C:::",  # malformed, names nobody: left alone
        f"{name}-3": "",  # free beyond capacity: goes
        "bogus": "node-a",  # unnamed slot node-a holds: goes
        "stray": "node-b",  # unnamed slot node-b holds: node-b's to repair
    }
    out = instances.synced(obj, "node-a", 1, {})
    assert out is not None
    assert out["spec"]["deviceUsage"] == {
        f"{name}-0": "",
        f"{name}-1": "node-a",
        f"{name}-2": "C:::",
        "stray": "node-b",
    }
    assert instances.synced(out, "node-a", 1, {}) is None  # nothing more this node may do
    by_b = instances.synced(out, "node-b", 1, {})
    assert by_b is not None
    assert "stray" not in by_b["spec"]["deviceUsage"]


def record(obj: dict[str, Any]) -> InstanceRecord:
    return InstanceRecord.from_wire(obj)


def cfg_model(capacity: int = 2) -> Configuration:
    return Configuration.from_obj(configuration(capacity))


def test_plan_creates_joins_and_leaves_by_the_latest_device_list() -> None:
    other = Device("uuid-2", {}, shared=True)
    third = Device("uuid-3", {}, shared=True)
    theirs = _instance(["node-b"])  # uuid-1 seen by node-b: join
    gone_obj = instances.new_instance(configuration(), third, "node-a")  # uuid-3 no longer seen: leave
    p = instances.plan("node-a", cfg_model(), [CAM, other], [record(theirs), record(stored(gone_obj))], NOW, 300.0)
    assert p.create == [other]
    assert p.join == [theirs["metadata"]["name"]]
    assert p.leave == [gone_obj["metadata"]["name"]]
    assert p.expire == []


def test_plan_without_a_device_list_leaves_nothing() -> None:
    mine = _instance(["node-a"])
    p = instances.plan("node-a", cfg_model(), None, [record(mine)], NOW, 300.0)
    assert p.empty


def test_plan_syncs_capacity_changes_of_instances_this_node_sees() -> None:
    mine = _instance(["node-a"])
    p = instances.plan("node-a", cfg_model(capacity=3), [CAM], [record(mine)], NOW, 300.0)
    assert p.sync == [mine["metadata"]["name"]]


def test_plan_for_an_offline_shared_instance_waits_then_expires() -> None:
    stamped = _instance([], annotations={OFFLINE_SINCE: instances.timestamp(NOW - 100)})
    p = instances.plan("node-a", cfg_model(), [], [record(stamped)], NOW, 300.0)
    assert p.expire == []
    assert p.next_deadline == pytest.approx(NOW + 200)
    later = instances.plan("node-a", cfg_model(), [], [record(stamped)], NOW + 200, 300.0)
    assert later.expire == [stamped["metadata"]["name"]]


def test_plan_rejoins_an_offline_shared_instance_seen_again() -> None:
    stamped = _instance([], annotations={OFFLINE_SINCE: instances.timestamp(NOW - 100)})
    p = instances.plan("node-a", cfg_model(), [CAM], [record(stamped)], NOW, 300.0)
    assert p.join == [stamped["metadata"]["name"]]
    assert p.expire == []


def test_plan_stamps_an_unstamped_shared_instance_nobody_sees_and_comes_back_when_its_grace_ends() -> None:
    bare = _instance([])
    p = instances.plan("node-a", cfg_model(), [], [record(bare)], NOW, 300.0)
    assert p.mark_offline == [bare["metadata"]["name"]]
    assert p.next_deadline == pytest.approx(NOW + 300)  # the node that stamps it expires it: no later change wakes it
    out = instances.marked_offline(bare, NOW)
    assert out is not None
    assert out["metadata"]["annotations"][OFFLINE_SINCE] == instances.timestamp(NOW)


def test_plan_for_a_deleted_configuration_leaves_and_expires() -> None:
    mine = _instance(["node-a", "node-b"])
    orphan = stored(instances.new_instance(configuration(), Device("uuid-9", {}), "node-a"))
    orphan["spec"]["nodes"] = []
    p = instances.plan("node-a", None, None, [record(mine), record(orphan)], NOW, 300.0)
    assert p.leave == [mine["metadata"]["name"]]
    assert p.expire == [orphan["metadata"]["name"]]


def test_record_reads_a_holder_that_breaks_the_rules_as_unknown() -> None:
    bad = _instance(["node-a"])
    slot = next(iter(bad["spec"]["deviceUsage"]))
    bad["spec"]["deviceUsage"][slot] = "C:nope"
    parsed = instances.require_record(bad)
    assert parsed.usage.holders[slot] == slots.Unknown("C:nope")
    assert parsed.usage.to_wire() == bad["spec"]["deviceUsage"]  # kept exactly as stored


def test_record_refuses_an_instance_of_the_wrong_shape_naming_the_field() -> None:
    bad = _instance(["node-a"])
    bad["spec"]["capacity"] = 0
    with pytest.raises(errors.Invalid) as e:
        instances.require_record(bad)
    assert e.value.fields[0].path == "spec.capacity"
    assert bad["metadata"]["name"] in e.value.message


@given(st.text(min_size=1, max_size=40), st.booleans())
def test_instance_names_are_valid_object_names(device_id: str, shared: bool) -> None:
    name = instances.instance_name("cfg", device_id, "node-a", shared)
    assert name.startswith("cfg-")
    assert len(name) == 10
    assert all(c in "0123456789abcdef" for c in name[4:])


def _fields(record: InstanceRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "namespace": record.namespace,
        "configuration": record.configuration,
        "shared": record.shared,
        "nodes": record.nodes,
        "usage": (
            record.usage.instance,
            record.usage.capacity,
            list(record.usage.holders.items()),
            record.usage.held,
            record.usage.exact,
            record.usage.unreadable,
        ),
        "broker_properties": dict(record.broker_properties),
        "offline_since": record.offline_since,
        "resource_version": record.resource_version,
    }


_holder_wire = st.sampled_from(["", "node-a", "node-b", "C:x:node-a", "C::node-a"])  # the last breaks the grammar
_variants = st.fixed_dictionaries(
    {
        "holders": st.lists(_holder_wire, min_size=1, max_size=3),
        "capacity": st.integers(1, 3),
        "nodes": st.lists(st.sampled_from(["node-a", "node-b"]), max_size=2, unique=True),
        "props": st.dictionaries(st.sampled_from(["URL", "MODEL"]), st.sampled_from(["a", "b"]), max_size=2),
        "offline": st.booleans(),
    }
)


def _variant(v: dict[str, Any], rv: int) -> dict[str, Any]:
    obj = _instance(v["nodes"], annotations={OFFLINE_SINCE: instances.timestamp(NOW)} if v["offline"] else None)
    name = obj["metadata"]["name"]
    obj["spec"]["capacity"] = v["capacity"]
    obj["spec"]["deviceUsage"] = {slots.slot_name(name, i): h for i, h in enumerate(v["holders"])}
    obj["spec"]["brokerProperties"] = v["props"]
    return stored(obj, rv)


@given(_variants, _variants, st.booleans())
def test_a_record_parsed_against_its_predecessor_equals_one_parsed_from_scratch(
    before: dict[str, Any], after: dict[str, Any], counted: bool
) -> None:
    """Also what the predecessor's usage had counted (`exact`, `unreadable`, computed on first use) is what a usage
    read from scratch counts."""
    previous = InstanceRecord.from_wire(_variant(before, 7))
    if counted:
        exact = previous.usage.unreadable == () and len(before["holders"]) == before["capacity"]
        assert previous.usage.exact == exact
    obj = _variant(after, 8)
    assert _fields(InstanceRecord.from_wire(obj, previous=previous)) == _fields(InstanceRecord.from_wire(obj))


_EDITS: dict[str, Any] = {
    "usage": lambda o: o["spec"]["deviceUsage"].update({next(iter(o["spec"]["deviceUsage"])): "node-b"}),
    "stamps": lambda o: o["metadata"].update(resourceVersion="9", generation=4, managedFields=[{"manager": "x"}]),
    "numeric resourceVersion": lambda o: o["metadata"].update(resourceVersion=9),
    "null resourceVersion": lambda o: o["metadata"].update(resourceVersion=None),
    "text generation": lambda o: o["metadata"].update(generation="4"),
    "no generation": lambda o: o["metadata"].pop("generation", None),
    "label": lambda o: o["metadata"].update(labels={"a": "b"}),
    "name": lambda o: o["metadata"].update(name="other"),
    "nodes": lambda o: o["spec"].update(nodes=["node-b"]),
    "capacity": lambda o: o["spec"].update(capacity=3),
    "no usage": lambda o: o["spec"].pop("deviceUsage"),
    "properties": lambda o: o["spec"].update(brokerProperties={"URL": "x"}),
    "spec key": lambda o: o["spec"].update(extra=1),
    "top key": lambda o: o.update(status={}),
    "apiVersion": lambda o: o.update(apiVersion="akri.sh/v1"),
    "spec not a map": lambda o: o.update(spec=["x"]),
    "metadata not a map": lambda o: o.update(metadata="x"),
    "no spec": lambda o: o.pop("spec"),
}


def _edited(names: set[str]) -> dict[str, Any]:
    obj = _instance(["node-a"])
    obj["metadata"]["generation"] = 2
    obj["metadata"]["managedFields"] = [{"manager": "devplace"}]
    for name in [n for n in _EDITS if n in names]:  # in the order above: the structural edits last
        _EDITS[name](obj)
    return obj


def _check_answers_as_mappings_check(old_edits: set[str], edits: set[str]) -> bool:
    old, new = _edited(old_edits), _edited(edits)
    assert (type(old), type(new)) == (dict, dict)
    expected = instances._checked_before(MappingProxyType(new), MappingProxyType(old))
    assert instances._checked_before(new, old) == expected
    return expected


@pytest.mark.parametrize("edit", sorted(_EDITS))
def test_the_check_of_decoded_objects_answers_as_the_check_of_any_mappings_after_one_edit(edit: str) -> None:
    assert _check_answers_as_mappings_check(set(), {edit}) == (edit in ("usage", "stamps", "no generation"))
    _check_answers_as_mappings_check({edit}, set())


@given(st.sets(st.sampled_from(sorted(_EDITS))), st.sets(st.sampled_from(sorted(_EDITS))))
def test_the_check_of_decoded_objects_answers_as_the_check_of_any_mappings(
    old_edits: set[str], edits: set[str]
) -> None:
    """`_checked_before` of two dicts (compared whole, with the parts that may differ set aside) says what its
    key-by-key form says of the same objects seen as read-only mappings."""
    _check_answers_as_mappings_check(old_edits, edits)


def test_unchanged_parts_of_a_record_are_taken_over_not_parsed_again() -> None:
    first = InstanceRecord.from_wire(_instance(["node-a"]))
    obj = _instance(["node-a", "node-b"])
    obj["metadata"]["resourceVersion"] = "8"
    second = InstanceRecord.from_wire(obj, previous=first)
    assert second.usage is first.usage
    assert second.broker_properties is first.broker_properties
    assert second.nodes == ("node-a", "node-b")


def test_a_change_of_only_the_usage_is_not_checked_again_any_other_change_is(monkeypatch: pytest.MonkeyPatch) -> None:
    first = InstanceRecord.from_wire(_instance(["node-a"]))
    checked: list[str] = []
    real = instances.check_instance

    def counting(obj: Any) -> None:
        checked.append(obj["metadata"]["resourceVersion"])
        real(obj)

    monkeypatch.setattr(instances, "check_instance", counting)
    slot = next(iter(first.usage.holders))
    claimed = stored({**first.obj, "spec": {**first.obj["spec"], "deviceUsage": {slot: "node-b"}}}, 8)
    # a write's stamps move too: the generation (a spec change) and the field manager's entries
    claimed["metadata"] = {**claimed["metadata"], "generation": 2, "managedFields": [{"manager": "devplace"}]}
    second = InstanceRecord.from_wire(claimed, previous=first)
    assert checked == []
    assert second.usage.to_wire() == {slot: "node-b"}
    bad = stored({**claimed, "spec": {**claimed["spec"], "capacity": "many"}}, 9)
    with pytest.raises(errors.Invalid) as e:
        InstanceRecord.from_wire(bad, previous=second)
    assert [f.path for f in e.value.fields] == ["spec.capacity"]
    assert checked == ["9"]
    numeric_rv = {**claimed, "metadata": {**claimed["metadata"], "resourceVersion": 10}}
    with pytest.raises(errors.Invalid) as e:  # the check reads the resourceVersion's type
        InstanceRecord.from_wire(numeric_rv, previous=second)
    assert [f.path for f in e.value.fields] == ["metadata.resourceVersion"]
    assert checked == ["9", 10]
    text_generation = {**claimed, "metadata": {**claimed["metadata"], "resourceVersion": "11", "generation": "3"}}
    InstanceRecord.from_wire(text_generation, previous=second)  # a generation that is no integer: checked again
    assert checked == ["9", 10, "11"]


def test_with_usage_is_the_record_of_the_written_object() -> None:
    record = InstanceRecord.from_wire(_instance(["node-a"]))
    slot = next(iter(record.usage.holders))
    claim = record.usage.with_holders({slot: IL_A})
    written = {**record.obj, "spec": {**record.obj["spec"], "deviceUsage": claim.to_wire()}}
    written = stored(written, 12)
    after = record.with_usage(written, claim)
    assert _fields(after) == _fields(InstanceRecord.from_wire(written))
    assert after.obj is written
    assert record.resource_version == 7  # the old record is left as it was


def test_plan_joins_a_shared_instance_another_node_made_which_it_finds_by_lookup() -> None:
    theirs = _instance(["node-b"])
    name = theirs["metadata"]["name"]
    found = {name: record(theirs)}
    p = instances.plan("node-a", cfg_model(), [CAM], [], NOW, 300.0, lookup=found.get)
    assert (p.join, p.create) == ([name], [])
    blind = instances.plan("node-a", cfg_model(), [CAM], [], NOW, 300.0)
    assert [d.id for d in blind.create] == [CAM.id]  # without the lookup it would make it again (AlreadyExists)
