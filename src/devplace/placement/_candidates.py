"""Partition candidates: what a placement controller says about each app (seed 004, "Representation of Partition
Candidates").

Per app: a replication count (how many clusters the app should run on; None = this controller has no opinion) and
either an allow list or a deny list of clusters, whichever is shorter, so a candidate over 10,000 clusters that
admits all but three is three entries long. `required` lists clusters that must be among the chosen ones (generic
placement's allOf). Every cluster a candidate excludes has a `Reason`; reasons are small objects rendered on demand,
so a controller can explain 10,000 rejections without formatting 10,000 strings. `scores` rank admitted clusters
(optional requirements' weights); `problems` are app-level faults (an allOf naming a cluster that does not exist) that
fail the app whatever the lists say.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from devplace.placement._inventory import ClusterRef


class Reason:
    """Why a cluster was excluded; `str()` renders it (subclasses keep the facts, not the text)."""

    __slots__ = ()

    def __str__(self) -> str:
        return self.text()

    def text(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Because(Reason):
    """A reason that is just text."""

    reason: str

    def text(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Candidate:
    app: str
    replicas: int | None = None
    allow: frozenset[ClusterRef] | None = None
    deny: frozenset[ClusterRef] | None = None
    required: frozenset[ClusterRef] = frozenset()
    reasons: Mapping[ClusterRef, Reason] = field(default_factory=dict)
    scores: Mapping[ClusterRef, float] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.allow is None) == (self.deny is None):
            raise ValueError(f"candidate for {self.app}: exactly one of allow and deny is required")
        if self.replicas is not None and self.replicas < 0:
            raise ValueError(f"candidate for {self.app}: replicas must not be negative")

    @classmethod
    def from_allowed(
        cls,
        app: str,
        allowed: Collection[ClusterRef],
        universe: Collection[ClusterRef],
        *,
        replicas: int | None = None,
        required: Iterable[ClusterRef] = (),
        reasons: Mapping[ClusterRef, Reason] | None = None,
        scores: Mapping[ClusterRef, float] | None = None,
        problems: Iterable[str] = (),
    ) -> Candidate:
        """The compact form: an allow list when at most half the universe is allowed, a deny list otherwise."""
        allowed_set = frozenset(allowed)
        if len(allowed_set) * 2 <= len(universe):
            allow: frozenset[ClusterRef] | None = allowed_set
            deny: frozenset[ClusterRef] | None = None
        else:
            allow, deny = None, frozenset(c for c in universe if c not in allowed_set)
        return cls(
            app,
            replicas,
            allow,
            deny,
            frozenset(required),
            dict(reasons or {}),
            dict(scores or {}),
            tuple(problems),
        )

    def admits(self, cluster: ClusterRef) -> bool:
        if self.allow is not None:
            return cluster in self.allow
        assert self.deny is not None
        return cluster not in self.deny

    def allowed_in(self, universe: Iterable[ClusterRef]) -> frozenset[ClusterRef]:
        if self.allow is not None:
            return self.allow
        assert self.deny is not None
        return frozenset(c for c in universe if c not in self.deny)

    @property
    def size(self) -> int:
        """Entries in the list this candidate carries (the compact measure)."""
        return len(self.allow if self.allow is not None else self.deny or ())
