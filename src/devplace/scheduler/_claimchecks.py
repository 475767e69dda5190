"""The DRA claims filter of one pod in one burst (issue #25): kube-scheduler's DynamicResources Filter and Reserve.

Pure over the burst's allocation `Snapshot` (`allocations`): a `ClaimCheck` is a node check (`filters.NodeCheck`)
that passes a node when every claim of the pod already allocated may be used there (its allocation's nodeSelector
admits the node) and the others can all be allocated there together (`Snapshot.allocate`). `reserve(binding)`
completes the binding with the chosen node's allocations and assumes them into the snapshot, so the next pod of the
burst sees those devices taken. Verdicts per node are the allocator's (`NoFit.reason`, or the step budget's
`Undecided`), so `explain` and the pod's condition say why.

Why a memo: kube-scheduler filters until it has found a share of the nodes feasible (230 of 500), then scores; with
DRA that is one allocation per node per pod, the reason its DRA throughput is tens of pods per second. Pods made from
one template ask the same thing, and between two of them only the pools the first one's devices are in changed. So
each verdict is remembered in the snapshot under (the claims' specs, the node) with the node's generation
(`Snapshot.node_generation`: what `assume` changed of its pools) and reused while that is unchanged: a pod costs one
allocation per node whose pools moved, plus one on the node it is bound to (the allocation itself, which carries the
claim's own share ids). Verdicts are the same with or without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from devplace.api import NodeSelector
from devplace.scheduler._allocations import Fit, NodeRef, Snapshot
from devplace.scheduler._claims import Claim, parse_claim
from devplace.scheduler._decisions import Binding
from devplace.scheduler._extended import Ask, extended_claim, extended_status, served_by_dra
from devplace.scheduler._nodes import NodeInfo
from devplace.scheduler._podclaims import PodClaims, allocation_of

NOT_AVAILABLE = "resourceclaim not available on the node"
"""kube-scheduler's reason for a node an allocated claim's nodeSelector does not admit."""


class ClaimCheck:
    """One pod's claims against one burst's snapshot (module docstring). Raises `errors.Invalid` at construction for a
    claim that cannot be allocated at all (Kubernetes refuses it too)."""

    def __init__(
        self,
        snapshot: Snapshot,
        claims: PodClaims,
        *,
        first_fit: bool,
        strategy: str = "firstFit",
        pod: Mapping[str, Any] | None = None,
        extended: tuple[Ask, ...] = (),
    ) -> None:
        """`extended`: the pod's asks for extended resources a DeviceClass serves (`extended.asks`; `pod` is then
        the Pod): on a node whose allocatable offers such a resource the device plugin serves it (its free amount is
        checked here, since the caller leaves it out of the pod's requests), elsewhere a claim made for the pod
        (`extended.extended_claim`) is allocated with the pod's other claims."""
        self.snapshot = snapshot
        self.first_fit = first_fit
        self.pod = pod or {}
        self.extended = extended
        self._node_asks: dict[str, tuple[Ask, ...]] = {}
        """Node -> the extended asks DRA serves there (those its allocatable does not offer)."""
        self._synthetic: dict[tuple[Ask, ...], tuple[str, Claim, dict[str, Any]]] = {}
        self.score: Callable[[NodeInfo], int] | None = None
        """How good a feasible node is for the claims (0..100), by `strategy`: `binpack` and `optimal` prefer the
        node whose devices are most held already (best fit: the fewest left unused, so a later pod that needs many
        still finds a node with many; on fragmented workloads this places 98.5% of the most that can be placed,
        first fit 97%, `bench/dra_scheduler.py`), `spread` the least held; `firstFit` adds nothing (Kubernetes' DRA
        has no scoring)."""
        self.allocated = [a for _, c in claims.allocated if (a := allocation_of(c)) is not None]
        self._selectors = [
            NodeSelector.from_wire(list(selector.get("nodeSelectorTerms") or []))
            for a in self.allocated
            if (selector := a.get("nodeSelector"))
        ]
        """The allocated claims' node selectors, parsed once (not once per node)."""
        self.keys = [k for k, _ in claims.claims]
        self.pending: list[tuple[str, Claim]] = [(k, parse_claim(c)) for k, c in claims.unallocated]
        self.fits: dict[str, Fit] = {}
        self._names = [(f"claim {c.key}", f"claim {k}") for k, c in self.pending]
        """The allocator names a claim by uid; a user knows it by `namespace/name`; the memo, shared by pods whose
        claims are alike, by its place among the pod's pending claims (`claim #0`)."""
        self.signature = json.dumps(
            [[c.get("spec") for _, c in claims.unallocated], [a.get("nodeSelector") for a in self.allocated]],
            sort_keys=True,
            default=str,
        )
        """What the verdicts depend on besides the node: the pending claims' specs, the allocated ones' selectors."""
        if (self.pending or extended) and strategy in ("binpack", "optimal"):
            self.score = self._held_share
        elif (self.pending or extended) and strategy == "spread":
            self.score = lambda node: 100 - self._held_share(node)

    def _pending_on(self, asks: tuple[Ask, ...]) -> list[tuple[str, Claim]]:
        """The claims to allocate on a node where DRA serves `asks` of the extended ones."""
        if not asks:
            return self.pending
        made = self._synthetic.get(asks)
        if made is None:
            wire = extended_claim(self.pod, asks)
            key = f"{wire['metadata']['namespace']}/{wire['metadata']['name']}"
            made = self._synthetic[asks] = (key, parse_claim(wire), wire)
        return [*self.pending, (made[0], made[1])]

    def __call__(self, node: NodeInfo) -> str | None:
        ref = NodeRef(node.name, node.labels)
        for selector in self._selectors:
            if not selector.matches(node.labels, node.name):
                return NOT_AVAILABLE
        asks: tuple[Ask, ...] = ()
        if self.extended:
            offered = node.allocatable.extended
            asks = served_by_dra(self.extended, offered)
            for ask in self.extended:
                if ask not in asks:
                    want = sum(a.count for a in self.extended if a.resource == ask.resource)
                    if node.requested.extended.get(ask.resource, 0) + want > offered.get(ask.resource, 0):
                        return f"insufficient {ask.resource}"
            self._node_asks[node.name] = asks
        pending = self._pending_on(asks)
        if not pending:
            return None
        signature = self.signature if not asks else f"{self.signature}|{[(a.device_class, a.count) for a in asks]}"
        key = (signature, node.name, tuple(sorted(node.labels.items())))
        generation = self.snapshot.node_generation(ref)
        known = self.snapshot.memo.get(key)
        if known is not None and known[0] == generation:
            reason = known[1]
        else:
            reason = self._decide(ref, pending)
            self.snapshot.memo[key] = (generation, reason)
        if reason is None:
            return None
        for i, (_, name) in enumerate(self._names):
            reason = reason.replace(f"claim #{i}", name)
        return reason

    def _decide(self, ref: NodeRef, pending: list[tuple[str, Claim]]) -> str | None:
        outcome = self.snapshot.allocate(ref, [c for _, c in pending], first_fit=self.first_fit)
        if isinstance(outcome, Fit):
            self.fits[ref.name] = outcome
            return None
        reason = outcome.reason
        names = [*self._names, *((f"claim {c.key}", f"claim {k}") for k, c in pending[len(self.pending) :])]
        for i, (uid, _) in enumerate(names):
            reason = reason.replace(uid, f"claim #{i}")
        return reason

    def _held_share(self, node: NodeInfo) -> int:
        """Per cent of the devices `node` reaches that are held (by claims, or by this cycle's decisions)."""
        view = self.snapshot.view(NodeRef(node.name, node.labels))
        if not view.devices:
            return 0
        holdings = self.snapshot.holdings
        held = sum(1 for device in view.devices if holdings.holds(device.id))
        return held * 100 // len(view.devices)

    def reserve(self, binding: Binding) -> Binding:
        """`binding` with each claim's allocation on its node (None for claims allocated before), assumed."""
        made: dict[str, Mapping[str, Any]] = {}
        asks = self._node_asks.get(binding.node, ())
        pending = self._pending_on(asks)
        if pending:
            fit = self.fits.get(binding.node)
            if fit is None:  # the verdict came from the memo: allocate for this pod's own claims now
                node = binding.node
                outcome = self.snapshot.allocate(node, [c for _, c in pending], first_fit=self.first_fit)
                assert isinstance(outcome, Fit), "a node the memo passes still fits: its pools have not moved"
                fit = outcome
            for (key, _), allocation in zip(pending, fit.allocations, strict=True):
                made[key] = allocation
            self.snapshot.assume(fit.allocations)
        keys = list(self.keys)
        extra: dict[str, Any] = {}
        if asks:
            key, _, wire = self._synthetic[asks]
            keys.append(key)
            extra = {"extended_claim": wire, "extended_status": extended_status(wire["metadata"]["name"], asks)}
        return replace(binding, claims=tuple((key, made.get(key)) for key in keys), **extra)
