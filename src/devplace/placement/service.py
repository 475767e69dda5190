"""The placement service: plan, instantiate, status, terminate and approve a deployment intent group. The I/O shell.

One evaluation = read the group's subtree and the fleet from the store (`Catalog.subtree`), read live inventories
(concurrently, each bounded by `inventory_timeout`), resolve intents into plain data, run every placement controller
concurrently under its own timeout, combine (`combiner.combine`), patch manifests for the chosen clusters
(`actions`), and render the status document (`reports`). Everything after the reads is pure.

- `plan` evaluates and returns the document (state `Planned` or `Failed`, `dryRun: true`); nothing is written.
- `instantiate` evaluates and writes the document into the group's `status` with a CAS on the resourceVersion the
  evaluation read, through `store.cas`. Any write in the group's subtree bumps the group's child-writes counter (see
  `catalog`), so a decision is never committed against intents that changed under it: then the decision is dropped
  and the whole evaluation runs again (bounded), while a change of the group's status alone is re-decided. A failed
  decision is recorded too (state `Failed`, with the reasons, no resources) and then raised as `Refused` (409), so
  `GET .../status` explains it. An instantiated group must be terminated before it is instantiated again.
- Intents that cannot be applied (an intent naming an app the composite app lacks, a consumer naming a workload or
  container its app's manifests lack) fail the evaluation before any controller runs.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from typing import Any

import httpx2

from devplace import errors
from devplace.api import fleet
from devplace.clocks import Clock, SystemClock
from devplace.placement import actions, reports
from devplace.placement.catalog import Catalog, Subtree, dig_state, path_of
from devplace.placement.combiner import Decision, combine
from devplace.placement.controllers import PlacementContext, PlacementController, default_controllers, run_controllers
from devplace.placement.generic import AppIntent, ClusterSelector
from devplace.placement.hpa import Consumer, Requirement
from devplace.placement.inventory import ClusterInventory, ClusterRef, live_inventory, static_inventory
from devplace.store.base import Store
from devplace.store.cas import Decide, cas

__all__ = ["PlacementService"]

DIG = fleet.DEPLOYMENT_INTENT_GROUP
Obj = dict[str, Any]


def _selector(s: fleet.ClusterSelector) -> ClusterSelector:
    return ClusterSelector(s.cluster_provider, s.cluster, s.cluster_label)


class PlacementService:
    def __init__(
        self,
        store: Store,
        *,
        controllers: Sequence[PlacementController] | None = None,
        clock: Clock | None = None,
        inventory_timeout: float = 5.0,
        attempts: int = 5,
    ) -> None:
        self.clock = clock or SystemClock()
        self.catalog = Catalog(store, clock=self.clock)
        self.controllers = list(controllers) if controllers is not None else default_controllers()
        self.inventory_timeout = inventory_timeout
        self.attempts = attempts

    # -- reading the subtree into plain data ------------------------------------------------------------------

    async def _inventories(self, clusters: Sequence[Obj]) -> tuple[ClusterInventory, ...]:
        static: dict[ClusterRef, ClusterInventory] = {}
        live: list[tuple[ClusterRef, dict[str, str], str]] = []
        for obj in clusters:
            provider, name = path_of(obj)
            ref = ClusterRef(provider, name)
            body = fleet.ClusterBody.parse(obj["spec"]["emco"])
            labels = dict(body.metadata.labels)
            if body.spec.endpoint:
                live.append((ref, labels, body.spec.endpoint))
            else:
                nodes = [n.model_dump(mode="json") for n in body.spec.nodes]
                static[ref] = static_inventory(ref, labels, nodes)
        if live:
            async with httpx2.AsyncClient(timeout=self.inventory_timeout) as client:
                fetched = await asyncio.gather(
                    *(live_inventory(client, ref, labels, url, self.inventory_timeout) for ref, labels, url in live)
                )
            static.update({inv.ref: inv for inv in fetched})
        return tuple(static[ref] for ref in sorted(static))

    def _resolve(self, tree: Subtree) -> tuple[PlacementContext, list[str]]:
        """Stored intents -> the controllers' plain data, and the problems that forbid placing at all."""
        problems: list[str] = []
        manifests = {
            o["spec"]["emco"]["metadata"]["name"]: tuple(o["spec"]["emco"].get("spec", {}).get("manifests", []))
            for o in tree.apps
        }
        app_intents = []
        placement_intents = {path_of(o)[4] for o in tree.placement_intents}
        for obj in tree.app_intents:
            path = path_of(obj)
            if path[4] not in placement_intents:
                continue  # an orphan left by an interrupted create; its placement intent is gone
            name = f"{path[4]}/{path[5]}"
            try:
                body = fleet.GenericAppIntentBody.parse(obj["spec"]["emco"])
            except errors.Invalid as e:
                problems.append(f"app intent {name}: {e.message}")
                continue
            if body.spec.app not in manifests:
                problems.append(f"app intent {name}: app {body.spec.app!r} is not an app of the composite app")
            placement = body.spec.intent
            app_intents.append(
                AppIntent(
                    body.spec.app,
                    name,
                    tuple(_selector(s) for s in placement.all_of),
                    tuple(_selector(s) for s in placement.any_of),
                )
            )
        intent_apps = {path_of(o)[4]: str(o["spec"]["emco"]["spec"]["app"]) for o in tree.hpa_intents}
        requirements: dict[tuple[str, str], list[Requirement]] = {}
        for obj in tree.requirements:
            path = path_of(obj)
            try:
                req = Requirement.from_body(fleet.HpaRequirementBody.parse(obj["spec"]["emco"]))
            except errors.Invalid as e:
                problems.append(f"resource requirement {'/'.join(path[4:])}: {e.message}")
                continue
            requirements.setdefault((path[4], path[5]), []).append(req)
        consumers = []
        for obj in tree.consumers:
            path = path_of(obj)
            intent_name, name = path[4], path[5]
            if intent_name not in intent_apps:
                continue  # an orphan left by an interrupted create; its intent is gone
            consumer = fleet.HpaConsumerBody.parse(obj["spec"]["emco"])
            ref = consumer.spec.consumer
            app = intent_apps[intent_name]
            pods = (
                consumer.spec.replicas
                if consumer.spec.replicas is not None
                else actions.workload_replicas(manifests.get(app, ()), ref.kind, ref.name)
            )
            consumers.append(
                Consumer(
                    app=app,
                    name=name,
                    kind=ref.kind,
                    workload=ref.name,
                    api_version=ref.api_version,
                    container=ref.container_name,
                    replicas=max(1, pods),
                    set_replicas=consumer.spec.replicas,
                    exclusive_cpus=consumer.spec.exclusive_cpus,
                    requirements=tuple(requirements.get((intent_name, name), ())),
                    intent=intent_name,
                )
            )
        problems.extend(actions.target_problems(consumers, manifests))
        context = PlacementContext(
            apps=tuple(sorted(manifests)),
            clusters=(),
            app_intents=tuple(app_intents),
            consumers=tuple(consumers),
            manifests=manifests,
        )
        return context, problems

    # -- evaluation -------------------------------------------------------------------------------------------

    async def _evaluate(self, dig_path: tuple[str, ...], *, dry_run: bool) -> tuple[Obj, Obj, bool]:
        """(status document, the group as read, ok)."""
        tree = await self.catalog.subtree(dig_path)
        context, problems = self._resolve(tree)
        clusters = await self._inventories(tree.clusters)
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
        return doc, tree.dig, ok

    # -- verbs ------------------------------------------------------------------------------------------------

    async def plan(self, dig_path: tuple[str, ...]) -> Obj:
        doc, _, _ = await self._evaluate(dig_path, dry_run=True)
        return doc

    async def instantiate(self, dig_path: tuple[str, ...]) -> Obj:
        """Evaluate and commit in one CAS on the group: the write is conditioned on the group as the evaluation read
        it, and every intent write bumps the group (`child_writes`), so a decision made from intents that changed
        under it conflicts and is evaluated again on fresh reads, with the CAS loop's bounded backoff."""
        results: list[tuple[Obj, bool]] = []

        async def decide(_stored: Obj) -> Obj:
            doc, evaluated, ok = await self._evaluate(dig_path, dry_run=False)
            if dig_state(evaluated) == "Instantiated":
                raise errors.Refused(f"{DIG.describe(dig_path)} is already instantiated; terminate it first")
            results[:] = [(doc, ok)]
            return {**evaluated, "status": doc}

        try:
            await self._write_status(dig_path, decide)
        except errors.Conflict as e:
            raise errors.Conflict(f"{DIG.describe(dig_path)} kept changing during instantiation; try again") from e
        doc, ok = results[0]
        if not ok:
            raise errors.Refused(f"instantiation of {DIG.describe(dig_path)} failed: {'; '.join(doc['errors'])}")
        return doc

    async def status(self, dig_path: tuple[str, ...]) -> Obj:
        dig = await self.catalog.read(DIG, dig_path)
        return copy.deepcopy(dig.get("status")) or reports.empty_status()

    async def _write_status(self, dig_path: tuple[str, ...], decide: Decide, first: Obj | None = None) -> Obj:
        name = first["metadata"]["name"] if first is not None else DIG.store_name(dig_path)
        try:
            written = await cas(
                self.catalog.store, DIG.kind, name, "", decide, first=first, clock=self.clock, attempts=self.attempts
            )
        except errors.NotFound:
            raise errors.NotFound(f"{DIG.describe(dig_path)} not found") from None
        return written.object

    async def _transition(self, dig_path: tuple[str, ...], change: Any) -> Obj:
        first = await self.catalog.read(DIG, dig_path)  # 404 naming the missing level

        def decide(dig: Obj) -> Obj:
            return {**dig, "status": change(dig, copy.deepcopy(dig.get("status")) or reports.empty_status())}

        return dict((await self._write_status(dig_path, decide, first))["status"])

    async def terminate(self, dig_path: tuple[str, ...]) -> Obj:
        """Instantiated -> Terminated; the decision stays for the record, its resources go."""

        def change(dig: Obj, status: Obj) -> Obj:
            if dig_state(dig) != "Instantiated":
                raise errors.Refused(f"{DIG.describe(dig_path)} is not instantiated (state {dig_state(dig)})")
            status["state"] = "Terminated"
            for app in status.get("apps", []):
                app["resources"] = []
            return status

        return await self._transition(dig_path, change)

    async def approve(self, dig_path: tuple[str, ...]) -> Obj:
        def change(dig: Obj, status: Obj) -> Obj:
            if dig_state(dig) == "Instantiated":
                raise errors.Refused(f"{DIG.describe(dig_path)} is instantiated; terminate it first")
            status["state"] = "Approved"
            return status

        return await self._transition(dig_path, change)
