"""Maximum flow (Dinic's algorithm) on small integer networks: the polynomial core of device selection.

Why a flow and not a search: Kubernetes' DRA allocator backtracks over permutations of devices and goes exponential
when no allocation exists (kubernetes#131730). Here identical devices are grouped first (same matching classes, same
visibility), so a network has one vertex per *group*, and a max flow decides feasibility and the best placement in
polynomial time: O(V^2 E) in general, far less on the unit-capacity layered graphs the scheduler builds.

Deterministic: edges are tried in the order they were added, so the same network always yields the same flow.
"""

from __future__ import annotations

from collections import deque


class Network:
    """A directed network with integer capacities. Build with `edge`, solve with `max_flow`, read with `flow`."""

    __slots__ = ("_cap", "_head", "_to", "_vertices")

    def __init__(self, vertices: int) -> None:
        self._vertices = vertices
        self._head: list[list[int]] = [[] for _ in range(vertices)]  # per vertex, its edge ids (residual included)
        self._to: list[int] = []
        self._cap: list[int] = []  # residual capacity; edge e's reverse is e ^ 1

    def add_vertex(self) -> int:
        self._head.append([])
        self._vertices += 1
        return self._vertices - 1

    def edge(self, u: int, v: int, capacity: int) -> int:
        """Add u -> v with `capacity`; returns the edge id for `flow`."""
        e = len(self._to)
        self._to += (v, u)
        self._cap += (capacity, 0)
        self._head[u].append(e)
        self._head[v].append(e + 1)
        return e

    def flow(self, e: int) -> int:
        """The flow on edge `e` (what its reverse edge holds)."""
        return self._cap[e ^ 1]

    def max_flow(self, source: int, sink: int) -> int:
        total = 0
        while True:
            level = self._levels(source, sink)
            if level[sink] < 0:
                return total
            cursor = [0] * self._vertices
            while True:
                pushed = self._augment(source, sink, level, cursor)
                if not pushed:
                    break
                total += pushed

    def _levels(self, source: int, sink: int) -> list[int]:
        level = [-1] * self._vertices
        level[source] = 0
        queue = deque([source])
        to, cap, head = self._to, self._cap, self._head
        while queue:
            u = queue.popleft()
            for e in head[u]:
                v = to[e]
                if cap[e] > 0 and level[v] < 0:
                    level[v] = level[u] + 1
                    queue.append(v)
        return level

    def _augment(self, source: int, sink: int, level: list[int], cursor: list[int]) -> int:
        """One blocking-flow path from `source` (iterative DFS over the level graph); 0 when none is left."""
        to, cap, head = self._to, self._cap, self._head
        path: list[int] = []  # edge ids from source
        u = source
        while True:
            if u == sink:
                pushed = min(cap[e] for e in path)
                for e in path:
                    cap[e] -= pushed
                    cap[e ^ 1] += pushed
                return pushed
            edges = head[u]
            advanced = False
            while cursor[u] < len(edges):
                e = edges[cursor[u]]
                v = to[e]
                if cap[e] > 0 and level[v] == level[u] + 1:
                    path.append(e)
                    u = v
                    advanced = True
                    break
                cursor[u] += 1
            if advanced:
                continue
            if not path:
                return 0
            level[u] = -1  # dead end: prune it for this phase
            e = path.pop()
            u = to[e ^ 1]
            cursor[u] += 1
