from __future__ import annotations

from devplace.scheduler._flows import Network


def test_max_flow_finds_the_matching_a_greedy_choice_would_miss() -> None:
    # left 0 can use right 0 or 1, left 1 only right 0: greedy 0->0 blocks left 1; the flow reroutes
    net = Network(6)
    source, sink, l0, l1, r0, r1 = range(6)
    net.edge(source, l0, 1)
    net.edge(source, l1, 1)
    e00 = net.edge(l0, r0, 1)
    e01 = net.edge(l0, r1, 1)
    e10 = net.edge(l1, r0, 1)
    net.edge(r0, sink, 1)
    net.edge(r1, sink, 1)
    assert net.max_flow(source, sink) == 2
    assert (net.flow(e00), net.flow(e01), net.flow(e10)) == (0, 1, 1)


def test_capacities_bound_the_flow() -> None:
    net = Network(3)
    net.edge(0, 2, 5)
    net.edge(2, 1, 3)
    assert net.max_flow(0, 1) == 3
