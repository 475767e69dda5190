"""The slot rules of DESIGN.md section 4, one table row per rule, plus seed 000's walk-through on pure functions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.agent import _slots as slots
from devplace.agent._slots import CL, FREE, IL, Claim, Refusal, Usage
from devplace.api import DRA
from devplace.api import _holders as holders

INST = "cam-8120fe"


def usage(*holders: slots.Holder, capacity: int | None = None, instance: str = INST) -> Usage:
    """Usage with slots <instance>-0.. holding `holders` in order."""
    wire = {slots.slot_name(instance, i): slots.format_holder(h) for i, h in enumerate(holders)}
    return Usage.parse(instance, len(holders) if capacity is None else capacity, wire)


# -- holders on the wire ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "holder"),
    [
        ("", FREE),
        ("node-a", IL("node-a")),
        ("C:cam-8120fe:node-a", CL("cam-8120fe", "node-a")),
        ("C:cam-8120fe-1:node-b.example", CL("cam-8120fe-1", "node-b.example")),
    ],
)
def test_parse_holder_reads_the_three_wire_forms(raw: str, holder: slots.Holder) -> None:
    assert slots.parse_holder(raw) == holder
    assert slots.format_holder(holder) == raw


@pytest.mark.parametrize("raw", ["C:", "C:cam", "C::node-a", "C:cam:", "Node A", "node_a", "C:cam:node:x", "-a"])
def test_parse_holder_refuses_malformed_values_naming_the_field(raw: str) -> None:
    with pytest.raises(errors.Invalid) as e:
        slots.parse_holder(raw, "spec.deviceUsage.cam-0")
    assert e.value.fields[0].path == "spec.deviceUsage.cam-0"


_names = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
_holders = st.one_of(st.just(FREE), st.builds(IL, _names), st.builds(CL, _names, _names))


@given(_holders)
def test_holders_round_trip_through_the_wire(holder: slots.Holder) -> None:
    assert slots.parse_holder(slots.format_holder(holder)) == holder


@given(st.text(max_size=30))
def test_parse_holder_either_parses_or_raises_invalid(raw: str) -> None:
    try:
        holder = slots.parse_holder(raw)
    except errors.Invalid:
        return
    assert slots.format_holder(holder) == raw


def test_usage_parse_orders_slots_by_index_and_names_a_bad_holder() -> None:
    parsed = Usage.parse(INST, 11, {f"{INST}-10": "", f"{INST}-2": "node-a", f"{INST}-0": ""})
    assert list(parsed.holders) == [f"{INST}-0", f"{INST}-2", f"{INST}-10"]
    with pytest.raises(errors.Invalid) as e:
        Usage.parse(INST, 1, {f"{INST}-0": "C:broken"})
    assert e.value.fields[0].path == f"spec.deviceUsage.{INST}-0"


@pytest.mark.parametrize(
    ("slot", "index"),
    [(f"{INST}-0", 0), (f"{INST}-12", 12), (f"{INST}-01", None), (f"{INST}-x", None), ("other-0", None), (INST, None)],
)
def test_slot_index_reads_only_canonical_names(slot: str, index: int | None) -> None:
    assert slots.slot_index(INST, slot) == index


# -- instance-level claims ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("held_by", "asker", "visible", "expected"),
    [
        (FREE, "node-a", True, Claim),
        (IL("node-a"), "node-a", True, Claim),  # the kubelet re-offering what it holds (restart, Akri #450)
        (IL("node-b"), "node-a", True, Refusal),  # another node's slot
        (CL("cam-8120fe", "node-a"), "node-a", True, Refusal),  # a CL hold is not an IL hold
        (CL("cam-8120fe", "node-b"), "node-a", True, Refusal),
        (FREE, "node-a", False, Refusal),  # the Instance no longer lists this node
        (IL("node-a"), "node-a", False, Refusal),
    ],
)
def test_claim_slot_follows_the_holder_rules(held_by: slots.Holder, asker: str, visible: bool, expected: type) -> None:
    outcome = slots.claim_slots(usage(held_by, FREE), [f"{INST}-0"], asker, visible)
    assert isinstance(outcome, expected)


def test_claim_of_a_free_slot_writes_the_node_and_reports_it_new() -> None:
    outcome = slots.claim_slots(usage(FREE, FREE), [f"{INST}-1"], "node-a", True)
    assert isinstance(outcome, Claim)
    assert outcome.slots == (f"{INST}-1",)
    assert outcome.new == (f"{INST}-1",)
    assert outcome.usage.to_wire() == {f"{INST}-0": "", f"{INST}-1": "node-a"}


def test_re_offer_of_a_held_slot_changes_nothing() -> None:
    outcome = slots.claim_slots(usage(IL("node-a"), FREE), [f"{INST}-0"], "node-a", True)
    assert isinstance(outcome, Claim)
    assert not outcome.changed
    assert outcome.new == ()


def test_claim_is_all_or_nothing_for_one_container() -> None:
    before = usage(FREE, IL("node-b"))
    outcome = slots.claim_slots(before, [f"{INST}-0", f"{INST}-1"], "node-a", True)
    assert outcome == Refusal(f"{INST}-1 is held by node-b (instance level)")


@pytest.mark.parametrize(
    ("wanted", "reason"),
    [
        ([f"{INST}-0", f"{INST}-0"], "names a slot of"),
        ([f"{INST}-7"], "is not a slot of"),
    ],
)
def test_claim_refuses_duplicate_and_unknown_slots(wanted: list[str], reason: str) -> None:
    outcome = slots.claim_slots(usage(FREE, FREE), wanted, "node-a", True)
    assert isinstance(outcome, Refusal)
    assert reason in outcome.reason


def test_refusal_names_the_rule_for_an_invisible_instance() -> None:
    assert slots.claim_slots(usage(FREE), [f"{INST}-0"], "node-a", False) == Refusal(
        f"{INST} is no longer visible from node-a"
    )


# -- configuration-level claims -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("holders", "vdevs", "expected_slots"),
    [
        ((FREE, FREE), [INST], (f"{INST}-0",)),  # unique vdev -> lowest free slot
        ((IL("node-b"), FREE), [INST], (f"{INST}-1",)),  # re-mapped around a held slot
        ((FREE, CL(INST, "node-a")), [INST], (f"{INST}-1",)),  # re-offer returns the same slot (Akri #843)
        ((FREE, FREE), [f"{INST}-1"], (f"{INST}-1",)),  # per-slot vdev prefers its own index
        ((FREE, IL("node-b"), FREE), [f"{INST}-1"], (f"{INST}-0",)),  # ... and falls back to the lowest free
        ((FREE, FREE), [f"{INST}-0", f"{INST}-1"], (f"{INST}-0", f"{INST}-1")),  # non-unique: two of one Instance
    ],
)
def test_claim_vdevs_maps_each_vdev_to_a_free_slot(
    holders: tuple[slots.Holder, ...], vdevs: list[str], expected_slots: tuple[str, ...]
) -> None:
    outcome = slots.claim_vdevs(usage(*holders), vdevs, "node-a", True)
    assert isinstance(outcome, Claim)
    assert outcome.slots == expected_slots
    for vdev, slot in zip(vdevs, outcome.slots, strict=True):
        assert outcome.usage.holders[slot] == CL(vdev, "node-a")


@pytest.mark.parametrize(
    ("holders", "vdevs", "visible", "reason"),
    [
        ((IL("node-b"), CL(INST, "node-c")), [INST], True, "no free slot of"),
        ((FREE, FREE), [INST], False, "no longer visible"),
        ((FREE, FREE), [INST, INST], True, "twice"),
        ((FREE, IL("node-b")), [f"{INST}-0", f"{INST}-1"], True, "no free slot of"),  # capacity
    ],
)
def test_claim_vdevs_refuses_when_no_slot_can_serve(
    holders: tuple[slots.Holder, ...], vdevs: list[str], visible: bool, reason: str
) -> None:
    outcome = slots.claim_vdevs(usage(*holders), vdevs, "node-a", visible)
    assert isinstance(outcome, Refusal)
    assert reason in outcome.reason


@pytest.mark.parametrize(
    ("vdevs", "instance_of", "unique", "refused"),
    [
        (["a", "b"], {"a": "a", "b": "b"}, True, False),
        (["a-0", "a-1"], {"a-0": "a", "a-1": "a"}, True, True),  # two slots of one Instance for one container
        (["a-0", "a-1"], {"a-0": "a", "a-1": "a"}, False, False),
        (["a", "c"], {"a": "a", "b": "b"}, True, True),  # more unique devices than exist
    ],
)
def test_check_unique_request_enforces_distinct_instances(
    vdevs: list[str], instance_of: dict[str, str], unique: bool, refused: bool
) -> None:
    assert (slots.check_unique_request(vdevs, instance_of, unique) is not None) is refused


@pytest.mark.parametrize(
    ("vdev", "instances", "expected"),
    [
        ("cam-8120fe", ["cam-8120fe", "cam-a19705"], "cam-8120fe"),
        ("cam-8120fe-3", ["cam-8120fe"], "cam-8120fe"),
        ("cam-123456", ["cam-123456", "cam"], "cam-123456"),  # an exact Instance name wins
        ("cam-zzz", ["cam-8120fe"], None),
    ],
)
def test_vdev_instance_finds_the_instance_behind_a_vdev(vdev: str, instances: list[str], expected: str | None) -> None:
    assert slots.vdev_instance(vdev, instances) == expected


# -- release and resize -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("held_by", "releaser", "freed"),
    [
        (IL("node-a"), IL("node-a"), True),
        (CL(INST, "node-a"), CL(INST, "node-a"), True),
        (IL("node-b"), IL("node-a"), False),  # only THIS node's slots
        (CL(INST, "node-a"), IL("node-a"), False),  # exact holder only
        (CL("other", "node-a"), CL(INST, "node-a"), False),
        (FREE, IL("node-a"), False),
    ],
)
def test_release_frees_only_the_exact_holder(held_by: slots.Holder, releaser: slots.Holder, freed: bool) -> None:
    released = slots.release_slot(usage(held_by), f"{INST}-0", releaser)
    assert (released is not None) is freed
    if released is not None:
        assert released.holders[f"{INST}-0"] == FREE


@pytest.mark.parametrize(
    ("holders", "capacity", "expected"),
    [
        ((FREE, FREE), 4, ("", "", "", "")),  # grow: new slots free
        ((IL("a"), FREE), 3, ("a", "", "")),
        ((FREE, FREE, FREE, FREE), 2, ("", "")),  # shrink: free slots beyond go
        ((FREE, IL("a"), FREE, IL("b")), 2, ("", "a", None, "b")),  # held beyond stays (retiring)
        ((IL("a"), IL("b"), IL("c")), 1, ("a", "b", "c")),
    ],
)
def test_resize_never_touches_held_slots(
    holders: tuple[slots.Holder, ...], capacity: int, expected: tuple[str | None, ...]
) -> None:
    resized = slots.resize(usage(*holders), capacity)
    wire = resized.to_wire()
    want = {slots.slot_name(INST, i): h for i, h in enumerate(expected) if h is not None}
    assert wire == want
    assert resized.capacity == capacity


def test_retiring_slot_goes_when_released_and_capacity_is_respected_meanwhile() -> None:
    shrunk = slots.resize(usage(FREE, IL("a"), FREE, IL("b")), 2)
    # 2 held, capacity 2: the free canonical slot 0 is not claimable until one is released
    assert not shrunk.claimable(f"{INST}-0")
    assert isinstance(slots.claim_slots(shrunk, [f"{INST}-0"], "c", True), Refusal)
    released = slots.release_slot(shrunk, f"{INST}-3", IL("b"))
    assert released is not None
    assert released.to_wire() == {f"{INST}-0": "", f"{INST}-1": "a"}
    assert released.claimable(f"{INST}-0")


@given(
    st.lists(st.sampled_from(["", "a", "b", "C:x:a"]), min_size=1, max_size=8),
    st.integers(min_value=1, max_value=8),
)
def test_resize_keeps_every_holder_and_reaches_the_capacity(wire: list[str], capacity: int) -> None:
    before = Usage.parse(INST, len(wire), {slots.slot_name(INST, i): h for i, h in enumerate(wire)})
    after = slots.resize(before, capacity)
    held_before = {s: h for s, h in before.holders.items() if h != FREE}
    assert {s: h for s, h in after.holders.items() if h != FREE} == held_before
    assert all(slots.slot_name(INST, i) in after.holders for i in range(capacity))
    retiring = [s for s in held_before if (before.index(s) or 0) >= capacity]
    assert len(after.holders) == capacity + len(retiring)


@given(
    st.lists(st.sampled_from(["", "a", "b", "c"]), min_size=1, max_size=6),
    st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 5)), max_size=10),
)
def test_claims_never_exceed_capacity_or_take_a_held_slot(wire: list[str], asks: list[tuple[str, int]]) -> None:
    current = Usage.parse(INST, len(wire), {slots.slot_name(INST, i): h for i, h in enumerate(wire)})
    for node, index in asks:
        slot = slots.slot_name(INST, index)
        before = current.holders.get(slot)
        outcome = slots.claim_slots(current, [slot], node, True)
        if isinstance(outcome, Claim):
            assert before in (FREE, IL(node))
            current = outcome.usage
        assert current.held <= current.capacity


def _one_by_one(current: Usage, wanted: list[str], node: str) -> Claim | Refusal:
    """The rule for several slots in one container: each claimed in turn on what the previous left, all or none."""
    if len(set(wanted)) != len(wanted):
        return Refusal("twice")
    new: list[str] = []
    for slot in wanted:
        outcome = slots.claim_slots(current, [slot], node, True)
        if isinstance(outcome, Refusal):
            return outcome
        new += outcome.new
        current = outcome.usage
    return Claim(tuple(wanted), current, tuple(new))


@given(
    st.lists(st.sampled_from(["", "", "a", "b", "C:x:a"]), min_size=1, max_size=6),
    st.integers(min_value=0, max_value=6),
    st.lists(st.integers(0, 6), max_size=4),
)
def test_claiming_several_slots_at_once_is_claiming_them_one_by_one(
    wire: list[str], capacity: int, indexes: list[int]
) -> None:
    current = Usage.parse(INST, capacity, {slots.slot_name(INST, i): h for i, h in enumerate(wire)})
    wanted = [slots.slot_name(INST, i) for i in indexes]
    together = slots.claim_slots(current, wanted, "a", True)
    expected = _one_by_one(current, wanted, "a")
    assert type(together) is type(expected)
    if isinstance(together, Claim) and isinstance(expected, Claim):
        assert together.slots == expected.slots
        assert together.new == expected.new
        assert together.usage.to_wire() == expected.usage.to_wire()
        assert list(together.usage.holders) == list(expected.usage.holders)  # same slot order, too
        assert together.usage.held == expected.usage.held <= max(capacity, current.held)


@given(
    st.lists(
        st.sampled_from(["", "a", "b", f"C:{INST}:a", f"C:{INST}-1:a", f"C:{INST}-4:a", f"C:{INST}-0:b"]), max_size=5
    ),
    st.integers(1, 4),
    st.booleans(),
    st.sampled_from([INST, f"{INST}-0", f"{INST}-1", f"{INST}-3", f"{INST}-4", f"{INST}-x", "other-0"]),
)
def test_cl_advertised_is_membership_in_the_cl_list(wire: list[str], capacity: int, unique: bool, vdev: str) -> None:
    current = Usage.parse(INST, capacity, {slots.slot_name(INST, i): h for i, h in enumerate(wire)})
    listed = any(d.id == vdev for d in slots.cl_health([current], "a", unique))
    assert slots.cl_advertised(current, vdev, "a", unique) == listed


# -- health lists: seed 000's walk-through --------------------------------------------------------------------

A = "akri-onvif-8120fe"
B = "akri-onvif-a19705"


def _healthy(devices: list[slots.DeviceHealth]) -> int:
    return sum(1 for d in devices if d.healthy)


def _capacities(usages: dict[str, Usage], node: str, unique: bool) -> tuple[int, int, int]:
    """(CL, IL A, IL B) Healthy counts as `node`'s kubelet would see them."""
    return (
        _healthy(slots.cl_health(usages.values(), node, unique)),
        _healthy(slots.il_health(usages[A], node)),
        _healthy(slots.il_health(usages[B], node)),
    )


def _fresh() -> dict[str, Usage]:
    return {name: Usage.parse(name, 2, slots.initial_usage(name, 2)) for name in (A, B)}


@pytest.mark.parametrize(("unique", "expected"), [(True, (2, 2, 2)), (False, (4, 2, 2))])
def test_seed_000_initial_capacities(unique: bool, expected: tuple[int, int, int]) -> None:
    assert _capacities(_fresh(), "node-a", unique) == expected
    assert _capacities(_fresh(), "node-b", unique) == expected


def test_seed_000_walk_through_with_unique_devices() -> None:
    usages = _fresh()
    # node-a's pod takes 2 CL devices: one slot of each Instance
    for name in (A, B):
        outcome = slots.claim_vdevs(usages[name], [name], "node-a", True)
        assert isinstance(outcome, Claim)
        usages[name] = outcome.usage
    assert usages[A].to_wire() == {f"{A}-0": f"C:{A}:node-a", f"{A}-1": ""}
    assert usages[B].to_wire() == {f"{B}-0": f"C:{B}:node-a", f"{B}-1": ""}
    # node-a's kubelet: both CL devices Healthy but allocated (2 - 2 = 0 available); one IL slot left of each
    assert _capacities(usages, "node-a", True) == (2, 1, 1)
    assert [d.id for d in slots.cl_health(usages.values(), "node-a", True)] == [A, B]
    # node-b takes the IL device of the second camera
    outcome_b = slots.claim_slots(usages[B], [f"{B}-1"], "node-b", True)
    assert isinstance(outcome_b, Claim)
    usages[B] = outcome_b.usage
    assert usages[B].to_wire() == {f"{B}-0": f"C:{B}:node-a", f"{B}-1": "node-b"}
    # node-a: IL of B has nothing left; node-b: its own IL slot Healthy (allocated), CL only via A
    assert _capacities(usages, "node-a", True) == (2, 1, 0)
    assert _capacities(usages, "node-b", True) == (1, 1, 1)
    assert [(d.id, d.healthy) for d in slots.il_health(usages[B], "node-b")] == [(f"{B}-0", False), (f"{B}-1", True)]


def test_seed_000_walk_through_without_unique_devices() -> None:
    usages = _fresh()
    cl = slots.cl_health(usages.values(), "node-a", False)
    assert [d.id for d in cl] == [f"{A}-0", f"{A}-1", f"{B}-0", f"{B}-1"]
    instance_of = {d.id: d.instance for d in cl}
    picked = slots.preferred_allocation([d.id for d in cl], [], 2, instance_of, "spread")
    assert picked == [f"{A}-0", f"{B}-0"]
    for vdev in picked:
        name = instance_of[vdev]
        outcome = slots.claim_vdevs(usages[name], [vdev], "node-a", True)
        assert isinstance(outcome, Claim)
        usages[name] = outcome.usage
    # 4 CL devices, 2 of them this node's: all Healthy (kubelet: 4 - 2 = 2 available); IL one left of each
    assert _capacities(usages, "node-a", False) == (4, 1, 1)
    assert _capacities(usages, "node-b", False) == (2, 1, 1)
    outcome_b = slots.claim_slots(usages[B], [f"{B}-1"], "node-b", True)
    assert isinstance(outcome_b, Claim)
    usages[B] = outcome_b.usage
    assert _capacities(usages, "node-a", False) == (3, 1, 0)
    assert _capacities(usages, "node-b", False) == (1, 1, 1)


def test_cl_health_non_unique_counts_exactly_the_claimable_slots() -> None:
    u = usage(IL("node-b"), FREE, CL(f"{INST}-2", "node-a"), capacity=3)
    health = slots.cl_health([u], "node-a", False)
    assert [(d.id, d.healthy) for d in health] == [(f"{INST}-0", True), (f"{INST}-1", False), (f"{INST}-2", True)]


def test_cl_health_unique_is_unhealthy_when_every_slot_is_taken_by_others() -> None:
    u = usage(IL("node-b"), CL(INST, "node-c"))
    assert slots.cl_health([u], "node-a", True) == [slots.DeviceHealth(INST, False, INST)]
    assert slots.cl_health([u], "node-c", True) == [slots.DeviceHealth(INST, True, INST)]


@pytest.mark.parametrize(
    ("preference", "must", "size", "expected"),
    [
        ("spread", [], 3, ["a-0", "b-0", "a-1"]),
        ("pack", [], 3, ["a-0", "a-1", "a-2"]),
        ("spread", ["b-1"], 2, ["b-1", "a-0"]),
        ("pack", ["b-1"], 2, ["b-1", "b-0"]),
        ("spread", [], 9, ["a-0", "b-0", "a-1", "b-1", "a-2"]),  # fewer available than asked: all of them
    ],
)
def test_preferred_allocation_spreads_or_packs(
    preference: slots.Preference, must: list[str], size: int, expected: list[str]
) -> None:
    available = ["a-0", "a-1", "a-2", "b-0", "b-1"]
    instance_of = {v: v.split("-")[0] for v in available}
    assert slots.preferred_allocation(available, must, size, instance_of, preference) == expected


_NODES = ["node-a", "node-b", "node-c"]
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("il"), st.sampled_from(_NODES), st.integers(0, 5)),
        st.tuples(st.just("cl"), st.sampled_from(_NODES), st.integers(-1, 5)),
        st.tuples(st.just("release"), st.sampled_from(_NODES), st.integers(0, 5)),
        st.tuples(st.just("resize"), st.just(""), st.integers(1, 6)),
    ),
    max_size=25,
)


@given(st.integers(1, 5), _ops)
def test_any_sequence_of_claims_releases_and_resizes_keeps_the_slot_rules(
    capacity: int, ops: list[tuple[str, str, int]]
) -> None:
    current = Usage.parse(INST, capacity, slots.initial_usage(INST, capacity))
    for op, node, n in ops:
        # every state an agent writes passes the API's slot rules, so a checking server never refuses an agent
        assert list(holders.usage_problems(INST, current.capacity, current.to_wire())) == []
        before = current
        if op == "resize":
            current = slots.resize(current, n)
            held_after = {s: h for s, h in current.holders.items() if h != FREE}
            assert held_after == {s: h for s, h in before.holders.items() if h != FREE}
            continue
        if op == "release":
            slot = slots.slot_name(INST, n)
            holder = before.holders.get(slot)
            mine = holder if isinstance(holder, IL | CL) and holder.node == node else IL(node)
            released = slots.release_slot(before, slot, mine)
            if released is not None:
                assert isinstance(holder, IL | CL)
                assert holder.node == node  # only the holder itself frees a slot
                current = released
            continue
        if op == "il":
            outcome = slots.claim_slots(before, [slots.slot_name(INST, n)], node, True)
        else:
            vdev = INST if n < 0 else slots.slot_name(INST, n)
            outcome = slots.claim_vdevs(before, [vdev], node, True)
        if isinstance(outcome, Refusal):
            continue
        current = outcome.usage
        changed = {s for s in current.holders if current.holders[s] != before.holders.get(s)}
        assert changed == set(outcome.new)
        assert all(before.holders[s] == FREE for s in changed)  # a claim never takes a held slot
        if changed:
            assert current.held <= current.capacity  # a new claim always respects capacity


# -- a usage that breaks the slot rules: read, not refused; inert; repaired only by its owner --------------------


def test_read_keeps_every_slot_and_reads_what_breaks_the_rules_as_unknown() -> None:
    wire = {f"{INST}-0": "C:::", f"{INST}-1": "node-a", "bogus": "node-b", f"{INST}-2": 7}
    read = Usage.read(INST, 3, wire)
    assert read.holders == {
        f"{INST}-0": slots.Unknown("C:::"),
        f"{INST}-1": IL("node-a"),
        f"{INST}-2": slots.Unknown(7),
        "bogus": IL("node-b"),
    }
    assert read.to_wire() == wire
    assert read.unreadable == (f"{INST}-0", f"{INST}-2", "bogus")
    assert Usage.read(INST, 2, ["not", "a", "map"]).holders == {}


def test_what_breaks_the_rules_is_never_claimable_healthy_or_counted() -> None:
    read = Usage.read(INST, 2, {f"{INST}-0": "C:::", f"{INST}-1": "", "bogus": "node-b"})
    assert read.held == 0  # neither the unreadable holder nor the unnamed slot records an allocation
    assert slots.il_health(read, "node-a") == [
        slots.DeviceHealth(f"{INST}-0", False, INST),
        slots.DeviceHealth(f"{INST}-1", True, INST),
    ]
    assert slots.claim_slots(read, [f"{INST}-0"], "node-a", True) == Refusal(
        f"{INST}-0 is held by an unreadable holder 'C:::'"
    )
    assert slots.claim_slots(read, ["bogus"], "node-b", True) == Refusal(f"bogus is not a slot of {INST}")
    claimed = slots.claim_slots(read, [f"{INST}-1"], "node-a", True)
    assert isinstance(claimed, Claim)
    assert claimed.usage.to_wire() == {f"{INST}-0": "C:::", f"{INST}-1": "node-a", "bogus": "node-b"}


@pytest.mark.parametrize(
    ("wire", "node", "expected"),
    [
        ({f"{INST}-0": "C::node-a"}, "node-a", {f"{INST}-0": "node-a"}),  # its own: an IL hold (released by grace)
        ({f"{INST}-5": "C:x:y:node-a"}, "node-a", {f"{INST}-5": "node-a"}),  # retiring keeps its index
        ({"bogus": "C::node-a"}, "node-a", {}),  # unnamed and its own: goes
        ({"bogus": "node-a", "stray": "C:v:node-a"}, "node-a", {}),
        ({f"{INST}-0": "C::node-b", "bogus": "node-b"}, "node-a", None),  # another node's: left alone
        ({f"{INST}-0": "C:::", "x": "???"}, "node-a", None),  # nobody's: left alone
        ({f"{INST}-0": "node-a", f"{INST}-1": ""}, "node-a", None),  # nothing broken
    ],
)
def test_repair_mends_only_what_the_node_owns(wire: dict[str, str], node: str, expected: dict[str, str] | None) -> None:
    read = Usage.read(INST, 1, wire)
    repaired = slots.repair(read, node)
    if expected is None:
        assert repaired is read
    else:
        assert repaired.to_wire() == expected


_raw = st.one_of(
    st.sampled_from(["", "node-a", "node-b", "C:v:node-a", "C::node-a", "C:::", "Node A", "C:v:node-b:x"]),
    st.text(max_size=8),
)
_slot = st.one_of(st.integers(0, 6).map(lambda i: slots.slot_name(INST, i)), st.sampled_from(["bogus", f"{INST}-01"]))


@given(st.dictionaries(_slot, _raw, max_size=8), st.integers(1, 4))
def test_once_every_node_repaired_and_resized_only_unowned_problems_remain(wire: dict[str, str], capacity: int) -> None:
    current = Usage.read(INST, capacity, wire)
    for node in ("node-a", "node-b"):
        current = slots.resize(slots.repair(current, node), capacity)
        assert slots.repair(current, node) is current  # repairing twice changes nothing
    for problem in holders.usage_problems(INST, capacity, current.to_wire()):
        holder = current.holders[problem.path.removeprefix("spec.deviceUsage.")]
        assert not (isinstance(holder, slots.Unknown) and (holder.names("node-a") or holder.names("node-b")))
        assert not (isinstance(holder, IL | CL) and holder.node in ("node-a", "node-b"))


@given(
    st.dictionaries(_slot, _raw, max_size=8),
    st.dictionaries(_slot, _raw, max_size=8),
    st.booleans(),
    st.integers(1, 4),
)
def test_rereading_a_changed_usage_gives_exactly_what_a_fresh_read_gives(
    before: dict[str, str], after: dict[str, str], same_slots: bool, capacity: int
) -> None:
    if same_slots:  # the common case: the same slots, some holders changed
        after = {slot: after.get(slot, raw) for slot, raw in before.items()}
    reread = Usage.read(INST, capacity, before).reread(after, before)
    fresh = Usage.read(INST, capacity, after)
    assert reread.holders == fresh.holders
    assert list(reread.holders) == list(fresh.holders)  # the same order
    assert (reread.held, reread.unreadable) == (fresh.held, fresh.unreadable)


def test_rereading_keeps_the_parsed_holders_of_slots_that_did_not_change() -> None:
    before = {slots.slot_name(INST, 0): "", slots.slot_name(INST, 1): "node-a"}
    first = Usage.read(INST, 2, before)
    after = {**before, slots.slot_name(INST, 0): "node-b"}
    second = first.reread(after, before)
    assert second.holders[slots.slot_name(INST, 1)] is first.holders[slots.slot_name(INST, 1)]
    assert second.to_wire() == after


# -- a sick device (its handler's `devplace.io/health: Unhealthy`) -------------------------------------------


def test_il_health_of_a_sick_device_is_unhealthy_for_every_slot_held_or_free() -> None:
    u = usage(IL("node-a"), FREE, IL("node-b"))
    assert [(d.id, d.healthy) for d in slots.il_health(u, "node-a")] == [
        (f"{INST}-0", True),
        (f"{INST}-1", True),
        (f"{INST}-2", False),
    ]
    assert [(d.id, d.healthy) for d in slots.il_health(u, "node-a", device_healthy=False)] == [
        (f"{INST}-0", False),
        (f"{INST}-1", False),
        (f"{INST}-2", False),
    ]


@pytest.mark.parametrize("unique", [True, False])
def test_cl_health_lists_a_sick_instances_vdevs_unhealthy_and_leaves_the_others_alone(unique: bool) -> None:
    usages = _fresh()
    healthy = slots.cl_health(usages.values(), "node-a", unique)
    sick = slots.cl_health(usages.values(), "node-a", unique, unhealthy={A})
    assert [d.id for d in sick] == [d.id for d in healthy]
    assert [d.healthy for d in sick if d.instance == A] == [False] * len([d for d in healthy if d.instance == A])
    assert [d for d in sick if d.instance == B] == [d for d in healthy if d.instance == B]


# -- DRA holders: taken through a ResourceClaim, counted, never repaired or handed to a device plugin ---------------

DRA_A = DRA("default", "gpu-claim", "node-a")


def test_a_dra_holder_counts_against_capacity_and_is_unhealthy_to_every_plugin() -> None:
    # capacity shrank to 1 while a claim holds the retiring slot 1: slot 0 must not be handed out as well
    read = Usage.read(INST, 1, {f"{INST}-0": "", f"{INST}-1": "D:default/gpu-claim:node-a"})
    assert read.holders[f"{INST}-1"] == DRA_A
    assert read.held == 1
    assert read.free_claimable() == []
    assert slots.il_health(read, "node-a") == [
        slots.DeviceHealth(f"{INST}-0", False, INST),
        slots.DeviceHealth(f"{INST}-1", False, INST),
    ]
    assert slots.cl_health([read], "node-a", unique=True) == [slots.DeviceHealth(INST, False, INST)]


@pytest.mark.parametrize(
    "wire",
    [
        {f"{INST}-0": "D:default/gpu-claim:node-a"},  # a DRA holder
        {f"{INST}-0": "D:Default/GPU:node-a"},  # one this grammar cannot read: still never made an IL hold
        {"bogus": "D:default/gpu-claim:node-a"},  # on an unnamed slot
    ],
)
def test_repair_never_turns_a_dra_holder_into_a_device_plugin_hold(wire: dict[str, str]) -> None:
    read = Usage.read(INST, 1, wire)
    assert slots.repair(read, "node-a") is read


@pytest.mark.parametrize(
    ("wire", "wanted", "count", "granted", "new"),
    [
        ({"0": "", "1": ""}, [], 1, ["1"], ["1"]),  # any slot: the highest free (the device plugins go lowest first)
        ({"0": "D:default/gpu-claim:node-a", "1": ""}, [], 1, ["0"], []),  # already held (scheduler, retry)
        ({"0": "node-b", "1": ""}, [], 1, ["1"], ["1"]),
        ({"0": "", "1": ""}, ["1"], 0, ["1"], ["1"]),  # N-devices form: slot 1 by name
        ({"0": "", "1": "D:default/gpu-claim:node-a"}, ["1"], 0, ["1"], []),
        ({"0": "D:default/gpu-claim:node-a", "1": ""}, [], 2, ["0", "1"], ["1"]),  # consumable: 2 slots
    ],
)
def test_claim_dra_confirms_what_the_claim_holds_and_takes_the_rest_free(
    wire: dict[str, str], wanted: list[str], count: int, granted: list[str], new: list[str]
) -> None:
    usage = Usage.read(INST, 2, {f"{INST}-{k}": v for k, v in wire.items()})
    claim = slots.claim_dra(usage, [f"{INST}-{w}" for w in wanted], count, DRA_A, True)
    assert isinstance(claim, Claim)
    assert claim.slots == tuple(f"{INST}-{g}" for g in granted)
    assert claim.new == tuple(f"{INST}-{n}" for n in new)
    assert all(claim.usage.holders[s] == DRA_A for s in claim.slots)


@pytest.mark.parametrize(
    ("wire", "wanted", "count", "reason"),
    [
        ({"0": "node-b"}, [], 1, f"{INST} has 0 free slot(s), claim default/gpu-claim needs 1 more (held by node-b"),
        ({"0": "D:default/other:node-a"}, ["0"], 0, f"{INST}-0 is held by node-a (DRA claim default/other)"),
        ({"0": "C:v:node-a"}, ["0"], 0, f"{INST}-0 is held by node-a (configuration level, v)"),
        ({"0": ""}, ["7"], 0, f"{INST}-7 is not a slot of {INST}"),
    ],
)
def test_claim_dra_refuses_a_slot_someone_else_holds_naming_the_holder(
    wire: dict[str, str], wanted: list[str], count: int, reason: str
) -> None:
    usage = Usage.read(INST, 1, {f"{INST}-{k}": v for k, v in wire.items()})
    refusal = slots.claim_dra(usage, [f"{INST}-{w}" for w in wanted], count, DRA_A, True)
    assert isinstance(refusal, Refusal)
    assert refusal.reason.startswith(reason)


def test_claim_dra_refuses_an_instance_this_node_no_longer_sees() -> None:
    usage = Usage.read(INST, 1, {f"{INST}-0": ""})
    assert slots.claim_dra(usage, [], 1, DRA_A, False) == Refusal(f"{INST} is no longer visible from node-a")


# -- counting incrementally -----------------------------------------------------------------------------------

_slot_names = st.sampled_from([f"{INST}-0", f"{INST}-1", f"{INST}-2", f"{INST}-3", f"{INST}-01", "other-0"])
_wire_holders = st.sampled_from(["", "", "node-a", "node-b", "C:v:node-a", "D:ns/c:node-b", "C::node-a", "Bad!"])
_wire_usages = st.dictionaries(_slot_names, _wire_holders, max_size=5)


def _il_reference(u: Usage, node: str, device_healthy: bool) -> list[tuple[str, bool]]:
    """The IL rule as DESIGN.md section 4 states it, slot by slot: named slots only; Healthy iff the device is and
    the slot is this node's IL hold or claimable."""
    return [
        (slot, device_healthy and (holder == IL(node) or u.claimable(slot)))
        for slot, holder in u.holders.items()
        if u.index(slot) is not None
    ]


@given(_wire_usages, st.integers(1, 4), st.booleans())
def test_il_states_follow_the_il_rule_slot_by_slot(wire: dict[str, str], capacity: int, device_healthy: bool) -> None:
    u = Usage.read(INST, capacity, wire)
    assert slots.il_states(u, "node-a", device_healthy) == _il_reference(u, "node-a", device_healthy)
    assert [(d.id, d.healthy) for d in slots.il_health(u, "node-a", device_healthy)] == _il_reference(
        u, "node-a", device_healthy
    )


def test_il_states_of_an_exact_usage_without_room_offer_only_this_nodes_slots() -> None:
    u = usage(IL("node-a"), FREE, IL("node-b"), capacity=3)
    assert u.exact
    assert slots.il_states(u, "node-a") == [(f"{INST}-0", True), (f"{INST}-1", True), (f"{INST}-2", False)]
    full = Usage.read(INST, 2, {f"{INST}-0": "node-a", f"{INST}-1": "", f"{INST}-2": "node-b"})  # a retiring slot
    assert not full.exact
    assert slots.il_states(full, "node-a") == [(f"{INST}-0", True), (f"{INST}-1", False), (f"{INST}-2", False)]


def _counts(u: Usage) -> tuple[object, ...]:
    return (list(u.holders.items()), u.held, u.exact, u.unreadable, u.free_claimable())


@given(_wire_usages, st.dictionaries(_slot_names, _wire_holders, max_size=3), st.integers(1, 4), st.booleans())
def test_a_usage_read_again_counts_what_a_usage_read_afresh_counts(
    before: dict[str, str], changes: dict[str, str], capacity: int, counted_first: bool
) -> None:
    """`reread` and `with_holders` carry `held`, `exact` and `unreadable` over from the usage they start from and
    correct them for the changed slots; what they give must count exactly as a usage read from the wire."""
    old = Usage.read(INST, capacity, before)
    if counted_first:
        _counts(old)  # computes the cached counts, which the successor then carries over
    after = {**before, **{slot: raw for slot, raw in changes.items() if slot in before}}
    assert _counts(old.reread(after, before)) == _counts(Usage.read(INST, capacity, after))
    parsed = Usage.read(INST, capacity, after).holders
    moved = old.with_holders({slot: parsed[slot] for slot in changes if slot in before})
    assert _counts(moved) == _counts(Usage.read(INST, capacity, after))


def _cl_reference(u: Usage, node: str, unique: bool, sick: bool) -> list[tuple[str, bool]]:
    """The CL rule as the slots module's docstring states it, vdev by vdev (claimable slots counted one by one)."""
    free = len(u.free_claimable())
    held = {h.vdev for h in u.holders.values() if isinstance(h, CL) and h.node == node}
    if unique:
        return [(u.instance, not sick and (u.instance in held or free > 0))]
    names = [slots.slot_name(u.instance, i) for i in range(u.capacity)]
    names += sorted(v for v in held if v not in names and slots.vdev_instance(v, [u.instance]))
    out = []
    for name in names:
        healthy = name in held or free > 0
        if healthy and name not in held:
            free -= 1
        out.append((name, healthy and not sick))
    return out


_cl_wire = st.sampled_from(
    ["", "", "node-a", "C:x:node-a", f"C:{INST}-1:node-a", f"C:{INST}-5:node-a", "C:y:node-b", "Bad!"]
)


@given(st.dictionaries(_slot_names, _cl_wire, max_size=5), st.integers(1, 4), st.booleans(), st.booleans())
def test_cl_states_follow_the_cl_rule_vdev_by_vdev(
    wire: dict[str, str], capacity: int, unique: bool, sick: bool
) -> None:
    u = Usage.read(INST, capacity, wire)
    assert slots.cl_states_of(u, "node-a", unique, sick) == _cl_reference(u, "node-a", unique, sick)
    assert [(d.id, d.healthy, d.instance) for d in slots.cl_health_of(u, "node-a", unique, sick)] == [
        (vdev, healthy, INST) for vdev, healthy in _cl_reference(u, "node-a", unique, sick)
    ]
