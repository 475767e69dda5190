"""Pool assignment: exact static pools, dynamic pools, and the property that a device change moves only itself."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from devplace.controller._pools import Need, Pool, assign_dynamic, assign_static, leftovers

ALL = frozenset({"node-a", "node-b", "node-c"})


def vis(*names: str, nodes: frozenset[str] = ALL) -> dict[str, frozenset[str]]:
    return dict.fromkeys(names, nodes)


def test_a_pool_forms_only_when_every_need_is_met_on_one_node() -> None:
    visible = {"a": frozenset({"node-a"}), "b": frozenset({"node-b"})}
    assert assign_static([], [Need(frozenset(visible), 2)], visible) == ()


def test_a_pool_that_loses_a_member_dissolves_and_others_stay() -> None:
    names = [f"c{i}" for i in range(6)]
    first = assign_static([], [Need(frozenset(names), 3)], vis(*names))
    assert first == (Pool("node-a", (("c0", "c1", "c2"),)), Pool("node-b", (("c3", "c4", "c5"),)))
    rest = [n for n in names if n != "c4"]
    second = assign_static(first, [Need(frozenset(rest), 3)], vis(*rest))
    assert second == (Pool("node-a", (("c0", "c1", "c2"),)),)
    assert leftovers(second, [Need(frozenset(rest), 3)], vis(*rest)) == {"c3", "c5"}


def test_a_member_no_longer_seen_from_the_pools_node_dissolves_it() -> None:
    first = assign_static([], [Need(frozenset({"x", "y"}), 2)], vis("x", "y"))
    assert first == (Pool("node-a", (("x", "y"),)),)
    moved = {"x": frozenset({"node-b"}), "y": ALL}
    assert assign_static(first, [Need(frozenset({"x", "y"}), 2)], moved) == (Pool("node-b", (("x", "y"),)),)


def test_duplicate_previous_pools_keep_the_first() -> None:
    twice = [Pool("node-a", (("x", "y"),)), Pool("node-b", (("x", "y"),))]
    assert assign_static(twice, [Need(frozenset({"x", "y"}), 2)], vis("x", "y")) == (twice[0],)
    dyn = {0: Pool("node-a", (("x",),)), 1: Pool("node-b", (("x", "y"),))}
    assert assign_dynamic(dyn, ["x", "y"], vis("x", "y"), 2) == {0: dyn[0], 1: Pool("node-b", (("y",),))}


def test_a_dynamic_pool_opens_on_the_least_loaded_node_that_sees_the_device() -> None:
    out = assign_dynamic({0: Pool("node-a", (("x",),))}, ["x", "y"], {"x": ALL, "y": frozenset({"node-b"})}, 2)
    assert out == {0: Pool("node-a", (("x",),)), 1: Pool("node-b", (("y",),))}


# -- property: a device change moves as few Instances as possible ---------------------------------------------------

DEVICES = [f"d{i}" for i in range(10)]
NODE_SETS = st.frozensets(st.sampled_from(sorted(ALL)), min_size=1)
FLEETS = st.dictionaries(st.sampled_from(DEVICES), NODE_SETS, max_size=10)


def placement(pools: object) -> dict[str, object]:
    items = pools.items() if isinstance(pools, dict) else enumerate(pools)  # type: ignore[attr-defined]
    return {n: (key, pool.node) for key, pool in items for n in pool.instances}


@given(FLEETS, FLEETS, st.integers(min_value=1, max_value=4))
def test_dynamic_assignment_never_moves_a_device_that_stays_valid(
    before: dict[str, frozenset[str]], after: dict[str, frozenset[str]], size: int
) -> None:
    first = assign_dynamic({}, before, before, size)
    second = assign_dynamic(first, after, after, size)
    old, new = placement(first), placement(second)
    for name, (pool_id, node) in old.items():
        if name in after and node in after[name]:
            assert new[name] == (pool_id, node)
    assert set(new) == {n for n, nodes in after.items() if nodes}  # every visible device is served
    assert all(1 <= len(p.instances) <= size for p in second.values())


@given(FLEETS, FLEETS, st.integers(min_value=1, max_value=4))
def test_static_assignment_keeps_every_pool_whose_members_all_stay(
    before: dict[str, frozenset[str]], after: dict[str, frozenset[str]], size: int
) -> None:
    first = assign_static([], [Need(frozenset(before), size)], before)
    second = assign_static(first, [Need(frozenset(after), size)], after)
    for pool in first:
        if all(n in after and pool.node in after[n] for n in pool.instances):
            assert pool in second
    pooled = [n for p in second for n in p.instances]
    assert len(pooled) == len(set(pooled))
    assert all(len(p.instances) == size and all(p.node in after[n] for n in p.instances) for p in second)
