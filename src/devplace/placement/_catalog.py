"""The fleet catalog: EMCO's /v2 hierarchy kept in the devplace store. The I/O shell behind every /v2 CRUD route.

Each object is a cluster-scoped fleet kind (see `devplace.placement._kinds`), keyed by a deterministic DNS-1123
encoding of its full EMCO path, labelled with its parent's store name, so creating a duplicate is a store-level
`AlreadyExists` and listing children is one label-selector list. Every write is a compare-and-swap: creates are
`store.create`, updates and deletes go through `store.cas` (read, decide, write with the resourceVersion read).

"Refuse PUT and DELETE while children exist" without races:
- Creating a child is (1) check that every ancestor exists, (2) `store.create(child)`, (3) bump a counter annotation
  on the parent by CAS (re-read and retry on Conflict). If the parent is gone at (3), the child deletes itself and the
  create fails with 404 - a concurrent delete of the parent won.
- Deleting (or replacing) a parent is (1) read it (resourceVersion R), (2) list its children and refuse if any,
  (3) delete (update) it through `store.cas` starting from R. A fresh copy whose child-writes counter moved means a
  child was written since the listing: the decision refuses with `Conflict` (409; the client retries); any other
  change (a concurrent PUT of the parent) is re-decided on the fresh copy.
- Interleavings: if the child's bump lands before the parent's write, the parent's precondition fails and the re-run
  sees the child; if the parent's write lands first, the child's bump finds no parent and the child removes itself.
  Either way no child outlives its parent (a process dying between (2) and (3) of a create can leave one orphan,
  which plans ignore: `service` drops every object of the subtree whose parent is not in it).
- Writes below a deployment intent group also bump the group, so its resourceVersion changes whenever anything a plan
  reads from its subtree changes; instantiation writes its decision with a CAS on the version it planned from.

"One allocatable requirement per resource name per hpa resource consumer" without races:
- The rule is checked before the write (`_check_rules`, 400), which catches the sequential case, and again after it
  (`_settle`), because two writers can both pass the first check. A write that gives a requirement a resource it did
  not hold (a create, or a PUT changing the resource) stores it marked pending (`PENDING_ANNOTATION`, which records
  how to undo the write: delete it, or restore the previous body), bumps the parents, then lists the consumer's
  requirements. A confirmed (unmarked) rival for the resource, or a pending one whose EMCO name sorts earlier, wins:
  the writer undoes its own write (`_withdraw` for a create, a CAS restore for a PUT) and answers 409. Otherwise it
  undoes every pending rival (a CAS on the version it read) and confirms itself (a CAS clearing the mark).
- The later of two writes always lists the earlier one; the earlier may not list the later. Confirmation is what
  makes the decision identical anyway: a rival's confirm and the undo of that rival are CAS writes on the same version,
  so exactly one lands, and a write that lost its undo re-lists and sees the rival confirmed. A write is answered with
  success only once confirmed, and a confirmed requirement is never undone by a racer.
- A process dying while its write is pending leaves the mark; the pre-check still counts that requirement, and a later
  writer of the same resource would undo it only if it got past the pre-check.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from devplace import errors
from devplace.clocks import Clock, SystemClock
from devplace.placement import _levels as levels
from devplace.placement._bodies import AppBody, ClusterBody, EmcoBody, GenericAppIntentBody, HpaIntentBody
from devplace.placement._consumers import HpaConsumerBody
from devplace.placement._kinds import API_VERSION, CHILD_WRITES_ANNOTATION, DIG_LABEL, PARENT_LABEL
from devplace.placement._levels import FleetPath, Level
from devplace.placement._requirements import HpaRequirementBody, Need
from devplace.store import DELETE, Delete, Store, cas

B = TypeVar("B", bound=EmcoBody)

Obj = dict[str, Any]

PENDING_ANNOTATION = "fleet.devplace.io/pending-claim"
"""On a requirement whose claim on an allocatable resource is not yet confirmed: JSON null if it was created, else
the EMCO body it replaced (restored if the write loses)."""


def dig_state(dig: Mapping[str, Any]) -> str:
    """A deployment intent group's lifecycle state: Created, Approved, Instantiated, Failed or Terminated."""
    status = dig.get("status") or {}
    return str(status.get("state") or "Created")


@dataclass(frozen=True)
class Stored(Generic[B]):
    """A stored fleet object read back: its path (by name), its body parsed once into the level's typed model, and
    the stored object itself (resourceVersion, status, content, labels)."""

    path: FleetPath
    body: B
    obj: Obj

    @property
    def name(self) -> str:
        return self.path.leaf

    @property
    def content(self) -> Mapping[str, Any]:
        return self.obj["spec"].get("content") or {}


def manifests_of(app: Stored[AppBody]) -> list[Obj]:
    """An app's manifests: inline in its body, or read from the chart archive it was registered with."""
    return list(app.body.manifests) or list(app.content.get("manifests") or [])


def cluster_labels(cluster: Stored[ClusterBody]) -> dict[str, str]:
    """A cluster's labels (`spec.labels`: registered with the body, added or removed over `/labels`)."""
    kept = cluster.obj["spec"].get("labels")
    return dict(kept) if kept is not None else dict(cluster.body.metadata.labels)


def cluster_endpoint(cluster: Stored[ClusterBody]) -> str | None:
    """Where a cluster's live inventory is read: `spec.endpoint`, else its kubeconfig's server."""
    server = cluster.content.get("server")
    return cluster.body.endpoint or (str(server) if server else None)


@dataclass(frozen=True)
class Subtree:
    """Everything a plan reads for one deployment intent group, each body parsed once. `problems` names stored
    objects whose body no longer parses (a plan refuses to run on them)."""

    dig: Obj
    apps: list[Stored[AppBody]]
    placement_intents: list[FleetPath]
    app_intents: list[Stored[GenericAppIntentBody]]
    hpa_intents: list[Stored[HpaIntentBody]]
    consumers: list[Stored[HpaConsumerBody]]
    requirements: list[Stored[HpaRequirementBody]]
    clusters: list[Stored[ClusterBody]]
    problems: list[str]


def path_of(obj: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(obj["spec"]["path"])


def view(obj: Mapping[str, Any]) -> Obj:
    """The EMCO body of a stored object, as the client sent it."""
    return copy.deepcopy(dict(obj["spec"]["emco"]))


def typed(level: Level, model: type[B], obj: Obj, problems: list[str] | None = None) -> Stored[B] | None:
    """A stored object with its body parsed (`model` is `level.body`); a body that no longer parses is reported into
    `problems` (and None returned) when given, else raised."""
    path = FleetPath(level, path_of(obj))
    try:
        body = model.parse(obj["spec"]["emco"])
    except errors.Invalid as e:
        if problems is None:
            raise
        problems.append(f"{level.describe(path.names)}: {e.message}")
        return None
    return Stored(path, body, obj)


def _need(obj: Mapping[str, Any]) -> Need:
    return HpaRequirementBody.parse(obj["spec"]["emco"]).need


def _claim(obj: Mapping[str, Any]) -> str | None:
    """The allocatable resource a stored hpa resource requirement claims, if any."""
    need = _need(obj)
    return need.name if need.allocatable else None


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def _pending(obj: Mapping[str, Any]) -> bool:
    return PENDING_ANNOTATION in _annotations(obj)


def _mark(obj: Obj, previous: Obj | None) -> None:
    obj["metadata"]["annotations"] = {**_annotations(obj), PENDING_ANNOTATION: json.dumps(previous)}


def _unmarked(obj: Mapping[str, Any]) -> Obj:
    out = copy.deepcopy(dict(obj))
    annotations = _annotations(out)
    annotations.pop(PENDING_ANNOTATION, None)
    out["metadata"]["annotations"] = annotations
    if not annotations:
        del out["metadata"]["annotations"]
    return out


def _claims_anew(body: EmcoBody, current: Mapping[str, Any] | None) -> bool:
    """Whether writing `body` over `current` (None: a create) must go through `_settle`."""
    if not isinstance(body, HpaRequirementBody) or not body.need.allocatable:
        return False
    return current is None or _pending(current) or _claim(current) != body.need.name


def _bumped(current: Mapping[str, Any]) -> Obj:
    """`current` with its child-writes counter one higher."""
    out = copy.deepcopy(dict(current))
    annotations = _annotations(out)
    annotations[CHILD_WRITES_ANNOTATION] = str(int(annotations.get(CHILD_WRITES_ANNOTATION, 0)) + 1)
    out["metadata"]["annotations"] = annotations
    return out


def child_writes(obj: Mapping[str, Any]) -> str:
    return _annotations(obj).get(CHILD_WRITES_ANNOTATION, "0")


def _restored(obj: Mapping[str, Any]) -> Obj | Delete:
    """The undo of the pending write on `obj`: delete it (it was created) or restore the body it replaced."""
    previous = json.loads(_annotations(obj)[PENDING_ANNOTATION])
    if previous is None:
        return DELETE
    restored = _unmarked(obj)
    restored["spec"]["emco"] = previous
    return restored


def _relabelled(current: Mapping[str, Any], body: ClusterBody) -> dict[str, str]:
    """A replaced cluster's labels: the new body's, plus those added over `/labels` (not from the old body)."""
    old_body = (current["spec"]["emco"].get("metadata") or {}).get("labels") or {}
    if isinstance(old_body, list):
        old_body = dict.fromkeys(old_body, "")
    kept = current["spec"].get("labels")
    kept = dict(old_body) if kept is None else dict(kept)
    added = {k: v for k, v in kept.items() if old_body.get(k) != v}
    return {**added, **body.metadata.labels}


class _RivalWon(Exception):
    """A rival's claim was confirmed before this writer could undo it."""

    def __init__(self, rival: Obj) -> None:
        super().__init__(rival["metadata"]["name"])
        self.rival = rival


class _Undone(Exception):
    """This writer's pending claim was undone (or replaced) by another writer."""


class Catalog:
    def __init__(self, store: Store, *, clock: Clock | None = None, attempts: int = 16) -> None:
        self.store = store
        self.clock = clock or SystemClock()
        self.attempts = attempts

    # -- reads ------------------------------------------------------------------------------------------------

    async def _read(self, level: Level, path: tuple[str, ...]) -> Obj:
        try:
            return await self.store.get(level.kind, level.store_name(path))
        except errors.NotFound:
            raise errors.NotFound(f"{level.describe(path)} not found") from None

    async def ancestors(self, level: Level, path: tuple[str, ...]) -> list[Obj]:
        """The stored ancestors of `level` at `path`, root first; 404 names the first missing one."""
        out = []
        width = 0
        for ancestor in level.chain[:-1]:
            width += len(ancestor.params)
            out.append(await self._read(ancestor, path[:width]))
        return out

    async def read(self, level: Level, path: tuple[str, ...]) -> Obj:
        """The stored object; a missing ancestor is reported as itself."""
        self._check_width(level, path)
        await self.ancestors(level, path)
        return await self._read(level, path)

    async def get(self, level: Level, path: tuple[str, ...]) -> Obj:
        return view(await self.read(level, path))

    async def children(self, level: Level, parent_name: str) -> list[Obj]:
        """Stored objects of `level` whose parent has store name `parent_name`, in path order."""
        return await self._labelled(level, PARENT_LABEL, parent_name)

    async def _labelled(self, level: Level, label: str, value: str) -> list[Obj]:
        listed = await self.store.list(level.kind, "", f"{label}={value}")
        # Filter again: the selector is an optimisation the backend may not apply exactly.
        items = [o for o in listed.items if (o.get("metadata", {}).get("labels") or {}).get(label) == value]
        return sorted(items, key=path_of)

    async def list_bodies(self, level: Level, parent_path: tuple[str, ...]) -> list[Obj]:
        """EMCO bodies of the children of `parent_path` (404 if it does not exist)."""
        if len(parent_path) != level.parent_width:
            raise errors.Invalid(f"{level.title}: expected a parent path of {level.parent_width} names")
        if level.parent is None:
            listed = await self.store.list(level.kind, "")
            return [view(o) for o in sorted(listed.items, key=path_of)]
        await self.read(level.parent, parent_path)
        return [view(o) for o in await self.children(level, level.parent.store_name(parent_path))]

    async def app_intent_spec(self, gpi_path: tuple[str, ...], app: str) -> Obj:
        """EMCO's `app-intents/?app=NAME`: the `spec` (as sent) of the first app intent, in name order, that places
        `app`, or EMCO's empty answer `{"intent": {}}` when none does (404 when the placement intent is missing)."""
        level = levels.GENERIC_APP_INTENT
        await self.read(levels.GENERIC_PLACEMENT_INTENT, gpi_path)
        for obj in await self.children(level, levels.GENERIC_PLACEMENT_INTENT.store_name(gpi_path)):
            stored = typed(level, GenericAppIntentBody, obj)
            if stored is not None and stored.body.spec.app == app:
                spec: Obj = view(obj)["spec"]
                return spec
        return {"intent": {}}

    async def delete_all(self, level: Level, parent_path: tuple[str, ...]) -> None:
        """Collection DELETE (EMCO deletes every member): refused, deleting nothing, while any member has children;
        otherwise each is deleted as by `delete` (a member written meanwhile stops it with that member's error)."""
        if len(parent_path) != level.parent_width:
            raise errors.Invalid(f"{level.title}: expected a parent path of {level.parent_width} names")
        if level.parent is None:
            members = await self.all_of_kind(level)
        else:
            await self.read(level.parent, parent_path)
            members = await self.children(level, level.parent.store_name(parent_path))
        for member in members:
            await self._refuse_children(level, path_of(member), "deleted")
        for member in members:
            with contextlib.suppress(errors.NotFound):  # deleted meanwhile: the goal is reached
                await self.delete(level, path_of(member))

    async def all_of_kind(self, level: Level) -> list[Obj]:
        listed = await self.store.list(level.kind, "")
        return sorted(listed.items, key=path_of)

    async def all_clusters(self) -> list[Stored[ClusterBody]]:
        """Every registered cluster, typed (one whose body no longer parses is left out)."""
        objs = await self.all_of_kind(levels.CLUSTER)
        return [c for c in (typed(levels.CLUSTER, ClusterBody, o, []) for o in objs) if c is not None]

    async def clusters(self, provider: str) -> list[Stored[ClusterBody]]:
        """The provider's clusters, typed (404 if the provider does not exist)."""
        await self.read(levels.CLUSTER_PROVIDER, (provider,))
        objs = await self.children(levels.CLUSTER, levels.CLUSTER_PROVIDER.store_name((provider,)))
        return [c for c in (typed(levels.CLUSTER, ClusterBody, o) for o in objs) if c is not None]

    async def subtree(self, dig_path: tuple[str, ...]) -> Subtree:
        level = levels.DEPLOYMENT_INTENT_GROUP
        dig = await self.read(level, dig_path)
        name = level.store_name(dig_path)
        capp = levels.COMPOSITE_APP.store_name(dig_path[:3])
        problems: list[str] = []

        def each(lvl: Level, model: type[B], objs: list[Obj]) -> list[Stored[B]]:
            return [t for t in (typed(lvl, model, o, problems) for o in objs) if t is not None]

        async def below(lvl: Level) -> list[Obj]:
            return await self._labelled(lvl, DIG_LABEL, name)

        gpis = await below(levels.GENERIC_PLACEMENT_INTENT)
        return Subtree(
            dig=dig,
            apps=each(levels.APP, AppBody, await self.children(levels.APP, capp)),
            placement_intents=[FleetPath(levels.GENERIC_PLACEMENT_INTENT, path_of(o)) for o in gpis],
            app_intents=each(levels.GENERIC_APP_INTENT, GenericAppIntentBody, await below(levels.GENERIC_APP_INTENT)),
            hpa_intents=each(levels.HPA_INTENT, HpaIntentBody, await below(levels.HPA_INTENT)),
            consumers=each(levels.HPA_CONSUMER, HpaConsumerBody, await below(levels.HPA_CONSUMER)),
            requirements=each(levels.HPA_REQUIREMENT, HpaRequirementBody, await below(levels.HPA_REQUIREMENT)),
            clusters=each(levels.CLUSTER, ClusterBody, await self.all_of_kind(levels.CLUSTER)),
            problems=problems,
        )

    # -- writes -----------------------------------------------------------------------------------------------

    @staticmethod
    def _check_width(level: Level, path: tuple[str, ...]) -> None:
        if len(path) != len(level.all_params):
            raise errors.Invalid(f"{level.title}: expected a path of {len(level.all_params)} names")

    @staticmethod
    def _wire(level: Level, path: tuple[str, ...], raw: Obj, body: EmcoBody, content: Obj | None) -> Obj:
        labels: dict[str, str] = {}
        if level.parent is not None:
            labels[PARENT_LABEL] = level.parent.store_name(path[: level.parent_width])
        if level.under_dig:
            dig = FleetPath(level, path).up(levels.DEPLOYMENT_INTENT_GROUP)
            labels[DIG_LABEL] = levels.DEPLOYMENT_INTENT_GROUP.store_name(dig.names)
        meta: Obj = {"name": level.store_name(path)}
        if labels:
            meta["labels"] = labels
        spec: Obj = {"path": list(path), "emco": copy.deepcopy(raw)}
        if content is not None:
            spec["content"] = content
        if isinstance(body, ClusterBody):
            spec["labels"] = dict(body.metadata.labels)
        return {"apiVersion": API_VERSION, "kind": level.kind, "metadata": meta, "spec": spec}

    async def _check_rules(self, level: Level, path: tuple[str, ...], body: EmcoBody, parents: list[Obj]) -> None:
        """Rules that read other objects (a requirement and its consumer, its siblings)."""
        if not isinstance(body, HpaRequirementBody) or not body.need.allocatable:
            return
        consumer = typed(levels.HPA_CONSUMER, HpaConsumerBody, parents[-1])
        assert consumer is not None
        if consumer.body.workload.container is None:
            raise errors.Invalid.field(
                "spec.allocatable",
                f"hpa resource consumer {consumer.name!r} has no container, which is required once an "
                "allocatable requirement exists",
            )
        need = body.need
        for sibling in await self.children(level, consumer.obj["metadata"]["name"]):
            other = typed(level, HpaRequirementBody, sibling)
            assert other is not None
            if other.body.need.allocatable and other.body.need.name == need.name and other.name != body.name:
                raise errors.Invalid.field(
                    need.field("name"),
                    f"hpa resource consumer {consumer.name!r} already has requirement {other.name!r} for {need.name}",
                )

    async def _cas(self, level: Level, name: str, decide: Any, first: Obj | None = None) -> Obj:
        written = await cas(
            self.store, level.kind, name, "", decide, first=first, clock=self.clock, attempts=self.attempts
        )
        return written.object

    async def _bump(self, level: Level, path: tuple[str, ...]) -> None:
        try:
            await self._cas(level, level.store_name(path), _bumped)
        except errors.NotFound:
            raise errors.NotFound(f"{level.describe(path)} not found") from None

    async def _touch_parents(self, level: Level, path: tuple[str, ...]) -> None:
        """Bump the parent (and the enclosing deployment intent group): see the module docstring."""
        parent = level.parent
        if parent is None:
            return
        await self._bump(parent, path[: level.parent_width])
        if level.under_dig and parent is not levels.DEPLOYMENT_INTENT_GROUP:
            dig = FleetPath(level, path).up(levels.DEPLOYMENT_INTENT_GROUP)
            await self._bump(levels.DEPLOYMENT_INTENT_GROUP, dig.names)

    async def create(self, level: Level, parent_path: tuple[str, ...], raw: Any, *, content: Obj | None = None) -> Obj:
        """POST: 400 for a bad body, 404 for a missing ancestor, 409 for a duplicate; returns the body as sent.
        `content` is what a multipart file part brought (kept with the object, never in its body)."""
        body = level.body.parse(raw)
        path = (*parent_path, *level.identity(body))
        self._check_width(level, path)
        parents = await self.ancestors(level, path)
        await self._check_rules(level, path, body, parents)
        wire = self._wire(level, path, raw, body, content)
        settle = _claims_anew(body, None)
        if settle:
            _mark(wire, None)
        try:
            stored = await self.store.create(wire)
        except errors.AlreadyExists:
            raise errors.AlreadyExists(level.exists or f"{level.describe(path)} already exists") from None
        try:
            await self._touch_parents(level, path)
        except errors.NotFound as e:
            await self._withdraw(level, stored)
            raise errors.NotFound(f"{e.message} (deleted while {level.describe(path)} was being created)") from e
        if settle:
            assert isinstance(body, HpaRequirementBody)
            stored = await self._settle(path, body, stored)
        return view(stored)

    async def _withdraw(self, level: Level, stored: Obj) -> None:
        """Delete a child whose parent vanished while it was being created, even if it was written meanwhile."""
        with contextlib.suppress(errors.NotFound):
            await self._cas(level, stored["metadata"]["name"], lambda _: DELETE, first=stored)

    async def _settle(self, path: tuple[str, ...], body: HpaRequirementBody, stored: Obj) -> Obj:
        """Confirm the pending claim `stored` makes on an allocatable resource, or undo it and refuse (409): see the
        module docstring. Returns the confirmed object."""
        level = levels.HPA_REQUIREMENT
        resource = body.need.name
        consumer = levels.HPA_CONSUMER.store_name(path[:-1])
        rivals = [
            o
            for o in await self.children(level, consumer)
            if o["metadata"]["name"] != stored["metadata"]["name"] and _claim(o) == resource
        ]
        winner = next((o for o in rivals if not _pending(o)), None) or next(
            (o for o in rivals if path_of(o)[-1] < path[-1]), None
        )
        if winner is not None:
            await self._undo_own(stored)
            raise self._duplicate(path, resource, winner)

        def undo_rival(current: Obj) -> Obj | Delete | None:
            if _claim(current) != resource:
                return None  # no longer a rival
            if not _pending(current):
                raise _RivalWon(current)  # confirmed before this writer could undo it: it wins
            return _restored(current)

        def confirm(current: Obj) -> Obj:
            if not _pending(current) or _claim(current) != resource:
                raise _Undone  # a rival undid this write, or another write replaced it
            return _unmarked(current)

        try:
            for rival in rivals:  # all pending, all sorting later: they lose
                with contextlib.suppress(errors.NotFound):
                    await self._cas(level, rival["metadata"]["name"], undo_rival, first=rival)
            confirmed = await self._cas(level, stored["metadata"]["name"], confirm, first=stored)
        except _RivalWon as won:
            await self._undo_own(stored)
            raise self._duplicate(path, resource, won.rival) from None
        except (_Undone, errors.NotFound):
            raise await self._undone(path, resource) from None
        if rivals:
            await self._touch_parents_after_undo(path)
        return confirmed

    def _duplicate(self, path: tuple[str, ...], resource: str, winner: Obj) -> errors.Refused:
        return errors.Refused(
            f"{levels.HPA_REQUIREMENT.describe(path)} refused: hpa resource consumer {path[-2]!r} already has "
            f"requirement {path_of(winner)[-1]!r} for {resource} (written concurrently)"
        )

    async def _undone(self, path: tuple[str, ...], resource: str) -> errors.DevplaceError:
        """The error for a write that a rival undid: 409 naming the rival that holds the resource now."""
        for other in await self.children(levels.HPA_REQUIREMENT, levels.HPA_CONSUMER.store_name(path[:-1])):
            if path_of(other) != path and _claim(other) == resource:
                return self._duplicate(path, resource, other)
        return errors.Conflict(f"{levels.HPA_REQUIREMENT.describe(path)} was changed concurrently; retry")

    async def _undo_own(self, mine: Obj) -> None:
        """Undo this writer's pending write, even if the object was rewritten meanwhile, then bump the parents."""
        level = levels.HPA_REQUIREMENT
        if json.loads(_annotations(mine)[PENDING_ANNOTATION]) is None:
            await self._withdraw(level, mine)
        else:

            def undo(current: Obj) -> Obj | Delete | None:
                return _restored(current) if _pending(current) else None  # not pending: undone by a rival already

            with contextlib.suppress(errors.NotFound):  # deleted meanwhile: nothing left to restore
                await self._cas(level, mine["metadata"]["name"], undo, first=mine)
        await self._touch_parents_after_undo(path_of(mine))

    async def _touch_parents_after_undo(self, path: tuple[str, ...]) -> None:
        """Bump the parents again so a plan read while the undone write was visible cannot be committed."""
        try:
            await self._touch_parents(levels.HPA_REQUIREMENT, path)
        except errors.NotFound:
            pass  # the parent went meanwhile: nothing is left to keep consistent

    async def _refuse_children(self, level: Level, path: tuple[str, ...], verb: str) -> None:
        name = level.store_name(path)
        for child in level.children:
            found = await self.children(child, name)
            if found:
                names = ", ".join(repr(FleetPath(child, path_of(o)).leaf) for o in found[:5])
                more = f" and {len(found) - 5} more" if len(found) > 5 else ""
                raise errors.Refused(
                    f"{level.describe(path)} cannot be {verb} while it has {child.title}s ({names}{more}); "
                    "delete them first"
                )

    @staticmethod
    def _children_unchanged(level: Level, path: tuple[str, ...], verb: str, seen: Obj, current: Obj) -> None:
        """Refuse to decide on `current` when a child was written since the children were listed under `seen`."""
        if child_writes(current) != child_writes(seen):
            raise errors.Conflict(f"{level.describe(path)} cannot be {verb}: its children changed meanwhile; retry")

    async def put(
        self, level: Level, path: tuple[str, ...], raw: Any, *, content: Obj | None = None
    ) -> tuple[Obj, bool]:
        """PUT: replace the body (409 while children exist), or create when absent; returns (body, created).
        `content` replaces what a file part brought before (None keeps it); a cluster keeps the labels added over
        `/labels` and takes its body's labels in place of the old body's."""
        self._check_width(level, path)
        body = level.body.parse(raw)
        identity = level.identity(body)
        if identity != path[level.parent_width :]:
            field = "metadata.name" if identity[0] != path[level.parent_width] else "spec.compositeAppVersion"
            raise errors.Invalid.field(field, f"must match the URL ({'/'.join(path[level.parent_width :])})")
        parents = await self.ancestors(level, path)
        try:
            seen = await self.store.get(level.kind, level.store_name(path))
        except errors.NotFound:
            try:
                return await self.create(level, path[: level.parent_width], raw, content=content), True
            except errors.AlreadyExists:
                seen = await self._read(level, path)  # created meanwhile: replace it
        await self._refuse_children(level, path, "updated")
        await self._check_rules(level, path, body, parents)

        def decide(current: Obj) -> Obj:
            self._children_unchanged(level, path, "updated", seen, current)
            updated = _unmarked(current)
            if _claims_anew(body, current):
                # keep the undo of a write still pending on this object: it restores the confirmed body
                previous = json.loads(_annotations(current)[PENDING_ANNOTATION]) if _pending(current) else view(current)
                _mark(updated, previous)
            if isinstance(body, ClusterBody):
                updated["spec"]["labels"] = _relabelled(current, body)
            if content is not None:
                updated["spec"]["content"] = content
            updated["spec"]["emco"] = copy.deepcopy(raw)
            return updated

        try:
            stored = await self._cas(level, seen["metadata"]["name"], decide, first=seen)
        except errors.NotFound:
            raise errors.NotFound(f"{level.describe(path)} not found (deleted while being replaced)") from None
        try:
            await self._touch_parents(level, path)
        except errors.NotFound:
            pass  # cannot happen: a delete of the parent would have found this child and refused
        if _pending(stored):
            assert isinstance(body, HpaRequirementBody)
            stored = await self._settle(path, body, stored)
        return view(stored), False

    async def delete(self, level: Level, path: tuple[str, ...]) -> None:
        """DELETE: 404 if missing, 409 while children exist (or while a deployment intent group is instantiated)."""
        seen = await self.read(level, path)
        await self._refuse_children(level, path, "deleted")

        def decide(current: Obj) -> Delete:
            self._children_unchanged(level, path, "deleted", seen, current)
            if level is levels.DEPLOYMENT_INTENT_GROUP and dig_state(current) == "Instantiated":
                raise errors.Refused(f"{level.describe(path)} is instantiated; terminate it before deleting it")
            return DELETE

        try:
            await self._cas(level, seen["metadata"]["name"], decide, first=seen)
        except errors.NotFound:
            raise errors.NotFound(f"{level.describe(path)} not found") from None
        try:
            await self._touch_parents(level, path)
        except errors.NotFound:
            pass  # the parent went right after this child did: nothing is left to keep consistent
