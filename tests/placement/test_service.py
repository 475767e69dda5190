"""The placement service: plan, instantiate, status, terminate, approve, over a real store."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import kubernetes_validate
import pytest

from devplace import errors
from devplace.clocks import FakeClock, SystemClock
from devplace.placement import _levels as levels
from devplace.placement._candidates import Candidate
from devplace.placement._catalog import Catalog
from devplace.placement._controllers import GenericPlacement, HpaPlacement, PlacementContext
from devplace.placement._service import PlacementService
from devplace.server._app import create_app
from devplace.store import MemoryStore, Store
from tests.placement.samples import DIG_PATH, SEED_CLUSTERS, build_seed, node_obj, pod_obj
from tests.servers import serve_app


def clusters_of(doc: dict[str, Any], app: str) -> list[str]:
    return [c["cluster"] for c in next(a for a in doc["apps"] if a["name"] == app)["clusters"]]


def app_of(doc: dict[str, Any], app: str) -> dict[str, Any]:
    return next(a for a in doc["apps"] if a["name"] == app)


@pytest.fixture
async def seeded() -> PlacementService:
    store = MemoryStore()
    service = PlacementService(store)
    await build_seed(service.catalog)
    return service


async def test_plan_places_the_seed_example_without_committing(seeded: PlacementService) -> None:
    doc = await seeded.plan(DIG_PATH)
    assert (doc["state"], doc["dryRun"], doc["errors"]) == ("Planned", True, [])
    assert clusters_of(doc, "fwall") == ["cluster-1"]  # the GPU (optional, weight 9) decides among 3 qualifying
    assert app_of(doc, "fwall")["clusters"][0]["score"] == 9.0
    assert clusters_of(doc, "analytics") == ["cluster-3"]  # the only QAT
    for app in doc["apps"]:
        for resource in app["resources"]:
            kubernetes_validate.validate(resource["manifest"], "1.37.0", strict=True)
    status = await seeded.status(DIG_PATH)
    assert [a["state"] for a in status["states"]["actions"]] == ["Created"]  # a dry run commits nothing
    assert "placement" not in status


async def test_instantiating_before_approval_is_refused_as_emco_does(seeded: PlacementService) -> None:
    with pytest.raises(errors.Refused, match='"my-dig1" must be approved before it is instantiated'):
        await seeded.instantiate(DIG_PATH)
    status = await seeded.status(DIG_PATH)
    assert [a["state"] for a in status["states"]["actions"]] == ["Created"]
    assert "placement" not in status  # nothing was evaluated or written


async def test_instantiate_commits_and_status_shows_it(seeded: PlacementService) -> None:
    assert (await seeded.approve(DIG_PATH))["state"] == "Approved"
    doc = await seeded.instantiate(DIG_PATH)
    assert doc["state"] == "Instantiated"
    status = await seeded.status(DIG_PATH)
    assert status["placement"] == doc
    assert [(a["state"], a["instance"]) for a in status["states"]["actions"]] == [
        ("Created", ""),
        ("Approved", ""),
        ("Instantiated", "1"),
    ]
    with pytest.raises(errors.Refused, match="already instantiated; terminate it first"):
        await seeded.instantiate(DIG_PATH)
    with pytest.raises(errors.Refused, match="is instantiated"):
        await seeded.approve(DIG_PATH)
    terminated = await seeded.terminate(DIG_PATH)
    assert terminated["state"] == "Terminated"
    assert all(a["resources"] == [] for a in terminated["apps"])
    with pytest.raises(errors.Refused, match=r"is not instantiated \(state Terminated\)"):
        await seeded.terminate(DIG_PATH)
    assert (await seeded.instantiate(DIG_PATH))["state"] == "Instantiated"  # a terminated group needs no approval
    actions = (await seeded.status(DIG_PATH))["states"]["actions"]
    assert [(a["state"], a["instance"]) for a in actions][-2:] == [("Terminated", "1"), ("Instantiated", "2")]


async def test_a_failed_instantiation_is_recorded_and_refused() -> None:
    service = PlacementService(MemoryStore())
    without_qat = {k: v for k, v in SEED_CLUSTERS.items() if k != "cluster-3"}
    await build_seed(service.catalog, without_qat)
    await service.approve(DIG_PATH)
    with pytest.raises(errors.Refused) as info:
        await service.instantiate(DIG_PATH)
    assert info.value.message == (
        'instantiation of deployment intent group "my-dig1" failed: app analytics: needs 1 cluster, 0 qualify: '
        "edge/cluster-1: not selected by generic placement intent gpi/analytics-placement; "
        "no node has intel.com/qat >= 1 (max 0) for logger; "
        "edge/cluster-2: not selected by generic placement intent gpi/analytics-placement; "
        "no node has intel.com/qat >= 1 (max 0) for logger; "
        "edge/cluster-4: not selected by generic placement intent gpi/analytics-placement; "
        "no node has intel.com/qat >= 1 (max 0) for logger; "
        "edge/cluster-7: no node has intel.com/qat >= 1 (max 0) for logger"
    )
    status = await service.status(DIG_PATH)
    assert [a["state"] for a in status["states"]["actions"]] == ["Created", "Approved"]  # still approved: retry
    placement = status["placement"]
    assert placement["state"] == "Failed"
    assert all(a["resources"] == [] for a in placement["apps"])
    assert app_of(placement, "analytics")["rejected"][-1] == {
        "clusterProvider": "edge",
        "cluster": "cluster-7",
        "reason": "no node has intel.com/qat >= 1 (max 0) for logger",
    }


@dataclass(frozen=True)
class Stuck:
    name: str = "stuck"
    timeout: float = 3.0

    async def candidates(self, context: PlacementContext) -> Mapping[str, Candidate]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_slow_controller_fails_the_plan_with_its_name(clock: FakeClock) -> None:
    store = MemoryStore()
    await build_seed(Catalog(store, clock=SystemClock()))
    service = PlacementService(store, controllers=[GenericPlacement(), HpaPlacement(), Stuck()], clock=clock)
    task = asyncio.create_task(service.plan(DIG_PATH))
    while clock.pending_sleepers < 3:  # noqa: ASYNC110 - polling, bounded by the test timeout, until all three timers wait
        await asyncio.sleep(0.001)
    await clock.advance(3.0)
    doc = await task
    assert doc["state"] == "Failed"
    assert doc["errors"] == ["placement controller stuck failed: timed out after 3 s"]
    assert doc["apps"] == []


@dataclass
class Meddler:
    """Changes the group's intents while the first evaluation is running (a concurrent user)."""

    catalog: Catalog
    name: str = "meddler"
    timeout: float = 10.0
    calls: list[int] = field(default_factory=list)

    async def candidates(self, context: PlacementContext) -> Mapping[str, Candidate]:
        self.calls.append(1)
        if len(self.calls) == 1:
            gpi = (*DIG_PATH, "gpi")
            body = {
                "metadata": {"name": "fwall-on-2"},
                "spec": {"app": "fwall", "intent": {"allOf": [{"clusterProvider": "edge", "cluster": "cluster-2"}]}},
            }
            await self.catalog.create(levels.GENERIC_APP_INTENT, gpi, body)
        return {}


async def test_instantiation_never_commits_a_decision_made_from_stale_intents() -> None:
    store = MemoryStore()
    catalog = Catalog(store, clock=SystemClock())
    await build_seed(catalog)
    meddler = Meddler(catalog)
    service = PlacementService(store, controllers=[GenericPlacement(), HpaPlacement(), meddler])
    await service.approve(DIG_PATH)
    doc = await service.instantiate(DIG_PATH)
    assert len(meddler.calls) == 2  # the first decision lost its CAS and was made again
    assert clusters_of(doc, "fwall") == ["cluster-2"]
    assert clusters_of((await service.status(DIG_PATH))["placement"], "fwall") == ["cluster-2"]


async def test_intents_that_cannot_apply_fail_before_placement(seeded: PlacementService) -> None:
    catalog = seeded.catalog
    await catalog.create(levels.HPA_INTENT, DIG_PATH, {"metadata": {"name": "ghost-intent"}, "spec": {"app": "ghost"}})
    consumer = {
        "metadata": {"name": "gone"},
        "spec": {
            "consumer": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "not-there", "container-name": "c"}
        },
    }
    await catalog.create(levels.HPA_CONSUMER, (*DIG_PATH, "fwall-hpa-intent"), consumer)
    doc = await seeded.plan(DIG_PATH)
    assert doc["state"] == "Failed"
    assert doc["errors"] == ["hpa resource consumer fwall-hpa-intent/gone: app fwall has no Deployment 'not-there'"]
    await catalog.create(
        levels.HPA_CONSUMER,
        (*DIG_PATH, "ghost-intent"),
        {"metadata": {"name": "x"}, "spec": {"consumer": {"apiVersion": "v1", "kind": "Pod", "name": "x"}}},
    )
    doc = await seeded.plan(DIG_PATH)
    assert "hpa intent ghost-intent: app 'ghost' is not an app of the composite app" in doc["errors"]


async def test_missing_groups_are_404(seeded: PlacementService) -> None:
    with pytest.raises(errors.NotFound, match='deployment intent group "nope" not found'):
        await seeded.plan((*DIG_PATH[:3], "nope"))
    with pytest.raises(errors.NotFound, match='project "nope" not found'):
        await seeded.status(("nope", "my-capp1", "v1.0", "my-dig1"))


async def _seed_with_live_member(store: Store, member_url: str, dead_url: str) -> Catalog:
    catalog = Catalog(store, clock=SystemClock())
    await build_seed(catalog, {"cluster-4": SEED_CLUSTERS["cluster-4"]}, analytics_any_of=False)
    for name, url in (("live", member_url), ("dead", dead_url)):
        await catalog.create(levels.CLUSTER, ("edge",), {"metadata": {"name": name}, "spec": {"endpoint": url}})
    return catalog


async def test_live_clusters_are_read_at_every_plan() -> None:
    member = MemoryStore()
    await member.create(node_obj("big", cpu="16", memory="32Gi", qat="1", gpu="1"))
    async with serve_app(create_app(MemoryStore())) as dead:
        pass
    async with serve_app(create_app(member)) as url:
        store = MemoryStore()
        await _seed_with_live_member(store, url, dead)
        service = PlacementService(store, inventory_timeout=2.0)
        doc = await service.plan(DIG_PATH)
        assert doc["errors"] == []
        assert clusters_of(doc, "fwall") == ["live"]
        assert clusters_of(doc, "analytics") == ["live"]
        dead_reason = next(r for r in app_of(doc, "fwall")["rejected"] if r["cluster"] == "dead")["reason"]
        assert dead_reason.startswith(f"inventory unavailable: {dead}")
        # the member fills up: its QAT is taken by a pod bound there, and the next plan sees it
        await member.create(pod_obj("other", "big", qat="1"))
        doc = await service.plan(DIG_PATH)
        live_reason = next(r for r in app_of(doc, "analytics")["rejected"] if r["cluster"] == "live")["reason"]
        assert live_reason == "no node has intel.com/qat >= 1 (max 0) for logger"


async def test_an_app_intent_orphaned_by_its_deleted_placement_intent_is_ignored(seeded: PlacementService) -> None:
    catalog = seeded.catalog
    gone = (*DIG_PATH, "gone")
    await catalog.create(levels.GENERIC_PLACEMENT_INTENT, DIG_PATH, {"metadata": {"name": "gone"}})
    pin = {
        "metadata": {"name": "fwall-on-2"},
        "spec": {"app": "fwall", "intent": {"allOf": [{"clusterProvider": "edge", "cluster": "cluster-2"}]}},
    }
    await catalog.create(levels.GENERIC_APP_INTENT, gone, pin)
    assert clusters_of(await seeded.plan(DIG_PATH), "fwall") == ["cluster-2"]
    # a process died between deleting the intent and its child (the catalog would have refused): the orphan stays
    level = levels.GENERIC_PLACEMENT_INTENT
    stored = await catalog.store.get(level.kind, level.store_name(gone))
    await catalog.store.delete(
        level.kind, level.store_name(gone), resource_version=stored["metadata"]["resourceVersion"]
    )
    assert clusters_of(await seeded.plan(DIG_PATH), "fwall") == ["cluster-1"]
