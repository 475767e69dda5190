"""A deployment intent group's intents, resolved into the placement controllers' plain data. Pure.

Input: the group's subtree as the catalog read it, every body already parsed into its typed model (whatever dialect
the client wrote it in). Output: the `PlacementContext` the controllers see (apps and their manifests, generic app
intents, hpa consumers with their requirements; clusters are added by the caller once inventories are read) and the
problems that forbid placing at all:

- a stored body that no longer parses (`Subtree.problems`);
- an intent naming an app the composite app lacks;
- a consumer naming a workload or container its app's manifests lack (`actions.target_problems`). EMCO names are
  free strings (`HttpClient`); a consumer targets the manifest named `kube_name` of its EMCO name (`httpclient`).

Objects whose parent is not in the subtree (an orphan left by an interrupted create) are ignored.
"""

from __future__ import annotations

from devplace.placement import _actions as actions
from devplace.placement import _bodies as bodies
from devplace.placement._catalog import Subtree, manifests_of
from devplace.placement._controllers import PlacementContext
from devplace.placement._generic import AppIntent, ClusterSelector
from devplace.placement._hpa import Consumer, Requirement


def _selector(s: bodies.ClusterSelector) -> ClusterSelector:
    return ClusterSelector(s.cluster_provider, s.cluster, s.cluster_label)


def resolve(tree: Subtree) -> tuple[PlacementContext, list[str]]:
    """The controllers' view of the group (without clusters) and the problems that forbid placing it."""
    problems = list(tree.problems)
    manifests = {app.name: tuple(manifests_of(app)) for app in tree.apps}

    placement_intents = {path.leaf for path in tree.placement_intents}
    app_intents = []
    for app_intent in tree.app_intents:
        gpi = app_intent.path["genericPlacementIntent"]
        if gpi not in placement_intents:
            continue
        name = f"{gpi}/{app_intent.name}"
        spec = app_intent.body.spec
        if spec.app not in manifests:
            problems.append(f"app intent {name}: app {spec.app!r} is not an app of the composite app")
        app_intents.append(
            AppIntent(
                spec.app,
                name,
                tuple(_selector(s) for s in spec.intent.all_of),
                tuple(_selector(s) for s in spec.intent.any_of),
            )
        )

    intent_apps = {hpa_intent.name: hpa_intent.body.spec.app for hpa_intent in tree.hpa_intents}
    requirements: dict[tuple[str, str], list[Requirement]] = {}
    for requirement in tree.requirements:
        key = (requirement.path["hpaIntent"], requirement.path["consumer"])
        requirements.setdefault(key, []).append(Requirement.from_body(requirement.body))

    consumers = []
    for stored in tree.consumers:
        intent = stored.path["hpaIntent"]
        if intent not in intent_apps:
            continue
        app = intent_apps[intent]
        target = stored.body.workload
        pods = (
            target.replicas
            if target.replicas is not None
            else actions.workload_replicas(manifests.get(app, ()), target.kind, target.object_name)
        )
        consumers.append(
            Consumer(
                app=app,
                name=stored.name,
                kind=target.kind,
                workload=target.object_name,
                api_version=target.api_version,
                container=target.container_name,
                replicas=max(1, pods),
                set_replicas=target.replicas,
                exclusive_cpus=target.exclusive_cpus,
                requirements=tuple(requirements.get((intent, stored.name), ())),
                intent=intent,
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
