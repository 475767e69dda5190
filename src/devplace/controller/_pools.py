"""Stable assignment of Instances to pools (and to heterogeneous groups): pure functions of (previous, current).

A pool is a set of Instances served by one broker on one node: every member is visible from that node. A `Need` is
"`count` Instances out of `candidates`"; a static pool of size 3 has one need, a group (1 GPU + 3 cameras) has one
need per member. Rules, each a branch below and a row in tests/controller/test_pools.py:

- Static (`assign_static`): a previous pool is kept as long as every member still exists, is still visible from the
  pool's node and still fits its need; the loss of one member dissolves it and the survivors are free again. Free
  Instances form new pools greedily: nodes in order of (pools already there, name), Instances in name order, a
  pool formed only when every need is met exactly. With `partial=True` (a pool timeout expired), leftovers of a
  single-need assignment form smaller pools the same way; a kept smaller pool stays while its members stay.
- Dynamic (`assign_dynamic`): pools have small integer ids and fixed nodes; a member stays in its pool until it goes
  (or its node no longer sees it); a pool that empties goes; free Instances join the lowest-numbered pool with room
  whose node sees them, else open a new pool (lowest free id) on the node that sees them and has fewest pools.

Either way, an Instance that stays valid never moves: a device change moves only the Instances it touches (the
property test checks this). Duplicates in `previous` (two controllers racing) are resolved by keeping the first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

Visibility = Mapping[str, frozenset[str]]
"""Instance name -> nodes it may be served from."""


@dataclass(frozen=True, order=True)
class Pool:
    """A broker's Instances on one node: `members[i]` are the Instances filling need i, in assignment order."""

    node: str
    members: tuple[tuple[str, ...], ...]

    @property
    def instances(self) -> tuple[str, ...]:
        return tuple(name for group in self.members for name in group)


@dataclass(frozen=True)
class Need:
    """`count` Instances out of `candidates`."""

    candidates: frozenset[str]
    count: int


def _fits(pool: Pool, needs: Sequence[Need], visible: Visibility, taken: set[str], partial: bool) -> bool:
    if len(pool.members) != len(needs):
        return False
    for group, need in zip(pool.members, needs, strict=True):
        if not group or len(group) > need.count or (len(group) < need.count and not (partial and len(needs) == 1)):
            return False
        for name in group:
            if name in taken or name not in need.candidates or pool.node not in visible.get(name, frozenset()):
                return False
    return len(set(pool.instances)) == len(pool.instances)


def assign_static(
    previous: Iterable[Pool],
    needs: Sequence[Need],
    visible: Visibility,
    *,
    partial: bool = False,
    keep_partial: bool = False,
) -> tuple[Pool, ...]:
    """Exact pools (module docstring). `keep_partial`: previous smaller pools survive (a timeout is configured)."""
    if not needs or any(n.count < 1 for n in needs):
        return ()
    taken: set[str] = set()
    pools: list[Pool] = []
    for pool in previous:
        if _fits(pool, needs, visible, taken, keep_partial or partial):
            pools.append(pool)
            taken.update(pool.instances)
    pools.extend(_form(pools, needs, visible, taken, exact=True))
    if partial and len(needs) == 1:
        pools.extend(_form(pools, needs, visible, taken, exact=False))
    return tuple(pools)


def _form(
    existing: Sequence[Pool], needs: Sequence[Need], visible: Visibility, taken: set[str], exact: bool
) -> list[Pool]:
    """New pools from the Instances not in `taken` (which grows); greedy and deterministic."""
    universe = set().union(*(n.candidates for n in needs)) - taken
    by_node: dict[str, set[str]] = {}
    for name in universe:
        for node in visible.get(name, frozenset()):
            by_node.setdefault(node, set()).add(name)
    per_node: dict[str, int] = {}
    for pool in existing:
        per_node[pool.node] = per_node.get(pool.node, 0) + 1
    formed: list[Pool] = []
    while True:
        made = None
        for node in sorted(by_node, key=lambda n: (per_node.get(n, 0), n)):
            made = _pool_on(node, by_node[node] - taken, needs, exact)
            if made is not None:
                break
        if made is None:
            return formed
        formed.append(made)
        taken.update(made.instances)
        per_node[made.node] = per_node.get(made.node, 0) + 1


def _pool_on(node: str, free: set[str], needs: Sequence[Need], exact: bool) -> Pool | None:
    groups: list[tuple[str, ...]] = []
    used: set[str] = set()
    for need in needs:
        choice = sorted((free & need.candidates) - used)[: need.count]
        if not choice or (exact and len(choice) < need.count):
            return None
        groups.append(tuple(choice))
        used.update(choice)
    return Pool(node, tuple(groups))


def leftovers(pools: Iterable[Pool], needs: Sequence[Need], visible: Visibility) -> frozenset[str]:
    """Candidates in no pool that some node could serve: what waits for more devices (or a timeout)."""
    pooled = {name for pool in pools for name in pool.instances}
    return frozenset(
        name for need in needs for name in need.candidates if name not in pooled and visible.get(name, frozenset())
    )


def assign_dynamic(
    previous: Mapping[int, Pool], candidates: Iterable[str], visible: Visibility, size: int
) -> dict[int, Pool]:
    """Pools of 1..`size` Instances with stable ids (module docstring)."""
    if size < 1:
        return {}
    present = set(candidates)
    taken: set[str] = set()
    pools: dict[int, list[str]] = {}
    nodes: dict[int, str] = {}
    for pool_id in sorted(previous):
        pool = previous[pool_id]
        kept = []
        for name in pool.instances:
            if name in present and name not in taken and pool.node in visible.get(name, frozenset()):
                kept.append(name)
                taken.add(name)
                if len(kept) == size:
                    break
        if kept:
            pools[pool_id] = kept
            nodes[pool_id] = pool.node
    for name in sorted(present - taken):
        seen_from = visible.get(name, frozenset())
        if not seen_from:
            continue
        room = [i for i in sorted(pools) if len(pools[i]) < size and nodes[i] in seen_from]
        if room:
            pools[room[0]].append(name)
            continue
        load: dict[str, int] = {}
        for i in pools:
            load[nodes[i]] = load.get(nodes[i], 0) + 1
        node = min(seen_from, key=lambda n: (load.get(n, 0), n))
        new_id = next(i for i in range(len(pools) + 1) if i not in pools)
        pools[new_id] = [name]
        nodes[new_id] = node
    return {i: Pool(nodes[i], (tuple(pools[i]),)) for i in sorted(pools)}
