"""The status document of a deployment intent group: what `plan`, `instantiate` and `status` return. Pure.

    {"state": "Instantiated" | "Planned" | "Failed" | "Created" | "Approved" | "Terminated",
     "dryRun": bool,
     "apps": [{"name", "replicationCount", "qualified",
               "clusters": [{"clusterProvider", "cluster", "replicas", "score"}],
               "rejected": [{"clusterProvider", "cluster", "reason"}],
               "resources": [{"clusterProvider", "cluster", "manifest"}],
               "warnings": [str]}],
     "errors": [str]}

`clusters[].replicas` counts the pods the app's replicated workloads ask for on that cluster (Deployment and
StatefulSet replicas, Job parallelism, bare Pods; DaemonSets run per node and are not counted). `rejected` has one
entry, with its reason, for every cluster the controllers excluded. A failed decision has no `resources`: nothing is
deployable from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from devplace.placement.combiner import Decision
from devplace.placement.inventory import ClusterRef

__all__ = ["empty_status", "status_document"]


def empty_status(state: str = "Created") -> dict[str, Any]:
    return {"state": state, "dryRun": False, "apps": [], "errors": []}


def status_document(
    state: str,
    decision: Decision | None,
    resources: Mapping[str, Mapping[ClusterRef, Sequence[dict[str, Any]]]],
    replicas: Mapping[str, Mapping[ClusterRef, int]],
    warnings: Mapping[str, Sequence[str]],
    errors: Sequence[str],
    *,
    dry_run: bool,
) -> dict[str, Any]:
    apps = []
    for placement in decision.apps if decision is not None else ():
        app = placement.app
        app_resources = resources.get(app, {})
        app_replicas = replicas.get(app, {})
        apps.append(
            {
                "name": app,
                "replicationCount": placement.wanted,
                "qualified": placement.qualified,
                "clusters": [
                    {
                        "clusterProvider": ref.provider,
                        "cluster": ref.name,
                        "replicas": app_replicas.get(ref, 0),
                        "score": placement.scores.get(ref, 0.0),
                    }
                    for ref in placement.clusters
                ],
                "rejected": [
                    {"clusterProvider": ref.provider, "cluster": ref.name, "reason": placement.reason(ref)}
                    for ref in sorted(placement.rejected)
                ],
                "resources": [
                    {"clusterProvider": ref.provider, "cluster": ref.name, "manifest": manifest}
                    for ref in placement.clusters
                    for manifest in app_resources.get(ref, ())
                ],
                "warnings": list(warnings.get(app, ())),
            }
        )
    return {"state": state, "dryRun": dry_run, "apps": apps, "errors": list(errors)}
