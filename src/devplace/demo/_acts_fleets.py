"""Act 4 of `devplace demo`: hardware-aware fleet placement (seed 004) through the embedded API server's `/v2`.

The request bodies are not Python: they live in `examples/fleet/seed-004.yaml` (a `plan` path and an ordered list of
`{post, body}` requests), which a user can read and replay against `devplace server` with any HTTP client. The act
POSTs each body, asks for a dry-run plan of the deployment intent group, and prints where each app goes, why every
other cluster was rejected, and the patched manifest of core-fwall (container resources and nodeSelector).

What it checks is what the seed says of its example, on the fleet the shipped file describes: fwall lands on the only
cluster with a GPU (core-fwall's optional GPU, weight 9), analytics on the only cluster with QuickAssist (logger's
mandatory `intel.com/qat`), the too-small cluster is rejected for cpu, every rejection carries a reason, core-fwall
is patched with its requests and limits and a nodeSelector, and a dry run commits nothing.

Loading the file is pure (`load_fleet_example` raises `errors.Invalid` naming the field path); so are `item_path`
(where a created object lives, for the cleanup) and `manifest_excerpt`. The act deletes what it created, children
first, when it ends.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx2
import yaml

from devplace import errors
from devplace.demo._tours import Tour

# What the seed's example should come to on the shipped fleet (examples/fleet/seed-004.yaml).
GPU_CLUSTER = "edge/cluster-1"
QAT_CLUSTER = "edge/cluster-3"
SMALL_CLUSTER = "edge/cluster-4"
GPU_WEIGHT = 9.0
QAT = "intel.com/qat"
EXCERPT_APP, EXCERPT_WORKLOAD = "fwall", "core-fwall"
CORE_FWALL_RESOURCES = {
    "requests": {"cpu": "4", "memory": "1G", "nvidia.com/gpu": "1"},
    "limits": {"cpu": "4", "memory": "1G", "nvidia.com/gpu": "1"},
}
CORE_FWALL_SELECTOR = {"feature.node.kubernetes.io/cpu-pstate.turbo": "true"}


@dataclass(frozen=True)
class FleetRequest:
    """One POST of the example: a `/v2` collection path and the body to create in it."""

    path: str
    body: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def collection(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class FleetExample:
    """The example file: the deployment intent group to plan, and the requests that set it up, in order."""

    plan: str
    requests: tuple[FleetRequest, ...]


def _v2_path(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.startswith("/v2/"):
        raise errors.Invalid.field(where, f"must be a /v2/... path, got {value!r}")
    return value.rstrip("/")


def load_fleet_example(text: str) -> FleetExample:
    """Parse the example file; `errors.Invalid` names the field (`requests[3].body.metadata.name`) on bad input."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise errors.Invalid.field("", f"not valid YAML: {e}") from e
    if not isinstance(doc, Mapping):
        raise errors.Invalid.field("", "must be a mapping with `plan` and `requests`")
    plan = _v2_path(doc.get("plan"), "plan")
    raw = doc.get("requests")
    if not isinstance(raw, list) or not raw:
        raise errors.Invalid.field("requests", "must be a non-empty list of {post, body}")
    out = []
    for i, item in enumerate(raw):
        where = f"requests[{i}]"
        if not isinstance(item, Mapping):
            raise errors.Invalid.field(where, "must be a mapping {post, body}")
        unknown = sorted(set(item) - {"post", "body"})
        if unknown:
            raise errors.Invalid.field(f"{where}.{unknown[0]}", "unknown key (allowed: post, body)")
        path = _v2_path(item.get("post"), f"{where}.post")
        body = item.get("body")
        if not isinstance(body, Mapping):
            raise errors.Invalid.field(f"{where}.body", "must be a mapping {metadata, spec}")
        meta = body.get("metadata")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise errors.Invalid.field(f"{where}.body.metadata.name", "required: a non-empty string")
        out.append(FleetRequest(path, dict(body)))
    return FleetExample(plan, tuple(out))


def item_path(request: FleetRequest) -> str:
    """Where the object a request creates lives (`.../composite-apps/<name>/<version>` for composite apps)."""
    path = f"{request.path}/{request.name}"
    if request.collection == "composite-apps":
        version = (request.body.get("spec") or {}).get("compositeAppVersion")
        if isinstance(version, str) and version:
            path += f"/{version}"
    return path


def _amounts(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items()) or "-"


def inventory_rows(requests: Sequence[FleetRequest]) -> list[list[str]]:
    """CLUSTER, NODE, ALLOCATABLE, LABELS for every node of every cluster the requests create."""
    rows = []
    for request in requests:
        if request.collection != "clusters":
            continue
        provider = request.path.rsplit("/", 2)[-2]
        nodes = (request.body.get("spec") or {}).get("nodes") or []
        for node in nodes:
            rows.append(
                [
                    f"{provider}/{request.name}",
                    str(node.get("name", "")),
                    _amounts(node.get("allocatable") or {}),
                    _amounts(node.get("labels") or {}),
                ]
            )
    return rows


def _pod_spec(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = manifest.get("spec") or {}
    if manifest.get("kind") == "Pod":
        return spec
    return (spec.get("template") or {}).get("spec") or {}


def manifest_excerpt(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a patched workload the action controller writes: container resources, nodeSelector, affinity."""
    pod = _pod_spec(manifest)
    inner: dict[str, Any] = {
        "containers": [
            {"name": c.get("name"), "resources": c.get("resources") or {}} for c in pod.get("containers") or []
        ]
    }
    for key in ("nodeSelector", "affinity"):
        if pod.get(key):
            inner[key] = pod[key]
    if manifest.get("kind") == "Pod":
        return {"spec": inner}
    outer: dict[str, Any] = {"template": {"spec": inner}}
    replicas = (manifest.get("spec") or {}).get("replicas")
    if replicas is not None:
        outer = {"replicas": replicas, **outer}
    return {"spec": outer}


def _cluster(entry: Mapping[str, Any]) -> str:
    return f"{entry.get('clusterProvider', '')}/{entry.get('cluster', '')}"


def _app(doc: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return next((a for a in doc.get("apps") or [] if a.get("name") == name), {})


# -- the act ---------------------------------------------------------------------------------------------------------


async def placement_act(tour: Tour, base_url: str, example: FleetExample, source: str) -> None:
    """Act 4 against the API server at `base_url`, with the requests of `example` (read from `source`)."""
    tour.act(
        4,
        "hardware-aware fleet placement",
        "seed 004 (EMCO HPA intents): fwall (core-fwall, api-server) and analytics (ai-model, logger) "
        "placed across clusters by their hardware requirements",
    )
    created: list[FleetRequest] = []
    async with httpx2.AsyncClient(base_url=base_url, timeout=30.0) as client:
        try:
            if await _register(tour, client, example, source, created):
                await _plan(tour, client, example)
        finally:
            await _remove(tour, client, created)


async def _register(
    tour: Tour, client: httpx2.AsyncClient, example: FleetExample, source: str, created: list[FleetRequest]
) -> bool:
    tour.step(
        f"Create the clusters, the project, the composite app, its apps and intents ({len(example.requests)} POSTs)",
        "the HPA intents of the seed's usage example, as written; bodies from the example file",
    )
    tour.note(f"bodies: {source}")
    for request in example.requests:
        response = await client.post(request.path, json=request.body)
        if response.status_code != 201:
            tour.expect(
                False, f"POST {request.path} ({request.name}) answered {response.status_code}: {response.text}", "201"
            )
            return False
        created.append(request)
    counts = Counter(r.collection for r in created)
    tour.expect(True, "created: " + ", ".join(f"{c} {n}" for c, n in counts.items()))
    tour.table(["CLUSTER", "NODE", "ALLOCATABLE", "LABELS"], inventory_rows(created))
    return True


async def _plan(tour: Tour, client: httpx2.AsyncClient, example: FleetExample) -> None:
    parts = example.plan.split("/")
    tour.step(
        "Plan the deployment intent group (a dry run)",
        "core-fwall can use a GPU if available (optional, weight 9); logger needs a QuickAssist accelerator; "
        "a cluster qualifies only if one node meets all of a consumer's mandatory requirements",
    )
    if len(parts) >= 10:
        tour.command(f"devplace fleet plan {parts[3]} {parts[5]} {parts[6]} {parts[8]}")
    response = await client.post(f"{example.plan}/plan", json={})
    if response.status_code != 200:
        tour.expect(False, f"POST {example.plan}/plan answered {response.status_code}: {response.text}", "200")
        return
    doc = response.json()
    apps = doc.get("apps") or []
    tour.table(
        ["APP", "CLUSTERS", "SCORE", "QUALIFIED"],
        [
            [
                str(a.get("name")),
                ", ".join(_cluster(c) for c in a.get("clusters") or []) or "-",
                ", ".join(f"{c.get('score', 0):g}" for c in a.get("clusters") or []) or "-",
                str(a.get("qualified", 0)),
            ]
            for a in apps
        ],
    )
    tour.table(
        ["APP", "REJECTED", "REASON"],
        [[str(a.get("name")), _cluster(r), str(r.get("reason", ""))] for a in apps for r in a.get("rejected") or []],
    )
    for app in apps:
        for warning in app.get("warnings") or []:
            tour.say(f"warning ({app.get('name')}): {warning}")
    for problem in doc.get("errors") or []:
        tour.say(f"error: {problem}")

    tour.expect(
        doc.get("state") == "Planned" and doc.get("dryRun") is True and not doc.get("errors"),
        f"plan state {doc.get('state')}, dry run {doc.get('dryRun')}, {len(doc.get('errors') or [])} errors",
        "Planned, dry run, no errors",
    )
    chosen = _app(doc, "fwall").get("clusters") or []
    fwall = [f"{_cluster(c)} (score {c.get('score', 0):g})" for c in chosen]
    tour.expect(
        [(_cluster(c), c.get("score")) for c in chosen] == [(GPU_CLUSTER, GPU_WEIGHT)],
        f"fwall goes to {', '.join(fwall) or 'nowhere'}",
        f"{GPU_CLUSTER} (score {GPU_WEIGHT:g})",
        because="the optional GPU's weight decided among the qualified clusters",
    )
    analytics = [_cluster(c) for c in _app(doc, "analytics").get("clusters") or []]
    with_qat = sorted({r[0] for r in inventory_rows(example.requests) if f"{QAT}=" in r[2]})
    tour.expect(
        analytics == [QAT_CLUSTER],
        f"analytics goes to {', '.join(analytics) or 'nowhere'}",
        QAT_CLUSTER,
        because="the only cluster with QuickAssist" if with_qat == [QAT_CLUSTER] else "",
    )
    small: Mapping[str, Any] = next(
        (r for r in _app(doc, "fwall").get("rejected") or [] if _cluster(r) == SMALL_CLUSTER), {}
    )
    tour.expect(
        "cpu" in str(small.get("reason", "")),
        f"{SMALL_CLUSTER} rejected for fwall: {small.get('reason', 'not rejected')}",
        "rejected for cpu",
    )
    clusters = {row[0] for row in inventory_rows(example.requests)}
    tally = {str(a.get("name")): (int(a.get("qualified", 0)), len(a.get("rejected") or [])) for a in apps}
    silent = sum(1 for a in apps for r in a.get("rejected") or [] if not r.get("reason"))
    tour.expect(
        bool(apps) and silent == 0 and all(q + r == len(clusters) for q, r in tally.values()),
        f"of {len(clusters)} clusters, qualified + rejected: "
        + ", ".join(f"{name} {q} + {r}" for name, (q, r) in tally.items())
        + f"; rejections without a reason: {silent}",
        "every cluster qualified or rejected, every rejection with a reason",
        because="every cluster accounted for",
    )

    entry = next(
        (
            r
            for r in _app(doc, EXCERPT_APP).get("resources") or []
            if (r.get("manifest") or {}).get("metadata", {}).get("name") == EXCERPT_WORKLOAD
        ),
        None,
    )
    tour.step(f"The {EXCERPT_WORKLOAD} manifest as the action controller patched it (excerpt)")
    if entry is None:
        tour.expect(False, f"no patched manifest for {EXCERPT_WORKLOAD}", "one, for the chosen cluster")
    else:
        manifest = entry["manifest"]
        excerpt = manifest_excerpt(manifest)
        tour.code(
            f"# {manifest.get('kind')} {EXCERPT_WORKLOAD} for {_cluster(entry)}\n"
            + yaml.safe_dump(excerpt, sort_keys=False, default_flow_style=False)
        )
        pod = _pod_spec(manifest)
        container: Mapping[str, Any] = next(iter(pod.get("containers") or []), {})
        resources = container.get("resources") or {}
        tour.expect(
            resources == CORE_FWALL_RESOURCES and pod.get("nodeSelector") == CORE_FWALL_SELECTOR,
            f"requests {_amounts(resources.get('requests') or {})}; limits {_amounts(resources.get('limits') or {})}; "
            f"nodeSelector {_amounts(pod.get('nodeSelector') or {})}",
            f"resources {CORE_FWALL_RESOURCES}, nodeSelector {CORE_FWALL_SELECTOR}",
            because="requests == limits for cpu and memory (Guaranteed QoS: exclusive cores), the optional GPU added, "
            "the turbo label as a nodeSelector",
        )
    status = await client.get(f"{example.plan}/status")
    state = _last_state(status.json()) if status.status_code == 200 else f"HTTP {status.status_code}"
    tour.expect(
        state == "Created", f"the group's state after the plan: {state}", "Created", because="nothing committed"
    )
    tour.note("(`devplace fleet instantiate ...` commits the same decision; `status` shows it)")


def _last_state(status: Mapping[str, Any]) -> str | None:
    """The group's state in EMCO's status shape: the last of `states.actions`."""
    actions = (status.get("states") or {}).get("actions") or []
    return str(actions[-1].get("state")) if actions else None


async def _remove(tour: Tour, client: httpx2.AsyncClient, created: list[FleetRequest]) -> None:
    removed = 0
    for request in reversed(created):
        with contextlib.suppress(httpx2.HTTPError):
            response = await client.delete(item_path(request))
            removed += response.status_code in (200, 202, 204, 404)
    if created:
        tour.note(f"(cleanup: {removed} of {len(created)} created objects deleted, children first)")
