"""Cluster labels: EMCO's `/cluster-providers/{cp}/clusters/{c}/labels` sub-resource over a cluster's labels.

EMCO keeps a cluster's labels as separate objects; devplace keeps them with the stored cluster (`spec.labels`, first
filled from the labels its body was registered with), the map generic placement intents select on, so a label written
here is what the next plan reads (EMCO's went stale). The cluster's body is left as the client sent it: GET on the
cluster answers that body, `/labels` answers the labels. EMCO's labels are plain strings; here `edge` is key `edge`
with value "" and `zone=east` is key `zone` with value `east`, so one key holds one value. Each write is one
`store.cas` on the cluster: two clients adding labels at once both land.

Adding a label whose key is present is 409 (a duplicate, or another value for the key); PUT sets it whatever was
there (the label in the URL must be the body's, else 400); reading or deleting a label the cluster does not carry is
404. `zone` names the key whatever its value; `zone=east` must match the value too.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pydantic

from devplace import errors
from devplace.api import invalid_from
from devplace.placement import _levels as levels
from devplace.placement._bodies import ClusterLabelBody
from devplace.placement._catalog import Catalog
from devplace.placement._names import cluster_label_text, split_cluster_label
from devplace.store import cas

Obj = dict[str, Any]

Change = Callable[[Obj, str, str], Obj]


LABEL_EXISTS = "Cluster Label already exists"
"""EMCO's answer to a label the cluster has already, word for word (another value for the key is devplace's own case:
EMCO labels have no values)."""


def labels_of(cluster: Obj) -> dict[str, str]:
    """The labels of a stored cluster (`spec.labels`; a cluster stored before they were kept there: its body's)."""
    kept = cluster["spec"].get("labels")
    if kept is not None:
        return dict(kept)
    given = (cluster["spec"]["emco"].get("metadata") or {}).get("labels") or {}
    return dict.fromkeys(given, "") if isinstance(given, list) else dict(given)


def _find(labels: dict[str, str], text: str, where: str) -> str:
    key, value = split_cluster_label(text)
    if key not in labels or (value is not None and labels[key] != value):
        raise errors.NotFound(f'{where} has no label "{text}"')
    return key


def _with_labels(cluster: Obj, labels: dict[str, str]) -> Obj:
    out = copy.deepcopy(cluster)
    out["spec"]["labels"] = labels
    return out


def label_added(cluster: Obj, text: str, where: str) -> Obj:
    """The stored cluster with label `text` added; `AlreadyExists` if its key is taken."""
    labels = labels_of(cluster)
    key, value = split_cluster_label(text)
    if key in labels:
        held = cluster_label_text(key, labels[key])
        if held == text:
            raise errors.AlreadyExists(LABEL_EXISTS)
        raise errors.AlreadyExists(f'{where} already has label "{held}" for {key}')
    labels[key] = value or ""
    return _with_labels(cluster, labels)


def label_set(cluster: Obj, text: str, where: str) -> Obj:
    """The stored cluster with label `text` set, replacing any value its key had."""
    labels = labels_of(cluster)
    key, value = split_cluster_label(text)
    labels[key] = value or ""
    return _with_labels(cluster, labels)


def label_removed(cluster: Obj, text: str, where: str) -> Obj:
    """The stored cluster without label `text`; `NotFound` if it does not carry it."""
    labels = labels_of(cluster)
    del labels[_find(labels, text, where)]
    return _with_labels(cluster, labels)


def _parse(raw: Any) -> ClusterLabelBody:
    if not isinstance(raw, dict):
        raise errors.Invalid.field("", f"the body must be a JSON object, not {type(raw).__name__}")
    try:
        return ClusterLabelBody.model_validate(raw)
    except pydantic.ValidationError as e:
        raise invalid_from(e) from e


class ClusterLabels:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    async def _change(self, path: tuple[str, ...], change: Change, text: str) -> None:
        stored = await self.catalog.read(levels.CLUSTER, path)  # 404 naming the missing level
        where = levels.CLUSTER.describe(path)
        refused: list[errors.DevplaceError] = []

        def decide(current: Obj) -> Obj:
            try:
                return change(current, text, where)
            except errors.DevplaceError as e:
                refused.append(e)
                raise

        try:
            name = stored["metadata"]["name"]
            await cas(self.catalog.store, levels.CLUSTER.kind, name, "", decide, clock=self.catalog.clock)
        except errors.NotFound as e:
            if refused and e is refused[-1]:
                raise
            raise errors.NotFound(f"{where} not found") from None  # deleted after it was read

    async def add(self, path: tuple[str, ...], raw: Any) -> Obj:
        """POST: 400 for a bad body, 404 for a missing cluster, 409 if the key is taken; the label body."""
        body = _parse(raw)
        await self._change(path, label_added, body.cluster_label)
        return {"clusterLabel": body.cluster_label}

    async def put(self, path: tuple[str, ...], text: str, raw: Any) -> Obj:
        """PUT: 400 for a bad body or one naming another label than the URL, 404 for a missing cluster."""
        body = _parse(raw)
        if body.cluster_label != text:
            raise errors.Invalid.field("clusterLabel", f"must match the URL ({text})")
        await self._change(path, label_set, body.cluster_label)
        return {"clusterLabel": body.cluster_label}

    async def list_all(self, path: tuple[str, ...]) -> list[Obj]:
        labels = labels_of(await self.catalog.read(levels.CLUSTER, path))
        return [{"clusterLabel": cluster_label_text(k, v)} for k, v in sorted(labels.items())]

    async def get(self, path: tuple[str, ...], text: str) -> Obj:
        labels = labels_of(await self.catalog.read(levels.CLUSTER, path))
        key = _find(labels, text, levels.CLUSTER.describe(path))
        return {"clusterLabel": cluster_label_text(key, labels[key])}

    async def delete(self, path: tuple[str, ...], text: str) -> None:
        await self._change(path, label_removed, text)
