"""Member clusters: hand an instantiated group's patched manifests to each chosen cluster, and take them back. I/O.

A member is reached at its API endpoint (`spec.endpoint`, or the `server` of the kubeconfig it was registered with),
which speaks the Kubernetes resource API (a devplace API server, or a Kubernetes API server that needs no
credentials from here). A cluster without an endpoint gets nothing: its resources are recorded `NotApplied`.

- Apply: each object is created (`POST`), labelled `fleet.devplace.io/deployment-intent-group=<group>`. If an object
  of that name exists and carries the group's label it is replaced by compare-and-swap (`PUT` with the
  resourceVersion just read, again on a Conflict, bounded); one that does not carry it belongs to someone else and is
  left alone (`Failed`, with the reason).
- Remove (terminate): each object the group applied is read and deleted with that resourceVersion as precondition,
  only while it still carries the group's label; an object already gone counts as removed.
- Read (status `?status=ready`): the object as the member has it now, or None when it is not there.

Every call is bounded by the service's timeout; an unreachable member fails its resources with the reason and the
rest go on. Results are plain `ResourceRecord`s the status report renders.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

import httpx2

from devplace import errors
from devplace.api import lookup
from devplace.placement._kinds import DIG_LABEL

Obj = dict[str, Any]
DEFAULT_NAMESPACE = "default"
_CAS_ATTEMPTS = 5


@dataclass(frozen=True)
class ResourceRecord:
    """One object of one app on one cluster, and what happened to it there."""

    app: str
    cluster_provider: str
    cluster: str
    api_version: str
    kind: str
    name: str
    namespace: str | None
    deployed_status: str  # Pending, Applied, Failed, NotApplied, Deleted
    reason: str = ""

    def to_wire(self) -> Obj:
        out: Obj = {
            "app": self.app,
            "clusterProvider": self.cluster_provider,
            "cluster": self.cluster,
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "deployedStatus": self.deployed_status,
        }
        if self.namespace is not None:
            out["namespace"] = self.namespace
        if self.reason:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> ResourceRecord:
        return cls(
            str(obj["app"]),
            str(obj["clusterProvider"]),
            str(obj["cluster"]),
            str(obj["apiVersion"]),
            str(obj["kind"]),
            str(obj["name"]),
            obj.get("namespace"),
            str(obj["deployedStatus"]),
            str(obj.get("reason", "")),
        )

    @classmethod
    def of(cls, app: str, provider: str, cluster: str, manifest: Mapping[str, Any], status: str) -> ResourceRecord:
        meta = manifest.get("metadata") or {}
        namespace = meta.get("namespace") or (DEFAULT_NAMESPACE if _namespaced(str(manifest["kind"])) else None)
        return cls(
            app,
            provider,
            cluster,
            str(manifest["apiVersion"]),
            str(manifest["kind"]),
            str(meta["name"]),
            namespace,
            status,
        )


def _namespaced(kind: str) -> bool:
    try:
        return lookup(kind).namespaced
    except errors.Invalid:
        return kind not in ("Namespace", "Node", "ClusterRole", "ClusterRoleBinding", "PersistentVolume")


def _plural(kind: str) -> str:
    try:
        return lookup(kind).plural
    except errors.Invalid:
        lower = kind.lower()
        return lower + ("es" if lower.endswith("s") else "s")


def _collection(record: ResourceRecord) -> str:
    group_version = record.api_version
    prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    scope = f"/namespaces/{quote(record.namespace, safe='')}" if record.namespace else ""
    return f"{prefix}{scope}/{_plural(record.kind)}"


def _item(record: ResourceRecord) -> str:
    return f"{_collection(record)}/{quote(record.name, safe='')}"


def _message(response: httpx2.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    message = body.get("message") if isinstance(body, dict) else None
    return f"{response.status_code}: {message or response.text.strip()[:200] or response.reason_phrase}"


def _owned(obj: Mapping[str, Any], owner: str) -> bool:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(DIG_LABEL) == owner


async def _apply_one(
    client: httpx2.AsyncClient, base: str, record: ResourceRecord, manifest: Mapping[str, Any], owner: str
) -> ResourceRecord:
    obj = copy.deepcopy(dict(manifest))
    meta = obj.setdefault("metadata", {})
    if record.namespace is not None:
        meta["namespace"] = record.namespace
    meta["labels"] = {**(meta.get("labels") or {}), DIG_LABEL: owner}
    created = await client.post(base + _collection(record), json=obj)
    if created.status_code in (200, 201):
        return replace(record, deployed_status="Applied")
    if created.status_code != 409:
        return replace(record, deployed_status="Failed", reason=f"create refused: {_message(created)}")
    for _ in range(_CAS_ATTEMPTS):  # exists: replace it by compare-and-swap, if it is ours
        current = await client.get(base + _item(record))
        if current.status_code == 404:
            again = await client.post(base + _collection(record), json=obj)
            if again.status_code in (200, 201):
                return replace(record, deployed_status="Applied")
            continue
        if current.status_code != 200:
            return replace(record, deployed_status="Failed", reason=f"read refused: {_message(current)}")
        held = current.json()
        if not _owned(held, owner):
            return replace(
                record,
                deployed_status="Failed",
                reason=f"{record.kind} {record.name} exists on the cluster and is not this group's",
            )
        meta["resourceVersion"] = (held.get("metadata") or {}).get("resourceVersion")
        updated = await client.put(base + _item(record), json=obj)
        if updated.status_code == 200:
            return replace(record, deployed_status="Applied")
        if updated.status_code != 409:
            return replace(record, deployed_status="Failed", reason=f"update refused: {_message(updated)}")
    return replace(record, deployed_status="Failed", reason="the object kept changing on the cluster")


async def _remove_one(client: httpx2.AsyncClient, base: str, record: ResourceRecord, owner: str) -> ResourceRecord:
    for _ in range(_CAS_ATTEMPTS):
        current = await client.get(base + _item(record))
        if current.status_code == 404:
            return replace(record, deployed_status="Deleted", reason="")
        if current.status_code != 200:
            return replace(record, deployed_status="Failed", reason=f"read refused: {_message(current)}")
        held = current.json()
        if not _owned(held, owner):
            return replace(record, deployed_status="Deleted", reason="replaced on the cluster by an object not ours")
        version = (held.get("metadata") or {}).get("resourceVersion") or ""
        deleted = await client.delete(base + _item(record), params={"resourceVersion": version})
        if deleted.status_code in (200, 202, 204, 404):
            return replace(record, deployed_status="Deleted", reason="")
        if deleted.status_code != 409:
            return replace(record, deployed_status="Failed", reason=f"delete refused: {_message(deleted)}")
    return replace(record, deployed_status="Failed", reason="the object kept changing on the cluster")


async def _bounded(
    work: Awaitable[ResourceRecord], record: ResourceRecord, base: str, timeout: float
) -> ResourceRecord:
    try:
        async with asyncio.timeout(timeout):
            return await work
    except TimeoutError:
        return replace(record, deployed_status="Failed", reason=f"{base} did not answer within {timeout:g} s")
    except (httpx2.HTTPError, ValueError) as e:
        return replace(record, deployed_status="Failed", reason=f"{base}: {type(e).__name__}: {e}")


Item = tuple[ResourceRecord, Mapping[str, Any]]


async def apply_all(
    items: list[Item], endpoints: Mapping[tuple[str, str], str | None], owner: str, timeout: float
) -> list[ResourceRecord]:
    """Apply each (record, manifest) on its cluster; the records come back with what happened, in order."""
    async with httpx2.AsyncClient(timeout=timeout) as client:

        async def one(record: ResourceRecord, manifest: Mapping[str, Any]) -> ResourceRecord:
            endpoint = endpoints.get((record.cluster_provider, record.cluster))
            if not endpoint:
                return replace(
                    record, deployed_status="NotApplied", reason="the cluster has no API endpoint (no kubeconfig)"
                )
            base = endpoint.rstrip("/")
            return await _bounded(_apply_one(client, base, record, manifest, owner), record, base, timeout)

        return list(await asyncio.gather(*(one(r, m) for r, m in items)))


async def remove_all(
    records: list[ResourceRecord], endpoints: Mapping[tuple[str, str], str | None], owner: str, timeout: float
) -> list[ResourceRecord]:
    """Take back every applied object; records that were never applied are left as they are."""
    async with httpx2.AsyncClient(timeout=timeout) as client:

        async def one(record: ResourceRecord) -> ResourceRecord:
            if record.deployed_status not in ("Applied", "Pending", "Failed"):
                return record
            endpoint = endpoints.get((record.cluster_provider, record.cluster))
            if not endpoint:
                return replace(record, deployed_status="Failed", reason="the cluster no longer has an API endpoint")
            base = endpoint.rstrip("/")
            return await _bounded(_remove_one(client, base, record, owner), record, base, timeout)

        return list(await asyncio.gather(*(one(r) for r in records)))


async def read_all(
    records: list[ResourceRecord], endpoints: Mapping[tuple[str, str], str | None], timeout: float
) -> dict[ResourceRecord, Obj | str | None]:
    """Each applied record's object as its member has it now (None: not there; a string: why it could not be read)."""
    async with httpx2.AsyncClient(timeout=timeout) as client:

        async def one(record: ResourceRecord) -> Obj | str | None:
            endpoint = endpoints.get((record.cluster_provider, record.cluster))
            if not endpoint:
                return "the cluster has no API endpoint"
            base = endpoint.rstrip("/")
            try:
                async with asyncio.timeout(timeout):
                    got = await client.get(base + _item(record))
            except TimeoutError:
                return f"{base} did not answer within {timeout:g} s"
            except httpx2.HTTPError as e:
                return f"{base}: {type(e).__name__}: {e}"
            if got.status_code == 404:
                return None
            if got.status_code != 200:
                return _message(got)
            body: Obj = got.json()
            return body

        found = await asyncio.gather(*(one(r) for r in records))
        return dict(zip(records, found, strict=True))
