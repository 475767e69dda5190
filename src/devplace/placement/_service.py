"""The placement service: a deployment intent group's lifecycle as EMCO runs it. The I/O shell.

Lifecycle (EMCO's states, kept in the group's `status`: `state`, `actions` with EMCO's `{state, instance, time}`):

    Created --approve--> Approved --instantiate--> Instantiated --terminate--> Terminated --instantiate--> ...
                                                                        (or --approve--> Approved)

Instantiating a Created group is refused with 409 until it is approved, as EMCO does; so is instantiating an
Instantiated one (terminate first), approving an Instantiated one, and terminating one that is not Instantiated.
`plan` is devplace's dry run: any state, nothing written.

One evaluation = read the group's subtree and the fleet from the store (`Catalog.subtree`, every body parsed once
into its typed model), read live inventories (concurrently, each bounded by `inventory_timeout`), resolve intents
into plain data (`intents.resolve`), run every placement controller concurrently under its own timeout, combine
(`combiner.combine`), patch manifests for the chosen clusters (`actions`), and render the decision document
(`reports.status_document`). Everything after the reads is pure.

- `instantiate` evaluates and writes the decision into the group's `status` with a CAS on the resourceVersion the
  evaluation read, through `store.cas`. Any write in the group's subtree bumps the group's child-writes counter (see
  `catalog`), so a decision is never committed against intents that changed under it: then the decision is dropped
  and the whole evaluation runs again (bounded). A failed decision is recorded too (the document, state `Failed`,
  no resources; the group stays Approved) and then raised as `Refused` (409), so `GET .../status` explains it.
  A committed decision starts a new instance and hands each cluster's patched manifests to that cluster
  (`members.apply_all`: created there by CAS where the cluster has an API endpoint, `NotApplied` where it has none);
  what happened to each object is written back into the status, for the same instance only.
- `terminate` moves the group to Terminated, then takes back every object the instance applied (`members.remove_all`).
- `status` answers EMCO's status query (`reports.emco_status`): the states, per app, cluster and resource what was
  applied (or, for `status=ready`, whether the object is there and ready now, read from the member), plus devplace's
  decision document under `placement`.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx2

from devplace import errors, metrics
from devplace.clocks import Clock, SystemClock
from devplace.placement import _actions as actions
from devplace.placement import _intents as intents
from devplace.placement import _levels as levels
from devplace.placement import _members as members
from devplace.placement import _reports as reports
from devplace.placement._bodies import ClusterBody, DeploymentIntentGroupBody
from devplace.placement._catalog import Catalog, Stored, cluster_endpoint, cluster_labels, dig_state
from devplace.placement._combiner import Decision, combine
from devplace.placement._controllers import PlacementContext, PlacementController, default_controllers, run_controllers
from devplace.placement._inventory import ClusterInventory, ClusterRef, live_inventory, static_inventory
from devplace.placement._members import ResourceRecord
from devplace.store import Decide, Decided, Store, Written, cas

DIG = levels.DEPLOYMENT_INTENT_GROUP
Obj = dict[str, Any]
V = TypeVar("V")
Endpoints = dict[tuple[str, str], str | None]


class PlacementService:
    def __init__(
        self,
        store: Store,
        *,
        controllers: Sequence[PlacementController] | None = None,
        clock: Clock | None = None,
        inventory_timeout: float = 5.0,
        member_timeout: float = 10.0,
        attempts: int = 5,
    ) -> None:
        self.clock = clock or SystemClock()
        self.catalog = Catalog(store, clock=self.clock)
        self.controllers = list(controllers) if controllers is not None else default_controllers()
        self.inventory_timeout = inventory_timeout
        self.member_timeout = member_timeout
        self.attempts = attempts

    # -- reading the fleet ------------------------------------------------------------------------------------

    async def _inventories(self, clusters: Sequence[Stored[ClusterBody]]) -> tuple[ClusterInventory, ...]:
        static: dict[ClusterRef, ClusterInventory] = {}
        live: list[tuple[ClusterRef, dict[str, str], str]] = []
        for cluster in clusters:
            ref = ClusterRef(cluster.path["clusterProvider"], cluster.name)
            labels = cluster_labels(cluster)
            endpoint = cluster_endpoint(cluster)
            if endpoint:
                live.append((ref, labels, endpoint))
            else:
                nodes = [n.model_dump(mode="json") for n in cluster.body.nodes]
                static[ref] = static_inventory(ref, labels, nodes)
        if live:
            async with httpx2.AsyncClient(timeout=self.inventory_timeout) as client:
                fetched = await asyncio.gather(
                    *(live_inventory(client, ref, labels, url, self.inventory_timeout) for ref, labels, url in live)
                )
            static.update({inv.ref: inv for inv in fetched})
        return tuple(static[ref] for ref in sorted(static))

    # -- evaluation -------------------------------------------------------------------------------------------

    async def _evaluate(self, dig_path: tuple[str, ...], *, dry_run: bool) -> tuple[Obj, Obj, bool, Endpoints]:
        """(decision document, the group as read, ok, each cluster's API endpoint); timed as
        `devplace_placement_plan_duration_seconds{operation}`."""
        started = time.perf_counter()
        try:
            return await self._evaluated(dig_path, dry_run=dry_run)
        finally:
            operation = "plan" if dry_run else "instantiate"
            metrics.PLACEMENT_PLAN_DURATION.labels(operation).observe(time.perf_counter() - started)

    async def _evaluated(self, dig_path: tuple[str, ...], *, dry_run: bool) -> tuple[Obj, Obj, bool, Endpoints]:
        tree = await self.catalog.subtree(dig_path)
        context, problems = intents.resolve(tree)
        clusters = await self._inventories(tree.clusters)
        endpoints: Endpoints = {(c.path["clusterProvider"], c.name): cluster_endpoint(c) for c in tree.clusters}
        context = PlacementContext(context.apps, clusters, context.app_intents, context.consumers, context.manifests)
        decision: Decision | None = None
        errs = list(problems)
        if not problems:
            outcomes = await run_controllers(self.controllers, context, self.clock)
            decision = combine(context.apps, [c.ref for c in clusters], outcomes)
            errs.extend(decision.errors)
        ok = not errs
        by_ref = {c.ref: c for c in clusters}
        resources: dict[str, dict[ClusterRef, list[Obj]]] = {}
        replicas: dict[str, dict[ClusterRef, int]] = {}
        warnings: dict[str, list[str]] = {}
        for consumer in context.consumers:
            warnings.setdefault(consumer.app, []).extend(actions.warnings(consumer))
        if ok and decision is not None:
            for placement in decision.apps:
                app_consumers = [c for c in context.consumers if c.app == placement.app]
                for ref in placement.clusters:
                    patched = actions.patch_manifests(context.manifests[placement.app], app_consumers, by_ref[ref])
                    resources.setdefault(placement.app, {})[ref] = patched
                    replicas.setdefault(placement.app, {})[ref] = actions.replicas_of(patched)
        state = ("Planned" if dry_run else "Instantiated") if ok else "Failed"
        doc = reports.status_document(state, decision, resources, replicas, warnings, errs, dry_run=dry_run)
        return doc, tree.dig, ok, endpoints

    # -- the group's status -----------------------------------------------------------------------------------

    def _now(self) -> str:
        return datetime.fromtimestamp(self.clock.now(), UTC).isoformat().replace("+00:00", "Z")

    @staticmethod
    def _status(dig: Obj) -> Obj:
        """The group's status, with EMCO's first action (Created, at the group's creation) filled in."""
        status = copy.deepcopy(dig.get("status")) or {}
        status.setdefault("state", "Created")
        if not status.get("actions"):
            created = dig["metadata"].get("creationTimestamp") or ""
            status["actions"] = [{"state": "Created", "instance": "", "time": created}]
        return status

    def _act(self, status: Obj, state: str, instance: str = "") -> Obj:
        status["state"] = state
        status["actions"] = [*status["actions"], {"state": state, "instance": instance, "time": self._now()}]
        return status

    async def _write_status(self, dig_path: tuple[str, ...], decide: Decide, first: Obj | None = None) -> Obj:
        name = first["metadata"]["name"] if first is not None else DIG.store_name(dig_path)
        try:
            written = await cas(
                self.catalog.store, DIG.kind, name, "", decide, first=first, clock=self.clock, attempts=self.attempts
            )
        except errors.NotFound:
            raise errors.NotFound(f"{DIG.describe(dig_path)} not found") from None
        return written.object

    async def _cas_status(
        self, dig_path: tuple[str, ...], decide: Callable[[Obj], Awaitable[Decided[V]]]
    ) -> Written[V]:
        """`_write_status` for a decision that also hands back a value (`Decided`); returns what `cas` did."""
        try:
            return await cas(
                self.catalog.store,
                DIG.kind,
                DIG.store_name(dig_path),
                "",
                decide,
                clock=self.clock,
                attempts=self.attempts,
            )
        except errors.NotFound:
            raise errors.NotFound(f"{DIG.describe(dig_path)} not found") from None

    async def _transition(self, dig_path: tuple[str, ...], change: Callable[[str, Obj], Obj]) -> Obj:
        first = await self.catalog.read(DIG, dig_path)  # 404 naming the missing level

        def decide(dig: Obj) -> Obj:
            return {**dig, "status": change(dig_state(dig), self._status(dig))}

        return dict((await self._write_status(dig_path, decide, first))["status"])

    async def _record(self, dig_path: tuple[str, ...], instance: str, records: list[ResourceRecord]) -> bool:
        """Write what happened on the members into the status, if `instance` is still the group's latest."""
        written: list[bool] = []

        def decide(dig: Obj) -> Obj | None:
            status = self._status(dig)
            if status.get("instance") != instance:
                written.append(False)
                return None
            status["resources"] = [r.to_wire() for r in records]
            written.append(True)
            return {**dig, "status": status}

        await self._write_status(dig_path, decide)
        return written[-1]

    # -- verbs ------------------------------------------------------------------------------------------------

    async def plan(self, dig_path: tuple[str, ...]) -> Obj:
        doc, _, _, _ = await self._evaluate(dig_path, dry_run=True)
        return doc

    async def approve(self, dig_path: tuple[str, ...]) -> Obj:
        def change(state: str, status: Obj) -> Obj:
            if state == "Instantiated":
                raise errors.Refused(f"{DIG.describe(dig_path)} is instantiated; terminate it first")
            return status if state == "Approved" else self._act(status, "Approved")

        status = await self._transition(dig_path, change)
        return {**reports.empty_status(status["state"]), **(status.get("placement") or {}), "state": status["state"]}

    async def instantiate(self, dig_path: tuple[str, ...]) -> Obj:
        """Evaluate and commit in one CAS on the group: the write is conditioned on the group as the evaluation read
        it, and every intent write bumps the group (`child_writes`), so a decision made from intents that changed
        under it conflicts and is evaluated again on fresh reads, with the CAS loop's bounded backoff. Then the
        chosen clusters get their manifests."""
        await self.catalog.read(DIG, dig_path)  # 404 naming the missing level

        def refuse_unless_ready(state: str) -> None:
            if state == "Created":
                raise errors.Refused(f"{DIG.describe(dig_path)} must be approved before it is instantiated")
            if state == "Instantiated":
                raise errors.Refused(f"{DIG.describe(dig_path)} is already instantiated; terminate it first")

        async def decide(stored: Obj) -> Decided[tuple[Obj, bool, Endpoints, str]]:
            refuse_unless_ready(dig_state(stored))  # before the (costly) evaluation
            doc, evaluated, ok, endpoints = await self._evaluate(dig_path, dry_run=False)
            refuse_unless_ready(dig_state(evaluated))
            status = self._status(evaluated)
            status["placement"] = doc
            instance = ""
            if ok:
                instance = str(sum(1 for a in status["actions"] if a.get("state") == "Instantiated") + 1)
                self._act(status, "Instantiated", instance)
                status["instance"] = instance
                status["resources"] = [r.to_wire() for r, _ in _items(doc)]
            return Decided({**evaluated, "status": status}, (doc, ok, endpoints, instance))

        try:
            written = await self._cas_status(dig_path, decide)
        except errors.Conflict as e:
            raise errors.Conflict(f"{DIG.describe(dig_path)} kept changing during instantiation; try again") from e
        doc, ok, endpoints, instance = written.value
        if not ok:
            raise errors.Refused(f"instantiation of {DIG.describe(dig_path)} failed: {'; '.join(doc['errors'])}")
        owner = written.object["metadata"]["name"]
        applied = await members.apply_all(_items(doc), endpoints, owner, self.member_timeout)
        if not await self._record(dig_path, instance, applied):
            # terminated (or instantiated again) while the objects were being handed over: take them back
            await members.remove_all(applied, endpoints, owner, self.member_timeout)
        return doc

    async def terminate(self, dig_path: tuple[str, ...]) -> Obj:
        """Instantiated -> Terminated; the decision stays for the record, the objects it applied are taken back."""

        def change(state: str, status: Obj) -> Obj:
            if state != "Instantiated":
                raise errors.Refused(f"{DIG.describe(dig_path)} is not instantiated (state {state})")
            return self._act(status, "Terminated", str(status.get("instance", "")))

        status = await self._transition(dig_path, change)
        records = [ResourceRecord.from_wire(r) for r in status.get("resources") or []]
        endpoints = await self._endpoints()
        owner = DIG.store_name(dig_path)
        removed = await members.remove_all(records, endpoints, owner, self.member_timeout)
        await self._record(dig_path, str(status.get("instance", "")), removed)
        doc = copy.deepcopy(status.get("placement") or reports.empty_status())
        doc["state"] = "Terminated"
        for app in doc.get("apps", []):
            app["resources"] = []
        return dict(doc)

    async def _endpoints(self) -> Endpoints:
        return {(c.path["clusterProvider"], c.name): cluster_endpoint(c) for c in await self.catalog.all_clusters()}

    async def status(self, dig_path: tuple[str, ...], query: reports.StatusQuery | None = None) -> Obj:
        """EMCO's status result (see `reports.emco_status`)."""
        query = query or reports.StatusQuery()
        dig = await self.catalog.read(DIG, dig_path)
        body = DeploymentIntentGroupBody.parse(dig["spec"]["emco"])
        extra = body.spec.model_extra if body.spec is not None else None
        profile = (extra or {}).get("compositeProfile") or (extra or {}).get("profile") or ""
        path = levels.FleetPath(DIG, dig_path)
        head = {
            "project": path["project"],
            "compositeApp": path["compositeApp"],
            "compositeAppVersion": path["version"],
            "compositeProfile": profile,
            "name": path.leaf,
        }
        status = self._status(dig)
        live = None
        if query.live:
            records = [ResourceRecord.from_wire(r) for r in status.get("resources") or []]
            live = await members.read_all(records, await self._endpoints(), self.member_timeout)
        return reports.emco_status(query, head, status, live)


def _items(doc: Obj) -> list[members.Item]:
    """Each patched manifest of a decision, as a (pending record, manifest) pair."""
    return [
        (
            ResourceRecord.of(app["name"], r["clusterProvider"], r["cluster"], r["manifest"], "Pending"),
            r["manifest"],
        )
        for app, r in itertools.chain.from_iterable(((a, r) for r in a.get("resources") or []) for a in doc["apps"])
    ]
