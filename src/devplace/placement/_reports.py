"""A deployment intent group's documents. Pure.

The decision document (`status_document`), what `plan` and `instantiate` return and `status` carries as `placement`:

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

EMCO's status result (`emco_status`), for `GET .../status` with EMCO's query (`parse_status_query`; an unknown value is
400): `{project, compositeApp, compositeAppVersion, compositeProfile, name, states: {actions}, ...}` with, by `type` /
`status`, EMCO's deprecated `rsync`/`cluster` spellings (`status`, `rsyncStatus`, `clusterStatus`, per cluster
`readyStatus`) or `deployed`/`ready` ones (`deployedStatus`, `deployedCounts`, `readyCounts`, per cluster
`connectivity`); per app, cluster and resource (`GVK`, `name`) what was applied, or for `ready` whether the member has
the object ready (`readiness`); `apps` / `clusters` / `resources` list queries; `output=summary` drops the per-app
lists and `output=detail` adds each resource's manifest. devplace adds its decision under `placement`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devplace import errors
from devplace.placement._combiner import Decision
from devplace.placement._inventory import ClusterRef
from devplace.placement._members import ResourceRecord


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


# -- EMCO's status query ----------------------------------------------------------------------------------------

_TYPES = ("rsync", "cluster")
_STATUSES = ("ready", "deployed")
_OUTPUTS = ("summary", "all", "detail")
_EMCO_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


@dataclass(frozen=True)
class StatusQuery:
    """EMCO's `GET .../status` query. `kind` is what is reported per resource: `rsync` (the default, EMCO's
    deprecated spelling of `deployed`), `deployed`, `cluster` (deprecated spelling of `ready`) or `ready`."""

    instance: str | None = None
    kind: str = "rsync"
    output: str = "all"
    list_apps: bool = False
    list_clusters: bool = False
    list_resources: bool = False
    apps: tuple[str, ...] = ()
    clusters: tuple[tuple[str, str], ...] = ()
    resources: tuple[str, ...] = ()

    @property
    def live(self) -> bool:
        """Does the answer need the objects as the members have them now?"""
        return self.kind in ("cluster", "ready") and not (self.list_apps or self.list_clusters or self.list_resources)


def _one(params: Mapping[str, Sequence[str]], key: str, allowed: Sequence[str]) -> str | None:
    values = params.get(key)
    if not values:
        return None
    value = values[0]
    if value not in allowed:
        raise errors.Invalid.field(key, f"{value!r} is not one of {', '.join(allowed)}")
    return value


def _names(params: Mapping[str, Sequence[str]], key: str) -> tuple[str, ...]:
    out = []
    for value in params.get(key, ()):
        if not _EMCO_NAME.match(value):
            raise errors.Invalid.field(key, f"{value!r} is not a valid name")
        out.append(value)
    return tuple(out)


def parse_status_query(params: Mapping[str, Sequence[str]]) -> StatusQuery:
    """EMCO's status query parameters; an unknown value is `Invalid` naming the parameter (400). Parameters EMCO does
    not know are ignored, as EMCO ignores them."""
    instance = None
    if "instance" in params:
        instance = params["instance"][0]
        if not instance:
            raise errors.Invalid.field("instance", "must not be empty")
    kind = _one(params, "type", _TYPES) or "rsync"
    kind = _one(params, "status", _STATUSES) or kind
    clusters = []
    for value in params.get("cluster", ()):
        provider, sep, name = value.partition("+")
        if not sep or not _EMCO_NAME.match(provider) or not _EMCO_NAME.match(name):
            raise errors.Invalid.field("cluster", f"{value!r} is not <cluster provider>+<cluster>")
        clusters.append((provider, name))
    return StatusQuery(
        instance=instance,
        kind=kind,
        output=_one(params, "output", _OUTPUTS) or "all",
        list_apps="apps" in params,
        list_clusters="clusters" in params,
        list_resources="resources" in params,
        apps=_names(params, "app"),
        clusters=tuple(clusters),
        resources=_names(params, "resource"),
    )


def readiness(kind: str, obj: Mapping[str, Any] | str | None) -> str:
    """Ready, NotReady or NotPresent, for an object as its member has it (a string: it could not be read)."""
    if obj is None:
        return "NotPresent"
    if isinstance(obj, str):
        return "NotReady"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if kind in ("Deployment", "StatefulSet"):
        wanted = spec.get("replicas", 1)
        return "Ready" if int(status.get("readyReplicas") or 0) >= int(wanted or 0) else "NotReady"
    if kind == "DaemonSet":
        desired = int(status.get("desiredNumberScheduled") or 0)
        return "Ready" if int(status.get("numberReady") or 0) >= desired else "NotReady"
    if kind == "Job":
        return "Ready" if int(status.get("succeeded") or 0) >= int(spec.get("completions") or 1) else "NotReady"
    if kind == "Pod":
        return "Ready" if status.get("phase") in ("Running", "Succeeded") else "NotReady"
    return "Ready"


def _gvk(api_version: str, kind: str) -> dict[str, str]:
    group, sep, version = api_version.rpartition("/")
    return {"Group": group if sep else "", "Version": version, "Kind": kind}


def _count(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


_APPCONTEXT_STATUS = {"Instantiated": "Instantiated", "Terminated": "Terminated"}


def emco_status(
    query: StatusQuery,
    head: Mapping[str, Any],
    status: Mapping[str, Any],
    live: Mapping[ResourceRecord, Mapping[str, Any] | str | None] | None = None,
) -> dict[str, Any]:
    """EMCO's status result for a deployment intent group (`head`: project, compositeApp, compositeAppVersion,
    compositeProfile, name), from its stored status (actions, placement, resource records) and, for `ready`, the
    objects as the members have them. Raises `Invalid` (400) for an instance or app filter that does not apply."""
    actions = list(status.get("actions") or [])
    instances = [a.get("instance") for a in actions if a.get("instance")]
    latest = instances[-1] if instances else None
    if query.instance is not None:
        if query.instance not in instances:
            raise errors.Invalid.field("instance", f"{query.instance!r} is not an instance of this group")
        if query.instance != latest:
            raise errors.Invalid.field(
                "instance", f"{query.instance!r} is not the latest instance ({latest}); devplace keeps only that one"
            )
    placement = status.get("placement") or {}
    placed = {a["name"]: a for a in placement.get("apps") or []} if latest else {}
    apps = sorted(placed)
    for app in query.apps:
        if app not in apps:
            raise errors.Invalid.field("app", f"filter app {app} is not in the list of apps of this instance")
    chosen_apps = [a for a in apps if not query.apps or a in query.apps]
    name = head["name"]
    records = [ResourceRecord.from_wire(r) for r in status.get("resources") or []] if latest else []

    def kept(record: ResourceRecord) -> bool:
        return (
            record.app in chosen_apps
            and (not query.clusters or (record.cluster_provider, record.cluster) in query.clusters)
            and (not query.resources or record.name in query.resources)
        )

    if query.list_apps:
        return {"name": name, "apps": apps}
    if query.list_clusters:
        return {
            "name": name,
            "clustersByApp": [
                {
                    "app": app,
                    "clusters": [
                        {"clusterProvider": c["clusterProvider"], "cluster": c["cluster"]}
                        for c in placed[app]["clusters"]
                    ],
                }
                for app in chosen_apps
            ],
        }
    if query.list_resources:
        by_cluster: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for record in records:
            if kept(record):
                key = (record.app, record.cluster_provider, record.cluster)
                by_cluster.setdefault(key, []).append(
                    {"name": record.name, "GVK": _gvk(record.api_version, record.kind)}
                )
        return {
            "name": name,
            "resourcesByApp": [
                {"app": app, "clusterProvider": provider, "cluster": cluster, "resources": resources}
                for (app, provider, cluster), resources in by_cluster.items()
            ],
        }

    deprecated = query.kind in ("rsync", "cluster")
    wants_ready = query.kind in ("cluster", "ready")
    out: dict[str, Any] = {**head, "states": {"actions": actions}}
    state = str(status.get("state") or "Created")
    if latest and state in _APPCONTEXT_STATUS:
        out["status" if deprecated else "deployedStatus"] = _APPCONTEXT_STATUS[state]
    manifests = {
        (a, r["clusterProvider"], r["cluster"], r["manifest"].get("kind"), r["manifest"]["metadata"].get("name")): r[
            "manifest"
        ]
        for a, placed_app in placed.items()
        for r in placed_app.get("resources") or []
    }
    deployed_counts: dict[str, int] = {}
    ready_counts: dict[str, int] = {}
    clusters: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    reached: set[tuple[str, str]] = set()
    for record in records:
        if not kept(record):
            continue
        entry: dict[str, Any] = {"GVK": _gvk(record.api_version, record.kind), "name": record.name}
        if wants_ready:
            obj = (live or {}).get(record)
            ready = readiness(record.kind, obj)
            entry["clusterStatus" if deprecated else "readyStatus"] = ready
            _count(ready_counts, ready)
            if not isinstance(obj, str) and record in (live or {}):
                reached.add((record.cluster_provider, record.cluster))
        else:
            entry["rsyncStatus" if deprecated else "deployedStatus"] = record.deployed_status
            _count(deployed_counts, record.deployed_status)
            if record.deployed_status in ("Applied", "Deleted"):
                reached.add((record.cluster_provider, record.cluster))
        if record.reason:
            entry["reason"] = record.reason
        if query.output == "detail":
            detail = manifests.get((record.app, record.cluster_provider, record.cluster, record.kind, record.name))
            if detail is not None:
                entry["detail"] = detail
        clusters.setdefault((record.app, record.cluster_provider, record.cluster), []).append(entry)
    if wants_ready:
        out["clusterStatus" if deprecated else "readyCounts"] = ready_counts
        out["readyStatus"] = "NotReady" if ready_counts.get("NotPresent") or ready_counts.get("NotReady") else "Ready"
    else:
        out["rsyncStatus" if deprecated else "deployedCounts"] = deployed_counts
    if query.output != "summary":
        apps_out = []
        for app in chosen_apps:
            entries = []
            for (a, provider, cluster), resources in clusters.items():
                if a != app:
                    continue
                connectivity = "Available" if (provider, cluster) in reached else "Unknown"
                entries.append(
                    {
                        "clusterProvider": provider,
                        "cluster": cluster,
                        "readyStatus" if deprecated else "connectivity": connectivity,
                        "resources": resources,
                    }
                )
            if entries:
                apps_out.append({"name": app, "clusters": entries})
        out["apps"] = apps_out
    if placement:
        out["placement"] = dict(placement)
    return out
